"""Molecular dynamics at a temperature: Lennard-Jones particles on the sphere under ``langevin`` and ``brownian``
in the system-parallel mode (one member across threads, neighbour lists), against the ensemble kernels bit for
bit, a liquid held at its temperature with the structure of the NVE liquid, and a crystal annealed from it.

The liquid's checks are statistical: the kinetic temperature's mean over 40 samples 100 steps apart (about one
friction time 1/γ = τ apart, so nearly independent) has a standard error of 0.3 % at N = 2000 (each sample's
relative fluctuation is 1/√N = 2.2 %); the test asks for 1 %, the issue's bound, more than 3 standard errors.
g(θ) of the Langevin and the NVE liquids is compared bin by bin against the spread of 8 batch means of 5 frames each
(z = Δg/√(se₁² + se₂²)): the largest |z| of 60 bins below 4.5 and the mean z² below 2.5 (1 expected); a g(θ) of
another temperature (T = 0.7 against 1.0: the first peak 10 % higher) fails it with |z| up to 42.  Seeds are fixed, so each check
gives the same answer every run.
"""

import numba
import numpy as np
import pytest

from armillary.ensemble.particles import defect_clusters, pair_distribution, voronoi_order
from armillary.kernels import integrate
from armillary.kernels.geometry import fibonacci_sphere, random_uniform_separated, thermal_velocities

from test_md import lj_at_density, md_spec, split_like_the_store

pytestmark = pytest.mark.xdist_group("md_bath")


@pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2, reason="needs 2 Numba threads")
@pytest.mark.parametrize("method, friction", [("langevin", 20.0), ("brownian", 50.0)])
def test_stochastic_system_mode_is_bitwise_across_threads_and_equals_ensemble_mode(method, friction):
    """The system-parallel stochastic step (noise keyed by each particle's original index, not its storage slot):
    a run continued after step 40 on 2 threads equals the same on 1 thread bit for bit (q, ω and heat), and the
    ensemble kernel (all pairs) to the round-off of the pair sums' order.  brownian at this friction jumps ~σ
    where two particles overlap, which multiplies a round-off difference by ~1e3 a step: it is compared over its
    first 3 steps (a noise keyed by storage slot would differ by the noise itself, ~1e-3)."""
    n = 1500
    system, sigma = lj_at_density(n)
    q = fibonacci_sphere(n)
    state = {"q": q[None], "omega": thermal_velocities(q, 1.0, 1.0, seed=3)[None]}
    options = dict(temperature=0.7, friction=friction, seed=8, member_ids=[4])
    dt = 0.005 * sigma
    runs = []
    for threads in (2, 1):
        first = integrate(system, method, state, dt, 40, 20, mode="system", threads=threads, **options)
        runs.append(integrate(system, method, first.final, dt, 20, 20, mode="system", threads=threads, restart=True,
                              start_step=40, carry=first.carry, **options))
    assert first.mode == "system" and first.neighbour_rebuilds[0] > 1
    for name in ("q", "omega"):
        assert np.array_equal(runs[0].final[name], runs[1].final[name]), name
    steps = 60 if method == "langevin" else 3
    serial = integrate(system, method, state, dt, steps, steps, mode="ensemble", threads=1, **options)
    parallel = integrate(system, method, state, dt, steps, steps, mode="system", threads=2, **options)
    assert np.abs(parallel.q_final - serial.q_final).max() <= 1e-14
    if method == "langevin":
        assert np.array_equal(runs[0].heat, runs[1].heat)
        assert np.abs(parallel.omega_final - serial.omega_final).max() <= 1e-13 * np.abs(serial.omega_final).max()
        assert abs(parallel.heat[0, -1] - serial.heat[0, -1]) <= 1e-12 * np.abs(serial.heat).max()
        np.testing.assert_allclose(parallel.energy, serial.energy, rtol=1e-12)




def g_batches(frames, sigma, batches=8):
    """g(θ) over [0, 4σ] in 60 bins of each frame (N, 3), as the means and standard errors of ``batches`` batch
    means of consecutive frames."""
    values = np.array([pair_distribution(points, bins=60, theta_max=4 * sigma)[1] for points in frames])
    means = values.reshape(batches, -1, values.shape[1]).mean(axis=1)
    return means.mean(axis=0), means.std(axis=0, ddof=1) / np.sqrt(batches)


def test_langevin_holds_the_temperature_and_the_structure_of_the_nve_liquid():
    """N = 2000 at ρ* = 0.8, T* = 1 (a liquid), γ = 1/τ, h = 0.005τ: after 10τ, 40 samples over 20τ hold the mean
    kinetic temperature within 1 % of T (measured 0.15 %); an NVE vi run of 20τ from its last state has the same
    g(θ) within statistical error; E − E₀ − Q, the splitting's own error, stays below 10⁻³ N T over the 30τ (measured
    5×10⁻⁴ N T at most; the potential energy the liquid gives up in the first τ, which Q must account for, is
    ~0.3 N T).  It is a sum of the steps' local errors of either sign: it wanders as a random walk of steps ~h³
    rather than drifting.  Every frame's Voronoi charges sum to 12."""
    n = 2000
    system, sigma = lj_at_density(n)
    q = fibonacci_sphere(n)
    state = {"q": q[None], "omega": thermal_velocities(q, 1.0, 1.0, seed=1)[None]}
    dt, temperature = 0.005 * sigma, 1.0
    options = dict(temperature=temperature, friction=1.0 / sigma, seed=3, mode="system")
    settle = integrate(system, "langevin", state, dt, 2000, 100, **options)
    bath = integrate(system, "langevin", settle.final, dt, 4000, 100, restart=True, start_step=2000,
                     carry=settle.carry, **options)
    kinetic = bath.temperature[0, 1:]
    assert abs(kinetic.mean() - temperature) < 0.01 * temperature
    balance = np.concatenate([settle.energy[0], bath.energy[0, 1:]]) - settle.energy[0, 0] \
        - np.concatenate([settle.heat[0], bath.heat[0, 1:]])
    assert np.max(np.abs(balance)) < 1e-3 * n * temperature
    nve = integrate(system, "vi", bath.final, dt, 4000, 100, restart=True, mode="system")
    held, held_error = g_batches(bath.q[0, 1:], sigma)
    free, free_error = g_batches(nve.q[0, 1:], sigma)
    spread = np.sqrt(held_error ** 2 + free_error ** 2)
    seen = spread > 0  # bins inside the core, where no pair ever is, hold g = 0 in both
    z = (held - free)[seen] / spread[seen]
    assert seen.sum() > 45 and np.max(np.abs(z)) < 4.5 and np.mean(z ** 2) < 2.5, z
    assert all(voronoi_order(points).total_charge == 12 for points in bath.q[0, ::8])


def test_a_liquid_cooled_slowly_crystallises_with_twelve_disclinations():
    """N = 1000 from a random placement at T = 1 (a liquid), cooled linearly to T = 0.1 over 200τ by ``cooling_rate``
    (γ = 1/τ, h = 0.005τ): the six-fold share and the mean |ψ₆| end well above the liquid's (measured 0.62 and 0.54
    in the liquid; the crystal ≥ 0.8 and ≥ 0.8 asked) and its defects are fewer than half the liquid's,
    Σ(6 − z) = 12 in every frame (Euler's theorem: a check of the tessellation), and 10 to 20 defect clusters carry a
    positive charge (12 of +1 in a perfect anneal: isolated five-folds and scars, as Bausch et al. 2003 found on
    droplets; at this cooling rate some pairs of them sit in one cluster and a few dislocations of −1 and +1 remain:
    the benchmark anneals 5× slower and states what it finds)."""
    n = 1000
    system, sigma = lj_at_density(n)
    q = random_uniform_separated(n, 0.8 * sigma, 3)
    state = {"q": q[None], "omega": thermal_velocities(q, 1.0, 1.0, seed=1)[None]}
    dt, steps = 0.005 * sigma, 40_000
    run = integrate(system, "langevin", state, dt, steps, 4000, temperature=1.0, cooling_rate=0.9 / (steps * dt),
                    friction=1.0 / sigma, seed=2, mode="system")
    orders = [voronoi_order(points) for points in run.q[0]]
    assert all(order.total_charge == 12 for order in orders)
    liquid, crystal = orders[1], orders[-1]
    assert abs(run.temperature[0, -1] - 0.1) < 0.02
    assert crystal.six_fold_fraction > max(0.8, liquid.six_fold_fraction + 0.15)
    assert crystal.mean_abs_psi6 > max(0.8, liquid.mean_abs_psi6 + 0.2)
    assert np.sum(crystal.coordination != 6) < 0.5 * np.sum(liquid.coordination != 6)
    charged = [cluster.charge for cluster in defect_clusters(run.q[0, -1], crystal) if cluster.charge != 0]
    assert 10 <= sum(charge > 0 for charge in charged) <= 20, charged


def test_replicas_of_a_large_system_run_system_parallel_each_with_its_own_noise(tmp_path):
    """Three members of 1000 particles in chunks of one: each chunk runs system-parallel (neighbour lists, every core)
    and each member equals kernel calls with its own member id (its own noise); the replicas differ."""
    import io

    from armillary import ensemble
    from armillary.ensemble.plan import Plan

    n = 1000
    sigma = lj_at_density(n)[1]
    spec = md_spec(tmp_path, members=3, particles=n, steps=80, name="replicas.zarr", method="langevin",
                   integrator_lines=f"temperature = 1.0\nfriction = {float(1.0 / sigma)!r}\n", ensemble_lines="chunk = 1\n",
                   variables='["q", "omega", "energy", "temperature"]')
    plan = Plan(spec)
    assert plan.mode == "system"
    saved = ensemble.run(spec, stream=io.StringIO()).compute()
    finals = []
    for member in range(3):
        q, heat = split_like_the_store(plan, member, "langevin", ("q", "heat"), temperature=1.0, friction=1.0 / sigma,
                                       seed=3)
        assert np.array_equal(saved.q.values[member], q[0]) and np.array_equal(saved.heat.values[member], heat[0])
        finals.append(q[0, -1])
    assert not np.array_equal(finals[0], finals[1])
