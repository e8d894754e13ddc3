"""A ball rolling without slipping on a horizontal plane, and its planar reduction, a rolling disk
(Putkaradze & Rogers 2018; digest_004 §4).

``rolling``: the ball's attitude R (body → space, so Γ = Rᵀe₃ is the third row of R: the vertical seen
in the body frame), its body angular velocity Ω (rad/s), the contact point on the plane (x, y) (m), and
the rail coordinates θ (rad, or m on a straight rail) and rates θ̇ of the n masses that move freely on
their rails.  ``rolling_disk``: the disk's rolling angle θ about the body axis E₂ (rad; Γ = (−sin θ, 0,
cos θ)), its rate, and the contact point x = r θ (m) along the plane.

Both carry ``clock`` (s, the time since the run began: ċlock = 1) and ``work`` (J, the work the
actuators moving prescribed masses have done since then: ẇork = the actuators' power).  Masses moving
on prescribed rails make the equations depend on time, and their energy too; carrying the clock in the
state (the extended phase space) makes energy, contact force and every diagnostic functions of the state
alone, so a resumed segment sees exactly the times of an uninterrupted run, and E − E₀ − work is the
integrator's error (the analysis's energy balance reads the stored ``work``).  A state given without
``clock`` and ``work`` starts both at 0.

Flat kernel layout of a member: ``rolling`` rows 0 … 8 hold R (row-major, so rows 6 … 8 are Γ), 9 … 11
Ω, 12 … 13 (x, y), 14 the clock, 15 the work, 16 … 15 + n the free masses' θ and 16 + n … 15 + 2n their
θ̇; ``rolling_disk`` rows 0 … 4 hold θ, θ̇, x, the clock and the work.  Perturbations and Benettin
shadows never move the clock or the work (they are not part of the motion's phase space): R moves along
SO(3)'s exponential map, the other variables additively; pulled-back shadows have R re-orthonormalised.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..lanes import lane_function, pull_toward
from .base import Diagnostic, StateSpace, Variable
from .rotation import ORTHOGONALITY, exp_right, orthogonality_lanes, project_rotations, pull_back_lanes

#: rows of the ``rolling`` layout (see the module docstring)
OMEGA, CONTACT, CLOCK, WORK, RAILS = 9, 12, 14, 15, 16  # R at rows 0 … 8
#: rows of the ``rolling_disk`` layout
DISK_ANGLE, DISK_RATE, DISK_X, DISK_CLOCK, DISK_WORK = 0, 1, 2, 3, 4
#: the state variables every rolling state may leave out (they start at 0)
EXTENDED = ("clock", "work")

NORMAL_FORCE = Diagnostic("normal_force", "N", "normal force of the plane on the ball (lift-off when it "
                          "reaches 0)")
FRICTION_RATIO = Diagnostic("friction_ratio", "1", "|tangential contact force| / normal force (the static "
                            "friction coefficient rolling needs)")


def _extended_variables():
    return (Variable("clock", lambda n: (), (), "s", "time since the run began"),
            Variable("work", lambda n: (), (), "J", "work done by the actuators moving prescribed masses since "
                     "t = 0 (E(t) - E(0) - work is the integrator's error)"))


@lane_function
def rolling_diagnostics_lanes(x, n, coef, topology, work, out):
    """out[0] = max |RᵀR − I| (the attitude's ``orthogonality_error``); the contact-force rows out[1:]
    are 0 here: the system computes them (they need its accelerations)."""
    orthogonality_lanes(x, 1, coef, topology, work, out)
    for row in range(1, out.shape[0]):
        for b in range(x.shape[1]):
            out[row, b] = 0.0


@lane_function
def pull_back_rolling(x, shadow, n, topology, factor):
    """shadow ← x + factor (shadow − x) row by row, then its R put back on SO(3) (Gram–Schmidt)."""
    pull_back_lanes(x, shadow, 1, topology, factor)


@lane_function
def no_diagnostics(x, n, coef, topology, work, out):
    """The disk's space itself has no constraint to measure: its contact-force rows are the system's."""
    for row in range(out.shape[0]):
        for b in range(x.shape[1]):
            out[row, b] = 0.0


@lane_function
def pull_back_flat(x, shadow, n, topology, factor):
    """shadow ← x + factor (shadow − x): the disk's space is flat."""
    pull_toward(x, shadow, factor)


@dataclass(frozen=True)
class ExtendedSpace(StateSpace):
    """A space whose states carry ``clock`` and ``work`` (see the module docstring): both may be left out
    of a given state, and perturbations never move them.  ``moving`` names the variables perturbations and
    shadows move, in the order their normals are drawn; ``R`` moves along SO(3)'s exponential map (three
    normals: a body-frame rotation vector, weighed √2 in the flat metric, ‖R ξ̂‖_F = √2 ‖ξ‖)."""

    moving: tuple = ()
    #: how many free masses (rail coordinates) a state has: the length of this variable's last axis
    counted: str | None = None

    def body_count(self, state: dict) -> int:
        return int(np.shape(state[self.counted])[-1]) if self.counted else 0

    def with_extended(self, state, leading: tuple) -> dict:
        """``state`` with ``clock`` and ``work`` (of shape ``leading``) set to 0 where it leaves them out."""
        return {**{name: np.zeros(leading) for name in EXTENDED}, **state}

    def checked_arrays(self, state, n_bodies: int | None) -> dict:
        if hasattr(state, "keys") and self.names[0] in state:
            state = self.with_extended(state, np.shape(state[self.names[0]])[:1])
        return super().checked_arrays(state, n_bodies)

    def _sizes(self, n: int) -> list:
        return [3 if name == "R" else int(np.prod(self.variable(name).shape(n))) for name in self.moving]

    def normal_count(self, n: int) -> int:
        return sum(self._sizes(n))

    def _moved(self, state: dict, draws: np.ndarray, n: int) -> dict:
        """The state (leading member axis) with each moving variable moved by its columns of ``draws``."""
        moved = {name: np.array(value, dtype=np.float64) for name, value in state.items()}
        start = 0
        for name, size in zip(self.moving, self._sizes(n)):
            step = draws[:, start:start + size]
            start += size
            if name == "R":
                moved["R"] = exp_right(moved["R"][:, np.newaxis], step[:, np.newaxis])[:, 0]
            else:
                moved[name] = moved[name] + step.reshape(moved[name].shape)
        return moved

    def perturb(self, state: dict, normals: np.ndarray, scale: float) -> dict:
        """R exp(ξ̂) and the other moving variables plus Gaussians of std ``scale`` (rad, rad/s, m)."""
        normals = np.asarray(normals, dtype=np.float64)
        members = normals.shape[0]
        n = self.body_count(state)
        full = self.with_extended(state, ())
        base = {name: np.broadcast_to(np.asarray(full[name], dtype=np.float64),
                                      (members,) + tuple(self.variable(name).shape(n))) for name in self.names}
        return self._moved(base, scale * normals, n)

    def displace(self, state: dict, directions: np.ndarray, d0: float) -> dict:
        """Shadows moved along ``directions`` scaled to length d0 in the flat metric."""
        draws = np.asarray(directions, dtype=np.float64)
        n = self.body_count(state)
        weights = np.concatenate([np.full(size, 2.0 if name == "R" else 1.0)
                                  for name, size in zip(self.moving, self._sizes(n))])
        s = d0 / np.sqrt(np.sum(weights * draws ** 2, axis=1))
        return self._moved(state, s[:, np.newaxis] * draws, n)


class RollingSpace(ExtendedSpace):
    """The ball's space (see the module docstring)."""

    def project(self, state: dict) -> dict:
        return {**state, "R": project_rotations(state["R"][:, np.newaxis])[:, 0]}


class DiskSpace(ExtendedSpace):
    """The disk's space: flat."""

    def project(self, state: dict) -> dict:
        return state


ROLLING = RollingSpace(
    name="rolling",
    summary="a ball rolling without slipping: attitude R (body → space), body angular velocity Ω, contact point "
            "(x, y), free masses' rail coordinates θ and rates, clock and actuator work",
    variables=(
        Variable("R", lambda n: (3, 3), ("row", "col"), "1", "attitude of the ball (body to space)"),
        Variable("Omega", lambda n: (3,), ("xyz",), "rad/s", "body-frame angular velocity of the ball"),
        Variable("contact", lambda n: (2,), ("plane",), "m", "contact point (x, y) on the plane"),
        *_extended_variables(),
        Variable("theta", lambda n: (n,), ("free_mass",), "rad or m", "rail coordinate of each free mass"),
        Variable("theta_dot", lambda n: (n,), ("free_mass",), "rad/s or m/s", "rail rate of each free mass"),
    ),
    diagnostics=(ORTHOGONALITY, NORMAL_FORCE, FRICTION_RATIO),
    layout="flat",
    lane={"diagnostics": rolling_diagnostics_lanes, "pull_back": pull_back_rolling},
    moving=("R", "Omega", "theta", "theta_dot"),
    counted="theta",
    path="contact",
)

ROLLING_DISK = DiskSpace(
    name="rolling_disk",
    summary="a disk rolling without slipping in a vertical plane: rolling angle θ, its rate, contact point x, "
            "clock and actuator work",
    variables=(
        Variable("angle", lambda n: (), (), "rad", "rolling angle θ about the disk's axis (x = r θ)"),
        Variable("angle_rate", lambda n: (), (), "rad/s", "rolling rate θ̇"),
        Variable("x", lambda n: (), (), "m", "contact point along the plane"),
        *_extended_variables(),
    ),
    diagnostics=(NORMAL_FORCE, FRICTION_RATIO),
    layout="flat",
    lane={"diagnostics": no_diagnostics, "pull_back": pull_back_flat},
    moving=("angle", "angle_rate"),
)
