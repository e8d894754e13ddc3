"""Shared cases: every registered system with an initial condition small enough for tests."""

import numpy as np
import pytest

from ensemble.initial import perturbed_ensemble
from kernels import SYSTEMS, get_system
from kernels.geometry import icosphere, mesh_edges, vortex_velocities
from kernels.systems.sphere_lj import zero_force_sigma

#: (dt, steps) that keep each paper example well resolved
STEP = {"spherical_chain": 0.01, "sphere_nbody": 1e-3, "spring_pendula": 1e-3, "elastic_rod": 1e-4,
        "dipole_array": 1e-3, "sphere_lj": 0.005}


def small_lj():
    """42 LJ particles on a level-1 icosphere with Example 6's construction (642 is too slow for 10⁴ steps)."""
    q, faces = icosphere(1)
    sigma = zero_force_sigma(q, mesh_edges(faces))
    omega = vortex_velocities(q, np.array([[0.0, 0.0, 1.0]]), 0.5, np.radians(40))
    return get_system("sphere_lj", epsilon=0.01, sigma=sigma), q, omega


def case(name):
    """(system, q0, ω0) with one member axis."""
    if name == "sphere_lj":
        system, q, omega = small_lj()
    else:
        system = get_system(name, "paper")
        q, omega = system.initial_state()
    return system, q[np.newaxis], omega[np.newaxis]


def ensemble(q, omega, members, scale=1e-3, seed=0):
    """Members perturbed around the case's single state (q, ω carry a member axis of 1)."""
    return perturbed_ensemble(q[0], omega[0], members, scale, seed)


ALL_SYSTEMS = [pytest.param(name, marks=pytest.mark.xdist_group(name)) for name in SYSTEMS]
