"""Protocols: quantities that change over a run as piecewise-linear functions of time.

A schedule is K knots (t_k, v_k), t₀ = 0 < t₁ < … (s): v(t) = v_{k−1} + (v_k − v_{k−1})(t − t_{k−1})/(t_k − t_{k−1})
on [t_{k−1}, t_k), v_K after the last knot.  Its knots ride in a member's coefficient rows (K times, then K values),
so a kernel evaluates v at the time of a step from the step index alone: a run continued inside a ramp has the
bits of one that never stopped.  The bath's temperature (:func:`kernels.integrators.langevin.bath_temperature`) and
a system's time-dependent coefficients (``SystemDefinition.coefficients_at``: ``sphere_mixture``'s density) read
them by :func:`piecewise_linear`.
"""

import numpy as np

from .errors import InvalidInput
from .lanes import lane_function


def checked_knots(value, field: str, quantity: str, example: str, lowest: float) -> np.ndarray:
    """A schedule [[t, v], …] checked: (K, 2) float64 knots, t₀ = 0 and increasing (s), every v >= ``lowest``;
    refused naming ``field`` (``quantity``: what v is, with its unit, and ``example`` a valid value, for the
    message)."""
    try:
        knots = np.array(value, dtype=np.float64)
    except (TypeError, ValueError):
        knots = np.zeros((0, 0))
    if knots.ndim != 2 or knots.shape[1] != 2 or len(knots) < 1 or not np.all(np.isfinite(knots)):
        raise InvalidInput(field, f"must be a list of [t (s), {quantity}] knots, e.g. {example}, got {value!r}")
    if knots[0, 0] != 0.0 or np.any(np.diff(knots[:, 0]) <= 0) or np.any(knots[:, 1] < lowest):
        raise InvalidInput(field, f"needs t₀ = 0, times increasing and values >= {lowest:g}, got {knots.tolist()!r}")
    return knots


def knot_rows(knots: np.ndarray) -> np.ndarray:
    """The coefficient rows of a schedule's knots: its K times, then its K values."""
    return np.concatenate([knots[:, 0], knots[:, 1]])


@lane_function
def piecewise_linear(coef, first, knots, t, b):
    """v(t) of the schedule whose ``knots`` times and then values start at row ``first`` of lane b's
    coefficients."""
    value = coef[first + 2 * knots - 1, b]
    for k in range(knots - 1, 0, -1):
        if t < coef[first + k, b]:
            start, stop = coef[first + k - 1, b], coef[first + k, b]
            low, high = coef[first + knots + k - 1, b], coef[first + knots + k, b]
            value = low + (high - low) * ((t - start) / (stop - start))
    return value


@lane_function
def constant_coefficients(coef, t):
    """``coefficients_at`` of a system whose coefficients do not change with time: nothing to set."""
