"""n bodies on the unit sphere attracting through the γ-potential (Lee–Leok–McClamroch, Example 2).

M = diag(m) and V = −γ Σ_{i<j} (q_i·q_j)/√(1 − (q_i·q_j)²) (the Kozlov–Harin analogue of gravity),
so ∂V/∂q_i = −γ Σ_{j≠i} q_j / (1 − (q_i·q_j)²)^{3/2}.  Singular at q_i·q_j = ±1 (a collision makes
the member diverge, which is recorded, not raised).

Close encounters (:func:`encounter`): a pair's distance from the singularities is s_ij = √(1 − (q_i·q_j)²)
= sin θ_ij (the chord near a collision, θ → 0, and near the antipode, θ → π).  There V ≈ ∓γ/s, so the
pair moves like a Kepler pair of reduced mass μ_ij = m_i m_j/(m_i + m_j) in the potential −γ/s, on the
time scale τ_ij = √(μ_ij s_ij³/γ) (s).
"""

import numpy as np

from ..geometry import tangent_rows
from ..lanes import lane_function
from .base import PER_BODY, SCALAR, Parameter, Preset, SystemDefinition, unit_rows


@lane_function
def potential(q, coef, topology, out):
    n = q.shape[0]
    for b in range(q.shape[2]):
        out[b] = 0.0
    for i in range(n):
        for j in range(i + 1, n):
            for b in range(q.shape[2]):
                c = q[i, 0, b] * q[j, 0, b] + q[i, 1, b] * q[j, 1, b] + q[i, 2, b] * q[j, 2, b]
                out[b] -= coef[0, b] * c / np.sqrt(1.0 - c * c)


@lane_function
def gradient(q, coef, topology, out):
    n = q.shape[0]
    out[:] = 0.0
    for i in range(n):
        for j in range(i + 1, n):
            for b in range(q.shape[2]):
                c = q[i, 0, b] * q[j, 0, b] + q[i, 1, b] * q[j, 1, b] + q[i, 2, b] * q[j, 2, b]
                s = 1.0 - c * c
                f = coef[0, b] / (s * np.sqrt(s))
                out[i, 0, b] -= f * q[j, 0, b]
                out[i, 1, b] -= f * q[j, 1, b]
                out[i, 2, b] -= f * q[j, 2, b]
                out[j, 0, b] -= f * q[i, 0, b]
                out[j, 1, b] -= f * q[i, 1, b]
                out[j, 2, b] -= f * q[i, 2, b]


@lane_function
def encounter(q, omega, mass_diag, coef, topology, out):
    """Per lane: out[0] = min over pairs of s_ij = √(1 − (q_i·q_j)²) (the separation from the potential's
    singularities), out[1] = the shortest pair time scale τ = √(μ_ij s_ij³/γ) (s) and out[2] its
    logarithmic rate d ln τ/dt = (3/2) ṡ/s (1/s) with ṡ = −c ċ/s, c = q_i·q_j, ċ = q̇_i·q_j + q_i·q̇_j,
    q̇ = ω × q."""
    n = q.shape[0]
    for b in range(q.shape[2]):
        out[0, b] = np.inf
        out[1, b] = np.inf
        out[2, b] = 0.0
    for i in range(n):
        for j in range(i + 1, n):
            for b in range(q.shape[2]):
                c = q[i, 0, b] * q[j, 0, b] + q[i, 1, b] * q[j, 1, b] + q[i, 2, b] * q[j, 2, b]
                s = np.sqrt(max(1.0 - c * c, 0.0))
                out[0, b] = min(out[0, b], s)
                mu = mass_diag[i, b] * mass_diag[j, b] / (mass_diag[i, b] + mass_diag[j, b])
                tau = np.sqrt(mu * s * s * s / coef[0, b])
                if tau < out[1, b]:
                    # ċ = (ω_i × q_i)·q_j + q_i·(ω_j × q_j) = ω_i·(q_i × q_j) − ω_j·(q_i × q_j)
                    x0 = q[i, 1, b] * q[j, 2, b] - q[i, 2, b] * q[j, 1, b]
                    x1 = q[i, 2, b] * q[j, 0, b] - q[i, 0, b] * q[j, 2, b]
                    x2 = q[i, 0, b] * q[j, 1, b] - q[i, 1, b] * q[j, 0, b]
                    cdot = ((omega[i, 0, b] - omega[j, 0, b]) * x0 + (omega[i, 1, b] - omega[j, 1, b]) * x1
                            + (omega[i, 2, b] - omega[j, 2, b]) * x2)
                    out[1, b] = tau
                    out[2, b] = -1.5 * c * cdot / (s * s)


def _paper():
    q0 = unit_rows([[0.0, -1.0, 0.0], [0.0, 0.0, 1.0], [-1.0, 0.0, 0.0]])
    omega0 = tangent_rows(q0, [[0.0, 0.0, -1.1], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    return Preset(
        doc="Example 2: three bodies, m = 1, γ = 1 (run T = 10 s with h = 1e-3 and 1e-4)",
        params={"m": [1.0, 1.0, 1.0], "gamma": 1.0},
        state={"q": q0, "omega": omega0},
    )


DEFINITION = SystemDefinition(
    name="sphere_nbody",
    summary="n bodies on S² with the γ-potential (Example 2)",
    parameters=(
        Parameter("m", PER_BODY, "kg", "mass of each body"),
        Parameter("gamma", SCALAR, "J", "strength γ of the pair potential", default=1.0, check="finite"),
    ),
    presets={"paper": _paper},
    diagonal_inertia=True,
    bodies=lambda params: params["m"].shape[-1],
    inertia=lambda params, n: params["m"].copy(),
    coefficients=lambda params, n: params["gamma"][:, np.newaxis].copy(),
    potential=potential,
    gradient=gradient,
    encounter=encounter,
    full_rotation_symmetry=True,
)
