"""Against the real local SLURM (slurm/local-cluster.sh start): submission of a job array with its
report job, requeue on a walltime signal, dry runs, and bad site options.  Skipped with a reason
where no SLURM answers; under CI=true a skip is a failure."""

import io
import os
import subprocess
import time
from pathlib import Path

import pytest
import zarr

from armillary import ensemble
from armillary.ensemble.segment import PAUSE_BEFORE_RECORD
from armillary.jobs.cli import main

from ensemble_cases import (armillary, arrays, assert_bitwise_equal, assert_strangers_refused, listening, wait_for_marker,
                            write_spec)
from slurm_cases import require_slurm

pytestmark = pytest.mark.xdist_group("slurm")


@pytest.fixture(autouse=True)
def slurm_answers():
    require_slurm()


def wait_for_jobs(job_ids, timeout=600.0):
    """Block until none of the jobs (or their array tasks) is in the queue."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        queue = subprocess.run(["squeue", "-h", "-r", "-j", ",".join(job_ids), "-o", "%i"],
                               capture_output=True, text=True).stdout.split()
        if not queue:
            return
        time.sleep(1)
    raise TimeoutError(f"jobs {job_ids} still queued after {timeout} s")


def submitted(tmp_path, capsys, *args, **spec_options):
    spec = write_spec(tmp_path, **spec_options)
    assert main(["submit", spec, *args]) == 0
    out = capsys.readouterr().out
    array_id = out.split("job array ")[1].split()[0]
    report_id = out.split("report job ")[1].split()[0]
    return spec, array_id, report_id


def local_reference(spec, tmp_path):
    ensemble.run(spec, store=str(tmp_path / "local.zarr"), stream=io.StringIO())
    return arrays(str(tmp_path / "local.zarr"))


def test_job_array_of_4_tasks_equals_a_local_run_and_reports(tmp_path, capsys):
    spec, array_id, report_id = submitted(tmp_path, capsys, "--array-size", "4", members=16, chunk=2)
    wait_for_jobs([array_id, report_id])
    store = str(tmp_path / "spec.zarr")
    logs = tmp_path / "spec.zarr.slurm"
    for task in range(4):
        assert "segments to run" in (logs / f"task-{array_id}_{task}.out").read_text()
    assert_bitwise_equal(arrays(store), local_reference(spec, tmp_path))
    assert (logs / "report" / "report.md").stat().st_size > 0, (logs / f"report-{report_id}.out").read_text()
    assert main(["status", store]) == 0
    assert f"{array_id} finished" in capsys.readouterr().out


def test_signalled_task_requeues_resumes_and_matches(tmp_path, capsys):
    spec, array_id, report_id = submitted(tmp_path, capsys, "--array-size", "2", members=2000, chunk=1000,
                                          t_end=20.0, checkpoint_every=4000, variables=("energy",))
    store = str(tmp_path / "spec.zarr")
    log = tmp_path / "spec.zarr.slurm" / f"task-{array_id}_0.out"
    deadline = time.monotonic() + 300
    while "member-steps" not in (log.read_text() if log.exists() else ""):  # first segment of task 0 done
        assert time.monotonic() < deadline, "task 0 never finished a segment"
        time.sleep(0.2)
    subprocess.run(["scancel", "--signal=USR1", "--batch", f"{array_id}_0"], check=True)
    wait_for_jobs([array_id, report_id])
    text = log.read_text()
    assert "USR1: stopping after the current segment" in text
    assert text.count("array task 0 of 2") == 2, text  # ran again after the requeue
    assert_bitwise_equal(arrays(store, ("energy", "q0", "status")),
                         {k: v for k, v in local_reference(spec, tmp_path).items() if k in ("energy", "q0", "status")})


@pytest.mark.parametrize("signal_name", ["USR1", "TERM"])
def test_task_signalled_between_its_data_and_its_record_requeues_and_matches(tmp_path, capsys, monkeypatch,
                                                                            signal_name):
    """The task pauses (ARMILLARY_PAUSE_BEFORE_RECORD, 5 s) after writing a segment's data and before
    its record; the signal lands there: the segment is recorded, the task stops, is requeued, resumes."""
    marker = tmp_path / "paused.json"
    monkeypatch.setenv(PAUSE_BEFORE_RECORD, f"{marker}:5")  # sbatch exports the submitter's environment
    spec, array_id, report_id = submitted(tmp_path, capsys, "--array-size", "2", members=4, chunk=2)
    paused = wait_for_marker(marker)
    task = paused["chunk"] % 2
    subprocess.run(["scancel", f"--signal={signal_name}", "--batch", f"{array_id}_{task}"], check=True)
    wait_for_jobs([array_id, report_id])
    text = (tmp_path / "spec.zarr.slurm" / f"task-{array_id}_{task}.out").read_text()
    assert "USR1: stopping after the current segment" in text, text  # TERM reaches the run as USR1
    assert text.count(f"array task {task} of 2") == 2, text  # ran again after the requeue
    store = str(tmp_path / "spec.zarr")
    assert_bitwise_equal(arrays(store), local_reference(spec, tmp_path))
    attempts = zarr.open_group(store, mode="r")["_progress/attempts"][:]
    assert attempts.max() == 1, attempts  # the signalled segment finished and was recorded, not redone
    assert main(["verify", store]) == 0


def test_dry_run_is_a_valid_sbatch_script_and_submits_nothing(tmp_path, capsys):
    spec = write_spec(tmp_path)
    assert main(["submit", spec, "--dry-run", "--time", "00:10:00"]) == 0
    out = capsys.readouterr().out
    array_script = out.split("# ")[1].split("\n", 1)[1]
    (tmp_path / "array.sbatch").write_text(array_script)
    check = subprocess.run(["sbatch", "--test-only", str(tmp_path / "array.sbatch")], capture_output=True, text=True)
    assert check.returncode == 0 and "to start at" in check.stderr, check.stderr
    assert not (tmp_path / "spec.zarr").exists() and not (tmp_path / "spec.zarr.slurm").exists()


@pytest.mark.parametrize("args, message", [
    (["--partition", "nowhere"], "partition: unknown partition 'nowhere'; allowed: debug"),
    (["--time", "1h"], "time: '1h' is not a SLURM time limit"),
    (["--array-size", "0"], "array-size: must be an integer >= 1"),
])
def test_bad_submit_options_are_refused_before_submitting(tmp_path, capsys, args, message):
    spec = write_spec(tmp_path)
    assert main(["submit", spec, *args]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "spec.zarr").exists() and not (tmp_path / "spec.zarr.slurm").exists()


def test_dask_jobqueue_cluster_on_slurm_equals_the_local_run(tmp_path):
    """Worker jobs of a `kind = "slurm"` cluster: while the run works (one task paused), every port of the
    scheduler and of the workers refuses clients without the run's credentials and, with interface = "lo",
    listens on loopback only; the store equals a local run's."""
    import psutil

    text = open(write_spec(tmp_path, "local.toml", workers=2)).read().replace(
        'kind = "local"\nworkers = 2', 'kind = "slurm"\npartition = "debug"\nwalltime = "00:20:00"\nmemory = "1GB"\n'
        'maximum_jobs = 2\nworker_timeout = 120\ninterface = "lo"')
    spec = write_spec(tmp_path, "slurm.toml", text=text.replace("local.zarr", "slurm.zarr"))
    pause = tmp_path / "paused.json"
    # the worker jobs inherit the environment (sbatch --export=ALL), the pause included; they write their
    # slurm-<job>.out logs into the submit directory
    run = armillary("run", spec, cwd=tmp_path, env={**os.environ, "ARMILLARY_PAUSE_BEFORE_RECORD": f"{pause}:20"})
    wait_for_marker(pause)
    workers = [p for p in psutil.process_iter(["cmdline"]) if "distributed.cli.dask_worker" in " ".join(p.info["cmdline"] or ())
               and str(tmp_path) in os.path.realpath(p.cwd())]
    ports = listening([psutil.Process(run.pid), *workers])
    assert workers and set(ports.values()) == {"127.0.0.1"}, ports
    assert_strangers_refused(ports)
    out, err = run.communicate(timeout=600)
    assert run.returncode == 0, err
    assert_bitwise_equal(arrays(str(tmp_path / "slurm.zarr")), local_reference(spec, tmp_path))


def test_bad_slurm_cluster_spec_is_refused(tmp_path, capsys):
    text = open(write_spec(tmp_path)).read().replace('kind = "local"\nworkers = 1', 'kind = "slurm"\nwalltime = "1h"')
    assert main(["run", write_spec(tmp_path, "bad.toml", text=text)]) == 2
    assert "cluster.walltime: '1h' is not a SLURM time limit" in capsys.readouterr().err


def test_job_array_of_a_model_builds_it_from_the_stored_text(tmp_path, capsys):
    """A model spec submitted as an array of 2 tasks whose model file is deleted before they run: the tasks
    build the model from the text in their spec, and the store equals a local run's."""
    model = tmp_path / "pendula.py"
    model.write_text((Path(__file__).resolve().parent.parent / "examples" / "models" / "coupled_pendula.py").read_text())
    text = open(write_spec(tmp_path, "local.toml", members=4, chunk=2)).read().replace(
        'name = "sphere_nbody"\npreset = "paper"', f'model = "{model}"')
    spec = write_spec(tmp_path, "spec.toml", text=text.replace("local.zarr", "spec.zarr"))
    reference = local_reference(spec, tmp_path)
    # hold the tasks until the file is gone
    subprocess.run(["scontrol", "update", "PartitionName=debug", "State=DOWN"], check=True)
    try:
        assert main(["submit", spec, "--array-size", "2"]) == 0
        out = capsys.readouterr().out
        model.unlink()
    finally:
        subprocess.run(["scontrol", "update", "PartitionName=debug", "State=UP"], check=True)
    wait_for_jobs([out.split("job array ")[1].split()[0], out.split("report job ")[1].split()[0]])
    assert_bitwise_equal(arrays(str(tmp_path / "spec.zarr")), reference)
