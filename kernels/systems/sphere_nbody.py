"""n bodies on the unit sphere attracting through the γ-potential (Lee–Leok–McClamroch, Example 2).

M = diag(m) and V = −γ Σ_{i<j} (q_i·q_j)/√(1 − (q_i·q_j)²) (the Kozlov–Harin analogue of gravity),
singular at q_i·q_j = ±1 (a collision makes the member diverge, which is recorded, not raised).

Separation.  A pair's distance from the singularities is s_ij = √(1 − (q_i·q_j)²) = sin θ_ij (the chord
near a collision, θ → 0, and near the antipode, θ → π).  It is computed as s_ij = ‖q_i × q_j‖, equal on
the sphere, because 1 − c² cancels catastrophically when c = q_i·q_j → ±1: at s = 4e-7 (reached by the
paper's own state near t = 100 s) 1 − c² carries a relative error of 1e-3 from the rounding of c alone,
which the force γ/s³ turns into kicks of the wrong size, while each component of q_i × q_j is a
difference of products accurate to 1e-16 absolute, 3e-10 relative there.  So the potential is
extended off the sphere as V = −γ Σ c_ij/‖x_ij‖ with x_ij = q_i × q_j, and its gradient is

    ∂V/∂q_i = −γ Σ_{j≠i} [q_j/‖x_ij‖ − c_ij (q_j × x_ij)/‖x_ij‖³] = −γ Σ_{j≠i} ‖q_j‖² (‖q_i‖² q_j − c_ij q_i)/‖x_ij‖³

(from ∂‖x‖²/∂q_i = 2 q_j × x and ‖x‖² + c² = ‖q_i‖²‖q_j‖²).  :func:`gradient` evaluates it with
‖q_i‖ = ‖q_j‖ = 1, as −γ Σ (q_j − c q_i)/‖x‖³: exact on the sphere, where every integrator evaluates it
(the explicit steps keep ‖q‖ − 1 at rounding), and the tangential part of the digest's
−γ Σ q_j/(1 − c²)^{3/2} (digest_001_examples, Example 2): the same moment q_i × ∂V/∂q_i.

Close encounters (:func:`encounter`): near a singularity V ≈ ∓γ/s, so the pair moves like a Kepler
pair of reduced mass μ_ij = m_i m_j/(m_i + m_j) in the potential −γ/s, on the time scale
τ_ij = √(μ_ij s_ij³/γ) (s).
"""

import numpy as np

from ..geometry import tangent_rows
from ..lanes import lane_function
from .base import PER_BODY, SCALAR, Parameter, Preset, SystemDefinition, unit_rows


@lane_function
def pair_cross(q, i, j, b):
    """(x, c) for bodies i, j of lane b: x = q_i × q_j (its norm is the pair's separation) and c = q_i·q_j."""
    x0 = q[i, 1, b] * q[j, 2, b] - q[i, 2, b] * q[j, 1, b]
    x1 = q[i, 2, b] * q[j, 0, b] - q[i, 0, b] * q[j, 2, b]
    x2 = q[i, 0, b] * q[j, 1, b] - q[i, 1, b] * q[j, 0, b]
    c = q[i, 0, b] * q[j, 0, b] + q[i, 1, b] * q[j, 1, b] + q[i, 2, b] * q[j, 2, b]
    return x0, x1, x2, c


@lane_function
def potential(q, coef, topology, out):
    n = q.shape[0]
    for b in range(q.shape[2]):
        out[b] = 0.0
    for i in range(n):
        for j in range(i + 1, n):
            for b in range(q.shape[2]):
                x0, x1, x2, c = pair_cross(q, i, j, b)
                out[b] -= coef[0, b] * c / np.sqrt(x0 * x0 + x1 * x1 + x2 * x2)


@lane_function
def gradient(q, coef, topology, out):
    n = q.shape[0]
    out[:] = 0.0
    for i in range(n):
        for j in range(i + 1, n):
            for b in range(q.shape[2]):
                x0, x1, x2, c = pair_cross(q, i, j, b)
                inverse = 1.0 / np.sqrt(x0 * x0 + x1 * x1 + x2 * x2)
                f = coef[0, b] * inverse * inverse * inverse
                # on the sphere ∂V/∂q_i = −γ (q_j − c q_i)/‖x‖³ and ∂V/∂q_j = −γ (q_i − c q_j)/‖x‖³ (module docstring)
                out[i, 0, b] -= f * (q[j, 0, b] - c * q[i, 0, b])
                out[i, 1, b] -= f * (q[j, 1, b] - c * q[i, 1, b])
                out[i, 2, b] -= f * (q[j, 2, b] - c * q[i, 2, b])
                out[j, 0, b] -= f * (q[i, 0, b] - c * q[j, 0, b])
                out[j, 1, b] -= f * (q[i, 1, b] - c * q[j, 1, b])
                out[j, 2, b] -= f * (q[i, 2, b] - c * q[j, 2, b])


@lane_function
def encounter(q, omega, mass_diag, coef, topology, out):
    """Per lane: out[0] = min over pairs of the separation s_ij = ‖q_i × q_j‖ from the potential's
    singularities, out[1] = the shortest pair time scale τ = √(μ_ij s_ij³/γ) (s) and out[2] its
    logarithmic rate d ln τ/dt = (3/2) ṡ/s (1/s) with s ṡ = −c ċ, c = q_i·q_j,
    ċ = q̇_i·q_j + q_i·q̇_j, q̇ = ω × q."""
    n = q.shape[0]
    for b in range(q.shape[2]):
        out[0, b] = np.inf
        out[1, b] = np.inf
        out[2, b] = 0.0
    for i in range(n):
        for j in range(i + 1, n):
            for b in range(q.shape[2]):
                x0, x1, x2, c = pair_cross(q, i, j, b)
                s2 = x0 * x0 + x1 * x1 + x2 * x2
                s = np.sqrt(s2)
                out[0, b] = min(out[0, b], s)
                mu = mass_diag[i, b] * mass_diag[j, b] / (mass_diag[i, b] + mass_diag[j, b])
                tau = np.sqrt(mu * s2 * s / coef[0, b])
                if tau < out[1, b]:
                    # ċ = (ω_i × q_i)·q_j + q_i·(ω_j × q_j) = ω_i·(q_i × q_j) − ω_j·(q_i × q_j)
                    cdot = ((omega[i, 0, b] - omega[j, 0, b]) * x0 + (omega[i, 1, b] - omega[j, 1, b]) * x1
                            + (omega[i, 2, b] - omega[j, 2, b]) * x2)
                    out[1, b] = tau
                    out[2, b] = -1.5 * c * cdot / s2


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
    revision=2,  # 2: separations as ‖q_i × q_j‖ instead of √(1 − c²)
)
