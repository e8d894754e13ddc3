"""Against the real local SLURM (slurm/local-cluster.sh start): a spec with ``[execution] ranks`` > 1 submitted as one
MPI job whose ranks ``srun`` starts, writing the store ``mpiexec -n R armillary run`` writes.  Skipped with a reason
where no SLURM answers (under CI=true a skip is a failure); the dry run needs no SLURM."""

import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import zarr

from armillary.jobs.cli import main

from mpi_cases import assert_same_bits, spec_text
from slurm_cases import require_slurm
from test_slurm import wait_for_jobs

pytestmark = pytest.mark.xdist_group("slurm")


def write_ranks_spec(path: Path, store: Path, ranks: int = 2, threads_per_rank: int = 1, members: int = 1) -> str:
    """tests/mpi_cases.py's LJ spec under vi (2000 particles, 50 steps in 2 segments) on ``ranks`` ranks."""
    path.write_text(spec_text("lj-vi", str(store), ranks, threads_per_rank, members))
    return str(path)


def test_ranks_spec_runs_through_srun_is_requeued_at_its_walltime_and_equals_mpiexec(tmp_path, capsys, monkeypatch):
    """Submitted with ranks = 2: one job of 2 tasks (no array) whose srun starts both ranks of one MPI world, its
    report job after it (afterok).  Its walltime warning (USR1 to the batch script) while rank 0 pauses before the
    first segment's kernel: both ranks finish and record that segment and stop, the job requeues itself and resumes
    the second; its store holds the bits of `mpiexec -n 2 armillary run` of the same spec."""
    require_slurm()
    store = tmp_path / "slurm.zarr"
    pause = tmp_path / "pause.json"  # (sbatch passes the environment on; a pause is taken once, by the first run)
    monkeypatch.setenv("ARMILLARY_PAUSE_BEFORE_KERNEL", f"{pause}:3")
    monkeypatch.setenv("ARMILLARY_PAUSE_SEGMENT", "0")
    assert main(["submit", write_ranks_spec(tmp_path / "slurm.toml", store)]) == 0
    out = capsys.readouterr().out
    job_id = out.split("MPI job ")[1].split()[0]
    report_id = out.split("report job ")[1].split()[0]
    jobs = tmp_path / "slurm.zarr.slurm"
    assert json.loads((jobs / "jobs.json").read_text()) == {"kind": "ranks", "job": job_id, "report": report_id,
                                                             "ranks": 2, "threads_per_rank": 1}
    script = (jobs / "ranks.sbatch").read_text()
    assert "#SBATCH --ntasks=2\n" in script and "#SBATCH --cpus-per-task=1\n" in script and "--array" not in script
    assert "srun --mpi=pmi2 --ntasks=2 --cpus-per-task=1 " in script
    dependency = subprocess.run(["squeue", "-h", "-j", report_id, "-o", "%E"], capture_output=True, text=True).stdout
    assert f"afterok:{job_id}" in dependency, dependency
    # the report job's script is the array's, which tests/test_slurm.py runs: cancelled here to keep the test short
    subprocess.run(["scancel", report_id], check=True)
    deadline = time.monotonic() + 240
    while not (pause.exists() and pause.read_text().endswith("}")):
        assert time.monotonic() < deadline, "the job never paused"
        time.sleep(0.2)
    subprocess.run(["scancel", "--signal=USR1", "--batch", job_id], check=True)
    wait_for_jobs([job_id, report_id])
    log = (jobs / f"ranks-{job_id}.out").read_text()
    assert "one member of 2000 particles on 2 MPI ranks × 1 threads; 0 segments already done, 2 to run" in log, log
    assert "armillary: SIGUSR1: stopped after 1 of 2 segments" in log, log
    assert "on 2 MPI ranks × 1 threads; 1 segments already done, 1 to run" in log, log  # after the requeue
    assert main(["status", str(store)]) == 0
    assert f"{job_id} finished" in capsys.readouterr().out

    bin_dir = Path(sys.executable).parent
    reference = tmp_path / "mpiexec.zarr"
    launched = subprocess.run([str(bin_dir / "mpiexec"), "-n", "2", str(bin_dir / "armillary"), "run",
                               write_ranks_spec(tmp_path / "mpiexec.toml", reference)],
                              capture_output=True, text=True, timeout=300)
    assert launched.returncode == 0, launched.stderr
    assert_same_bits(str(store), str(reference))
    assert np.isfinite(zarr.open_group(str(store), mode="r")["energy"][...]).all()


def test_dry_run_asks_for_ranks_with_threads_per_rank_cpus(tmp_path, capsys):
    """The MPI job asks for the spec's ranks as tasks and its threads_per_rank as each task's CPUs (over the site's
    cpus_per_task), and its kernels run on as many threads; nothing is written."""
    spec = write_ranks_spec(tmp_path / "spec.toml", tmp_path / "spec.zarr", ranks=3, threads_per_rank=2)
    assert main(["submit", spec, "--dry-run"]) == 0
    jobs = tmp_path / "spec.zarr.slurm"
    script, report = capsys.readouterr().out.split(f"# {jobs / 'report.sbatch'} (--dependency=afterok:<ranks job>)\n")
    assert script.startswith(f"# {jobs / 'ranks.sbatch'}\n#!/bin/bash\n") and "armillary report" in report
    for line in ("#SBATCH --ntasks=3\n", "#SBATCH --cpus-per-task=2\n", "#SBATCH --requeue\n",
                 "export NUMBA_NUM_THREADS=2\n", f"srun --mpi=pmi2 --ntasks=3 --cpus-per-task=2 "):
        assert line in script, line
    assert not (tmp_path / "spec.zarr").exists() and not (tmp_path / "spec.zarr.slurm").exists()


def test_the_sites_mpi_plugin_starts_the_ranks_and_none_is_refused(tmp_path, capsys):
    """A site's ``mpi`` is srun's --mpi; "none" (each task a world of its own) is refused in one line naming it."""
    spec = write_ranks_spec(tmp_path / "spec.toml", tmp_path / "spec.zarr")
    site = tmp_path / "site.toml"
    site.write_text('mpi = "pmix"\n')
    assert main(["submit", spec, "--dry-run", "--site", str(site)]) == 0
    assert "srun --mpi=pmix --ntasks=2 " in capsys.readouterr().out
    site.write_text('mpi = "none"\n')
    assert main(["submit", spec, "--dry-run", "--site", str(site)]) == 2
    assert "mpi: 'none' is not an srun MPI plugin that starts the ranks as one job" in capsys.readouterr().err


@pytest.mark.parametrize("members, args, message", [
    (1, ["--array-size", "2"], "array-size: execution.ranks = 2 runs as one MPI job of 2 tasks, not a job array"),
    (2, [], "execution.ranks: 2 MPI ranks run one member in the system mode"),
])
def test_ranks_spec_that_is_no_mpi_job_is_refused_before_submitting(tmp_path, capsys, members, args, message):
    spec = write_ranks_spec(tmp_path / "spec.toml", tmp_path / "spec.zarr", members=members)
    assert main(["submit", spec, "--dry-run", *args]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "spec.zarr").exists() and not (tmp_path / "spec.zarr.slurm").exists()
