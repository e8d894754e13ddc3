"""Process faults on the real LocalCluster: ``kill -9`` of ``armillary run`` (once, and at three
random moments of one run), of one Dask worker mid-run and of one exactly between its data and its
completion record; two runs of one store at once; Ctrl-C.  Every time the finished store is
bitwise identical to an uninterrupted run."""

import io
import os
import signal
import subprocess
import sys
import time

import numpy as np
import psutil
import pytest
import zarr

from armillary import ensemble
from armillary.ensemble.lock import lock_path
from armillary.ensemble.segment import PAUSE_BEFORE_RECORD

from ensemble_cases import armillary, arrays, assert_bitwise_equal, wait_for_marker, wait_for_records, write_spec

pytestmark = pytest.mark.xdist_group("resume")

#: 4 chunks × 10 segments of 4000 members × 4000 steps (a few tenths of a second each)
LONG = dict(t_end=40.0, checkpoint_every=4000, members=4000, chunk=1000, workers=2,
            variables=("energy", "unit_error"))


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    directory = tmp_path_factory.mktemp("reference")
    spec = write_spec(directory, **LONG)
    ensemble.run(spec, stream=io.StringIO())
    return spec, arrays(str(directory / "spec.zarr"), ("energy", "unit_error", "q0", "status"))


def worker_processes(pid):
    """The Dask worker processes a run started (forked from it, or spawned interpreters when it had
    to spawn; not a multiprocessing resource tracker)."""
    return [child for child in psutil.Process(pid).children(recursive=True)
            if "resource_tracker" not in " ".join(child.cmdline())]


def test_kill_9_of_the_run_then_same_command_resumes_bitwise(tmp_path, reference):
    spec_path, expected = reference
    store = str(tmp_path / "killed.zarr")
    process = armillary("run", spec_path, "--store", store)
    wait_for_records(store, 8)
    workers = worker_processes(process.pid)
    assert workers, "the run has no worker processes"
    process.send_signal(signal.SIGKILL)
    process.wait()
    _, alive = psutil.wait_procs(workers, timeout=15)
    assert not alive, "workers outlived the killed run"
    done_before = wait_for_records(store, 0)
    finished_before = np.isfinite(done_before)
    assert 8 <= finished_before.sum() < done_before.size

    process = armillary("run", spec_path, "--store", store)
    out, err = process.communicate(timeout=600)
    assert process.returncode == 0, err
    assert f"{int(finished_before.sum())} segments already done" in out
    assert "taking over the stale lock" in out
    done_after = wait_for_records(store, done_before.size)
    assert np.array_equal(done_after[finished_before], done_before[finished_before]), "finished work was redone"
    assert_bitwise_equal(arrays(store, expected.keys()), expected)


def test_killed_worker_is_replaced_and_the_run_still_matches(tmp_path, reference):
    spec_path, expected = reference
    store = str(tmp_path / "worker.zarr")
    process = armillary("run", spec_path, "--store", store)
    wait_for_records(store, 4)
    victim = worker_processes(process.pid)[0]
    os.kill(victim.pid, signal.SIGKILL)
    out, err = process.communicate(timeout=600)
    assert process.returncode == 0, err
    assert not victim.is_running()
    assert_bitwise_equal(arrays(store, expected.keys()), expected)


def attempts(store):
    return zarr.open_group(store, mode="r")["_progress/attempts"][:]


def kill_run(process):
    """kill -9 of ``armillary run``; its workers must die with it."""
    workers = worker_processes(process.pid)
    process.send_signal(signal.SIGKILL)
    process.wait()
    _, alive = psutil.wait_procs(workers, timeout=15)
    assert not alive, "workers outlived the killed run"


def test_kill_9_at_three_random_moments_resumes_bitwise_and_redoes_only_work_in_flight(tmp_path, reference):
    spec_path, expected = reference
    store = str(tmp_path / "three.zarr")
    rng = np.random.default_rng(20261123)
    total = 40
    moments = np.sort(rng.choice(np.arange(2, total - 2), size=3, replace=False))
    finished_at_kill = []
    for threshold in moments:
        process = armillary("run", spec_path, "--store", store)
        wait_for_records(store, int(threshold))
        time.sleep(rng.uniform(0.0, 0.3))
        kill_run(process)
        finished_at_kill.append(wait_for_records(store, 0))
    process = armillary("run", spec_path, "--store", store)
    out, err = process.communicate(timeout=600)
    assert process.returncode == 0, err
    done = wait_for_records(store, total)
    assert_bitwise_equal(arrays(store, expected.keys()), expected)
    counts = attempts(store)
    assert counts.min() == 1
    # a kill costs at most the segments in flight (one per worker); nothing finished is redone
    assert counts.sum() - counts.size <= len(moments) * LONG["workers"], counts
    for records in finished_at_kill:  # a segment finished before a kill keeps its record: never computed again
        finished = np.isfinite(records)
        assert np.array_equal(done[finished], records[finished])


def test_kill_9_of_a_worker_between_its_data_and_its_record_redoes_that_segment(tmp_path, reference):
    spec_path, expected = reference
    store = str(tmp_path / "midwrite.zarr")
    marker = tmp_path / "paused.json"
    process = armillary("run", spec_path, "--store", store,
                        env={**os.environ, PAUSE_BEFORE_RECORD: f"{marker}:600"})
    paused = wait_for_marker(marker)
    c, j = paused["chunk"], paused["segment"]
    group = zarr.open_group(store, mode="r")
    assert not np.isfinite(group["_progress/done"][c, j]), "the record was written before the pause"
    assert np.isfinite(group["energy"][1000 * c, j * 400 + 1]), "the data was not written before the pause"
    os.kill(paused["pid"], signal.SIGKILL)
    out, err = process.communicate(timeout=600)
    assert process.returncode == 0, err
    assert_bitwise_equal(arrays(store, expected.keys()), expected)
    counts = attempts(store)
    assert counts[c, j] == 2 and counts.sum() == counts.size + 1, counts


def test_second_run_of_the_same_store_is_refused_and_the_first_is_unaffected(tmp_path, reference):
    spec_path, expected = reference
    store = str(tmp_path / "twice.zarr")
    first = armillary("run", spec_path, "--store", store)
    wait_for_records(store, 2)
    second = armillary("run", spec_path, "--store", store)
    out, err = second.communicate(timeout=300)
    assert second.returncode == 2, err
    assert len(err.strip().splitlines()) == 1 and f"is in use by pid {first.pid}" in err, err
    out, err = first.communicate(timeout=600)
    assert first.returncode == 0, err
    assert_bitwise_equal(arrays(store, expected.keys()), expected)
    assert attempts(store).max() == 1


def test_ctrl_c_stops_workers_releases_the_lock_keeps_segments_and_exits_130(tmp_path, reference):
    spec_path, expected = reference
    store = str(tmp_path / "interrupted.zarr")
    # A terminal's foreground job has Python's default Ctrl-C handler; a child inherits an ignored
    # SIGINT from its parent instead, so the run is started with the default installed explicitly.
    inherited = signal.getsignal(signal.SIGINT)
    process = subprocess.Popen(
        [sys.executable, "-c", "import signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
         "from armillary.jobs.cli import main; sys.exit(main())", "run", spec_path, "--store", store],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
        env={**os.environ, "PYTHONFAULTHANDLER": "1"})
    wait_for_records(store, 6)
    workers = worker_processes(process.pid)
    os.killpg(process.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: the whole foreground group
    try:
        out, err = process.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGABRT)  # the fault handler prints where every thread waits
        out, err = process.communicate()
        pytest.fail(f"the run did not stop within 120 s of Ctrl-C:\n{err}")
    assert process.returncode == 130, (out, err, f"SIGINT in the test process: {inherited}")
    assert "interrupted" in err and "Traceback" not in err, err
    _, alive = psutil.wait_procs(workers, timeout=15)
    assert not alive, "workers outlived Ctrl-C"
    assert not os.path.exists(lock_path(store))
    done = wait_for_records(store, 0)
    assert 6 <= np.isfinite(done).sum() < done.size
    process = armillary("run", spec_path, "--store", store)
    out, err = process.communicate(timeout=600)
    assert process.returncode == 0, err
    assert "taking over" not in out
    assert_bitwise_equal(arrays(store, expected.keys()), expected)
