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
from .base import STATE_TOLERANCE, Diagnostic, Sampler, StateSpace, Variable


@lane_function
def quaternion_error_lanes(x, n, coef, topology, work, out):
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


def _section_grid(member_ids: np.ndarray, options: dict) -> tuple[np.ndarray, np.ndarray]:
    """Member m's grid point (m mod grid_q·grid_u): the free coordinate q_j over [q_min, q_max] (both ends) and
    s ∈ (−1, 1), the cell centres of the speed grid (the fraction of u_j's accessible range, see
    :func:`_on_section`)."""
    point = np.asarray(member_ids) % (options["grid_q"] * options["grid_u"])
    q_index, s_index = point // options["grid_u"], point % options["grid_u"]
    fraction = q_index / max(options["grid_q"] - 1, 1)
    return (options["q_min"] + (options["q_max"] - options["q_min"]) * fraction,
            -1.0 + (2.0 * s_index + 1.0) / options["grid_u"])


def _section_coordinates(member_ids, options) -> dict:
    """The seed's grid on the section: the free coordinate and the fraction of its rate's accessible range."""
    q_free, fraction = _section_grid(member_ids, options)
    j = 1 - options["section_coordinate"]
    return {f"section_q{j}": (q_free, "rad or m", f"q[{j}] on the surface of section (the seed's grid)"),
            f"section_u{j}_fraction": (fraction, "1", f"u[{j}] as a fraction of its accessible range at that "
                                                      "q and energy (the seed's grid)")}


def _energies(system, q: np.ndarray, u: np.ndarray, integrate) -> np.ndarray:
    """E (J) of each state (q, u) (members, 2), by the system's own energy (a kernel's sample 0 of
    :func:`kernels.integrate`, the caller's: the kernels build on the spaces, not the other way round)."""
    return integrate(system, "rk4", {"q": q, "u": u}, 1e-6, 1, outputs=(), threads=1).energy[:, 0]


def _on_section(system, n, member_ids, seed, options, normals, integrate) -> dict:
    """Members on the surface of section q_i = section_value at the energy E, crossing it upwards, over a grid
    of the other coordinate q_j and its rate u_j (a system with two coordinates, so that the section at fixed
    energy is two-dimensional).  T = ½ uᵀ M(q) u is quadratic in u: E at u = (0, 0), (1, 0), (0, 1) and (1, 1)
    gives V, M_ii, M_jj and M_ij exactly (the system's own energy, to round-off).  Then u_i > 0 exists where
    ½ M_jj u_j² < E − V if M_ij u_j ≥ 0 and where ½ (M_jj − M_ij²/M_ii) u_j² < E − V if M_ij u_j < 0 (the bounds
    U₊ and U₋ of u_j); u_j = s U, s the grid's fraction, and u_i is the larger root of
    ½ M_ii u_i² + M_ij u_j u_i + ½ M_jj u_j² + V − E = 0."""
    if n != 2:
        raise InvalidInput("ensemble.initial", f'"section" seeds systems with two coordinates (a two-dimensional '
                           f"section at fixed energy); {system.name} here has {n} coordinates: seed it with "
                           'initial = "file"')
    i = options["section_coordinate"]
    j = 1 - i
    q_free, fraction = _section_grid(member_ids, options)
    members = len(q_free)
    q = np.empty((members, 2))
    q[:, i], q[:, j] = options["section_value"], q_free
    unit = np.zeros((4, members, 2))
    unit[1, :, i] = unit[3, :, i] = 1.0
    unit[2, :, j] = unit[3, :, j] = 1.0
    energies = _energies(system, np.tile(q, (4, 1)), unit.reshape(4 * members, 2), integrate).reshape(4, members)
    potential = energies[0]
    m_ii, m_jj = 2.0 * (energies[1] - potential), 2.0 * (energies[2] - potential)
    m_ij = energies[3] - energies[1] - energies[2] + potential
    available = options["section_energy"] - potential
    if not np.all(available > 0.0):
        worst = q_free[np.argmin(available)]
        raise InvalidInput("ensemble.section_energy", f"{options['section_energy']!r} J is below the potential at "
                           f"q[{j}] = {worst:.6g} on the section (V = {potential.max():.6g} J): raise it or narrow "
                           "q_min … q_max")
    against = m_ij * fraction < 0.0  # u_j's direction in which the coupling helps u_i upwards
    bound = np.sqrt(2.0 * available / np.where(against, m_jj - m_ij ** 2 / m_ii, m_jj))
    u = np.empty((members, 2))
    u[:, j] = fraction * bound
    b = m_ij * u[:, j]
    u[:, i] = (-b + np.sqrt(b ** 2 - m_ii * (m_jj * u[:, j] ** 2 - 2.0 * available))) / m_ii
    return {"q": q, "u": u}


def _check_section_seed(options: dict) -> None:
    if options["section_coordinate"] not in (0, 1):
        raise InvalidInput("ensemble.section_coordinate", f"must be 0 or 1 (a system with two coordinates), got "
                           f"{options['section_coordinate']}")
    for key in ("grid_q", "grid_u"):
        if options[key] < 1:
            raise InvalidInput(f"ensemble.{key}", f"must be at least 1, got {options[key]}")
    if options["q_max"] < options["q_min"]:
        raise InvalidInput("ensemble.q_max", f"must be >= q_min = {options['q_min']!r}, got {options['q_max']!r}")


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
    samplers={"section": Sampler(
        "section", "members on a surface of section q_i = section_value at one energy, crossing it upwards, over a "
        "grid of the other coordinate and its rate's accessible range (systems with two coordinates)",
        {"section_energy": (None, "number", "the energy E of every member (J)"),
         "section_coordinate": (0, "int", "i: the coordinate held on the section; its rate u_i > 0 is solved from "
                                          "the energy"),
         "section_value": (0.0, "number", "the section's value of q_i (rad or m)"),
         "q_min": (None, "number", "the other coordinate q_j's grid from (rad or m)"),
         "q_max": (None, "number", "… to (rad or m), both ends included"),
         "grid_q": (16, "int", "points of q_j's grid"),
         "grid_u": (16, "int", "points across u_j's accessible range at each q_j (cell centres, so none on its "
                               "edge); member m takes grid point m mod grid_q·grid_u")},
        _on_section, check=_check_section_seed, coordinates=_section_coordinates)},
)
