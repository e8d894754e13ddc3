"""Shared cases: every registered (S²)ⁿ system with an initial condition small enough for tests."""

import os
import subprocess
import sys

import numpy as np
import pytest

from armillary.ensemble.initial import member_normals
from armillary.kernels import METHODS, SYSTEMS, get_system
from armillary.kernels.geometry import icosphere, mesh_edges, vortex_velocities
from armillary.kernels.spaces import SPHERE_PRODUCT
from armillary.kernels.systems.sphere_lj import zero_force_sigma

#: (dt, steps) that keep each paper example well resolved
STEP = {"spherical_chain": 0.01, "sphere_nbody": 1e-3, "spring_pendula": 1e-3, "elastic_rod": 1e-4,
        "dipole_array": 1e-3, "sphere_lj": 0.005, "jacobi_chain": 1e-3, "sphere_riesz": 1e-3,
        "sphere_mixture": 0.002}


def small_lj():
    """42 LJ particles on a level-1 icosphere with Example 6's construction (642 is too slow for 10⁴ steps)."""
    q, faces = icosphere(1)
    sigma = zero_force_sigma(q, mesh_edges(faces))
    omega = vortex_velocities(q, np.array([[0.0, 0.0, 1.0]]), 0.5, np.radians(40))
    return get_system("sphere_lj", epsilon=0.01, sigma=sigma), q, omega


def case(name):
    """(system, q0, ω0) with one member axis: the paper's example, or the system's first preset."""
    if name == "sphere_lj":
        system, q, omega = small_lj()
    else:
        system = get_system(name, "paper" if "paper" in SYSTEMS[name].presets else next(iter(SYSTEMS[name].presets)))
        state = system.initial_state()
        q, omega = state["q"], state["omega"]
    return system, q[np.newaxis], omega[np.newaxis]


def assert_same_bits_on_three_threads(results: list, script: str, tmp_path) -> None:
    """``results`` (dicts of arrays, from 1 and 2 threads here) and what ``script`` (Python text with {out}, the
    .npz it saves its arrays to) computes in a process started with NUMBA_NUM_THREADS=3 (this machine may have fewer
    cores) are the same bits, key by key."""
    out = tmp_path / "three.npz"
    subprocess.run([sys.executable, "-c", script.format(out=str(out))], check=True, timeout=300,
                   env={**os.environ, "NUMBA_NUM_THREADS": "3"})
    results = results + [dict(np.load(out))]
    for other in results[1:]:
        for key, value in results[0].items():
            np.testing.assert_array_equal(other[key], value, err_msg=key, strict=True)


def perturbed(q, omega, members, scale, seed):
    """Members 0 … members−1 perturbed around one state (q, ω each (n, 3)) by the (S²)ⁿ retraction,
    each from its own normals (seed, member id), as an ensemble's ``initial = "perturb"``."""
    normals = member_normals(seed, np.arange(members), SPHERE_PRODUCT.normal_count(q.shape[0]))
    state = SPHERE_PRODUCT.perturb({"q": q, "omega": omega}, normals, scale)
    return state["q"], state["omega"]


def ensemble(q, omega, members, scale=1e-3, seed=0):
    """Members perturbed around the case's single state (q, ω carry a member axis of 1)."""
    return perturbed(q[0], omega[0], members, scale, seed)


#: the registered systems on (S²)ⁿ (the space of ``case``'s q, ω and of its presets)
SPHERE_SYSTEMS = [name for name, definition in SYSTEMS.items() if definition.space is SPHERE_PRODUCT]
ALL_SYSTEMS = [pytest.param(name, marks=pytest.mark.xdist_group(name)) for name in SPHERE_SYSTEMS]
#: those that vi steps (every (S²)ⁿ system today; the filter keeps a future one vi cannot take out)
VI_SYSTEMS = [pytest.param(name, marks=pytest.mark.xdist_group(name)) for name in SPHERE_SYSTEMS
              if METHODS["vi"].supports(SYSTEMS[name])]
#: (system, method) for every (S²)ⁿ system and every deterministic method that steps it (the stochastic ones hold a
#: temperature instead of the energy: tests/test_stochastic.py; a minimiser descends it: tests/test_fire.py)
ALL_SYSTEM_METHODS = [pytest.param(name, method, marks=pytest.mark.xdist_group(name)) for name in SPHERE_SYSTEMS
                      for method in METHODS if METHODS[method].supports(SYSTEMS[name])
                      and not METHODS[method].stochastic and not METHODS[method].minimiser]
