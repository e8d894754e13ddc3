"""SLURM submission: site settings, the sbatch scripts of ``slurm/``, one job array (or, for a spec with
``[execution] ranks`` > 1, one MPI job of that many tasks) plus a dependent report job, and the queue state of
submitted stores.

A submitted run keeps its job files next to the store, in ``STORE.slurm/``: the effective spec the
jobs run (``spec.toml``), the rendered scripts, ``jobs.json`` and the job logs.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from string import Template
from typing import TYPE_CHECKING

from armillary.kernels import InvalidInput

if TYPE_CHECKING:  # annotations only: ``import armillary`` imports this module, the spec's reader loads Numba
    from armillary.ensemble.spec import Spec

TEMPLATES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "slurm")
#: SLURM's --time formats: minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS
TIME_FORMAT = re.compile(r"^(\d+|\d+:\d{1,2}|\d+:\d{1,2}:\d{1,2}|\d+-\d{1,2}|\d+-\d{1,2}:\d{1,2}|\d+-\d{1,2}:\d{1,2}:\d{1,2})$")
MEMORY_FORMAT = re.compile(r"^\d+[KMGT]?B?$", re.IGNORECASE)
#: the name of one of srun's MPI plugins (``srun --mpi=list``)
MPI_PLUGIN = re.compile(r"^[a-z][a-z0-9_]*$")


@dataclass(frozen=True)
class Site:
    """Where and how jobs run (``slurm/site.example.toml`` documents every key)."""

    partition: str | None = None
    account: str | None = None
    time: str = "01:00:00"
    cpus_per_task: int = 1
    mem: str = "2G"
    signal_seconds: int = 120
    mpi: str = "pmi2"
    setup: tuple[str, ...] = ()
    directives: tuple[str, ...] = ()
    cores: int = 1
    memory: str = "2GB"
    minimum_jobs: int = 1
    maximum_jobs: int = 4


def _check_site(site: Site, dry_run: bool = False) -> Site:
    if not TIME_FORMAT.match(site.time):
        raise InvalidInput("time", f"{site.time!r} is not a SLURM time limit; allowed: minutes, MM:SS, HH:MM:SS, "
                           "D-HH, D-HH:MM, D-HH:MM:SS")
    for name in ("mem", "memory"):
        if not MEMORY_FORMAT.match(getattr(site, name)):
            raise InvalidInput(name, f"{getattr(site, name)!r} is not a memory size like 2G or 500M")
    for name in ("cpus_per_task", "signal_seconds", "cores", "minimum_jobs", "maximum_jobs"):
        value = getattr(site, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < (0 if name == "minimum_jobs" else 1):
            raise InvalidInput(name, f"must be a positive integer, got {value!r}")
    if not MPI_PLUGIN.match(site.mpi) or site.mpi == "none":
        raise InvalidInput("mpi", f"{site.mpi!r} is not an srun MPI plugin that starts the ranks as one job; allowed: "
                           "pmi2, pmix, pmix_v4, … (`srun --mpi=list` shows your SLURM's; not none)")
    if site.minimum_jobs > site.maximum_jobs:
        raise InvalidInput("minimum_jobs", f"must be <= maximum_jobs = {site.maximum_jobs}")
    if site.partition is not None:
        try:
            available = partitions()
        except InvalidInput as error:
            if not dry_run:
                raise
            # a dry run only prints the scripts: it works where no controller answers (a laptop, a login node
            # in maintenance), saying what it could not check
            print(f"armillary: warning: partition {site.partition!r} not checked: {error.message}", file=sys.stderr)
            return site
        if site.partition not in available:
            raise InvalidInput("partition", f"unknown partition {site.partition!r}; allowed: {', '.join(available)}")
    return site


def load_site(path: str | None, dry_run: bool = False, **options) -> Site:
    """Site settings from ``path`` (TOML; unknown keys are errors) with command-line ``options``
    (partition, time) on top, validated (the partition against ``sinfo``; for a ``dry_run``, only where a
    controller answers, with a warning where none does)."""
    values: dict = {}
    if path is not None:
        try:
            with open(path, "rb") as handle:
                values = tomllib.load(handle)
        except OSError as error:
            raise InvalidInput("site", f"cannot read {path!r}: {error.strerror}") from None
        except tomllib.TOMLDecodeError as error:
            raise InvalidInput("site", f"{path!r} is not valid TOML: {error}") from None
    allowed = list(Site.__dataclass_fields__)
    for key in values:
        if key not in allowed:
            raise InvalidInput(f"site.{key}", f"unknown key; allowed: {', '.join(allowed)}")
    for key in ("setup", "directives"):
        if key in values:
            if not (isinstance(values[key], list) and all(isinstance(v, str) for v in values[key])):
                raise InvalidInput(f"site.{key}", "must be a list of strings")
            values[key] = tuple(values[key])
    values.update({k: v for k, v in options.items() if v is not None})
    return _check_site(Site(**values), dry_run)


def site_for_cluster(cluster: dict) -> Site:
    """The site settings of a spec's ``[cluster]`` with ``kind = "slurm"`` (its keys over its site file)."""
    return load_site(cluster.get("site"), partition=cluster.get("partition"), account=cluster.get("account"),
                     time=cluster.get("walltime"), cores=cluster.get("cores"), memory=cluster.get("memory"),
                     minimum_jobs=cluster.get("minimum_jobs"), maximum_jobs=cluster.get("maximum_jobs"))


def seconds(time_limit: str) -> int:
    """A SLURM time limit (one of TIME_FORMAT's forms) in seconds."""
    days, _, clock = time_limit.rpartition("-")
    parts = [int(p) for p in clock.split(":")]
    if days:  # D-HH[:MM[:SS]]
        parts += [0] * (3 - len(parts))
        h, m, s = parts
        return ((int(days) * 24 + h) * 60 + m) * 60 + s
    if len(parts) == 1:  # minutes
        return parts[0] * 60
    if len(parts) == 2:  # MM:SS
        return parts[0] * 60 + parts[1]
    h, m, s = parts
    return (h * 60 + m) * 60 + s


#: how long ``sinfo`` may take to list the partitions (a controller that answers does so in well under a second)
SINFO_SECONDS = 20


def partitions() -> list[str]:
    """Partition names SLURM reports (the default one without its ``*``)."""
    if shutil.which("sinfo") is None:
        raise InvalidInput("slurm", "sinfo not found: no SLURM here (slurm/local-cluster.sh start runs one locally)")
    try:  # sinfo retries for up to a minute where it finds no configuration
        result = subprocess.run(["sinfo", "-h", "-o", "%P"], capture_output=True, text=True, timeout=SINFO_SECONDS)
    except subprocess.TimeoutExpired:
        raise InvalidInput("slurm", f"sinfo did not answer within {SINFO_SECONDS} s: no SLURM controller reachable") from None
    if result.returncode != 0:
        said = (result.stderr.strip() or result.stdout.strip()).splitlines()
        raise InvalidInput("slurm", f"sinfo failed: {said[-1] if said else f'exit status {result.returncode}'}")
    return sorted({line.strip().rstrip("*") for line in result.stdout.split() if line.strip()})


def armillary_command() -> str:
    """The command that runs this very installation of armillary on a compute node."""
    script = os.path.join(os.path.dirname(sys.executable), "armillary")
    return script if os.path.exists(script) else f"{sys.executable} -m armillary.jobs.cli"


def job_directory(store: str) -> str:
    return store.rstrip("/") + ".slurm"


#: the job-script lines that choose Numba's kernel cache on a compute node, unless the submitting environment
#: names one: node-local (Numba's cache races on shared file systems, numba #7952), one directory per
#: optimisation level and vectoriser setting (Numba's cache does not tell those apart), and private: the
#: default path is guessable, so a directory there that is not the user's own (another user made it first, it
#: is a link, or others may write it) is passed over for a fresh one of mode 0700 (``mktemp -d``).  Armillary
#: checks the directory again before loading anything from it (:mod:`armillary.kernels.caches`).
NUMBA_CACHE_LINES = [
    'if [ -z "${NUMBA_CACHE_DIR:-}" ]; then',
    '    NUMBA_CACHE_DIR="${SLURM_TMPDIR:-${TMPDIR:-/tmp}}/armillary-numba-$(id -un)${NUMBA_OPT:+-O$NUMBA_OPT}'
    '${NUMBA_LOOP_VECTORIZE:+-V$NUMBA_LOOP_VECTORIZE}"',
    '    mkdir -p -m 700 "$NUMBA_CACHE_DIR" 2>/dev/null',
    '    if [ -L "$NUMBA_CACHE_DIR" ] || [ ! -d "$NUMBA_CACHE_DIR" ] || [ ! -O "$NUMBA_CACHE_DIR" ] '
    '|| [ -n "$(find "$NUMBA_CACHE_DIR" -maxdepth 0 -perm /022)" ]; then',
    '        echo "armillary: $NUMBA_CACHE_DIR is not a private directory of yours; compiling into a fresh one" >&2',
    '        NUMBA_CACHE_DIR=$(mktemp -d)',
    '    fi',
    'fi',
    'export NUMBA_CACHE_DIR',
]


def on_ranks(spec: Spec) -> bool:
    """Whether ``spec`` runs as one MPI job of ``spec.ranks`` tasks (slurm/ranks.sbatch), not as a job array."""
    return (spec.ranks or 1) > 1


def render(spec_file: str, spec: Spec, site: Site, array_size: int) -> tuple[str, str]:
    """The main and report sbatch scripts for ``spec`` (the templates of ``slurm/``, filled in): the main one
    is the job array of ``array_size`` tasks, or for a spec :func:`on_ranks` the MPI job (its tasks are the
    spec's ranks, each with ``threads_per_rank`` CPUs, else the site's ``cpus_per_task``)."""
    jobs = job_directory(spec.store)
    directives = [f"#SBATCH --partition={site.partition}"] if site.partition else []
    directives += [f"#SBATCH --account={site.account}"] if site.account else []
    directives += [line if line.startswith("#SBATCH") else f"#SBATCH {line}" for line in site.directives]
    if spec.device == "cuda" and not any("--gres" in line for line in directives):
        directives.append("#SBATCH --gres=gpu:1")  # an array task steps its chunks itself, on one GPU
    values = {
        "job_name": "armillary-" + os.path.basename(spec.store.rstrip("/")).removesuffix(".zarr"),
        "last_index": array_size - 1, "array_size": array_size, "signal_seconds": site.signal_seconds,
        "time": site.time, "cpus_per_task": site.cpus_per_task, "mem": site.mem, "log_dir": jobs,
        "site_directives": "\n".join(directives), "setup": "\n".join(site.setup),
        "armillary": armillary_command(), "spec": spec_file, "store": spec.store,
        "report_dir": os.path.join(jobs, "report"), "numba_cache": "\n".join(NUMBA_CACHE_LINES),
    }
    if on_ranks(spec):
        values.update(ranks=spec.ranks, cpus_per_task=spec.threads_per_rank or site.cpus_per_task, mpi=site.mpi)
    scripts = []
    for name in ("ranks.sbatch" if on_ranks(spec) else "array.sbatch", "report.sbatch"):
        with open(os.path.join(TEMPLATES, name)) as handle:
            scripts.append(Template(handle.read()).substitute(values))
    return scripts[0], scripts[1]


def sbatch(script_path: str, *options: str) -> str:
    """Submit a script; returns the job id."""
    result = subprocess.run(["sbatch", "--parsable", *options, script_path], capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"sbatch {script_path} failed: {result.stderr.strip()}")
    return result.stdout.strip().split(";")[0]


def submit(spec: Spec, site: Site, array_size: int | None, dry_run: bool, stream=None) -> dict | None:
    """Write the store template and submit the job array (for a spec :func:`on_ranks`, the MPI job) and its
    report job (or, with ``dry_run``, print the scripts and submit nothing).  Returns the job record that
    ``jobs.json`` keeps: its ``kind`` ("array" or "ranks"), the job ids and the array's size or the ranks."""
    from armillary.ensemble import prepare
    from armillary.ensemble.lock import run_lock
    from armillary.ensemble.mpi import check_on_ranks, require_mpi
    from armillary.ensemble.store import remove_store, write_template

    stream = stream or sys.stdout
    plan, create = prepare(spec)
    chunks = len(plan.chunks)
    if on_ranks(spec):
        if array_size is not None:
            raise InvalidInput("array-size", f"execution.ranks = {spec.ranks} runs as one MPI job of {spec.ranks} "
                               "tasks, not a job array: leave --array-size out")
        require_mpi("execution.ranks")  # the job runs this installation, which needs mpi4py for ranks
        check_on_ranks(plan, spec.ranks)
        size = 1
    else:
        size = chunks if array_size is None else array_size
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise InvalidInput("array-size", f"must be an integer >= 1, got {array_size!r}")
        size = min(size, chunks)  # more tasks than chunks would leave tasks with nothing to do
    kind = "ranks" if on_ranks(spec) else "array"
    jobs = job_directory(spec.store)
    spec_file = os.path.join(jobs, "spec.toml")
    main_script, report_script = render(spec_file, spec, site, size)
    if dry_run:
        stream.write(f"# {os.path.join(jobs, f'{kind}.sbatch')}\n{main_script}\n"
                     f"# {os.path.join(jobs, 'report.sbatch')} (--dependency=afterok:<{kind} job>)\n{report_script}\n")
        return None
    with run_lock(spec.store):
        if create:
            remove_store(spec.store)
            write_template(plan)
    os.makedirs(jobs, exist_ok=True)
    files = {"spec.toml": spec.to_toml(), f"{kind}.sbatch": main_script, "report.sbatch": report_script}
    for name, text in files.items():
        with open(os.path.join(jobs, name), "w") as handle:
            handle.write(text)
    main_id = sbatch(os.path.join(jobs, f"{kind}.sbatch"))
    report_id = sbatch(os.path.join(jobs, "report.sbatch"), f"--dependency=afterok:{main_id}")
    if kind == "ranks":
        threads = spec.threads_per_rank or site.cpus_per_task
        ids = {"kind": kind, "job": main_id, "report": report_id, "ranks": spec.ranks, "threads_per_rank": threads}
        what = f"MPI job {main_id} ({spec.ranks} ranks × {threads} threads, srun)"
    else:
        ids = {"kind": kind, "array": main_id, "report": report_id, "array_size": size}
        what = f"job array {main_id} ({size} tasks over {chunks} chunks)"
    with open(os.path.join(jobs, "jobs.json"), "w") as handle:
        json.dump(ids, handle)
    stream.write(f"armillary: submitted {what} and report job {report_id}\n"
                 f"armillary: follow with `armillary status {spec.store}` (logs in {jobs})\n")
    return ids


def queue_states(store: str) -> dict[str, str] | None:
    """SLURM job id → state of the jobs submitted for ``store`` (None if it was not submitted): the array's
    tasks or the MPI job, and the report job; jobs no longer in the queue are reported as finished."""
    try:
        with open(os.path.join(job_directory(store), "jobs.json")) as handle:
            ids = json.load(handle)
    except (OSError, ValueError):
        return None
    labels = ("job" if ids.get("kind") == "ranks" else "array", "report")  # records before "kind" are arrays'
    states = {}
    if shutil.which("squeue"):
        result = subprocess.run(["squeue", "-h", "-r", "-j", ",".join(ids[label] for label in labels), "-o", "%i %T"],
                                capture_output=True, text=True)
        for line in result.stdout.splitlines():
            job, state = line.split()
            states[job] = state
    for label in labels:
        if not any(job.split("_")[0] == ids[label] for job in states):
            states[ids[label]] = "finished (not in the queue)"
    return states

