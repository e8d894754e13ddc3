"""Magnetic dipoles (spherical compasses) pivoted on a planar grid (Lee–Leok–McClamroch, Example 5).

Each dipole is a thin rod of mass m and length l pivoted at its centre: M = diag(m l²/12).  With
μ/(4π) = 1e-7 N/A² and r_ij the vector between pivots,
V = Σ_{i<j} k_ij [q_i·q_j − 3 (q_i·r̂_ij)(q_j·r̂_ij)],  k_ij = (μ/4π) ν_i ν_j / ‖r_ij‖³,
∂V/∂q_i = Σ_{j≠i} k_ij [q_j − 3 r̂_ij (q_j·r̂_ij)].
Grid layout (the paper leaves it open): pivots in the e1–e2 plane, dipole index = row·cols + col,
pivot of (row, col) at (col·spacing, row·spacing, 0).
"""

import numpy as np

from ..errors import InvalidInput
from ..geometry import tangent_rows
from ..lanes import lane_function
from .base import SCALAR, Parameter, Preset, SystemDefinition, unit_rows

MU_OVER_4PI = 1e-7  # N/A², vacuum permeability / 4π


def _grid(value):
    rows, cols = (int(v) for v in value)
    if rows < 1 or cols < 1 or rows * cols < 2 or list(value) != [rows, cols]:
        raise InvalidInput("grid", f"must be two positive integers [rows, cols] with at least 2 dipoles, got {value!r}")
    return (rows, cols)


def _pairs(n):
    i, j = np.triu_indices(n, k=1)
    return i, j


def _coefficients(params, n):
    """Per pair (i<j, row-major): k_ij and r̂_ij, i.e. 4 numbers per pair."""
    rows, cols = params["grid"]
    spacing = params["spacing"]
    members = spacing.shape[0]
    grid_rc = np.array([(r, c) for r in range(rows) for c in range(cols)], dtype=np.float64)
    pivots = np.zeros((members, n, 3))
    pivots[:, :, 0] = grid_rc[:, 1] * spacing[:, np.newaxis]
    pivots[:, :, 1] = grid_rc[:, 0] * spacing[:, np.newaxis]
    i, j = _pairs(n)
    r = pivots[:, j] - pivots[:, i]
    dist = np.linalg.norm(r, axis=-1)
    k = MU_OVER_4PI * params["nu"][:, np.newaxis] ** 2 / dist**3
    return np.concatenate([k[:, :, np.newaxis], r / dist[:, :, np.newaxis]], axis=2).reshape(members, -1)


@lane_function
def potential(q, coef, topology, out):
    n = q.shape[0]
    for b in range(q.shape[2]):
        out[b] = 0.0
    p = 0
    for i in range(n):
        for j in range(i + 1, n):
            for b in range(q.shape[2]):
                k = coef[4 * p, b]
                r0, r1, r2 = coef[4 * p + 1, b], coef[4 * p + 2, b], coef[4 * p + 3, b]
                qiqj = q[i, 0, b] * q[j, 0, b] + q[i, 1, b] * q[j, 1, b] + q[i, 2, b] * q[j, 2, b]
                qir = q[i, 0, b] * r0 + q[i, 1, b] * r1 + q[i, 2, b] * r2
                qjr = q[j, 0, b] * r0 + q[j, 1, b] * r1 + q[j, 2, b] * r2
                out[b] += k * (qiqj - 3.0 * qir * qjr)
            p += 1


@lane_function
def gradient(q, coef, topology, out):
    n = q.shape[0]
    out[:] = 0.0
    p = 0
    for i in range(n):
        for j in range(i + 1, n):
            for b in range(q.shape[2]):
                k = coef[4 * p, b]
                r0, r1, r2 = coef[4 * p + 1, b], coef[4 * p + 2, b], coef[4 * p + 3, b]
                qir = 3.0 * (q[i, 0, b] * r0 + q[i, 1, b] * r1 + q[i, 2, b] * r2)
                qjr = 3.0 * (q[j, 0, b] * r0 + q[j, 1, b] * r1 + q[j, 2, b] * r2)
                out[i, 0, b] += k * (q[j, 0, b] - qjr * r0)
                out[i, 1, b] += k * (q[j, 1, b] - qjr * r1)
                out[i, 2, b] += k * (q[j, 2, b] - qjr * r2)
                out[j, 0, b] += k * (q[i, 0, b] - qir * r0)
                out[j, 1, b] += k * (q[i, 1, b] - qir * r1)
                out[j, 2, b] += k * (q[i, 2, b] - qir * r2)
            p += 1


def _paper():
    """Example 5: 4×4 grid, all dipoles along e1 at rest except q_16 and ω_1 (digest's exact q_16)."""
    q0 = np.tile([1.0, 0.0, 0.0], (16, 1))
    q0[15] = [np.sqrt(2) / 4, np.sqrt(2) / 4, -np.sqrt(3) / 2]
    q0 = unit_rows(q0)
    omega0 = np.zeros((16, 3))
    omega0[0] = [0.0, 0.5, 0.0]
    return Preset(
        doc="Example 5: 4×4 dipoles, m = 0.05 kg, l = 0.02 m, ν = 0.1 A·m², spacing 1.2 l = 0.024 m",
        params={"m": 0.05, "l": 0.02, "nu": 0.1, "grid": (4, 4), "spacing": 0.024},
        state={"q": q0, "omega": tangent_rows(q0, omega0)},
    )


DEFINITION = SystemDefinition(
    name="dipole_array",
    summary="magnetic dipoles pivoted on a planar grid (Example 5)",
    parameters=(
        Parameter("m", SCALAR, "kg", "mass of each dipole rod"),
        Parameter("l", SCALAR, "m", "length of each dipole rod"),
        Parameter("nu", SCALAR, "A·m²", "magnetic moment of each dipole"),
        Parameter("grid", SCALAR, "1", "[rows, cols] of the pivot grid", check="structural", parse=_grid),
        Parameter("spacing", SCALAR, "m", "distance between neighbouring pivots"),
    ),
    presets={"paper": _paper},
    diagonal_inertia=True,
    bodies=lambda params: params["grid"][0] * params["grid"][1],
    inertia=lambda params, n: np.repeat((params["m"] * params["l"] ** 2 / 12.0)[:, np.newaxis], n, axis=1),
    coefficients=_coefficients,
    potential=potential,
    gradient=gradient,
)
