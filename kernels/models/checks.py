"""Checks of a model at concrete states, which symbolic derivation cannot make: every expression finite at
the run's initial states, the inertia symmetric positive definite there, and (``armillary check``) the
derived ∂V/∂q against central differences of V at random admissible states.

The per-space evaluations come from the space's builder (``expressions`` and ``potential_coordinates``).
"""

from __future__ import annotations

import numpy as np

from ..errors import InvalidInput
from . import FIELD, builder

#: central-difference step (relative to the coordinate scale 1) and the agreement asked of ∂V/∂q: the
#: truncation error of a central difference is O(h²) ≈ 1e-10 and its rounding O(ε|V|/h) ≈ 1e-11·|V|
DIFFERENCE_STEP = 1e-5
GRADIENT_TOLERANCE = 1e-6
#: coordinates differenced per check (a random choice beyond it: a 10⁵-particle model has 3·10⁵)
MAX_DIFFERENCED = 48


def _builder(system):
    return builder(system.definition.space.name)


def check_states(system, state: dict, where: str = "the initial state") -> None:
    """Refuse (InvalidInput naming the member and the expression) a non-finite expression or an inertia
    that is not symmetric positive definite at states with a leading member axis (``where`` says which)."""
    path = system.definition.model.path
    for what, values in _builder(system).expressions(system, state).items():
        flat = np.asarray(values).reshape(values.shape[0], -1)
        bad = ~np.all(np.isfinite(flat), axis=1)
        if bad.any():
            member = int(np.argmax(bad))
            raise InvalidInput(FIELD, f"{path}: {what} is not finite ({flat[member][~np.isfinite(flat[member])][0]}) "
                               f"at {where} of member {member}")
    for what, matrices in _builder(system).inertias(system, state).items():
        if matrices.ndim == 2:  # a diagonal (members, n)
            least = matrices.min(axis=1)
        else:
            least = np.linalg.eigvalsh(0.5 * (matrices + np.swapaxes(matrices, -1, -2)))[..., 0]
        if not np.all(least > 0):
            member = int(np.argmin(least))
            raise InvalidInput(FIELD, f"{path}: {what} is not positive definite at {where} of member {member} "
                               f"(least eigenvalue {least[member]:.3g})")


def gradient_error(system, state: dict, seed: int = 0) -> float:
    """The largest |∂V/∂x − central difference| / max(1, |∂V/∂x|) over the coordinates x of the potential (at
    most MAX_DIFFERENCED of them, drawn with ``seed``) at states with a leading member axis."""
    coordinates, potential, gradient = _builder(system).potential_coordinates(system, state)
    derived = gradient(coordinates)
    worst = 0.0
    size = coordinates.shape[1]
    chosen = range(size) if size <= MAX_DIFFERENCED else np.random.default_rng(seed).choice(size, MAX_DIFFERENCED,
                                                                                             replace=False)
    for k in chosen:
        step = np.zeros_like(coordinates)
        step[:, k] = DIFFERENCE_STEP
        difference = (potential(coordinates + step) - potential(coordinates - step)) / (2 * DIFFERENCE_STEP)
        worst = max(worst, float(np.max(np.abs(derived[:, k] - difference) / np.maximum(1.0, np.abs(derived[:, k])))))
    return worst
