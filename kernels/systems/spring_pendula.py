"""Spherical pendula with pivots in a plane, coupled by springs at the link midpoints (Example 3).

M = diag(m_i l_i²).  With P_i the pivot of pendulum i, r_ij = P_j − P_i and
d_ij = r_ij + ½ l_j q_j − ½ l_i q_i (spring vector between midpoints),
V = −Σ_i m_i g l_i e·q_i + Σ_{(i,j) springs} ½ κ_ij (‖d_ij‖ − ‖r_ij‖)²   (rest length ‖r_ij‖),
∂V/∂q_j gets +½ l_j u_ij and ∂V/∂q_i gets −½ l_i u_ij with u_ij = κ_ij (1 − ‖r_ij‖/‖d_ij‖) d_ij.
"""

import numpy as np

from ..errors import InvalidInput
from ..geometry import tangent_rows
from ..lanes import lane_function
from .base import (PER_BODY, PER_BODY_VECTOR3, PER_SPRING, SCALAR, Parameter,
                   Preset, SystemDefinition, gravity_parameters, unit_rows)

SPRING_COEFFICIENTS = 5  # κ, r_ij (3), ‖r_ij‖


def _springs(value):
    pairs = np.array(value, dtype=np.int64)
    if pairs.ndim != 2 or pairs.shape[1] != 2 or len(pairs) < 1:
        raise InvalidInput("springs", f"must be a list of [i, j] body index pairs, got {value!r}")
    if np.any(pairs < 0) or np.any(pairs[:, 0] == pairs[:, 1]):
        raise InvalidInput("springs", "indices must be >= 0 and each spring must join two different bodies")
    return pairs


def _check_springs(params, n):
    pairs = params["springs"]
    if pairs.max() >= n:
        raise InvalidInput("springs", f"body index {pairs.max()} out of range for {n} bodies")
    if params["kappa"].shape[1] != len(pairs):
        raise InvalidInput("kappa", f"needs one stiffness per spring ({len(pairs)}), got {params['kappa'].shape[1]}")
    return pairs


def _coefficients(params, n):
    """[m_i g l_i (n), e (3), l_i (n), then per spring κ, r_ij, ‖r_ij‖]."""
    pairs = _check_springs(params, n)
    members = params["g"].shape[0]
    r = params["pivots"][:, pairs[:, 1]] - params["pivots"][:, pairs[:, 0]]
    spring = np.concatenate([params["kappa"][:, :, np.newaxis], r, np.linalg.norm(r, axis=-1)[:, :, np.newaxis]], axis=2)
    weight = params["m"] * params["g"][:, np.newaxis] * params["l"]
    return np.concatenate([weight, params["gravity_direction"], params["l"], spring.reshape(members, -1)], axis=1)


def _topology(params, n):
    return _check_springs(params, n).reshape(-1).copy()


@lane_function
def _spring_vector(q, coef, n, s, i, j, b):
    base = 2 * n + 3 + SPRING_COEFFICIENTS * s
    half_li = 0.5 * coef[n + 3 + i, b]
    half_lj = 0.5 * coef[n + 3 + j, b]
    d0 = coef[base + 1, b] + half_lj * q[j, 0, b] - half_li * q[i, 0, b]
    d1 = coef[base + 2, b] + half_lj * q[j, 1, b] - half_li * q[i, 1, b]
    d2 = coef[base + 3, b] + half_lj * q[j, 2, b] - half_li * q[i, 2, b]
    return d0, d1, d2, coef[base, b], coef[base + 4, b]


@lane_function
def potential(q, coef, topology, out):
    n = q.shape[0]
    for b in range(q.shape[2]):
        out[b] = 0.0
        for i in range(n):
            out[b] -= coef[i, b] * (coef[n, b] * q[i, 0, b] + coef[n + 1, b] * q[i, 1, b] + coef[n + 2, b] * q[i, 2, b])
        for s in range(topology.shape[0] // 2):
            d0, d1, d2, kappa, rest = _spring_vector(q, coef, n, s, topology[2 * s], topology[2 * s + 1], b)
            stretch = np.sqrt(d0 * d0 + d1 * d1 + d2 * d2) - rest
            out[b] += 0.5 * kappa * stretch * stretch


@lane_function
def gradient(q, coef, topology, out):
    n = q.shape[0]
    for b in range(q.shape[2]):
        for i in range(n):
            for k in range(3):
                out[i, k, b] = -coef[i, b] * coef[n + k, b]
        for s in range(topology.shape[0] // 2):
            i = topology[2 * s]
            j = topology[2 * s + 1]
            d0, d1, d2, kappa, rest = _spring_vector(q, coef, n, s, i, j, b)
            u = kappa * (1.0 - rest / np.sqrt(d0 * d0 + d1 * d1 + d2 * d2))
            half_li = 0.5 * coef[n + 3 + i, b]
            half_lj = 0.5 * coef[n + 3 + j, b]
            out[j, 0, b] += half_lj * u * d0
            out[j, 1, b] += half_lj * u * d1
            out[j, 2, b] += half_lj * u * d2
            out[i, 0, b] -= half_li * u * d0
            out[i, 1, b] -= half_li * u * d1
            out[i, 2, b] -= half_li * u * d2


def _paper():
    """Example 3 with the digest's corrections: e1 = [1,0,0], κ = 10/20/30/40 N/m in the order of Ξ."""
    side = 0.1
    q0 = np.tile([0.0, 0.0, 1.0], (4, 1))
    q0[2] = [np.sin(np.pi / 6) * np.cos(np.pi / 9), np.sin(np.pi / 6) * np.sin(np.pi / 9), np.cos(np.pi / 6)]
    q0 = unit_rows(q0)
    omega0 = np.zeros((4, 3))
    omega0[0] = [-10.0, 4.0, 0.0]
    return Preset(
        doc="Example 3: four pendula, m = 0.1 kg, l = 0.1 m, pivots on a 0.1 m square, springs 1-2-3-4-1",
        params={
            "m": [0.1] * 4,
            "l": [side] * 4,
            "pivots": [[0, 0, 0], [side, 0, 0], [side, -side, 0], [0, -side, 0]],
            "springs": [[0, 1], [1, 2], [2, 3], [3, 0]],
            "kappa": [10.0, 20.0, 30.0, 40.0],
        },
        state={"q": q0, "omega": tangent_rows(q0, omega0)},
    )


DEFINITION = SystemDefinition(
    name="spring_pendula",
    summary="spherical pendula coupled by springs at link midpoints (Example 3)",
    parameters=(
        Parameter("m", PER_BODY, "kg", "pendulum mass"),
        Parameter("l", PER_BODY, "m", "pendulum length"),
        *gravity_parameters(),
        Parameter("pivots", PER_BODY_VECTOR3, "m", "pivot position of each pendulum", check="finite"),
        Parameter("springs", SCALAR, "1", "list of [i, j] body pairs joined by a spring (0-based)",
                  check="structural", parse=_springs),
        Parameter("kappa", PER_SPRING, "N/m", "stiffness of each spring", check="nonnegative"),
    ),
    presets={"paper": _paper},
    diagonal_inertia=True,
    bodies=lambda params: params["m"].shape[-1],
    inertia=lambda params, n: params["m"] * params["l"] ** 2,
    coefficients=_coefficients,
    potential=potential,
    gradient=gradient,
    topology=_topology,
)
