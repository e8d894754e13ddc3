"""A Lie group variational integrator on SE(3)ⁿ for a left-invariant quadratic Lagrangian with a full 6×6
generalised inertia 𝕄 = [[J, 𝕄₁₂], [𝕄₂₁, 𝕄₂₂]] (order (Ω, V)) and potential loads (Kirchhoff's equations
of :mod:`kernels.systems.kirchhoff_body`), in flat lane layout.

With g_k = (R_k, x_k) and the relative step (F, t) = g_k⁻¹ g_{k+1} (F = R_kᵀR_{k+1}, t = R_kᵀ(x_{k+1} − x_k)),
the discrete Lagrangian is

    h L_d = tr((1 − F) J_d) + ¼ w·𝕄₁₂(t + s) + ¼ (t·𝕄₂₂t + s·𝕄₂₂s) − (h²/2)(V(g_k) + V(g_{k+1})),

J_d = ½ tr(J) 1 − J, w = (F − Fᵀ)^∨, s = Fᵀt: Lee–Leok–McClamroch's rotational term (CMAME 196 (2007),
eq. (29) of the full body problem) plus the translational and coupling terms of ½ zᵀ𝕄z with Ω ≈ w/(2h),
V ≈ (t + s)/(2h).  It is left-invariant and symmetric (L_d(F, t) = L_d(Fᵀ, −s): g_k and g_{k+1}
exchange), so the method is second order, keeps the spatial impulse (Noether) and reduces to the
SO(3) ``lgvi`` when 𝕄₁₂ = 0 and 𝕄₂₂ = m 1 (then x_{k+1} = x_k + h R_k V_k exactly).  Its discrete
Euler–Poincaré equations, with (K, P) = 𝕄z the body momenta and (τ, f) the loads (torque about O, force):

    h K_k + (h²/2) τ_k = s_c (Jf + f × Jf) + ¼ (tr F 1 − Fᵀ) 𝕄₁₂ρ + ¼ t × 𝕄₂₁w + ½ t × 𝕄₂₂t,
    h P_k + (h²/2) f_k = ¼ (1 + F) 𝕄₂₁w + ½ (𝕄₂₂t + F 𝕄₂₂s),
    K_{k+1} = Fᵀ(c_K − t × c_P) + (h/2) τ_{k+1},    P_{k+1} = Fᵀ c_P + (h/2) f_{k+1},

with ρ = t + s, c = (K, P)_k + (h/2)(τ, f)_k, and F = cay(f) = 1 + s_c (f̂ + f̂²), s_c = 2/(1 + |f|²) (so
w = 2 s_c f and (FJ_d − J_dFᵀ)^∨ = s_c (Jf + f × Jf)).  The last line is Ad*_{(F, t)} of the first two:
the spatial impulse (R K + x × R P, R P) of step k + 1 equals step k's whatever (F, t) the solve returns,
and with loads its parts that the loads leave alone.  The first two lines are solved for (f, t), to
‖residual‖_∞ ≤ newton_tol ‖h c‖_∞ (or a correction at round-off), from a second-order first guess by chord
iterations: Newton's matrix frozen at (f, t) = 0, where it is 𝕄 diag(2, 2, 2, 1, 1, 1) (s_c = 2, F = 1, s = t:
the t-terms cancel), so each correction is diag(½, ½, ½, 1, 1, 1) 𝕄⁻¹ r with the stored 𝕄⁻¹ and the iteration
needs no Jacobian, factorisation or pivoting: it runs as SIMD across the lanes.  It contracts by about
|f| ‖J‖/λ_min(J) per iteration (4e-4 on ``ellipsoid`` at h = 1e-3: four iterations, where Newton needed one
but built a 6×6 Jacobian and solved it with pivoting, lane by lane: 56 % and 15 % of the step's time).
Lanes it leaves after CHORD_MAX_ITERATIONS (coarse steps) start over from the guess with Newton's method
and the analytic Jacobian (its columns are the equations' directional derivatives, with δF = F α̂,
α = s_c (δf − f × δf), δs = s × α + Fᵀδt).

The stored state holds velocities, so every step recovers (Ω, V) = 𝕄⁻¹(K, P) and the next rebuilds (K, P) = 𝕄z.
Done plainly, the round trip loses an ulp-sized amount that is correlated from step to step when the body-frame
momenta change slowly, and the impulse drifts linearly in round-off: over 10⁵ steps of ``ellipsoid`` 3.3e-12
relative with the product by 𝕄⁻¹, 1.3e-11 with Cholesky solves, 1.4e-12 with one step of iterative
refinement whose residual is computed in working precision.  This method computes that residual (K, P) − 𝕄y
as if in twice the precision (Ogita–Rump–Oishi's Dot2 with FMA, :func:`kernels.lanes.compensated_dot6`), so
the refined velocities are 𝕄⁻¹(K, P) to about an ulp and the drift is 2.9e-14 (1.5e-14 when the momenta are
kept between steps instead), for about 5 % of the step rate.
Free names bound at specialisation: ``system_torque`` (the loads, rows 6i … 6i + 5 of each body).
"""

import numpy as np

from ..lanes import cross3 as cross
from ..lanes import inline_lane_function, lane_function, solve_pivoted_in_lanes
from ..status import NEWTON_FAILED
from ..systems.rigid import INVERSE6, MOTION_HEADER, compensated_matrix6_times, kirchhoff_rates, matrix6_times
from .lgvi import ROUND_OFF_CORRECTION, start_newton_step

#: simplified-Newton (chord) iterations a block runs in SIMD before its unconverged lanes start over with
#: Newton's method; the chord contracts by ≈ 4e-4 per iteration on ``ellipsoid`` at h = 1e-3 (4 suffice
#: there), and it stalls where the step is too coarse for the frozen matrix (``plate`` at h = 1e-2)
CHORD_MAX_ITERATIONS = 8


@lane_function
def unit(c, j):
    """Component j of the c-th unit vector."""
    return 1.0 if c == j else 0.0


@inline_lane_function
def block_times(coef, k, b, row, col, v0, v1, v2):
    """The 3×3 block (rows row … row + 2, columns col … col + 2) of the 6×6 matrix at coefficient row k
    times v, lane b."""
    r = k + 6 * row + col
    return (coef[r, b] * v0 + coef[r + 1, b] * v1 + coef[r + 2, b] * v2,
            coef[r + 6, b] * v0 + coef[r + 7, b] * v1 + coef[r + 8, b] * v2,
            coef[r + 12, b] * v0 + coef[r + 13, b] * v1 + coef[r + 14, b] * v2)


@inline_lane_function
def rotate(A, v0, v1, v2):
    """F v = v + A v for the increment A = F − 1 (nine entries, row-major; round-off relative to A, not to F)."""
    return (v0 + (A[0] * v0 + A[1] * v1 + A[2] * v2), v1 + (A[3] * v0 + A[4] * v1 + A[5] * v2),
            v2 + (A[6] * v0 + A[7] * v1 + A[8] * v2))


@inline_lane_function
def rotate_back(A, v0, v1, v2):
    """Fᵀ v = v + Aᵀ v for the increment A = F − 1 (nine entries, row-major)."""
    return (v0 + (A[0] * v0 + A[3] * v1 + A[6] * v2), v1 + (A[1] * v0 + A[4] * v1 + A[7] * v2),
            v2 + (A[2] * v0 + A[5] * v1 + A[8] * v2))


@inline_lane_function
def cayley_increment(f0, f1, f2):
    """(s_c, A): s_c = 2/(1 + |f|²) and A = cay(f) − 1 = s_c (f̂ + f fᵀ − |f|² 1) as nine entries, row-major
    (values, not an array, so that the lane loops calling it stay SIMD)."""
    ss = f0 * f0 + f1 * f1 + f2 * f2
    sc = 2.0 / (1.0 + ss)
    return sc, (sc * (f0 * f0 - ss), sc * (-f2 + f0 * f1), sc * (f1 + f0 * f2),
                sc * (f2 + f1 * f0), sc * (f1 * f1 - ss), sc * (-f0 + f1 * f2),
                sc * (-f1 + f2 * f0), sc * (f0 + f2 * f1), sc * (f2 * f2 - ss))


@inline_lane_function
def motion_equations(coef, k, b, A, sc, f0, f1, f2, t0, t1, t2):
    """The right-hand sides of the first two discrete Euler–Poincaré equations at (f, t) (see the module
    docstring) for F = 1 + A, s_c = 2/(1 + |f|²): the rotational (kg·m²·rad) and translational (kg·m) parts."""
    s0, s1, s2 = rotate_back(A, t0, t1, t2)
    trace = 3.0 + (A[0] + A[4] + A[8])
    m0, m1, m2 = block_times(coef, k, b, 3, 0, 2.0 * sc * f0, 2.0 * sc * f1, 2.0 * sc * f2)
    q0, q1, q2 = block_times(coef, k, b, 0, 3, t0 + s0, t1 + s1, t2 + s2)
    u0, u1, u2 = rotate_back(A, q0, q1, q2)
    j0, j1, j2 = block_times(coef, k, b, 0, 0, f0, f1, f2)
    c0, c1, c2 = cross(f0, f1, f2, j0, j1, j2)
    a0, a1, a2 = cross(t0, t1, t2, m0, m1, m2)
    n0, n1, n2 = block_times(coef, k, b, 3, 3, t0, t1, t2)
    d0, d1, d2 = cross(t0, t1, t2, n0, n1, n2)
    e0, e1, e2 = block_times(coef, k, b, 3, 3, s0, s1, s2)
    fm0, fm1, fm2 = rotate(A, m0 + 2.0 * e0, m1 + 2.0 * e1, m2 + 2.0 * e2)
    return (sc * (j0 + c0) + 0.25 * (trace * q0 - u0 + a0) + 0.5 * d0,
            sc * (j1 + c1) + 0.25 * (trace * q1 - u1 + a1) + 0.5 * d1,
            sc * (j2 + c2) + 0.25 * (trace * q2 - u2 + a2) + 0.5 * d2,
            0.25 * (m0 + fm0) + 0.5 * n0, 0.25 * (m1 + fm1) + 0.5 * n1, 0.25 * (m2 + fm2) + 0.5 * n2)


@lane_function
def motion_equations_tangent(coef, k, b, A, sc, f0, f1, f2, t0, t1, t2, df0, df1, df2, dt0, dt1, dt2):
    """The directional derivative of :func:`motion_equations` at (f, t) along (δf, δt): one column of
    Newton's Jacobian."""
    s0, s1, s2 = rotate_back(A, t0, t1, t2)
    trace = 3.0 + (A[0] + A[4] + A[8])
    fdf = f0 * df0 + f1 * df1 + f2 * df2
    dsc = -sc * sc * fdf  # δs_c
    x0, x1, x2 = cross(f0, f1, f2, df0, df1, df2)
    al0, al1, al2 = sc * (df0 - x0), sc * (df1 - x1), sc * (df2 - x2)  # α, δF = F α̂
    y0, y1, y2 = cross(s0, s1, s2, al0, al1, al2)
    z0, z1, z2 = rotate_back(A, dt0, dt1, dt2)
    ds0, ds1, ds2 = y0 + z0, y1 + z1, y2 + z2  # δs
    dw0, dw1, dw2 = 2.0 * (sc * df0 + dsc * f0), 2.0 * (sc * df1 + dsc * f1), 2.0 * (sc * df2 + dsc * f2)
    dtrace = -2.0 * sc * sc * fdf
    # rotational term s_c (Jf + f × Jf)
    j0, j1, j2 = block_times(coef, k, b, 0, 0, f0, f1, f2)
    jd0, jd1, jd2 = block_times(coef, k, b, 0, 0, df0, df1, df2)
    c0, c1, c2 = cross(f0, f1, f2, j0, j1, j2)
    e0, e1, e2 = cross(df0, df1, df2, j0, j1, j2)
    g0, g1, g2 = cross(f0, f1, f2, jd0, jd1, jd2)
    r0 = dsc * (j0 + c0) + sc * (jd0 + e0 + g0)
    r1 = dsc * (j1 + c1) + sc * (jd1 + e1 + g1)
    r2 = dsc * (j2 + c2) + sc * (jd2 + e2 + g2)
    # ¼ (tr F 1 − Fᵀ) q with q = 𝕄₁₂ρ: δ = ¼ (δtr q + α × Fᵀq + tr δq − Fᵀδq)
    q0, q1, q2 = block_times(coef, k, b, 0, 3, t0 + s0, t1 + s1, t2 + s2)
    dq0, dq1, dq2 = block_times(coef, k, b, 0, 3, dt0 + ds0, dt1 + ds1, dt2 + ds2)
    u0, u1, u2 = rotate_back(A, q0, q1, q2)
    v0, v1, v2 = cross(al0, al1, al2, u0, u1, u2)
    du0, du1, du2 = rotate_back(A, dq0, dq1, dq2)
    r0 += 0.25 * (dtrace * q0 + v0 + trace * dq0 - du0)
    r1 += 0.25 * (dtrace * q1 + v1 + trace * dq1 - du1)
    r2 += 0.25 * (dtrace * q2 + v2 + trace * dq2 - du2)
    # ¼ t × m, m = 𝕄₂₁w; ½ t × 𝕄₂₂t
    m0, m1, m2 = block_times(coef, k, b, 3, 0, 2.0 * sc * f0, 2.0 * sc * f1, 2.0 * sc * f2)
    dm0, dm1, dm2 = block_times(coef, k, b, 3, 0, dw0, dw1, dw2)
    a0, a1, a2 = cross(dt0, dt1, dt2, m0, m1, m2)
    b0, b1, b2 = cross(t0, t1, t2, dm0, dm1, dm2)
    n0, n1, n2 = block_times(coef, k, b, 3, 3, t0, t1, t2)
    dn0, dn1, dn2 = block_times(coef, k, b, 3, 3, dt0, dt1, dt2)
    h0, h1, h2 = cross(dt0, dt1, dt2, n0, n1, n2)
    i0, i1, i2 = cross(t0, t1, t2, dn0, dn1, dn2)
    r0 += 0.25 * (a0 + b0) + 0.5 * (h0 + i0)
    r1 += 0.25 * (a1 + b1) + 0.5 * (h1 + i1)
    r2 += 0.25 * (a2 + b2) + 0.5 * (h2 + i2)
    # translational: ¼ (δm + F(α × m + δm)) + ½ (𝕄₂₂δt + F(α × 𝕄₂₂s + 𝕄₂₂δs))
    e0, e1, e2 = block_times(coef, k, b, 3, 3, s0, s1, s2)
    de0, de1, de2 = block_times(coef, k, b, 3, 3, ds0, ds1, ds2)
    p0, p1, p2 = cross(al0, al1, al2, m0 + 2.0 * e0, m1 + 2.0 * e1, m2 + 2.0 * e2)
    w0, w1, w2 = rotate(A, p0 + dm0 + 2.0 * de0, p1 + dm1 + 2.0 * de1, p2 + dm2 + 2.0 * de2)
    return (r0, r1, r2, 0.25 * (dm0 + w0) + 0.5 * dn0, 0.25 * (dm1 + w1) + 0.5 * dn1,
            0.25 * (dm2 + w2) + 0.5 * dn2)


@inline_lane_function
def first_guess(x, n, coef, k, b, loads, i, h):
    """Newton's first guess (f, t) for body i (header at coefficient row k), lane b, second order from
    Kirchhoff's accelerations (Ω̇, V̇) at step k: F ≈ exp(hΩ̂ + (h²/2)Ω̇^), whose Cayley vector is
    ≈ (h/2)(Ω + (h/2)Ω̇), and t ≈ h V + (h²/2)(V̇ + Ω × V) (its residual ≈ 2e-7 of ‖h c‖ on ``ellipsoid`` at
    h = 1e-3, against ≈ 1e-4 for the first-order (h/2)Ω, hV)."""
    half_h = 0.5 * h
    w = 12 * n + 3 * i
    v = 15 * n + 3 * i
    w0, w1, w2 = x[w, b], x[w + 1, b], x[w + 2, b]
    v0, v1, v2 = x[v, b], x[v + 1, b], x[v + 2, b]
    e0, e1, e2, a0, a1, a2 = kirchhoff_rates(coef, k, b, w0, w1, w2, v0, v1, v2, loads, i)
    c0, c1, c2 = cross(w0, w1, w2, v0, v1, v2)
    return (half_h * (w0 + half_h * e0), half_h * (w1 + half_h * e1), half_h * (w2 + half_h * e2),
            h * (v0 + half_h * (a0 + c0)), h * (v1 + half_h * (a1 + c1)), h * (v2 + half_h * (a2 + c2)))


def lgvi_motion_allocate(rows, n, lanes):
    """Work: loads at t_k and t_{k+1} (6n, L), c = (K, P) + (h/2)(τ, f) (6n, L), F − 1 and t (12n, L), per body the
    unknowns (f, t), ‖h c‖_∞ and 1 where the lane has converged (8n, L), and Newton's matrix (6, 6, 1) and
    right-hand side (6, 1) for one lane."""
    return (np.empty((6 * n, lanes)), np.empty((6 * n, lanes)), np.empty((6 * n, lanes)), np.empty((12 * n, lanes)),
            np.empty((8 * n, lanes)), np.empty((6, 6, 1)), np.empty((6, 1)))


def lgvi_motion_begin(x, n, coef, topology, h, options, work):
    system_torque(x, n, coef, topology, work[0])  # noqa: F821 (bound at specialisation)


def lgvi_motion_step(x, n, coef, topology, t, h, options, work, active, code, iterations):
    """One step for every lane (see the module docstring).  The chord iterations run as SIMD over the block,
    each lane frozen once it has converged, and Newton runs per lane (scalar code) for the lanes they leave,
    so a member's bits never depend on the others in its block."""
    loads, loads_next, carried, increment, unknowns, jacobian, residual = work
    lanes, half_h, tol, max_iterations = start_newton_step(x, h, options, code, iterations)
    for i in range(n):
        base = 9 * i
        p = 9 * n + 3 * i
        w = 12 * n + 3 * i
        v = 15 * n + 3 * i
        k = MOTION_HEADER * i
        c = 6 * i
        # body i's rows of the unknowns: (f, t) u … u + 5, ‖h c‖_∞ u + 6, converged (1) or not (0) u + 7
        u = 8 * i
        # two lane loops, not one: a loop writing more rows needs more runtime overlap checks than the
        # vectoriser allows (kernels/llvm_options.py) and runs as scalar code
        for b in range(lanes):
            w0, w1, w2 = x[w, b], x[w + 1, b], x[w + 2, b]
            v0, v1, v2 = x[v, b], x[v + 1, b], x[v + 2, b]
            k0, k1, k2, p0, p1, p2 = matrix6_times(coef, k, b, w0, w1, w2, v0, v1, v2)
            carried[c, b] = k0 + half_h * loads[c, b]
            carried[c + 1, b] = k1 + half_h * loads[c + 1, b]
            carried[c + 2, b] = k2 + half_h * loads[c + 2, b]
            carried[c + 3, b] = p0 + half_h * loads[c + 3, b]
            carried[c + 4, b] = p1 + half_h * loads[c + 4, b]
            carried[c + 5, b] = p2 + half_h * loads[c + 5, b]
            unknowns[u + 6, b] = max(max(max(abs(h * carried[c, b]), abs(h * carried[c + 1, b])),
                                         max(abs(h * carried[c + 2, b]), abs(h * carried[c + 3, b]))),
                                     max(abs(h * carried[c + 4, b]), abs(h * carried[c + 5, b])))
            unknowns[u + 7, b] = 0.0
        for b in range(lanes):
            f0, f1, f2, t0, t1, t2 = first_guess(x, n, coef, k, b, loads, i, h)
            unknowns[u, b], unknowns[u + 1, b], unknowns[u + 2, b] = f0, f1, f2
            unknowns[u + 3, b], unknowns[u + 4, b], unknowns[u + 5, b] = t0, t1, t2
        # the chord method: Newton's matrix frozen at (f, t) = 0, where it is 𝕄 diag(2, 2, 2, 1, 1, 1) (module
        # docstring), so a correction is diag(½, ½, ½, 1, 1, 1) 𝕄⁻¹ r with the 𝕄⁻¹ of the coefficient header:
        # no Jacobian, no factorisation, no pivoting, hence no branch per lane.  A lane converges as Newton's
        # iteration does (residual or correction at the tolerance), takes that last correction and is frozen.
        for _ in range(CHORD_MAX_ITERATIONS):
            left = 0
            for b in range(lanes):
                f0, f1, f2 = unknowns[u, b], unknowns[u + 1, b], unknowns[u + 2, b]
                t0, t1, t2 = unknowns[u + 3, b], unknowns[u + 4, b], unknowns[u + 5, b]
                sc, A = cayley_increment(f0, f1, f2)
                e0, e1, e2, e3, e4, e5 = motion_equations(coef, k, b, A, sc, f0, f1, f2, t0, t1, t2)
                r0, r1, r2 = e0 - h * carried[c, b], e1 - h * carried[c + 1, b], e2 - h * carried[c + 2, b]
                r3, r4, r5 = e3 - h * carried[c + 3, b], e4 - h * carried[c + 4, b], e5 - h * carried[c + 5, b]
                d0, d1, d2, d3, d4, d5 = matrix6_times(coef, k + INVERSE6, b, r0, r1, r2, r3, r4, r5)
                d0, d1, d2 = 0.5 * d0, 0.5 * d1, 0.5 * d2
                f0, f1, f2, t0, t1, t2 = f0 - d0, f1 - d1, f2 - d2, t0 - d3, t1 - d4, t2 - d5
                largest = max(max(max(abs(r0), abs(r1)), max(abs(r2), abs(r3))), max(abs(r4), abs(r5)))
                correction = max(max(max(abs(d0), abs(d1)), max(abs(d2), abs(d3))), max(abs(d4), abs(d5)))
                size = max(max(max(abs(f0), abs(f1)), max(abs(f2), abs(t0))), max(abs(t1), abs(t2)))
                frozen = unknowns[u + 7, b] != 0.0
                done = frozen | (largest <= tol * unknowns[u + 6, b]) | (correction <= ROUND_OFF_CORRECTION * size)
                if not frozen:
                    unknowns[u, b], unknowns[u + 1, b], unknowns[u + 2, b] = f0, f1, f2
                    unknowns[u + 3, b], unknowns[u + 4, b], unknowns[u + 5, b] = t0, t1, t2
                    iterations[b] += 1
                unknowns[u + 7, b] = 1.0 if done else 0.0
                left += 0 if done else 1
            if left == 0:
                break
        # Newton's method with the analytic Jacobian, from the first guess, for the lanes the chord left
        for b in range(lanes):
            if unknowns[u + 7, b] != 0.0:
                continue
            f0, f1, f2, t0, t1, t2 = first_guess(x, n, coef, k, b, loads, i, h)
            g_norm = unknowns[u + 6, b]
            sc, A = cayley_increment(f0, f1, f2)
            converged = g_norm == 0.0
            count = 0
            while not converged and count < max_iterations + 1:
                value = motion_equations(coef, k, b, A, sc, f0, f1, f2, t0, t1, t2)
                largest = 0.0
                for r in range(6):
                    residual[r, 0] = value[r] - h * carried[c + r, b]
                    largest = max(largest, abs(residual[r, 0]))
                if largest <= tol * g_norm:
                    converged = True
                    break
                if count == max_iterations:
                    break
                for col in range(6):
                    column = motion_equations_tangent(coef, k, b, A, sc, f0, f1, f2, t0, t1, t2, unit(col, 0),
                                                      unit(col, 1), unit(col, 2), unit(col, 3), unit(col, 4),
                                                      unit(col, 5))
                    for r in range(6):
                        jacobian[r, col, 0] = column[r]
                solve_pivoted_in_lanes(jacobian, residual)
                f0, f1, f2 = f0 - residual[0, 0], f1 - residual[1, 0], f2 - residual[2, 0]
                t0, t1, t2 = t0 - residual[3, 0], t1 - residual[4, 0], t2 - residual[5, 0]
                sc, A = cayley_increment(f0, f1, f2)
                count += 1
                correction = 0.0
                for r in range(6):
                    correction = max(correction, abs(residual[r, 0]))
                size = max(max(abs(f0), abs(f1)), max(abs(f2), max(abs(t0), max(abs(t1), abs(t2)))))
                if correction <= ROUND_OFF_CORRECTION * size:
                    converged = True
            iterations[b] += count
            if not converged and active[b]:
                code[b] = NEWTON_FAILED
            unknowns[u, b], unknowns[u + 1, b], unknowns[u + 2, b] = f0, f1, f2
            unknowns[u + 3, b], unknowns[u + 4, b], unknowns[u + 5, b] = t0, t1, t2
        a = 12 * i
        for b in range(lanes):
            t0, t1, t2 = unknowns[u + 3, b], unknowns[u + 4, b], unknowns[u + 5, b]
            sc, A = cayley_increment(unknowns[u, b], unknowns[u + 1, b], unknowns[u + 2, b])
            for r in range(9):
                increment[a + r, b] = A[r]
            increment[a + 9, b], increment[a + 10, b], increment[a + 11, b] = t0, t1, t2
            # x_{k+1} = x_k + R_k t, then R_{k+1} = R_k + R_k (F − 1) row by row
            for r in range(3):
                x0, x1, x2 = x[base + 3 * r, b], x[base + 3 * r + 1, b], x[base + 3 * r + 2, b]
                x[p + r, b] += x0 * t0 + x1 * t1 + x2 * t2
                for col in range(3):
                    x[base + 3 * r + col, b] += x0 * A[col] + x1 * A[3 + col] + x2 * A[6 + col]
    system_torque(x, n, coef, topology, loads_next)  # noqa: F821
    for i in range(n):
        w = 12 * n + 3 * i
        v = 15 * n + 3 * i
        a = 12 * i
        c = 6 * i
        k = MOTION_HEADER * i
        for b in range(lanes):
            A = (increment[a, b], increment[a + 1, b], increment[a + 2, b], increment[a + 3, b], increment[a + 4, b],
                 increment[a + 5, b], increment[a + 6, b], increment[a + 7, b], increment[a + 8, b])
            t0, t1, t2 = increment[a + 9, b], increment[a + 10, b], increment[a + 11, b]
            ck0, ck1, ck2 = carried[c, b], carried[c + 1, b], carried[c + 2, b]
            cp0, cp1, cp2 = carried[c + 3, b], carried[c + 4, b], carried[c + 5, b]
            y0, y1, y2 = cross(t0, t1, t2, cp0, cp1, cp2)
            k0, k1, k2 = rotate_back(A, ck0 - y0, ck1 - y1, ck2 - y2)
            p0, p1, p2 = rotate_back(A, cp0, cp1, cp2)
            z0, z1, z2 = k0 + half_h * loads_next[c, b], k1 + half_h * loads_next[c + 1, b], \
                k2 + half_h * loads_next[c + 2, b]
            z3, z4, z5 = p0 + half_h * loads_next[c + 3, b], p1 + half_h * loads_next[c + 4, b], \
                p2 + half_h * loads_next[c + 5, b]
            # (Ω, V) = 𝕄⁻¹(K, P) and one step of iterative refinement with an exact residual (module docstring)
            y = matrix6_times(coef, k + INVERSE6, b, z0, z1, z2, z3, z4, z5)
            r = compensated_matrix6_times(coef, k, b, z0, z1, z2, z3, z4, z5, -y[0], -y[1], -y[2], -y[3], -y[4],
                                          -y[5])
            d = matrix6_times(coef, k + INVERSE6, b, r[0], r[1], r[2], r[3], r[4], r[5])
            x[w, b], x[w + 1, b], x[w + 2, b] = y[0] + d[0], y[1] + d[1], y[2] + d[2]
            x[v, b], x[v + 1, b], x[v + 2, b] = y[3] + d[3], y[4] + d[4], y[5] + d[5]
            for r in range(6):
                loads[c + r, b] = loads_next[c + r, b]
