"""CUDA devices for a run, without starting the CUDA driver in a process that forks.

The CUDA driver cannot be used in a process forked after it started (numba-cuda: "CUDA initialized before
forking").  The process that runs ``armillary run`` (or :func:`armillary.run`) forks the local cluster's workers,
so it never starts the driver itself: it asks a short-lived child process (:func:`probe_cuda`) whether a device is
there and which, and each worker, pinned to one device by :class:`GpuPinning` before its first task, starts its own
driver when its first kernel launches.  The kernels' own check (:func:`armillary.kernels.device_missing`) runs in the
worker, where the kernel runs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from distributed import WorkerPlugin

from armillary.kernels.errors import InvalidInput

#: how long the child may take to import numba-cuda and start the driver (seconds; both take a few on a GPU node)
PROBE_SECONDS = 120
#: the child's program: the kernels' report (kernels.integration.cuda_report) as one JSON line
_PROBE = "import json; from armillary.kernels.integration import cuda_report; print(json.dumps(cuda_report()))"


def probe_cuda() -> tuple[str | None, list[str]]:
    """(what this machine lacks to run on 'cuda', one line, or None; the devices a worker may be pinned to), asked of
    a child process (this one's interpreter and environment, ``-P``: no module from the working directory) so that
    this process, which forks workers, never starts the CUDA driver."""
    try:
        completed = subprocess.run([sys.executable, "-P", "-c", _PROBE], capture_output=True, text=True,
                                   timeout=PROBE_SECONDS)
    except subprocess.TimeoutExpired:
        return f"'cuda': the CUDA driver did not start within {PROBE_SECONDS} s", []
    lines = completed.stdout.strip().splitlines()
    if completed.returncode != 0 or not lines:
        said = (completed.stderr.strip() or f"exit status {completed.returncode}").splitlines()[-1]
        return f"'cuda': the device check failed: {said}", []
    report = json.loads(lines[-1])
    return report["missing"], report["devices"]


def cuda_devices(gpus: int | None = None) -> list[str]:
    """The devices a local run of device 'cuda' uses, one worker each: the first ``gpus`` of those visible here
    (every one when None).  InvalidInput naming ``execution.device`` where there is none, ``cluster.gpus`` where
    fewer than asked."""
    missing, devices = probe_cuda()
    if missing is not None:
        raise InvalidInput("execution.device", missing)
    return chosen_devices(gpus, devices)


def chosen_devices(gpus: int | None, devices: list[str]) -> list[str]:
    """The first ``gpus`` of ``devices`` (all when None); InvalidInput naming ``cluster.gpus`` where fewer."""
    if gpus is not None and gpus > len(devices):
        raise InvalidInput("cluster.gpus", f"{gpus} GPUs asked for, this node has {len(devices)} visible "
                           f"({', '.join(devices)}); at most {len(devices)}")
    return devices[:gpus]


def cuda_started_here() -> bool:
    """Whether this process has started numba-cuda's CUDA driver (an ``integrate(..., device="cuda")`` here, before
    a run): its workers must then be spawned, not forked.  Reads the driver's record without starting it."""
    module = sys.modules.get("numba.cuda.cudadrv.driver")
    return getattr(getattr(module, "driver", None), "pid", None) == os.getpid()


def worker_position(name, workers_per_node: int) -> int:
    """Which of its node's workers the worker named ``name`` is: a local cluster names them 0, 1, …; a SLURM worker
    job of several processes (dask-jobqueue) ``JOB-0``, ``JOB-1``, …, of one process ``JOB`` (position 0)."""
    if isinstance(name, int):
        return name
    if workers_per_node > 1:
        return int(str(name).rsplit("-", 1)[1])
    return 0


class GpuPinning(WorkerPlugin):
    """Pins each worker to one CUDA device, before its first task starts the driver: ``CUDA_VISIBLE_DEVICES`` becomes
    the worker's own device (the :func:`worker_position`-th of ``devices``, or of the devices its node's environment
    names when ``devices`` is None: a SLURM job's ``--gres``), so device 0 in the worker is its own GPU."""

    name = "armillary-gpu-pinning"

    def __init__(self, devices: list[str] | None, workers_per_node: int):
        self.devices, self.workers_per_node = devices, workers_per_node

    def setup(self, worker):
        from armillary.kernels.gpu import named_devices  # in the worker, which imports the kernels anyway

        devices = named_devices() if self.devices is None else self.devices
        if devices:
            position = worker_position(worker.name, self.workers_per_node)
            os.environ["CUDA_VISIBLE_DEVICES"] = devices[position % len(devices)]
