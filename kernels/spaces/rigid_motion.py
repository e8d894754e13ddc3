"""SE(3)ⁿ: n rigid bodies' configurations (R_i, x_i) and left-invariant (Kirchhoff) velocities (Ω_i, V_i).

R_i maps body components to space components (x_space = R_i x_body + x_i), x_i is the position of the
body's reference point O in space (m), Ω_i its body angular velocity (rad/s) and V_i the body components
of O's velocity (m/s): Ṙ_i = R_i Ω̂_i, ẋ_i = R_i V_i (Massa & Vignolo eqs. (1)–(7): their b, u, ω; the
left-invariant velocities of their §3.2).

Flat kernel layout of a member (:mod:`kernels.flat_driver`): rows 9i + 3r + c hold (R_i)_rc, rows
9n + 3i + k hold (x_i)_k, rows 12n + 3i + k hold (Ω_i)_k and rows 15n + 3i + k hold (V_i)_k.  The
attitudes come first, as on SO(3)ⁿ, so the orthogonality diagnostic and Benettin's pull-back are
SO(3)ⁿ's.  Benettin's metric is the Euclidean norm of the flat difference.
"""

from __future__ import annotations

import numpy as np

from ..errors import InvalidInput
from .base import Diagnostic, Sampler, StateSpace, Variable
from .rotation import (ORTHOGONALITY, exp_right, orthogonality_lanes, project_rotations, pull_back_lanes,
                       rotations_from_quaternions)


def _vee(skew: np.ndarray) -> np.ndarray:
    """w from a skew matrix ŵ (…, 3, 3), averaging each entry with its mirror."""
    return 0.5 * np.stack([skew[..., 2, 1] - skew[..., 1, 2], skew[..., 0, 2] - skew[..., 2, 0],
                           skew[..., 1, 0] - skew[..., 0, 1]], axis=-1)


def velocity_sets(R: np.ndarray, b: np.ndarray, R_dot: np.ndarray, b_dot: np.ndarray) -> dict:
    """The three velocity sets of a motion (R, b) on SE(3) from its rates (Massa & Vignolo, digest_002 §1):
    left-invariant ``u`` = Rᵀḃ (eq. 7) and ``omega`` = (RᵀṘ)^∨ (eq. 5b), the body components (Kirchhoff's,
    the stored Ω, V); right-invariant ``omega_hat`` = (Ṙ Rᵀ)^∨ (eq. 5a) and ``xi_hat`` = ḃ + b × ω̂ (eq. 10a:
    the velocity of the body point at the observer's origin), observer components (Newton–Euler's); and
    the hybrid ``b_dot`` with ``omega``.  Arrays (…, 3, 3), (…, 3)."""
    omega_hat = _vee(np.einsum("...ij,...kj->...ik", R_dot, R))
    return {"u": np.einsum("...ji,...j->...i", R, b_dot), "omega": _vee(np.einsum("...ji,...jk->...ik", R, R_dot)),
            "omega_hat": omega_hat, "xi_hat": b_dot + np.cross(b, omega_hat), "b_dot": b_dot}


def _uniform(system, n, member_ids, seed, options, normals, integrate):
    """Haar-random attitudes, O at the origin, Gaussian Ω and V of std ``omega_scale`` (rad/s, m/s)."""
    draws = normals(10 * n).reshape(-1, n, 10)
    scale = options["omega_scale"]
    return {"R": rotations_from_quaternions(draws[..., :4]), "x": np.zeros(draws.shape[:2] + (3,)),
            "Omega": scale * draws[..., 4:7], "V": scale * draws[..., 7:]}


def _positive_count(options, *keys):
    for key in keys:
        if options[key] < 1:
            raise InvalidInput(f"ensemble.{key}", f"must be at least 1, got {options[key]}")


def _fraction(index, count):
    """Grid point ``index`` of ``count`` evenly over [0, 1], both ends included (0 for a single point)."""
    return index / max(count - 1, 1)


def _heading_grid(member_ids, options):
    """Member m's grid point m mod (azimuths × elevations), elevation fastest: (azimuth, elevation) (rad),
    each spread evenly over [0, π/2] (a single elevation is 0: the body's x–y plane)."""
    azimuths, elevations = options["azimuths"], options["elevations"]
    point = np.asarray(member_ids) % (azimuths * elevations)
    return 0.5 * np.pi * _fraction(point // elevations, azimuths), 0.5 * np.pi * _fraction(point % elevations, elevations)


def _headings(system, n, member_ids, seed, options, normals, integrate):
    """Each body at rest in attitude 1 at the origin, translating at ``speed`` along the body direction
    (cos e cos a, cos e sin a, sin e) of the member's grid point, Ω Gaussian of std ``omega_scale``."""
    azimuth, elevation = _heading_grid(member_ids, options)
    direction = np.stack([np.cos(elevation) * np.cos(azimuth), np.cos(elevation) * np.sin(azimuth),
                          np.sin(elevation)], axis=-1)
    members = len(member_ids)
    return {"R": np.broadcast_to(np.eye(3), (members, n, 3, 3)).copy(), "x": np.zeros((members, n, 3)),
            "Omega": options["omega_scale"] * normals(3 * n).reshape(members, n, 3),
            "V": np.repeat(options["speed"] * direction[:, np.newaxis], n, axis=1)}


def _heading_coordinates(member_ids, options):
    """The grid's azimuth, and its elevation when there are several."""
    azimuth, elevation = _heading_grid(member_ids, options)
    coordinates = {"heading_azimuth": (azimuth, "rad", "initial velocity's body-frame azimuth from x towards y")}
    if options["elevations"] > 1:
        coordinates["heading_elevation"] = (elevation, "rad", "initial velocity's body-frame elevation towards z")
    return coordinates


AXES = ("x", "y", "z")


def _tilt_grid(member_ids, options):
    """Member m's tilt (rad): grid point m mod tilts, evenly over [0, max_tilt]."""
    count = options["tilts"]
    return options["max_tilt"] * _fraction(np.asarray(member_ids) % count, count)


def _tilted(system, n, member_ids, seed, options, normals, integrate):
    """The system's preset state with every body's attitude turned by the member's tilt about the body axis
    ``axis`` (R exp(α ê)), Ω Gaussian of std ``omega_scale`` added."""
    state = system.initial_state()
    angle = _tilt_grid(member_ids, options)
    axis = np.eye(3)[AXES.index(options["axis"])]
    members = len(member_ids)
    turn = np.broadcast_to((angle[:, np.newaxis] * axis)[:, np.newaxis], (members, n, 3))
    rotations = exp_right(np.broadcast_to(state["R"], (members, n, 3, 3)).copy(), np.ascontiguousarray(turn))
    return {"R": rotations, "x": np.repeat(state["x"][np.newaxis], members, axis=0),
            "Omega": state["Omega"] + options["omega_scale"] * normals(3 * n).reshape(members, n, 3),
            "V": np.repeat(state["V"][np.newaxis], members, axis=0)}


def _tilt_coordinates(member_ids, options):
    return {"tilt": (_tilt_grid(member_ids, options), "rad", f"initial turn about the body {options['axis']} axis")}


class RigidMotionSpace(StateSpace):
    """SE(3)ⁿ with left-invariant velocities (see the module docstring)."""

    def project(self, state: dict) -> dict:
        return {**state, "R": project_rotations(state["R"])}

    def normal_count(self, n: int) -> int:
        return 12 * n

    def perturb(self, state: dict, normals: np.ndarray, scale: float) -> dict:
        """R_i exp(ξ̂_i) with a body-frame Gaussian ξ_i (std ``scale`` rad), and x_i, Ω_i, V_i each moved by
        a Gaussian of std ``scale`` (m, rad/s, m/s)."""
        n = state["R"].shape[0]
        draws = scale * np.asarray(normals).reshape(-1, 4, n, 3)
        rotations = np.broadcast_to(state["R"], (draws.shape[0],) + state["R"].shape)
        return {"R": exp_right(rotations, draws[:, 0]), "x": state["x"] + draws[:, 1],
                "Omega": state["Omega"] + draws[:, 2], "V": state["V"] + draws[:, 3]}

    def displace(self, state: dict, directions: np.ndarray, d0: float) -> dict:
        """Shadows at R_i exp(s ξ̂_i), x_i + s δx_i, Ω_i + s δΩ_i, V_i + s δV_i, with s such that the tangent
        vector has length d0 in the flat metric (‖R ξ̂‖_F = √2 ‖ξ‖)."""
        n = state["R"].shape[1]
        draws = np.asarray(directions, dtype=np.float64).reshape(-1, 4, n, 3)
        length = np.sqrt(np.sum(2.0 * draws[:, 0] ** 2 + np.sum(draws[:, 1:] ** 2, axis=1), axis=(-2, -1)))
        s = (d0 / length)[:, np.newaxis, np.newaxis]
        return {"R": exp_right(state["R"], s * draws[:, 0]), "x": state["x"] + s * draws[:, 1],
                "Omega": state["Omega"] + s * draws[:, 2], "V": state["V"] + s * draws[:, 3]}


RIGID_MOTION = RigidMotionSpace(
    name="rigid_motion",
    summary="SE(3)ⁿ rigid motions: attitudes R (body → space), positions x of the reference point, body "
            "angular velocities Ω and body components V of the reference point's velocity",
    variables=(
        Variable("R", lambda n: (n, 3, 3), ("body", "row", "col"), "1", "attitude of each body (body to space)"),
        Variable("x", lambda n: (n, 3), ("body", "xyz"), "m", "position of each body's reference point O in space"),
        Variable("Omega", lambda n: (n, 3), ("body", "xyz"), "rad/s", "body-frame angular velocity of each body"),
        Variable("V", lambda n: (n, 3), ("body", "xyz"), "m/s", "body-frame components of the velocity of O"),
    ),
    diagnostics=(ORTHOGONALITY,),
    samplers={
        "uniform": Sampler("uniform", "Haar-random attitudes, x = 0, Gaussian Omega and V of std omega_scale "
                           "(rad/s, m/s)", {}, _uniform),
        "headings": Sampler(
            "headings", "steady translations over a grid of body-frame directions (a λ map over the direction of "
            "the initial velocity): R = 1, x = 0, V = speed along the member's direction, Omega Gaussian of std "
            "omega_scale; member m takes grid point m mod (azimuths × elevations)",
            {"speed": (1.0, "float", "m/s"),
             "azimuths": (7, "int", "azimuths from the body's x axis to its y axis (both included)"),
             "elevations": (1, "int", "elevations from the x–y plane to the z axis (both included; 1: the plane)")},
            _headings, check=lambda options: _positive_count(options, "azimuths", "elevations"),
            coordinates=_heading_coordinates),
        "tilts": Sampler(
            "tilts", "the preset's state with its attitude turned about a body axis by a grid of angles (an "
            "ensemble over the initial angle): member m takes angle max_tilt · (m mod tilts)/(tilts − 1); Omega "
            "gets a Gaussian of std omega_scale",
            {"tilts": (16, "int", "angles, evenly over [0, max_tilt] (both included)"),
             "max_tilt": (1.5707963267948966, "float", "rad"),
             "axis": ("x", AXES, "the body axis of the turn")},
            _tilted, check=lambda options: _positive_count(options, "tilts"), coordinates=_tilt_coordinates),
    },
    layout="flat",
    lane={"diagnostics": orthogonality_lanes, "pull_back": pull_back_lanes},
    # lgvi's chord iterations and Kirchhoff's equations read 𝕄 or 𝕄⁻¹ (36 coefficient rows) per lane: their
    # loops need some 400 overlap checks to run as SIMD (lgvi 3.9e6 member-steps/s on one thread against
    # 1.6e6 scalar, issue 34), and compile no slower
    memory_checks=1000,
)
