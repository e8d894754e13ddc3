"""The ``slurm`` cluster kind of a spec's ``[cluster]``: its keys (checked against the site settings
and ``sinfo`` before anything runs) and its Dask client, worker jobs through dask-jobqueue.
Importing ``jobs`` registers both with :mod:`ensemble`; as ``import armillary`` does that, this module imports
Dask only when a SLURM run starts."""

from __future__ import annotations

import os
import sys
import tempfile
from contextlib import contextmanager

from armillary.ensemble.cluster_kinds import dashboard_address, register_cluster_kind
from armillary.ensemble.errors import RunFailed
from armillary.ensemble.spec_keys import SpecKey
from armillary.kernels import InvalidInput

from .slurm import NUMBA_CACHE_LINES, seconds, site_for_cluster

#: spec keys of a `kind = "slurm"` cluster, declared (:mod:`armillary.ensemble.spec_keys`)
_SITE = "the site file's, else armillary's"
SLURM_KEY_DOCS = {
    "site": SpecKey("string", "none (armillary's site defaults)", "", "slurm: a site settings TOML (partition, "
                    "account, time, cores, memory, setup lines, directives; slurm/site.example.toml documents them); "
                    "the keys below override it"),
    "partition": SpecKey("string", _SITE + " (SLURM's default partition)", "", "slurm: the partition the worker "
                         "jobs go to"),
    "account": SpecKey("string", _SITE + " (none)", "", "slurm: the account charged"),
    "walltime": SpecKey("string", _SITE + " (01:00:00)", "HH:MM:SS", "slurm: each worker job's time limit; workers "
                        "retire before it (walltime minus max(2 min, 10 %), staggered) and adaptive scaling replaces "
                        "them"),
    "cores": SpecKey("integer", _SITE + " (1)", "cores", "slurm: cores per worker job (one single-threaded worker "
                     "each)"),
    "gpus": SpecKey("integer", "1", "devices", "slurm, device cuda: GPUs per worker job (--gres=gpu:N), one worker "
                    "process pinned to each (in place of one per core)"),
    "memory": SpecKey("string", _SITE + " (2GB)", "", "slurm: memory per worker job, e.g. \"4GB\""),
    "minimum_jobs": SpecKey("integer", _SITE + " (1)", "jobs", "slurm: the adaptive scaling's lower bound"),
    "maximum_jobs": SpecKey("integer", _SITE + " (4)", "jobs", "slurm: the adaptive scaling's upper bound"),
    "worker_timeout": SpecKey("number > 0", "300", "s", "slurm: how long to wait for the first worker to join"),
    "interface": SpecKey("string", "none (the scheduler listens on every interface)", "", "slurm: the network "
                         "interface the scheduler and the workers listen on, e.g. \"ib0\" (\"lo\" for a one-node "
                         "cluster); every connection is TLS with credentials made for the run"),
    "dashboard": SpecKey("string", "127.0.0.1", "", "slurm: the address the Dask dashboard listens on (as for "
                         "kind = \"local\"); workers' diagnostics pages listen on their node's 127.0.0.1"),
}
#: the same keys with the TOML type the reader checks
SLURM_CLUSTER_KEYS = {key: {"string": "str", "integer": "int", "number": "float"}[declared.kind.split()[0]]
                      for key, declared in SLURM_KEY_DOCS.items()}


def parse_slurm_cluster(section) -> dict:
    """The spec's dask-jobqueue keys, checked now (with the site file they name) so that a bad
    partition or time limit is refused before anything runs."""
    cluster = {"kind": "slurm", "dashboard": dashboard_address(section)}
    for key, kind in SLURM_CLUSTER_KEYS.items():
        if key == "dashboard":
            continue
        value = section.get(key, kind)
        if value is not None:
            cluster[key] = value
    if cluster.get("gpus", 1) < 1:
        raise InvalidInput("cluster.gpus", f"must be an integer >= 1, got {cluster['gpus']!r}")
    if cluster.get("worker_timeout", 1.0) <= 0:
        raise InvalidInput("cluster.worker_timeout", f"must be > 0 s, got {cluster['worker_timeout']!r}")
    try:
        site_for_cluster(cluster)
    except InvalidInput as error:
        key = {"time": "walltime"}.get(error.field, error.field)  # the site file says time, the spec walltime
        raise InvalidInput(f"cluster.{key}", error.message) from None
    return cluster


def slurm_cluster(cluster: dict, credentials: str, gpus: bool = False):
    """A dask-jobqueue SLURMCluster for a spec's ``[cluster]`` (kind = "slurm"): one single-threaded worker process
    per core of a job, adapting between minimum_jobs and maximum_jobs; for a run on ``gpus``, jobs of
    ``--gres=gpu:N`` (N: the key ``gpus``, default 1) and one worker process per GPU (:func:`slurm_client` pins
    each to its own).  Every connection is TLS with credentials made for the run, which the workers read from
    ``credentials`` (a directory of mode 0700 that the nodes see, files of mode 0600; the job scripts name the
    files, never hold the key); the dashboard listens on ``cluster["dashboard"]``, each worker's diagnostics pages
    on its node's loopback.  Workers retire (with a stagger) before their walltime so the scheduler moves their work elsewhere instead of losing it
    (dask-jobqueue #691), and compile into a node-local, private NUMBA_CACHE_DIR (numba #7952;
    :data:`.slurm.NUMBA_CACHE_LINES`) unless the submitting environment sets one."""
    from dask_jobqueue import SLURMCluster

    from armillary.ensemble.clusters import LOOPBACK, run_security_files

    site = site_for_cluster(cluster)
    walltime = seconds(site.time)
    lifetime = max(60, walltime - max(120, walltime // 10))
    stagger = max(1, min(300, lifetime // 10))
    prologue = list(site.setup) + NUMBA_CACHE_LINES + ["export NUMBA_NUM_THREADS=1 OMP_NUM_THREADS=1"]
    per_job = cluster.get("gpus", 1) if gpus else site.cores
    devices = [f"--gres=gpu:{per_job}"] if gpus else []
    jobs = SLURMCluster(
        cores=site.cores, processes=per_job, memory=site.memory, walltime=site.time, queue=site.partition,
        account=site.account, job_extra_directives=list(site.directives) + devices, job_script_prologue=prologue,
        python=sys.executable, interface=cluster.get("interface"), security=run_security_files(credentials),
        scheduler_options={"dashboard_address": f"{cluster.get('dashboard', LOOPBACK)}:0"},
        worker_extra_args=["--lifetime", f"{lifetime}s", "--lifetime-stagger", f"{stagger}s",
                           "--dashboard-address", f"{LOOPBACK}:0"],
        silence_logs="error")
    jobs.adapt(minimum_jobs=site.minimum_jobs, maximum_jobs=site.maximum_jobs)
    return jobs


@contextmanager
def slurm_client(cluster: dict, shared_directory: str | None, gpus: bool = False):
    """A client of SLURM worker jobs; RunFailed when none joins within ``worker_timeout`` s.  The workers'
    credentials go into a fresh private directory in ``shared_directory`` (the store's), removed after.  On
    ``gpus``, each worker of a job is pinned to one of the job's GPUs (:class:`armillary.ensemble.devices.GpuPinning`)
    before its first task."""
    from distributed import Client

    from armillary.ensemble.devices import GpuPinning

    shared = shared_directory or os.path.expanduser("~")
    with tempfile.TemporaryDirectory(dir=shared, prefix=".armillary-dask-") as credentials, \
            slurm_cluster(cluster, credentials, gpus) as jobs, Client(jobs) as client:
        if gpus:
            client.register_plugin(GpuPinning(None, cluster.get("gpus", 1)))
        timeout = cluster.get("worker_timeout", 300.0)
        try:
            client.wait_for_workers(1, timeout=timeout)
        except TimeoutError:
            raise RunFailed(f"no SLURM worker joined within {timeout:g} s (is the partition up? see squeue; "
                            "cluster.worker_timeout sets the wait)") from None
        yield client


register_cluster_kind("slurm", parse_slurm_cluster, SLURM_KEY_DOCS, slurm_client)
