"""The declarations every state space makes (see :mod:`kernels.spaces`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ..errors import InvalidInput
from ..llvm_options import DEFAULT_MEMORY_CHECKS

#: tolerance within which an initial state is silently put back on its manifold; beyond it, refused
STATE_TOLERANCE = 1e-6


@dataclass(frozen=True)
class Variable:
    """One named state variable: per-member shape from the body count n, dims, CF units and long name."""

    name: str
    shape: Callable[[int], tuple]
    dims: tuple[str, ...]
    unit: str
    long_name: str


@dataclass(frozen=True)
class Diagnostic:
    """A per-member, per-sample scalar the kernels compute alongside the energy (a constraint error)."""

    name: str
    unit: str
    long_name: str


@dataclass(frozen=True)
class Sampler:
    """An initial-condition sampler of a space, chosen by ``[ensemble] initial``.

    ``options``: its own ``[ensemble]`` keys, key → (default, kind, doc) with kind "int" or "float"
    (≥ 0), "number" (any finite number) or a tuple of allowed strings (default None: required); every sampler also receives the
    generic ``omega_scale`` (std of the velocity variables, rad/s).
    ``draw(system, n, member_ids, seed, options, normals, integrate)`` → state dict with a leading member axis,
    where ``normals(count)`` gives (members, count) standard normals from each member's own seed (a
    sampler with other random needs derives them from (seed, member id) itself) and ``integrate`` is
    :func:`kernels.integrate`, for a sampler that asks the system's own kernels (the generalised space's section
    seeder: its energies), which a space, below every kernel, cannot import;
    ``bodies(options)`` fixes the body count when the sampler does (else None);
    ``check(options)`` raises InvalidInput for inconsistent options;
    ``coordinates(member_ids, options)`` → {name: (values (members,), unit, long_name)}: what the sampler
    varies systematically over members (e.g. a grid of directions), stored as coordinates on ``member``
    so that a λ map spans them as it spans swept parameters (None: nothing)."""

    name: str
    doc: str
    options: dict
    draw: Callable
    bodies: Callable[[dict], int | None] = lambda options: None
    check: Callable[[dict], None] = lambda options: None
    coordinates: Callable[[np.ndarray, dict], dict] | None = None


@dataclass(frozen=True)
class StateSpace:
    """Geometry of one kind of state.  Subclasses implement the manifold-specific methods."""

    name: str
    summary: str
    variables: tuple[Variable, ...]
    diagnostics: tuple[Diagnostic, ...]
    samplers: dict[str, Sampler] = field(default_factory=dict)
    #: diagnostics only some kernels compute (the (S²)ⁿ system-parallel mode's temperature)
    optional_diagnostics: tuple[Diagnostic, ...] = ()
    #: "flat": kernels step one flat float64 block per member (:mod:`kernels.flat`), with the lane
    #: functions in ``lane``; "sphere": the (S²)ⁿ lane-block kernels of :mod:`kernels.sphere_runner`
    layout: str = "flat"
    #: flat layout only: jitted lane functions ``diagnostics(x, n, out)`` (D, L) and
    #: ``pull_back(x, shadow, n, factor)`` (shadow ← x + factor (shadow − x), then back on the manifold),
    #: and templates bound per system (``energy``, ``vector_field``; see the space's module)
    lane: dict = field(default_factory=dict)
    #: a state variable of shape (2,) that is a point moving in a plane (m): the report draws a few members'
    #: paths (the rolling ball's contact point); None: none
    path: str | None = None
    #: the most runtime overlap checks LLVM may emit to vectorise one lane loop of this space's kernels
    #: (:mod:`kernels.llvm_options`): more than the default where a loop reads many coefficient rows per lane
    memory_checks: int = DEFAULT_MEMORY_CHECKS

    # ------------------------------------------------------------------ names, shapes, flat layout
    @property
    def names(self) -> tuple[str, ...]:
        return tuple(v.name for v in self.variables)

    def variable(self, name: str) -> Variable:
        return next(v for v in self.variables if v.name == name)

    def shapes(self, n: int) -> dict[str, tuple]:
        return {v.name: tuple(v.shape(n)) for v in self.variables}

    def expected(self, n: int | None) -> str:
        """The expected names and shapes, for error messages."""
        return ", ".join(f"{v.name} (members, {', '.join(v.dims)})" if n is None else
                         f"{v.name} {(None,) + tuple(v.shape(n))}".replace("None", "members")
                         for v in self.variables)

    def body_count(self, state: dict) -> int:
        """n of a state with leading (member, …) axes: the first of the first variable's own axes."""
        first = self.variables[0]
        return int(np.shape(state[first.name])[-len(first.dims)])

    def rows(self, n: int) -> int:
        """Length of a member's flat state (every variable flattened, in declaration order)."""
        return sum(int(np.prod(v.shape(n))) for v in self.variables)

    def flatten(self, state: dict) -> np.ndarray:
        """(members, rows): the kernels' flat layout of a state with a leading member axis."""
        members = np.shape(state[self.variables[0].name])[0]
        return np.concatenate([np.asarray(state[v.name], dtype=np.float64).reshape(members, -1)
                               for v in self.variables], axis=1)

    def unflatten(self, flat: np.ndarray, n: int) -> dict:
        """Inverse of :meth:`flatten` for (..., rows) arrays: each variable (..., *shape)."""
        out, start = {}, 0
        for v in self.variables:
            shape = tuple(v.shape(n))
            size = int(np.prod(shape))
            out[v.name] = flat[..., start:start + size].reshape(flat.shape[:-1] + shape)
            start += size
        return out

    # ------------------------------------------------------------------------------------ admission
    def checked_arrays(self, state, n_bodies: int | None) -> dict:
        """The state's arrays as float64 with a leading member axis, refused (naming the variable,
        listing the expected names and shapes) when names or shapes are wrong or values not finite."""
        if not hasattr(state, "keys"):
            raise InvalidInput("state0", f"must be a mapping of state variables: {self.expected(n_bodies)}")
        missing = [name for name in self.names if name not in state]
        unknown = [name for name in state if name not in self.names]
        if missing or unknown:
            what = (f"missing {', '.join(missing)}" if missing else "") + ("; " if missing and unknown else "") + \
                   (f"unknown {', '.join(map(str, unknown))}" if unknown else "")
            raise InvalidInput("state0", f"{what}; the {self.name} space expects {self.expected(n_bodies)}")
        arrays = {name: np.array(state[name], dtype=np.float64) for name in self.names}
        first = arrays[self.names[0]]
        if first.ndim < min(2, 1 + len(self.variables[0].dims)) or first.shape[0] < 1:
            raise InvalidInput(self.names[0], f"must have a leading member axis: {self.expected(n_bodies)}, "
                               f"got shape {first.shape}")
        n = first.shape[1] if n_bodies is None else n_bodies
        members = first.shape[0]
        for name, array in arrays.items():
            expected = (members,) + tuple(self.variable(name).shape(n))
            if array.shape != expected:
                raise InvalidInput(name, f"must have shape {expected} (members, "
                                   f"{', '.join(self.variable(name).dims)}), got {array.shape}")
            if not np.all(np.isfinite(array)):
                raise InvalidInput(name, "must be finite")
        return arrays

    def admit(self, state, n_bodies: int | None, restart: bool = False) -> dict:
        """Validated state: shapes checked, values put on the manifold within STATE_TOLERANCE and
        refused beyond it; a ``restart`` state (an earlier run's final state) is taken bit for bit."""
        arrays = self.checked_arrays(state, n_bodies)
        return arrays if restart else self.project(arrays)

    def project(self, state: dict) -> dict:  # pragma: no cover - every space overrides it
        raise NotImplementedError

    # ------------------------------------------------------------------ retraction and shadows
    def particle_state(self, points: np.ndarray, angular_velocities: np.ndarray | None) -> dict:
        """The state (no member axis) of particles at unit vectors ``points`` (n, 3) with angular velocities
        (rad/s; None: at rest), for a configuration read from a file; only a space of particles has one."""
        raise InvalidInput("ensemble.initial", f"a configuration of particles is a state of particles on spheres, not "
                           f"of {self.name}")

    def normal_count(self, n: int) -> int:
        """Standard normals per member that :meth:`perturb` and :meth:`displace` consume."""
        raise NotImplementedError

    def tangent_dimension(self, n: int) -> int:
        """The dimension of the tangent space of a state with n bodies: at most this many Lyapunov
        exponents (shadows with independent displacements) exist.  The tangent directions
        :meth:`displace` draws from, unless a space says otherwise."""
        return self.normal_count(n)

    def perturb(self, state: dict, normals: np.ndarray, scale: float) -> dict:
        """States around one state (no member axis) moved along tangent Gaussians: ``normals`` (members,
        normal_count) scaled by ``scale``; returns arrays with a leading member axis."""
        raise NotImplementedError

    def displace(self, state: dict, directions: np.ndarray, d0: float) -> dict:
        """Benettin shadows of states (leading member axis) at distance ≈ d0 along tangent ``directions``
        (members, normal_count), on the manifold exactly."""
        raise NotImplementedError

    def distance(self, a: dict, b: dict) -> np.ndarray:
        """Benettin's metric between two batches of states: the Euclidean norm of their flat difference."""
        return np.sqrt(np.sum((self.flatten(a) - self.flatten(b)) ** 2, axis=-1))

    def describe_samplers(self) -> str:
        return ", ".join(sorted(self.samplers))

