"""Particles of several types and sizes (``sphere_mixture``): one type is sphere_lj bit for bit, every pair style's
gradient is its energy's, a polydisperse binary mixture runs with the same bits on 1, 2 and 3 threads, and a spec
keeps each particle's type and size in its store; bad tables are refused naming the key."""

import os
import subprocess
import sys

import numba
import numpy as np
import pytest

from armillary.kernels import get_system, integrate
from armillary.kernels.errors import InvalidInput
from armillary.kernels.geometry import fibonacci_sphere, thermal_velocities

pytestmark = pytest.mark.xdist_group("mixture")
HERE = os.path.dirname(os.path.abspath(__file__))
#: areal density N σ_A²/4π of the runs below, and their size
DENSITY, N = 0.7, 1500
SIGMA_A = float(np.sqrt(DENSITY * 4.0 * np.pi / N))


def binary(n=N, **params):
    """A 50:50 LJ mixture of σ_B/σ_A = 1.4 (Lorentz–Berthelot), B twice as heavy, diameters 10 % polydisperse."""
    return get_system("sphere_mixture", types={"A": {"sigma": SIGMA_A}, "B": {"sigma": 1.4 * SIGMA_A, "mass": 2.0}},
                      composition={"A": 0.5, "B": 0.5}, **{"polydispersity": 0.1, **params})


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
    from armillary.kernels.systems.sphere_mixture import largest_cutoff, particle_layout

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
    """A langevin run of the binary mixture in the system mode, 40 steps then 20 more continued from its end state
    (a new list, as a store's next segment starts): its samples and end state."""
    system, state = binary(), start()
    options = dict(temperature=1.0, friction=10.0, seed=5, member_ids=[0], mode="system", threads=threads)
    dt = 0.004 * SIGMA_A
    first = integrate(system, "langevin", state, dt, 40, 10, **options)
    second = integrate(system, "langevin", first.final, dt, 20, 10, restart=True, start_step=40, carry=first.carry,
                       **options)
    assert first.mode == "system" and first.status[0] == 0 and second.status[0] == 0
    return {"energy": np.concatenate([first.energy, second.energy], axis=1), "q": second.final["q"],
            "omega": second.final["omega"], "heat": second.heat}


@pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2, reason="needs 2 Numba threads")
def test_a_polydisperse_mixture_is_the_same_bits_on_1_2_and_3_threads(tmp_path):
    """The binary mixture's split langevin run on 1 and 2 threads here and on 3 in a process started with
    NUMBA_NUM_THREADS=3: every sample and the end state bit for bit."""
    results = [split_run(1), split_run(2)]
    out = tmp_path / "three.npz"
    subprocess.run([sys.executable, "-c", THREE_THREADS.format(here=HERE, out=str(out))], check=True, timeout=300,
                   env={**os.environ, "NUMBA_NUM_THREADS": "3"})
    results.append(dict(np.load(out)))
    for other in results[1:]:
        for key, value in results[0].items():
            np.testing.assert_array_equal(other[key], value, err_msg=key, strict=True)
