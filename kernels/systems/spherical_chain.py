"""n-link spherical pendulum chain in a uniform gravity field (Lee–Leok–McClamroch §3.5, Example 1).

q_i points from joint i to joint i+1; link i has length l_i and a point mass m_i at its end.
M_ij = (Σ_{k ≥ max(i,j)} m_k) l_i l_j  and  V = −Σ_i (Σ_{k≥i} m_k) g l_i e·q_i,
where e is the unit direction of gravity (the paper's e3 = [0, 0, 1], "the direction of gravity").
"""

import numpy as np

from ..geometry import tangent_rows
from ..lanes import lane_function
from .base import PER_BODY, Parameter, Preset, SystemDefinition, gravity_parameters, unit_rows


def _tail_masses(params):
    """S_i = Σ_{k≥i} m_k, (members, n)."""
    return np.cumsum(params["m"][:, ::-1], axis=1)[:, ::-1]


def _inertia(params, n):
    tail = _tail_masses(params)
    heavier = tail[:, np.maximum.outer(np.arange(n), np.arange(n))]
    lengths = params["l"]
    return heavier * lengths[:, :, np.newaxis] * lengths[:, np.newaxis, :]


def _coefficients(params, n):
    """[c_1..c_n, e_x, e_y, e_z] with c_i = S_i g l_i (N·m), so ∂V/∂q_i = −c_i e."""
    c = _tail_masses(params) * params["g"][:, np.newaxis] * params["l"]
    return np.concatenate([c, params["gravity_direction"]], axis=1)


@lane_function
def potential(q, coef, topology, out):
    n = q.shape[0]
    for b in range(q.shape[2]):
        out[b] = 0.0
    for i in range(n):
        for b in range(q.shape[2]):
            out[b] -= coef[i, b] * (coef[n, b] * q[i, 0, b] + coef[n + 1, b] * q[i, 1, b] + coef[n + 2, b] * q[i, 2, b])


@lane_function
def gradient(q, coef, topology, out):
    n = q.shape[0]
    for i in range(n):
        for k in range(3):
            for b in range(q.shape[2]):
                out[i, k, b] = -coef[i, b] * coef[n + k, b]


def _paper():
    """Example 1, double spherical pendulum, with the digest's exact initial condition."""
    q0 = unit_rows([[np.sqrt(3) / 2, 0.0, 0.5], [0.0, 0.0, 1.0]])
    omega0 = tangent_rows(q0, [[-np.sqrt(3) / 4, 0.0, 0.75], [0.0, 1.0, 0.0]])
    return Preset(
        doc="Example 1: double spherical pendulum, m = 1 kg, l = 9.81 m, g = 9.81 m/s² (run h = 0.01 s, T = 100 s)",
        params={"m": [1.0, 1.0], "l": [9.81, 9.81], "g": 9.81},
        state={"q": q0, "omega": omega0},
    )


DEFINITION = SystemDefinition(
    name="spherical_chain",
    summary="n-link spherical pendulum chain under gravity (Example 1)",
    parameters=(
        Parameter("m", PER_BODY, "kg", "point mass at the end of each link"),
        Parameter("l", PER_BODY, "m", "length of each link"),
        *gravity_parameters(),
    ),
    presets={"paper": _paper},
    diagonal_inertia=False,
    bodies=lambda params: params["m"].shape[-1],
    inertia=_inertia,
    coefficients=_coefficients,
    potential=potential,
    gradient=gradient,
    symmetry_axis=lambda params: params["gravity_direction"],
)
