"""``armillary export`` and ensemble/export.py: one member's saved frames as GSD and extended XYZ files, read back
against the store (positions, steps, Voronoi coordination), and bad input refused with nothing written."""

import io

import numpy as np
import pytest

from armillary.jobs.cli import BAD_INPUT, SUCCESS, main

from test_md import md_spec

#: 200 Lennard-Jones particles at areal density 0.8, one member, 20 steps saved every 5 (test_md's spec)
N = 200


def run_store(directory, name, variables):
    from armillary import ensemble

    return ensemble.run(md_spec(directory, variables=variables, particles=N, steps=20, name=name),
                        stream=io.StringIO())


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """A store that kept q, ω and the energy, and one that kept only the energy (the same kernel)."""
    directory = tmp_path_factory.mktemp("export")
    full = run_store(directory, "md.zarr", '["q", "omega", "energy"]')
    run_store(directory, "energy.zarr", '["energy"]')
    return directory, full


def test_gsd_frames_hold_the_stored_positions_steps_and_coordination(stores, capsys):
    import gsd.hoomd

    directory, ds = stores
    assert main(["export", str(directory / "md.zarr")]) == SUCCESS
    path = directory / "md.gsd"
    q, steps = ds.q.isel(member=0).values, ds.step.values
    assert len(steps) == 5
    assert capsys.readouterr().out.strip() == (f"armillary: wrote 5 frames of {N} particles (member 0, every saved "
                                               f"sample) to {path} (gsd)")
    with gsd.hoomd.open(str(path), "r") as trajectory:
        assert len(trajectory) == 5
        for index, frame in enumerate(trajectory):
            assert frame.particles.N == N and frame.configuration.step == steps[index]
            assert frame.particles.types == ["A"] and np.all(frame.particles.typeid == 0)
            np.testing.assert_allclose(frame.configuration.box, [2.2, 2.2, 2.2, 0, 0, 0], rtol=1e-7)
            np.testing.assert_allclose(frame.particles.position, q[index], rtol=1e-7, atol=1e-7)
            z = frame.log["particles/coordination"]
            assert z.shape == (N,) and z.sum() == 6 * N - 12 and set(np.unique(z)) <= set(range(3, 10))
    assert not list(directory.glob(".*.part"))


def test_xyz_frames_every_second_sample(stores):
    directory, ds = stores
    path = directory / "frames.xyz"
    assert main(["export", str(directory / "md.zarr"), "--output", str(path), "--every", "2"]) == SUCCESS
    q, steps, times = ds.q.isel(member=0).values, ds.step.values, ds.time.values
    lines = path.read_text().splitlines()
    assert len(lines) == 3 * (N + 2)
    for frame, index in enumerate((0, 2, 4)):
        block = lines[frame * (N + 2):(frame + 1) * (N + 2)]
        assert block[0] == str(N)
        assert block[1].startswith('Lattice="2.2 0 0 0 2.2 0 0 0 2.2" ')
        assert "Properties=species:S:1:pos:R:3:id:I:1:coordination:I:1" in block[1]
        assert f"Step={steps[index]}" in block[1] and f"Time={float(times[index])!r}" in block[1]
        rows = [line.split() for line in block[2:]]
        assert {row[0] for row in rows} == {"A"}
        np.testing.assert_array_equal(np.array([row[1:4] for row in rows], dtype=float), q[index])
        np.testing.assert_array_equal([int(row[4]) for row in rows], np.arange(N))
        assert sum(int(row[5]) for row in rows) == 6 * N - 12


def test_format_from_the_output_suffix_and_the_python_functions_agree(stores, tmp_path):
    from armillary.ensemble.export import export_xyz

    directory, ds = stores
    assert main(["export", str(directory / "md.zarr"), "--output", str(tmp_path / "cli.xyz")]) == SUCCESS
    done = export_xyz(ds, tmp_path / "api.xyz")
    assert (done.frames, done.particles, done.skipped) == (5, N, 0)
    assert (tmp_path / "cli.xyz").read_text() == (tmp_path / "api.xyz").read_text()


@pytest.mark.parametrize("arguments, field", [
    (["energy.zarr"], "output.variables"),
    (["md.zarr", "--member", "1"], "member"),
    (["md.zarr", "--member", "-1"], "member"),
    (["md.zarr", "--every", "0"], "every"),
    (["missing.zarr"], "store"),
])
def test_bad_input_exits_2_and_writes_nothing(stores, tmp_path, capsys, arguments, field):
    directory, _ = stores
    output = tmp_path / "out.gsd"
    assert main(["export", str(directory / arguments[0]), "--output", str(output), *arguments[1:]]) == BAD_INPUT
    error = capsys.readouterr().err
    assert error.startswith(f"armillary: {field}: ") and error.count("\n") == 1, error
    if field == "output.variables":
        assert 'add "q" to [output] variables' in error
    assert list(tmp_path.iterdir()) == []
    assert not (directory / "energy.gsd").exists() and not (directory / "missing.gsd").exists()


def test_a_failure_while_writing_leaves_nothing(stores, tmp_path, monkeypatch):
    """An error after some frames are written (here the second frame's tessellation) removes the partial file."""
    from armillary.ensemble import export

    directory, ds = stores
    calls = []

    def failing(points):
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("disk full")
        return np.full(len(points), 6, dtype=np.int32)

    monkeypatch.setattr(export, "coordination", failing)
    for writer, name in ((export.export_gsd, "out.gsd"), (export.export_xyz, "out.xyz")):
        calls.clear()
        with pytest.raises(RuntimeError, match="disk full"):
            writer(ds, tmp_path / name)
    assert list(tmp_path.iterdir()) == []


def test_a_store_of_another_space_is_refused():
    """A store whose space declares no particle positions (SO(3), here as an in-memory Dataset) names ``store``."""
    import xarray as xr

    from armillary.ensemble.export import export_gsd
    from armillary.kernels import InvalidInput

    ds = xr.Dataset({"R": (("member", "time", "row", "col"), np.zeros((1, 2, 3, 3)))},
                    coords={"member": [0], "time": [0.0, 1.0]}, attrs={"system": "heavy_top", "space": "rotation"})
    with pytest.raises(InvalidInput) as error:
        export_gsd(ds, "never.gsd")
    assert error.value.field == "store" and "has no particles on spheres" in error.value.message


def test_coordination_of_an_icosphere_and_of_a_few_particles(tmp_path):
    """The coordination of a level-2 icosphere: 12 five-fold vertices, the rest six-fold; below 4 particles the
    frames carry none."""
    import xarray as xr

    from armillary.ensemble.export import coordination, export_xyz
    from armillary.kernels.geometry import icosphere

    q, _ = icosphere(2)
    z = coordination(q)
    assert np.sum(z == 5) == 12 and np.all(z[z != 5] == 6)
    three = np.eye(3)[None, None]
    ds = xr.Dataset({"q": (("member", "time", "body", "xyz"), three), "omega": (("member", "time", "body", "xyz"),
                                                                               np.zeros_like(three))},
                    coords={"member": [0], "time": [0.0], "step": ("time", [0])},
                    attrs={"system": "sphere_lj", "space": "sphere_product"})
    export_xyz(ds, tmp_path / "three.xyz")
    lines = (tmp_path / "three.xyz").read_text().splitlines()
    assert "Properties=species:S:1:pos:R:3:id:I:1 " in lines[1] and lines[2].split() == ["A", "1.0", "0.0", "0.0", "0"]


def test_a_member_with_no_finite_sample_is_refused_and_unwritten_samples_are_skipped(tmp_path):
    """Samples whose positions are NaN (not yet run, or after a member failed) are left out and counted; a member
    with none left is refused naming ``member``, with nothing written."""
    import xarray as xr

    from armillary.ensemble.export import export_gsd
    from armillary.kernels import InvalidInput
    from armillary.kernels.geometry import icosphere

    q = np.repeat(icosphere(1)[0][None, None], 3, axis=1)
    q[0, 2] = np.nan
    ds = xr.Dataset({"q": (("member", "time", "body", "xyz"), np.concatenate([q, np.full_like(q, np.nan)])),
                     "omega": (("member", "time", "body", "xyz"), np.zeros((2,) + q.shape[1:]))},
                    coords={"member": [0, 1], "time": [0.0, 1.0, 2.0], "step": ("time", [0, 10, 20])},
                    attrs={"system": "sphere_lj", "space": "sphere_product"})
    done = export_gsd(ds, tmp_path / "a.gsd")
    assert (done.frames, done.particles, done.skipped) == (2, 42, 1)
    with pytest.raises(InvalidInput) as error:
        export_gsd(ds, tmp_path / "b.gsd", member=1)
    assert error.value.field == "member"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["a.gsd"]


def test_export_ends_quietly_when_its_reader_leaves(stores, tmp_path):
    import subprocess
    import sys

    directory, _ = stores
    process = subprocess.Popen([sys.executable, "-m", "armillary.jobs.cli", "export", str(directory / "md.zarr"),
                                "--output", str(tmp_path / "piped.xyz")], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    process.stdout.close()
    err = process.stderr.read()
    assert process.wait(timeout=120) == SUCCESS, err
    assert "Traceback" not in err and (tmp_path / "piped.xyz").exists()
