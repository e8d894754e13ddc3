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
the spatial impulse (R K + x × R P, R P) of step k + 1 equals step k's whatever (F, t) Newton returns,
and with loads its parts that the loads leave alone.  The first two lines are solved for (f, t) by
Newton's method with the analytic Jacobian (its columns are the equations' directional derivatives,
with δF = F α̂, α = s_c (δf − f × δf), δs = s × α + Fᵀδt), to ‖residual‖_∞ ≤ newton_tol ‖h c‖_∞.

The stored state holds velocities, so every step recovers (Ω, V) = 𝕄⁻¹(K, P) and the next rebuilds (K, P) = 𝕄z.
Done plainly, the round trip loses an ulp-sized amount that is correlated from step to step when the body-frame
momenta change slowly, and the impulse drifts linearly in round-off: over 10⁵ steps of ``ellipsoid`` 3.3e-12
relative with the product by 𝕄⁻¹, 1.3e-11 with Cholesky solves, 1.4e-12 with one step of iterative
refinement whose residual is computed in working precision.  This method computes that residual (K, P) − 𝕄y
as if in twice the precision (Ogita–Rump–Oishi's Dot2 with FMA, :func:`kernels.lanes.compensated_dot6`), so
the refined velocities are 𝕄⁻¹(K, P) to about an ulp and the drift is 2.9e-14 (1.5e-14 when the momenta are
kept between steps instead), for about 5 % of the step rate (0.64 of rk4's side by side, 0.67 before).
Free names bound at specialisation: ``system_torque`` (the loads, rows 6i … 6i + 5 of each body).
"""

import numpy as np

from ..lanes import cross3 as cross
from ..lanes import lane_function, solve_pivoted_in_lanes
from ..status import NEWTON_FAILED
from ..systems.rigid import INVERSE6, MOTION_HEADER, compensated_matrix6_times, kirchhoff_rates, matrix6_times
from .lgvi import NEWTON_MAX_ITERATIONS, NEWTON_TOLERANCE, ROUND_OFF_CORRECTION


@lane_function
def unit(c, j):
    """Component j of the c-th unit vector."""
    return 1.0 if c == j else 0.0


@lane_function
def block_times(coef, k, b, row, col, v0, v1, v2):
    """The 3×3 block (rows row … row + 2, columns col … col + 2) of the 6×6 matrix at coefficient row k
    times v, lane b."""
    r = k + 6 * row + col
    return (coef[r, b] * v0 + coef[r + 1, b] * v1 + coef[r + 2, b] * v2,
            coef[r + 6, b] * v0 + coef[r + 7, b] * v1 + coef[r + 8, b] * v2,
            coef[r + 12, b] * v0 + coef[r + 13, b] * v1 + coef[r + 14, b] * v2)


@lane_function
def rotate(A, v0, v1, v2):
    """F v = v + A v for the increment A = F − 1 (3, 3) (round-off relative to A, not to F)."""
    return (v0 + (A[0, 0] * v0 + A[0, 1] * v1 + A[0, 2] * v2), v1 + (A[1, 0] * v0 + A[1, 1] * v1 + A[1, 2] * v2),
            v2 + (A[2, 0] * v0 + A[2, 1] * v1 + A[2, 2] * v2))


@lane_function
def rotate_back(A, v0, v1, v2):
    """Fᵀ v = v + Aᵀ v for the increment A = F − 1 (3, 3)."""
    return (v0 + (A[0, 0] * v0 + A[1, 0] * v1 + A[2, 0] * v2), v1 + (A[0, 1] * v0 + A[1, 1] * v1 + A[2, 1] * v2),
            v2 + (A[0, 2] * v0 + A[1, 2] * v1 + A[2, 2] * v2))


@lane_function
def cayley_increment_into(A, f0, f1, f2):
    """A = cay(f) − 1 = s_c (f̂ + f fᵀ − |f|² 1) written into A (3, 3); returns s_c = 2/(1 + |f|²)."""
    ss = f0 * f0 + f1 * f1 + f2 * f2
    sc = 2.0 / (1.0 + ss)
    A[0, 0] = sc * (f0 * f0 - ss)
    A[0, 1] = sc * (-f2 + f0 * f1)
    A[0, 2] = sc * (f1 + f0 * f2)
    A[1, 0] = sc * (f2 + f1 * f0)
    A[1, 1] = sc * (f1 * f1 - ss)
    A[1, 2] = sc * (-f0 + f1 * f2)
    A[2, 0] = sc * (-f1 + f2 * f0)
    A[2, 1] = sc * (f0 + f2 * f1)
    A[2, 2] = sc * (f2 * f2 - ss)
    return sc


@lane_function
def motion_equations(coef, k, b, A, sc, f0, f1, f2, t0, t1, t2):
    """The right-hand sides of the first two discrete Euler–Poincaré equations at (f, t) (see the module
    docstring) for F = 1 + A, s_c = 2/(1 + |f|²): the rotational (kg·m²·rad) and translational (kg·m) parts."""
    s0, s1, s2 = rotate_back(A, t0, t1, t2)
    trace = 3.0 + (A[0, 0] + A[1, 1] + A[2, 2])
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
    trace = 3.0 + (A[0, 0] + A[1, 1] + A[2, 2])
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


def lgvi_motion_allocate(rows, n, lanes):
    """Work: loads at t_k and t_{k+1} (6n, L), c = (K, P) + (h/2)(τ, f) (6n, L), F − 1 and t (12n, L), one
    lane's F − 1 (3, 3), Newton's matrix (6, 6, 1) and right-hand side (6, 1)."""
    return (np.empty((6 * n, lanes)), np.empty((6 * n, lanes)), np.empty((6 * n, lanes)), np.empty((12 * n, lanes)),
            np.empty((3, 3)), np.empty((6, 6, 1)), np.empty((6, 1)))


def lgvi_motion_begin(x, n, coef, topology, h, options, work):
    system_torque(x, n, coef, topology, work[0])  # noqa: F821 (bound at specialisation)


def lgvi_motion_step(x, n, coef, topology, t, h, options, work, active, code, iterations):
    """One step for every lane (see the module docstring); Newton runs per lane and body (scalar code),
    so a member's bits never depend on the others in its block."""
    loads, loads_next, carried, increment, A, jacobian, residual = work
    lanes = x.shape[1]
    tol = options[NEWTON_TOLERANCE]
    max_iterations = int(options[NEWTON_MAX_ITERATIONS])
    half_h = 0.5 * h
    for b in range(lanes):
        code[b] = 0
        iterations[b] = 0
    for i in range(n):
        base = 9 * i
        p = 9 * n + 3 * i
        w = 12 * n + 3 * i
        v = 15 * n + 3 * i
        k = MOTION_HEADER * i
        for b in range(lanes):
            w0, w1, w2 = x[w, b], x[w + 1, b], x[w + 2, b]
            v0, v1, v2 = x[v, b], x[v + 1, b], x[v + 2, b]
            momenta = matrix6_times(coef, k, b, w0, w1, w2, v0, v1, v2)
            g_norm = 0.0
            for r in range(6):
                carried[6 * i + r, b] = momenta[r] + half_h * loads[6 * i + r, b]
                g_norm = max(g_norm, abs(h * carried[6 * i + r, b]))
            # first guess, second order from Kirchhoff's accelerations (Ω̇, V̇) at step k: F ≈ exp(hΩ̂ + (h²/2)Ω̇^),
            # whose Cayley vector is ≈ (h/2)(Ω + (h/2)Ω̇), and t ≈ h V + (h²/2)(V̇ + Ω × V): Newton then needs one
            # iteration where the first-order guess (h/2)Ω, hV needed two (1.7× the rate)
            e0, e1, e2, a0, a1, a2 = kirchhoff_rates(coef, k, b, w0, w1, w2, v0, v1, v2, loads, i)
            c0, c1, c2 = cross(w0, w1, w2, v0, v1, v2)
            f0, f1, f2 = half_h * (w0 + half_h * e0), half_h * (w1 + half_h * e1), half_h * (w2 + half_h * e2)
            t0, t1, t2 = h * (v0 + half_h * (a0 + c0)), h * (v1 + half_h * (a1 + c1)), h * (v2 + half_h * (a2 + c2))
            sc = cayley_increment_into(A, f0, f1, f2)
            converged = g_norm == 0.0
            count = 0
            while not converged and count < max_iterations + 1:
                value = motion_equations(coef, k, b, A, sc, f0, f1, f2, t0, t1, t2)
                largest = 0.0
                for r in range(6):
                    residual[r, 0] = value[r] - h * carried[6 * i + r, b]
                    largest = max(largest, abs(residual[r, 0]))
                if largest <= tol * g_norm:
                    converged = True
                    break
                if count == max_iterations:
                    break
                for c in range(6):
                    column = motion_equations_tangent(coef, k, b, A, sc, f0, f1, f2, t0, t1, t2, unit(c, 0),
                                                      unit(c, 1), unit(c, 2), unit(c, 3), unit(c, 4), unit(c, 5))
                    for r in range(6):
                        jacobian[r, c, 0] = column[r]
                solve_pivoted_in_lanes(jacobian, residual)
                f0, f1, f2 = f0 - residual[0, 0], f1 - residual[1, 0], f2 - residual[2, 0]
                t0, t1, t2 = t0 - residual[3, 0], t1 - residual[4, 0], t2 - residual[5, 0]
                sc = cayley_increment_into(A, f0, f1, f2)
                count += 1
                correction = 0.0
                size = 0.0
                for r in range(6):
                    correction = max(correction, abs(residual[r, 0]))
                size = max(max(abs(f0), abs(f1)), max(abs(f2), max(abs(t0), max(abs(t1), abs(t2)))))
                if correction <= ROUND_OFF_CORRECTION * size:
                    converged = True
            iterations[b] = max(iterations[b], count)
            if not converged and active[b]:
                code[b] = NEWTON_FAILED
            a = 12 * i
            for r in range(3):
                for c in range(3):
                    increment[a + 3 * r + c, b] = A[r, c]
            increment[a + 9, b], increment[a + 10, b], increment[a + 11, b] = t0, t1, t2
            # x_{k+1} = x_k + R_k t, then R_{k+1} = R_k + R_k (F − 1) row by row
            for r in range(3):
                x0, x1, x2 = x[base + 3 * r, b], x[base + 3 * r + 1, b], x[base + 3 * r + 2, b]
                x[p + r, b] += x0 * t0 + x1 * t1 + x2 * t2
                for col in range(3):
                    x[base + 3 * r + col, b] += (x0 * increment[a + col, b] + x1 * increment[a + 3 + col, b]
                                                 + x2 * increment[a + 6 + col, b])
    system_torque(x, n, coef, topology, loads_next)  # noqa: F821
    for i in range(n):
        w = 12 * n + 3 * i
        v = 15 * n + 3 * i
        a = 12 * i
        k = MOTION_HEADER * i
        for b in range(lanes):
            for r in range(3):
                for c in range(3):
                    A[r, c] = increment[a + 3 * r + c, b]
            t0, t1, t2 = increment[a + 9, b], increment[a + 10, b], increment[a + 11, b]
            ck0, ck1, ck2 = carried[6 * i, b], carried[6 * i + 1, b], carried[6 * i + 2, b]
            cp0, cp1, cp2 = carried[6 * i + 3, b], carried[6 * i + 4, b], carried[6 * i + 5, b]
            y0, y1, y2 = cross(t0, t1, t2, cp0, cp1, cp2)
            k0, k1, k2 = rotate_back(A, ck0 - y0, ck1 - y1, ck2 - y2)
            p0, p1, p2 = rotate_back(A, cp0, cp1, cp2)
            z = residual[:, 0]
            z[0], z[1], z[2] = k0, k1, k2
            z[3], z[4], z[5] = p0, p1, p2
            for r in range(6):
                z[r] += half_h * loads_next[6 * i + r, b]
            # (Ω, V) = 𝕄⁻¹(K, P) and one step of iterative refinement with an exact residual (module docstring)
            y = matrix6_times(coef, k + INVERSE6, b, z[0], z[1], z[2], z[3], z[4], z[5])
            r = compensated_matrix6_times(coef, k, b, z[0], z[1], z[2], z[3], z[4], z[5], -y[0], -y[1], -y[2], -y[3],
                                          -y[4], -y[5])
            d = matrix6_times(coef, k + INVERSE6, b, r[0], r[1], r[2], r[3], r[4], r[5])
            x[w, b], x[w + 1, b], x[w + 2, b] = y[0] + d[0], y[1] + d[1], y[2] + d[2]
            x[v, b], x[v + 1, b], x[v + 2, b] = y[3] + d[3], y[4] + d[4], y[5] + d[5]
            for r in range(6):
                loads[6 * i + r, b] = loads_next[6 * i + r, b]
