"""The built-in jacobi_chain as a model: geodesics of the spherical chain's Jacobi–Maupertuis metric, an
inertia that depends on the configuration, inertia(q, p).

The chain of :mod:`spherical_chain` (point masses m_k (kg) at the ends of links of lengths l_i (m),
M_jk = (Σ_{k'≥max(j,k)} m_k') l_j l_k (kg·m²), V_chain(q) = −Σ_i (Σ_{k≥i} m_k) g l_i e·q_i (J)) traces at
energy E (``path_energy``, J) the geodesics of m_jk(q) = 2 (E − V_chain(q)) M_jk (Lee–Leok–McClamroch
eq. (12); Arnold §45D).  The geodesic flow has kinetic energy T = ½ Σ m_jk(q) q̇_j·q̇_k and no potential.
E must exceed the chain's highest potential Σ_i (Σ_{k≥i} m_k) g l_i, so that m is positive definite.
"""
import numpy as np

from armillary.model import dot

space = "sphere_product"
bodies = 2
parameters = {"m": [1.0, 1.0], "l": [1.0, 1.0], "g": 9.81, "gravity_direction": [0.0, 0.0, 1.0],
              "path_energy": 40.0}
units = {"m": "kg", "l": "m", "g": "m/s²", "gravity_direction": "1", "path_energy": "J"}


def tail(p, i):
    """Σ_{k≥i} m_k (kg): the masses link i carries."""
    return sum(p.m[k] for k in range(i, bodies))


def inertia(q, p):
    """m_jk(q) = 2 (E − V_chain(q)) M_jk (kg·m²·J)."""
    chain_potential = -sum(tail(p, i) * p.g * p.l[i] * dot(p.gravity_direction, q[i]) for i in range(bodies))
    factor = 2 * (p.path_energy - chain_potential)
    return [[factor * tail(p, max(j, k)) * p.l[j] * p.l[k] for k in range(bodies)] for j in range(bodies)]


def potential(q, p):
    """None: the geodesic flow is free (J)."""
    return 0


def initial_state(p):
    """The built-in's ``double`` preset: q₁ = (0.6, 0, 0.8), q₂ = (0, 0.6, 0.8), ω_i = q_i × (0.1 e₂, 0.1 e₁)
    rad/s (tangent)."""
    q = np.array([[0.6, 0.0, 0.8], [0.0, 0.6, 0.8]])
    q = q / np.linalg.norm(q, axis=1, keepdims=True)
    return {"q": q, "omega": np.cross(q, [[0.0, 0.1, 0.0], [0.1, 0.0, 0.0]])}
