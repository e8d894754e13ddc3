"""Run a plan on Dask distributed: one task per (chunk, segment), chained per chunk, data through the
store (never through the client), progress on the terminal."""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import sys
import time
import uuid
from contextlib import contextmanager

import dask
import numba
from distributed import Client, LocalCluster, WorkerPlugin, as_completed

from .plan import Plan
from .segment import load_kernel, run_segment
from .store import RunStore


class RunFailed(Exception):
    """A task failed for a reason other than bad input (exit code 1)."""


class DieWithParent(WorkerPlugin):
    """Have the kernel kill a local worker process when the process that started it dies, so a
    ``kill -9`` of ``armillary run`` leaves no orphan writing into the store the next run resumes."""

    name = "armillary-die-with-parent"

    def setup(self, worker):
        if sys.platform.startswith("linux"):
            PR_SET_PDEATHSIG = 1
            ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def slurm_cluster(cluster: dict):
    """A dask-jobqueue SLURMCluster for a spec's ``[cluster]`` (kind = "slurm"): one single-threaded
    worker process per job, adapting between minimum_jobs and maximum_jobs.  Workers retire (with a
    stagger) before their walltime so the scheduler moves their work elsewhere instead of losing it
    (dask-jobqueue #691), and compile into node-local NUMBA_CACHE_DIR (numba #7952)."""
    from dask_jobqueue import SLURMCluster

    from jobs.slurm import seconds, site_for_cluster

    site = site_for_cluster(cluster)
    walltime = seconds(site.time)
    lifetime = max(60, walltime - max(120, walltime // 10))
    stagger = max(1, min(300, lifetime // 10))
    prologue = list(site.setup) + ['export NUMBA_CACHE_DIR="${TMPDIR:-/tmp}/armillary-numba-$(id -un)"',
                                   "export NUMBA_NUM_THREADS=1 OMP_NUM_THREADS=1"]
    jobs = SLURMCluster(
        cores=site.cores, processes=site.cores, memory=site.memory, walltime=site.time, queue=site.partition,
        account=site.account, job_extra_directives=list(site.directives), job_script_prologue=prologue,
        python=sys.executable, worker_extra_args=["--lifetime", f"{lifetime}s", "--lifetime-stagger", f"{stagger}s"],
        silence_logs="error")
    jobs.adapt(minimum_jobs=site.minimum_jobs, maximum_jobs=site.maximum_jobs)
    return jobs


#: Dask settings of the embedded cluster, whose workers share the CPUs with the kernels: no stack
#: sampling of the task thread every 10 ms (a Numba kernel is one opaque frame to it) and an event-loop
#: health check every second instead of every 20 ms.  Together ~3 % more kernel time per worker.
LOCAL_CLUSTER_CONFIG = {"distributed.worker.profile.enabled": False, "distributed.admin.tick.interval": "1s"}


def kernel_threads(plan: Plan) -> int:
    """Kernel threads of each local worker: 1 when members run in parallel (one worker per core),
    every CPU when the plan is system-parallel (its one member runs on one worker, the others idle)."""
    return 1 if plan.mode == "ensemble" else len(os.sched_getaffinity(0))


def worker_environment(threads: int) -> dict:
    """Environment of local worker processes: ``threads`` Numba threads, BLAS single-threaded."""
    return {"NUMBA_NUM_THREADS": str(threads), "OMP_NUM_THREADS": str(threads), "OPENBLAS_NUM_THREADS": "1",
            "MKL_NUM_THREADS": "1"}


def worker_start_method() -> str:
    """How local worker processes start: forked from this process when that is safe, so they inherit
    its imports and the kernel :func:`load_kernel` compiled (about 3 s less per run than spawning
    fresh interpreters); spawned once this process has launched Numba's threading layer (a
    system-parallel kernel ran here), because a forked GNU OpenMP runtime aborts the child."""
    try:
        layer = numba.threading_layer()
    except ValueError:  # not launched in this process
        return "fork"
    return "fork" if layer in ("workqueue", "tbb") else "spawn"


@contextmanager
def dask_client(cluster: dict, threads: int = 1):
    """A client for the spec's ``[cluster]``: an embedded LocalCluster (worker processes with one
    task thread each, whose kernels use ``threads`` threads), a running scheduler, or SLURM worker
    jobs through dask-jobqueue."""
    if cluster["kind"] == "slurm":
        with slurm_cluster(cluster) as jobs, Client(jobs) as client:
            timeout = cluster.get("worker_timeout", 300.0)
            try:
                client.wait_for_workers(1, timeout=timeout)
            except TimeoutError:
                raise RunFailed(f"no SLURM worker joined within {timeout:g} s (is the partition up? see squeue; "
                                "cluster.worker_timeout sets the wait)") from None
            yield client
        return
    try:
        if cluster["kind"] == "address":
            client = Client(cluster["scheduler"], timeout="30s")
            local = None
        else:
            # Task errors are reported once by execute(); the workers' own log lines would repeat them.
            start_method = {"distributed.worker.multiprocessing-method": worker_start_method()}
            with dask.config.set(LOCAL_CLUSTER_CONFIG | start_method):
                local = LocalCluster(n_workers=cluster["workers"], threads_per_worker=1, processes=True,
                                     dashboard_address=":0", silence_logs=logging.CRITICAL,
                                     env=worker_environment(threads))
            client = Client(local)
            client.register_plugin(DieWithParent())
    except (OSError, RuntimeError, TimeoutError) as error:
        where = cluster.get("scheduler", "a local cluster")
        raise RunFailed(f"could not start or reach the Dask cluster ({where}): {error}") from None
    try:
        yield client
    finally:
        client.close()
        if local is not None:
            local.close()


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


def execute_array_task(plan: Plan, index: int, size: int, stream) -> bool:
    """Run, in this process, every pending segment of the chunks c with c mod ``size`` = ``index``
    (one SLURM array task).  SIGUSR1 or SIGTERM (walltime warning, preemption) lets the current
    segment finish and be recorded, then stops: returns False if work is left, True when done."""
    store = RunStore(plan.spec.store)
    done = store.done_grid()
    mine = [(c, j) for c in range(index, len(plan.chunks), size) for j in range(len(plan.segments)) if not done[c, j]]
    stop = []

    def request_stop(signum, frame):
        stop.append(signum)
        print(f"armillary: {signal.Signals(signum).name}: stopping after the current segment", file=stream, flush=True)

    handlers = {number: signal.signal(number, request_stop) for number in (signal.SIGUSR1, signal.SIGTERM)}
    print(f"armillary: array task {index} of {size}: {len(mine)} segments to run", file=stream, flush=True)
    work = plan.work
    progress = Progress(int(sum(work[c, j] for c, j in mine)), 0, stream)
    try:
        for c, j in mine:
            if stop:
                return False
            progress.advance(run_segment(plan, c, j, threads=None)[0])  # on the task's CPUs (NUMBA_NUM_THREADS)
    finally:
        for number, handler in handlers.items():
            signal.signal(number, handler)
    return True


def execute(plan: Plan, stream) -> None:
    """Run every pending (chunk, segment) of ``plan`` on the spec's cluster (timings land in the
    store's completion records).  Raises RunFailed if a task fails (its error message included)."""
    store = RunStore(plan.spec.store)
    done = store.done_grid()
    segments = plan.segments
    work = plan.work
    total, already = int(work.sum()), int(work[done].sum())
    pending = int(done.size - done.sum())
    print(f"armillary: {plan.spec.members} members × {plan.spec.n_steps} steps in {len(plan.chunks)} chunks × "
          f"{len(segments)} segments; {done.size - pending} segments already done, {pending} to run", file=stream)
    if pending == 0:
        return
    if plan.spec.cluster["kind"] == "local" and plan.mode == "ensemble":
        print(f"armillary: loading the {plan.spec.method} kernel for {plan.spec.system} (the first run of a "
              "method and system compiles it, about 30 s)", file=stream, flush=True)
        load_kernel(plan)
    run_id = uuid.uuid4().hex[:8]
    with dask_client(plan.spec.cluster, kernel_threads(plan)) as client:
        print(f"armillary: dashboard {client.dashboard_link}", file=stream, flush=True)
        futures = []
        for c in range(len(plan.chunks)):
            previous = None
            for j in range(len(segments)):
                if done[c, j]:
                    continue
                previous = client.submit(run_segment, plan, c, j, previous, key=f"segment-{run_id}-{c}-{j}")
                futures.append(previous)
        progress = Progress(total, already, stream)
        try:
            for future in as_completed(futures):
                if future.status == "error":
                    raise RunFailed(f"task {future.key} failed: {future.exception()!r}")
                progress.advance(future.result()[0])
        except BaseException:
            client.cancel(futures)
            raise


