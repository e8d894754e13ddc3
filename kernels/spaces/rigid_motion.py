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

from .base import Diagnostic, Sampler, StateSpace, Variable
from .rotation import (ORTHOGONALITY, exp_right, orthogonality_lanes, project_rotations, pull_back_lanes,
                       rotations_from_quaternions)


def _uniform(system, n, member_ids, options, normals):
    """Haar-random attitudes, O at the origin, Gaussian Ω and V of std ``omega_scale`` (rad/s, m/s)."""
    draws = normals(10 * n).reshape(-1, n, 10)
    scale = options["omega_scale"]
    return {"R": rotations_from_quaternions(draws[..., :4]), "x": np.zeros(draws.shape[:2] + (3,)),
            "Omega": scale * draws[..., 4:7], "V": scale * draws[..., 7:]}


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
    samplers={"uniform": Sampler("uniform", "Haar-random attitudes, x = 0, Gaussian Omega and V of std omega_scale "
                                 "(rad/s, m/s)", {}, _uniform)},
    layout="flat",
    lane={"diagnostics": orthogonality_lanes, "pull_back": pull_back_lanes},
)
