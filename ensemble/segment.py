"""One task of a run: integrate one chunk of members over one segment of steps and record it.

A segment task is idempotent: if its completion record exists it does nothing; otherwise it reads
its start state (the members' initial states for the first segment, else the checkpoint slot the
previous segment wrote), integrates with the kernels, writes its own regions, then its record.
Re-running a task that died half-way rewrites the same regions with the same bits.  The state's
variables, the method's carried solver state and the shadows are whatever the kernels declare.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import replace

import numpy as np

from armillary.kernels import carried_names, integrate
from armillary.kernels.domain import id_range
from armillary.kernels.lyapunov import Shadow, initial_indicators
from armillary.kernels.status import OK, STOPPED

from .lock import kernel_lock
from .plan import Plan
from .spec_keys import section_prefix
from .store import (CROSSINGS_PER_CHUNK, PROGRESS, RunStore, capacity_of, checkpoint_names, crossing_variables,
                    indicator_variables, particle_variables, shadow_slot_shapes)


def integrate_members(plan: Plan, first: int, stop: int, state: dict, n_steps: int, save_every: int, *,
                      outputs=(), shadow=None, restart=False, carry=None, threads: int | None = 1, start_step: int = 0,
                      exchange=None):
    """The plan's kernel on members [first, stop) from ``state``, continuing after global step
    ``start_step`` (the time origin of time-dependent forces): the one call of every task, and of
    :func:`load_kernel`, so both use the same compiled kernel (mode, method options).
    ``threads``: kernel threads of an ensemble-mode plan (None: the process's, NUMBA_NUM_THREADS);
    a system-parallel plan uses the process's, or on MPI ranks (``exchange``, :mod:`.mpi`) ``threads`` each."""
    spec = plan.spec
    threads = threads if plan.mode == "ensemble" or exchange is not None else None
    return integrate(plan.chunk_system(first, stop), spec.method, state, spec.dt, n_steps, save_every,
                     outputs=outputs, threads=threads, restart=restart, exchange=exchange,
                     shadow=shadow, mode=plan.mode, carry=carry, start_step=start_step, sections=plan.sections,
                     seed=spec.seed, member_ids=np.arange(first, stop), skin=spec.skin, device=spec.device or "cpu",
                     fma=spec.fma is not False,
                     **plan.member_options(first, stop))


def load_kernel(plan: Plan, stream) -> None:
    """Compile ``plan``'s kernel in this process, or load it from Numba's disk cache, by stepping its
    first member once.  Called before local workers start, so that they all load the cached kernel
    instead of each compiling the same one at once (on a fresh machine: one compile, not one per core),
    and by each SLURM array task before its first segment.  Processes that share the cache directory (the
    array tasks of one node, two runs at once) take turns per kernel: the first compiles, the others wait
    for it and load what it wrote (:func:`.lock.kernel_lock`)."""
    print(f"armillary: loading the {plan.spec.method} kernel for {plan.spec.system} (the first run of a "
          "method and system compiles it, about 30 s)", file=stream, flush=True)
    state = plan.initial_state(0, 1)
    shadow = plan.initial_shadow(0, 1, state) if plan.spec.shadows else None
    with kernel_lock(f"{plan.spec.system}-{plan.spec.method}"):
        integrate_members(plan, 0, 1, state, 1, 1, shadow=shadow)


#: fault-injection points for tests/test_faults.py and tests/test_mpi.py: with ARMILLARY_PAUSE_BEFORE_RECORD =
#: "PATH:SECONDS", the first task of the run to have written its data creates PATH (its pid, chunk and segment, JSON)
#: and sleeps SECONDS before writing its completion record, so that a test can kill or signal it exactly between the
#: two; ARMILLARY_PAUSE_BEFORE_KERNEL likewise pauses a task that has read its start state, before its kernel runs
#: (on MPI ranks, rank 0, the others waiting in the kernel); with ARMILLARY_PAUSE_SEGMENT = "J" too, the first task
#: of segment J (one with earlier segments' results to keep)
PAUSE_BEFORE_RECORD = "ARMILLARY_PAUSE_BEFORE_RECORD"
PAUSE_BEFORE_KERNEL = "ARMILLARY_PAUSE_BEFORE_KERNEL"
PAUSE_SEGMENT = "ARMILLARY_PAUSE_SEGMENT"


def _pause(point: str, chunk: int, segment: int) -> None:
    """The fault-injection pause ``point`` (PAUSE_BEFORE_RECORD or PAUSE_BEFORE_KERNEL), if set for this task."""
    setting = os.environ.get(point)
    if not setting or os.environ.get(PAUSE_SEGMENT, str(segment)) != str(segment):
        return
    path, seconds = setting.rsplit(":", 1)
    try:
        descriptor = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:  # another task paused already: one pause per run
        return
    with os.fdopen(descriptor, "w") as handle:
        json.dump({"pid": os.getpid(), "chunk": chunk, "segment": segment}, handle)
    time.sleep(float(seconds))


def _member_rows(mask: np.ndarray, value: np.ndarray) -> np.ndarray:
    """``mask`` (members,) shaped to broadcast against ``value`` (members, ...)."""
    return mask.reshape((-1,) + (1,) * (np.ndim(value) - 1))


def saved_shadow(plan: Plan, saved: dict, members: int, step_offset: int) -> Shadow:
    """The shadows a segment hands to the next, from its checkpoint slot (see
    :func:`.store.shadow_slot_shapes`; the indicators' state starts afresh where the store keeps none)."""
    shadows = plan.spec.shadows
    count, shapes = shadows["count"], plan.space.shapes(plan.n_bodies)
    indicators = saved["indicators"] if "indicators" in saved else initial_indicators(members, count)
    return Shadow({name: saved["shadow_" + name].reshape((members, count) + shapes[name]) for name in shapes},
                  saved["log_growth"].reshape(members, count), saved["reference"].reshape(members, count), indicators,
                  shadows["d0"], shadows["renormalise_every"], step_offset)


def shadow_checkpoint(plan: Plan, shadow: Shadow) -> dict:
    """The checkpoint slots' values of ``shadow`` (:func:`saved_shadow` reads them back)."""
    slots = shadow_slot_shapes(plan)
    values = {"shadow_" + name: value for name, value in shadow.state.items()}
    values.update(log_growth=shadow.log_growth, reference=shadow.reference, indicators=shadow.indicators)
    return {name: values[name].reshape((len(shadow.log_growth),) + shape) for name, shape in slots.items()}


def indicator_writes(plan: Plan, result, failed: np.ndarray, members: slice, region: tuple, seg) -> list:
    """The writes of the configured chaos indicators of one segment (NaN for members failed before it):
    over its samples, and their final values in the last segment."""
    spec = plan.spec
    last = seg.stop == spec.n_steps
    elapsed = plan.sample_steps[seg.first_sample:seg.last_sample + 1] * spec.dt
    writes = []

    def over_time(name, values, final=None):
        values = values.copy()
        values[failed] = np.nan
        writes.append((name, region, values))
        if final is not None and last:
            writes.append((final, members, values[:, -1]))

    if spec.lyapunov:
        over_time("lyapunov_estimate", result.lyapunov(elapsed), "lyapunov")
    if spec.lyapunov_spectrum:
        over_time("lyapunov_spectrum_estimate", result.spectrum(elapsed)[:, :, :spec.lyapunov_spectrum["count"]],
                  "lyapunov_spectrum")
    if spec.megno:
        over_time("megno", result.megno[:, :elapsed.size], "megno_final")
    if spec.sali:
        over_time("sali", result.sali[:, :elapsed.size])
        if "gali" in indicator_variables(spec):
            over_time("gali", result.gali[:, :elapsed.size])
    return writes


def section_writes(plan: Plan, store: RunStore, result, failed: np.ndarray, members: slice, section: str,
                   before: np.ndarray) -> tuple[list, np.ndarray]:
    """The writes of one segment's crossings of the named section, appended to each member's earlier ones
    (``before`` of them) up to max_crossings, and every member's count after it (crossings of members failed
    before it are not counted).  Only the crossing columns the new crossings fall in are read and written (the
    store chunks crossings, :data:`.store.CROSSINGS_PER_CHUNK` to a chunk; chunks past every member's count are
    never written and read as NaN), so a segment's writes grow with its crossings, not with the crossings
    stored; a member chunk's first crossings are written as whole Zarr chunks, without reading.  A segment that
    is run again finds the same ``before`` in its checkpoint and writes the same bits at the same places."""
    crossings = result.sections[section]
    prefix = section_prefix(section)
    found = np.where(failed, 0, crossings["count"])
    after = before + found
    capacity = plan.spec.surfaces[section]["max_crossings"]
    new = found.astype(bool) & (before < capacity)
    writes = [(prefix + "count", members, after)]
    if not new.any():
        return writes, after
    columns = slice(int(before[new].min()), int(np.minimum(after[new], capacity).max()))
    arrays = dict(zip(crossing_variables(plan, section),
                      [crossings["time"]] + [crossings["state"][name] for name in plan.recorded(section)]))
    if not before.any():  # the member chunk's first crossings: whole Zarr chunks written, nothing read
        columns = slice(0, min(-(-columns.stop // CROSSINGS_PER_CHUNK) * CROSSINGS_PER_CHUNK, capacity_of(plan)))
        stored = {name: np.full((members.stop - members.start, columns.stop) + values.shape[2:], np.nan)
                  for name, values in arrays.items()}
    else:
        stored = {name: store.read(name, (members, columns)) for name in arrays}
    region = (members, columns)
    for m in np.flatnonzero(new):
        start, stop = before[m], min(after[m], capacity)
        for name, values in arrays.items():
            stored[name][m, start - columns.start:stop - columns.start] = values[m, :stop - start]
    return writes + [(name, region, value) for name, value in stored.items()], after


def write_initial_state(plan: Plan) -> None:
    """The initial state of the one member that runs on MPI ranks, into its store's initial values: made once, by
    rank 0 before the ranks start, because the generators place a member's particles together (a lattice, a
    minimum separation, no net angular momentum; a file in its own order).  Each rank then reads the ids it holds,
    at the first segment as at every later one from the checkpoint, so that no rank holds every particle's state
    while the ranks run.  Nothing is written once the first segment is recorded."""
    store = RunStore(plan.spec.store)
    if not store.is_done(0, 0):
        state = plan.initial_state(0, 1)
        store.write_all([(name + "0", slice(0, 1), state[name]) for name in plan.space.names])


def rank_share(plan: Plan, writes: list, particles: slice, rank: int) -> list:
    """The writes of one rank of a system-mode member on MPI ranks: the per-particle variables
    (:func:`.store.particle_variables`, and their checkpoint slots), whose values hold the ids ``particles`` of this
    rank, there; the rest on rank 0 alone."""
    per_particle = particle_variables(plan)
    share = []
    for name, region, value in writes:
        if name.removeprefix(f"{PROGRESS}/slot_") not in per_particle:
            if rank == 0:
                share.append((name, region, value))
        elif particles.stop > particles.start:
            share.append((name, (region if isinstance(region, tuple) else (region,)) + (particles,), value))
    return share


def run_segment(plan: Plan, chunk: int, segment: int, after=None, threads: int | None = 1,
                exchange=None) -> tuple[int, float, float]:
    """Compute (chunk, segment) of ``plan`` into its store; returns (member-steps done, seconds,
    seconds spent writing the store).
    ``after`` is the previous segment's result, passed only so the scheduler orders the two.
    ``threads`` as for :func:`integrate_members`: 1 in a Dask worker (one per core), None in a SLURM
    array task (its CPUs), each rank's threads with ``exchange`` (one system-mode member on MPI ranks, all of which
    call this together: each writes the per-particle variables of its ids, rank 0 the rest and the record once every
    rank's data is stored)."""
    store = RunStore(plan.spec.store)
    if store.is_done(chunk, segment):
        return 0, 0.0, 0.0
    lead = exchange is None or exchange.rank == 0
    if lead:
        store.count_attempt(chunk, segment)
    started = time.perf_counter()
    spec, names = plan.spec, plan.space.names
    first, stop = plan.chunks[chunk]
    # a chunk whose members are all unforced runs the unforced kernel, which carries no work (it is 0)
    carried = carried_names(plan.method, plan.chunk_system(first, stop))
    members = slice(first, stop)
    # on MPI ranks each rank reads and writes the state of the ids it holds, and nothing of the other ids
    particles = None if exchange is None else slice(*id_range(plan.n_bodies, exchange))
    region = members if particles is None else (members, particles)
    seg = plan.segments[segment]
    shadow, carry = None, None
    writes = []  # (array, region, value): all written together after the kernel, then the record
    if segment == 0:
        if exchange is None:
            state = plan.initial_state(first, stop)
            writes += [(name + "0", members, state[name]) for name in names]
        else:  # rank 0 wrote the initial state before the ranks started (write_initial_state)
            state = {name: store.read(name + "0", region) for name in names}
        status = np.zeros(stop - first, np.int64)
        failed_step = np.full(stop - first, -1, np.int64)
        if spec.shadows:
            shadow = plan.initial_shadow(first, stop, state)
        closest = np.full(stop - first, np.inf)
        crossed = {section: np.zeros(stop - first, np.int64) for section in spec.surfaces}
        escaped_at = np.full(stop - first, np.nan)
    else:
        saved = store.read_checkpoint((segment - 1) % 2, first, stop, checkpoint_names(plan), particles,
                                      particle_variables(plan))
        state = {name: saved[name] for name in names}
        status, failed_step = saved["status"], saved["failed_step"]
        carry = {name: saved[name] for name in carried}  # e.g. rk45 continues with its proposed step
        closest = saved.get("min_separation")
        crossed = {section: saved[section_prefix(section) + "count"] for section in spec.surfaces}
        escaped_at = saved.get("escape_time")
        if spec.shadows:
            shadow = saved_shadow(plan, saved, stop - first, seg.start)
    failed = status != OK  # members that failed, or stopped at their escape, in an earlier segment
    stopped_before = np.isin(status, STOPPED)
    stopped_state = {name: value[stopped_before] for name, value in state.items()}  # kept as they stopped
    if failed.any():
        # Failed members ride along from their (valid) initial state so that the kernel sees only
        # finite input; their results are discarded.  Members are independent, so the others' bits
        # do not depend on this.
        state = {name: np.where(_member_rows(failed, value), store.read(name + "0", region), value)
                 for name, value in state.items()}
        if shadow is not None:
            fresh = plan.initial_shadow(first, stop, state)
            shadow = replace(
                shadow, state={name: np.where(_member_rows(failed, value), fresh.state[name], value)
                               for name, value in shadow.state.items()},
                **{name: np.where(_member_rows(failed, getattr(shadow, name)), getattr(fresh, name), getattr(shadow, name))
                   for name in ("log_growth", "reference", "indicators")})
    outputs = tuple(name for name in spec.variables if name in names) + ("min_separation",) * plan.tracks_encounters
    if lead:
        _pause(PAUSE_BEFORE_KERNEL, chunk, segment)
    result = integrate_members(plan, first, stop, state, seg.stop - seg.start, spec.save_every, outputs=outputs,
                               shadow=shadow, restart=segment > 0, carry=carry, threads=threads, start_step=seg.start,
                               exchange=exchange)

    writing = time.perf_counter()
    samples = seg.last_sample - seg.first_sample + 1
    new_failure = ~failed & (result.status != OK)
    status = np.where(failed, status, result.status)
    failed_step = np.where(new_failure, seg.start + result.failed_step, failed_step)
    region = (members, slice(seg.first_sample, seg.last_sample + 1))
    work = result.work if result.work is not None else np.zeros_like(result.energy)
    timed = {"energy": result.energy, "sample_lag": result.sample_lag, "work": work, "heat": result.heat,
             "largest_force": result.largest_force}
    for name in ([v for v in spec.variables if v != "min_separation"] + ["sample_lag"] * plan.samples_off_grid
                 + ["work"] * plan.forced + ["heat"] * plan.heat + ["largest_force"] * plan.minimiser):
        source = result.state if name in names else timed if name in timed else result.diagnostics
        values = source[name][:, :samples].copy()
        values[failed] = np.nan
        writes.append((name, region, values))
    checkpoint = {"status": status, "failed_step": failed_step, **result.carry}
    if plan.forced:
        checkpoint.setdefault("work", work[:, -1])
    if plan.minimiser:  # the steps of the whole minimisation, which its carried state counts
        writes.append(("minimisation_steps", members, result.carry["fire_steps"]))
    if plan.tracks_encounters:  # the least separation over all segments so far; failed members keep theirs
        closest = np.where(failed, closest, np.minimum(closest, result.min_separation))
        checkpoint["min_separation"] = closest
        writes.append(("min_separation", members, closest))
    for name, value in result.final.items():
        checkpoint[name] = np.where(_member_rows(failed, value), np.nan, value)
        if stopped_before.any():  # (a member on MPI ranks never stops: its rows are this rank's ids alone)
            checkpoint[name][stopped_before] = stopped_state[name]
    for section in spec.surfaces:
        crossing_writes, checkpoint[section_prefix(section) + "count"] = section_writes(
            plan, store, result, failed, members, section, crossed[section])
        writes += crossing_writes
    if plan.spec.escape is not None:  # the first crossing's time, once
        first_crossing = result.sections["escape"]
        escaped_now = ~failed & np.isnan(escaped_at) & (first_crossing["count"] > 0)
        checkpoint["escape_time"] = escaped_at.copy()
        if escaped_now.any():  # (the kernel's crossing arrays are as wide as the most crossings stored: maybe 0)
            checkpoint["escape_time"][escaped_now] = first_crossing["time"][escaped_now, 0]
        writes.append(("escape_time", members, checkpoint["escape_time"]))
    if shadow is not None:
        writes += indicator_writes(plan, result, failed, members, region, seg)
        checkpoint.update(shadow_checkpoint(plan, result.shadow_final))
    writes += store.checkpoint_writes(segment % 2, first, stop, checkpoint)
    writes += [("status", members, status), ("failed_step", members, failed_step)]
    if exchange is not None:
        writes = rank_share(plan, writes, particles, exchange.rank)
    store.write_all(writes)
    if exchange is not None:
        exchange.barrier()  # every rank's share is stored before the record vouches for it
    finished = time.perf_counter()
    if lead:
        _pause(PAUSE_BEFORE_RECORD, chunk, segment)
        store.mark_done(chunk, segment, finished - started, finished - writing)
    if exchange is not None:
        exchange.barrier()
    return int(plan.work[chunk, segment]), finished - started, finished - writing
