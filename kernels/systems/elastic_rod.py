"""Pure bending of an elastic rod: n rigid elements clamped at a wall (Lee–Leok–McClamroch, Example 4).

The rod of mass m and length l is split into n+1 equal elements (m_e = m/(n+1), l_e = l/(n+1));
element 0 is clamped along the fixed direction q_0 and elements 1..n move.  In units of m_e l_e²:
  "paper"   (as printed in (36)):   M_ii = ⅓ + n − i,  M_ij = (n − max(i,j) + 1)/2;
  "derived" (kinetic energy of rods with centres at ½ l_e):  M_ij = n − max(i,j) + ½ for i ≠ j.
V = Σ_{i=1}^n [ −m_e g (Σ_{j<i} l_e q_j + ½ l_e q_i)·e + ½ κ (1 − q_{i−1}·q_i)² ], so
∂V/∂q_j = −g m_e l_e (½ + n − j) e − κ(1 − q_{j−1}·q_j) q_{j−1} − κ(1 − q_j·q_{j+1}) q_{j+1} (last for j < n).
"""

import numpy as np

from ..errors import InvalidInput
from ..geometry import tangent_rows
from ..lanes import lane_function
from .base import SCALAR, VECTOR3, Parameter, Preset, SystemDefinition, gravity_parameters


def _element_count(value):
    n = int(value)
    if n != value or n < 1:
        raise InvalidInput("n", f"must be an integer >= 1 (moving elements), got {value!r}")
    return n


def _inertia_form(value):
    if value not in ("paper", "derived"):
        raise InvalidInput("inertia", f"must be 'paper' or 'derived', got {value!r}")
    return value


def _inertia(params, n):
    unit = (params["m"] / (n + 1)) * (params["l"] / (n + 1)) ** 2
    index = np.arange(1, n + 1)
    later = n - np.maximum.outer(index, index)
    pattern = (later + 1) / 2.0 if params["inertia"] == "paper" else later + 0.5
    np.fill_diagonal(pattern, 1.0 / 3.0 + n - index)
    return unit[:, np.newaxis, np.newaxis] * pattern


def _coefficients(params, n):
    """[c_j = g m_e l_e (½ + n − j) (n), e (3), κ, q_0 (3)]."""
    weight = params["g"] * (params["m"] / (n + 1)) * (params["l"] / (n + 1))
    c = weight[:, np.newaxis] * (0.5 + n - np.arange(1, n + 1))
    return np.concatenate([c, params["gravity_direction"], params["kappa"][:, np.newaxis], params["q0"]], axis=1)


@lane_function
def _bend(q, coef, n, j, b):
    """1 − q_{j−1}·q_j with q_{−1} the clamp direction (bodies are 0-based here)."""
    if j == 0:
        return 1.0 - (coef[n + 4, b] * q[0, 0, b] + coef[n + 5, b] * q[0, 1, b] + coef[n + 6, b] * q[0, 2, b])
    return 1.0 - (q[j - 1, 0, b] * q[j, 0, b] + q[j - 1, 1, b] * q[j, 1, b] + q[j - 1, 2, b] * q[j, 2, b])


@lane_function
def potential(q, coef, topology, out):
    n = q.shape[0]
    for b in range(q.shape[2]):
        out[b] = 0.0
        for j in range(n):
            out[b] -= coef[j, b] * (coef[n, b] * q[j, 0, b] + coef[n + 1, b] * q[j, 1, b] + coef[n + 2, b] * q[j, 2, b])
            bend = _bend(q, coef, n, j, b)
            out[b] += 0.5 * coef[n + 3, b] * bend * bend


@lane_function
def gradient(q, coef, topology, out):
    n = q.shape[0]
    for b in range(q.shape[2]):
        kappa = coef[n + 3, b]
        for j in range(n):
            for k in range(3):
                out[j, k, b] = -coef[j, b] * coef[n + k, b]
        for j in range(n):
            # spring between element j−1 (or the clamp) and element j acts on both
            s = kappa * _bend(q, coef, n, j, b)
            for k in range(3):
                previous = coef[n + 4 + k, b] if j == 0 else q[j - 1, k, b]
                out[j, k, b] -= s * previous
                if j > 0:
                    out[j - 1, k, b] -= s * q[j, k, b]


def _paper():
    """Example 4: rod along e1 (digest: e1 = [1,0,0], q_0 = e1), impact ω_5 = [0, 0, 10] rad/s."""
    n = 10
    q0 = np.tile([1.0, 0.0, 0.0], (n, 1))
    omega0 = np.zeros((n, 3))
    omega0[4] = [0.0, 0.0, 10.0]
    return Preset(
        doc="Example 4: n = 10, m = 55 g, l = 1.1 m, κ = 1000 N·m, printed inertia (run h = 1e-4 s, T = 3 s)",
        params={"n": n, "m": 0.055, "l": 1.1, "kappa": 1000.0, "q0": (1.0, 0.0, 0.0), "inertia": "paper"},
        state={"q": q0, "omega": tangent_rows(q0, omega0)},
    )


DEFINITION = SystemDefinition(
    name="elastic_rod",
    summary="elastic rod of rigid elements with bending springs, clamped at a wall (Example 4)",
    parameters=(
        Parameter("n", SCALAR, "1", "number of moving elements", default=10, check="structural", parse=_element_count),
        Parameter("m", SCALAR, "kg", "total mass of the rod (n+1 elements)"),
        Parameter("l", SCALAR, "m", "total length of the rod (n+1 elements)"),
        Parameter("kappa", SCALAR, "N·m", "bending stiffness between neighbouring elements", check="nonnegative"),
        *gravity_parameters(),
        Parameter("q0", VECTOR3, "1", "direction of the clamped element 0", default=(1.0, 0.0, 0.0), check="direction"),
        Parameter("inertia", SCALAR, "1", "'paper' (M as printed in (36)) or 'derived'", default="paper",
                  check="structural", parse=_inertia_form),
    ),
    presets={"paper": _paper},
    diagonal_inertia=False,
    bodies=lambda params: params["n"],
    inertia=_inertia,
    coefficients=_coefficients,
    potential=potential,
    gradient=gradient,
)
