"""From a validated spec to work: member chunks × step segments, per-member parameters and initial
conditions.  A plan holds no per-member arrays, so it is cheap to send to every task; each task
derives what it needs for its own members from (spec, member ids)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cached_property, lru_cache

import numpy as np

from jobs.spec import Spec
from kernels import InvalidInput, get_system
from kernels.geometry import fibonacci_sphere, icosphere, random_uniform_separated, thermal_velocities
from kernels.lyapunov import Shadow, displaced_shadow
from kernels.system_parallel import choose_mode

from .initial import perturbed_members, shadow_directions, uniform_members


@lru_cache(maxsize=1)
def _npz_state(path: str) -> tuple[np.ndarray, np.ndarray]:
    """q0 and omega0 of a .npz, read once per process (every chunk task of a worker needs them, and
    a .npz cannot be memory-mapped)."""
    try:
        with np.load(path) as data:
            return data["q0"], data["omega0"]
    except (OSError, KeyError, ValueError) as error:
        raise InvalidInput("ensemble.path", f"cannot read q0 and omega0 from {path!r}: {error}") from None


@lru_cache(maxsize=1)
def _placed_particles(placement: str, count: int, min_separation: float, seed: int) -> np.ndarray:
    """Particle positions (count, 3) for ``initial = "particles"``, computed once per process (read-only)."""
    if placement == "fibonacci":
        q = fibonacci_sphere(count)
    elif placement == "icosphere":
        q = icosphere(((count - 2) // 10).bit_length() // 2)[0]
    else:
        q = random_uniform_separated(count, min_separation, np.random.SeedSequence(seed, spawn_key=(PLACEMENT_STREAM,)))
    q.setflags(write=False)
    return q


#: random streams of ``initial = "particles"`` (disjoint from ensemble.initial's streams)
PLACEMENT_STREAM, VELOCITY_STREAM = 2, 3


@dataclass(frozen=True)
class Segment:
    """Steps [start, stop) of the run; it writes samples [first_sample, last_sample] (inclusive).

    A segment writes the sample of its own first step and, only if it is the last one, the sample of
    its last step as well: the sample at a boundary belongs to the segment it starts, so each task
    writes whole time chunks of the store and no two tasks ever write the same one.
    """

    index: int
    start: int
    stop: int
    first_sample: int
    last_sample: int


@dataclass(frozen=True)
class Plan:
    spec: Spec

    @cached_property
    def system(self):
        """The system with the spec's preset and fixed parameters (sweeps applied per chunk)."""
        return get_system(self.spec.system, self.spec.preset, **self.spec.params)

    @cached_property
    def n_bodies(self) -> int:
        if self.spec.initial == "particles":
            return self.spec.particles["particles"]
        if self.spec.initial == "file":
            return self.file_state(0, 1)[0].shape[1]
        if self.system.preset is not None:
            return self.system.initial_state()[0].shape[0]
        if self.system.n_bodies is not None:
            return self.system.n_bodies
        raise InvalidInput("system.preset", f"{self.spec.system} needs a preset (or initial = \"file\") to fix the "
                           "number of bodies")

    def validate(self) -> None:
        """Check, before anything is written, what tasks would otherwise find out late: the number of
        bodies, every sweep grid point's parameter values, and the initial state's shape."""
        n = self.n_bodies
        points = self.spec.sweep_points
        for member in range(0, self.spec.members, self.spec.members // points):
            self.chunk_system(member, member + 1)
        q, _ = self.initial_state(0, 1)
        if self.system.n_bodies is not None and q.shape[1] != self.system.n_bodies:
            raise InvalidInput("ensemble.path", f"initial state has {q.shape[1]} bodies, {self.spec.system} with "
                               f"these parameters has {self.system.n_bodies}")
        if q.shape[1] != n:
            raise InvalidInput("ensemble.path", f"initial state has {q.shape[1]} bodies, expected {n}")
        if "temperature" in self.spec.variables and self.mode != "system":
            raise InvalidInput("output.variables", "temperature is measured by the system-parallel mode only: one "
                               "member of a pair system with a finite cutoff, method vi, no [analysis] lyapunov")

    @cached_property
    def mode(self) -> str:
        """How the kernels run each chunk: "system" (one large member, parallel inside each step, on all
        of its worker's cores) or "ensemble" (members in parallel, one core per worker)."""
        system = self.chunk_system(0, 1)
        params = system.broadcast(1, self.n_bodies)
        implicit = bool(self.spec.options.get("implicit"))
        return choose_mode(None, system, self.spec.method, implicit, self.spec.members, self.n_bodies, params,
                           self.spec.lyapunov is not None)

    @property
    def samples(self) -> int:
        return self.spec.n_steps // self.spec.save_every + 1

    @cached_property
    def sample_steps(self) -> np.ndarray:
        """The step of each saved sample (the last is the final step even if save_every does not divide it)."""
        return np.minimum(np.arange(self.samples) * self.spec.save_every, self.spec.n_steps)

    @property
    def samples_per_segment(self) -> int:
        return self.spec.checkpoint_every // self.spec.save_every

    @cached_property
    def chunks(self) -> list[tuple[int, int]]:
        size, members = self.spec.chunk, self.spec.members
        return [(first, min(first + size, members)) for first in range(0, members, size)]

    @cached_property
    def segments(self) -> list[Segment]:
        out = []
        for index, start in enumerate(range(0, self.spec.n_steps, self.spec.checkpoint_every)):
            stop = min(start + self.spec.checkpoint_every, self.spec.n_steps)
            last = self.samples - 1 if stop == self.spec.n_steps else stop // self.spec.save_every - 1
            out.append(Segment(index, start, stop, start // self.spec.save_every, last))
        return out

    @cached_property
    def work(self) -> np.ndarray:
        """Work of each (chunk, segment) in member-steps, (chunks, segments)."""
        members = np.array([stop - first for first, stop in self.chunks])
        steps = np.array([s.stop - s.start for s in self.segments])
        return members[:, np.newaxis] * steps[np.newaxis, :]

    def sweep_values(self, member_ids) -> dict[str, np.ndarray]:
        """Each swept parameter's value for the given members.  Members are spread evenly over the
        outer product of the sweeps (in spec order, last sweep fastest): member i sits on grid point
        i // (members / points)."""
        sweeps = self.spec.sweeps
        if not sweeps:
            return {}
        point = np.asarray(member_ids) // (self.spec.members // self.spec.sweep_points)
        indices = np.unravel_index(point, tuple(len(s.values) for s in sweeps))
        return {s.name: np.asarray(s.values)[index] for s, index in zip(sweeps, indices)}

    def chunk_system(self, first: int, stop: int):
        """The system with per-member values of every swept parameter for members [first, stop).

        A swept per-body or vector parameter takes the sweep's value for every component."""
        values = self.sweep_values(np.arange(first, stop))
        if not values:
            return self.system
        shaped = {}
        for name, per_member in values.items():
            base = np.shape(self.system.params[name])
            shaped[name] = np.broadcast_to(per_member.reshape((-1,) + (1,) * len(base)), (stop - first,) + base)
        return self.system.with_params(**shaped)

    def initial_state(self, first: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
        """(q0, ω0) of members [first, stop), each (members, n, 3); depends only on (seed, member id)."""
        spec, ids = self.spec, np.arange(first, stop)
        if spec.initial == "file":
            return self.file_state(first, stop)
        if spec.initial == "uniform":
            return uniform_members(self.n_bodies, ids, spec.omega_scale, spec.seed)
        if spec.initial == "particles":
            return self.particle_state(ids)
        q, omega = self.system.initial_state()
        if spec.initial == "perturb":
            return perturbed_members(q, omega, ids, spec.scale, spec.seed)
        return np.repeat(q[np.newaxis], stop - first, axis=0), np.repeat(omega[np.newaxis], stop - first, axis=0)

    def initial_shadow(self, first: int, stop: int, q: np.ndarray, omega: np.ndarray) -> Shadow:
        """Benettin shadows of members [first, stop) at states (q, ω), displaced by the spec's d0 along
        directions drawn from each member's seed (``[analysis] lyapunov``)."""
        lyapunov = self.spec.lyapunov
        directions = shadow_directions(q.shape[1], np.arange(first, stop), self.spec.seed)
        return displaced_shadow(q, omega, directions, lyapunov["d0"], lyapunov["renormalise_every"])

    def particle_state(self, member_ids) -> tuple[np.ndarray, np.ndarray]:
        """``initial = "particles"``: the placement (shared by all members) and each member's thermal
        velocities at the spec's temperature, drawn from (seed, member id)."""
        particles, seed = self.spec.particles, self.spec.seed
        q = _placed_particles(particles["placement"], particles["particles"], particles["min_separation"], seed)
        mass = self.system.params["m"]
        omega = [thermal_velocities(q, mass, particles["temperature"],
                                    np.random.SeedSequence(seed, spawn_key=(VELOCITY_STREAM, int(i))))
                 if particles["temperature"] > 0 else np.zeros_like(q) for i in member_ids]
        return np.repeat(q[np.newaxis], len(omega), axis=0), np.stack(omega)

    def file_state(self, first: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
        """Members [first, stop) of ``ensemble.path``: a .npz with q0 and omega0 ((members, n, 3), or
        (n, 3) for every member), or a finished store, whose final state is taken."""
        path = self.spec.initial_path
        if path.endswith(".npz"):
            q, omega = _npz_state(path)
            if q.ndim == 2:
                q, omega = q[np.newaxis], omega[np.newaxis]
            if q.shape[0] not in (1, self.spec.members) or q.ndim != 3 or q.shape != omega.shape:
                raise InvalidInput("ensemble.path", f"q0 and omega0 in {path!r} must have shape (members = "
                                   f"{self.spec.members}, n, 3) or (n, 3); got {q.shape} and {omega.shape}")
            rows = slice(0, 1) if q.shape[0] == 1 else slice(first, stop)
            return (np.broadcast_to(q[rows], (stop - first,) + q.shape[1:]).copy(),
                    np.broadcast_to(omega[rows], (stop - first,) + q.shape[1:]).copy())
        from .store import final_state  # the store module needs the plan; import late to avoid a cycle

        if "://" not in path and not os.path.isdir(path):
            raise InvalidInput("ensemble.path", f"{path!r} is neither a .npz file nor a store directory")
        return final_state(path, first, stop, self.spec.members)
