"""The one entry point every later layer uses: :func:`integrate`, for every state space."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import domain, flat_runner, sphere_runner, system_parallel
from .blocks import default_threads
from .caches import kernel_cache_directory
from .errors import InvalidInput
from .integrators import ACTIVE_KEYS, ADAPTIVE_VI, FORMULATIONS_OF, METHODS, Method, methods_for
from .integrators.fire import MAX_STEP_FACTOR
from .lyapunov import Shadow, indicator_rows
from .noise import noise_key
from .schedules import checked_knots
from .sections import Section, parameter_shapes, plan_sections
from .systems import SYSTEMS, System

#: the kernels' runner of each space layout (see StateSpace.layout)
RUNNERS = {"sphere": sphere_runner.run, "flat": flat_runner.run}


@dataclass(frozen=True)
class Trajectory:
    """Result of :func:`integrate`.  Sample 0 is the initial state; sample s is step s·save_every.

    state: each state variable of the system's space by name, (members, samples, *shape) (0 samples
    when not requested in ``outputs``); final: each variable after the last step, (members, *shape)
    (the restart point); energy (J) and diagnostics (each of the space's constraint diagnostics by
    name, plus ``temperature`` in the system-parallel mode): (members, samples); status (members; see
    :mod:`kernels.status`) and failed_step (−1 if none); solver_iterations: max Newton iterations in
    any step (implicit methods) or accepted steps (rk45, adaptive vi); carry: the method's per-member
    solver state a later call continues from (rk45: ``step_size``, the step it would take next, s;
    adaptive vi: ``step_density`` (1/s) and ``sample_lag`` (s)).
    min_separation (members,): the least close-encounter separation over every step of this call,
    when ``outputs`` lists it (systems that declare encounters; sphere_nbody: min over pairs of
    ‖q_i × q_j‖ = √(1 − (q_i·q_j)²)), else None.
    sample_lag (members, samples): adaptive vi only (else None): each sample is the first step at or
    past its nominal time, and this is by how much (s).
    work (members, samples): forced systems only (else None): W(t) = ∫ Σ_i g_i·ω_i dt (J), the work of
    the forces since the first call (continued through ``carry["work"]``), by the trapezoidal rule over
    the steps, so that E(t) − E(0) − W(t) is the integrator's energy error, not the forcing.
    Failed members hold NaN from their failing step on.
    With shadows (see :mod:`kernels.lyapunov`): log_growth (members, samples), ln of the first shadow's
    accumulated separation growth; spectrum_growth (members, samples, k), every shadow's (the
    exponents' numerators); megno (⟨Y⟩), sali and gali (GALI_k; NaN with one shadow) (members,
    samples), as of the last renormalisation at or before each sample; and shadow_final, the shadows
    after the last step; without: log_growth has 0 samples and the others are None.
    Attribute access reads the dicts: ``run.q`` is ``run.state["q"]``, ``run.unit_error`` is
    ``run.diagnostics["unit_error"]``, ``run.q_final`` is ``run.final["q"]``.
    """

    time: np.ndarray
    state: dict
    final: dict
    energy: np.ndarray
    diagnostics: dict
    status: np.ndarray
    failed_step: np.ndarray
    solver_iterations: np.ndarray
    carry: dict
    method: str
    implicit: bool
    log_growth: np.ndarray
    shadow_final: Shadow | None
    #: "ensemble" (members in parallel) or "system" (one member, parallel inside each step)
    mode: str = "ensemble"
    #: system mode only: kinetic temperature T/n (J: k_B T with 2 degrees of freedom per body, k_B = 1),
    #: (members, samples); how many times the Verlet lists were built and the last list's skin (m) (members,)
    temperature: np.ndarray | None = None
    neighbour_rebuilds: np.ndarray | None = None
    neighbour_skin: np.ndarray | None = None
    min_separation: np.ndarray | None = None
    sample_lag: np.ndarray | None = None
    spectrum_growth: np.ndarray | None = None
    megno: np.ndarray | None = None
    sali: np.ndarray | None = None
    gali: np.ndarray | None = None
    work: np.ndarray | None = None
    #: stochastic methods that store it (langevin): Q(t) (members, samples), the heat the bath gave since the first
    #: call (J, continued through ``carry["heat"]``), so that E(t) − E(0) − Q(t) is the integrator's own error
    heat: np.ndarray | None = None
    #: with ``sections``: each section's crossings by name (see :mod:`kernels.sections`): ``time`` (members, C)
    #: (s; NaN past a member's count; C the most crossings any member stored, at most max_crossings), ``count`` (members,) (all crossings found in this call, also those past
    #: max_crossings) and ``state`` {variable: (members, C, *shape)} at each crossing, on the manifold
    sections: dict | None = None
    #: a minimisation (fire) only: the largest tangential force max_i |P_i ∂V/∂q_i| at each sample (J), (members,
    #: samples); its ``energy`` is V alone, ``solver_iterations`` the FIRE steps this call took, ``carry["fire_steps"]``
    #: those of the whole minimisation and ``status`` NOT_CONVERGED where the step limit came first
    largest_force: np.ndarray | None = None

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        fields = self.__dict__
        for table in ("state", "diagnostics", "carry"):
            if name in fields.get(table, {}):
                return fields[table][name]
        if name.endswith("_final") and name[:-6] in fields.get("final", {}):
            return fields["final"][name[:-6]]
        raise AttributeError(f"{type(self).__name__} has no attribute or variable {name!r}")

    def spectrum(self, elapsed: np.ndarray | None = None) -> np.ndarray:
        """The first k finite-time Lyapunov exponents (1/s) at each sample, (members, samples, k), as
        :meth:`lyapunov` for each shadow."""
        elapsed = self.time if elapsed is None else np.asarray(elapsed, dtype=np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(elapsed[:, np.newaxis] > 0, self.spectrum_growth[:, :elapsed.size]
                            / elapsed[:, np.newaxis], np.nan)

    def lyapunov(self, elapsed: np.ndarray | None = None) -> np.ndarray:
        """Finite-time maximal Lyapunov exponent (1/s) at each sample, (members, samples):
        log_growth / t, with t the time since the shadows were displaced (``elapsed``: one per
        leading sample, default this call's ``time``); NaN at t = 0."""
        elapsed = self.time if elapsed is None else np.asarray(elapsed, dtype=np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(elapsed > 0, self.log_growth[:, :elapsed.size] / elapsed, np.nan)


def temperature_schedule_knots(value) -> np.ndarray:
    """A temperature schedule [[t, T], …] checked: (K, 2) float64 knots, t₀ = 0 and increasing (s), T >= 0 (J)."""
    return checked_knots(value, "temperature_schedule", "T (J)", "[[0.0, 1.0], [10.0, 0.1]]", 0.0)


def _positive_int(field: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise InvalidInput(field, f"must be an integer >= 1, got {value!r}")
    return int(value)


def _method_options(method: str, options: dict, n_steps: int, dt: float,
                    start_step: int = 0) -> tuple[Method, dict, np.ndarray]:
    """The method that runs (a variant its options select), the merged options and the kernel's
    option vector (a minimiser's step limit defaults to the end of this call, start_step + n_steps)."""
    spec = METHODS[method]
    for name in options:
        if name not in spec.options:
            allowed = ", ".join(spec.options) or "none"
            raise InvalidInput(name, f"unknown option of method {method!r}; allowed: {allowed}")
    merged = {**spec.options, **options}
    for name, allowed in spec.choices.items():
        if merged[name] is not None and merged[name] not in allowed:
            raise InvalidInput(name, f"unknown {name} {merged[name]!r} of method {method!r}; allowed: {', '.join(allowed)}")
    for name in ("newton_tol", "rtol", "atol", "tolerance"):
        if name in merged and not (np.isfinite(merged[name]) and merged[name] > 0):
            raise InvalidInput(name, f"must be > 0, got {merged[name]!r}")
    if spec.stochastic and merged["temperature_schedule"] is not None:
        merged["temperature_schedule"] = temperature_schedule_knots(merged["temperature_schedule"])
        for name in ("temperature", "cooling_rate"):
            if name in options:
                raise InvalidInput(name, "give either temperature_schedule or temperature (with cooling_rate), not both")
        merged["temperature"] = merged["temperature_schedule"][0, 1]
    if spec.stochastic:
        _bath_values("temperature", merged["temperature"], 0.0, "J", f"{method} needs the bath's temperature")
        _bath_values("friction", merged["friction"], None, "1/s", "")
        _bath_values("cooling_rate", merged["cooling_rate"], 0.0, "J/s", "")
    if merged.get("diffusion") is not None:
        _bath_values("diffusion", merged["diffusion"], None, "rad²/s", "")
        if "friction" in options:
            raise InvalidInput("diffusion", "give either friction or diffusion, not both (D = T/ζ)")
        if not np.all(np.asarray(merged["temperature"], dtype=np.float64) > 0):
            raise InvalidInput("diffusion", "needs a temperature > 0: the friction coefficient is ζ = T/D")
    if merged.get("active") is not None:
        active = merged["active"]
        if not isinstance(active, dict) or set(active) != set(ACTIVE_KEYS):
            raise InvalidInput("active", f"must be {{ speed = v0 (rad/s), rotational_diffusion = D_r (rad²/s) }}, "
                               f"got {active!r}")
        for key, least in ACTIVE_KEYS.items():
            _bath_values(f"active.{key}", active[key], least, "rad/s" if key == "speed" else "rad²/s", "")
    if "newton_max_iterations" in merged:
        _positive_int("newton_max_iterations", merged["newton_max_iterations"])
    if spec.minimiser:
        merged.update(_minimiser_options(merged, start_step + n_steps, dt))
    elif "max_steps" in merged:
        merged["max_steps"] = _positive_int("max_steps", merged["max_steps"] if merged["max_steps"] is not None
                                            else 100 * n_steps + 10_000)
    if "max_step" in merged and not spec.minimiser:
        merged["max_step"] = dt if merged["max_step"] is None else merged["max_step"]
        if not (isinstance(merged["max_step"], (int, float)) and np.isfinite(merged["max_step"])
                and 0 < merged["max_step"] <= dt):
            raise InvalidInput("max_step", f"must be in (0, dt = {dt!r}] (s), got {merged['max_step']!r}")
    runs = spec.resolve(merged)
    return runs, merged, np.array([merged[name] for name in runs.option_vector], dtype=np.float64)


def _minimiser_options(options: dict, last_step: int, dt: float) -> dict:
    """fire's options checked, with their defaults: force_tolerance and energy_tolerance finite and > 0 (an unused
    energy_tolerance travels as 0), max_steps a positive integer (default ``last_step``, the end of the call or the
    run), max_step finite and >= dt (default 10 dt)."""
    checked = {}
    for name in ("force_tolerance", "energy_tolerance"):
        value = options[name]
        if value is None and name == "energy_tolerance":
            checked[name] = 0.0
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float, np.floating)) or not (
                np.isfinite(value) and value > 0):
            raise InvalidInput(name, f"must be a finite number > 0, got {value!r}")
        checked[name] = float(value)
    checked["max_steps"] = _positive_int("max_steps", last_step if options["max_steps"] is None
                                         else options["max_steps"])
    largest = MAX_STEP_FACTOR * dt if options["max_step"] is None else options["max_step"]
    if isinstance(largest, bool) or not isinstance(largest, (int, float, np.floating)) or not (
            np.isfinite(largest) and largest >= dt):
        raise InvalidInput("max_step", f"fire's largest step must be finite and >= dt = {dt!r} (s), got {largest!r}")
    checked["max_step"] = float(largest)
    return checked


def _bath_values(name: str, value, least: float | None, unit: str, missing: str) -> np.ndarray:
    """A bath option as float64 (a scalar or one value per member), refused unless finite and > 0 (>= ``least``
    where that is given)."""
    if value is None:
        raise InvalidInput(name, f"{missing} ({unit}, k_B = 1)")
    try:
        values = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise InvalidInput(name, f"must be a number or one per member ({unit}), got {value!r}") from None
    bound = "> 0" if least is None else f">= {least:g}"
    if values.ndim > 1 or not np.all(np.isfinite(values) & ((values > 0) if least is None else (values >= least))):
        raise InvalidInput(name, f"must be finite and {bound} ({unit}), a scalar or one per member; got {value!r}")
    return values


def _check_variant(definition, method: str, runs: Method, options: dict) -> None:
    """Refuse a variant (adaptive vi, a formulation of a Runge–Kutta method) for a system it cannot step
    (InvalidInput naming the option)."""
    chosen = options.get("formulation")
    if chosen is not None and "formulation" in METHODS[method].choices:
        offered = FORMULATIONS_OF.get(definition.space.name)
        if offered is None:
            raise InvalidInput("formulation", f"{definition.name} is on {definition.space.name}, which has no "
                               f"formulations to choose from: leave formulation unset")
        if chosen not in offered:
            raise InvalidInput("formulation", f"{chosen!r} is not a formulation of {definition.space.name}; "
                               f"allowed: {', '.join(offered)}")
        if not runs.supports(definition):
            raise InvalidInput("formulation", f"the {chosen} formulation needs a system with "
                               f"{', '.join(sorted(runs.spaces[definition.space.name][0]))}; {definition.name} "
                               f"has {', '.join(sorted(definition.provides))}")
    if runs is not ADAPTIVE_VI:
        return
    if definition.encounter is None or not definition.diagonal_inertia or options.get("implicit"):
        able = [name for name, d in SYSTEMS.items() if getattr(d, "encounter", None) is not None and d.diagonal_inertia]
        raise InvalidInput("adaptive", f"adaptive vi steps the explicit (diagonal M, implicit = false) vi of systems "
                           f"that declare close encounters, not {definition.name}; allowed systems: {', '.join(able)}")


def resolve_method(definition, method: str, options: dict) -> Method:
    """The kernel-level method that ``method`` with ``options`` runs for systems of ``definition``
    (adaptive vi is a variant of vi with its own carried state and sampling), refusing a variant the
    system cannot take.  For the layers above the kernels (store layout, checkpoints)."""
    runs = METHODS[method].resolve(options)
    _check_variant(definition, method, runs, options)
    return runs


def _checked_shadow(shadow: Shadow, system: System, method: str, runs: Method, state: dict) -> Shadow:
    if not isinstance(shadow, Shadow):
        raise InvalidInput("shadow", f"must be a kernels.lyapunov.Shadow, got {type(shadow).__name__}")
    if runs.lanes == 1:
        fixed = [m for m in methods_for(system.definition) if METHODS[m].lanes is None]
        raise InvalidInput("shadow", f"Benettin shadows need a fixed-step method, not {method!r} ({runs.name}); "
                           f"allowed: {', '.join(fixed)}")
    members = next(iter(state.values())).shape[0]
    count = np.shape(shadow.log_growth)[1] if np.ndim(shadow.log_growth) == 2 else 0
    if count < 1:
        raise InvalidInput("shadow.log_growth", f"must have shape ({members}, k) with k >= 1 shadows per member")
    for name, value in state.items():
        expected = (members, count) + value.shape[1:]
        if np.shape(shadow.state.get(name)) != expected:
            raise InvalidInput("shadow", f"the shadows' {name} must have shape {expected} (members, k, ...)")
    for name, shape in (("log_growth", (members, count)), ("reference", (members, count)),
                        ("indicators", (members, indicator_rows(count)))):
        if np.shape(getattr(shadow, name)) != shape:
            raise InvalidInput(f"shadow.{name}", f"must have shape {shape}")
    if not (np.isfinite(shadow.d0) and shadow.d0 > 0):
        raise InvalidInput("shadow.d0", f"must be > 0, got {shadow.d0!r}")
    _positive_int("shadow.renormalise_every", shadow.renormalise_every)
    if isinstance(shadow.step_offset, bool) or not isinstance(shadow.step_offset, (int, np.integer)) \
            or shadow.step_offset < 0:
        raise InvalidInput("shadow.step_offset", f"must be an integer >= 0, got {shadow.step_offset!r}")
    return shadow


def carried_names(runs: Method, system: System) -> tuple:
    """What a call carries to the next, in column order: the method's solver state, then for a forced
    system the work its forces have done (J), or for a method that stores it the heat its bath gave (J),
    which the kernels keep in the last column."""
    return runs.carry + (("work",) if system.forced else ("heat",) if runs.heat else ())


def _initial_carry(runs: Method, names: tuple, options: dict, carry: dict | None, dt: float,
                   members: int) -> np.ndarray:
    """The carried state, (members, C) in the order of ``names``: a later call's ``carry`` where
    finite, else the start (rk45 ``step_size``: ``first_step``, else dt; adaptive vi: ``step_density``
    NaN, i.e. the target density of the initial state, and ``sample_lag`` 0; ``work`` 0)."""
    first = dt if options.get("first_step") is None else options["first_step"]
    start = {"step_size": first, "step_density": np.nan, "sample_lag": 0.0, "work": 0.0, "heat": 0.0,
             **(runs.carry_start(dt) if runs.carry_start is not None else {})}
    carried = np.zeros((members, max(1, len(names))))
    for column, name in enumerate(names):
        carried[:, column] = np.broadcast_to(np.asarray(start[name], dtype=np.float64), (members,))
    if carry:
        unknown = set(carry) - set(names)
        if unknown:
            raise InvalidInput("carry", f"unknown {sorted(unknown)}; method {runs.name!r} carries "
                               f"{', '.join(names) or 'nothing'} here")
        for column, name in enumerate(names):
            if name in carry:
                given = np.asarray(carry[name], dtype=np.float64)
                carried[:, column] = np.where(np.isfinite(given), given, carried[:, column])
    if "step_size" in runs.carry and not np.all(np.isfinite(carried[:, 0]) & (carried[:, 0] > 0)):
        raise InvalidInput("first_step", "must be > 0")
    return carried


def integrate(system: System, method: str, state0, dt: float, n_steps: int, save_every: int = 1, *,
              outputs=None, threads: int | None = None, restart: bool = False, shadow: Shadow | None = None,
              mode: str | None = None, skin: float | str | None = None, carry: dict | None = None, start_step: int = 0,
              sections: tuple[Section, ...] | Section | None = None, seed: int = 0, member_ids=None,
              device: str = "cpu", fma: bool = True, exchange=None, **method_options) -> Trajectory:
    """Integrate every member of an ensemble with one method, on the system's state space.

    ``state0``: a mapping of the space's state variables, each with a leading member axis
    ({"q", "omega"} (members, n, 3) on (S²)ⁿ; {"R": (members, n, 3, 3), "Omega": (members, n, 3)} on
    SO(3)ⁿ); ``dt`` (s) the step (rk45: the first step and the unit of time of ``n_steps``);
    ``save_every`` steps between saved samples.  Members run in parallel on ``threads`` Numba threads
    (default: all).  ``outputs`` chooses which state variables keep samples (default: all; energy and
    the constraint diagnostics are always computed; ``"min_separation"`` tracks close encounters of
    systems that declare them).  ``restart=True`` takes ``state0`` bit for bit
    as an earlier call's ``final`` (and ``carry`` its ``carry``), so that a run continued in segments
    equals an uninterrupted one and methods that drift off the manifold are not silently projected
    back; otherwise the state is put on the manifold within 1e-6 and refused beyond.
    Method options: vi — implicit, newton_tol, newton_max_iterations, and adaptive (reversible adaptive
    steps for systems with close encounters, see :mod:`kernels.integrators.adaptive_vi`) with
    tolerance, max_step (default dt) and max_steps; lgvi — newton_tol,
    newton_max_iterations; rk45 — rtol, atol, max_steps, first_step (scalar or per member); fire (a minimisation of V,
    see :mod:`kernels.integrators.fire`) — force_tolerance, energy_tolerance, max_steps (FIRE steps over the whole
    minimisation before a member stops with status NOT_CONVERGED; default: start_step + n_steps, this call's end),
    max_step (default 10 dt), its state continued through ``carry``.
    ``shadow`` (fixed-step methods): Benettin shadows of the members (see :mod:`kernels.lyapunov`;
    :func:`kernels.lyapunov.displaced_shadow` makes the first), stepped alongside them; returned in
    ``shadow_final``.  ``mode`` and ``skin``: the (S²)ⁿ system-parallel mode (see
    :mod:`kernels.system_parallel`).  ``start_step``: the global index of the step this call continues
    after (time origin start_step·dt, what time-dependent forces see; with a shadow, its step_offset).
    ``sections`` (fixed-step methods, ensemble mode): :class:`~kernels.sections.Section` s whose crossings
    are located inside the steps and returned in ``Trajectory.sections``.
    Stochastic methods (langevin, brownian; :mod:`kernels.integrators.langevin`): temperature (J), cooling_rate
    (J/s: the bath's temperature falls as max(T − rate·t, 0) with the run's time t) or instead
    temperature_schedule [[0, T₀], [t₁, T₁], …] (piecewise linear in t, s and J), friction (1/s) and, for
    brownian, diffusion (rad²/s, instead of friction) and active = {speed, rotational_diffusion}, each a scalar or
    one per member.  Their noise is a function of ``seed`` (an integer >= 0), each member's global id
    (``member_ids``, default 0 … members − 1: give a chunk of a larger ensemble its own ids), the global step and
    the body (:mod:`kernels.noise`), so a run split in chunks or segments has the same bits.
    ``device``: "cpu" (the default) or "cuda", the ensemble on one CUDA GPU, one thread per member
    (:mod:`kernels.gpu`: its first tranche of methods and spaces), or the system mode there, one thread per
    particle (:mod:`kernels.gpu_system`: vi, langevin and brownian); the rest, and a machine without a GPU, are
    refused naming what is missing; ``fma`` (cuda): False compiles the GPU's kernel without fused multiply–adds,
    so that its bits are the CPU's (but for libdevice's transcendental functions).
    ``exchange``: the ranks one system-mode member of a pair potential with a cutoff runs on
    (:mod:`kernels.domain`; :class:`armillary.ensemble.mpi.MpiExchange` over MPI): each rank passes the state of the
    ids it holds (:func:`kernels.domain.id_range` of the member's particles) and gets theirs back: no rank holds
    every particle's state.
    Bad input raises :class:`~kernels.errors.InvalidInput` before
    any compute.
    """
    if not isinstance(system, System):
        raise InvalidInput("system", f"must come from armillary.get_system, got {type(system).__name__}")
    kernel_cache_directory()  # before any cached kernel, the space's helpers included, is loaded
    if method not in METHODS:
        raise InvalidInput("method", f"unknown method {method!r}; allowed: {', '.join(METHODS)}")
    space = system.space
    if not METHODS[method].supports(system.definition, system.provides):
        allowed = [name for name in methods_for(system.definition)
                   if METHODS[name].supports(system.definition, system.provides)]
        raise InvalidInput("method", f"{method!r} does not support {system.name} (space {space.name}) with these "
                           f"parameters; allowed: {', '.join(allowed)}")
    if not (isinstance(dt, (int, float, np.floating)) and np.isfinite(dt) and dt > 0):
        raise InvalidInput("dt", f"must be a finite number > 0 (s), got {dt!r}")
    n_steps = _positive_int("n_steps", n_steps)
    save_every = _positive_int("save_every", save_every)
    outputs = space.names if outputs is None else tuple(outputs)
    encounters = ("min_separation",) if getattr(system.definition, "encounter", None) is not None else ()
    allowed = space.names + ("energy",) + tuple(d.name for d in space.diagnostics) + encounters
    unknown = set(outputs) - set(allowed)
    if unknown:
        raise InvalidInput("outputs", f"unknown {sorted(unknown)}; allowed: {', '.join(allowed)}")
    state = space.admit(state0, system.n_bodies if exchange is None else None, restart)
    members = next(iter(state.values())).shape[0]
    bodies = space.body_count(state)
    if exchange is not None:  # each rank holds its ids' state (kernels.domain.id_range); the member has them all
        bodies = domain.member_particles(bodies, exchange)
        if system.n_bodies not in (None, bodies):
            raise InvalidInput("state0", f"the ranks hold {bodies} bodies together; {system.name} has {system.n_bodies}")
    implied = system.member_count()
    if implied not in (None, 1, members):
        raise InvalidInput("params", f"per-member parameters are given for {implied} members, the state has {members}")
    if isinstance(start_step, bool) or not isinstance(start_step, (int, np.integer)) or start_step < 0:
        raise InvalidInput("start_step", f"must be an integer >= 0, got {start_step!r}")
    runs, options, option_vector = _method_options(method, method_options, n_steps, float(dt), int(start_step))
    _check_variant(system.definition, method, runs, options)
    if runs.minimiser and sections:
        raise InvalidInput("sections", f"{method} minimises V: it locates no section crossings; use vi or rk4")
    if runs.minimiser and system.scheduled:
        raise InvalidInput("density_schedule", f"{method} minimises a fixed V; a schedule changes V over the run")
    if shadow is not None:
        shadow = _checked_shadow(shadow, system, method, runs, state)
        if start_step not in (0, shadow.step_offset):
            raise InvalidInput("start_step", f"must equal the shadow's step_offset {shadow.step_offset}, got {start_step}")
        start_step = shadow.step_offset
    bath = _bath(runs, system, options, seed, member_ids, members, shadow, sections, bodies)
    if options.get("active") is not None:
        _check_headings(state, restart)
    section_plan = plan_sections(sections, space, bodies, parameter_shapes(system, bodies) if sections else None)
    chosen = mode  # the GPU's checks depend on the mode a run takes: one member of an (S²)ⁿ system may take "system"
    if device == "cuda" and space.layout == "sphere" and members == 1:
        chosen = execution_mode(system, runs.name, 1, bodies, shadow is not None, mode, **options)
    on_gpu = check_device(device, system, runs, sections, "min_separation" in outputs, chosen, fma=fma,
                          bodies=bodies)
    names = carried_names(runs, system)
    carried = _initial_carry(runs, names, options, carry, float(dt), members)
    threads = default_threads() if threads is None else _positive_int("threads", threads)
    keep = [name for name in space.names if name in outputs]
    result = RUNNERS[space.layout](system, runs.name, state, dt, n_steps, save_every, keep_state=bool(keep),
                                   threads=threads, shadow=shadow, mode=mode, skin=skin, options=options,
                                   option_vector=option_vector, carried=carried,
                                   track_encounters="min_separation" in outputs, start_step=int(start_step),
                                   sections=section_plan, bath=bath, **on_gpu,
                                   **({} if exchange is None else {"exchange": exchange}))
    carried = result.pop("carried")
    result["state"] = {name: value if name in keep else value[:, :0] for name, value in result["state"].items()}
    samples = n_steps // save_every + 1
    return Trajectory(time=np.arange(samples) * (save_every * float(dt)), method=method,
                      carry={name: carried[:, column].copy() for column, name in enumerate(names)}, **result)


#: where :func:`integrate` runs an ensemble
DEVICES = ("cpu", "cuda")


def check_device(device, system: System, runs: Method, sections, track_encounters: bool, mode, here: bool = True,
                 fma: bool = True, bodies: int | None = None) -> dict:
    """The runner's keyword for ``device``: {} on the CPU, {"device": "cuda"} for a run the GPU can take (checked
    before any compute: what the GPU does not run yet, and with ``here`` a machine without one, are refused naming
    what is missing).  Also the plan's check of ``[execution] device`` (not ``here``: a spec is checked and
    submitted where no GPU need be; :func:`device_missing` is asked where it runs).  ``bodies``: the run's body count,
    which decides what a pair system's system mode sums (every pair, or neighbour lists)."""
    if device not in DEVICES:
        raise InvalidInput("device", f"unknown device {device!r}; allowed: {', '.join(DEVICES)}")
    if not isinstance(fma, bool):
        raise InvalidInput("fma", f"must be true or false, got {fma!r}")
    if device == "cpu":
        if not fma:
            raise InvalidInput("fma", "false applies to device 'cuda' (the CPU's kernels fuse no multiply-adds)")
        return {}
    from . import gpu  # numba-cuda: imported only where a run asks for the GPU

    gpu.check_supported(system, runs.name, forced=system.forced, sections=sections, track_encounters=track_encounters,
                        mode=mode, stochastic=runs.stochastic, bodies=bodies)
    problem = device_missing(device) if here else None
    if problem is not None:
        raise InvalidInput("device", problem)
    return {"device": "cuda", "fma": fma}


def device_missing(device: str) -> str | None:
    """What this machine lacks to run on ``device`` (one line), or None ("cpu" always runs)."""
    if device == "cpu":
        return None
    from . import gpu  # numba-cuda: imported only where a run asks for the GPU

    problem = gpu.device_problem()
    return None if problem is None else f"'cuda' needs a CUDA GPU: {problem}"


def cuda_report() -> dict:
    """What a short-lived child process tells the process that forks workers (which must not start the CUDA driver
    itself: a process forked after the driver started cannot use it): ``missing``, :func:`device_missing`'s line
    for "cuda" or None, and ``devices``, the devices a worker may be pinned to when none is missing."""
    missing = device_missing("cuda")
    if missing is not None:
        return {"missing": missing, "devices": []}
    from . import gpu

    return {"missing": None, "devices": gpu.visible_devices()}


def check_stochastic(runs: Method, system: System, shadows: bool, sections: bool) -> None:
    """Refuse what a stochastic method cannot do (InvalidInput naming ``shadow``, ``sections`` or ``method``):
    Benettin shadows, section crossings, forces (a full inertia is refused by :meth:`Method.supports`).  Also the
    spec's check."""
    if shadows:
        raise InvalidInput("shadow", f"{runs.name} is stochastic: Benettin shadows (Lyapunov exponents, MEGNO, "
                           "SALI) measure a deterministic flow; use a deterministic method (vi, rk4)")
    if sections:
        raise InvalidInput("sections", f"{runs.name} does not locate section crossings; use vi or rk4")
    if system.forced:
        raise InvalidInput("method", f"{runs.name} steps unforced systems; {system.name} is forced here")


def _bath(runs: Method, system: System, options: dict, seed, member_ids, members: int, shadow, sections, n: int):
    """A stochastic method's bath: (temperature, friction, noise key, member ids, temperature schedule, each
    particle's friction or None), checked; None for the others."""
    if not runs.stochastic:
        return None
    check_stochastic(runs, system, shadow is not None, bool(sections))
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise InvalidInput("seed", f"must be an integer >= 0, got {seed!r}")
    ids = np.arange(members) if member_ids is None else np.asarray(member_ids)
    if ids.shape != (members,) or not np.issubdtype(ids.dtype, np.integer) or np.any(ids < 0) or np.any(ids >= 2**32):
        raise InvalidInput("member_ids", f"must be {members} integers in [0, 2**32), one per member")
    active = options.get("active") or {"speed": 0.0, "rotational_diffusion": 0.0}
    values = {"temperature": options["temperature"], "cooling_rate": options["cooling_rate"],
              "friction": options["friction"], "diffusion": options.get("diffusion") or 0.0,
              **{f"active.{key}": active[key] for key in ACTIVE_KEYS}}
    values = {name: np.asarray(value, dtype=np.float64) for name, value in values.items()}
    for name, value in values.items():
        if value.ndim == 1 and value.shape != (members,):
            raise InvalidInput(name, f"must be a scalar or one value per member ({members}), got {value.shape[0]}")
    return tuple(values.values()) + (noise_key(int(seed)), ids, options["temperature_schedule"],
                                     _particle_frictions(system, values["friction"], values["diffusion"], members, n))


def _particle_frictions(system: System, friction: np.ndarray, diffusion: np.ndarray, members: int, n: int):
    """Each particle's γ (1/s), (members, n): the system's own (a type's) where it gives one, the method's
    ``friction`` elsewhere; None where the system gives none.  Refused (naming ``diffusion``) beside brownian's
    diffusion, which sets one ζ for every body."""
    own = system.definition.body_friction(system.broadcast(members, n), n)
    if own is None:
        return None
    if np.any(diffusion > 0):
        raise InvalidInput("diffusion", f"the particles of {system.name} have their own friction (their types'), "
                           "which sets each one's diffusion T/(m γ); give no diffusion")
    return np.where(np.isnan(own), np.broadcast_to(friction, (members,))[:, np.newaxis], own)


def _check_headings(state: dict, restart: bool) -> None:
    """An active particle's heading rides in ω (ω_i = v₀ q_i × n_i): refuse a start where some ω_i is 0, which
    gives no direction (the admitted ω is tangent already)."""
    speeds = np.linalg.norm(state["omega"], axis=-1)
    if not restart and np.any(speeds == 0):
        member, body = np.argwhere(speeds == 0)[0]
        raise InvalidInput("omega", f"active particles carry their heading n_i in ω_i = speed · q_i × n_i, and "
                           f"body {body} of member {member} has ω = 0: give every body a tangent ω (its direction "
                           "is the heading; its length is replaced by the speed)")


def execution_mode(system: System, method: str, members: int, n: int, shadows: bool, mode: str | None = None,
                   **options) -> str:
    """How :func:`integrate` would run: "system" (one member of an (S²)ⁿ pair system, parallel inside
    each step; see :mod:`kernels.system_parallel`) or "ensemble" (members in parallel)."""
    if system.space.layout != "sphere":
        if mode == "system":
            raise InvalidInput("mode", f"'system' runs (S²)ⁿ pair systems only; {system.name} is on {system.space.name}")
        return "ensemble"
    implicit = method == "vi" and (not system.definition.diagonal_inertia or bool(options.get("implicit")))
    return system_parallel.choose_mode(mode, system, method, implicit, members, n, shadows)
