"""A 3-link chain of spherical pendula with a spring between its first and last masses and a magnetic dipole
on its last link: a model no built-in system restates.

Links of lengths l_i (m) hang from a fixed pivot; q_i (unit) points along link i, a point mass m_i (kg)
sits at its end, x_k = Σ_{i≤k} l_i q_i (m).  So T = ½ Σ_k m_k ‖ẋ_k‖² = ½ Σ_ij M_ij q̇_i·q̇_j with
M_ij = (Σ_{k≥max(i,j)} m_k) l_i l_j (kg·m², Lee–Leok–McClamroch eq. (1), as spherical_chain), and

    V = −Σ_k m_k g e·x_k + ½ k (‖x_3 − x_1‖ − r_0)² − μ q_3·B   (J):

gravity along the unit vector e, a linear spring of stiffness k (N/m) and rest length r_0 (m) between the
non-adjacent masses 1 and 3, and a dipole of moment μ (A·m²) along the last link in a uniform field B (T).
The spring and the dipole make M's coupling and V's gradient act on all three links (eq. (9)).
"""
import numpy as np

from armillary.model import dot, norm

space = "sphere_product"
bodies = 3
parameters = {"m": [1.0, 0.7, 1.3], "l": [1.0, 0.8, 0.6], "g": 9.81, "gravity_direction": [0.0, 0.0, -1.0],
              "k": 25.0, "rest_length": 0.9, "mu": 2.0, "B": [0.6, -0.3, 0.8]}
units = {"m": "kg", "l": "m", "g": "m/s²", "gravity_direction": "1", "k": "N/m", "rest_length": "m",
         "mu": "A·m²", "B": "T"}


def positions(q, p):
    """x_k = Σ_{i≤k} l_i q_i (m) of the three masses."""
    x, out = 0, []
    for k in range(bodies):
        x = x + p.l[k] * q[k]
        out.append(x)
    return out


def inertia(p):
    """M_ij = (Σ_{k≥max(i,j)} m_k) l_i l_j (kg·m²)."""
    return [[sum(p.m[k] for k in range(max(i, j), bodies)) * p.l[i] * p.l[j] for j in range(bodies)]
            for i in range(bodies)]


def potential(q, p):
    """Gravity, the spring between masses 1 and 3, the dipole on link 3 (J)."""
    x = positions(q, p)
    gravity = -sum(p.m[k] * p.g * dot(p.gravity_direction, x[k]) for k in range(bodies))
    stretch = norm(x[2] - x[0]) - p.rest_length
    return gravity + p.k / 2 * stretch * stretch - p.mu * dot(q[2], p.B)


def initial_state(p):
    """Links tilted from the downward vertical in three directions, each turning (rad/s, made tangent)."""
    q = np.array([[0.5, 0.1, -0.85], [-0.3, 0.6, -0.7], [0.7, -0.2, -0.4]])
    q = q / np.linalg.norm(q, axis=1, keepdims=True)
    omega = np.array([[0.4, -1.0, 0.3], [1.5, 0.2, -0.6], [-0.8, 2.0, 1.0]])
    return {"q": q, "omega": omega - np.sum(q * omega, axis=1, keepdims=True) * q}
