"""ensemble/configuration.py: configurations of particles on the unit sphere read from GSD files (HOOMD-blue's, on
a sphere of any radius, and Armillary's own), extended XYZ files and stores; and ensemble/export.py's frames with
particle types, diameters, masses, charges, velocities, bonds and angles, read back exactly."""

import numpy as np
import pytest
import xarray as xr

from armillary.ensemble.configuration import ANGULAR_VELOCITY_LOG, POSITION_LOG, read_configuration
from armillary.ensemble.export import export_gsd, export_xyz
from armillary.kernels import InvalidInput
from armillary.kernels.geometry import tangent_rows

#: particles of the synthetic stores
N = 30
SAMPLES = 3


def unit_vectors(rng, *shape) -> np.ndarray:
    """Random unit vectors (shape..., 3), normalised in float64 (so |q| = 1 to round-off only, as a run's)."""
    points = rng.normal(size=(*shape, 3))
    return points / np.linalg.norm(points, axis=-1, keepdims=True)


def particle_store(members: int = 1, typed: bool = True, last_saved: int = SAMPLES) -> xr.Dataset:
    """A store of (S²)ⁿ particles as an in-memory Dataset: ``members`` members, SAMPLES samples of which the first
    ``last_saved`` are written (the rest NaN); with ``typed``, two particle types, diameters, masses, charges, a
    chain of bonds of two types and its angles of one type."""
    rng = np.random.default_rng(7)
    q = unit_vectors(rng, members, SAMPLES, N)
    omega = tangent_rows(q, rng.normal(size=q.shape))
    q[:, last_saved:] = np.nan
    omega[:, last_saved:] = np.nan
    variables = {"q": (("member", "time", "body", "xyz"), q), "omega": (("member", "time", "body", "xyz"), omega)}
    if typed:
        variables.update(
            particle_type=(("body",), np.arange(N, dtype=np.int32) % 2, {"type_names": ["small", "big"]}),
            diameter=(("body",), 0.1 + 0.05 * (np.arange(N) % 2) + rng.uniform(0, 1e-3, N), {"units": "m"}),
            mass=(("member", "body"), rng.uniform(1, 2, (members, N)), {"units": "kg"}),
            charge=(("body",), rng.normal(size=N)),
            bonds=(("bond", "end"), np.stack([np.arange(N - 1), np.arange(1, N)], axis=1).astype(np.int64)),
            bond_type=(("bond",), np.arange(N - 1, dtype=np.int32) % 2, {"type_names": ["stiff", "soft"]}),
            angles=(("angle", "vertex"), np.stack([np.arange(N - 2), np.arange(1, N - 1), np.arange(2, N)],
                                                  axis=1).astype(np.int64)),
            angle_type=(("angle",), np.zeros(N - 2, dtype=np.int32), {"type_names": ["bend"]}))
    return xr.Dataset(variables, coords={"member": np.arange(members), "time": 0.5 * np.arange(SAMPLES),
                                         "step": ("time", 50 * np.arange(SAMPLES))},
                      attrs={"system": "sphere_lj", "space": "sphere_product"})


def hoomd_frame(positions, velocities=None):
    """A HOOMD-schema frame as the gsd library writes one: two types, diameters and a few bonds."""
    import gsd.hoomd

    frame = gsd.hoomd.Frame()
    frame.particles.N = len(positions)
    frame.particles.position = positions
    frame.particles.types = ["A", "B"]
    frame.particles.typeid = np.arange(len(positions)) % 2
    frame.particles.diameter = np.full(len(positions), 0.5)
    if velocities is not None:
        frame.particles.velocity = velocities
    frame.bonds.N = 2
    frame.bonds.group = [[0, 1], [2, 3]]
    frame.bonds.types = ["spring"]
    frame.bonds.typeid = [0, 0]
    return frame


def write_gsd(path, *frames):
    import gsd.hoomd

    with gsd.hoomd.open(str(path), "w") as trajectory:
        for frame in frames:
            trajectory.append(frame)
    return path


def test_a_hoomd_file_on_a_sphere_of_radius_5_is_read_onto_the_unit_sphere(tmp_path):
    """float32 positions on a sphere of radius 5 (m), velocities tangent to it: unit vectors to round-off, ω = q × v/R
    (so ω × q gives back v/R), diameters scaled by 1/R, types and bonds as written; the last frame by default."""
    rng = np.random.default_rng(1)
    q = unit_vectors(rng, 12)
    omega = tangent_rows(q, rng.normal(size=q.shape))
    path = write_gsd(tmp_path / "hoomd.gsd", hoomd_frame(2.0 * q), hoomd_frame(5.0 * q, 5.0 * np.cross(omega, q)))
    read = read_configuration(path)
    assert read.points.dtype == np.float64 and read.points.shape == (12, 3)
    np.testing.assert_allclose(np.linalg.norm(read.points, axis=1), 1.0, rtol=0, atol=1e-15)
    np.testing.assert_allclose(read.points, q, atol=2e-7)
    np.testing.assert_allclose(read.angular_velocities, omega, atol=1e-6)
    np.testing.assert_allclose(np.sum(read.points * read.angular_velocities, axis=1), 0.0, atol=1e-15)
    assert read.type_names == ("A", "B") and read.type_ids.tolist() == (np.arange(12) % 2).tolist()
    np.testing.assert_allclose(read.diameters, 0.1, rtol=1e-7)  # R: the mean |r_i| of float32 positions
    assert read.masses is None and read.charges is None and read.angles is None
    assert read.bonds.tolist() == [[0, 1], [2, 3]] and read.bond_type_names == ("spring",)
    first = read_configuration(path, frame=0)
    np.testing.assert_allclose(first.points, q, atol=2e-7)
    assert first.angular_velocities is None and read_configuration(path, radius=5.0).diameters[0] == 0.1


def test_positions_off_the_sphere_are_refused_naming_the_worst_particle(tmp_path):
    rng = np.random.default_rng(2)
    positions = 5.0 * unit_vectors(rng, 20)
    positions[13] *= 1 + 3e-5
    positions[4] *= 1 - 1e-5
    path = write_gsd(tmp_path / "off.gsd", hoomd_frame(positions))
    with pytest.raises(InvalidInput) as error:
        read_configuration(path, radius=5.0)
    assert error.value.field == "file" and "particle 13 is off the sphere of radius 5 m" in error.value.message
    assert "3e-05 > tolerance 1e-06" in error.value.message
    assert read_configuration(path, radius=5.0, tolerance=1e-4).points.shape == (20, 3)
    with pytest.raises(InvalidInput, match=r"particle 13 is off the sphere of radius 5\.0000\d* m"):
        read_configuration(path)  # R: the particles' mean |r_i|
    with pytest.raises(InvalidInput, match=r"particle 13 is off the sphere of radius 1 m .* = 4 > tolerance"):
        read_configuration(path, radius=1.0)


@pytest.mark.parametrize("typed", [True, False])
def test_export_gsd_fields_and_the_round_trip(tmp_path, typed):
    """The GSD fields as the gsd library reads them, and read_configuration giving back the store's q and ω bitwise
    and its types, bonds and angles exactly (every exported frame is a saved sample)."""
    import gsd.hoomd

    ds = particle_store(typed=typed)
    q, omega = ds.q.values[0], ds.omega.values[0]
    path = tmp_path / "typed.gsd"
    assert export_gsd(ds, path).frames == SAMPLES
    with gsd.hoomd.open(str(path), "r") as trajectory:
        frame = trajectory[1]
        assert frame.particles.position.dtype == np.float32 and frame.log[POSITION_LOG].dtype == np.float64
        np.testing.assert_array_equal(frame.log[POSITION_LOG], q[1])
        np.testing.assert_array_equal(frame.log[ANGULAR_VELOCITY_LOG], omega[1])
        np.testing.assert_allclose(frame.particles.velocity, np.cross(omega[1], q[1]), rtol=1e-6, atol=1e-6)
        if typed:
            assert frame.particles.types == ["small", "big"]
            np.testing.assert_array_equal(frame.particles.typeid, ds.particle_type.values)
            np.testing.assert_allclose(frame.particles.diameter, ds.diameter.values, rtol=1e-7)
            np.testing.assert_allclose(frame.particles.mass, ds.mass.values[0], rtol=1e-7)
            np.testing.assert_allclose(frame.particles.charge, ds.charge.values, rtol=1e-7)
            assert frame.bonds.N == N - 1 and frame.bonds.types == ["stiff", "soft"]
            np.testing.assert_array_equal(frame.bonds.group, ds.bonds.values)
            np.testing.assert_array_equal(frame.bonds.typeid, ds.bond_type.values)
            assert frame.angles.N == N - 2 and frame.angles.types == ["bend"]
            np.testing.assert_array_equal(frame.angles.group, ds.angles.values)
        else:
            assert frame.particles.types == ["A"] and np.all(frame.particles.typeid == 0)
            assert frame.bonds.N == 0 and frame.angles.N == 0
            assert not trajectory.file.chunk_exists(frame=0, name="particles/diameter")
    for index in range(SAMPLES):
        read = read_configuration(path, frame=index)
        assert np.array_equal(read.points, q[index]) and np.array_equal(read.angular_velocities, omega[index])
    if typed:
        assert read.type_names == ("small", "big") and np.array_equal(read.type_ids, ds.particle_type.values)
        assert np.array_equal(read.bonds, ds.bonds.values) and read.bond_type_names == ("stiff", "soft")
        assert np.array_equal(read.bond_type_ids, ds.bond_type.values)
        assert np.array_equal(read.angles, ds.angles.values) and read.angle_type_names == ("bend",)
        np.testing.assert_allclose(read.diameters, ds.diameter.values, rtol=1e-7)
    else:
        assert read.type_names == ("A",) and read.diameters is None and read.bonds is None


def test_export_xyz_round_trip_of_positions_types_and_per_particle_columns(tmp_path):
    ds = particle_store()
    path = tmp_path / "typed.xyz"
    export_xyz(ds, path)
    lines = path.read_text().splitlines()
    assert "Properties=species:S:1:pos:R:3:id:I:1:coordination:I:1:radius:R:1:mass:R:1:charge:R:1 " in lines[1]
    assert lines[1].endswith(' type_names="small big"') and lines[2].split()[0] == "small"
    for index in range(SAMPLES):
        read = read_configuration(path, frame=index)
        assert np.array_equal(read.points, ds.q.values[0, index])
        assert read.type_names == ("small", "big") and np.array_equal(read.type_ids, ds.particle_type.values)
        assert np.array_equal(read.diameters, ds.diameter.values) and np.array_equal(read.masses, ds.mass.values[0])
        assert np.array_equal(read.charges, ds.charge.values)
        assert read.angular_velocities is None and read.bonds is None


def test_a_plain_xyz_file_with_velocities_on_a_sphere_of_radius_2(tmp_path):
    rng = np.random.default_rng(3)
    q = unit_vectors(rng, 8)
    omega = tangent_rows(q, rng.normal(size=q.shape))
    species = ["Ar", "Ne"] * 4
    rows = [f"{s} " + " ".join(f"{value:.17g}" for value in (*(2.0 * p), *(2.0 * np.cross(w, p))))
            for s, p, w in zip(species, q, omega)]
    path = tmp_path / "ase.xyz"
    path.write_text(f"8\nProperties=species:S:1:pos:R:3:velo:R:3 energy=-1.5\n" + "\n".join(rows) + "\n")
    read = read_configuration(path)
    np.testing.assert_allclose(read.points, q, rtol=0, atol=1e-15)
    np.testing.assert_allclose(read.angular_velocities, omega, rtol=0, atol=1e-14)
    assert read.type_names == ("Ar", "Ne") and read.type_ids.tolist() == [0, 1] * 4
    (tmp_path / "plain.xyz").write_text("2\ntwo atoms\nH 0 0 3\nH 3 0 0\n")
    assert read_configuration(tmp_path / "plain.xyz").points.tolist() == [[0, 0, 1], [1, 0, 0]]


def test_a_store_read_at_its_last_saved_sample_and_a_chosen_member(tmp_path):
    """A store (a Zarr folder) whose last sample is not yet written: frame −1 is the last saved one, frame 0 the
    first; a per-member mass is the member's row."""
    ds = particle_store(members=2, last_saved=2)
    ds.to_zarr(tmp_path / "run.zarr")
    read = read_configuration(tmp_path / "run.zarr", member=1)
    assert np.array_equal(read.points, ds.q.values[1, 1]) and np.array_equal(read.angular_velocities,
                                                                               ds.omega.values[1, 1])
    assert np.array_equal(read.masses, ds.mass.values[1]) and read.type_names == ("small", "big")
    assert np.array_equal(read.bonds, ds.bonds.values) and read.angle_type_names == ("bend",)
    assert np.array_equal(read_configuration(tmp_path / "run.zarr", frame=0).points, ds.q.values[0, 0])
    with pytest.raises(InvalidInput) as error:
        read_configuration(tmp_path / "run.zarr", frame=2)
    assert error.value.field == "file.frame" and "2 saved samples" in error.value.message
    with pytest.raises(InvalidInput) as error:
        read_configuration(tmp_path / "run.zarr", member=2)
    assert error.value.field == "file.member"


def bad_files(tmp_path):
    """(path, keyword arguments, field, words of the message) of refused input."""
    rng = np.random.default_rng(4)
    nan = 5.0 * unit_vectors(rng, 6)
    nan[3, 1] = np.nan
    write_gsd(tmp_path / "nan.gsd", hoomd_frame(nan))
    write_gsd(tmp_path / "ok.gsd", hoomd_frame(unit_vectors(rng, 6)))
    write_gsd(tmp_path / "empty.gsd", hoomd_frame(np.zeros((0, 3))))
    (tmp_path / "text.gsd").write_text("not a gsd file\n")
    (tmp_path / "short.xyz").write_text("3\ncomment\nA 1 0 0\n")
    (tmp_path / "binary.dat").write_bytes(b"\xff\xfe\x00garbage")
    (tmp_path / "folder").mkdir()
    return [("missing.gsd", {}, "file", "does not exist"),
            ("nan.gsd", {}, "file", "particle 3 of frame 0 has a non-finite position"),
            ("empty.gsd", {}, "file.frame", "frame 0 holds no particles"),
            ("ok.gsd", {"frame": 1}, "file.frame", "has 1 frames"),
            ("ok.gsd", {"radius": -1.0}, "file.radius", "finite number > 0"),
            ("ok.gsd", {"tolerance": 2}, "file.tolerance", "0 ≤ tolerance < 1"),
            ("text.gsd", {}, "file", "neither a GSD file nor XYZ text"),
            ("short.xyz", {}, "file", "cut short"),
            ("binary.dat", {}, "file", "neither a GSD file nor XYZ text"),
            ("folder", {}, "file", "not an Armillary store")]


def test_bad_input_is_one_line_naming_the_field(tmp_path):
    for name, arguments, field, words in bad_files(tmp_path):
        with pytest.raises(InvalidInput) as error:
            read_configuration(tmp_path / name, **arguments)
        assert error.value.field == field and words in error.value.message, (name, str(error.value))
        assert "\n" not in str(error.value)


def test_type_names_that_extended_xyz_cannot_hold_are_refused_with_nothing_written(tmp_path):
    ds = particle_store()
    ds.particle_type.attrs["type_names"] = ["small one", "big"]
    with pytest.raises(InvalidInput) as error:
        export_xyz(ds, tmp_path / "bad.xyz")
    assert error.value.field == "store" and "'small one'" in error.value.message
    assert list(tmp_path.iterdir()) == []
