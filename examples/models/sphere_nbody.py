"""The built-in sphere_nbody's Example 2 as a model: three bodies on the unit sphere under the γ-potential.

Lee–Leok–McClamroch, Example 2 (seed 001 §5.2; digest_001_examples): M = diag(m) (kg, on the unit sphere
kg·m²) and V = −γ Σ_{i<j} c_ij/√(1 − c_ij²) (J), c_ij = q_i·q_j, the Kozlov–Harin analogue of gravity.
As the built-in, the pair's distance from the singularities √(1 − c²) is written ‖q_i × q_j‖ (equal on the
sphere, free of the cancellation of 1 − c² when c → ±1); the derived ∂V/∂q is then the gradient of that
extension off the sphere, whose moments q_i × ∂V/∂q_i (all that eqs. (9), (29)–(30) use) are the built-in's.
"""
import numpy as np

from armillary.model import cross, dot, norm

space = "sphere_product"
bodies = 3
parameters = {"m": [1.0, 1.0, 1.0], "gamma": 1.0}
units = {"m": "kg", "gamma": "J"}


def inertia(p):
    """M = diag(m) (kg·m²): point masses on the unit sphere."""
    return [p.m[i] for i in range(bodies)]


def potential(q, p):
    """V = −γ Σ_{i<j} (q_i·q_j)/‖q_i × q_j‖ (J)."""
    return -p.gamma * sum(dot(q[i], q[j]) / norm(cross(q[i], q[j]))
                          for i in range(bodies) for j in range(i + 1, bodies))


def initial_state(p):
    """Example 2's state (the built-in's ``paper`` preset): q = (−e₂, e₃, −e₁), ω = (−1.1 e₃, e₁, e₂) rad/s,
    made tangent (ω_i·q_i = 0)."""
    q = np.array([[0.0, -1.0, 0.0], [0.0, 0.0, 1.0], [-1.0, 0.0, 0.0]])
    omega = np.array([[0.0, 0.0, -1.1], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    omega = omega - np.sum(q * omega, axis=1, keepdims=True) * q
    return {"q": q, "omega": omega}
