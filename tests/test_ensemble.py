"""Ensemble runs end to end on a real Dask LocalCluster: bitwise reproducibility across chunking,
workers, segments and restarts; sweeps; divergence as data; the store contract."""

import io
import tomllib

import numpy as np
import pytest
import xarray as xr

from armillary import ensemble
from armillary.ensemble.plan import Plan
from armillary.kernels import InvalidInput, get_system, integrate
from armillary.kernels.status import OK, VI_STEP_INFEASIBLE

from ensemble_cases import arrays, assert_bitwise_equal, write_spec

pytestmark = pytest.mark.xdist_group("ensemble")


def run_quietly(spec_path, **overrides):
    return ensemble.run(spec_path, stream=io.StringIO(), **overrides)


def test_chunking_and_workers_do_not_change_a_bit(tmp_path):
    reference = None
    for chunk, workers in ((1, 1), (6, 1), (3, 2), (1, 2)):
        spec = write_spec(tmp_path, f"c{chunk}w{workers}.toml", chunk=chunk, workers=workers)
        run_quietly(spec)
        result = arrays(spec.replace(".toml", ".zarr"))
        if reference is None:
            reference = result
        else:
            assert_bitwise_equal(result, reference)


def test_store_equals_one_unsegmented_kernel_call(tmp_path):
    """Segments of 50 steps continue bit for bit (restart state taken verbatim): the store equals
    one kernels.integrate call over all 200 steps from the same initial conditions."""
    ds = run_quietly(write_spec(tmp_path))
    plan = Plan(ensemble.load_spec(tmp_path / "spec.toml"))
    state = plan.initial_state(0, 6)
    q0, omega0 = state["q"], state["omega"]
    direct = integrate(get_system("sphere_nbody", "paper"), "vi", state, 1e-3, 200, 10)
    assert np.array_equal(ds.q0.values, q0)
    for name in ("q", "omega", "energy", "unit_error", "tangency_error"):
        assert np.array_equal(ds[name].values, getattr(direct, name)), name
    assert ds.sizes == {"member": 6, "time": 21, "body": 3, "xyz": 3}
    assert np.allclose(ds.time.values, np.arange(21) * 0.01) and list(ds.step.values) == list(range(0, 201, 10))


def test_rk45_resumes_with_its_step_size(tmp_path):
    """rk45 carries each member's proposed step size across segments: the segmented store matches a
    chain of direct calls that pass first_step on, and energy error stays at the tolerance level."""
    ds = run_quietly(write_spec(tmp_path, method="rk45", checkpoint_every=100))
    plan = Plan(ensemble.load_spec(tmp_path / "spec.toml"))
    system = get_system("sphere_nbody", "paper")
    first = integrate(system, "rk45", plan.initial_state(0, 6), 1e-3, 100, 10)
    second = integrate(system, "rk45", {"q": first.q_final, "omega": first.omega_final}, 1e-3, 100, 10,
                       restart=True, first_step=first.step_size)
    expected = np.concatenate([first.energy[:, :10], second.energy], axis=1)
    assert np.array_equal(ds.energy.values, expected)
    drift = np.abs(ds.energy - ds.energy.isel(time=0)) / np.abs(ds.energy.isel(time=0))
    assert float(drift.max()) < 1e-5


def test_second_run_skips_finished_work_and_store_carries_its_spec(tmp_path):
    spec_path = write_spec(tmp_path)
    run_quietly(spec_path)
    before = arrays(tmp_path / "spec.zarr", ("energy",))
    out = io.StringIO()
    ds = ensemble.run(spec_path, stream=out)
    assert "0 to run" in out.getvalue()
    assert_bitwise_equal(arrays(tmp_path / "spec.zarr", ("energy",)), before)
    stored = tomllib.loads(ds.attrs["spec"])
    assert stored["integrator"]["method"] == "vi" and ds.attrs["system"] == "sphere_nbody"
    assert ensemble.parse_spec(ds.attrs["spec"]).identity() == ensemble.load_spec(spec_path).identity()
    assert ds.energy.attrs["units"] == "J" and ds.omega.attrs["units"] == "rad/s"
    for key in ("numba_version", "numpy_version", "dask_version", "zarr_version", "armillary_version", "created"):
        assert key in ds.attrs


def test_diverging_member_is_data_and_leaves_its_chunk_intact(tmp_path):
    system = get_system("sphere_nbody", "paper")
    state = system.initial_state()
    q, omega = state["q"], state["omega"]
    q0, omega0 = np.repeat(q[None], 4, axis=0), np.repeat(omega[None], 4, axis=0)
    omega0[1] *= 1e3  # |a_i| > 1 in (29) at the first step: infeasible
    omega0[2] *= 1.01
    np.savez(tmp_path / "initial.npz", q0=q0, omega0=omega0)
    text = open(write_spec(tmp_path, members=4, chunk=4)).read().replace(
        'initial = "perturb"\nscale = 1e-3', f'initial = "file"\npath = "{tmp_path / "initial.npz"}"')
    ds = run_quietly(write_spec(tmp_path, "file.toml", text=text))
    assert list(ds.status.values) == [OK, VI_STEP_INFEASIBLE, OK, OK]
    assert list(ds.failed_step.values) == [-1, 1, -1, -1]
    assert np.all(np.isnan(ds.energy.values[1, 1:]))
    keep = [0, 2, 3]
    direct = integrate(system, "vi", {"q": q0[keep], "omega": omega0[keep]}, 1e-3, 200, 10)
    assert np.array_equal(ds.energy.values[keep], direct.energy)


def test_sweep_lands_as_member_coordinates_and_matches_direct_calls(tmp_path, monkeypatch):
    text = """
[system]
name = "spherical_chain"
preset = "paper"
params = { g = { values = [9.81, 3.71, 1.62] }, l = { linspace = [1.0, 2.0, 2] } }

[integrator]
method = "vi"
dt = 0.01
t_end = 0.5
save_every = 5
checkpoint_every = 25

[ensemble]
members = 36
seed = 3
initial = "perturb"
chunk = 12

[output]
store = "sweep.zarr"
"""
    monkeypatch.chdir(tmp_path)  # relative store path; restored after the test
    ds = run_quietly(write_spec(tmp_path, "sweep.toml", text=text))
    assert ds.g.dims == ("member",) and ds.l.dims == ("member",)
    points = {(g, l) for g, l in zip(ds.g.values, ds.l.values)}
    assert points == {(g, l) for g in (9.81, 3.71, 1.62) for l in (1.0, 2.0)}
    assert all(np.count_nonzero((ds.g.values == g) & (ds.l.values == l)) == 6 for g, l in points)
    plan = Plan(ensemble.load_spec("sweep.toml"))
    state = plan.initial_state(0, 36)
    system = get_system("spherical_chain", "paper", g=ds.g.values, l=np.repeat(ds.l.values[:, None], 2, axis=1))
    direct = integrate(system, "vi", state, 0.01, 50, 5, outputs=("energy",))
    assert np.array_equal(ds.energy.values, direct.energy)
    assert np.ptp(ds.energy.values[:, 0]) > 1.0  # the parameters really differ between members


def test_xarray_opens_store_without_arguments(tmp_path):
    run_quietly(write_spec(tmp_path))
    ds = xr.open_zarr(tmp_path / "spec.zarr")
    assert set(ds.data_vars) == {"q", "omega", "energy", "unit_error", "tangency_error", "q0", "omega0", "status",
                                 "failed_step"}
    assert float(ds.unit_error.max()) < 1e-14


def test_running_scheduler_by_address_gives_the_same_store(tmp_path, capsys):
    """A scheduler the user started with their own TLS certificate, reached with the files Dask's configuration
    names; without them, or by tcp://, the run is refused before anything is written."""
    import dask
    from distributed import LocalCluster

    from armillary.ensemble.clusters import run_security_files
    from armillary.jobs.cli import main

    local = write_spec(tmp_path, "local.toml")
    run_quietly(local)
    tls = run_security_files(str(tmp_path))  # as the user's own certificate authority, certificate and key
    remote = ["--store", str(tmp_path / "remote.zarr")]
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address="127.0.0.1:0",
                      host="127.0.0.1", protocol="tls://", security=tls) as cluster:
        address = cluster.scheduler_address
        assert main(["run", local, "--scheduler", address, *remote]) == 2
        assert "cluster.tls_ca_file: is required with a tls:// scheduler" in capsys.readouterr().err
        assert main(["run", local, "--scheduler", address.replace("tls://", "tcp://"), *remote]) == 2
        assert "cluster.scheduler: must be a tls:// address" in capsys.readouterr().err
        assert not (tmp_path / "remote.zarr").exists()
        with dask.config.set({"distributed.comm.tls.ca-file": tls.tls_ca_file, "distributed.comm.tls.client.cert":
                              tls.tls_client_cert, "distributed.comm.tls.client.key": tls.tls_client_key}):
            assert main(["run", local, "--scheduler", address, *remote]) == 0
    assert_bitwise_equal(arrays(tmp_path / "remote.zarr"), arrays(tmp_path / "local.zarr"))
    assert main(["status", str(tmp_path / "remote.zarr")]) == 0
    out = capsys.readouterr().out
    assert "segments      8/8" in out and "failed        0 members" in out and "not running" in out
    assert main(["report", str(tmp_path / "remote.zarr"), "--out", str(tmp_path / "report")]) == 0
    assert "vi" in capsys.readouterr().out
    assert (tmp_path / "report" / "report.md").stat().st_size > 0


def test_uniform_and_continuation_from_a_finished_store(tmp_path):
    text = open(write_spec(tmp_path, members=40, chunk=16)).read().replace(
        'initial = "perturb"\nscale = 1e-3', 'initial = "uniform"\nomega_scale = 0.5')
    first = run_quietly(write_spec(tmp_path, "uniform.toml", text=text.replace("spec.zarr", "uniform.zarr")))
    q0, omega0 = first.q0.values, first.omega0.values
    assert np.abs(np.linalg.norm(q0, axis=-1) - 1).max() < 1e-15
    assert np.abs(np.sum(q0 * omega0, axis=-1)).max() < 1e-15
    assert 0.5 * 0.8 < np.std(omega0) * np.sqrt(3 / 2) < 0.5 * 1.2  # tangent Gaussian: 2 of 3 components
    assert np.abs(q0.reshape(-1, 3).mean(axis=0)).max() < 0.2  # no preferred direction (120 points)

    text = text.replace('initial = "uniform"\nomega_scale = 0.5', f'initial = "file"\npath = "{tmp_path / "uniform.zarr"}"')
    second = run_quietly(write_spec(tmp_path, "continued.toml", text=text.replace("spec.zarr", "continued.zarr")))
    assert np.array_equal(second.q0.values, first.q.values[:, -1])
    assert np.array_equal(second.omega0.values, first.omega.values[:, -1])



def test_perturbed_members_lie_on_the_spheres_at_the_spec_scale_whatever_the_chunk():
    """perturb: ‖q_i‖ = 1 and ω_i ⟂ q_i to round-off, geodesic displacements with rms √2·scale (a
    2-D tangent Gaussian), standard normal draws, and each member's numbers depend on its id only."""
    from armillary.ensemble.initial import member_normals
    from armillary.kernels.spaces import SPHERE_PRODUCT

    def perturbed_members(q, omega, ids, scale, seed):
        state = SPHERE_PRODUCT.perturb({"q": q, "omega": omega}, member_normals(seed, ids, 18), scale)
        return state["q"], state["omega"]

    q = np.array([[0.0, 0.0, 1.0], [0.6, 0.8, 0.0], [0.0, -1.0, 0.0]])
    omega = np.array([[0.3, -0.2, 0.0], [0.8, -0.6, 0.5], [1.0, 0.0, 0.0]])
    members, scale = 20_000, 1e-3
    moved, moved_omega = perturbed_members(q, omega, np.arange(members), scale, 5)
    assert np.abs(np.linalg.norm(moved, axis=-1) - 1).max() <= 2.3e-16
    assert np.abs(np.sum(moved * moved_omega, axis=-1)).max() <= 1e-15
    angle = np.arccos(np.clip(np.sum(moved * q, axis=-1), -1, 1))
    assert abs(np.sqrt(np.mean(angle ** 2)) / (np.sqrt(2) * scale) - 1) < 0.02
    normals = member_normals(5, np.arange(members), 18)
    assert abs(normals.mean()) < 0.01 and abs(normals.std() - 1) < 0.005
    part = perturbed_members(q, omega, np.arange(700, 900), scale, 5)
    assert np.array_equal(part[0], moved[700:900]) and np.array_equal(part[1], moved_omega[700:900])


def test_kernel_lock_holds_off_other_holders_until_released(tmp_path, monkeypatch):
    """The per-kernel compile lock in NUMBA_CACHE_DIR: while one process compiles (holds it), another's
    attempt blocks; released, it is free; a cache path that cannot be made is refused, naming it."""
    import fcntl

    from armillary.ensemble.lock import kernel_lock

    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "cache" / "armillary-compile-sphere_nbody-vi.lock"
    with kernel_lock("sphere_nbody-vi"):
        with open(path) as other, pytest.raises(BlockingIOError):  # another open file: another holder
            fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
    with open(path) as other:
        fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "file" / "cache"))
    with pytest.raises(InvalidInput, match="NUMBA_CACHE_DIR: cannot create .*file/cache: Not a directory"):
        with kernel_lock("sphere_nbody-vi"):
            pass


def test_a_process_forked_while_another_thread_logs_can_log():
    """Local workers are forked while the run's other threads may be logging: the child must not inherit the lock
    of a stream that a parent thread was writing (armillary.ensemble.clusters holds every handler's lock across
    a fork).  Here a handler writes under a lock of its own, as a buffered stream does, and a thread logs
    through it without pause; the child forked meanwhile logs once and exits."""
    import logging
    import os
    import threading
    import time

    import armillary.ensemble.clusters  # noqa: F401 (registers the fork hook, as every run does)

    class BufferedHandler(logging.Handler):
        def __init__(self):
            super().__init__()
            self.buffer_lock = threading.Lock()  # not renewed in a child, as a BufferedWriter's is not

        def emit(self, record):
            with self.buffer_lock:
                time.sleep(0.01)

    logger = logging.getLogger("armillary-fork-test")
    handler, stop = BufferedHandler(), threading.Event()
    logger.addHandler(handler)
    logger.propagate = False
    chatter = threading.Thread(target=lambda: [logger.warning("busy") for _ in iter(stop.is_set, True)])
    chatter.start()
    try:
        time.sleep(0.05)
        pid = os.fork()
        if pid == 0:
            logger.warning("child")
            os._exit(0)
        deadline = time.monotonic() + 10
        while (done := os.waitpid(pid, os.WNOHANG))[0] == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        if done[0] == 0:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
        assert done[0] == pid and os.waitstatus_to_exitcode(done[1]) == 0, "the child hung on its first log line"
    finally:
        stop.set()
        chatter.join()
        logger.removeHandler(handler)


def test_two_threads_forking_at_once_leave_every_handler_free():
    """A LocalCluster's nannies fork their workers from a thread each, at the same time: each forking thread must
    release exactly the handler locks it took (a run whose two forks overlapped once kept a lock held and hung
    at exit, in logging's shutdown).  A handler that holds its lock a while after taking it makes them overlap."""
    import logging
    import os
    import threading
    import time

    import armillary.ensemble.clusters  # registers the fork hook, as every run does

    class SlowToTakeHandler(logging.Handler):
        def acquire(self):
            super().acquire()
            time.sleep(0.2)  # the other thread reaches its own fork meanwhile

    def fork_and_reap():
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)

    logger = logging.getLogger("armillary-two-forks-test")
    handler = SlowToTakeHandler()
    logger.addHandler(handler)
    try:
        forks = [threading.Thread(target=fork_and_reap) for _ in range(2)]
        for fork in forks:
            fork.start()
            time.sleep(0.05)
        for fork in forks:
            fork.join(timeout=10)
        for held in [held for held in armillary.ensemble.clusters.logging_handlers() if held.lock is not None]:
            assert held.lock.acquire(timeout=5), f"a forking thread kept the lock of {held}"
            held.lock.release()
    finally:
        logger.removeHandler(handler)
