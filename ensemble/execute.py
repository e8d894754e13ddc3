"""Run a plan on Dask distributed: one task per (chunk, segment), chained per chunk, data through the
store (never through the client), progress on the terminal."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
import uuid

import numpy as np
from distributed import as_completed

from armillary.kernels import InvalidInput, device_missing

from .clusters import dask_client
from .errors import RunFailed
from .lock import is_local
from .plan import Plan
from .segment import load_kernel, run_segment
from .store import RunStore


def kernel_threads(plan: Plan) -> int:
    """Kernel threads of each local worker: 1 when members run in parallel (one worker per core),
    every CPU when the plan is system-parallel (its one member runs on one worker, the others idle)."""
    return 1 if plan.mode == "ensemble" else len(os.sched_getaffinity(0))


class Progress:
    """Member-steps done, rate and ETA: a live bar on a terminal, a log line every ``interval`` s otherwise."""

    def __init__(self, total: int, done: int, stream, interval: float = 10.0):
        self.total, self.done, self.stream, self.interval = total, done, stream, interval
        self.start_done, self.started, self.last_line = done, time.monotonic(), 0.0
        self.tty = stream.isatty()

    def advance(self, member_steps: int) -> None:
        self.done += member_steps
        now = time.monotonic()
        if self.tty or now - self.last_line >= self.interval or self.done == self.total:
            self.last_line = now
            self._print(now)

    def _print(self, now: float) -> None:
        elapsed = max(now - self.started, 1e-9)
        rate = (self.done - self.start_done) / elapsed
        eta = (self.total - self.done) / rate if rate > 0 else float("inf")
        fraction = self.done / self.total if self.total else 1.0
        text = (f"{fraction:6.1%}  {self.done:.3e}/{self.total:.3e} member-steps  {rate:.3e}/s  "
                f"ETA {_duration(eta)}")
        if self.tty:
            bar = "#" * int(30 * fraction)
            self.stream.write(f"\r[{bar:<30}] {text}" + ("\n" if self.done == self.total else ""))
        else:
            self.stream.write(f"armillary: {text}\n")
        self.stream.flush()


def _duration(seconds: float) -> str:
    if seconds == float("inf"):
        return "?"
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}"


@contextlib.contextmanager
def noted_signals(numbers, then=None):
    """The signals ``numbers`` noted in the list this yields, in the order they come (and ``then(signum)`` called),
    instead of their usual handling, until the block ends: a run that stops between segments looks at the list."""
    noted = []

    def note(signum, frame):
        noted.append(signum)
        if then is not None:
            then(signum)

    handlers = {number: signal.signal(number, note) for number in numbers}
    try:
        yield noted
    finally:
        for number, handler in handlers.items():
            signal.signal(number, handler)


def execute_array_task(plan: Plan, index: int, size: int, stream) -> bool:
    """Run, in this process, every pending segment of the chunks c with c mod ``size`` = ``index``
    (one SLURM array task).  SIGUSR1 or SIGTERM (walltime warning, preemption) lets the current
    segment finish and be recorded, then stops: returns False if work is left, True when done."""
    store = RunStore(plan.spec.store)
    done = store.done_grid()
    mine = [(c, j) for c in range(index, len(plan.chunks), size) for j in range(len(plan.segments)) if not done[c, j]]
    def announce(signum):
        print(f"armillary: {signal.Signals(signum).name}: stopping after the current segment", file=stream, flush=True)

    with noted_signals((signal.SIGUSR1, signal.SIGTERM), announce) as stop:
        print(f"armillary: array task {index} of {size}: {len(mine)} segments to run", file=stream, flush=True)
        work = plan.work
        progress = Progress(int(sum(work[c, j] for c, j in mine)), 0, stream)
        if mine and plan.mode == "ensemble":
            load_kernel(plan, stream)
        for c, j in mine:
            if stop:
                return False
            progress.advance(run_segment(plan, c, j, threads=None)[0])  # on the task's CPUs (NUMBA_NUM_THREADS)
    return True


def execute(plan: Plan, stream, gpus: list[str] | None = None) -> None:
    """Run every pending (chunk, segment) of ``plan`` on the spec's cluster (timings land in the
    store's completion records); with ``[ensemble] until``, batch by batch until the rule holds (see
    :func:`until_batches`).  ``gpus``: for device 'cuda', the local workers' devices, or [] where the workers are
    elsewhere (:func:`.runs.require_device`).  Raises RunFailed if a task fails (its error message included)."""
    store = RunStore(plan.spec.store)
    done = store.done_grid()
    segments = plan.segments
    work = plan.work
    pending = int(done.size - done.sum())
    until = plan.spec.until
    if until is None:
        print(f"armillary: {plan.spec.members} members × {plan.spec.n_steps} steps in {len(plan.chunks)} chunks × "
              f"{len(segments)} segments; {done.size - pending} segments already done, {pending} to run", file=stream)
    else:
        print(f"armillary: up to {plan.spec.members} members × {plan.spec.n_steps} steps, {until['batch']} more per "
              f"sweep point until {until['statistic']} is known within ± {until['half_width']:g} at every point",
              file=stream)
    if pending == 0:
        return
    if gpus:
        print(f"armillary: {len(gpus)} local workers, one per CUDA device ({', '.join(gpus)})", file=stream)
    elif gpus is None and plan.spec.cluster["kind"] == "local" and plan.mode == "ensemble":
        load_kernel(plan, stream)  # (not on a GPU: this process forks the workers and must not start CUDA)
    run_id = uuid.uuid4().hex[:8]
    shared = os.path.dirname(plan.spec.store) if is_local(plan.spec.store) else os.path.expanduser("~")
    with dask_client(plan.spec.cluster, kernel_threads(plan), shared, gpus) as client:
        print(f"armillary: dashboard {client.dashboard_link}", file=stream, flush=True)
        if gpus == []:  # the workers are elsewhere: one of them checks its device before any task runs
            missing = client.submit(device_missing, "cuda", pure=False).result()
            if missing is not None:
                raise InvalidInput("execution.device", f"on the cluster's workers: {missing}")
        if until is None:
            _run_chunks(client, plan, range(len(plan.chunks)), done, run_id, Progress(int(work.sum()),
                                                                                          int(work[done].sum()), stream))
            return
        for batch, chunks in enumerate(until_batches(plan)):
            chunk_work = work[chunks]
            _run_chunks(client, plan, chunks, done, run_id, Progress(int(chunk_work.sum()),
                                                                     int(chunk_work[done[chunks]].sum()), stream))
            state = record_until(plan, batch + 1)
            _print_until(state, stream)
            if state["stopped"]:
                return


def _run_chunks(client, plan: Plan, chunks, done, run_id: str, progress: Progress) -> None:
    """Submit every pending segment of ``chunks`` (chained per chunk) and wait for them all."""
    futures = []
    for c in chunks:
        previous = None
        for j in range(len(plan.segments)):
            if done[c, j]:
                continue
            previous = client.submit(run_segment, plan, c, j, previous, key=f"segment-{run_id}-{c}-{j}")
            futures.append(previous)
    try:
        for future in as_completed(futures):
            if future.status == "error":
                raise RunFailed(f"task {future.key} failed: {future.exception()!r}")
            progress.advance(future.result()[0])
    except BaseException:
        client.cancel(futures)
        raise


def until_batches(plan: Plan) -> list[np.ndarray]:
    """The chunk indices of each batch of an ``until`` run, in order: batch b holds members
    p·M/P + [b·batch, (b+1)·batch) of every sweep point p (M members at most, P points), so members keep
    their global ids (and seeds) whatever size the run stops at."""
    until, spec = plan.spec.until, plan.spec
    per_point = spec.members // spec.sweep_points
    width = until["batch"] // spec.chunk
    return [np.concatenate([np.arange(width) + (p * per_point + b * until["batch"]) // spec.chunk
                            for p in range(spec.sweep_points)])
            for b in range(per_point // until["batch"])]


def record_until(plan: Plan, batches: int) -> dict:
    """Evaluate the ``until`` rule over the first ``batches`` batches and record it in the store's attribute
    ``until`` (which :func:`.accessor.open_store` selects the members by and ``armillary status`` shows)."""
    until, spec = plan.spec.until, plan.spec
    per_point = spec.members // spec.sweep_points
    state = {"batches": batches, "batch": until["batch"], "per_point": per_point, "points": spec.sweep_points,
             "statistic": until["statistic"], "half_width": until["half_width"]}
    # dask.array with them (a second of a resumed run's start): needed only by a run sized by `until`
    from .accessor import open_store
    from .analysis import statistic_intervals

    ds = open_store(spec.store, until=state)
    intervals = statistic_intervals(ds, until["statistic"])
    known = all(np.isfinite(i["high"] - i["low"]) and (i["high"] - i["low"]) / 2 <= until["half_width"]
                for i in intervals)
    full = batches * until["batch"] >= per_point
    state.update(members=int(ds.sizes["member"]), intervals=intervals, stopped=known or full,
                 reason="known" if known else "max_members" if full else "")
    RunStore(spec.store).set_attribute("until", json.dumps(state))
    return state


def _print_until(state: dict, stream) -> None:
    for interval in state["intervals"]:
        where = ", ".join(f"{name} = {value:g}" for name, value in interval["point"].items()) or "all members"
        half = (interval["high"] - interval["low"]) / 2
        print(f"armillary: {state['members']} members: {state['statistic']} {interval['estimate']:.4g} "
              f"[{interval['low']:.4g}, {interval['high']:.4g}] (± {half:.3g}, target ± {state['half_width']:g}) at "
              f"{where}", file=stream)
    if state["stopped"]:
        print("armillary: stopping: " + ("the statistic is known at every point" if state["reason"] == "known" else
                                         "max_members reached before the rule held"), file=stream, flush=True)
