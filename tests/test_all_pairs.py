"""Pair potentials without a cutoff in the system mode (issue 71, item 1): the all-pairs term of kernels/all_pairs.py
on the CPU's threads and on the GPU (numba-cuda's simulator), and the system mode's runs through it.

Tolerances.  A particle's gradient adds n − 1 terms of one sign-mixed sum in float64: its rounding error is a few
ulps times √n of the largest term (~3e-15 of the gradient's norm at n = 1000 here, where the terms mostly point
one way), so 1e-13 relative is the issue's bound with room, and far below what a wrong or missing term gives (one
pair in 10⁶ left out moves the norm by ~1e-6).  The reference sums every term in NumPy's long double (64-bit
mantissa on x86-64: its own error ~1e-18) from positions differenced and powered in long double.  Finite differences
of V: central, step 1e-6, truncation O(h² V''') and cancellation ε V / h both below 1e-7 of a gradient component.
vi's energy error is O(h²) (Lee–Leok–McClamroch, a second-order variational integrator): halving h divides its
maximum over a fixed time by 4 (measured 4.13 and 3.99 at h = 0.02, 0.01, 0.005 over T = 2), bounded for 10⁴ steps.
"""

import os
import subprocess
import sys

import numpy as np
import pytest

from armillary.kernels import InvalidInput, execution_mode, get_system, integrate
from armillary.kernels.all_pairs import pair_terms
from armillary.kernels.geometry import fibonacci_sphere, random_uniform_separated, thermal_velocities
from armillary.kernels.status import NOT_CONVERGED

import gpu_all_pairs
from conftest import assert_same_bits_on_three_threads

HERE = os.path.dirname(__file__)
#: the charges the force tests take: 1000 uniform at random, at least 0.02 apart
CHARGES = random_uniform_separated(1000, 0.02, 11)
#: the NVE runs: 200 Coulomb charges on the Fibonacci lattice at kinetic temperature 1
NVE_Q = fibonacci_sphere(200)
NVE_STATE = {"q": NVE_Q[None], "omega": thermal_velocities(NVE_Q, 1.0, 1.0, seed=1)[None]}
#: a minimisation's start: 200 charges at rest, uniform at random
FIRE_START = {"q": random_uniform_separated(200, 0.02, 3)[None], "omega": np.zeros((1, 200, 3))}


def long_double_reference(q: np.ndarray, s: float) -> tuple[np.ndarray, float]:
    """∂V/∂q (n, 3) and V of k = 1 Riesz charges (s > 0: V = Σ r^−s; s = 0: −Σ ln r) in long double, every pair:
    the pair factor g(r²) = −s r^(−s−2) (s = 0: −r^−2) times q_i − q_j, summed over j."""
    x = q.astype(np.longdouble)
    d = x[:, None, :] - x[None, :, :]
    r2 = (d * d).sum(axis=2)
    np.fill_diagonal(r2, 1.0)
    if s == 0:
        factor, energy = -1.0 / r2, -0.5 * np.log(r2)
    else:
        factor, energy = -s * r2 ** (-0.5 * s - 1), r2 ** (-0.5 * s)
    np.fill_diagonal(factor, 0.0)
    np.fill_diagonal(energy, 0.0)
    return (factor[:, :, None] * d).sum(axis=1), energy.sum() / 2


@pytest.mark.parametrize("s", [1.0, 0.5, 0.0])
def test_all_pairs_forces_and_energy_equal_a_long_double_sum_for_1000_charges(s):
    gradient, energies = pair_terms(get_system("sphere_riesz", s=s), CHARGES)
    reference, energy = long_double_reference(CHARGES, s)
    error = np.linalg.norm(gradient - reference.astype(np.float64)) / np.linalg.norm(reference.astype(np.float64))
    assert error < 1e-13, error
    assert abs(energies.sum() - float(energy)) < 1e-13 * abs(float(energy))


def test_the_gradient_is_the_derivative_of_the_energy():
    """Central differences of V = Σ e_i at 6 coordinates of 40 charges (s = 1 and 0.5) against ∂V/∂q."""
    q = random_uniform_separated(40, 0.1, 5)
    step = 1e-6
    for s in (1.0, 0.5):
        system = get_system("sphere_riesz", s=s)
        gradient, _ = pair_terms(system, q)
        for particle, component in ((0, 0), (7, 1), (13, 2), (21, 0), (30, 1), (39, 2)):
            up, down = q.copy(), q.copy()
            up[particle, component] += step
            down[particle, component] -= step
            difference = (pair_terms(system, up)[1].sum() - pair_terms(system, down)[1].sum()) / (2 * step)
            assert abs(difference - gradient[particle, component]) < 1e-7 * np.abs(gradient).max(), (s, particle)


THREE_THREADS = """
import sys, numba, numpy as np
sys.path.insert(0, {here!r})
from test_all_pairs import CHARGES, FIRE_START, NVE_STATE, get_system, integrate, pair_terms
assert numba.get_num_threads() == 3
gradient, energies = pair_terms(get_system("sphere_riesz"), CHARGES, threads=3)
run = integrate(get_system("sphere_riesz"), "vi", NVE_STATE, 0.01, 20, 5, mode="system", threads=3)
fire = integrate(get_system("sphere_riesz"), "fire", FIRE_START, 0.002, 60, 20, mode="system", threads=3)
np.savez({out!r}, gradient=gradient, energies=energies, q=run.final["q"], energy=run.energy, fire_q=fire.final["q"],
         fire_energy=fire.energy, fire_force=fire.largest_force, fire_step=fire.carry["fire_step"])
"""


def test_gradient_and_a_system_mode_run_are_the_same_bits_on_1_2_and_3_threads(tmp_path):
    """pair_terms at 1000 charges, 20 vi steps of 200 in the system mode (samples every 5) and 60 fire steps of 200
    (its sums over chunks), on 1 and 2 threads here and on 3 in a process started with NUMBA_NUM_THREADS=3 (this
    machine may have fewer cores)."""
    system = get_system("sphere_riesz")
    results = []
    for threads in (1, 2):
        gradient, energies = pair_terms(system, CHARGES, threads=threads)
        run = integrate(system, "vi", NVE_STATE, 0.01, 20, 5, mode="system", threads=threads)
        assert run.mode == "system" and run.neighbour_rebuilds[0] == 0
        fire = integrate(system, "fire", FIRE_START, 0.002, 60, 20, mode="system", threads=threads)
        assert fire.mode == "system"
        results.append({"gradient": gradient, "energies": energies, "q": run.final["q"], "energy": run.energy,
                        "fire_q": fire.final["q"], "fire_energy": fire.energy, "fire_force": fire.largest_force,
                        "fire_step": fire.carry["fire_step"]})
    assert_same_bits_on_three_threads(results, THREE_THREADS.replace("{here!r}", repr(HERE)), tmp_path)


def test_vi_energy_error_is_second_order_in_h_and_does_not_drift():
    """NVE vi, 200 Coulomb charges at T = 1 (E ≈ 1.86e4 J), system mode: max |E − E0| over T = 2 at h = 0.02 and
    0.01 in the ratio 4 ± 20 %; over 10⁴ steps of h = 0.01 the least-squares line through E(t) − E0 (samples every
    10 steps) changes by less than a tenth of max |E − E0| over the run (measured: 0.0025 against 0.84), the
    bounded oscillation of a symplectic method; a drifting one moves the line by its whole error."""
    system = get_system("sphere_riesz")
    largest = []
    for h in (0.02, 0.01):
        run = integrate(system, "vi", NVE_STATE, h, int(round(2.0 / h)), 1, mode="system")
        assert run.mode == "system" and run.status[0] == 0
        largest.append(np.abs(run.energy[0] - run.energy[0, 0]).max())
    assert 0.8 * 4 < largest[0] / largest[1] < 1.2 * 4, largest
    long = integrate(system, "vi", NVE_STATE, 0.01, 10_000, 10, mode="system")
    error = long.energy[0] - long.energy[0, 0]
    time = 0.01 * 10 * np.arange(error.size)
    trend = np.polyfit(time, error, 1)[0] * time[-1]
    assert abs(trend) < 0.1 * np.abs(error).max(), (trend, np.abs(error).max())
    assert long.diagnostics["unit_error"].max() < 1e-13


def test_the_simulated_gpu_follows_the_cpus_all_pairs_term(tmp_path):
    """tests/gpu_all_pairs.py in numba-cuda's simulator: the gradient and energies of 150 Coulomb charges (a full
    tile of 128 and a partial one) equal the CPU's within 1e-13 relative (the same terms in the same order; the
    device may fuse multiply-adds), and 3 vi steps in the system mode with device="cuda" the CPU's within 1e-12;
    12 fire steps of 40 of them (kernels/gpu_minimiser.py: the same stages, its sums folded by id in a tree) the
    CPU's to round-off, stopped by the step limit at the same step."""
    out = tmp_path / "all_pairs.npz"
    subprocess.run([sys.executable, os.path.join(HERE, "gpu_all_pairs.py"), str(out)], check=True, timeout=300,
                   env={**os.environ, "NUMBA_ENABLE_CUDASIM": "1", "NUMBA_DISABLE_JIT": "1"})
    simulated = np.load(out)
    gradient, energies = pair_terms(gpu_all_pairs.riesz_system(), gpu_all_pairs.Q)
    assert np.linalg.norm(simulated["gradient"] - gradient) < 1e-13 * np.linalg.norm(gradient)
    np.testing.assert_allclose(simulated["energies"], energies, rtol=1e-13, atol=0)
    cpu = gpu_all_pairs.run("cpu")
    for key in ("q", "omega"):
        np.testing.assert_allclose(simulated[key], getattr(cpu, key), rtol=0, atol=1e-12, err_msg=key)
    np.testing.assert_allclose(simulated["energy"], cpu.energy, rtol=1e-12, atol=0)
    assert simulated["status"][0] == 0 and simulated["neighbour_rebuilds"][0] == 0
    minimisation = gpu_all_pairs.minimise("cpu")  # the same FIRE steps: the device's sums and V by id in a tree
    np.testing.assert_allclose(simulated["fire_q"], minimisation.q, rtol=0, atol=1e-13)
    np.testing.assert_allclose(simulated["fire_energy"], minimisation.energy, rtol=1e-13, atol=0)
    np.testing.assert_allclose(simulated["fire_force"], minimisation.largest_force, rtol=1e-11, atol=0)
    assert simulated["fire_status"][0] == minimisation.status[0] == NOT_CONVERGED
    for name, value in minimisation.carry.items():
        np.testing.assert_allclose(simulated[f"fire_{name}"], value, rtol=1e-13, atol=0, err_msg=name)


def test_mode_choice_and_refusals_without_a_cutoff():
    """One member of ≥ 1000 charges runs in the system mode by itself, fewer in the ensemble mode unless asked; a
    skin is refused (no list)."""
    system = get_system("sphere_riesz")
    assert execution_mode(system, "vi", 1, 1000, False) == "system"
    assert execution_mode(system, "vi", 1, 999, False) == "ensemble"
    assert execution_mode(system, "vi", 2, 1000, False) == "ensemble"
    with pytest.raises(InvalidInput) as error:
        integrate(system, "vi", NVE_STATE, 0.01, 1, mode="system", skin=0.1)
    assert error.value.field == "skin" and "no cutoff" in error.value.message


STORE_SPEC = """
[system]
name = "sphere_riesz"
[integrator]
method = "vi"
dt = 0.001
t_end = 0.004
save_every = 2
checkpoint_every = 2
[ensemble]
members = 1
initial = "uniform"
bodies = 1000
omega_scale = 0.5
seed = 3
[output]
store = "{store}"
variables = ["q", "energy", "temperature"]
[cluster]
workers = 1
"""


def test_a_store_run_of_1000_charges_runs_all_pairs_in_the_system_mode(tmp_path, capsys):
    """`armillary check` tells the cost of a step; `armillary run` of 1000 charges (4 steps in 2 segments) takes the
    system mode, records the all-pairs revision of its sums and holds the kernel's bits."""
    import xarray as xr

    from armillary.ensemble.plan import Plan
    from armillary.jobs.cli import main

    path = tmp_path / "riesz.toml"
    path.write_text(STORE_SPEC.format(store=tmp_path / "riesz.zarr"))
    assert main(["check", str(path)]) == 0
    assert "999000 pair terms a gradient" in capsys.readouterr().out  # the plan tells the cost
    assert main(["run", str(path)]) == 0
    ds = xr.open_zarr(tmp_path / "riesz.zarr")
    assert ds.attrs["system_mode_revision"] == 1
    from armillary import ensemble

    plan = Plan(ensemble.load_spec(str(path)))
    assert plan.mode == "system"
    first = integrate(plan.system, "vi", plan.initial_state(0, 1), 0.001, 2, 2, member_ids=[0])
    second = integrate(plan.system, "vi", first.final, 0.001, 2, 2, restart=True, start_step=2, carry=first.carry,
                       member_ids=[0])
    np.testing.assert_array_equal(ds.energy.values, np.concatenate([first.energy, second.energy[:, 1:]], axis=1))
    np.testing.assert_array_equal(ds.q.values[:, -1], second.final["q"])
