"""Initial conditions of ensemble members (geometry on (S²)ⁿ only, no physics)."""

import numpy as np


def perturbed_ensemble(q, omega, members: int, scale: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``members`` states around (q, ω) (each (n, 3)): Gaussian perturbations of std ``scale`` in the
    tangent space, mapped back exactly onto (S²)ⁿ, with ω projected tangent to the new q.
    Returns (members, n, 3) arrays."""
    q = np.asarray(q, dtype=np.float64)
    rng = np.random.default_rng(seed)
    dq = scale * rng.standard_normal((members,) + q.shape)
    qs = q + dq - np.sum(dq * q, axis=-1, keepdims=True) * q
    qs /= np.linalg.norm(qs, axis=-1, keepdims=True)
    ws = omega + scale * rng.standard_normal(qs.shape)
    return qs, ws - np.sum(ws * qs, axis=-1, keepdims=True) * qs
