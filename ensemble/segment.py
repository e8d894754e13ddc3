"""One task of a run: integrate one chunk of members over one segment of steps and record it.

A segment task is idempotent: if its completion record exists it does nothing; otherwise it reads
its start state (the members' initial conditions for the first segment, else the checkpoint slot
the previous segment wrote), integrates with the kernels, writes its own regions, then its record.
Re-running a task that died half-way rewrites the same regions with the same bits.
"""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np

from kernels import integrate
from kernels.lyapunov import Shadow
from kernels.status import OK

from .plan import Plan
from .store import CHECKPOINT_STATE, SHADOW_STATE, STATE_VARIABLES, RunStore


def integrate_members(plan: Plan, first: int, stop: int, q, omega, n_steps: int, save_every: int, *,
                      outputs=("energy",), options=None, shadow=None, restart=False, threads: int | None = 1):
    """The plan's kernel on members [first, stop) from (q, ω): the one call of every task, and of
    :func:`load_kernel`, so both use the same compiled kernel (mode, method options).
    ``threads``: kernel threads of an ensemble-mode plan (None: the process's, NUMBA_NUM_THREADS);
    a system-parallel plan always uses the process's."""
    spec = plan.spec
    return integrate(plan.chunk_system(first, stop), spec.method, q, omega, spec.dt, n_steps, save_every,
                     outputs=outputs, threads=None if plan.mode == "system" else threads, restart=restart,
                     shadow=shadow, mode=plan.mode, **(spec.options if options is None else options))


def load_kernel(plan: Plan) -> None:
    """Compile ``plan``'s kernel in this process, or load it from Numba's disk cache, by stepping its
    first member once.  Called before local workers start, so that they all load the cached kernel
    instead of each compiling the same one at once (on a fresh machine: one compile, not one per core)."""
    q, omega = plan.initial_state(0, 1)
    shadow = plan.initial_shadow(0, 1, q, omega) if plan.spec.lyapunov else None
    integrate_members(plan, 0, 1, q, omega, 1, 1, shadow=shadow)


def run_segment(plan: Plan, chunk: int, segment: int, after=None, threads: int | None = 1) -> tuple[int, float, float]:
    """Compute (chunk, segment) of ``plan`` into its store; returns (member-steps done, seconds,
    seconds spent writing the store).
    ``after`` is the previous segment's result, passed only so the scheduler orders the two.
    ``threads`` as for :func:`integrate_members`: 1 in a Dask worker (one per core), None in a SLURM
    array task (its CPUs)."""
    store = RunStore(plan.spec.store)
    if store.is_done(chunk, segment):
        return 0, 0.0, 0.0
    started = time.perf_counter()
    spec = plan.spec
    first, stop = plan.chunks[chunk]
    seg = plan.segments[segment]
    options = dict(spec.options)
    shadow = None
    writes = []  # (array, region, value): all written together after the kernel, then the record
    if segment == 0:
        q, omega = plan.initial_state(first, stop)
        writes += [("q0", slice(first, stop), q), ("omega0", slice(first, stop), omega)]
        status = np.zeros(stop - first, np.int64)
        failed_step = np.full(stop - first, -1, np.int64)
        if spec.lyapunov:
            shadow = plan.initial_shadow(first, stop, q, omega)
    else:
        state = store.read_checkpoint((segment - 1) % 2, first, stop,
                                      CHECKPOINT_STATE + (SHADOW_STATE if spec.lyapunov else ()))
        q, omega, status, failed_step = state["q"], state["omega"], state["status"], state["failed_step"]
        if spec.method == "rk45":  # continue with the step size the controller proposed
            options["first_step"] = np.where(np.isfinite(state["step_size"]), state["step_size"], spec.dt)
        if spec.lyapunov:
            shadow = Shadow(state["shadow_q"], state["shadow_omega"], state["log_growth"], state["reference"],
                            spec.lyapunov["d0"], spec.lyapunov["renormalise_every"], seg.start)
    failed = status != OK
    if failed.any():
        # Failed members ride along from their (valid) initial state so that the kernel sees only
        # finite input; their results are discarded.  Members are independent, so the others' bits
        # do not depend on this.
        q, omega = q.copy(), omega.copy()
        q[failed] = store.array("q0")[first:stop][failed]
        omega[failed] = store.array("omega0")[first:stop][failed]
        if shadow is not None:
            fresh = plan.initial_shadow(first, stop, q, omega)
            shadow = replace(shadow, **{name: np.where(failed.reshape((-1,) + (1,) * (np.ndim(value) - 1)),
                                                       getattr(fresh, name), value)
                                        for name, value in (("q", shadow.q), ("omega", shadow.omega),
                                                            ("log_growth", shadow.log_growth),
                                                            ("reference", shadow.reference))})
    outputs = tuple(name for name in spec.variables if name in STATE_VARIABLES) or ("energy",)
    result = integrate_members(plan, first, stop, q, omega, seg.stop - seg.start, spec.save_every, outputs=outputs,
                               options=options, shadow=shadow, restart=segment > 0, threads=threads)

    writing = time.perf_counter()
    samples = seg.last_sample - seg.first_sample + 1
    new_failure = ~failed & (result.status != OK)
    status = np.where(failed, status, result.status)
    failed_step = np.where(new_failure, seg.start + result.failed_step, failed_step)
    region = (slice(first, stop), slice(seg.first_sample, seg.last_sample + 1))
    for name in spec.variables:
        values = getattr(result, name)[:, :samples].copy()
        values[failed] = np.nan
        writes.append((name, region, values))
    q_end, omega_end = result.q_final.copy(), result.omega_final.copy()
    q_end[failed] = np.nan
    omega_end[failed] = np.nan
    checkpoint = {"q": q_end, "omega": omega_end, "step_size": result.step_size, "status": status,
                  "failed_step": failed_step}
    if shadow is not None:
        elapsed = plan.sample_steps[seg.first_sample:seg.last_sample + 1] * spec.dt
        estimate = result.lyapunov(elapsed)
        estimate[failed] = np.nan
        writes.append(("lyapunov_estimate", region, estimate))
        if seg.stop == spec.n_steps:
            writes.append(("lyapunov", slice(first, stop), estimate[:, -1]))
        end = result.shadow_final
        checkpoint.update(shadow_q=end.q, shadow_omega=end.omega, log_growth=end.log_growth, reference=end.reference)
    writes += store.checkpoint_writes(segment % 2, first, stop, checkpoint)
    writes += [("status", slice(first, stop), status), ("failed_step", slice(first, stop), failed_step)]
    store.write_all(writes)
    finished = time.perf_counter()
    store.mark_done(chunk, segment, finished - started, finished - writing)
    return int(plan.work[chunk, segment]), finished - started, finished - writing
