"""The one entry point every later layer uses: :func:`integrate`."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from .compile import compiled_kernel
from .errors import InvalidInput
from .integrators import DIAGONAL, FULL, METHODS
from .lyapunov import Shadow
from . import system_parallel
from .systems import System

#: tolerance within which inputs are silently put back on (S²)ⁿ; beyond it they are refused
STATE_TOLERANCE = 1e-6
#: members per SIMD block for the fixed-step kernels, widest first: an ensemble uses the widest that
#: still gives two blocks.  Every lane loop pays a fixed set-up (its runtime overlap checks), which
#: wider blocks spread over more members; 256 measured best of 64–512 on AVX-512 (≈1.2–1.4× over 64).
LANE_WIDTHS = (256, 64)
OUTPUTS = ("q", "omega", "energy", "unit_error", "tangency_error")


@dataclass(frozen=True)
class Trajectory:
    """Result of :func:`integrate`.  Sample 0 is the initial state; sample s is step s·save_every.

    q, omega: (members, samples, n, 3) unit vectors and angular velocities (rad/s), or with 0 samples
    when not requested; energy (J), unit_error = max_i |‖q_i‖−1|, tangency_error = max_i |q_i·ω_i|
    (rad/s): (members, samples); status (members; see kernels.status) and failed_step (−1 if none);
    q_final, omega_final: (members, n, 3) state after the last step (the restart point);
    solver_iterations: max Newton iterations in any step (implicit vi) or accepted steps (rk45);
    step_size: the step size (s) the member would take next (rk45's controller proposal).
    Failed members hold NaN from their failing step on.
    With a Benettin shadow: log_growth (members, samples), ln of the shadow's accumulated
    separation growth (see :mod:`kernels.lyapunov`), and shadow_final, the shadows after the last
    step; without: log_growth has 0 samples and shadow_final is None.
    """

    time: np.ndarray
    q: np.ndarray
    omega: np.ndarray
    energy: np.ndarray
    unit_error: np.ndarray
    tangency_error: np.ndarray
    status: np.ndarray
    failed_step: np.ndarray
    q_final: np.ndarray
    omega_final: np.ndarray
    solver_iterations: np.ndarray
    step_size: np.ndarray
    method: str
    implicit: bool
    log_growth: np.ndarray
    shadow_final: Shadow | None

    def lyapunov(self, elapsed: np.ndarray | None = None) -> np.ndarray:
        """Finite-time maximal Lyapunov exponent (1/s) at each sample, (members, samples):
        log_growth / t, with t the time since the shadows were displaced (``elapsed``: one per
        leading sample, default this call's ``time``); NaN at t = 0."""
        elapsed = self.time if elapsed is None else np.asarray(elapsed, dtype=np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(elapsed > 0, self.log_growth[:, :elapsed.size] / elapsed, np.nan)

    #: "ensemble" (members in parallel) or "system" (one member, parallel inside each step)
    mode: str = "ensemble"
    #: system mode only: kinetic temperature T/n (J: k_B T with 2 degrees of freedom per body, k_B = 1),
    #: (members, samples); and how many times the Verlet lists were built (members,)
    temperature: np.ndarray | None = None
    neighbour_rebuilds: np.ndarray | None = None


def _positive_int(field: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise InvalidInput(field, f"must be an integer >= 1, got {value!r}")
    return int(value)


def _state_on_spheres(q0, omega0, n_bodies: int | None, restart: bool) -> tuple[np.ndarray, np.ndarray]:
    """Validate shapes, then normalise q and project ω within STATE_TOLERANCE; refuse beyond it.
    A ``restart`` state (an earlier call's q_final, omega_final) is taken bit for bit."""
    q = np.array(q0, dtype=np.float64)
    omega = np.array(omega0, dtype=np.float64)
    if q.ndim != 3 or q.shape[2] != 3 or q.shape[0] < 1 or q.shape[1] < 1:
        raise InvalidInput("q0", f"must have shape (members, n, 3), got {q.shape}")
    if omega.shape != q.shape:
        raise InvalidInput("omega0", f"must have the shape of q0 {q.shape}, got {omega.shape}")
    if n_bodies is not None and q.shape[1] != n_bodies:
        raise InvalidInput("q0", f"the system has {n_bodies} bodies, q0 has {q.shape[1]}")
    for name, array in (("q0", q), ("omega0", omega)):
        if not np.all(np.isfinite(array)):
            raise InvalidInput(name, "must be finite")
    if restart:
        return q, omega
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
    return q, omega - normal[..., np.newaxis] * q


def _checked_inertia(system: System, params: dict, n: int) -> np.ndarray:
    """M per member, refused unless symmetric positive definite."""
    mass = system.definition.inertia(params, n)
    if system.definition.diagonal_inertia:
        if not np.all(mass > 0):
            raise InvalidInput("inertia", f"M of {system.name} must be positive definite (diagonal entries > 0)")
        return mass
    if not np.allclose(mass, np.swapaxes(mass, 1, 2), rtol=1e-12, atol=0):
        raise InvalidInput("inertia", f"M of {system.name} must be symmetric")
    try:
        np.linalg.cholesky(mass)
    except np.linalg.LinAlgError:
        raise InvalidInput("inertia", f"M of {system.name} must be positive definite") from None
    return mass


def _method_options(method: str, options: dict, n_steps: int, members: int) -> tuple[dict, np.ndarray]:
    spec = METHODS[method]
    for name in options:
        if name not in spec.options:
            allowed = ", ".join(spec.options) or "none"
            raise InvalidInput(name, f"unknown option of method {method!r}; allowed: {allowed}")
    merged = {**spec.options, **options}
    for name in ("newton_tol", "rtol", "atol"):
        if name in merged and not (np.isfinite(merged[name]) and merged[name] > 0):
            raise InvalidInput(name, f"must be > 0, got {merged[name]!r}")
    if method == "vi":
        _positive_int("newton_max_iterations", merged["newton_max_iterations"])
        vector = [merged["newton_tol"], merged["newton_max_iterations"]]
    elif method == "rk45":
        max_steps = merged["max_steps"] if merged["max_steps"] is not None else 100 * n_steps + 10_000
        vector = [merged["rtol"], merged["atol"], _positive_int("max_steps", max_steps)]
    else:
        vector = []
    return merged, np.array(vector, dtype=np.float64)


def _checked_shadow(shadow: Shadow, method: str, q: np.ndarray) -> Shadow:
    if not isinstance(shadow, Shadow):
        raise InvalidInput("shadow", f"must be a kernels.lyapunov.Shadow, got {type(shadow).__name__}")
    if METHODS[method].lanes == 1:
        raise InvalidInput("shadow", f"Benettin shadows need a fixed-step method, not {method!r}; "
                           f"allowed: {', '.join(m for m in METHODS if METHODS[m].lanes is None)}")
    if np.shape(shadow.q) != q.shape or np.shape(shadow.omega) != q.shape:
        raise InvalidInput("shadow", f"q and omega must have the shape of q0 {q.shape}")
    for name in ("log_growth", "reference"):
        if np.shape(getattr(shadow, name)) != q.shape[:1]:
            raise InvalidInput(f"shadow.{name}", f"must have shape ({q.shape[0]},)")
    if not (np.isfinite(shadow.d0) and shadow.d0 > 0):
        raise InvalidInput("shadow.d0", f"must be > 0, got {shadow.d0!r}")
    _positive_int("shadow.renormalise_every", shadow.renormalise_every)
    if isinstance(shadow.step_offset, bool) or not isinstance(shadow.step_offset, (int, np.integer)) \
            or shadow.step_offset < 0:
        raise InvalidInput("shadow.step_offset", f"must be an integer >= 0, got {shadow.step_offset!r}")
    return shadow


def _to_blocks(array: np.ndarray, lanes: int) -> np.ndarray:
    """(members, ...) → (blocks, ..., lanes), padding with copies of the last member."""
    members = array.shape[0]
    blocks = -(-members // lanes)
    padded = np.concatenate([array, np.repeat(array[-1:], blocks * lanes - members, axis=0)])
    shaped = padded.reshape((blocks, lanes) + array.shape[1:])
    return np.ascontiguousarray(np.moveaxis(shaped, 1, -1))


def default_threads() -> int:
    """Threads for :func:`integrate`: NUMBA_NUM_THREADS if set, else the CPUs this process may use."""
    configured = os.environ.get("NUMBA_NUM_THREADS")
    return int(configured) if configured else len(os.sched_getaffinity(0))


def _run_in_threads(kernel, blocks: dict, shared: tuple, keep_state: bool, outputs: list, lanes: int, members: int,
                    threads: int):
    """Run ``kernel`` on disjoint, contiguous ranges of blocks, one per thread (kernels release the GIL)."""
    n_blocks = next(iter(blocks.values())).shape[0]
    bounds = np.linspace(0, n_blocks, min(threads, n_blocks) + 1).astype(int)

    def run(start: int, stop: int) -> None:
        first, last = start * lanes, min(stop * lanes, members)
        kernel(*(array[start:stop] for array in blocks.values()), *shared, last - first, keep_state,
               *(array[first:last] for array in outputs))

    if len(bounds) == 2:
        run(0, n_blocks)
        return
    with ThreadPoolExecutor(len(bounds) - 1) as pool:
        for future in [pool.submit(run, a, b) for a, b in zip(bounds[:-1], bounds[1:])]:
            future.result()


def integrate(system: System, method: str, q0, omega0, dt: float, n_steps: int, save_every: int = 1, *,
              outputs=OUTPUTS, threads: int | None = None, restart: bool = False, shadow: Shadow | None = None,
              mode: str | None = None, skin: float | None = None, **method_options) -> Trajectory:
    """Integrate every member of an ensemble on (S²)ⁿ with one method.

    ``q0``, ``omega0``: (members, n, 3); ``dt`` (s) the step (rk45: the first step and the unit of
    time of ``n_steps``); ``save_every`` steps between saved samples.  Members run in parallel on
    ``threads`` Numba threads (default: all).  ``outputs`` chooses which arrays keep samples
    (q and omega are large; energy and the constraint errors are always computed).
    ``restart=True`` takes (q0, ω0) bit for bit as an earlier call's (q_final, omega_final), so that
    a run continued in segments equals an uninterrupted one and methods that drift off (S²)ⁿ (rk*)
    are not silently projected back; otherwise they are normalised and projected (within 1e-6).
    Method options: vi — implicit (force (22)–(25) even for diagonal M), newton_tol, newton_max_iterations;
    rk45 — rtol, atol, max_steps, first_step (scalar or per member).
    ``shadow`` (fixed-step methods): Benettin shadows of the members (see :mod:`kernels.lyapunov`;
    :func:`kernels.lyapunov.displaced_shadow` makes the first), stepped alongside them; their state
    is taken bit for bit and returned in ``shadow_final``.
    ``mode``: "ensemble" (members in parallel), "system" (one member of a short-range pair system, parallel
    over bodies inside each step, O(n) neighbour lists with Verlet ``skin`` (m, chord; default the
    system's, 0.3σ for sphere_lj)) or None: system when one member, ≥ 1000 bodies, a finite cutoff and
    explicit vi (see :mod:`kernels.system_parallel`); the system mode also returns ``temperature``.
    Bad input raises :class:`~kernels.errors.InvalidInput` before any compute.
    """
    if not isinstance(system, System):
        raise InvalidInput("system", f"must come from kernels.get_system, got {type(system).__name__}")
    if method not in METHODS:
        raise InvalidInput("method", f"unknown method {method!r}; allowed: {', '.join(METHODS)}")
    if not (isinstance(dt, (int, float, np.floating)) and np.isfinite(dt) and dt > 0):
        raise InvalidInput("dt", f"must be a finite number > 0 (s), got {dt!r}")
    n_steps = _positive_int("n_steps", n_steps)
    save_every = _positive_int("save_every", save_every)
    unknown = set(outputs) - set(OUTPUTS)
    if unknown:
        raise InvalidInput("outputs", f"unknown {sorted(unknown)}; allowed: {', '.join(OUTPUTS)}")
    q, omega = _state_on_spheres(q0, omega0, system.n_bodies, restart)
    members, n = q.shape[:2]
    implied = system.member_count()
    if implied not in (None, 1, members):
        raise InvalidInput("params", f"per-member parameters are given for {implied} members, q0 has {members}")
    options, option_vector = _method_options(method, method_options, n_steps, members)
    if shadow is not None:
        shadow = _checked_shadow(shadow, method, q)
    params = system.broadcast(members, n)
    mass = _checked_inertia(system, params, n)
    coef = np.ascontiguousarray(system.definition.coefficients(params, n), dtype=np.float64)
    topology = np.ascontiguousarray(system.definition.topology(params, n), dtype=np.int64)

    implicit = method == "vi" and (not system.definition.diagonal_inertia or bool(options.get("implicit")))
    inertia_kind = DIAGONAL if system.definition.diagonal_inertia and not implicit else FULL
    if inertia_kind == FULL and mass.ndim == 2:
        mass = mass[:, :, np.newaxis] * np.eye(n)
    mass_diag = mass if mass.ndim == 2 else np.diagonal(mass, axis1=1, axis2=2)
    mass_full = mass if inertia_kind == FULL else np.zeros((members, 1, 1))

    spec = METHODS[method]
    lanes = spec.lanes or next((width for width in LANE_WIDTHS if members >= 2 * width), 1)
    samples = n_steps // save_every + 1
    keep_state = "q" in outputs or "omega" in outputs
    state_samples = samples if keep_state else 0
    result = {
        "q": np.full((members, state_samples, n, 3), np.nan),
        "omega": np.full((members, state_samples, n, 3), np.nan),
        "energy": np.full((members, samples), np.nan),
        "unit_error": np.full((members, samples), np.nan),
        "tangency_error": np.full((members, samples), np.nan),
        "status": np.zeros(members, np.int64),
        "failed_step": np.full(members, -1, np.int64),
        "solver_iterations": np.zeros(members, np.int64),
        "q_final": np.empty((members, n, 3)),
        "omega_final": np.empty((members, n, 3)),
        "step_size": np.broadcast_to(np.asarray(dt if options.get("first_step") is None else options["first_step"],
                                                dtype=np.float64), (members,)).copy(),
    }
    if not np.all(np.isfinite(result["step_size"]) & (result["step_size"] > 0)):
        raise InvalidInput("first_step", "must be > 0")
    threads = default_threads() if threads is None else _positive_int("threads", threads)
    result["log_growth"], result["shadow_final"] = np.full((members, 0), np.nan), None
    if system_parallel.choose_mode(mode, system, method, implicit, members, n, params, shadow is not None) == "system":
        result.update(system_parallel.run(system, method, q, omega, mass_diag, coef, float(dt), n_steps, save_every,
                                          skin, keep_state, threads))
        return _trajectory(result, outputs, keep_state, samples, save_every, dt, method, implicit, "system")
    if shadow is None:  # the kernel's shadow arguments then have no bodies and are ignored
        shadow_in = (np.zeros((members, 0, 3)), np.zeros((members, 0, 3)), np.zeros(members), np.ones(members))
        shadow_scalars = (1.0, 0, 0)
    else:
        shadow_in = tuple(np.asarray(a, dtype=np.float64) for a in (shadow.q, shadow.omega, shadow.log_growth,
                                                                     shadow.reference))
        shadow_scalars = (float(shadow.d0), int(shadow.renormalise_every), int(shadow.step_offset))
        result["log_growth"] = np.full((members, samples), np.nan)
    shadow_end = {"q": np.empty(shadow_in[0].shape), "omega": np.empty(shadow_in[0].shape),
                  "log_growth": np.empty(members), "reference": np.empty(members)}
    kernel = compiled_kernel(method, system.name, inertia_kind, shadow is not None)
    blocks = {"q": q, "omega": omega, "mass_diag": mass_diag, "mass_full": mass_full, "coef": coef,
              "shadow_q": shadow_in[0], "shadow_omega": shadow_in[1], "log_growth": shadow_in[2],
              "reference": shadow_in[3]}
    _run_in_threads(
        kernel, {name: _to_blocks(array, lanes) for name, array in blocks.items()},
        (topology, float(dt), n_steps, save_every, option_vector) + shadow_scalars, keep_state,
        [result[name] for name in ("q", "omega", "energy", "unit_error", "tangency_error", "status", "failed_step",
                                   "solver_iterations", "q_final", "omega_final", "step_size", "log_growth")]
        + [shadow_end[name] for name in ("q", "omega", "log_growth", "reference")],
        lanes, members, threads)
    if shadow is not None:
        result["shadow_final"] = Shadow(shadow_end["q"], shadow_end["omega"], shadow_end["log_growth"],
                                        shadow_end["reference"], shadow.d0, shadow.renormalise_every,
                                        shadow.step_offset + n_steps)
    return _trajectory(result, outputs, keep_state, samples, save_every, dt, method, implicit, "ensemble")


def _trajectory(result, outputs, keep_state, samples, save_every, dt, method, implicit, mode) -> Trajectory:
    if not keep_state or "q" not in outputs:
        result["q"] = result["q"][:, :0]
    if not keep_state or "omega" not in outputs:
        result["omega"] = result["omega"][:, :0]
    time = np.arange(samples) * (save_every * float(dt))
    return Trajectory(time=time, method=method, implicit=implicit, mode=mode, **result)
