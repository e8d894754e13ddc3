"""The ``slurm`` cluster kind of a spec's ``[cluster]``: its keys (checked against the site settings
and ``sinfo`` before anything runs) and its Dask client, worker jobs through dask-jobqueue.
Importing ``jobs`` registers both with :mod:`ensemble`."""

from __future__ import annotations

import sys
from contextlib import contextmanager

from distributed import Client

from armillary.ensemble.clusters import RunFailed, register_cluster_factory
from armillary.ensemble.spec import register_cluster_kind
from armillary.kernels import InvalidInput

from .slurm import seconds, site_for_cluster

#: spec keys of a `kind = "slurm"` cluster and their TOML types
SLURM_CLUSTER_KEYS = {"site": "str", "partition": "str", "account": "str", "walltime": "str", "cores": "int",
                      "memory": "str", "minimum_jobs": "int", "maximum_jobs": "int", "worker_timeout": "float"}


def parse_slurm_cluster(section) -> dict:
    """The spec's dask-jobqueue keys, checked now (with the site file they name) so that a bad
    partition or time limit is refused before anything runs."""
    cluster = {"kind": "slurm"}
    for key, kind in SLURM_CLUSTER_KEYS.items():
        value = section.get(key, kind)
        if value is not None:
            cluster[key] = value
    if cluster.get("worker_timeout", 1.0) <= 0:
        raise InvalidInput("cluster.worker_timeout", f"must be > 0 s, got {cluster['worker_timeout']!r}")
    try:
        site_for_cluster(cluster)
    except InvalidInput as error:
        key = {"time": "walltime"}.get(error.field, error.field)  # the site file says time, the spec walltime
        raise InvalidInput(f"cluster.{key}", error.message) from None
    return cluster


def slurm_cluster(cluster: dict):
    """A dask-jobqueue SLURMCluster for a spec's ``[cluster]`` (kind = "slurm"): one single-threaded
    worker process per job, adapting between minimum_jobs and maximum_jobs.  Workers retire (with a
    stagger) before their walltime so the scheduler moves their work elsewhere instead of losing it
    (dask-jobqueue #691), and compile into node-local NUMBA_CACHE_DIR (numba #7952)."""
    from dask_jobqueue import SLURMCluster  # only SLURM runs need it

    site = site_for_cluster(cluster)
    walltime = seconds(site.time)
    lifetime = max(60, walltime - max(120, walltime // 10))
    stagger = max(1, min(300, lifetime // 10))
    prologue = list(site.setup) + ['export NUMBA_CACHE_DIR="${TMPDIR:-/tmp}/armillary-numba-$(id -un)${NUMBA_OPT:+-O$NUMBA_OPT}"',
                                   "export NUMBA_NUM_THREADS=1 OMP_NUM_THREADS=1"]
    jobs = SLURMCluster(
        cores=site.cores, processes=site.cores, memory=site.memory, walltime=site.time, queue=site.partition,
        account=site.account, job_extra_directives=list(site.directives), job_script_prologue=prologue,
        python=sys.executable, worker_extra_args=["--lifetime", f"{lifetime}s", "--lifetime-stagger", f"{stagger}s"],
        silence_logs="error")
    jobs.adapt(minimum_jobs=site.minimum_jobs, maximum_jobs=site.maximum_jobs)
    return jobs



@contextmanager
def slurm_client(cluster: dict):
    """A client of SLURM worker jobs; RunFailed when none joins within ``worker_timeout`` s."""
    with slurm_cluster(cluster) as jobs, Client(jobs) as client:
        timeout = cluster.get("worker_timeout", 300.0)
        try:
            client.wait_for_workers(1, timeout=timeout)
        except TimeoutError:
            raise RunFailed(f"no SLURM worker joined within {timeout:g} s (is the partition up? see squeue; "
                            "cluster.worker_timeout sets the wait)") from None
        yield client


register_cluster_kind("slurm", parse_slurm_cluster)
register_cluster_factory("slurm", slurm_client)
