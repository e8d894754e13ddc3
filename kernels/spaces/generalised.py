"""Generalised coordinates and speeds of a multibody tree: q (n,) and u (n,) with q̇ = u.

Parsa's Kane equations (digest_003 §2–3) in joint coordinates: q_j is the angle (rad) of a revolute
joint or the travel (m) of a prismatic one, u_j its rate.  The speeds are the coordinates' rates
(digest eq. (8) with B = 1, d = 0), so the space is flat: its retraction is additive, Benettin's metric
the Euclidean norm of (q, u) and there is no manifold to stay on and no constraint diagnostic.

Flat kernel layout of a member (:mod:`kernels.flat_driver`): rows 0 … n − 1 hold q, rows n … 2n − 1 hold u;
``n`` is the number of coordinates (one per joint of a tree of one-degree-of-freedom joints).
"""

from __future__ import annotations

import numpy as np

from ..lanes import lane_function
from .base import StateSpace, Variable


@lane_function
def no_diagnostics(x, n, out):
    """Joint coordinates have no constraint to drift from."""


@lane_function
def pull_back_linear(x, shadow, n, factor):
    """shadow ← x + factor (shadow − x) row by row: on a flat space the line is the geodesic."""
    for r in range(x.shape[0]):
        for b in range(x.shape[1]):
            shadow[r, b] = x[r, b] + factor[b] * (shadow[r, b] - x[r, b])


class GeneralisedSpace(StateSpace):
    """Joint coordinates and their rates (see the module docstring)."""

    def project(self, state: dict) -> dict:
        return state

    def normal_count(self, n: int) -> int:
        return 2 * n

    def perturb(self, state: dict, normals: np.ndarray, scale: float) -> dict:
        """q and u each moved by a Gaussian of std ``scale`` (rad or m, rad/s or m/s)."""
        draws = scale * np.asarray(normals).reshape(-1, 2, state["q"].shape[-1])
        return {"q": state["q"] + draws[:, 0], "u": state["u"] + draws[:, 1]}

    def displace(self, state: dict, directions: np.ndarray, d0: float) -> dict:
        """Shadows at (q, u) + d0 · direction / ‖direction‖."""
        n = state["q"].shape[-1]
        draws = np.asarray(directions, dtype=np.float64).reshape(-1, 2, n)
        s = (d0 / np.sqrt(np.sum(draws ** 2, axis=(1, 2))))[:, np.newaxis]
        return {"q": state["q"] + s * draws[:, 0], "u": state["u"] + s * draws[:, 1]}


GENERALISED = GeneralisedSpace(
    name="generalised",
    summary="generalised coordinates q of a multibody tree (joint angles, rad, and travels, m) and speeds u = q̇",
    variables=(
        Variable("q", lambda n: (n,), ("coordinate",), "rad or m", "joint coordinates (angle or travel)"),
        Variable("u", lambda n: (n,), ("coordinate",), "rad/s or m/s", "generalised speeds (the coordinates' rates)"),
    ),
    diagnostics=(),
    layout="flat",
    lane={"diagnostics": no_diagnostics, "pull_back": pull_back_linear},
)
