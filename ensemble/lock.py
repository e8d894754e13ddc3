"""The lock of a store: one run at a time per store, taken over when its holder died on this host or was an earlier
run of this SLURM job before SLURM requeued it; and the lock under which processes sharing a kernel cache take turns
compiling one kernel."""

from __future__ import annotations

import fcntl
import json
import os
import socket
from contextlib import contextmanager
from datetime import datetime, timezone

from armillary.kernels.caches import lock_directory

from .errors import StoreError

LOCK_SUFFIX = ".lock"  # the lock sits next to the store (inside, Zarr would take it for a broken node)


def is_local(url: str) -> bool:
    return "://" not in url


def _process_start(pid: int) -> str | None:
    """Start time of ``pid`` in clock ticks since boot (tells a live process from a reused pid); None for a process
    that has ended, a zombie too (an MPI rank's working process whose supervisor mpiexec killed waits for init)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return None if fields[0] == "Z" else fields[19]


def _slurm_run() -> dict:
    """This process's SLURM job and how often SLURM has requeued it ({} outside SLURM): a requeued job keeps its id
    and counts its restarts, and SLURM ends every process of a run before it starts the next."""
    job = os.environ.get("SLURM_JOB_ID")
    return {"slurm_job": job, "slurm_restart": os.environ.get("SLURM_RESTART_COUNT", "0")} if job else {}


def _lock_is_stale(holder: dict) -> bool:
    """A lock is stale when its process is gone: decidable for locks taken on this host, and for locks of an earlier
    run of this SLURM job (a multi-node job requeued: its rank 0 may now be on another host)."""
    mine = _slurm_run()
    if mine and holder.get("slurm_job") == mine["slurm_job"] and holder.get("slurm_restart") != mine["slurm_restart"]:
        return True
    if holder.get("host") != socket.gethostname():
        return False
    return _process_start(holder.get("pid", -1)) != holder.get("process_start")


@contextmanager
def run_lock(url: str):
    """Hold the store's lock (pid, host, time, SLURM job and restart) for the duration of a run.  A lock held by a
    live process is refused; a lock left by a dead process on this host, or by this SLURM job before it was requeued,
    is taken over."""
    if not is_local(url):  # object stores have no atomic create; remote runs trust the user
        yield
        return
    path = lock_path(url)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    holder = {"pid": os.getpid(), "host": socket.gethostname(), "process_start": _process_start(os.getpid()),
              "since": datetime.now(timezone.utc).isoformat(timespec="seconds"), **_slurm_run()}
    for _ in range(2):
        try:
            descriptor = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            current = read_lock(url) or {}
            if not _lock_is_stale(current):
                raise StoreError(f"is in use by pid {current.get('pid')} on {current.get('host')} since "
                                 f"{current.get('since')} (lock {path}; delete it only if that run is gone)")
            print(f"armillary: taking over the stale lock of pid {current.get('pid')} (no longer running)")
            os.unlink(path)
            continue
        with os.fdopen(descriptor, "w") as handle:
            json.dump(holder, handle)
        break
    try:
        yield
    finally:
        os.unlink(path)


def lock_path(url: str) -> str:
    return os.path.abspath(url).rstrip("/") + LOCK_SUFFIX


def read_lock(url: str) -> dict | None:
    """The lock holder's record, or None when nobody holds the lock; ``stale`` is True when its process is
    gone (a run killed with -9 on this host: the next run takes the lock over)."""
    try:
        with open(lock_path(url)) as handle:
            holder = json.load(handle)
    except (OSError, ValueError):
        return None
    return {**holder, "stale": _lock_is_stale(holder)}


@contextmanager
def kernel_lock(name: str):
    """An exclusive lock on ``armillary-compile-<name>.lock`` in Numba's cache directory (NUMBA_CACHE_DIR, where a
    compile's result becomes visible to the other processes), else in the user's own cache directory; both
    private to the user (:mod:`armillary.kernels.caches`), so no other user can hold it.  A directory where no
    lock file can be made leaves each process to compile on its own, as without the lock."""
    try:
        handle = open(os.path.join(lock_directory(), f"armillary-compile-{name}.lock"), "a")
    except OSError:
        yield
        return
    with handle:
        fcntl.flock(handle, fcntl.LOCK_EX)  # released when the handle closes, or the process dies
        yield
