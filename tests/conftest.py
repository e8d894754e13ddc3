"""Shared cases: every registered system with an initial condition small enough for tests."""

import numpy as np
import pytest

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
    """Members perturbed around (q, ω) in the tangent space, exactly back on (S²)ⁿ."""
    rng = np.random.default_rng(seed)
    dq = scale * rng.standard_normal((members,) + q.shape[1:])
    qs = q + dq - np.sum(dq * q, axis=-1, keepdims=True) * q
    qs /= np.linalg.norm(qs, axis=-1, keepdims=True)
    ws = np.repeat(omega, members, axis=0) + scale * rng.standard_normal(qs.shape)
    return qs, ws - np.sum(ws * qs, axis=-1, keepdims=True) * qs


ALL_SYSTEMS = [pytest.param(name, marks=pytest.mark.xdist_group(name)) for name in SYSTEMS]
