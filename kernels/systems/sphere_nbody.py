"""n bodies on the unit sphere attracting through the γ-potential (Lee–Leok–McClamroch, Example 2).

M = diag(m) and V = −γ Σ_{i<j} (q_i·q_j)/√(1 − (q_i·q_j)²) (the Kozlov–Harin analogue of gravity),
so ∂V/∂q_i = −γ Σ_{j≠i} q_j / (1 − (q_i·q_j)²)^{3/2}.  Singular at q_i·q_j = ±1 (a collision makes
the member diverge, which is recorded, not raised).
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
    full_rotation_symmetry=True,
)
