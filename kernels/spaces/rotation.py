"""SO(3)ⁿ: n rigid bodies' attitudes R_i (body → space, x_space = R x_body) and body angular
velocities Ω_i (rad/s), Ṙ_i = R_i Ω̂_i (Lee–Leok–McClamroch; Massa–Vignolo §3.2, the body-frame form).

Flat kernel layout of a member (:mod:`kernels.flat`): rows 9i + 3r + c hold (R_i)_rc, rows
9n + 3i + k hold (Ω_i)_k.  Benettin's metric is the Euclidean norm of the flat difference (R entries
dimensionless, Ω in rad/s, as the (S²)ⁿ space weighs q and ω).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ..errors import InvalidInput
from ..lanes import lane_function, pull_toward
from .base import STATE_TOLERANCE, Diagnostic, Sampler, StateSpace, Variable


@njit(cache=True)
def _exp_right(rotations, xi, out):
    """out[m, i] = R[m, i] exp(ξ̂[m, i]) (Rodrigues' formula), for (members, n, 3, 3) and ξ (members, n, 3).
    A scalar loop per member, so a member's bits never depend on which others share the call."""
    for m in range(xi.shape[0]):
        for i in range(xi.shape[1]):
            x0, x1, x2 = xi[m, i, 0], xi[m, i, 1], xi[m, i, 2]
            angle = np.sqrt(x0 * x0 + x1 * x1 + x2 * x2)
            if angle > 0.0:
                a = np.sin(angle) / angle
                b = (1.0 - np.cos(angle)) / (angle * angle)
            else:
                a, b = 1.0, 0.5
            # exp(ξ̂) = I + a ξ̂ + b ξ̂²
            k = np.array([[0.0, -x2, x1], [x2, 0.0, -x0], [-x1, x0, 0.0]])
            k2 = k @ k
            e = np.eye(3) + a * k + b * k2
            for r in range(3):
                for c in range(3):
                    total = 0.0
                    for j in range(3):
                        total += rotations[m, i, r, j] * e[j, c]
                    out[m, i, r, c] = total


def exp_right(rotations, xi) -> np.ndarray:
    """R exp(ξ̂) for R (members, n, 3, 3) and body-frame rotation vectors ξ (members, n, 3) (rad)."""
    rotations = np.ascontiguousarray(rotations, dtype=np.float64)
    xi = np.ascontiguousarray(np.broadcast_to(xi, rotations.shape[:-1]), dtype=np.float64)
    out = np.empty(rotations.shape)
    _exp_right(rotations, xi, out)
    return out


def orthogonality_error(rotations) -> np.ndarray:
    """max over bodies of max |RᵀR − I| for (..., n, 3, 3) → (...)."""
    rotations = np.asarray(rotations, dtype=np.float64)
    gram = np.einsum("...ki,...kj->...ij", rotations, rotations) - np.eye(3)
    return np.abs(gram).max(axis=(-3, -2, -1))


def rotations_from_quaternions(quaternions) -> np.ndarray:
    """Rotation matrices (..., 3, 3) of quaternions (..., 4) = (w, x, y, z), normalised first."""
    quaternions = np.asarray(quaternions, dtype=np.float64)
    w, x, y, z = np.moveaxis(quaternions / np.linalg.norm(quaternions, axis=-1, keepdims=True), -1, 0)
    return np.stack([
        np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)], -1),
        np.stack([2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)], -1),
        np.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], -1),
    ], -2)


def _uniform(system, n, member_ids, seed, options, normals, integrate):
    """Haar-random attitudes (normalised Gaussian quaternions) and Gaussian Ω of std ``omega_scale``."""
    draws = normals(7 * n).reshape(-1, n, 7)
    return {"R": rotations_from_quaternions(draws[..., :4]), "Omega": options["omega_scale"] * draws[..., 4:]}


@lane_function
def orthogonality_lanes(x, n, coef, topology, work, out):
    """out[0, b] = max over bodies of max |RᵀR − I| of lane b (the ``orthogonality_error`` diagnostic)."""
    lanes = x.shape[1]
    for b in range(lanes):
        out[0, b] = 0.0
    for i in range(n):
        base = 9 * i
        for p in range(3):
            for q in range(p, 3):
                for b in range(lanes):
                    dot = (x[base + p, b] * x[base + q, b] + x[base + 3 + p, b] * x[base + 3 + q, b]
                           + x[base + 6 + p, b] * x[base + 6 + q, b])
                    out[0, b] = max(out[0, b], abs(dot - (1.0 if p == q else 0.0)))


@lane_function
def pull_back_lanes(x, shadow, n, topology, factor):
    """shadow ← x + factor (shadow − x) per lane, then each R_i put back on SO(3) by Gram–Schmidt of its
    rows (third row = first × second, so det = +1): Benettin's renormalisation on SO(3)ⁿ × R³ⁿ."""
    lanes = x.shape[1]
    pull_toward(x, shadow, factor)
    for i in range(n):
        base = 9 * i
        for b in range(lanes):
            a0, a1, a2 = shadow[base, b], shadow[base + 1, b], shadow[base + 2, b]
            norm = np.sqrt(a0 * a0 + a1 * a1 + a2 * a2)
            a0, a1, a2 = a0 / norm, a1 / norm, a2 / norm
            c0, c1, c2 = shadow[base + 3, b], shadow[base + 4, b], shadow[base + 5, b]
            along = a0 * c0 + a1 * c1 + a2 * c2
            c0, c1, c2 = c0 - along * a0, c1 - along * a1, c2 - along * a2
            norm = np.sqrt(c0 * c0 + c1 * c1 + c2 * c2)
            c0, c1, c2 = c0 / norm, c1 / norm, c2 / norm
            shadow[base, b], shadow[base + 1, b], shadow[base + 2, b] = a0, a1, a2
            shadow[base + 3, b], shadow[base + 4, b], shadow[base + 5, b] = c0, c1, c2
            shadow[base + 6, b] = a1 * c2 - a2 * c1
            shadow[base + 7, b] = a2 * c0 - a0 * c2
            shadow[base + 8, b] = a0 * c1 - a1 * c0


def project_rotations(rotations: np.ndarray) -> np.ndarray:
    """Attitudes (members, n, 3, 3) put back on SO(3) by the polar decomposition, refused (naming ``R``)
    when one is off by more than STATE_TOLERANCE or is a reflection."""
    error = np.abs(np.einsum("...ki,...kj->...ij", rotations, rotations) - np.eye(3)).max(axis=(-2, -1))
    worst = np.unravel_index(np.argmax(error), error.shape)
    if error[worst] > STATE_TOLERANCE:
        raise InvalidInput("R", f"R[{worst[0]}, {worst[1]}] is off SO(3) by max |RᵀR − I| = {error[worst]:.3g}; "
                           f"every R_i must be a rotation (within {STATE_TOLERANCE:g}, which is "
                           "re-orthonormalised by the polar decomposition)")
    determinant = np.linalg.det(rotations)
    if np.any(determinant < 0):
        worst = np.unravel_index(np.argmin(determinant), determinant.shape)
        raise InvalidInput("R", f"R[{worst[0]}, {worst[1]}] has det {determinant[worst]:.3g}; a rotation has det +1")
    u, _, vt = np.linalg.svd(rotations)
    return u @ vt


#: the attitude constraint's diagnostic, computed by :func:`orthogonality_lanes`
ORTHOGONALITY = Diagnostic("orthogonality_error", "1", "max over bodies of max |R^T R - I|")


class RotationSpace(StateSpace):
    """SO(3)ⁿ × R³ⁿ (see the module docstring)."""

    def project(self, state: dict) -> dict:
        return {"R": project_rotations(state["R"]), "Omega": state["Omega"]}

    def normal_count(self, n: int) -> int:
        return 6 * n

    def perturb(self, state: dict, normals: np.ndarray, scale: float) -> dict:
        """R_i exp(ξ̂_i) with a tangent Gaussian ξ_i (body frame, std ``scale`` rad) and Ω_i + δ_i (std
        ``scale`` rad/s)."""
        n = state["R"].shape[0]
        draws = scale * np.asarray(normals).reshape(-1, 2, n, 3)
        members = draws.shape[0]
        rotations = np.broadcast_to(state["R"], (members,) + state["R"].shape)
        return {"R": exp_right(rotations, draws[:, 0]), "Omega": state["Omega"] + draws[:, 1]}

    def displace(self, state: dict, directions: np.ndarray, d0: float) -> dict:
        """Shadows at R_i exp(s ξ̂_i), Ω_i + s δ_i, with s such that the tangent vector (R ξ̂, δ) has
        length d0 in the flat metric (‖R ξ̂‖_F = √2 ‖ξ‖)."""
        n = state["R"].shape[1]
        draws = np.asarray(directions, dtype=np.float64).reshape(-1, 2, n, 3)
        length = np.sqrt(np.sum(2.0 * draws[:, 0] ** 2 + draws[:, 1] ** 2, axis=(-2, -1)))
        s = (d0 / length)[:, np.newaxis, np.newaxis]
        return {"R": exp_right(state["R"], s * draws[:, 0]), "Omega": state["Omega"] + s * draws[:, 1]}


ROTATION = RotationSpace(
    name="rotation",
    summary="SO(3)ⁿ rigid-body attitudes R (body → space) and body angular velocities Ω",
    variables=(
        Variable("R", lambda n: (n, 3, 3), ("body", "row", "col"), "1", "attitude of each body (body to space)"),
        Variable("Omega", lambda n: (n, 3), ("body", "xyz"), "rad/s", "body-frame angular velocity of each body"),
    ),
    diagnostics=(ORTHOGONALITY,),
    samplers={"uniform": Sampler("uniform", "Haar-random attitudes, Gaussian Omega of std omega_scale (rad/s)", {},
                                 _uniform)},
    layout="flat",
    lane={"diagnostics": orthogonality_lanes, "pull_back": pull_back_lanes},
)
