"""The (S²)ⁿ kernels' runner: (q, ω) in lane blocks (n, 3, lanes), inertia M, potential and gradient
(see :mod:`kernels.driver`, :mod:`kernels.integrators.vi`, :mod:`kernels.system_parallel`)."""

from __future__ import annotations

import numpy as np

from . import domain, system_minimiser, system_parallel
from .blocks import lane_width, member_outcomes, run_in_threads, to_blocks, to_shadow_blocks
from .compile import compiled_kernel
from .errors import InvalidInput
from .integrators import DIAGONAL, FULL, KERNEL_METHODS
from .integrators.formulations import DEFAULT_FORMULATION
from .integrators.langevin import with_bath
from .lyapunov import Shadow, shadow_arrays, shadow_outputs, shadow_record_blocks, shadow_results
from .sections import SectionPlan, section_outputs, section_results, with_section_parameters


def _checked_inertia(system, params: dict, n: int, members: int) -> np.ndarray:
    """M per member, refused unless symmetric positive definite (configuration-dependent inertia, evaluated
    inside the kernels: zeros here; one M for all, as a model without parameters gives, broadcast)."""
    if system.definition.configuration_inertia is not None:
        return np.zeros((members, n, n))
    mass = system.definition.inertia(params, n)
    mass = np.ascontiguousarray(np.broadcast_to(mass, (members,) + mass.shape[1:]))
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


def run(system, method: str, state: dict, dt: float, n_steps: int, save_every: int, *, keep_state: bool,
        threads: int, shadow: Shadow | None, mode: str | None, skin: float | None, options: dict,
        option_vector: np.ndarray, carried: np.ndarray, track_encounters: bool, start_step: int,
        sections: SectionPlan | None = None, bath: tuple | None = None, device: str = "cpu", fma: bool = True,
        exchange=None) -> dict:
    """Integrate (q, ω) (members, n, 3) with ``method`` (a kernel-level name, variants included);
    returns the fields of a :class:`~kernels.integration.Trajectory` (state and diagnostics by name),
    with ``carried`` (members, C), the method's solver state, updated in place.  ``start_step``: the global
    index of the step the call continues after (time origin of time-dependent forces); ``sections``: the
    checked sections whose crossings are located (:mod:`kernels.sections`); ``bath``: a stochastic method's
    (temperature, friction, noise key, member ids) (:func:`kernels.integrators.langevin.with_bath`); ``device``:
    "cuda" steps the ensemble on the GPU (:mod:`kernels.gpu`, which :func:`kernels.integrate` checked it can; the
    system mode: :mod:`kernels.gpu_system`),
    with fused multiply-adds or not (``fma``)."""
    q, omega = state["q"], state["omega"]
    members, rows = q.shape[:2]
    # on MPI ranks the state is this rank's ids' (kernels.domain.id_range), the parameters every particle's
    n = domain.member_particles(rows, exchange)
    params = system.broadcast(members, n)
    mass = _checked_inertia(system, params, n, members)
    # a section's p.<name> values ride after the system's own coefficient rows (kernels.sections)
    coef = with_section_parameters(system.definition.member_coefficients(params, n, members), sections, params)
    if bath is not None:  # after any section rows: both are read from the end, and sections refuse a bath
        coef = with_bath(coef, *bath)
    topology = np.ascontiguousarray(system.definition.topology(params, n), dtype=np.int64)

    implicit = method == "vi" and (not system.definition.diagonal_inertia or bool(options.get("implicit")))
    # the formulations other than (9)–(11)'s q_omega solve a full 3n×3n system whatever M's shape
    reformulated = KERNEL_METHODS[method].formulation not in (None, DEFAULT_FORMULATION)
    inertia_kind = DIAGONAL if system.definition.diagonal_inertia and not implicit and not reformulated else FULL
    if inertia_kind == FULL and mass.ndim == 2:
        mass = mass[:, :, np.newaxis] * np.eye(n)
    mass_diag = mass if mass.ndim == 2 else np.diagonal(mass, axis1=1, axis2=2)
    mass_full = mass if inertia_kind == FULL else np.zeros((members, 1, 1))

    forced = system.forced
    if forced and method == "vi" and inertia_kind != FULL:
        raise InvalidInput("implicit", f"forces of {system.name} act through the implicit vi path; set implicit = true")
    lanes = lane_width(KERNEL_METHODS[method].lanes, members)
    timed = KERNEL_METHODS[method].samples_off_grid
    samples = n_steps // save_every + 1
    state_samples = samples if keep_state else 0
    result = {
        "q": np.full((members, state_samples, rows, 3), np.nan),
        "omega": np.full((members, state_samples, rows, 3), np.nan),
        "energy": np.full((members, samples), np.nan),
        "unit_error": np.full((members, samples), np.nan),
        "tangency_error": np.full((members, samples), np.nan),
        # the forces' work, a bath's heat (J), or a minimisation's largest tangential force (J)
        "exchanged": np.full((members, samples), np.nan),
        **member_outcomes(members),
        "q_final": np.empty((members, rows, 3)),
        "omega_final": np.empty((members, rows, 3)),
        "carried": carried,
        "min_separation": np.full(members, np.inf),
        "sample_lag": np.full((members, samples if timed else 0), np.nan),
        "log_growth": np.full((members, 0), np.nan),
        "shadow_final": None,
    }
    chosen = system_parallel.choose_mode(mode, system, method, implicit, members, n, shadow is not None)
    if forced and chosen == "system":
        raise InvalidInput("mode", f"the system-parallel mode steps unforced systems; {system.name} is forced here")
    on_ranks = exchange is not None and exchange.size > 1
    if on_ranks and (chosen != "system" or device == "cuda" or system_parallel.sums_all_pairs(system, n)
                     or KERNEL_METHODS[method].minimiser):
        raise InvalidInput("ranks", "more than one rank runs one member of a pair potential with a cutoff in the "
                           "system mode on the CPU (vi, langevin, brownian); run this one on one rank")
    if sections is not None and chosen == "system":
        raise InvalidInput("section", "sections run in the ensemble mode (members in parallel); set mode = 'ensemble'")
    if chosen == "system" and KERNEL_METHODS[method].minimiser and device == "cuda":
        from . import gpu_minimiser  # numba-cuda: imported only where a run asks for the GPU

        result.update(gpu_minimiser.run(system, q, omega, mass_diag, coef, float(dt), n_steps, save_every, skin,
                                        keep_state, carried, option_vector, fma))
    elif chosen == "system" and KERNEL_METHODS[method].minimiser:
        result.update(system_minimiser.run(system, q, omega, mass_diag, coef, float(dt), n_steps, save_every, skin,
                                           keep_state, threads, carried, option_vector))
    elif chosen == "system" and device == "cuda":
        from . import gpu_system  # numba-cuda: imported only where a run asks for the GPU

        result.update(gpu_system.run(system, method, q, omega, mass_diag, coef, float(dt), n_steps, save_every, skin,
                                     keep_state, threads, start_step, carried, fma))
    elif chosen == "system" and system_parallel.sums_all_pairs(system, n):
        system_parallel.check_no_skin(skin)
        result.update(system_parallel.run(system, method, q, omega, mass_diag, coef, float(dt), n_steps, save_every,
                                          keep_state, threads, start_step, carried))
    elif chosen == "system":
        result.update(domain.run(system, method, q, omega, mass_diag, coef, float(dt), n_steps, save_every, skin,
                                 keep_state, threads, start_step, carried, exchange))
    else:
        shadow_in, shadow_scalars = shadow_arrays(shadow, {"q": q, "omega": omega}, start_step)
        growth, indicator_out, shadow_end = shadow_outputs(shadow_in, shadow is not None, samples)
        shadow_end.update(q=np.empty(shadow_in["q"].shape), omega=np.empty(shadow_in["q"].shape))
        crossings = section_outputs(sections, members, 6 * n)
        lanes = members if device == "cuda" else lanes  # the GPU: one block of every member, a thread per lane
        blocks = {name: to_blocks(array, lanes) for name, array in
                  (("q", q), ("omega", omega), ("mass_diag", mass_diag), ("mass_full", mass_full), ("coef", coef))}
        blocks.update({"shadow_" + name: to_shadow_blocks(shadow_in[name], lanes) for name in ("q", "omega")})
        blocks.update(shadow_record_blocks(shadow_in, lanes))
        shared = ((topology, float(dt), n_steps, save_every, option_vector) + shadow_scalars
                  + (track_encounters, sections.modes if sections is not None else np.zeros((2, 0), np.int64)))
        outputs = ([result[name] for name in ("q", "omega", "energy", "unit_error", "tangency_error", "exchanged",
                                              "status", "failed_step", "solver_iterations", "q_final", "omega_final",
                                              "carried", "min_separation", "sample_lag")] + [growth, indicator_out]
                   + [shadow_end[name] for name in ("q", "omega", "log_growth", "reference", "indicators")] + crossings)
        if device == "cuda":
            from . import gpu  # numba-cuda: imported only where a run asks for the GPU

            gpu.run_blocks(method, system.name, inertia_kind, shadow is not None, blocks, shared, keep_state,
                           outputs, members, fma)
        else:
            kernel = compiled_kernel(method, system.name, inertia_kind, shadow is not None, forced,
                                     sections.source if sections is not None else None)
            run_in_threads(kernel, blocks, shared, keep_state, outputs, lanes, members, threads)
        final = system.space.flatten({"q": result["q_final"], "omega": result["omega_final"]})
        result["sections"] = section_results(sections, crossings, system.space, n, result["status"], final)
        result["q_final"], result["omega_final"] = (system.space.unflatten(final, n)[name] for name in ("q", "omega"))
        if shadow is not None:
            result.update(shadow_results(shadow, {"q": shadow_end["q"], "omega": shadow_end["omega"]}, shadow_end,
                                         growth, indicator_out, n_steps))
    diagnostics = {name: result.pop(name) for name in ("unit_error", "tangency_error")}
    temperature = result.pop("temperature", None)
    if not track_encounters or chosen == "system":
        result["min_separation"] = None
    if not timed:
        result["sample_lag"] = None
    exchanged = result.pop("exchanged")
    result["work"] = exchanged if forced else None
    result["heat"] = exchanged if KERNEL_METHODS[method].heat else None
    result["largest_force"] = exchanged if KERNEL_METHODS[method].minimiser else None
    if temperature is not None:
        diagnostics["temperature"] = temperature
    return dict(result, state={"q": result.pop("q"), "omega": result.pop("omega")},
                final={"q": result.pop("q_final"), "omega": result.pop("omega_final")},
                diagnostics=diagnostics, temperature=temperature, implicit=implicit, mode=chosen)
