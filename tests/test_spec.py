"""Bad specs and unusable stores: a one-line error naming the field, exit code 2, nothing created or
modified.  Also the run lock."""

import json
import os
import socket
import subprocess
import sys

import pytest

from armillary.ensemble.lock import lock_path
from armillary.jobs.cli import main

from ensemble_cases import BASE_SPEC, write_spec

GOOD = dict(method="vi", t_end=0.2, checkpoint_every=50, members=6, chunk=3, workers=1,
            variables='["q", "omega", "energy", "unit_error", "tangency_error"]')


def bad_spec(tmp_path, old, new):
    store = str(tmp_path / "bad.zarr")
    analysis = "[analysis]\nlyapunov = { d0 = 1e-8, renormalise_every = 7 }\n\n"
    text = analysis + BASE_SPEC.format(store=store, **GOOD)
    assert old in text
    return write_spec(tmp_path, "bad.toml", text=text.replace(old, new)), store


CASES = [
    ("unknown key", "seed = 7", "seed = 7\nsede = 8", "ensemble.sede: unknown key"),
    ("unknown section", "[cluster]", "[clustre]", "clustre: unknown section"),
    ("unknown system", 'name = "sphere_nbody"', 'name = "sphere_nbdy"', "system.name: unknown value 'sphere_nbdy'"),
    ("unknown method", 'method = "vi"', 'method = "rk5"', "integrator.method: unknown value 'rk5'; allowed: vi"),
    ("unknown initial", 'initial = "perturb"', 'initial = "random"', "ensemble.initial: unknown value 'random'"),
    ("wrong type", "members = 6", 'members = "six"', "ensemble.members: must be an integer"),
    ("dt zero", "dt = 0.001", "dt = 0.0", "integrator.dt: must be a finite number > 0"),
    ("dt negative", "dt = 0.001", "dt = -0.001", "integrator.dt: must be a finite number > 0"),
    ("members zero", "members = 6", "members = 0", "ensemble.members: must be a finite number >= 1"),
    ("t_end not whole steps", "t_end = 0.2", "t_end = 0.2005", "integrator.t_end: must be a whole number of steps"),
    ("segment not whole samples", "checkpoint_every = 50", "checkpoint_every = 55",
     "integrator.checkpoint_every: must be a multiple of save_every"),
    ("option of another method", 'method = "vi"', 'method = "vi"\nrtol = 1e-8',
     "integrator.rtol: is not an option of method 'vi'"),
    ("unknown parameter", 'preset = "paper"', 'preset = "paper"\nparams = { mass = 1.0 }',
     "system.params.mass: unknown parameter of sphere_nbody"),
    ("bad sweep", 'preset = "paper"', 'preset = "paper"\nparams = { gamma = { linspace = [1, 2] } }',
     "system.params.gamma.linspace: must be [start, stop, count]"),
    ("sweep value invalid", 'preset = "paper"', 'preset = "paper"\nparams = { m = { values = [1.0, -1.0] } }',
     "m: must be > 0"),
    ("per-member values (found by the fuzzer: the store was created, then the run refused)", 'preset = "paper"',
     'preset = "paper"\nparams = { gamma = [1.0, 1.5, 2.0, 2.5, 3.0, 3.5] }',
     "system.params.gamma: has one more axis than its shape"),
    ("unknown variable", '"tangency_error"]', '"tangency"]', "output.variables: unknown variable 'tangency'"),
    ("missing file", 'initial = "perturb"', 'initial = "file"\npath = "nowhere.npz"', "ensemble.path: cannot read"),
    ("not toml", "[system]", "[system", "spec: is not valid TOML"),
    ("lyapunov with rk45", 'method = "vi"', 'method = "rk45"', "analysis.lyapunov: needs a deterministic fixed-step "
     "method, not 'rk45'; allowed: vi, rk2, rk2_projected, rk4"),
    ("lyapunov unknown key", "d0 = 1e-8", "d0 = 1e-8, every = 3", "analysis.lyapunov.every: unknown key"),
    ("lyapunov d0 too large", "d0 = 1e-8", "d0 = 0.5", "analysis.lyapunov.d0: must be a small distance in (0, 0.01)"),
    ("lyapunov renormalise_every", "renormalise_every = 7", "renormalise_every = 0",
     "analysis.lyapunov.renormalise_every: must be a finite number >= 1"),
    ("analysis unknown key", "lyapunov = {", "chaos = 1\nlyapunov = {", "analysis.chaos: unknown key"),
    ("section naming an unknown variable", "lyapunov = {", 'section = { expression = "R[0][0][0]" }\nlyapunov = {',
     "analysis.section.expression: 'R' is not known; allowed: the sphere_product space's variables q, omega"),
    ("section not a scalar", "lyapunov = {", 'section = { expression = "q[0] * 2" }\nlyapunov = {',
     "analysis.section.expression: must be a scalar"),
    ("section direction", "lyapunov = {", 'section = { expression = "q[0][0]", direction = "left" }\nlyapunov = {',
     "analysis.section.direction: unknown value 'left'; allowed: up, down, both"),
    ("section max_crossings", "lyapunov = {", 'section = { expression = "q[0][0]", max_crossings = 0 }\nlyapunov = {',
     "analysis.section.max_crossings: must be a finite number >= 1"),
    ("section record", "lyapunov = {", 'section = { expression = "q[0][0]", record = ["Omega"] }\nlyapunov = {',
     "analysis.section.record: unknown Omega; the sphere_product space has q, omega"),
    ("escape stop not a boolean", "lyapunov = {", 'escape = { expression = "q[0][2]", stop = 1 }\nlyapunov = {',
     "analysis.escape.stop: must be true or false"),
    ("named section's name", "lyapunov = {", 'sections = { Rise = { expression = "q[0][0]" } }\nlyapunov = {',
     "analysis.sections.Rise: a section's name must be a lower-case identifier"),
    ("named section's expression", "lyapunov = {",
     'sections = { rise = { expression = "q[0][0]" }, fall = { expression = "w" } }\nlyapunov = {',
     "analysis.sections.fall.expression: 'w' is not known"),
    ("langevin without a temperature", 'method = "vi"', 'method = "langevin"',
     "integrator.temperature: langevin needs the bath's temperature"),
    ("negative temperature", 'method = "vi"', 'method = "langevin"\ntemperature = -1.0',
     "integrator.temperature: must be >= 0"),
    ("friction zero", 'method = "vi"', 'method = "brownian"\ntemperature = 1.0\nfriction = 0.0',
     "integrator.friction: must be > 0"),
    ("langevin with rk45's options", 'method = "vi"', 'method = "langevin"\ntemperature = 1.0\nrtol = 1e-8',
     "integrator.rtol: is not an option of method 'langevin'"),
    ("active on langevin", 'method = "vi"', 'method = "langevin"\ntemperature = 1.0\n'
     'active = { speed = 1.0, rotational_diffusion = 1.0 }', "integrator.active: is not an option of method 'langevin'"),
    ("active without its diffusion", 'method = "vi"', 'method = "brownian"\ntemperature = 1.0\n'
     'active = { speed = 1.0 }', "integrator.active.rotational_diffusion: is required"),
    ("active speed zero", 'method = "vi"', 'method = "brownian"\ntemperature = 1.0\n'
     'active = { speed = 0.0, rotational_diffusion = 1.0 }', "integrator.active.speed: must be a finite number > 0"),
    ("a swept temperature below 0", 'method = "vi"', 'method = "langevin"\ntemperature = { values = [1.0, -1.0] }',
     "integrator.temperature: must be >= 0"),
    ("diffusion with friction", 'method = "vi"', 'method = "brownian"\ntemperature = 1.0\nfriction = 2.0\n'
     'diffusion = 1.0', "integrator.diffusion: give either friction or diffusion, not both"),
    ("negative cooling", 'method = "vi"', 'method = "langevin"\ntemperature = 1.0\ncooling_rate = -1.0',
     "integrator.cooling_rate: must be >= 0"),
    ("langevin with Lyapunov shadows", 'method = "vi"', 'method = "langevin"\ntemperature = 1.0',
     "analysis.lyapunov: needs a deterministic fixed-step method, not 'langevin'"),
    ("skin not auto", 'method = "vi"', 'method = "vi"\nskin = "large"',
     'integrator.skin: must be "auto" or a finite number > 0 (m, chord)'),
    ("skin in ensemble mode", 'method = "vi"', 'method = "vi"\nskin = 0.1',
     "integrator.skin: is a setting of the system-parallel mode's neighbour lists"),
    ("named section's unknown key", "lyapunov = {", 'sections = { rise = { expression = "q[0][0]", stop = true } }\n'
     'lyapunov = {', "analysis.sections.rise.stop: unknown key; allowed in [analysis.sections.rise]"),
]


@pytest.mark.parametrize("old, new, message", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_spec_is_one_line_exit_2_and_creates_nothing(tmp_path, capsys, old, new, message):
    spec, store = bad_spec(tmp_path, old, new)
    assert main(["run", spec]) == 2
    err = capsys.readouterr().err
    assert err.startswith("armillary: ") and message in err, err
    assert err.count("\n") == 1
    assert not os.path.exists(store) and not os.path.exists(lock_path(store))


def test_unwritable_store_is_refused(tmp_path, capsys):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    spec = write_spec(tmp_path, store=str(blocker / "run.zarr"))
    assert main(["run", spec]) == 2
    assert "output.store: cannot create" in capsys.readouterr().err
    assert blocker.read_text() == "not a directory"


def test_existing_non_store_directory_is_left_alone(tmp_path, capsys):
    (tmp_path / "spec.zarr").mkdir()
    (tmp_path / "spec.zarr" / "precious.txt").write_text("mine")
    assert main(["run", write_spec(tmp_path)]) == 2
    assert "is not a Zarr store" in capsys.readouterr().err
    assert os.listdir(tmp_path / "spec.zarr") == ["precious.txt"]


def snapshot(directory):
    return {os.path.join(root, name): os.stat(os.path.join(root, name)).st_mtime_ns
            for root, _, names in os.walk(directory) for name in names}


def test_different_spec_against_existing_store_is_refused_unless_overwrite(tmp_path, capsys):
    spec = write_spec(tmp_path)
    assert main(["run", spec]) == 0
    before = snapshot(tmp_path / "spec.zarr")
    changed = write_spec(tmp_path, "other.toml", members=9, store=str(tmp_path / "spec.zarr"))
    assert main(["run", changed]) == 2
    err = capsys.readouterr().err
    assert "output.store:" in err and "different spec" in err
    assert snapshot(tmp_path / "spec.zarr") == before
    assert main(["run", changed, "--overwrite"]) == 0
    import xarray as xr
    assert xr.open_zarr(tmp_path / "spec.zarr").sizes["member"] == 9


def test_concurrent_run_is_refused_and_stale_lock_taken_over(tmp_path, capsys):
    spec = write_spec(tmp_path)
    store = str(tmp_path / "spec.zarr")
    # a live holder: this test process
    with open(f"/proc/{os.getpid()}/stat") as handle:
        start = handle.read().rsplit(")", 1)[1].split()[19]
    with open(lock_path(store), "w") as handle:
        json.dump({"pid": os.getpid(), "host": socket.gethostname(), "process_start": start, "since": "now"}, handle)
    assert main(["run", spec]) == 2
    err = capsys.readouterr().err
    assert f"output.store: is in use by pid {os.getpid()}" in err
    assert not os.path.exists(store)
    # a dead holder: a process that has exited
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    with open(lock_path(store), "w") as handle:
        json.dump({"pid": dead.pid, "host": socket.gethostname(), "process_start": "1", "since": "then"}, handle)
    assert main(["run", spec]) == 0
    assert "taking over the stale lock" in capsys.readouterr().out
    # status tells a dead holder from a live one
    with open(lock_path(store), "w") as handle:
        json.dump({"pid": dead.pid, "host": socket.gethostname(), "process_start": "1", "since": "then"}, handle)
    assert main(["status", store]) == 0
    assert f"not running: pid {dead.pid} on {socket.gethostname()} (since then) is gone" in capsys.readouterr().out
    with open(lock_path(store), "w") as handle:
        json.dump({"pid": os.getpid(), "host": socket.gethostname(), "process_start": start, "since": "now"}, handle)
    assert main(["status", store]) == 0
    assert f"running: pid {os.getpid()}" in capsys.readouterr().out
    os.unlink(lock_path(store))
    assert not os.path.exists(lock_path(store))


def test_a_requeued_slurm_job_takes_over_its_earlier_runs_lock_from_another_host(tmp_path, capsys, monkeypatch):
    """A multi-node job's rank 0 held the lock on another host when SLURM requeued the job: the same job (id) at its
    next restart takes the lock over; at the same restart (a live run of it) and as another job it is refused."""
    spec = write_spec(tmp_path)
    store = str(tmp_path / "spec.zarr")
    monkeypatch.setenv("SLURM_JOB_ID", "4242")
    monkeypatch.setenv("SLURM_RESTART_COUNT", "1")
    for job, restart in (("4242", "1"), ("4243", "0")):
        with open(lock_path(store), "w") as handle:
            json.dump({"pid": 1, "host": "node-elsewhere", "process_start": "1", "since": "then",
                       "slurm_job": job, "slurm_restart": restart}, handle)
        assert main(["run", spec]) == 2
        assert "output.store: is in use by pid 1 on node-elsewhere" in capsys.readouterr().err
    with open(lock_path(store), "w") as handle:
        json.dump({"pid": 1, "host": "node-elsewhere", "process_start": "1", "since": "then",
                   "slurm_job": "4242", "slurm_restart": "0"}, handle)
    assert main(["run", spec]) == 0
    assert "taking over the stale lock of pid 1" in capsys.readouterr().out
    assert not os.path.exists(lock_path(store))
