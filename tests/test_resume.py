"""Faults on the real LocalCluster: ``kill -9`` of ``armillary run`` and of one Dask worker mid-run.
Either way the finished store is bitwise identical to an uninterrupted run."""

import io
import os
import signal

import numpy as np
import psutil
import pytest

import ensemble

from ensemble_cases import armillary, arrays, assert_bitwise_equal, wait_for_records, write_spec

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
