"""FIRE minimisation on (S²)ⁿ (kernels/integrators/fire.py): the Thomson problem's putative ground states from
random starts, ‖q_i‖ = 1 at every step, the step limit's status and bitwise restarts.

The oracles are Wales, McKay & Altschuler, Phys. Rev. B 79, 224115 (2009) (the Cambridge Cluster Database's
Thomson table): E = Σ_{i<j} 1/r_ij of N unit charges on the unit sphere."""

import numpy as np
import pytest

from armillary.ensemble.particles import voronoi_order
from armillary.kernels import get_system, integrate
from armillary.kernels.status import NOT_CONVERGED, OK

pytestmark = pytest.mark.xdist_group("fire")  # one worker compiles the fire kernel of sphere_riesz once

#: putative global minima of the Thomson problem (Wales et al. 2009), N → E
THOMSON = {12: 49.165253058, 32: 412.261274651, 100: 4448.350634331}


def random_starts(n: int, members: int, seed: int) -> dict:
    """Members at rest, each q_i uniform on S² (normalised Gaussians)."""
    q = np.random.default_rng(seed).normal(size=(members, n, 3))
    return {"q": q / np.linalg.norm(q, axis=-1, keepdims=True), "omega": np.zeros((members, n, 3))}


@pytest.fixture(scope="module")
def coulomb():
    return get_system("sphere_riesz", s=1.0)


@pytest.mark.parametrize("n, members, dt, steps", [(12, 6, 0.01, 1000), (32, 6, 0.005, 1500), (100, 16, 0.002, 3000)])
def test_lowest_energy_of_an_ensemble_is_the_putative_thomson_minimum(coulomb, n, members, dt, steps):
    """The lowest energy the ensemble finds equals the published one to 1e-9 relative (the table's 9 decimals
    are 2e-12 of E at N = 100; a force of 1e-9 leaves an energy error of order |F|²/k, far below it)."""
    run = integrate(coulomb, "fire", random_starts(n, members, seed=n), dt, steps, steps, force_tolerance=1e-9)
    assert np.all(run.status == OK), run.status
    assert np.all(run.largest_force[:, -1] <= 1e-9)
    lowest = np.min(run.energy[:, -1])
    assert abs(lowest - THOMSON[n]) <= 1e-9 * THOMSON[n], (lowest, THOMSON[n])
    if n == 12:  # the icosahedron: every site 5-fold
        best = run.q_final[np.argmin(run.energy[:, -1])]
        assert np.all(voronoi_order(best).coordination == 5)


def test_every_step_keeps_each_charge_on_the_sphere(coulomb):
    """‖q_i‖ − 1 within 1e-14 at every one of 400 steps (each move is a geodesic, then renormalised)."""
    run = integrate(coulomb, "fire", random_starts(32, 2, seed=5), 0.005, 400, 1, force_tolerance=1e-12)
    assert run.q.shape[1] == 401
    assert np.max(np.abs(np.linalg.norm(run.q, axis=-1) - 1.0)) <= 1e-14
    assert np.max(run.unit_error) <= 1e-14
    assert np.all(np.diff(run.energy[:, -50:], axis=1) <= 1e-9)  # descending near the end (V alone is recorded)


def test_a_member_that_reaches_its_step_limit_says_so_and_keeps_its_state(coulomb):
    """max_steps = 40 stops an unconverged minimisation: status NOT_CONVERGED at step 40, its last state and
    samples finite and equal to those of an unlimited run up to there; a converged member stays OK."""
    start = random_starts(32, 2, seed=9)
    limited = integrate(coulomb, "fire", start, 0.005, 60, 10, max_steps=40)
    free = integrate(coulomb, "fire", start, 0.005, 60, 10)
    assert np.all(limited.status == NOT_CONVERGED) and np.all(limited.failed_step == 40)
    assert np.all(limited.carry["fire_steps"] == 40) and np.all(limited.solver_iterations == 40)
    assert np.all(np.isfinite(limited.energy)) and np.all(np.isfinite(limited.q_final))
    np.testing.assert_array_equal(limited.q[:, :5], free.q[:, :5])  # samples 0 … 40 are the same steps
    np.testing.assert_array_equal(limited.q[:, 5], limited.q[:, 4])  # then it stays where it stopped
    assert np.all(free.status == NOT_CONVERGED) and np.all(free.failed_step == 60)  # its limit: the call's end
    converged = integrate(coulomb, "fire", random_starts(12, 1, seed=2), 0.01, 2000, 2000, max_steps=2000)
    assert converged.status[0] == OK and converged.carry["fire_converged"][0] == 1.0
    assert converged.carry["fire_steps"][0] < 2000


def test_a_minimisation_continued_in_segments_is_bitwise_the_uninterrupted_one(coulomb):
    """300 steps, or 130 then 170 with FIRE's state carried (its Δt, α, downhill count, steps, V): same bits,
    also with the energy criterion (which compares V with the carried V of the step before)."""
    start = random_starts(32, 3, seed=11)
    for options in ({}, {"energy_tolerance": 1e-13}):
        whole = integrate(coulomb, "fire", start, 0.005, 300, 10, force_tolerance=1e-10, max_steps=300, **options)
        first = integrate(coulomb, "fire", start, 0.005, 130, 10, force_tolerance=1e-10, max_steps=300, **options)
        second = integrate(coulomb, "fire", first.final, 0.005, 170, 10, force_tolerance=1e-10, max_steps=300,
                           restart=True, carry=first.carry, start_step=130, **options)
        np.testing.assert_array_equal(second.q_final, whole.q_final)
        np.testing.assert_array_equal(second.omega_final, whole.omega_final)
        for name in whole.carry:
            np.testing.assert_array_equal(second.carry[name], whole.carry[name])
        np.testing.assert_array_equal(second.energy[:, -1], whole.energy[:, -1])
        np.testing.assert_array_equal(second.status, whole.status)


@pytest.mark.parametrize("options, field", [({"force_tolerance": 0.0}, "force_tolerance"),
                                            ({"force_tolerance": -1e-8}, "force_tolerance"),
                                            ({"energy_tolerance": 0.0}, "energy_tolerance"),
                                            ({"max_steps": 0}, "max_steps"),
                                            ({"max_step": 1e-4}, "max_step")])
def test_bad_fire_options_are_refused_naming_the_option(coulomb, options, field):
    from armillary.kernels import InvalidInput

    with pytest.raises(InvalidInput) as raised:
        integrate(coulomb, "fire", random_starts(12, 1, seed=0), 0.01, 10, 10, **options)
    assert raised.value.field == field


THOMSON_SPEC = """
[system]
name = "sphere_riesz"
params = {{ s = {s} }}

[integrator]
method = "fire"
dt = 0.01
t_end = 12.0
save_every = 100
checkpoint_every = {checkpoint_every}
force_tolerance = {force_tolerance}
{extra}
[ensemble]
members = {members}
initial = "uniform"
bodies = {bodies}
omega_scale = 0.0
seed = 4
chunk = 4

[output]
store = "{store}"
variables = ["q", "energy", "unit_error"]

[cluster]
kind = "local"
workers = 1
"""


def thomson_spec(directory, name, s=1.0, checkpoint_every=1200, force_tolerance=1e-9, members=8, bodies=12, extra=""):
    path = directory / f"{name}.toml"
    path.write_text(THOMSON_SPEC.format(s=s, checkpoint_every=checkpoint_every, force_tolerance=force_tolerance,
                                        members=members, bodies=bodies, extra=extra, store=directory / f"{name}.zarr"))
    return str(path)


def test_an_ensemble_of_minimisations_is_stored_reported_and_its_best_member_exported(tmp_path):
    """12 charges, 8 random starts in 2 chunks, run in 3 segments and in 1: the same bits (FIRE's state crosses
    the checkpoints); the store keeps each member's steps and largest force; `report` lists the icosahedron as the
    lowest minimum with its 12 five-fold sites; `export --member best` writes that member's frames to GSD, read back
    by the gsd library."""
    import io

    import gsd.hoomd
    import zarr

    from armillary import ensemble
    from armillary.ensemble.accessor import open_store
    from armillary.ensemble.minima import best_member, distinct_minima
    from armillary.ensemble.report import write_report
    from ensemble_cases import armillary, arrays, assert_bitwise_equal

    whole, segmented = thomson_spec(tmp_path, "whole"), thomson_spec(tmp_path, "segmented", checkpoint_every=400)
    for spec in (whole, segmented):
        ensemble.run(spec, stream=io.StringIO())
    names = ("q", "energy", "largest_force", "minimisation_steps", "status", "failed_step")
    assert_bitwise_equal(arrays(str(tmp_path / "whole.zarr"), names), arrays(str(tmp_path / "segmented.zarr"), names))
    group = zarr.open_group(str(tmp_path / "segmented.zarr"), mode="r")
    assert np.all(group["status"][:] == OK) and np.all(group["largest_force"][:, -1] <= 1e-9)
    assert np.all((group["minimisation_steps"][:] > 100) & (group["minimisation_steps"][:] < 1200))

    ds = open_store(str(tmp_path / "segmented.zarr"))
    minima = distinct_minima(ds)
    assert abs(minima[0].energy - THOMSON[12]) <= 1e-9 * THOMSON[12] and minima[0].members.size == 8
    # every site of the icosahedron is a defect and each touches five others: one cluster of twelve
    assert minima[0].defects == {"z5": 12, "z7": 0, "other": 0} and minima[0].cluster_sizes == (12,)
    table, _ = write_report([str(tmp_path / "segmented.zarr")], str(tmp_path / "report"))
    assert "49.165253058" in table and "49.165253058" in (tmp_path / "report" / "report.md").read_text()

    best = best_member(ds)
    child = armillary("export", str(tmp_path / "segmented.zarr"), "--member", "best", "--output",
                      str(tmp_path / "best.gsd"))
    out, err = child.communicate(timeout=120)
    assert child.returncode == 0, err
    assert f"member {best}" in out
    with gsd.hoomd.open(str(tmp_path / "best.gsd"), "r") as frames:
        last = frames[len(frames) - 1]
        np.testing.assert_array_equal(last.particles.position,
                                      ds.q.isel(member=best, time=-1).values.astype(np.float32))


@pytest.mark.parametrize("change, field", [({"s": -1.0}, "system.params.s"),
                                           ({"force_tolerance": 0.0}, "integrator.force_tolerance"),
                                           ({"extra": "energy_tolerance = -1e-12"}, "integrator.energy_tolerance"),
                                           # a neighbour list's skin where every pair is summed (the system mode)
                                           ({"extra": "skin = 0.1", "members": 1, "bodies": 1000}, "integrator.skin")])
def test_bad_minimisation_specs_exit_2_with_one_line_and_write_nothing(tmp_path, change, field):
    from ensemble_cases import armillary

    spec = thomson_spec(tmp_path, "bad", **change)
    child = armillary("run", spec)
    out, err = child.communicate(timeout=120)
    assert child.returncode == 2
    assert len(err.strip().splitlines()) == 1 and field in err, err
    assert not (tmp_path / "bad.zarr").exists()


def test_fire_finds_a_short_ranged_crystals_ground_state():
    """42 Lennard-Jones particles (cutoff 2.5σ, σ at zero force on the icosphere's mean bond): the level-1
    icosphere itself is a stationary point (its forces cancel by symmetry to 5e-14), not the ground state.  Four
    copies shaken by 0.05 rad all descend below it onto one minimum (to 1e-9 relative), each member's largest force
    below 1e-10: the short-ranged pair term through the same path as the charges'."""
    from armillary.kernels.geometry import icosphere, mesh_edges
    from armillary.kernels.systems.sphere_lj import zero_force_sigma

    q0, faces = icosphere(1)
    sigma = zero_force_sigma(q0, mesh_edges(faces))
    system = get_system("sphere_lj", epsilon=1.0, sigma=sigma, cutoff=2.5 * sigma)
    shaken = q0 + 0.05 * np.random.default_rng(1).normal(size=(4, 42, 3))
    shaken /= np.linalg.norm(shaken, axis=-1, keepdims=True)
    start = {"q": np.concatenate([q0[None], shaken]), "omega": np.zeros((5, 42, 3))}
    run = integrate(system, "fire", start, 0.001, 5000, 5000, force_tolerance=1e-10)
    assert np.all(run.status == OK) and np.all(run.largest_force[:, -1] <= 1e-10)
    assert run.carry["fire_steps"][0] == 1  # at rest on a stationary point: converged after its first step
    np.testing.assert_allclose(run.energy[2:, -1], run.energy[1, -1], rtol=1e-9)
    assert run.energy[1, -1] < run.energy[0, -1] - 1.0


def test_the_system_mode_minimises_as_the_ensemble_mode_and_restarts_bit_for_bit(coulomb):
    """100 charges in the system mode (all pairs on every core, the sums over fixed chunks): the same FIRE steps and
    minimum as the ensemble kernel (their gradients' sums in other orders: V within 1e-11 relative at every
    sample), ‖q_i‖ − 1 within 1e-14 at every step, and 300 steps cut at 170 equal to the uninterrupted run bit for
    bit (with the energy criterion, whose V is carried)."""
    start = random_starts(100, 1, seed=1)
    ensemble_run = integrate(coulomb, "fire", start, 0.002, 3000, 100, force_tolerance=1e-9)
    system_run = integrate(coulomb, "fire", start, 0.002, 3000, 100, force_tolerance=1e-9, mode="system")
    assert system_run.mode == "system" and ensemble_run.mode == "ensemble"
    assert system_run.status[0] == ensemble_run.status[0] == OK
    assert system_run.carry["fire_steps"][0] == ensemble_run.carry["fire_steps"][0]
    np.testing.assert_allclose(system_run.energy, ensemble_run.energy, rtol=1e-11)
    every = integrate(coulomb, "fire", start, 0.002, 200, 1, mode="system")
    assert np.max(np.abs(np.linalg.norm(every.q, axis=-1) - 1.0)) <= 1e-14
    options = dict(force_tolerance=1e-12, energy_tolerance=1e-16, max_steps=300, mode="system")
    whole = integrate(coulomb, "fire", start, 0.002, 300, 10, **options)
    first = integrate(coulomb, "fire", start, 0.002, 170, 10, **options)
    second = integrate(coulomb, "fire", first.final, 0.002, 130, 10, restart=True, carry=first.carry, start_step=170,
                       **options)
    for name in ("q", "omega"):
        np.testing.assert_array_equal(second.final[name], whole.final[name])
    for name in whole.carry:
        np.testing.assert_array_equal(second.carry[name], whole.carry[name])
    np.testing.assert_array_equal(second.energy, whole.energy[:, 17:])


@pytest.fixture(scope="module")
def lennard_jones_crystal():
    """2000 Lennard-Jones particles at ρ* = nσ²/4π = 0.8 (cutoff 2.5σ) and their start: the Fibonacci lattice
    shaken by 0.02σ, at rest."""
    from armillary.kernels.geometry import fibonacci_sphere

    n = 2000
    sigma = (0.8 * 4 * np.pi / n) ** 0.5
    system = get_system("sphere_lj", epsilon=1.0, sigma=sigma, cutoff=2.5 * sigma)
    q = fibonacci_sphere(n) + 0.02 * sigma * np.random.default_rng(3).normal(size=(n, 3))
    return system, sigma, {"q": (q / np.linalg.norm(q, axis=-1, keepdims=True))[None], "omega": np.zeros((1, n, 3))}


def test_the_system_mode_on_neighbour_lists_minimises_as_the_ensemble_mode(lennard_jones_crystal):
    """2000 LJ particles with a cutoff in the system mode (half Verlet lists, rebuilt as particles move, skin
    "auto"): the first 400 steps from the shaken lattice (forces 700 → 10, the lists rebuilt tens of times) follow
    the ensemble kernel's (every pair, the same terms summed in another order: V within 1e-12 relative at every
    sample; they stay within 1e-13), the same bits on 1 and 2 threads.  From the start relaxed to forces ≤ 0.3 on
    the lists, both modes reach the same minimum (forces ≤ 0.03) in the same number of steps, V within 1e-11 relative
    at every sample (the bound of the all-pairs comparison above: the gradients' round-off, grown over the steps;
    1e-14 here, 3e-12 over 1000 steps from a less relaxed start)."""
    system, sigma, start = lennard_jones_crystal
    dt = 0.005 * sigma
    lists = integrate(system, "fire", start, dt, 400, 50, mode="system", threads=2)
    assert lists.mode == "system" and lists.status[0] == NOT_CONVERGED and lists.neighbour_rebuilds[0] > 10
    serial = integrate(system, "fire", start, dt, 400, 50, mode="system", threads=1)
    for name in ("q", "omega"):
        np.testing.assert_array_equal(serial.final[name], lists.final[name])
    np.testing.assert_array_equal(serial.energy, lists.energy)
    np.testing.assert_array_equal(serial.neighbour_rebuilds, lists.neighbour_rebuilds)
    pairs = integrate(system, "fire", start, dt, 400, 50, mode="ensemble")
    np.testing.assert_allclose(lists.energy, pairs.energy, rtol=1e-12)
    np.testing.assert_allclose(lists.largest_force, pairs.largest_force, rtol=1e-9)
    relaxed = integrate(system, "fire", start, dt, 5000, 5000, mode="system", force_tolerance=0.3)
    assert relaxed.status[0] == OK and relaxed.neighbour_rebuilds[0] > 10
    minima = [integrate(system, "fire", relaxed.final, dt, 1000, 50, force_tolerance=0.03, mode=mode)
              for mode in ("system", "ensemble")]
    assert all(run.status[0] == OK and run.largest_force[0, -1] <= 0.03 for run in minima)
    assert minima[0].carry["fire_steps"][0] == minima[1].carry["fire_steps"][0]
    np.testing.assert_allclose(minima[0].energy, minima[1].energy, rtol=1e-11)


def test_a_minimisation_on_lists_continued_at_a_build_is_bitwise_the_uninterrupted_one(lennard_jones_crystal):
    """Each call builds its list at its start: continued from a step at which the uninterrupted run rebuilt its list
    (a numeric skin, 0.05σ), 500 steps of 2000 LJ particles in two calls are the uninterrupted ones bit for bit (the
    same list, storage order and sums); continued from a step between builds, the gradients add the same terms in
    another order, and the end state follows to round-off grown over 300 steps of the steep first descent (V within
    1e-10 relative; 1.6e-11 here)."""
    system, sigma, start = lennard_jones_crystal
    dt, skin = 0.005 * sigma, 0.05 * sigma

    def minimise(state, steps, **more):
        return integrate(system, "fire", state, dt, steps, steps, mode="system", skin=skin, **more)

    whole = minimise(start, 500)
    builds = [minimise(start, cut).neighbour_rebuilds[0] for cut in range(200, 216)]
    at_build = 201 + next(k for k in range(15) if builds[k + 1] > builds[k])
    between = 201 + next(k for k in range(15) if builds[k + 1] == builds[k])
    for cut in (at_build, between):
        first = minimise(start, cut)
        second = minimise(first.final, 500 - cut, restart=True, carry=first.carry, start_step=cut)
        if cut == at_build:
            for name in ("q", "omega"):
                np.testing.assert_array_equal(second.final[name], whole.final[name])
            for name in whole.carry:
                np.testing.assert_array_equal(second.carry[name], whole.carry[name])
        else:
            assert not np.array_equal(second.final["q"], whole.final["q"])
            np.testing.assert_allclose(second.energy[:, -1], whole.energy[:, -1], rtol=1e-10)


def test_a_large_minimisation_with_a_cutoff_takes_the_system_mode_and_the_gpu_refuses_it(lennard_jones_crystal):
    """One member of 2000 LJ particles with a cutoff minimises in the system mode on lists unless told otherwise (as
    the dynamics choose it); the GPU's system mode sums every pair, so it refuses such a member in one line naming
    ``device`` when the run is checked, before anything is compiled or copied (here, before the missing GPU)."""
    from armillary.kernels.errors import InvalidInput

    system, sigma, start = lennard_jones_crystal
    chosen = integrate(system, "fire", start, 0.005 * sigma, 2, 1)
    assert chosen.mode == "system" and chosen.neighbour_rebuilds[0] >= 1
    with pytest.raises(InvalidInput) as raised:
        integrate(system, "fire", start, 0.005 * sigma, 2, 1, device="cuda")
    assert raised.value.field == "device" and "sums every pair" in raised.value.message
    assert len(str(raised.value).splitlines()) == 1
