"""``nhvi``: a reversible nonholonomic integrator for rolling bodies — the implicit midpoint rule on the
velocities, the contact point and the rail coordinates, with the attitude moved by the Cayley map of the
midpoint angular velocity:

    R_{k+1} = R_k cay(h Ω_{k+½}),   y_{k+1} = y_k + h Y(x_{k+½}),   x_{k+½} = (x_k + x_{k+1}) / 2,

where y is every row but R's (Ω, contact point, clock, work, θ, θ̇) and Y the system's vector field, which
reads the attitude only through R_{k+½}'s rows: Γ_{k+½} (its third row) and ω = R_{k+½} Ω_{k+½}.

Why this scheme (README, "Rolling ball"): Modin & Verdier (Numer. Math. 2020) show that for
nonholonomic systems it is reversibility, not a discrete variational (Lagrange–d'Alembert) structure,
that gives integrators bounded energy errors over long times (reversible integrators of reversible
integrable systems have no drift, by the same KAM-type argument as symplectic ones); McLachlan &
Perlmutter's nonholonomic integrators are likewise built as reversible maps.  This map is symmetric:
stepping x_{k+1} back by −h gives x_k exactly in exact arithmetic (cay(−ξ) = cay(ξ)⁻¹ and the midpoint
rule is symmetric), and the rolling ball with fixed masses is reversible under (R, Ω, t) → (R, −Ω, −t).
Moreover, Γ = Rᵀe₃ evolves by Γ_{k+1} = cay(−h Ω̂_{k+½}) Γ_k, which is exactly the midpoint rule for
Γ̇ = Γ × Ω: the reduced (Ω, Γ) system (digest_004 §4, "reduced system") is stepped by the implicit
midpoint rule, which keeps |Γ| = 1 (a quadratic invariant), and R stays on SO(3) to round-off.

What it keeps: R ∈ SO(3) and |Γ| = 1 exactly (to round-off); reversibility; the rolling constraint in
its discrete form x_{k+1} − x_k = h r (ω₂, −ω₁)_{k+½}.  What it does not keep exactly: the energy (not a
quadratic invariant: ½Σ m_i|Ω × s_i|² is quartic in (Ω, Γ)), which reversibility keeps bounded instead
(tests: over 10⁶ steps the last tenth's error within 2× the first's on ``chaplygin`` and
``routh_sphere``), and the Chaplygin and Jellett integrals (likewise bounded).  Prescribed masses make the
equations time-dependent; the clock row is stepped like any other (t_{k+1} = t_k + h, the midpoint at
t_k + h/2).

The implicit equations are solved by fixed-point iteration from an explicit Euler predictor, each lane
on its own until its increment is below ``newton_tol`` (relative to 1 + |value|), so a member's bits never depend on the others in its block; a lane that has not converged after
``newton_max_iterations`` gets NEWTON_FAILED.  Fixed-point iteration contracts by ≈ h‖∂Y/∂x‖/2 per sweep.

Free names bound at specialisation: ``vector_field``, ``vector_field_work`` (the system's), and the
constant ``ATTITUDE`` (whether rows 0 … 8 hold R and rows 9 … 11 Ω, as on the ``rolling`` space).
"""

import numpy as np

from ..spaces.rolling import OMEGA
from ..status import NEWTON_FAILED
from .lgvi import NEWTON_MAX_ITERATIONS, NEWTON_TOLERANCE


def nhvi_allocate(rows, n, lanes):
    """Work: x_{k+1}'s iterate, the midpoint, Y(midpoint), the vector field's work and whether each lane
    has converged."""
    return (np.empty((rows, lanes)), np.empty((rows, lanes)), np.empty((rows, lanes)),
            vector_field_work(rows, n, lanes), np.empty(lanes))  # noqa: F821


def nhvi_begin(x, n, coef, topology, h, options, work):
    pass


def cayley_step(x, target, mid, h, b):
    """target's R (rows 0 … 8) ← x's R cay(h Ω̂) with Ω = mid's rows OMEGA … OMEGA + 2, lane b:
    cay(ξ̂) = I + 4/(4 + |ξ|²) (ξ̂ + ξ̂²/2)."""
    x0, x1, x2 = h * mid[OMEGA, b], h * mid[OMEGA + 1, b], h * mid[OMEGA + 2, b]
    scale = 4.0 / (4.0 + x0 * x0 + x1 * x1 + x2 * x2)
    # C = I + scale (ξ̂ + ξ̂²/2), ξ̂² = ξξᵀ − |ξ|² I
    square = x0 * x0 + x1 * x1 + x2 * x2
    c00 = 1.0 + scale * 0.5 * (x0 * x0 - square)
    c11 = 1.0 + scale * 0.5 * (x1 * x1 - square)
    c22 = 1.0 + scale * 0.5 * (x2 * x2 - square)
    c01 = scale * (-x2 + 0.5 * x0 * x1)
    c10 = scale * (x2 + 0.5 * x0 * x1)
    c02 = scale * (x1 + 0.5 * x0 * x2)
    c20 = scale * (-x1 + 0.5 * x0 * x2)
    c12 = scale * (-x0 + 0.5 * x1 * x2)
    c21 = scale * (x0 + 0.5 * x1 * x2)
    for r in range(3):
        r0, r1, r2 = x[3 * r, b], x[3 * r + 1, b], x[3 * r + 2, b]
        target[3 * r, b] = r0 * c00 + r1 * c10 + r2 * c20
        target[3 * r + 1, b] = r0 * c01 + r1 * c11 + r2 * c21
        target[3 * r + 2, b] = r0 * c02 + r1 * c12 + r2 * c22


def nhvi_update(x, target, mid, field, h, b, first):
    """target ← the step's map at the midpoint ``mid`` with Y(mid) = ``field``, lane b; returns the largest
    relative change of target's non-attitude rows."""
    change = 0.0
    if ATTITUDE:  # noqa: F821
        cayley_step(x, target, mid, h, b)
    for r in range(first, x.shape[0]):
        value = x[r, b] + h * field[r, b]
        change = max(change, abs(value - target[r, b]) / (1.0 + abs(value)))
        target[r, b] = value
    return change


def nhvi_step(x, n, coef, topology, t, h, options, work, active, code, iterations):
    """One step of size h (s) from x (in place)."""
    new, mid, field, field_work, done = work
    lanes = x.shape[1]
    rows = x.shape[0]
    first = OMEGA if ATTITUDE else 0  # noqa: F821 (the rows after R's)
    tol = options[NEWTON_TOLERANCE]
    max_iterations = int(options[NEWTON_MAX_ITERATIONS])
    # explicit Euler predictor: x_{k+1} ≈ the map with the midpoint at x_k
    vector_field(x, n, coef, topology, t, field, field_work)  # noqa: F821
    for b in range(lanes):
        code[b] = 0
        iterations[b] = 0
        done[b] = 0.0 if active[b] else 1.0
        for r in range(rows):
            new[r, b] = x[r, b]
        nhvi_update(x, new, x, field, h, b, first)
    for sweep in range(max_iterations):
        remaining = 0
        for b in range(lanes):
            if done[b] == 0.0:
                remaining += 1
                for r in range(rows):
                    mid[r, b] = 0.5 * (x[r, b] + new[r, b])
            else:
                for r in range(rows):
                    mid[r, b] = new[r, b]  # any finite state: this lane's result is already fixed
        if remaining == 0:
            break
        vector_field(mid, n, coef, topology, t + 0.5 * h, field, field_work)  # noqa: F821
        for b in range(lanes):
            if done[b] != 0.0:
                continue
            change = nhvi_update(x, new, mid, field, h, b, first)
            iterations[b] = sweep + 1
            if change <= tol or not change == change:  # (a NaN is the driver's NON_FINITE)
                done[b] = 1.0
    for b in range(lanes):
        if done[b] == 0.0:
            code[b] = NEWTON_FAILED
        for r in range(rows):
            x[r, b] = new[r, b]
