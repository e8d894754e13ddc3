"""Faults of the store and the filesystem, each real (bytes flipped and files cut or deleted on disk,
a real tmpfs that fills up, real closed pipes): ``verify`` finds every damaged chunk, ``report``
refuses a damaged store, ``verify --repair`` then ``run`` restores the undamaged store bit for bit,
a full disk stops the run cleanly and the resumed run matches, and every command ends quietly
when its reader leaves.  (Process faults, kill -9 and Ctrl-C, are in test_resume.py; SLURM
signals mid-write in test_slurm.py.)  A dry run works where no SLURM controller answers."""

import os
import shutil
import subprocess

import numpy as np
import pytest
import zarr

from armillary import ensemble
from armillary.ensemble.errors import DamagedStore
from armillary.ensemble.lock import lock_path
from armillary.ensemble.store import RunStore
from armillary.jobs.cli import main

from ensemble_cases import armillary, write_spec

pytestmark = pytest.mark.xdist_group("faults")

#: 2 member chunks × 4 segments; every array of the store, checkpoint slots included, is compared
SMALL = dict(members=6, chunk=3, t_end=0.2, checkpoint_every=50)


def every_array(store: str) -> dict:
    """Every data array and checkpoint slot (not the timing records, which differ run to run)."""
    group = zarr.open_group(store, mode="r")
    out = {name: array[:] for name, array in group.arrays()}
    out.update({f"_progress/{name}": array[:] for name, array in group["_progress"].arrays()
                if name.startswith("slot_")})
    return out


def assert_same_store(store: str, expected: dict) -> None:
    found = every_array(store)
    assert found.keys() == expected.keys()
    for name in expected:
        assert np.array_equal(found[name], expected[name], equal_nan=True), name


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    directory = tmp_path_factory.mktemp("reference")
    spec = write_spec(directory, **SMALL)
    ensemble.run(spec, stream=open(os.devnull, "w"))
    return spec, str(directory / "spec.zarr"), every_array(str(directory / "spec.zarr"))


def flip_bytes(path: str, count: int = 60) -> None:
    data = bytearray(open(path, "rb").read())
    for k in range(min(count, len(data) - 4)):
        data[k] ^= 0xA5
    open(path, "wb").write(bytes(data))


def truncate(path: str) -> None:
    data = open(path, "rb").read()
    open(path, "wb").write(data[:len(data) // 2])


#: (what, file inside the store, how, the variable and chunk verify must name)
DAMAGE = [
    ("flipped bytes in an energy chunk", "energy/c/1/2", flip_bytes, "energy chunk (1, 2)"),
    ("a truncated q chunk", "q/c/0/1/0/0", truncate, "q chunk (0, 1, 0, 0)"),
    ("a deleted completion record", "_progress/done/c/0/1", os.remove, "_progress/done chunk (0, 1)"),
    ("a corrupted checkpoint slot", "_progress/slot_omega/c/1/1/0/0", flip_bytes, "_progress/slot_omega chunk (1, 1, 0, 0)"),
    ("a deleted status chunk", "status/c/0", os.remove, "status chunk (0,)"),
    ("a corrupted coordinate", "time/c/0", flip_bytes, "time chunk (0,)"),
]


@pytest.mark.parametrize("what, where, damage, named", DAMAGE, ids=[d[0] for d in DAMAGE])
def test_damage_is_found_repaired_and_recomputed_bitwise(tmp_path, capsys, reference, what, where, damage, named):
    spec, source, expected = reference
    store = str(tmp_path / "damaged.zarr")
    shutil.copytree(source, store)
    damage(os.path.join(store, where))
    capsys.readouterr()
    assert main(["verify", store]) == 1
    out = capsys.readouterr().out
    assert named in out and "DAMAGED" in out, out
    assert main(["verify", "--repair", store]) == 0
    assert "marked" in capsys.readouterr().out
    assert main(["run", spec, "--store", store]) == 0
    assert main(["verify", store]) == 0
    assert capsys.readouterr().out.rstrip().endswith("sound")
    assert_same_store(store, expected)
    attempts = zarr.open_group(store, mode="r")["_progress/attempts"][:]
    assert attempts.min() == 1 and attempts.max() <= 2  # only what the repair marked was computed again


def test_report_refuses_a_flipped_energy_chunk_unless_allowed(tmp_path, capsys, reference):
    _, source, expected = reference
    store = str(tmp_path / "flipped.zarr")
    shutil.copytree(source, store)
    flip_bytes(os.path.join(store, "energy/c/1/2"))
    capsys.readouterr()
    assert main(["report", store, "--out", str(tmp_path / "report")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("armillary: energy: chunk (1, 2)"), err
    assert "members 3–5" in err
    assert not (tmp_path / "report" / "report.md").exists()
    assert main(["report", store, "--out", str(tmp_path / "report"), "--allow-damaged"]) == 0
    assert "energy chunk (1, 2) fails its checksum" in (tmp_path / "report" / "report.md").read_text()
    with pytest.raises(DamagedStore, match=r"energy chunk \(1, 2\)"):
        RunStore(store).read("energy", (slice(3, 6), slice(10, 15)))


def test_stores_from_before_checksums_verify_as_unverifiable_but_sound(tmp_path, capsys):
    store = str(tmp_path / "old.zarr")
    shutil.copytree(os.path.join(os.path.dirname(__file__), "fixtures", "old-vi.zarr"), store)
    assert main(["verify", store]) == 0
    out = capsys.readouterr().out
    assert "no checksums" in out and out.rstrip().endswith("sound")


def _mount_tmpfs(path: str, size: str) -> str | None:
    """Mount a tmpfs of ``size`` at ``path``; None if done, else why not."""
    os.makedirs(path, exist_ok=True)
    result = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", path], capture_output=True,
                            text=True)
    return None if result.returncode == 0 else (result.stderr.strip() or "mount failed")


def test_disk_full_mid_run_stops_cleanly_and_resumes_bitwise(tmp_path):
    spec = write_spec(tmp_path, members=400, chunk=100, t_end=2.0, checkpoint_every=500, workers=2,
                      variables=("q", "omega", "energy"))
    ensemble.run(spec, stream=open(os.devnull, "w"))  # the reference, on the ordinary disk
    expected = every_array(str(tmp_path / "spec.zarr"))
    mount = str(tmp_path / "small")
    why = _mount_tmpfs(mount, "1m")  # the store holds ~6 MB: full after a few segments
    if why:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but no tmpfs can be mounted: {why}")
        pytest.skip(f"cannot mount a tmpfs here: {why}")
    try:
        store = os.path.join(mount, "run.zarr")
        process = armillary("run", spec, "--store", store)
        out, err = process.communicate(timeout=600)
        assert process.returncode == 1, (out, err)
        assert "No space left on device" in err and "finished segments are kept" in err, err
        assert "Traceback" not in err
        assert not os.path.exists(lock_path(store))
        done = zarr.open_group(store, mode="r")["_progress/done"][:]
        assert np.isfinite(done).sum() < done.size
        subprocess.run(["mount", "-o", "remount,size=64m", mount], check=True)
        process = armillary("run", spec, "--store", store)
        out, err = process.communicate(timeout=600)
        assert process.returncode == 0, err
        assert_same_store(store, expected)
        assert main(["verify", store]) == 0
    finally:
        subprocess.run(["umount", "-l", mount])


COMMANDS = [
    ("systems",), ("status", "{store}"), ("verify", "{store}"), ("check", "{spec}"),
    ("report", "{store}", "--out", "{tmp}/report"), ("submit", "{spec}", "--dry-run"),
]


@pytest.mark.parametrize("command", COMMANDS, ids=[c[0] for c in COMMANDS])
def test_every_command_ends_quietly_when_its_reader_leaves(tmp_path, reference, command):
    spec, store, _ = reference
    args = [arg.format(store=store, spec=spec, tmp=tmp_path) for arg in command]
    process = armillary(*args)
    process.stdout.close()  # the reader is gone before the command writes its first line
    err = process.stderr.read()
    assert process.wait(timeout=300) == 0, err
    assert "Traceback" not in err and "BrokenPipe" not in err, err


def test_a_run_whose_reader_leaves_stops_keeps_its_work_and_resumes(tmp_path, reference):
    spec, _, expected = reference
    store = str(tmp_path / "piped.zarr")
    process = armillary("run", spec, "--store", store)
    process.stdout.close()
    err = process.stderr.read()
    assert process.wait(timeout=300) == 141, err  # as a process killed by SIGPIPE
    assert "Traceback" not in err, err
    assert not os.path.exists(lock_path(store))
    assert main(["run", spec, "--store", store]) == 0
    assert_same_store(store, expected)


def test_a_dry_run_where_no_slurm_controller_answers_prints_the_scripts_and_says_what_it_did_not_check(
        tmp_path, monkeypatch, capsys):
    """The partition of a site file is checked with sinfo; where sinfo cannot reach a controller a dry run still prints the scripts, with one line naming what it
    could not check, and writes nothing; a real submission is refused in one line.  Where SLURM is
    installed, its configuration with the controller's port moved to one nothing listens on; where it is
    not, sinfo is not found."""
    spec = write_spec(tmp_path, **SMALL)
    site = tmp_path / "site.toml"
    site.write_text('partition = "debug"\n')
    installed = "/etc/slurm/slurm.conf"
    if os.path.exists(installed):
        # SLURM's clients retry a refused connection once a second for MessageTimeout seconds (10 by default)
        lines = [line for line in open(installed).read().splitlines()
                 if not line.startswith(("SlurmctldPort=", "MessageTimeout="))]
        (tmp_path / "dead.conf").write_text("\n".join(lines + ["SlurmctldPort=1", "MessageTimeout=1"]) + "\n")
        monkeypatch.setenv("SLURM_CONF", str(tmp_path / "dead.conf"))
    assert main(["submit", spec, "--site", str(site), "--dry-run"]) == 0
    out, err = capsys.readouterr()
    assert "#SBATCH --partition=debug" in out, out
    assert len(err.splitlines()) == 1 and err.startswith("armillary: warning: partition 'debug' not checked: "), err
    assert main(["submit", spec, "--site", str(site)]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and err.startswith("armillary: slurm: "), err
    assert not list(tmp_path.glob("spec.zarr*"))
