"""Benettin's method for the maximal Lyapunov exponent: a shadow copy of each member.

The shadow starts a distance d0 from its member along a tangent direction of its space, is stepped by
the same integrator, and every ``renormalise_every`` steps is pulled back towards the member to
distance d0 and put back on the manifold exactly (on T(S²)ⁿ: each q_i normalised, each ω_i projected
tangent to it; on SO(3)ⁿ see :mod:`kernels.spaces.rotation`).  The lane stages of the (S²)ⁿ kernels
are here; those of flat spaces are in :mod:`kernels.flat_driver`.
The log of the growth factors accumulates; the finite-time maximal exponent at time t is
λ(t) = [Σ_k ln(d_k / d_{k−1}^+) + ln(d(t) / d_last^+)] / t (1/s), with d^+ the distance right
after a renormalisation (Benettin, Galgani, Giorgilli & Strelcyn 1980).

Distance in phase space: the Euclidean norm of the state difference (on (S²)ⁿ (q_s − q, ω_s − ω) in
R^{6n}, q dimensionless and ω in rad/s, so one unit of angle and one rad/s weigh the same).  Every operation here is a +, −, ×,
÷, sqrt or (scalar, libm) log per member, so shadows stay bitwise independent of block grouping.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .errors import InvalidInput
from .lanes import lane_function
from .status import OK


@dataclass(frozen=True)
class Shadow:
    """The shadow copies of an ensemble, carried through :func:`kernels.integrate` and across restarts.

    state: the shadows' states (the space's variables, leading member axis); log_growth: (members,)
    Σ ln(d_k / d_{k−1}^+) over the renormalisations so far; reference: (members,) the distance right
    after the last renormalisation (or the initial displacement); d0: the distance each
    renormalisation restores; renormalise_every: steps between renormalisations, counted from
    ``step_offset``'s origin, the global index of the step before the call's first step (so segments
    of a run renormalise at the same steps as one uninterrupted call).
    """

    state: dict
    log_growth: np.ndarray
    reference: np.ndarray
    d0: float
    renormalise_every: int
    step_offset: int = 0


def displaced_shadow(space, state: dict, directions, d0: float, renormalise_every: int) -> Shadow:
    """Shadows of members ``state`` (the space's variables, leading member axis) displaced by d0 along
    tangent ``directions`` (members, space.normal_count(n)), e.g. standard normals, by the space's
    retraction (:meth:`~kernels.spaces.StateSpace.displace`); the exact initial distance is kept as the
    first reference."""
    if not (np.isfinite(d0) and 0 < d0 < 1):
        raise InvalidInput("d0", f"must be a number in (0, 1), got {d0!r}")
    if isinstance(renormalise_every, bool) or not isinstance(renormalise_every, (int, np.integer)) \
            or renormalise_every < 1:
        raise InvalidInput("renormalise_every", f"must be an integer >= 1, got {renormalise_every!r}")
    state = {name: np.asarray(value, dtype=np.float64) for name, value in state.items()}
    moved = space.displace(state, np.asarray(directions, dtype=np.float64), float(d0))
    return Shadow(moved, np.zeros(len(next(iter(state.values())))), space.distance(state, moved), float(d0),
                  int(renormalise_every))


@lane_function
def phase_distance(q, omega, shadow_q, shadow_omega, out):
    """‖(q_s − q, ω_s − ω)‖ per lane into ``out`` (L,)."""
    lanes = q.shape[2]
    for b in range(lanes):
        out[b] = 0.0
    for i in range(q.shape[0]):
        for k in range(3):
            for b in range(lanes):
                dq = shadow_q[i, k, b] - q[i, k, b]
                dw = shadow_omega[i, k, b] - omega[i, k, b]
                out[b] += dq * dq + dw * dw
    for b in range(lanes):
        out[b] = np.sqrt(out[b])


@lane_function
def renormalise_shadow(q, omega, shadow_q, shadow_omega, d0, log_growth, reference, distance):
    """Accumulate ln(d / reference) and pull each shadow back to distance d0 along its current
    displacement, on T(S²)ⁿ exactly; ``reference`` becomes the distance after the pull."""
    n = q.shape[0]
    lanes = q.shape[2]
    phase_distance(q, omega, shadow_q, shadow_omega, distance)
    for b in range(lanes):
        log_growth[b] += np.log(distance[b] / reference[b])
        distance[b] = d0 / distance[b]  # the pull factor
    for i in range(n):
        for b in range(lanes):
            s0 = q[i, 0, b] + distance[b] * (shadow_q[i, 0, b] - q[i, 0, b])
            s1 = q[i, 1, b] + distance[b] * (shadow_q[i, 1, b] - q[i, 1, b])
            s2 = q[i, 2, b] + distance[b] * (shadow_q[i, 2, b] - q[i, 2, b])
            norm = np.sqrt(s0 * s0 + s1 * s1 + s2 * s2)
            s0, s1, s2 = s0 / norm, s1 / norm, s2 / norm
            w0 = omega[i, 0, b] + distance[b] * (shadow_omega[i, 0, b] - omega[i, 0, b])
            w1 = omega[i, 1, b] + distance[b] * (shadow_omega[i, 1, b] - omega[i, 1, b])
            w2 = omega[i, 2, b] + distance[b] * (shadow_omega[i, 2, b] - omega[i, 2, b])
            along = s0 * w0 + s1 * w1 + s2 * w2
            shadow_q[i, 0, b], shadow_q[i, 1, b], shadow_q[i, 2, b] = s0, s1, s2
            shadow_omega[i, 0, b] = w0 - along * s0
            shadow_omega[i, 1, b] = w1 - along * s1
            shadow_omega[i, 2, b] = w2 - along * s2
    phase_distance(q, omega, shadow_q, shadow_omega, reference)


@lane_function
def record_log_growth(sample, q, omega, shadow_q, shadow_omega, first, members, log_growth, reference, out, distance):
    """out[m, sample] = log_growth + ln(d / reference): the exponent's numerator at this sample."""
    phase_distance(q, omega, shadow_q, shadow_omega, distance)
    for b in range(q.shape[2]):
        m = first + b
        if m >= members:
            break
        out[m, sample] = log_growth[b] + np.log(distance[b] / reference[b])


@lane_function
def forget_failed_shadows(shadow_code, log_growth):
    """A shadow whose step failed has no meaningful exponent: its log_growth becomes NaN for good."""
    for b in range(log_growth.shape[0]):
        if shadow_code[b] != OK:
            log_growth[b] = np.nan


# Templates bound by kernels.compile into the fixed-step driver (``shadow_begin``, ``shadow_step``):
# the real stages for kernels that carry shadows, the empty ones otherwise.  They call the method's
# ``integrator_begin`` / ``integrator_step``, bound at specialisation.

def shadow_begin_template(shadow_q, shadow_omega, mass_diag, mass_full, coef, topology, h, options, work):
    """Start the shadows' integrator (its cached state, e.g. ∂V/∂q, at the shadow's q)."""
    integrator_begin(shadow_q, shadow_omega, mass_diag, mass_full, coef, topology, h, options, work)  # noqa: F821


def shadow_step_template(step, q, omega, shadow_q, shadow_omega, mass_diag, mass_full, coef, topology, h, options,
                         work, active, shadow_code, shadow_iterations, d0, renormalise_every, log_growth, reference,
                         distance):
    """Step the shadows with the members' integrator, forget failed ones, and renormalise at every
    global ``step`` divisible by ``renormalise_every``."""
    integrator_step((step - 1) * h, shadow_q, shadow_omega, mass_diag, mass_full, coef, topology, h,  # noqa: F821
                    options, work, active, shadow_code, shadow_iterations)
    forget_failed_shadows(shadow_code, log_growth)
    if step % renormalise_every == 0:
        renormalise_shadow(q, omega, shadow_q, shadow_omega, d0, log_growth, reference, distance)
        # the integrator's cached state must follow the moved shadow
        integrator_begin(shadow_q, shadow_omega, mass_diag, mass_full, coef, topology, h, options,  # noqa: F821
                         work)


def no_shadow_begin(shadow_q, shadow_omega, mass_diag, mass_full, coef, topology, h, options, work):
    """Kernels without shadows: nothing to start."""


def no_shadow_step(step, q, omega, shadow_q, shadow_omega, mass_diag, mass_full, coef, topology, h, options,
                   work, active, shadow_code, shadow_iterations, d0, renormalise_every, log_growth, reference,
                   distance):
    """Kernels without shadows: nothing to step."""


#: (bound name, template) of the driver's shadow stages, with and without shadows
SHADOW_STAGES = {True: (("shadow_begin", shadow_begin_template), ("shadow_step", shadow_step_template)),
                 False: (("shadow_begin", no_shadow_begin), ("shadow_step", no_shadow_step))}
