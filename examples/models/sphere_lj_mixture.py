"""Lennard-Jones particles of two types and several sizes on the unit sphere: sphere_mixture's ``lj`` pair style
with Lorentz–Berthelot mixing and additive diameters, as a model file.

Particles i and j, of diameters d_i, d_j (m, chord) and of types of energies ε_a, ε_b (J), have σ_ij = (d_i +
d_j)/2 and ε_ij = √(ε_a ε_b), and φ(r) = 4ε_ij[(σ_ij/r)¹² − (σ_ij/r)⁶] of their chord r (m); Armillary shifts every
pair's φ to 0 at the one cutoff r_c (m).  Which particle has which type, its mass and its diameter come from the
system parameters ``types``, ``composition``, ``polydispersity`` and ``layout_seed`` (or ``particle_types`` and
``diameters``), as sphere_mixture's; the defaults are its ``binary_64`` preset's (32 A of σ = 0.25 m and 32 B of
σ = 0.35 m and 2 kg, ε = 1 J, diameters 10 % polydisperse), with r_c = 2.5 σ_AB = 0.75 m for every pair.
"""
import numpy as np

from armillary.kernels.geometry import fibonacci_sphere
from armillary.model import sqrt

space = "sphere_product"
parameters = {"cutoff": 0.75, "types": {"A": {"sigma": 0.25}, "B": {"sigma": 0.35, "mass": 2.0}},
              "composition": {"A": 32, "B": 32}, "polydispersity": 0.1}
units = {"cutoff": "m"}


def pair_potential(r, p, a, b):
    """φ(r) (J) of the chord r (m) between particles a and b."""
    sigma = (a.diameter + b.diameter) / 2
    epsilon = sqrt(a.epsilon * b.epsilon)
    s6 = (sigma / r) ** 6
    return 4 * epsilon * (s6 * s6 - s6)


def initial_state(p):
    """The binary_64 preset's state: 64 particles on the Fibonacci lattice, turning slowly (0.3 rad/s) about a
    tilted axis."""
    q = fibonacci_sphere(64)
    axis = np.array([0.3, -0.2, 1.0]) / np.linalg.norm([0.3, -0.2, 1.0])
    return {"q": q, "omega": 0.3 * (axis - (q @ axis)[:, np.newaxis] * q)}
