"""Small specs and helpers shared by the ensemble, resume and bad-input tests."""

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import zarr

#: every spec the tests write: a perturbed ensemble on the local cluster (str.format fields; BASE_SPEC and
#: RUNNER_SPEC fix some of them)
SPEC_TEMPLATE = """
[system]
{system}

[integrator]
method = "{method}"
dt = {dt}
t_end = {t_end}
save_every = 10
checkpoint_every = {checkpoint_every}

[ensemble]
members = {members}
seed = {seed}
initial = "perturb"
scale = {scale}
chunk = {chunk}

[output]
store = "{store}"
variables = {variables}

[cluster]
kind = "local"
workers = {workers}
"""

BASE_SPEC = SPEC_TEMPLATE.replace("{system}", 'name = "sphere_nbody"\npreset = "paper"').replace("{dt}", "0.001") \
    .replace("{seed}", "7").replace("{scale}", "1e-3")


#: a short perturbed ensemble of any system, for the runner's guarantees (``system``: the [system] table's lines)
RUNNER_SPEC = SPEC_TEMPLATE.replace("{dt}", "0.01").replace("{seed}", "5")

#: (chunk, workers, segment) layouts whose stores must hold the same bits
LAYOUTS = ((1, 1, 20), (6, 1, 100), (3, 2, 50))


def runner_spec(directory, name, system, variables, *, method, segment=100, chunk=3, workers=1, t_end=1.0, members=6,
                scale=1e-3):
    """Write RUNNER_SPEC filled in (its store next to it) and return its path."""
    return write_spec(directory, name, text=RUNNER_SPEC.format(
        system=system, method=method, t_end=t_end, checkpoint_every=segment, members=members, scale=scale, chunk=chunk,
        workers=workers, store=os.path.join(directory, name.replace(".toml", ".zarr")), variables=json.dumps(list(variables))))


def run_across_layouts(directory, system, variables, names, *, method, **spec) -> tuple:
    """RUNNER_SPEC run in every LAYOUTS layout: (the spec paths, the first store's ``names``), the stores
    asserted bitwise equal."""
    specs = [runner_spec(directory, f"c{chunk}w{workers}s{segment}.toml", system, variables, method=method,
                         segment=segment, chunk=chunk, workers=workers, **spec) for chunk, workers, segment in LAYOUTS]
    return specs, run_stores_alike(specs, names)

def write_spec(directory, name="spec.toml", *, method="vi", t_end=0.2, checkpoint_every=50, members=6, chunk=3,
               workers=1, store=None, text=None, variables=("q", "omega", "energy", "unit_error", "tangency_error")):
    """Write a spec file (BASE_SPEC filled in, or ``text``) and return its path."""
    path = os.path.join(directory, name)
    store = store or os.path.join(directory, name.replace(".toml", ".zarr"))
    with open(path, "w") as handle:
        handle.write(text if text is not None else BASE_SPEC.format(
            method=method, t_end=t_end, checkpoint_every=checkpoint_every, members=members, chunk=chunk,
            workers=workers, store=store, variables=json.dumps(list(variables))))
    return path


def arrays(store, names=("q", "omega", "energy", "unit_error", "tangency_error", "q0", "omega0", "status",
                         "failed_step")):
    group = zarr.open_group(store, mode="r")
    return {name: group[name][:] for name in names if name in group}


def assert_bitwise_equal(a, b):
    assert a.keys() == b.keys()
    for name in a:
        assert np.array_equal(a[name], b[name], equal_nan=True), name
        assert not np.all(np.isnan(a[name].astype(float))), f"{name} was never written"


def run_stores_alike(specs, names) -> dict:
    """Run every spec quietly (each writing the store next to it), assert their stores hold the same bits
    for ``names`` and return the first's arrays."""
    import io

    from armillary import ensemble
    reference = None
    for spec in specs:
        ensemble.run(spec, stream=io.StringIO())
        result = arrays(spec.replace(".toml", ".zarr"), names)
        if reference is None:
            reference = result
        else:
            assert_bitwise_equal(result, reference)
    return reference


def armillary(*args, **popen):
    """``armillary ARGS`` as a child process (the console script of this interpreter's environment)."""
    return subprocess.Popen([sys.executable, "-c", "import sys; from armillary.jobs.cli import main; sys.exit(main())", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen)


def wait_for_records(store, at_least, timeout=300.0):
    """Block until ``at_least`` segments of the store have completion records; return the records."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            done = zarr.open_group(store, mode="r")["_progress/done"][:]
            if np.isfinite(done).sum() >= at_least:
                return done
        except (FileNotFoundError, KeyError):
            pass
        time.sleep(0.2)
    raise TimeoutError(f"fewer than {at_least} segments finished in {timeout} s")


def kill_9_and_resume_match(spec, directory, names, paused_segment=2):
    """Run ``spec`` once to the end, then again into a second store killed (kill -9, workers with it) while the
    first task of segment ``paused_segment`` is held between writing its data and its completion record
    (ARMILLARY_PAUSE_BEFORE_RECORD), so that the kill always lands mid-run however fast the segments go, and
    resumed: the resumed store's ``names`` are bitwise the first's."""
    import io

    import psutil

    from armillary import ensemble
    from armillary.ensemble.segment import PAUSE_BEFORE_RECORD, PAUSE_SEGMENT

    reference_store, store = os.path.join(directory, "reference.zarr"), os.path.join(directory, "killed.zarr")
    ensemble.run(spec, store=reference_store, stream=io.StringIO())
    expected = arrays(reference_store, names)
    marker = os.path.join(directory, "paused.json")
    process = armillary("run", spec, "--store", store, env={**os.environ, PAUSE_BEFORE_RECORD: f"{marker}:300",
                                                            PAUSE_SEGMENT: str(paused_segment)})
    wait_for_marker(marker)
    workers = psutil.Process(process.pid).children(recursive=True)
    process.send_signal(signal.SIGKILL)
    process.wait()
    psutil.wait_procs(workers, timeout=15)
    done = wait_for_records(store, 0)
    assert paused_segment <= np.isfinite(done).sum() < done.size, "the kill did not land mid-run"
    process = armillary("run", spec, "--store", store)
    out, err = process.communicate(timeout=600)
    assert process.returncode == 0, err
    assert_bitwise_equal(arrays(store, expected.keys()), expected)


def wait_for_marker(path, timeout=300.0) -> dict:
    """The JSON a task paused by ARMILLARY_PAUSE_BEFORE_RECORD wrote (pid, chunk, segment)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with open(path) as handle:
                return json.load(handle)
        except (FileNotFoundError, ValueError):  # not yet there, or being written
            time.sleep(0.1)
    raise TimeoutError(f"no task paused before its record in {timeout} s")


def listening(processes) -> dict[int, str]:
    """Port → address of every TCP socket the processes (and their children) listen on."""
    import psutil

    found = {}
    for process in processes:
        for child in [process] + process.children(recursive=True):
            try:
                connections = child.net_connections(kind="inet")
            except psutil.NoSuchProcess:
                continue
            found.update({c.laddr.port: c.laddr.ip for c in connections if c.status == psutil.CONN_LISTEN})
    return found


def assert_strangers_refused(ports) -> None:
    """On every port, what a ``Client(address)`` does first, its identity request, fails: over plain TCP, and over
    TLS with credentials of the client's own (the request unanswered within a second counts as failed: the
    diagnostics pages' HTTP servers wait for a request line that never comes)."""
    import asyncio

    import pytest
    from distributed.comm import connect
    from distributed.security import Security

    async def identity(address, security):
        arguments = security.get_connection_args("client") if security else {}
        comm = await connect(address, timeout=1, **arguments)
        try:
            await comm.write({"op": "identity", "reply": True})
            return await comm.read()
        finally:
            comm.abort()

    for port in ports:
        for address, security in ((f"tcp://127.0.0.1:{port}", None),
                                  (f"tls://127.0.0.1:{port}", Security.temporary())):
            with pytest.raises((OSError, TimeoutError)):
                asyncio.run(asyncio.wait_for(identity(address, security), 1))
