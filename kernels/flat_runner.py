"""The runner of spaces whose kernels step one flat float64 block per member (:mod:`kernels.flat_driver`)."""

from __future__ import annotations

import numpy as np

from .blocks import lane_width, run_in_threads, to_blocks
from .compile import compiled_kernel
from .integrators import FLAT, KERNEL_METHODS
from .lyapunov import Shadow


def run(system, method: str, state: dict, dt: float, n_steps: int, save_every: int, *, keep_state: bool,
        threads: int, shadow: Shadow | None, mode: str | None, skin: float | None, options: dict,
        option_vector: np.ndarray, carried: np.ndarray, track_encounters: bool, start_step: int) -> dict:
    """Integrate an admitted state (the space's variables, leading member axis) with ``method``;
    returns the fields of a :class:`~kernels.integrate.Trajectory`.  ``start_step``: the global index of
    the step this call continues after (its time origin start_step·dt, which time-dependent loads see; a
    shadow's step_offset equals it)."""
    space = system.space
    n = space.body_count(state)
    x = space.flatten(state)
    members, rows = x.shape
    params = system.broadcast(members, n)
    coef = system.definition.member_coefficients(params, n, members)
    topology = np.ascontiguousarray(system.definition.topology(params, n), dtype=np.int64)
    lanes = lane_width(KERNEL_METHODS[method].lanes, members)
    samples = n_steps // save_every + 1
    diagnostics = np.full((members, len(space.diagnostics), samples), np.nan)
    result = {
        "state": np.full((members, samples if keep_state else 0, rows), np.nan),
        "energy": np.full((members, samples), np.nan),
        "status": np.zeros(members, np.int64),
        "failed_step": np.full(members, -1, np.int64),
        "solver_iterations": np.zeros(members, np.int64),
        "final": np.empty((members, rows)),
        "carried": carried,
        "log_growth": np.full((members, samples if shadow is not None else 0), np.nan),
    }
    if shadow is None:
        shadow_in = (np.zeros((members, 0)), np.zeros(members), np.ones(members))
        shadow_scalars = (1.0, 0, int(start_step))
    else:
        shadow_in = (space.flatten(shadow.state), np.asarray(shadow.log_growth, dtype=np.float64),
                     np.asarray(shadow.reference, dtype=np.float64))
        shadow_scalars = (float(shadow.d0), int(shadow.renormalise_every), int(shadow.step_offset))
    shadow_end = {"state": np.empty(shadow_in[0].shape), "log_growth": np.empty(members),
                  "reference": np.empty(members)}
    kernel = compiled_kernel(method, system.name, FLAT, shadow is not None)
    blocks = {"x": x, "coef": coef, "shadow": shadow_in[0], "log_growth": shadow_in[1], "reference": shadow_in[2]}
    outputs = [result["state"], result["energy"], diagnostics]
    run_in_threads(
        kernel, {name: to_blocks(array, lanes) for name, array in blocks.items()},
        (topology, n, float(dt), n_steps, save_every, option_vector) + shadow_scalars, keep_state,
        outputs + [result[name] for name in ("status", "failed_step", "solver_iterations", "final", "carried",
                                             "log_growth")]
        + [shadow_end[name] for name in ("state", "log_growth", "reference")],
        lanes, members, threads)
    shadow_final = None
    if shadow is not None:
        shadow_final = Shadow(space.unflatten(shadow_end["state"], n), shadow_end["log_growth"],
                              shadow_end["reference"], shadow.d0, shadow.renormalise_every,
                              shadow.step_offset + n_steps)
    return dict(result, state=space.unflatten(result["state"], n), final=space.unflatten(result["final"], n),
                diagnostics={d.name: diagnostics[:, k] for k, d in enumerate(space.diagnostics)},
                shadow_final=shadow_final, temperature=None, implicit=False, mode="ensemble", min_separation=None,
                sample_lag=None)

