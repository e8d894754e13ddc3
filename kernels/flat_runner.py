"""The runner of spaces whose kernels step one flat float64 block per member (:mod:`kernels.flat_driver`)."""

from __future__ import annotations

import numpy as np

from .blocks import lane_width, member_outcomes, run_in_threads, to_blocks, to_shadow_blocks
from .compile import compiled_kernel
from .integrators import FLAT, KERNEL_METHODS
from .lyapunov import Shadow, shadow_arrays, shadow_outputs, shadow_record_blocks, shadow_results
from .sections import SectionPlan, section_outputs, section_results, with_section_parameters


def run(system, method: str, state: dict, dt: float, n_steps: int, save_every: int, *, keep_state: bool,
        threads: int, shadow: Shadow | None, mode: str | None, skin: float | None, options: dict,
        option_vector: np.ndarray, carried: np.ndarray, track_encounters: bool, start_step: int,
        sections: SectionPlan | None = None, bath: tuple | None = None, device: str = "cpu", fma: bool = True) -> dict:
    """Integrate an admitted state (the space's variables, leading member axis) with ``method``;
    returns the fields of a :class:`~kernels.integration.Trajectory`.  ``start_step``: the global index of
    the step this call continues after (its time origin start_step·dt, which time-dependent loads see; a
    shadow's step_offset equals it); ``sections``: the checked sections whose crossings are located; ``bath`` is
    always None here (the stochastic methods step (S²)ⁿ only); ``device``: "cuda" steps the ensemble on the GPU
    (:mod:`kernels.gpu`, which :func:`kernels.integrate` checked it can), with fused multiply-adds or not
    (``fma``)."""
    space = system.space
    n = space.body_count(state)
    x = space.flatten(state)
    members, rows = x.shape
    params = system.broadcast(members, n)
    # a section's p.<name> values ride after the system's own coefficient rows (kernels.sections)
    coef = with_section_parameters(system.definition.member_coefficients(params, n, members), sections, params)
    topology = np.ascontiguousarray(system.definition.topology(params, n), dtype=np.int64)
    # the GPU: one block of every member, a thread per lane
    lanes = members if device == "cuda" else lane_width(KERNEL_METHODS[method].lanes, members)
    samples = n_steps // save_every + 1
    diagnostics = np.full((members, len(space.diagnostics), samples), np.nan)
    result = {
        "state": np.full((members, samples if keep_state else 0, rows), np.nan),
        "energy": np.full((members, samples), np.nan),
        **member_outcomes(members),
        "final": np.empty((members, rows)),
        "carried": carried,
    }
    shadow_in, shadow_scalars = shadow_arrays(shadow, state, start_step)
    count = shadow_in["log_growth"].shape[1]
    growth, indicator_out, shadow_end = shadow_outputs(shadow_in, shadow is not None, samples)
    # the shadows flattened like the members: (members, k, rows)
    shadow_x = space.flatten({name: shadow_in[name].reshape((members * count,) + shadow_in[name].shape[2:])
                              for name in space.names}).reshape(members, count, rows) if count \
        else np.zeros((members, 0, rows))
    shadow_end["state"] = np.empty(shadow_x.shape)
    crossings = section_outputs(sections, members, rows)
    blocks = {"x": to_blocks(x, lanes), "coef": to_blocks(coef, lanes), "shadow": to_shadow_blocks(shadow_x, lanes),
              **shadow_record_blocks(shadow_in, lanes)}
    shared = ((topology, n, float(dt), n_steps, save_every, option_vector) + shadow_scalars
              + (sections.modes if sections is not None else np.zeros((2, 0), np.int64),))
    outputs = ([result["state"], result["energy"], diagnostics]
               + [result[name] for name in ("status", "failed_step", "solver_iterations", "final", "carried")]
               + [growth, indicator_out] + [shadow_end[name] for name in ("state", "log_growth", "reference", "indicators")]
               + crossings)
    if device == "cuda":
        from . import gpu  # numba-cuda: imported only where a run asks for the GPU

        gpu.run_blocks(method, system.name, FLAT, shadow is not None, blocks, shared, keep_state, outputs,
                       members, fma, n=n, diagnostics=len(space.diagnostics))
    else:
        kernel = compiled_kernel(method, system.name, FLAT, shadow is not None, False,
                                 sections.source if sections is not None else None)
        run_in_threads(kernel, blocks, shared, keep_state, outputs, lanes, members, threads, space.memory_checks)
    crossing_results = section_results(sections, crossings, space, n, result["status"], result["final"])
    if shadow is not None:
        end_state = space.unflatten(shadow_end["state"].reshape(members * count, rows), n)
        result.update(shadow_results(shadow, {name: value.reshape((members, count) + value.shape[1:])
                                              for name, value in end_state.items()},
                                     shadow_end, growth, indicator_out, n_steps))
    else:
        result.update(log_growth=np.full((members, 0), np.nan), shadow_final=None)
    return dict(result, state=space.unflatten(result["state"], n), final=space.unflatten(result["final"], n),
                diagnostics={d.name: diagnostics[:, k] for k, d in enumerate(space.diagnostics)},
                temperature=None, implicit=False, mode="ensemble", min_separation=None,
                sample_lag=None, sections=crossing_results)

