"""The built-in spherical_chain as a model: an n-link spherical pendulum chain under gravity, with the
built-in's forces (a periodic base torque, a tip force, joint dampers); defaults: Example 1, unforced.

Lee–Leok–McClamroch §3.5, Example 1 (seed 001): q_i points from joint i to joint i + 1, link i has length
l_i (m) and a point mass m_i (kg) at its end, so mass k sits at x_k = Σ_{i≤k} l_i q_i and
T = ½ Σ_k m_k ‖ẋ_k‖² = ½ Σ_ij M_ij q̇_i·q̇_j with M_ij = (Σ_{k≥max(i,j)} m_k) l_i l_j (kg·m², eq. (1)),
V = −Σ_k m_k g e·x_k (J), e the unit direction of gravity (the paper's e₃, "the direction of gravity").
M is not diagonal, so ``vi`` steps it by its implicit form (22)–(25).

Forces, as the moments g_i = q_i × f_i of eq. (10) (seed 000 §V, with the digest's corrected moments;
P_i = I − q_i q_iᵀ):
- the base's torque τ(t) = τ₀ + τ_A sin(ν t + φ) (N·m) on link 1: g_1 += P_1 τ;
- a force d (N) on the last mass: g_i += l_i q_i × d for every link i (δx_n = Σ_i l_i γ_i × q_i);
- a viscous damper c_i (N·m·s) in joint i, between link i − 1 (or the base) and link i:
  g_i += P_i [−c_i (ω_i − ω_{i−1}) + c_{i+1} (ω_{i+1} − ω_i)], with ω_0 = 0 and c_{n+1} = 0.
"""
import numpy as np

from armillary.model import cross, dot, sin

space = "sphere_product"
bodies = 2
parameters = {"m": [1.0, 1.0], "l": [9.81, 9.81], "g": 9.81, "gravity_direction": [0.0, 0.0, 1.0],
              "base_torque": [0.0, 0.0, 0.0], "base_torque_amplitude": [0.0, 0.0, 0.0],
              "base_torque_frequency": 0.0, "base_torque_phase": 0.0, "tip_force": [0.0, 0.0, 0.0],
              "damping": [0.0, 0.0]}
units = {"m": "kg", "l": "m", "g": "m/s²", "gravity_direction": "1", "base_torque": "N·m",
         "base_torque_amplitude": "N·m", "base_torque_frequency": "rad/s", "base_torque_phase": "rad",
         "tip_force": "N", "damping": "N·m·s"}


def inertia(p):
    """M_ij = (Σ_{k≥max(i,j)} m_k) l_i l_j (kg·m²)."""
    return [[sum(p.m[k] for k in range(max(i, j), bodies)) * p.l[i] * p.l[j] for j in range(bodies)]
            for i in range(bodies)]


def potential(q, p):
    """V = −Σ_k m_k g e·x_k with x_k = Σ_{i≤k} l_i q_i (J); e used as given (a unit vector)."""
    total = 0
    position = 0
    for k in range(bodies):
        position = position + p.l[k] * q[k]
        total = total - p.m[k] * p.g * dot(p.gravity_direction, position)
    return total


def force(t, q, omega, p):
    """The moments g_i (N·m) at time t (s) of the base torque, the tip force and the joints' dampers."""
    moments = []
    for i in range(bodies):
        torque = -p.damping[i] * omega[i]
        if i > 0:
            torque = torque + p.damping[i] * omega[i - 1]
        else:
            torque = torque + p.base_torque + sin(p.base_torque_frequency * t + p.base_torque_phase) * \
                p.base_torque_amplitude
        if i + 1 < bodies:
            torque = torque + p.damping[i + 1] * (omega[i + 1] - omega[i])
        projected = torque - dot(q[i], torque) * q[i]
        moments.append(projected + p.l[i] * cross(q[i], p.tip_force))
    return moments


def initial_state(p):
    """Example 1's state (the built-in's ``paper`` preset, the digest's exact initial condition):
    q₁ = (√3/2, 0, 1/2), q₂ = e₃, ω₁ = (−√3/4, 0, 3/4), ω₂ = e₂ rad/s, made tangent."""
    q = np.array([[np.sqrt(3) / 2, 0.0, 0.5], [0.0, 0.0, 1.0]])
    q = q / np.linalg.norm(q, axis=1, keepdims=True)
    omega = np.array([[-np.sqrt(3) / 4, 0.0, 0.75], [0.0, 1.0, 0.0]])
    omega = omega - np.sum(q * omega, axis=1, keepdims=True) * q
    return {"q": q, "omega": omega}
