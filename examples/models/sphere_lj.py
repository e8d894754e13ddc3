"""The built-in sphere_lj as a model: Lennard-Jones particles on the unit sphere, as a pair potential of the
chord, so the neighbour lists and the system-parallel mode of the built-in run it.

Lee–Leok–McClamroch, Example 6 (seed 001): M = diag(m) (kg; kg·m² on the unit sphere) and, for chords
r_ij = ‖q_i − q_j‖ (m) within the cutoff r_c, V = Σ_{i<j} φ(r_ij) − φ(r_c) with φ(r) = 4ε[(σ/r)¹² − (σ/r)⁶]
(J); armillary shifts by φ(r_c) itself, so V is continuous at the cutoff, as the built-in's.
The defaults are the built-in's ``paper`` preset (642 particles at the vertices of a level-3 icosphere,
ε = 0.01 J, σ at which the force between mean neighbours vanishes), with a cutoff of 2.5σ (the preset sums
every pair; a pair model needs a finite cutoff).
"""
import numpy as np

from armillary.kernels.geometry import icosphere, mesh_edges, vortex_velocities

space = "sphere_product"
_vertices, _faces = icosphere(3)
_edges = mesh_edges(_faces)
#: σ (m) with zero force at the mean neighbour chord (the built-in's zero_force_sigma)
_SIGMA = float(np.linalg.norm(_vertices[_edges[:, 0]] - _vertices[_edges[:, 1]], axis=1).mean() / 2.0 ** (1.0 / 6.0))
parameters = {"m": 1.0, "epsilon": 0.01, "sigma": _SIGMA, "cutoff": 2.5 * _SIGMA}
units = {"m": "kg", "epsilon": "J", "sigma": "m", "cutoff": "m"}


def inertia(p):
    """Each particle's mass (kg)."""
    return p.m


def pair_potential(r, p):
    """φ(r) = 4ε[(σ/r)¹² − (σ/r)⁶] (J) of the chord r (m)."""
    s6 = (p.sigma / r) ** 6
    return 4 * p.epsilon * (s6 * s6 - s6)


def initial_state(p):
    """The ``paper`` preset's state: the icosphere's vertices, two co-rotating Gaussian vortices with centres
    30° apart, 0.5 rad/s at their centres, angular radius 20°."""
    half = np.radians(30.0) / 2.0
    centres = np.array([[np.sin(half), 0.0, np.cos(half)], [-np.sin(half), 0.0, np.cos(half)]])
    return {"q": _vertices, "omega": vortex_velocities(_vertices, centres, 0.5, np.radians(20.0))}
