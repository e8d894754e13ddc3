"""(S²)ⁿ: unit vectors q_i and angular velocities ω_i tangent to them, q̇_i = ω_i × q_i
(Lee–Leok–McClamroch eq. (10)).

Its kernels keep their own lane layout (n, 3, lanes) (:mod:`kernels.sphere_runner`); stores keep the
names and dims they always had (``q``, ``omega`` on ``body``, ``xyz``).  Benettin's metric is the
Euclidean norm of (q_s − q, ω_s − ω) in R^{6n} (see :mod:`kernels.lyapunov`).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from numba import njit

from ..errors import InvalidInput
from ..geometry import fibonacci_sphere, icosphere, random_uniform_separated, tangent_rows, thermal_velocities
from .base import STATE_TOLERANCE, Diagnostic, Sampler, StateSpace, Variable

#: random streams of the ``particles`` sampler (disjoint from the ensemble's normal streams 0 and 1)
PLACEMENT_STREAM, VELOCITY_STREAM = 2, 3
PLACEMENTS = ("fibonacci", "icosphere", "random", "polymers")


@njit(cache=True)
def _perturb(q, omega, normals, moved, moved_omega):
    """The loop of :meth:`SphereProductSpace.perturb` (normals: (members, 2, n, 3), already scaled)."""
    for m in range(normals.shape[0]):
        for i in range(q.shape[0]):
            qx, qy, qz = q[i, 0], q[i, 1], q[i, 2]
            gx, gy, gz = normals[m, 0, i, 0], normals[m, 0, i, 1], normals[m, 0, i, 2]
            along = gx * qx + gy * qy + gz * qz
            dx, dy, dz = gx - along * qx, gy - along * qy, gz - along * qz  # δ, tangent at q
            angle = np.sqrt(dx * dx + dy * dy + dz * dz)
            c, s = np.cos(angle), (np.sin(angle) / angle if angle > 0.0 else 0.0)
            px, py, pz = c * qx + s * dx, c * qy + s * dy, c * qz + s * dz
            length = np.sqrt(px * px + py * py + pz * pz)
            px, py, pz = px / length, py / length, pz / length
            # ω plus its perturbation, made tangent at the moved q
            wx = omega[i, 0] + normals[m, 1, i, 0]
            wy = omega[i, 1] + normals[m, 1, i, 1]
            wz = omega[i, 2] + normals[m, 1, i, 2]
            along = wx * px + wy * py + wz * pz
            moved[m, i, 0], moved[m, i, 1], moved[m, i, 2] = px, py, pz
            moved_omega[m, i, 0] = wx - along * px
            moved_omega[m, i, 1] = wy - along * py
            moved_omega[m, i, 2] = wz - along * pz


def _uniform(system, n, member_ids, seed, options, normals, integrate):
    """Each q_i uniform on S² (a normalised 3-D Gaussian), ω_i a tangent Gaussian of std ``omega_scale``."""
    draws = normals(6 * n).reshape(-1, 2, n, 3)
    q = draws[:, 0] / np.linalg.norm(draws[:, 0], axis=-1, keepdims=True)
    return {"q": q, "omega": tangent_rows(q, options["omega_scale"] * draws[:, 1])}


@lru_cache(maxsize=1)
def _placed_particles(placement: str, count: int, min_separation: float, seed: int) -> np.ndarray:
    """Particle positions (count, 3), computed once per process (read-only)."""
    if placement == "fibonacci":
        q = fibonacci_sphere(count)
    elif placement == "icosphere":
        q = icosphere(((count - 2) // 10).bit_length() // 2)[0]
    else:
        q = random_uniform_separated(count, min_separation, np.random.SeedSequence(seed, spawn_key=(PLACEMENT_STREAM,)))
    q.setflags(write=False)
    return q


def _particles(system, n, member_ids, seed, options, normals, integrate):
    """The placement (shared by all members) and each member's thermal velocities at ``temperature``,
    drawn from (seed, member id)."""
    if options["placement"] == "polymers":  # the system's chains and rings as random walks (its own placement)
        place = system.definition.place_particles
        if place is None:
            raise InvalidInput("ensemble.placement", f"\"polymers\" places a system's bonded chains; {system.name} "
                               "has none")
        q = place(system.broadcast(1, options["particles"]), options["particles"],
                  options["min_separation"], np.random.SeedSequence(seed, spawn_key=(PLACEMENT_STREAM,)))
    else:
        q = _placed_particles(options["placement"], options["particles"], options["min_separation"], seed)
    masses = system.definition.inertia(system.broadcast(len(member_ids), len(q)), len(q))  # (members, n), kg
    omega = [thermal_velocities(q, mass, options["temperature"],
                                np.random.SeedSequence(seed, spawn_key=(VELOCITY_STREAM, int(i))))
             if options["temperature"] > 0 else np.zeros_like(q) for i, mass in zip(member_ids, masses)]
    return {"q": np.repeat(q[np.newaxis], len(omega), axis=0), "omega": np.stack(omega)}


#: particles of one member (10⁸ unit vectors and velocities: 4.8 GB of state)
MAX_PARTICLES = 10**8


def _check_particles(options):
    count, placement = options["particles"], options["placement"]
    if not 2 <= count <= MAX_PARTICLES:
        raise InvalidInput("ensemble.particles", f"must be an integer in [2, {MAX_PARTICLES:.0e}], got {count}")
    faces_per_ten = (count - 2) // 10  # 4^k for an icosphere of level k
    power_of_four = faces_per_ten > 0 and faces_per_ten & (faces_per_ten - 1) == 0 and faces_per_ten.bit_length() % 2
    if placement == "icosphere" and ((count - 2) % 10 or not power_of_four):
        levels = ", ".join(str(10 * 4**k + 2) for k in range(7))
        raise InvalidInput("ensemble.particles", f"icosphere placement needs 10·4^k + 2 particles ({levels}, …), "
                           f"got {count}")
    if placement not in ("random", "polymers") and options["min_separation"]:
        raise InvalidInput("ensemble.min_separation", 'is only used with placement = "random" or "polymers"')


class SphereProductSpace(StateSpace):
    """(S²)ⁿ (see the module docstring)."""

    def particle_state(self, points: np.ndarray, angular_velocities: np.ndarray | None) -> dict:
        """q = the points, ω the angular velocities (zero when None)."""
        return {"q": points, "omega": np.zeros_like(points) if angular_velocities is None else angular_velocities}

    def project(self, state: dict) -> dict:
        """Normalise q and project ω within STATE_TOLERANCE; refuse beyond it."""
        q, omega = state["q"], state["omega"]
        norms = np.linalg.norm(q, axis=-1)
        worst = np.unravel_index(np.argmax(np.abs(norms - 1.0)), norms.shape)
        if abs(norms[worst] - 1.0) > STATE_TOLERANCE:
            raise InvalidInput("q0", f"q[{worst[0]}, {worst[1]}] has norm {norms[worst]:.9g}; every q_i must be a unit "
                               f"vector (within {STATE_TOLERANCE:g}, which is normalised)")
        q = q / norms[..., np.newaxis]
        normal = np.sum(q * omega, axis=-1)
        worst = np.unravel_index(np.argmax(np.abs(normal)), normal.shape)
        if abs(normal[worst]) > STATE_TOLERANCE:
            raise InvalidInput("omega0", f"omega[{worst[0]}, {worst[1]}] has q·ω = {normal[worst]:.3g}; ω_i must be "
                               f"tangent to q_i (within {STATE_TOLERANCE:g}, which is projected)")
        return {"q": q, "omega": omega - normal[..., np.newaxis] * q}

    def normal_count(self, n: int) -> int:
        return 6 * n

    def tangent_dimension(self, n: int) -> int:
        """T(S²)ⁿ: 2 directions of each q_i and 2 of each ω_i ⟂ q_i."""
        return 4 * n

    def perturb(self, state: dict, normals: np.ndarray, scale: float) -> dict:
        """Each q_i moves along a tangent Gaussian δ of std ``scale`` by the exponential map of S²,
        q_i' = cos‖δ‖ q_i + sin‖δ‖ δ/‖δ‖ (so ‖q_i'‖ = 1 up to round-off); ω_i gets a Gaussian of the same
        std and is projected tangent to q_i'."""
        q = np.ascontiguousarray(state["q"], dtype=np.float64)
        omega = np.ascontiguousarray(state["omega"], dtype=np.float64)
        n = q.shape[0]
        draws = scale * np.asarray(normals).reshape(-1, 2, n, 3)
        moved, moved_omega = np.empty((draws.shape[0], n, 3)), np.empty((draws.shape[0], n, 3))
        _perturb(q, omega, draws, moved, moved_omega)
        return {"q": moved, "omega": moved_omega}

    def displace(self, state: dict, directions: np.ndarray, d0: float) -> dict:
        """The displacement (δq, δω) is tangent to the bundle T(S²)ⁿ: δq_i ⟂ q_i, and δω_i satisfies the
        linearised constraint q_i·δω_i + δq_i·ω_i = 0 (the tangent plane turns with q_i).  It is scaled to
        length d0, then the shadow is put on T(S²)ⁿ exactly (q_i normalised, ω_i projected), which
        changes the length only at second order."""
        q, omega = state["q"], state["omega"]
        directions = np.asarray(directions, dtype=np.float64).reshape(-1, 2, q.shape[1], 3)
        dq = tangent_rows(q, directions[:, 0])
        domega = tangent_rows(q, directions[:, 1]) - np.sum(dq * omega, axis=-1, keepdims=True) * q
        length = np.sqrt(np.sum(dq**2 + domega**2, axis=(-2, -1)))[:, np.newaxis, np.newaxis]
        shadow_q = q + d0 / length * dq
        shadow_q /= np.linalg.norm(shadow_q, axis=-1, keepdims=True)
        return {"q": shadow_q, "omega": tangent_rows(shadow_q, omega + d0 / length * domega)}

    def points(self, state: dict) -> np.ndarray:
        """The bodies' positions on the unit sphere (..., n, 3): q (for particle analyses)."""
        return np.asarray(state["q"])

    def distance(self, a: dict, b: dict) -> np.ndarray:
        """‖(q_b − q_a, ω_b − ω_a)‖ per member (the order of the kernels' own sum)."""
        return np.sqrt(np.sum((b["q"] - a["q"]) ** 2 + (b["omega"] - a["omega"]) ** 2, axis=(-2, -1)))


SPHERE_PRODUCT = SphereProductSpace(
    name="sphere_product",
    summary="(S²)ⁿ unit vectors q and tangent angular velocities ω",
    variables=(
        Variable("q", lambda n: (n, 3), ("body", "xyz"), "1", "unit vector of each body (a point of S²)"),
        Variable("omega", lambda n: (n, 3), ("body", "xyz"), "rad/s", "angular velocity of each body"),
    ),
    diagnostics=(Diagnostic("unit_error", "1", "max over bodies of | |q_i| - 1 |"),
                 Diagnostic("tangency_error", "rad/s", "max over bodies of |q_i · omega_i|")),
    optional_diagnostics=(Diagnostic("temperature", "J", "kinetic temperature: kinetic energy per body (k_B = 1, "
                                     "2 degrees of freedom); system-parallel mode only"),),
    samplers={
        "uniform": Sampler("uniform", "each q_i uniform on S², omega_i a tangent Gaussian of std omega_scale",
                           {"bodies": (0, "int", "number of bodies (0: the system's or its preset's); random starts "
                                       "of a minimisation")},
                           _uniform, bodies=lambda options: options["bodies"] or None),
        "particles": Sampler(
            "particles", "particles placed on the sphere with thermal velocities (molecular dynamics)",
            {"particles": (None, "int", "number of particles (>= 2)"),
             "placement": ("fibonacci", PLACEMENTS, "fibonacci lattice, icosphere vertices (10·4^k + 2), random, or "
                           "polymers (a system's chains and rings as random walks, the rest random)"),
             "min_separation": (0.0, "float", "random and polymers placement: minimum chord between particles (m; "
                                "polymers: 0 takes 0.8 × the largest type σ)"),
             "temperature": (0.0, "float", "kinetic temperature (J per particle, k_B = 1; 0: at rest)")},
            _particles, bodies=lambda options: options["particles"], check=_check_particles),
    },
    layout="sphere",
)
