"""The implicit midpoint rule on canonical coordinates (q, p = M(q) q̇): a symplectic, symmetric,
second-order method for any Hamiltonian H(q, p) = ½ pᵀM(q)⁻¹p + V(q), here Kane's trees of revolute and
prismatic joints (Hairer, Lubich & Wanner, Geometric Numerical Integration, §VI.3).

One step solves, for the increments (Δq, Δp) and the midpoint (q_m, p_m) = (q_k + Δq/2, p_k + Δp/2),

    Δq = h M(q_m)⁻¹ p_m,    Δp = h F(q_m, M(q_m)⁻¹ p_m),    F = ∂T/∂q + f  (Lagrange's ṗ),

by Newton's method from the guess (h u_k, h F_k).  The Jacobian of this residual is computed once per step,
at the guess, by complex-step differentiation (Squire & Trapp, SIAM Rev. 40 (1998); Martins, Sturdza &
Alonso, ACM TOMS 29 (2003)): the system's code runs on complex numbers with an imaginary perturbation
1e-150 along each of the 2n directions and the imaginary part of the residual is its directional
derivative, exact to round-off (no difference quotient, nothing to tune): an automatic Jacobian.  The
iteration stops at ‖residual‖_∞ ≤ newton_tol ‖(Δq, Δp)‖_∞ of the guess, when the correction is round-off,
or when a correction is more than half the one before (the residual's round-off floor: u_m = M⁻¹p_m
carries cond(M) ulps, above newton_tol for long chains); ``newton_max_iterations`` bounds it (status 3
beyond).  The stored state holds u, so every step
forms p_k = M(q_k) u_k and ends with u_{k+1} = M(q_{k+1})⁻¹ p_{k+1} (Cholesky).  Blocks of one lane: each
member's Newton runs alone.
Free names bound at specialisation: ``system_work(n, lanes, zero)``, ``system_mass_into(x, n, coef,
topology, work, out)`` (M(q), (n, n, L)) and ``system_canonical_force_into(x, n, coef, topology, work, out)``
(F, (n, L)), in any float or complex dtype.
"""

import numpy as np

from ..lanes import cholesky_solve_in_lanes, lane_function, solve_pivoted_in_lanes
from ..status import NEWTON_FAILED
from .lgvi import NEWTON_MAX_ITERATIONS, NEWTON_TOLERANCE, ROUND_OFF_CORRECTION

#: the imaginary step of the complex-step derivatives: far below any real part's ulp, far above underflow
COMPLEX_STEP = 1e-150


def midpoint_allocate(rows, n, lanes):
    """Work: the system's work in real and complex numbers; per dtype a midpoint state (2n, 1), M (n, n, 1),
    F (n, 1), a residual (2n, 1) and the increments (2n, 1); p_k (n, 1); Newton's matrix (2n, 2n, 1)."""
    real, complex_ = 0.0, 0j
    return (system_work(n, 1, real), system_work(n, 1, complex_),  # noqa: F821 (bound at specialisation)
            np.empty((2 * n, 1)), np.empty((n, n, 1)), np.empty((n, 1)), np.empty((2 * n, 1)), np.empty((2 * n, 1)),
            np.empty((2 * n, 1), np.complex128), np.empty((n, n, 1), np.complex128), np.empty((n, 1), np.complex128),
            np.empty((2 * n, 1), np.complex128), np.empty((2 * n, 1), np.complex128),
            np.empty((n, 1)), np.empty((2 * n, 2 * n, 1)))


def midpoint_begin(x, n, coef, topology, h, options, work):
    pass


def midpoint_residual(x, n, coef, topology, h, momentum, delta, work, middle, mass, force, out):
    """out ← (Δq − h u_m, Δp − h F(q_m, u_m)) for the increments ``delta`` of lane 0, u_m = M(q_m)⁻¹ p_m,
    in the dtype of the buffers (middle, mass, force, out)."""
    for a in range(n):
        middle[a, 0] = x[a, 0] + 0.5 * delta[a, 0]
    system_mass_into(middle, n, coef, topology, work, mass)  # noqa: F821
    speeds = middle[n:]
    for a in range(n):
        speeds[a, 0] = momentum[a, 0] + 0.5 * delta[n + a, 0]
    cholesky_solve_in_lanes(mass, speeds)
    system_canonical_force_into(middle, n, coef, topology, work, force)  # noqa: F821
    for a in range(n):
        out[a, 0] = delta[a, 0] - h * speeds[a, 0]
        out[n + a, 0] = delta[n + a, 0] - h * force[a, 0]


@lane_function
def largest_magnitude(v):
    """max |v| over a (k, 1) array."""
    largest = 0.0
    for r in range(v.shape[0]):
        largest = max(largest, abs(v[r, 0]))
    return largest


def midpoint_step(x, n, coef, topology, t, h, options, work, active, code, iterations):
    """One implicit midpoint step of lane 0 (see the module docstring)."""
    (real_work, complex_work, middle, mass, force, residual, delta, c_middle, c_mass, c_force, c_residual, c_delta,
     momentum, jacobian) = work
    code[0] = 0
    iterations[0] = 0
    system_mass_into(x, n, coef, topology, real_work, mass)  # noqa: F821
    system_canonical_force_into(x, n, coef, topology, real_work, force)  # noqa: F821
    for a in range(n):
        total = 0.0
        for c in range(n):
            total += mass[a, c, 0] * x[n + c, 0]
        momentum[a, 0] = total
        delta[a, 0] = h * x[n + a, 0]
        delta[n + a, 0] = h * force[a, 0]
    scale = largest_magnitude(delta)
    for column in range(2 * n):
        for r in range(2 * n):
            c_delta[r, 0] = delta[r, 0]
        c_delta[column, 0] += 1j * COMPLEX_STEP
        midpoint_residual(x, n, coef, topology, h, momentum, c_delta, complex_work, c_middle, c_mass, c_force,
                          c_residual)
        for r in range(2 * n):
            jacobian[r, column, 0] = c_residual[r, 0].imag / COMPLEX_STEP
    tol = options[NEWTON_TOLERANCE]
    max_iterations = int(options[NEWTON_MAX_ITERATIONS])
    converged = scale == 0.0
    count = 0
    previous = np.inf
    while not converged and count <= max_iterations:
        midpoint_residual(x, n, coef, topology, h, momentum, delta, real_work, middle, mass, force, residual)
        if largest_magnitude(residual) <= tol * scale:
            converged = True
            break
        if count == max_iterations:
            break
        newton_matrix = jacobian.copy()
        solve_pivoted_in_lanes(newton_matrix, residual)
        for r in range(2 * n):
            delta[r, 0] -= residual[r, 0]
        count += 1
        correction = largest_magnitude(residual)
        # at the residual's round-off floor (u_m = M⁻¹p_m carries cond(M) ulps) the corrections stop shrinking
        if correction <= ROUND_OFF_CORRECTION * largest_magnitude(delta) or correction > 0.5 * previous:
            converged = True
        previous = correction
    iterations[0] = count
    if not converged and active[0]:
        code[0] = NEWTON_FAILED
    for a in range(n):
        x[a, 0] += delta[a, 0]
        momentum[a, 0] += delta[n + a, 0]
    system_mass_into(x, n, coef, topology, real_work, mass)  # noqa: F821
    cholesky_solve_in_lanes(mass, momentum)
    for a in range(n):
        x[n + a, 0] = momentum[a, 0]
