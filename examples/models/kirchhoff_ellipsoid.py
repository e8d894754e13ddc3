"""The built-in kirchhoff_body's ellipsoid as a model: a rigid body in an ideal fluid, Kirchhoff's equations on SE(3).

A neutrally buoyant solid prolate spheroid in water with Lamb's added masses, translating at 1 m/s 0.1 rad off its
long axis; the parameters g, buoyancy and the two centres switch on gravity and buoyancy as in kirchhoff_body.
"""
import numpy as np

from armillary.kernels.systems.kirchhoff_body import SPHEROID_AXES, WATER, ellipsoid_added_mass, solid_ellipsoid
from armillary.model import dot

space = "rigid_motion"
bodies = 1
MASS, MOMENTS = solid_ellipsoid(SPHEROID_AXES, WATER)  # semi-axes (1, 0.25, 0.25) m, 1000 kg/m³
parameters = {
    "m": MASS,
    "inertia": list(MOMENTS),  # principal moments about the centre of mass G
    "center_of_mass": [0.0, 0.0, 0.0],  # G − O, body frame
    "added_mass": list(np.diag(ellipsoid_added_mass(SPHEROID_AXES, WATER))),  # (rotation, translation), diagonal
    "g": 0.0,
    "gravity_direction": [0.0, 0.0, 1.0],
    "buoyancy": 0.0,  # the displaced water's weight (N), acting at the centre of buoyancy against gravity
    "center_of_buoyancy": [0.0, 0.0, 0.0],
}
units = {"m": "kg", "inertia": "kg m2", "center_of_mass": "m", "added_mass": "kg m2, kg", "g": "m/s²",
         "gravity_direction": "1", "buoyancy": "N", "center_of_buoyancy": "m"}


def inertia(p):
    """M in the order (Ω, V) about O: [[I_O, m ĉ], [−m ĉ, m 1]] (I_O = I_G + m(|c|² 1 − c cᵀ)) plus the added
    mass (kg·m², kg·m, kg)."""
    c = p.center_of_mass
    skew = [[0, -c[2], c[1]], [c[2], 0, -c[0]], [-c[1], c[0], 0]]
    matrix = [[0] * 6 for _ in range(6)]
    for r in range(3):
        for k in range(3):
            matrix[r][k] = p.m * ((dot(c, c) if r == k else 0) - c[r] * c[k]) + (p.inertia[r] if r == k else 0)
            matrix[r][3 + k] = p.m * skew[r][k]
            matrix[3 + r][k] = -p.m * skew[r][k]
            matrix[3 + r][3 + k] = p.m if r == k else 0
    for k in range(6):
        matrix[k][k] = matrix[k][k] + p.added_mass[k]
    return matrix


def potential(R, x, p):
    """V = −e·((m g − B) x + R (m g c − B c_B)) (J): the weight at G and buoyancy at the centre of buoyancy."""
    moment = p.m * p.g * p.center_of_mass - p.buoyancy * p.center_of_buoyancy
    return -dot(p.gravity_direction, (p.m * p.g - p.buoyancy) * x[0] + R[0] @ moment)


def initial_state(p):
    """At the origin, unturned, Ω = (0, 0, 0.05) rad/s and V = (cos 0.1, sin 0.1, 0) m/s."""
    return {"R": [np.eye(3)], "x": [[0.0, 0.0, 0.0]], "Omega": [[0.0, 0.0, 0.05]],
            "V": [[np.cos(0.1), np.sin(0.1), 0.0]]}
