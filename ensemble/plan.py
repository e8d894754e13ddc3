"""From a validated spec to work: member chunks × step segments, per-member parameters and initial
states.  A plan holds no per-member arrays, so it is cheap to send to every task; each task derives
what it needs for its own members from (spec, member ids).  What a state is comes from the system's
space (:mod:`kernels.spaces`): its variables, samplers and retraction."""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cached_property, lru_cache

import numpy as np

from armillary.kernels import (InvalidInput, carried_names, check_device, check_stochastic, execution_mode, get_system,
                               integrate, resolve_method)
from armillary.kernels.lyapunov import Shadow, displaced_shadow
from armillary.kernels.models import build_model, declared_model
from armillary.kernels.models.checks import check_states, gradient_error
from armillary.kernels.sections import Section, parameter_shapes, plan_sections
from armillary.kernels.all_pairs import PAIR_TERMS_PER_CORE_SECOND
from armillary.kernels.system_parallel import check_no_skin, cutoff_of, sums_all_pairs
from armillary.kernels.systems import MODELS, system_definition

from .particle_files import read_particle_file
from .initial import member_normals, shadow_directions, spectrum_directions
from .progress import final_state
from .spec import OPTION_SWEEPS, Spec


@lru_cache(maxsize=1)
def _npz_state(path: str, names: tuple[str, ...]) -> dict:
    """The initial state ``<name>0`` of each state variable in a .npz, read once per process (every
    chunk task of a worker needs it, and a .npz cannot be memory-mapped)."""
    try:
        with np.load(path) as data:
            return {name: data[name + "0"] for name in names}
    except (OSError, KeyError, ValueError) as error:
        expected = ", ".join(name + "0" for name in names)
        raise InvalidInput("ensemble.path", f"cannot read {expected} from {path!r}: {error}") from None


def _spec_field(field: str) -> str:
    """The spec key of a kernels' section field ``section.<name>[.<key>]``: ``analysis.section``,
    ``analysis.escape`` or ``analysis.sections.<name>``, then the key."""
    _, _, rest = field.partition(".")
    name = rest.split(".", 1)[0]
    if not rest:
        return "analysis.section"
    return f"analysis.{rest}" if name in ("section", "escape") else f"analysis.sections.{rest}"


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

    def __reduce__(self):
        # a worker gets the spec alone and rebuilds what it derives: a model's system is built from the spec's
        # text there (its generated module cannot be unpickled by reference in a spawned process)
        return Plan, (self.spec,)

    @property
    def has_system(self) -> bool:
        """Whether :attr:`system` is at hand: always, but for a store's model that this process has not built
        (a store's model code runs only when the store is run or resumed, never to read it back)."""
        return self.spec.model_source is None or not self.spec.stored or self.spec.system in MODELS

    @cached_property
    def system(self):
        """The system with the spec's preset and fixed parameters (sweeps applied per chunk); a model's is built
        from the model's text the spec carries (once per process), but for a spec read back from a store, whose
        model is used only if this process built it (by running the store, or :func:`armillary.load_model`)."""
        if not self.has_system:
            raise InvalidInput("system.model", f"{self.spec.model}: needs the model's own functions, and a store's model "
                               "code runs only when the store is run or resumed; build the model in this process "
                               "first (armillary.load_model(path) on the same text)")
        if self.spec.model_source is not None:
            build_model(self.spec.model_source, self.spec.model)
        return get_system(self.spec.system, self.spec.preset, **self.spec.params, **self._file_layout())

    @cached_property
    def file_configuration(self):
        """The particles of a GSD or extended XYZ ``ensemble.path`` (:func:`.particle_files.read_particle_file`, its
        last frame), None for any other initial state (a .npz or a store's end state)."""
        path = self.spec.initial_path
        if self.spec.initial != "file" or path.endswith(".npz") or "://" in path or os.path.isdir(path):
            return None
        try:
            return read_particle_file(path)
        except InvalidInput as refused:
            raise InvalidInput("ensemble.path", refused.message) from None

    def _file_layout(self) -> dict:
        """The parameters the configuration file fixes: each particle's type (by name) and diameter, the bonds and
        angles, for a system that takes them; a file of several types, or with bonds, for a system of one kind of
        unbonded particle is refused."""
        configuration = self.file_configuration
        if configuration is None:
            return {}
        layout = system_definition(self.spec.system).file_layout
        if layout is not None:
            return layout(self.spec.params, configuration._asdict())
        if configuration.bonds is not None and len(configuration.bonds):
            raise InvalidInput("ensemble.path", f"the file holds {len(configuration.bonds)} bonds; {self.spec.system} "
                               "has none (sphere_mixture takes bonds)")
        if configuration.type_ids is None:
            return {}
        kinds = np.unique(configuration.type_ids)
        if kinds.size > 1:
            names = ", ".join(configuration.type_names[k] for k in kinds)
            raise InvalidInput("ensemble.path", f"the file holds particles of {kinds.size} types ({names}); "
                               f"{self.spec.system} has one kind of particle (sphere_mixture takes types)")
        return {}

    @property
    def space(self):
        """The state space of the system (its variables, samplers, retraction); for a store's model, the one its
        text declares."""
        if not self.has_system:
            return declared_model(self.spec.model_source, self.spec.model).space
        return self.system.space

    @cached_property
    def n_bodies(self) -> int:
        """n of the state variables' shapes: fixed by the sampler, the file, the preset or the system."""
        sampler = self.space.samplers.get(self.spec.initial)
        if sampler is not None and sampler.bodies(self.spec.sampler) is not None:
            return sampler.bodies(self.spec.sampler)
        if self.spec.initial == "file":
            return self.space.body_count(self.file_state(0, 1))
        if self.system.preset is not None:
            return self.space.body_count(self.system.initial_state())
        if self.system.n_bodies is not None:
            return self.system.n_bodies
        raise InvalidInput("system.preset", f"{self.spec.system} needs a preset (or initial = \"file\") to fix the "
                           "number of bodies")

    def validate(self) -> None:
        """Check, before anything is written, what tasks would otherwise find out late: the number of
        bodies, every sweep grid point's parameter values, and the initial state's shape."""
        per_member = self.system.per_member_parameters()
        if per_member:  # the plan cuts members into chunks by sweeps only
            raise InvalidInput(f"system.params.{per_member[0]}", "has one more axis than its shape: a spec takes no "
                               "per-member values; vary it over members with a sweep, { values = [...] }")
        n = self.n_bodies
        points = self.spec.sweep_points
        if self.spec.initial == "section" and self.spec.sweeps:  # its energy is the system's own parameters'
            raise InvalidInput("ensemble.initial", '"section" seeds every member at one energy of the system\'s own '
                               "parameters; sweep them in separate runs (or seed the sweep with initial = \"file\")")
        for member in range(0, self.spec.members, self.spec.members // points):
            self.chunk_system(member, member + 1)
        # the state that `perturb` moves has member 0's bodies, and the retraction keeps what it moves admissible:
        # checking it needs no kernel, so `armillary check` does not load one (0.6 s)
        state = self.initial_state(0, 1) if self.spec.initial != "perturb" else {
            name: value[np.newaxis] for name, value in self.system.initial_state().items()}
        found = self.space.body_count(state)
        if self.system.n_bodies is not None and found != self.system.n_bodies:
            raise InvalidInput("ensemble.path", f"initial state has {found} bodies, {self.spec.system} with "
                               f"these parameters has {self.system.n_bodies}")
        if found != n:
            raise InvalidInput("ensemble.path", f"initial state has {found} bodies, expected {n}")
        self.space.admit(state, n)  # refuses a state off the manifold now, naming the variable
        spectrum = self.spec.lyapunov_spectrum
        if spectrum is not None and spectrum["count"] > self.space.tangent_dimension(n):
            raise InvalidInput("analysis.lyapunov_spectrum.count", f"must be at most the dimension of "
                               f"{self.spec.system}'s tangent space with {n} bodies, "
                               f"{self.space.tangent_dimension(n)}, got {spectrum['count']}")
        if self.system.definition.model is not None:  # a model's expressions, finite and SPD at the first chunk's states
            first = min(self.spec.chunk, self.spec.members)
            check_states(self.chunk_system(0, first), self.space.admit(self.initial_state(0, first), n))
        self.method  # refuses a method variant the system cannot take (adaptive vi), naming the option
        if self.method.stochastic:
            try:
                check_stochastic(self.method, self.chunk_system(0, 1), bool(self.spec.shadows), bool(self.sections))
            except InvalidInput as error:
                field = {"shadow": "analysis", "sections": _spec_field(f"section.{self.sections[0].name}")
                         if self.sections else "analysis", "method": "integrator.method"}[error.field]
                raise InvalidInput(field, error.message) from None
        if self.sections is not None:
            try:
                system = self.chunk_system(0, min(self.spec.chunk, self.spec.members))
                plan_sections(self.sections, self.space, n, parameter_shapes(system, n))
            except InvalidInput as error:  # the kernels name it section.<name>.<key>
                raise InvalidInput(_spec_field(error.field), error.message) from None
            if self.mode == "system":
                raise InvalidInput(_spec_field(f"section.{self.sections[0].name}"), "sections run in the ensemble "
                                   "mode (members in parallel); this run is one large system stepped in parallel")
        if self.spec.skin is not None and self.mode != "system":
            raise InvalidInput("integrator.skin", "is a setting of the system-parallel mode's neighbour lists: one "
                               "member (or chunk = 1) of a pair system with a finite cutoff; this run is ensemble mode")
        if self.spec.skin is not None and sums_all_pairs(self.chunk_system(0, 1), n):
            try:
                check_no_skin(self.spec.skin)
            except InvalidInput as error:
                raise InvalidInput("integrator.skin", error.message) from None
        if self.spec.device is not None:  # what the GPU runs (whether this machine has one: where it runs, see runs.py)
            try:
                check_device(self.spec.device, self.chunk_system(0, 1), self.method, self.sections, False, self.mode,
                             here=False, fma=self.spec.fma is not False, bodies=n)
            except InvalidInput as error:
                raise InvalidInput("execution.device", error.message) from None
        optional = {d.name for d in self.space.optional_diagnostics}
        if optional & set(self.spec.variables) and self.mode != "system":
            raise InvalidInput("output.variables", f"{', '.join(sorted(optional & set(self.spec.variables)))} is "
                               "measured by the system-parallel mode only: one member of a pair system with a finite "
                               "cutoff, method vi, no [analysis] indicators")

    def model_gradient_error(self, count: int) -> float:
        """A model's derived ∂V/∂q against central differences of V at ``count`` random admissible states (member
        0's initial state moved by the space's retraction along random directions, 0.3 of its unit scale, or a
        hundredth of the cutoff for a pair potential;
        :func:`~kernels.models.checks.gradient_error`), after checking every expression finite and the inertia
        positive definite there (InvalidInput otherwise)."""
        state = {name: value[0] for name, value in self.space.admit(self.initial_state(0, 1), self.n_bodies).items()}
        normals = np.random.default_rng(self.spec.seed).standard_normal((count, self.space.normal_count(self.n_bodies)))
        system = self.chunk_system(0, 1)
        # particles of a pair potential with a cutoff move a hundredth of it: 0.3 rad each would bring neighbours
        # of a liquid to within 1e-3 of each other (measured on sphere_lj.py: ∂V/∂q error 3), where the pair terms
        # are far too steep for a difference step of 1e-5 (0.01 r_c: 3e-7)
        cutoff = cutoff_of(system, system.broadcast(1, self.n_bodies))
        scale = 0.01 * cutoff if np.isfinite(cutoff) else 0.3
        moved = self.space.admit(self.space.perturb(state, normals, scale), self.n_bodies)
        check_states(system, moved, "the random admissible state")
        return gradient_error(system, moved)

    @cached_property
    def method(self):
        """The kernel-level method the spec's method and options run (adaptive vi is a variant of vi):
        its carried solver state, status codes and sampling."""
        try:
            return resolve_method(self.system.definition, self.spec.method, self.spec.options)
        except InvalidInput as error:
            raise InvalidInput(f"integrator.{error.field}", error.message) from None

    @property
    def sections(self) -> tuple[Section, ...] | None:
        """``[analysis] section``, ``sections`` and ``escape`` as the kernels take them (named "section", by their
        names, and "escape", as their store variables are; the escape keeps its first crossing), or None."""
        sections = []
        for name, table in self.spec.surfaces.items():
            record = table.get("record")
            sections.append(Section(name, table["expression"], table["direction"],
                                    tuple(record) if record is not None else None, table["max_crossings"],
                                    function=self._section_function(name, table)))
        if self.spec.escape is not None:
            table = self.spec.escape
            sections.append(Section("escape", table["expression"], table["direction"], max_crossings=1,
                                    stop=table["stop"], function=self._section_function("escape", table)))
        return tuple(sections) or None

    def _section_function(self, name: str, table: dict):
        """The model file's function of a section's name, for a section without an expression; InvalidInput
        naming the expression when there is none."""
        if table["expression"] is not None:
            return None
        model = self.system.definition.model
        function = model.functions.get(name) if model is not None else None
        if function is None:
            raise InvalidInput(_spec_field(f"section.{name}.expression"), "is required, unless the model file "
                               f"defines the section as a function {name}({', '.join(self.space.names)}, p)")
        return function

    def recorded(self, section: str) -> tuple[str, ...]:
        """The state variables stored at each crossing of the named section (every one unless ``record`` chooses)."""
        return tuple(self.spec.surfaces[section].get("record") or self.space.names)

    @property
    def tracks_encounters(self) -> bool:
        """Whether members record their least close-encounter separation: ``min_separation`` is among
        the spec's output variables (only systems that declare encounters allow it)."""
        return "min_separation" in self.spec.variables

    @cached_property
    def forced(self) -> bool:
        """Whether forces act on some member (sweeps included): the store then keeps ``work``."""
        return self.chunk_system(0, self.spec.members).forced

    @property
    def heat(self) -> bool:
        """Whether the method stores the heat its bath gives (langevin): the store then keeps ``heat``."""
        return self.method.heat

    @property
    def minimiser(self) -> bool:
        """Whether the method minimises V (fire): the store then keeps ``largest_force`` and ``minimisation_steps``."""
        return self.method.minimiser

    @cached_property
    def carried(self) -> tuple[str, ...]:
        """What a segment hands the next beside the state: the method's solver state, and for a forced
        run the work done so far."""
        return carried_names(self.method, self.chunk_system(0, self.spec.members))

    @property
    def samples_off_grid(self) -> bool:
        """Whether samples are taken off their nominal times (adaptive vi), their lags stored as ``sample_lag``."""
        return self.method.samples_off_grid

    @cached_property
    def mode(self) -> str:
        """How the kernels run each chunk: "system" (one large member per chunk, parallel inside each step, on all
        of its worker's cores: a run of one member, or replicas in chunks of one) or "ensemble" (members in
        parallel, one core per worker)."""
        return execution_mode(self.chunk_system(0, 1), self.spec.method, self.spec.chunk, self.n_bodies,
                              self.spec.shadows is not None, **self.spec.options)

    @property
    def pair_cost(self) -> str | None:
        """For a pair potential without a cutoff (every pair summed, O(N²)), one line: the pair terms of a gradient
        (one a step) and the time a step would take at PAIR_TERMS_PER_CORE_SECOND on the cores a chunk runs on
        (the system mode: n(n − 1) terms on every core of its worker; the ensemble mode: n(n − 1)/2 a member on one
        core); None for any other system."""
        system = self.chunk_system(0, 1)
        if system.space.layout != "sphere" or not sums_all_pairs(system, self.n_bodies):
            return None
        n = self.n_bodies
        if self.mode == "system":
            terms, cores, per = n * (n - 1), len(os.sched_getaffinity(0)), ""
        else:
            terms, cores, per = n * (n - 1) // 2, 1, " a member"
        seconds = terms / (PAIR_TERMS_PER_CORE_SECOND * cores)
        return (f"armillary: all pairs (no cutoff): {terms} pair terms a gradient{per}, one gradient a step: about "
                f"{seconds:.2g} s a step on {cores} core{'s' * (cores > 1)} at {PAIR_TERMS_PER_CORE_SECOND:.1e} pair "
                f"terms/s a core (Coulomb, benchmarks/all_pairs.py)")

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
        sweeps = self.spec.grid
        if not sweeps:
            return {}
        point = np.asarray(member_ids) // (self.spec.members // self.spec.sweep_points)
        indices = np.unravel_index(point, tuple(len(s.values) for s in sweeps))
        return {s.name: np.asarray(s.values)[index] for s, index in zip(sweeps, indices)}

    def member_options(self, first: int, stop: int) -> dict:
        """The method's options for members [first, stop): the spec's, each swept bath option (temperature,
        friction, diffusion, cooling_rate, active's speed and rotational_diffusion) as one value per member; a
        minimisation's step limit ``max_steps`` defaults to the run's last step, not each segment's end."""
        options = dict(self.spec.options)
        if self.method.minimiser and options.get("max_steps") is None:
            options["max_steps"] = self.spec.n_steps
        if not self.spec.option_sweeps:
            return options
        values = self.sweep_values(np.arange(first, stop))
        for path, coordinate in OPTION_SWEEPS.items():
            if coordinate in values:
                key, _, inner = path.partition(".")
                if inner:
                    options[key] = {**options[key], inner: values[coordinate]}
                else:
                    options[key] = values[coordinate]
        return options

    def chunk_system(self, first: int, stop: int):
        """The system with per-member values of every swept parameter for members [first, stop).

        A swept per-body or vector parameter takes the sweep's value for every component; a swept
        component (``phase[1]``) only for that one, the others keeping the parameter's fixed value."""
        values = self.sweep_values(np.arange(first, stop))
        if not values:
            return self.system
        shaped = {}
        for sweep in self.spec.sweeps:
            per_member, fixed = values[sweep.name], np.asarray(self.system.params[sweep.parameter])
            if sweep.component is None:
                shaped[sweep.parameter] = np.broadcast_to(per_member.reshape((-1,) + (1,) * fixed.ndim),
                                                          (stop - first,) + fixed.shape)
                continue
            self._check_component(sweep)
            swept = shaped.setdefault(sweep.parameter, np.repeat(fixed[np.newaxis], stop - first, axis=0))
            swept[:, sweep.component] = per_member.reshape((-1,) + (1,) * (fixed.ndim - 1))
        return self.system.with_params(**shaped)

    def _check_component(self, sweep) -> None:
        """Refuse a component sweep whose index is beyond the parameter's first own axis in this system
        (its preset and fixed parameters bound)."""
        parameter = self.system.definition.parameter(sweep.parameter)
        count = np.shape(self.system.params[sweep.parameter])[0]
        if sweep.component >= count:
            allowed = f"allowed: 0 to {count - 1}" if count else "none can be swept"
            raise InvalidInput(f"system.params.{sweep.name}", f"index {sweep.component} is out of range: "
                               f"{sweep.parameter} ({parameter.shape}) has {count} entries in this "
                               f"{self.spec.system}; {allowed}")

    def initial_state(self, first: int, stop: int) -> dict:
        """The initial state of members [first, stop): each state variable with a leading member axis;
        depends only on (seed, member id)."""
        spec, ids = self.spec, np.arange(first, stop)
        if spec.initial == "file":
            return self.file_state(first, stop)
        sampler = self.space.samplers.get(spec.initial)
        if sampler is not None:
            return sampler.draw(self.system, self.n_bodies, ids, spec.seed, spec.sampler,
                                lambda count: member_normals(spec.seed, ids, count), integrate)
        state = self.system.initial_state()
        if spec.initial == "perturb":
            normals = member_normals(spec.seed, ids, self.space.normal_count(self.n_bodies))
            return self.space.perturb(state, normals, spec.scale)
        return {name: np.repeat(value[np.newaxis], stop - first, axis=0) for name, value in state.items()}

    def initial_shadow(self, first: int, stop: int, state: dict) -> Shadow:
        """The shadows of members [first, stop) at ``state`` for the spec's indicators, displaced by d0 along
        directions drawn from each member's seed (the first shadow's as a lone Benettin shadow's, the
        others' from a stream of their own), by the space's retraction."""
        shadows, ids = self.spec.shadows, np.arange(first, stop)
        normals = self.space.normal_count(self.n_bodies)
        directions = np.empty((stop - first, shadows["count"], normals))
        directions[:, 0] = shadow_directions(normals, ids, self.spec.seed)
        directions[:, 1:] = spectrum_directions(normals * (shadows["count"] - 1), ids, self.spec.seed).reshape(
            stop - first, shadows["count"] - 1, normals)
        return displaced_shadow(self.space, state, directions, shadows["d0"], shadows["renormalise_every"])

    def file_state(self, first: int, stop: int) -> dict:
        """Members [first, stop) of ``ensemble.path``: a .npz with ``<name>0`` for each state variable
        (with a leading member axis, or one state for every member), or a finished store, whose final
        state is taken."""
        path, names = self.spec.initial_path, self.space.names
        if path.endswith(".npz"):
            state = _npz_state(path, names)
            first_name = names[0]
            base = len(self.space.variable(first_name).dims)
            single = state[first_name].ndim == base
            if single:
                state = {name: value[np.newaxis] for name, value in state.items()}
            count = state[first_name].shape[0]
            if count not in (1, self.spec.members) or any(value.shape[0] != count for value in state.values()):
                shapes = ", ".join(f"{name}0 {value.shape}" for name, value in state.items())
                raise InvalidInput("ensemble.path", f"{path!r} must hold one state or one per member (members = "
                                   f"{self.spec.members}) for each of {', '.join(n + '0' for n in names)}; got {shapes}")
            rows = slice(0, 1) if count == 1 else slice(first, stop)
            return {name: np.broadcast_to(value[rows], (stop - first,) + value.shape[1:]).copy()
                    for name, value in state.items()}
        configuration = self.file_configuration
        if configuration is not None:
            state = self.space.particle_state(configuration.points, configuration.angular_velocities)
            return {name: np.repeat(value[np.newaxis], stop - first, axis=0) for name, value in state.items()}
        return final_state(path, names, first, stop, self.spec.members)
