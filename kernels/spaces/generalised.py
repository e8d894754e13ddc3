"""Generalised coordinates and speeds of a multibody tree: q (n,) and u (n,) with q̇ = B(q) u.

Parsa's Kane equations (digest_003 §2–3, eq. (8)) in joint coordinates.  q_j is the angle (rad) of a
revolute joint or the travel (m) of a prismatic one, with u_j = q̇_j.  A spherical joint holds a unit
quaternion η = (x, y, z, w), scalar last (digest appendix B), in four rows of q; the same four rows of
u hold the body's angular velocity relative to its parent, in its own frame (ω, rad/s), and ω₀ = 0:

    η̇ = ½ η ⊛ (ω, ω₀)    (Hamilton's product),

which is B(q) u with an invertible 4 × 4 B, ω₀ being the rate of ln |η|².  On S³ it is 0, so the speeds
are (ω, 0) exactly; the exact flow keeps |η| = 1, and the ``quaternion_error`` diagnostic max ||η| − 1|
shows what an integrator's round-off and truncation do to it.  Elsewhere the space is flat.

A tree closed into loops (Pfaffian constraints A(q) q̇ = 0 from loop closures Φ(q) = 0) keeps them by its
own projection after every step; its ``constraint_error`` max |Φ| (m) and ``constraint_rate_error``
max |A u| (m/s) are the system's to compute (the space's own diagnostics give 0 for them: no loops).

Which rows hold quaternions is the system's to say (:meth:`GeneralisedSpace.with_quaternions` for the
Python side); the kernels read it from the start of the system's topology:
``topology[0]`` = Q, the number of quaternions, and ``topology[1 … Q]`` = each one's first row.
Admission normalises a quaternion within STATE_TOLERANCE of unit length and refuses it beyond, naming
its joint, and sets its ω₀ (which must be 0 within the same tolerance).  The retraction is additive on
flat rows and the exponential map of S³ on quaternions; Benettin's metric is the Euclidean norm of
(q, u), and pulled-back shadows have their quaternions renormalised.

Flat kernel layout of a member (:mod:`kernels.flat_driver`): rows 0 … n − 1 hold q, rows n … 2n − 1 hold u.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..errors import InvalidInput
from ..lanes import lane_function, pull_toward
from .base import STATE_TOLERANCE, Diagnostic, StateSpace, Variable


@lane_function
def quaternion_error_lanes(x, n, coef, topology, out):
    """out[0, b] = max over the quaternions of ||η| − 1| (0 without quaternions); the constraint rows
    out[1:] are 0: a tree with loop closures computes them itself."""
    for b in range(x.shape[1]):
        for row in range(out.shape[0]):
            out[row, b] = 0.0
        for block in range(topology[0]):
            row = topology[1 + block]
            norm = np.sqrt(x[row, b] ** 2 + x[row + 1, b] ** 2 + x[row + 2, b] ** 2 + x[row + 3, b] ** 2)
            out[0, b] = max(out[0, b], abs(norm - 1.0))


@lane_function
def pull_back_generalised(x, shadow, n, topology, factor):
    """shadow ← x + factor (shadow − x) row by row, then its quaternions put back on S³ (normalised)."""
    pull_toward(x, shadow, factor)
    for block in range(topology[0]):
        row = topology[1 + block]
        for b in range(x.shape[1]):
            norm = np.sqrt(shadow[row, b] ** 2 + shadow[row + 1, b] ** 2 + shadow[row + 2, b] ** 2
                           + shadow[row + 3, b] ** 2)
            for r in range(4):
                shadow[row + r, b] /= norm


def exp_on_sphere(points: np.ndarray, tangents: np.ndarray) -> np.ndarray:
    """The exponential map of S³: the geodesic from unit η (…, 4) along the tangent w (…, 4), w ⟂ η,
    for the length |w|: η cos |w| + w sin |w| / |w|."""
    length = np.linalg.norm(tangents, axis=-1, keepdims=True)
    safe = np.where(length > 0, length, 1.0)
    return points * np.cos(length) + tangents * (np.sin(length) / safe)


def tangent_part(points: np.ndarray, vectors: np.ndarray) -> np.ndarray:
    """vectors (…, 4) with their component along the unit η (…, 4) removed."""
    return vectors - np.sum(vectors * points, axis=-1, keepdims=True) * points


@dataclass(frozen=True)
class GeneralisedSpace(StateSpace):
    """Joint coordinates and their speeds (see the module docstring); ``quaternions`` lists (first row,
    joint name) of each quaternion in q, as a system's parameters place them."""

    quaternions: tuple = ()

    def with_quaternions(self, quaternions: tuple) -> "GeneralisedSpace":
        """This space for a tree whose quaternions are at these (first row, joint name)."""
        return replace(self, quaternions=tuple(quaternions))

    def project(self, state: dict) -> dict:
        q, u = state["q"].copy(), state["u"].copy()
        for row, name in self.quaternions:
            norm = np.linalg.norm(q[:, row:row + 4], axis=-1)
            worst = int(np.argmax(np.abs(norm - 1.0)))
            if abs(norm[worst] - 1.0) > STATE_TOLERANCE:
                raise InvalidInput("q", f"q[{row}:{row + 4}], the unit quaternion (x, y, z, w) of joint {name!r}, "
                                   f"has length {norm[worst]:.6g} in member {worst}; it must be 1 within "
                                   f"{STATE_TOLERANCE:g} (which is normalised)")
            q[:, row:row + 4] /= norm[:, np.newaxis]
            rate = u[:, row + 3]
            if np.any(np.abs(rate) > STATE_TOLERANCE):
                raise InvalidInput("u", f"u[{row + 3}], the norm rate ω₀ of joint {name!r}'s quaternion, must be 0 "
                                   f"(its u[{row}:{row + 3}] are the body angular velocity), got {rate.max():.6g}")
            u[:, row + 3] = 0.0
        return {"q": q, "u": u}

    def normal_count(self, n: int) -> int:
        return 2 * n

    def _moved(self, q: np.ndarray, u: np.ndarray, steps: np.ndarray) -> dict:
        """(q, u) moved by steps (members, 2, n): added on flat rows, along S³'s geodesics on quaternions
        (the steps' components along η and on ω₀ are dropped)."""
        moved_q, moved_u = q + steps[:, 0], u + steps[:, 1]
        for row, _ in self.quaternions:
            block = slice(row, row + 4)
            moved_q[:, block] = exp_on_sphere(q[:, block], tangent_part(q[:, block], steps[:, 0, block]))
            moved_u[:, row + 3] = u[:, row + 3]
        return {"q": moved_q, "u": moved_u}

    def _tangent(self, q: np.ndarray, draws: np.ndarray) -> np.ndarray:
        """draws (members, 2, n) restricted to the tangent space at q (see :meth:`_moved`)."""
        draws = draws.copy()
        for row, _ in self.quaternions:
            draws[:, 0, row:row + 4] = tangent_part(q[:, row:row + 4], draws[:, 0, row:row + 4])
            draws[:, 1, row + 3] = 0.0
        return draws

    def perturb(self, state: dict, normals: np.ndarray, scale: float) -> dict:
        """q and u each moved by a Gaussian of std ``scale`` (rad or m, rad/s or m/s) in the tangent space."""
        q, u = np.asarray(state["q"]), np.asarray(state["u"])
        steps = scale * np.asarray(normals).reshape(-1, 2, q.shape[-1])
        q, u = np.broadcast_to(q, steps[:, 0].shape), np.broadcast_to(u, steps[:, 1].shape)
        return self._moved(q, u, self._tangent(q, steps))

    def displace(self, state: dict, directions: np.ndarray, d0: float) -> dict:
        """Shadows at distance d0 along the tangent part of each direction (geodesics on S³)."""
        q, u = state["q"], state["u"]
        draws = self._tangent(q, np.asarray(directions, dtype=np.float64).reshape(-1, 2, q.shape[-1]))
        s = (d0 / np.sqrt(np.sum(draws ** 2, axis=(1, 2))))[:, np.newaxis, np.newaxis]
        return self._moved(q, u, s * draws)


GENERALISED = GeneralisedSpace(
    name="generalised",
    summary="generalised coordinates q of a multibody tree (joint angles, rad, travels, m, unit quaternions) and "
            "speeds u (the angles' and travels' rates, body angular velocities)",
    variables=(
        Variable("q", lambda n: (n,), ("coordinate",), "rad, m or 1", "joint coordinates (angle, travel or "
                 "quaternion component)"),
        Variable("u", lambda n: (n,), ("coordinate",), "rad/s or m/s", "generalised speeds (the angles' and "
                 "travels' rates; a spherical joint's body angular velocity)"),
    ),
    diagnostics=(Diagnostic("quaternion_error", "1", "max ||η| − 1| over the joints' unit quaternions"),
                 Diagnostic("constraint_error", "m", "max |Φ(q)| over the loop closures (closed-loop position "
                            "error)"),
                 Diagnostic("constraint_rate_error", "m/s", "max |A(q) u| over the loop closures (Pfaffian "
                            "constraint error)")),
    layout="flat",
    lane={"diagnostics": quaternion_error_lanes, "pull_back": pull_back_generalised},
)
