"""Dask clients for a spec's ``[cluster]``: the embedded local cluster, a running scheduler, and the
kinds other layers register (``jobs`` registers SLURM through dask-jobqueue)."""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import sys
import threading
from contextlib import contextmanager

import dask
import numba
from distributed import Client, LocalCluster, WorkerPlugin

from .cluster_kinds import CLUSTER_FACTORIES
from .devices import GpuPinning, cuda_started_here
from .errors import RunFailed


class LocalWorkerSignals(WorkerPlugin):
    """Signals of a local worker process: the kernel kills it when the process that started it dies,
    so a ``kill -9`` of ``armillary run`` leaves no orphan writing into the store the next run
    resumes; and it ignores SIGINT, which a terminal's Ctrl-C sends to the whole foreground process
    group: the run stops its workers itself (and a worker would print a KeyboardInterrupt traceback)."""

    name = "armillary-local-worker-signals"

    def setup(self, worker):
        if sys.platform.startswith("linux"):
            PR_SET_PDEATHSIG = 1
            ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, signal.SIG_IGN)


#: Dask settings of the embedded cluster, whose workers share the CPUs with the kernels: no stack
#: sampling of the task thread every 10 ms (a Numba kernel is one opaque frame to it) and an event-loop
#: health check every second instead of every 20 ms.  Together ~3 % more kernel time per worker.
LOCAL_CLUSTER_CONFIG = {"distributed.worker.profile.enabled": False, "distributed.admin.tick.interval": "1s"}


def worker_environment(threads: int) -> dict:
    """Environment of local worker processes: ``threads`` Numba threads, BLAS single-threaded."""
    return {"NUMBA_NUM_THREADS": str(threads), "OMP_NUM_THREADS": str(threads), "OPENBLAS_NUM_THREADS": "1",
            "MKL_NUM_THREADS": "1"}


def worker_start_method() -> str:
    """How local worker processes start: forked from this process when that is safe, so they inherit
    its imports and the kernel :func:`load_kernel` compiled (about 3 s less per run than spawning
    fresh interpreters); spawned once this process has launched Numba's threading layer (a
    system-parallel kernel ran here): a forked GNU OpenMP runtime aborts the child, and a child forked after any
    layer launched its threads keeps their count, which the worker's own NUMBA_NUM_THREADS then contradicts
    ("Cannot set NUMBA_NUM_THREADS to a different value once the threads have been launched": the docs' gallery
    ran a system-parallel anneal, then a run of 2 workers of 1 thread each in the same process); spawned too once this
    process has started the CUDA driver, which a forked child cannot use."""
    if cuda_started_here():
        return "spawn"
    try:
        numba.threading_layer()
    except ValueError:  # not launched in this process
        return "fork"
    return "spawn"


def logging_handlers() -> list[logging.Handler]:
    """Every handler attached to a logger of this process (the root's included), once each."""
    loggers = [logging.getLogger()] + [logger for logger in logging.Logger.manager.loggerDict.values()
                                       if isinstance(logger, logging.Logger)]
    return list({id(handler): handler for logger in loggers for handler in logger.handlers}.values())


#: per forking thread, the handlers whose locks it holds while it forks: a LocalCluster's nannies fork from a
#: thread each, at once, and each must release just what it took (one list for all once left a lock held)
_held_across_fork = threading.local()


def _hold_logging_handlers() -> None:
    _held_across_fork.handlers = logging_handlers()
    for handler in _held_across_fork.handlers:
        handler.acquire()


def _release_logging_handlers() -> None:
    for handler in reversed(_held_across_fork.handlers):
        handler.release()
    _held_across_fork.handlers = []


# A local worker is forked by a thread of the nanny while other threads may be logging.  A thread inside a
# handler's emit holds its stream's buffer lock too, and a child forked then inherits that lock held by a thread
# it does not have: its first log line through the handler waits forever (seen once under pytest, whose handler
# writes to os.devnull).  logging renews its handlers' locks in the child but not their streams' buffers, so the
# forking thread takes every handler's lock first: no thread is then inside an emit when the process forks.
os.register_at_fork(before=_hold_logging_handlers, after_in_parent=_release_logging_handlers,
                    after_in_child=lambda: setattr(_held_across_fork, "handlers", []))


def run_security():
    """TLS credentials made for one run (distributed's ``Security.temporary()``: a fresh key and self-signed
    certificate, in memory): the run's scheduler and workers accept only peers that present them, so a
    ``Client(address)`` of anyone else, on any of the run's ports, is refused during the handshake."""
    from distributed.security import Security

    return Security.temporary()


def run_security_files(directory: str):
    """:func:`run_security` written into ``directory`` (``ca.pem``, ``cert.pem`` and ``key.pem``, mode 0600), for
    workers that start elsewhere and read them there: the Security of the run's scheduler, workers and client,
    all naming those files."""
    from distributed.security import Security

    made = run_security()
    paths = {}
    for name, text in (("ca", made.tls_ca_file), ("cert", made.tls_worker_cert), ("key", made.tls_worker_key)):
        paths[name] = os.path.join(directory, f"{name}.pem")
        with open(os.open(paths[name], os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600), "w") as handle:
            handle.write(text)
    roles = {f"tls_{role}_{part}": paths[part] for role in ("scheduler", "worker", "client") for part in ("cert", "key")}
    return Security(tls_ca_file=paths["ca"], require_encryption=True, **roles)


def address_security(cluster: dict):
    """The user's own TLS credentials for ``kind = "address"`` (the spec's tls_* keys, else Dask's
    configuration ``distributed.comm.tls.*``), encryption required."""
    from distributed.security import Security

    return Security(tls_ca_file=cluster.get("tls_ca_file"), tls_client_cert=cluster.get("tls_cert"),
                    tls_client_key=cluster.get("tls_key"), require_encryption=True)


#: where the embedded cluster's scheduler, workers and nannies listen: this machine only
LOOPBACK = "127.0.0.1"


@contextmanager
def dask_client(cluster: dict, threads: int = 1, shared_directory: str | None = None, gpus: list[str] | None = None):
    """A client for the spec's ``[cluster]``: an embedded LocalCluster (worker processes with one
    task thread each, whose kernels use ``threads`` threads) on this machine's loopback, with TLS
    credentials made for the run and its dashboard on ``cluster["dashboard"]``; a running scheduler,
    over TLS with the user's credentials; or a client from a registered factory (``jobs`` registers
    SLURM worker jobs through dask-jobqueue) and is given ``shared_directory``, a directory of the user's
    that the workers' nodes see (where the store is), for what the workers must read, and whether the run is on
    GPUs.  ``gpus``: for a run on CUDA GPUs, the devices (:func:`.devices.cuda_devices`; an empty list where the
    workers are elsewhere and find their own), a local cluster starting one worker per device, each pinned to its
    own (:class:`.devices.GpuPinning`); None for the CPU."""
    if cluster["kind"] in CLUSTER_FACTORIES:
        with CLUSTER_FACTORIES[cluster["kind"]](cluster, shared_directory, gpus is not None) as client:
            yield client
        return
    try:
        if cluster["kind"] == "address":
            client = Client(cluster["scheduler"], timeout="30s", security=address_security(cluster))
            local = None
        else:
            # Task errors are reported once by execute(); the workers' own log lines would repeat them.
            start_method = {"distributed.worker.multiprocessing-method": worker_start_method()}
            with dask.config.set(LOCAL_CLUSTER_CONFIG | start_method):
                local = LocalCluster(n_workers=len(gpus) if gpus else cluster["workers"], threads_per_worker=1,
                                     processes=True, host=LOOPBACK, protocol="tls://", security=run_security(),
                                     dashboard_address=f"{cluster.get('dashboard', LOOPBACK)}:0",
                                     silence_logs=logging.CRITICAL, env=worker_environment(threads))
            client = Client(local)
            client.register_plugin(LocalWorkerSignals())
            if gpus:
                client.register_plugin(GpuPinning(gpus, len(gpus)))
    except (OSError, RuntimeError, TimeoutError, ValueError) as error:
        where = cluster.get("scheduler", "a local cluster")
        raise RunFailed(f"could not start or reach the Dask cluster ({where}): {error}") from None
    try:
        yield client
    finally:
        client.close()
        if local is not None:
            local.close()
