"""The built-in heavy_top's chaotic top as a model: one rigid body turning about a fixed point under gravity."""
import numpy as np

from armillary.model import dot

space = "rotation"
bodies = 1
parameters = {"inertia": [2.0, 1.6, 1.0], "m": 1.0, "center_of_mass": [0.3, 0.2, 0.4], "g": 9.81,
              "gravity_direction": [0.0, 0.0, 1.0]}  # a unit vector (used as given)
units = {"inertia": "kg m2", "m": "kg", "center_of_mass": "m", "g": "m/s²", "gravity_direction": "1"}


def inertia(p):
    """The principal moments about the pivot (kg·m²)."""
    return p.inertia


def potential(R, p):
    """V = −m g e·(R c) (J): c the centre of mass from the pivot (body frame), e the direction of gravity."""
    return -p.m * p.g * dot(p.gravity_direction, R[0] @ p.center_of_mass)


def initial_state(p):
    """The body axis e₃ tilted 1 rad from upright (against gravity e = +z), spinning at Ω = (1, 2, 3) rad/s."""
    angle = np.pi - 1.0
    c, s = np.cos(angle), np.sin(angle)
    return {"R": [[[1.0, 0.0, 0.0], [0.0, c, -s], [0.0, s, c]]], "Omega": [[1.0, 2.0, 3.0]]}
