"""A shared cluster's other users: a run's Dask connections take only its own TLS credentials and listen on
loopback; the directories a run loads code from are its user's own (a second Unix user's planted directories,
modules and pickles are refused, and nothing of theirs runs); generated code runs only as derived now (a
changed module or derivation entry is rebuilt, never imported); a store's model code runs only when the store
is run.  (The SLURM run's connections are checked in test_slurm.py.)"""

import json
import os
import pickle
import shutil
import stat
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psutil
import pytest
import zarr

from armillary.ensemble import parse_spec
from armillary.ensemble.accessor import open_store
from armillary.jobs.cli import main
from armillary.jobs.slurm import NUMBA_CACHE_LINES
from armillary.kernels import InvalidInput
from armillary.kernels.caches import private_directory

from ensemble_cases import armillary, assert_strangers_refused, listening, wait_for_marker, write_spec

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "models" / "coupled_pendula.py"
#: the second Unix user of these tests
OTHER_USER = "armillary-other"


def marker_code(marker) -> str:
    return f"import pathlib; pathlib.Path({str(marker)!r}).write_text('ran')\n"


def test_run_in_progress_refuses_clients_without_its_credentials_and_listens_on_loopback(tmp_path):
    pause = tmp_path / "paused.json"
    spec = write_spec(tmp_path, members=4, chunk=2, workers=2)
    process = armillary("run", spec, env={**os.environ, "ARMILLARY_PAUSE_BEFORE_RECORD": f"{pause}:60"})
    try:
        wait_for_marker(pause)  # a worker of the run has run a task: its own connections work
        ports = listening([psutil.Process(process.pid)])
        assert len(ports) >= 6, ports  # scheduler, dashboard, and each worker's and nanny's comm and HTTP
        assert set(ports.values()) == {"127.0.0.1"}, ports
        assert_strangers_refused(ports)
    finally:
        process.kill()
        process.wait()


def test_dashboard_listens_where_the_option_asks():
    from armillary.ensemble.clusters import dask_client

    me = psutil.Process()
    before = set(listening([me]))
    with dask_client({"kind": "local", "workers": 1, "dashboard": "0.0.0.0"}) as client:
        port = client.scheduler_info()["services"]["dashboard"]
        assert listening([me])[port] == "0.0.0.0"
        assert {ip for p, ip in listening([me]).items() if p not in before and p != port} == {"127.0.0.1"}


def other_user() -> str:
    """The second Unix user (made with useradd when the tests run as root), or skip saying why not."""
    if os.geteuid() != 0:
        pytest.skip("needs root to act as a second Unix user (CI runs as root)")
    for _ in range(20):  # tests on other workers may be making it at the same moment (useradd locks /etc/passwd)
        if subprocess.run(["id", "-u", OTHER_USER], capture_output=True).returncode == 0:
            return OTHER_USER
        subprocess.run(["useradd", "--system", "--no-create-home", OTHER_USER], capture_output=True)
        time.sleep(0.2)
    pytest.fail(f"could not create the user {OTHER_USER} with useradd")


def as_other(user, *command):
    subprocess.run(["runuser", "-u", user, "--", *command], check=True)


def plant(user, directory: Path, marker: Path) -> None:
    """As ``user``: make ``directory`` first and fill it as a run of this test's would find it (the kernels
    and model modules of this suite's cache), each module replaced by code that writes ``marker`` and each
    of Numba's index files by a pickle that does."""
    as_other(user, "mkdir", "-m", "755", str(directory))
    source = Path(os.environ["NUMBA_CACHE_DIR"])
    bomb = pickle.dumps(type("Bomb", (), {"__reduce__": lambda self: (exec, (marker_code(marker),))})())
    staging = directory.parent / f"{directory.name}.staging"
    shutil.copytree(source, staging, ignore=shutil.ignore_patterns("*.lock"))
    for path in staging.rglob("*"):
        if path.suffix == ".nbi":
            path.write_bytes(bomb)
        elif path.suffix == ".py":
            path.write_text(marker_code(marker))
        elif path.name.startswith("derived-"):
            entry = json.loads(path.read_text())
            path.write_text(json.dumps({**entry, "text": marker_code(marker)}))
    subprocess.run(["chown", "-R", user, str(staging)], check=True)
    as_other(user, "cp", "-a", f"{staging}/.", str(directory))
    shutil.rmtree(staging)


@pytest.mark.parametrize("variable", ["NUMBA_CACHE_DIR", "ARMILLARY_MODEL_CACHE"])
def test_a_second_users_planted_cache_is_refused_and_nothing_of_theirs_runs(tmp_path, variable):
    user = other_user()
    planted = Path("/tmp") / f"armillary-victim-{uuid.uuid4().hex[:8]}"
    marker = tmp_path / "marker"
    try:
        plant(user, planted, marker)
        model = tmp_path / "pendula.py"
        model.write_text(EXAMPLE.read_text())
        spec = write_spec(tmp_path, text=open(write_spec(tmp_path, "built_in.toml")).read().replace(
            'name = "sphere_nbody"\npreset = "paper"', f'model = "{model}"'))
        process = armillary("run", spec, env={**os.environ, variable: str(planted)})
        out, err = process.communicate(timeout=300)
        assert process.returncode == 2, err
        assert err.strip() == (f"armillary: {variable}: {planted} is owned by {user} (uid {planted.stat().st_uid}), "
                               f"not by you (root (uid 0)): refusing to load code from it (Armillary keeps compiled "
                               "and generated code only in directories no other user can write; use a fresh one, "
                               "or chmod go-w it if it is yours)")
        assert not marker.exists() and not list(tmp_path.glob("*.zarr"))
    finally:
        shutil.rmtree(planted, ignore_errors=True)


def test_private_directories_are_made_0700_and_unsafe_ones_refused(tmp_path):
    made = private_directory(str(tmp_path / "new" / "cache"), "NUMBA_CACHE_DIR")
    assert stat.S_IMODE(os.stat(made).st_mode) == 0o700
    (tmp_path / "shared").mkdir(mode=0o775)
    os.chmod(tmp_path / "shared", 0o775)  # the umask may have taken the group's w
    with pytest.raises(InvalidInput, match=r"shared is writable by group or others \(mode 0775\)"):
        private_directory(str(tmp_path / "shared"), "NUMBA_CACHE_DIR")
    with pytest.raises(InvalidInput, match=r"shared/cache lies in .*shared, which is writable by group or others"):
        private_directory(str(tmp_path / "shared" / "cache"), "NUMBA_CACHE_DIR")
    (tmp_path / "link").symlink_to(made)
    with pytest.raises(InvalidInput, match="link is a symbolic link"):
        private_directory(str(tmp_path / "link"), "ARMILLARY_MODEL_CACHE")


def test_compile_lock_without_a_kernel_cache_is_the_users_own(tmp_path, monkeypatch):
    """Without NUMBA_CACHE_DIR the compile lock lives in the user's private cache: a lock file another user
    holds under the old fixed name in the temporary directory stops nobody."""
    import fcntl
    import tempfile

    from armillary.ensemble.lock import kernel_lock

    monkeypatch.delenv("NUMBA_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "home-cache"))
    with open(os.path.join(tempfile.gettempdir(), "armillary-compile-sphere_nbody-vi.lock"), "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        with kernel_lock("sphere_nbody-vi"):
            path = tmp_path / "home-cache" / "armillary" / "locks" / "armillary-compile-sphere_nbody-vi.lock"
            with open(path) as other, pytest.raises(BlockingIOError):
                fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
    assert stat.S_IMODE(os.stat(path.parent).st_mode) == 0o700


def numba_cache_of_a_job(environment: dict) -> str:
    """NUMBA_CACHE_DIR as a SLURM job script's lines choose it (bash, as the job runs them)."""
    script = "\n".join(NUMBA_CACHE_LINES) + '\necho "$NUMBA_CACHE_DIR"\n'
    result = subprocess.run(["bash", "-euc", script], env=environment, capture_output=True, text=True, check=True)
    return result.stdout.strip()


def test_slurm_jobs_pass_over_a_default_cache_path_another_user_made():
    user = other_user()
    shared = Path("/tmp") / f"armillary-tmpdir-{uuid.uuid4().hex[:8]}"  # a job's shared temporary directory
    shared.mkdir()
    os.chmod(shared, 0o1777)
    environment = {"PATH": os.environ["PATH"], "TMPDIR": str(shared), "NUMBA_OPT": "1"}
    default = shared / "armillary-numba-root-O1"
    try:
        as_other(user, "mkdir", "-m", "777", str(default))
        chosen = Path(numba_cache_of_a_job(environment))
        assert chosen != default and chosen.stat().st_uid == 0 and stat.S_IMODE(chosen.stat().st_mode) == 0o700
        shutil.rmtree(default)
        assert Path(numba_cache_of_a_job(environment)) == default
        assert default.stat().st_uid == 0 and stat.S_IMODE(default.stat().st_mode) == 0o700
    finally:
        shutil.rmtree(shared)


def build_in_fresh_process(cache: Path) -> dict:
    """Build the example model in a new interpreter whose model cache is ``cache``: its derivation time."""
    code = ("import json, sys; from armillary.kernels.models import build_model; "
            f"d = build_model(open({str(EXAMPLE)!r}).read(), {str(EXAMPLE)!r}); "
            "print(json.dumps({'derive_seconds': d.model.derive_seconds}))")
    result = subprocess.run([sys.executable, "-c", code], env={**os.environ, "ARMILLARY_MODEL_CACHE": str(cache)},
                            capture_output=True, text=True, check=True)
    return json.loads(result.stdout)


def test_changed_generated_module_or_derivation_entry_is_rebuilt_not_imported(tmp_path):
    cache, marker = tmp_path / "models", tmp_path / "marker"
    assert build_in_fresh_process(cache)["derive_seconds"] > 0
    [module] = cache.glob("armillary_model_*.py")
    [entry] = cache.glob("derived-*.json")
    derived, signed = module.read_text(), json.loads(entry.read_text())
    module.write_text(marker_code(marker))
    assert build_in_fresh_process(cache)["derive_seconds"] == 0  # the entry is sound: only the module is rewritten
    assert module.read_text() == derived and not marker.exists()
    entry.write_text(json.dumps({**signed, "text": marker_code(marker)}))
    assert build_in_fresh_process(cache)["derive_seconds"] > 0  # derived again, not taken from the entry
    assert json.loads(entry.read_text())["text"] == signed["text"] and not marker.exists()


@pytest.mark.xdist_group("models_runner")  # the model's kernel is the model runner tests' (compiled once)
def test_store_model_code_runs_only_when_the_store_runs(tmp_path, capsys):
    """report, verify, status and open_store of a store whose stored model text was changed to write a marker
    read the store without running the text."""
    from armillary import ensemble

    from ensemble_cases import runner_spec

    model = tmp_path / "pendula.py"
    model.write_text(EXAMPLE.read_text())
    spec = runner_spec(str(tmp_path), "spec.toml", f'model = "{model}"', ("q", "omega", "energy"), method="vi")
    ds = ensemble.run(spec, stream=open(os.devnull, "w"))
    marker = tmp_path / "marker"
    edited = marker_code(marker) + ds.attrs["model_source"]
    stored = parse_spec(ds.attrs["spec"], stored=True)
    attrs = zarr.open_group(stored.store, mode="r+").attrs
    attrs["spec"] = parse_spec(ds.attrs["spec"], stored=True).to_toml().replace(
        json.dumps(ds.attrs["model_source"], ensure_ascii=False), json.dumps(edited, ensure_ascii=False))
    attrs["model_source"] = edited
    assert parse_spec(attrs["spec"], stored=True).model_source == edited
    assert open_store(stored.store).energy.shape == (6, 11)
    for command in (["status", stored.store], ["verify", stored.store],
                    ["report", stored.store, "--out", str(tmp_path / "report")]):
        assert main(command) == 0, capsys.readouterr().err
    assert (tmp_path / "report" / "report.md").stat().st_size > 0
    assert not marker.exists()
