"""The Lie group variational integrator on SO(3)ⁿ (Lee, Leok & McClamroch, "Lie group variational
integrators for the full body problem", CMAME 196 (2007); "A Lie group variational integrator for the
attitude dynamics of a rigid body with applications to the 3D pendulum", 2005), in flat lane layout.

With Π = JΩ (body angular momentum), J_d = ½ tr(J) I − J and M the body torque, one step is the papers'
discrete equations of motion of one body (labelled here (a)–(c); the project's reference digests cover the
papers on (S²)ⁿ, not these, so their own equation numbers are not quoted):
    (a) h Π̂_k + (h²/2) M̂_k = F_k J_d − J_d F_kᵀ,     (b) R_{k+1} = R_k F_k,
    (c) Π_{k+1} = F_kᵀ Π_k + (h/2) F_kᵀ M_k + (h/2) M_{k+1}.
F_k is sought in Cayley coordinates, F = (I + f̂)(I − f̂)⁻¹ = I + 2/(1 + ‖f‖²) (f̂ + f̂²), which turns
(a) into φ(f) = g + g × f + (g·f) f − 2 J f = 0 with g = h Π_k + (h²/2) M_k; Newton's method with the
analytic Jacobian ∇φ = ĝ + (g·f) I + f gᵀ − 2J solves it to ‖φ‖_∞ ≤ tol ‖g‖_∞, from the second-order
first guess f ≈ (h/2)(Ω_k + (h/2)Ω̇_k), Ω̇ = J⁻¹(Π × Ω + M) (one iteration at h‖Ω‖ = 4e-3 where the
first-order (h/2)Ω_k needed two).  F is orthogonal to round-off by construction, so R stays on SO(3)
without projection.

Momentum round-off.  (c) keeps the momentum map for any orthogonal F: R_{k+1}Π_{k+1} = R_kΠ_k without
torque, and its component along gravity for the heavy top.  What can bias it in floating point is the
round trip through the state, which stores Ω, not Π: every step rebuilds Π_k = JΩ_k and ends with
Ω_{k+1} = J⁻¹Π_{k+1}.  Rounding either product is not unbiased when J holds short decimals: J = 1.6 is
8/5 (1 + 5.6e-17), so for Ω on the double grid JΩ falls on fifths of an ulp shifted by J's own
representation error, which varies only slowly with Ω; the rounding error then takes a few values whose
mean is a fraction of an ulp of one sign for long stretches (likewise J⁻¹Π for Π on the grid, however
J⁻¹ is applied: by the rounded J⁻¹, or by adj(J)/det J as this method did).  Projected on a momentum
nearly parallel to Π, that drifted the conserved quantity linearly: over 2×10⁵ steps of h = 1e-3 from
R = exp([0.7, −0.4, 0.3]^), Ω ≈ (1, 2, 3) (8 members), heavy_top chaotic (J = diag(2, 1.6, 1)) 7e-13
relative to ‖L‖, the same J rotated to a full tensor 1.4e-11, free_rigid_body with I = (1.3, 1.7, 2.9)
1.6e-12 (10⁶ steps: 3.5e-12, 7e-11, 8e-12).  So no rounding here acts on a value on such a grid:
Π_k = JΩ_k is taken exactly (Ogita, Rump & Oishi's Dot2 with FMA), Π_k + (h/2)M_k is kept as y + z (y
rounded, z its remainder by TwoSum), Π_{k+1} as the unevaluated q + s (Aᵀz, 1e-3 ulp, is dropped), and the
one rounding left is that of Ω_{k+1} = J⁻¹(q + s), computed as v = J⁻¹q plus one step of iterative
refinement with the exact residual q + s − Jv (Dot2; :mod:`kernels.integrators.lgvi_motion` refines the
same way on SE(3)): Ω_{k+1} is J⁻¹Π_{k+1} correctly rounded but for rare near-ties, and its rounding
error averages out.  The drift is then a random walk of round-off in every case above: 2e-14 after
2×10⁵ steps and 6e-14 after 10⁶ (rms over 16 members: ≈ 0.3 ε per √step), members of both signs.  The
compensation (≈ 100 flops per body and step) runs in branch-free lane loops (SIMD), the scalar Newton
loop saves an iteration with the second-order guess, and the step rate is unchanged (1.8×10⁷
member-steps/s on one thread, heavy_top chaotic, before and after).
Free names bound at specialisation: ``system_torque``.
"""

import numpy as np

from ..lanes import accumulate_product, fused_multiply_add, inline_lane_function
from ..status import NEWTON_FAILED
from ..systems.rigid import HEADER, inertia_times

#: method options of the Newton solve, in the order of the ``options`` array
NEWTON_TOLERANCE, NEWTON_MAX_ITERATIONS = 0, 1
#: a Newton correction this small relative to f is round-off: the iteration has converged
ROUND_OFF_CORRECTION = 4 * np.finfo(np.float64).eps


@inline_lane_function
def start_newton_step(x, h, options, code, iterations):
    """(lanes, h/2, Newton's tolerance, its iteration limit) of a step of size h from the block x, with
    every lane's status code and iteration count cleared: the start of the SO(3) and SE(3) steps alike."""
    lanes = x.shape[1]
    tol = options[NEWTON_TOLERANCE]
    max_iterations = int(options[NEWTON_MAX_ITERATIONS])
    half_h = 0.5 * h
    for b in range(lanes):
        code[b] = 0
        iterations[b] = 0
    return lanes, half_h, tol, max_iterations


@inline_lane_function
def two_sum(a, b):
    """(a + b rounded, its exact rounding error) (Knuth's TwoSum: no condition on |a|, |b|)."""
    s = a + b
    v = s - a
    return s, (a - (s - v)) + (b - v)


@inline_lane_function
def exact_row_times(coef, k, b, x0, x1, x2):
    """(t, e): t = the row at coefficient rows k … k + 2 times x, summed left to right as
    :func:`~kernels.systems.rigid.inertia_times` does, and e its rounding error, t + e = row·x to about
    an ulp of the error (Ogita–Rump–Oishi's Dot2 with FMA)."""
    t = coef[k, b] * x0
    e = fused_multiply_add(coef[k, b], x0, -t)
    t, e = accumulate_product(t, e, coef[k + 1, b], x1)
    return accumulate_product(t, e, coef[k + 2, b], x2)


@inline_lane_function
def residual_row(coef, k, b, q, s, v0, v1, v2):
    """q + s − (the row at coefficient rows k … k + 2)·v as if in twice the working precision, rounded
    once (Dot2 started from the unevaluated sum q + s): with v ≈ J⁻¹(q + s), an exact residual."""
    u, e = accumulate_product(q, s, coef[k, b], -v0)
    u, e = accumulate_product(u, e, coef[k + 1, b], -v1)
    u, e = accumulate_product(u, e, coef[k + 2, b], -v2)
    return u + e


def lgvi_allocate(rows, n, lanes):
    """Work: M_k, M_{k+1} (3n, L), the increments A = F − I (9n, L) and Π_k + (h/2) M_k as y + z, y rounded,
    z its remainder (rows 0 … 3n − 1 and 3n … 6n − 1 of a (6n, L))."""
    return (np.empty((3 * n, lanes)), np.empty((3 * n, lanes)), np.empty((9 * n, lanes)), np.empty((6 * n, lanes)))


def lgvi_begin(x, n, coef, topology, h, options, work):
    system_torque(x, n, coef, topology, work[0])  # noqa: F821 (bound at specialisation)


def lgvi_step(x, n, coef, topology, t, h, options, work, active, code, iterations):
    """One step of the LGVI for every lane (see the module docstring).  Newton runs per lane and body
    (scalar code), so a member's bits never depend on the others in its block."""
    torque, torque_next, increment, carried = work
    lanes, half_h, tol, max_iterations = start_newton_step(x, h, options, code, iterations)
    for i in range(n):
        base = 9 * i
        w = 9 * n + 3 * i
        j = HEADER * i
        a = 9 * i
        c = 3 * n + 3 * i
        # lane loops without branches (SIMD): y and Newton's first guess (in rows a … a + 2 of the increments)
        for b in range(lanes):
            w0, w1, w2 = x[w, b], x[w + 1, b], x[w + 2, b]
            m0, m1, m2 = torque[3 * i, b], torque[3 * i + 1, b], torque[3 * i + 2, b]
            # y = Π_k + (h/2) M_k with Π_k = J Ω_k exact (Dot2) and one rounding (module docstring)
            p0, e0 = exact_row_times(coef, j, b, w0, w1, w2)
            p1, e1 = exact_row_times(coef, j + 3, b, w0, w1, w2)
            p2, e2 = exact_row_times(coef, j + 6, b, w0, w1, w2)
            carried[3 * i, b], carried[c, b] = two_sum(p0, e0 + half_h * m0)
            carried[3 * i + 1, b], carried[c + 1, b] = two_sum(p1, e1 + half_h * m1)
            carried[3 * i + 2, b], carried[c + 2, b] = two_sum(p2, e2 + half_h * m2)
            # second order from Euler's Ω̇ = J⁻¹(Π × Ω + M) at step k: F ≈ exp(hΩ̂ + (h²/2)Ω̇^), whose Cayley
            # vector is ≈ (h/2)(Ω + (h/2)Ω̇): Newton then needs one iteration where (h/2)Ω needed two
            d0, d1, d2 = inertia_times(coef, j + 9, b, p1 * w2 - p2 * w1 + m0, p2 * w0 - p0 * w2 + m1,
                                       p0 * w1 - p1 * w0 + m2)
            increment[a, b] = half_h * (w0 + half_h * d0)
            increment[a + 1, b] = half_h * (w1 + half_h * d1)
            increment[a + 2, b] = half_h * (w2 + half_h * d2)
        for b in range(lanes):
            j00, j01, j02 = coef[j, b], coef[j + 1, b], coef[j + 2, b]
            j10, j11, j12 = coef[j + 3, b], coef[j + 4, b], coef[j + 5, b]
            j20, j21, j22 = coef[j + 6, b], coef[j + 7, b], coef[j + 8, b]
            y0, y1, y2 = carried[3 * i, b], carried[3 * i + 1, b], carried[3 * i + 2, b]
            g0, g1, g2 = h * y0, h * y1, h * y2  # g = h Π_k + (h²/2) M_k
            g_norm = max(abs(g0), max(abs(g1), abs(g2)))
            f0, f1, f2 = increment[a, b], increment[a + 1, b], increment[a + 2, b]
            converged = g_norm == 0.0
            count = 0
            while not converged and count < max_iterations + 1:
                gf = g0 * f0 + g1 * f1 + g2 * f2
                jf0, jf1, jf2 = inertia_times(coef, j, b, f0, f1, f2)
                r0 = g0 + (g1 * f2 - g2 * f1) + gf * f0 - 2.0 * jf0
                r1 = g1 + (g2 * f0 - g0 * f2) + gf * f1 - 2.0 * jf1
                r2 = g2 + (g0 * f1 - g1 * f0) + gf * f2 - 2.0 * jf2
                if max(abs(r0), max(abs(r1), abs(r2))) <= tol * g_norm:
                    converged = True
                    break
                if count == max_iterations:
                    break
                # ∇φ = ĝ + (g·f) I + f gᵀ − 2J, ĝ = [[0, −g2, g1], [g2, 0, −g0], [−g1, g0, 0]]
                a00 = gf + f0 * g0 - 2.0 * j00
                a01 = -g2 + f0 * g1 - 2.0 * j01
                a02 = g1 + f0 * g2 - 2.0 * j02
                a10 = g2 + f1 * g0 - 2.0 * j10
                a11 = gf + f1 * g1 - 2.0 * j11
                a12 = -g0 + f1 * g2 - 2.0 * j12
                a20 = -g1 + f2 * g0 - 2.0 * j20
                a21 = g0 + f2 * g1 - 2.0 * j21
                a22 = gf + f2 * g2 - 2.0 * j22
                c00 = a11 * a22 - a12 * a21
                c01 = a12 * a20 - a10 * a22
                c02 = a10 * a21 - a11 * a20
                inverse_det = 1.0 / (a00 * c00 + a01 * c01 + a02 * c02)
                # Cramer's rule: Δ = adj(∇φ) r / det
                d0 = (c00 * r0 + (a02 * a21 - a01 * a22) * r1 + (a01 * a12 - a02 * a11) * r2) * inverse_det
                d1 = (c01 * r0 + (a00 * a22 - a02 * a20) * r1 + (a02 * a10 - a00 * a12) * r2) * inverse_det
                d2 = (c02 * r0 + (a01 * a20 - a00 * a21) * r1 + (a00 * a11 - a01 * a10) * r2) * inverse_det
                f0, f1, f2 = f0 - d0, f1 - d1, f2 - d2
                count += 1
                size = max(abs(f0), max(abs(f1), abs(f2)))
                if max(abs(d0), max(abs(d1), abs(d2))) <= ROUND_OFF_CORRECTION * size:
                    converged = True
            iterations[b] = max(iterations[b], count)
            if not converged and active[b]:
                code[b] = NEWTON_FAILED
            # A = F − I = s (f̂ + f fᵀ − ‖f‖² I), s = 2/(1 + ‖f‖²)
            ss = f0 * f0 + f1 * f1 + f2 * f2
            s = 2.0 / (1.0 + ss)
            increment[a, b] = s * (f0 * f0 - ss)
            increment[a + 1, b] = s * (-f2 + f0 * f1)
            increment[a + 2, b] = s * (f1 + f0 * f2)
            increment[a + 3, b] = s * (f2 + f1 * f0)
            increment[a + 4, b] = s * (f1 * f1 - ss)
            increment[a + 5, b] = s * (-f0 + f1 * f2)
            increment[a + 6, b] = s * (-f1 + f2 * f0)
            increment[a + 7, b] = s * (f0 + f2 * f1)
            increment[a + 8, b] = s * (f2 * f2 - ss)
        # R_{k+1} = R_k + R_k A, row by row (the increment form keeps round-off relative to A)
        for b in range(lanes):
            for r in range(3):
                x0, x1, x2 = x[base + 3 * r, b], x[base + 3 * r + 1, b], x[base + 3 * r + 2, b]
                for col in range(3):
                    x[base + 3 * r + col, b] += (x0 * increment[a + col, b] + x1 * increment[a + 3 + col, b]
                                                 + x2 * increment[a + 6 + col, b])
    system_torque(x, n, coef, topology, torque_next)  # noqa: F821
    for i in range(n):
        w = 9 * n + 3 * i
        a = 9 * i
        j = HEADER * i
        c = 3 * n + 3 * i
        for b in range(lanes):
            y0, y1, y2 = carried[3 * i, b], carried[3 * i + 1, b], carried[3 * i + 2, b]
            # Π_{k+1} = Fᵀ(y + z) + (h/2) M_{k+1} = y + d, d = Aᵀ y + (h/2) M_{k+1} + z (dropping Aᵀz, 1e-3 ulp
            # where h‖Ω‖ = 1e-3), kept unrounded as q + s
            q0, s0 = two_sum(y0, ((increment[a, b] * y0 + increment[a + 3, b] * y1 + increment[a + 6, b] * y2)
                                  + half_h * torque_next[3 * i, b]) + carried[c, b])
            q1, s1 = two_sum(y1, ((increment[a + 1, b] * y0 + increment[a + 4, b] * y1 + increment[a + 7, b] * y2)
                                  + half_h * torque_next[3 * i + 1, b]) + carried[c + 1, b])
            q2, s2 = two_sum(y2, ((increment[a + 2, b] * y0 + increment[a + 5, b] * y1 + increment[a + 8, b] * y2)
                                  + half_h * torque_next[3 * i + 2, b]) + carried[c + 2, b])
            # Ω_{k+1} = J⁻¹ Π_{k+1}: v = J⁻¹ q, refined once with the exact residual q + s − J v (Dot2)
            v0, v1, v2 = inertia_times(coef, j + 9, b, q0, q1, q2)
            d0, d1, d2 = inertia_times(coef, j + 9, b, residual_row(coef, j, b, q0, s0, v0, v1, v2),
                                       residual_row(coef, j + 3, b, q1, s1, v0, v1, v2),
                                       residual_row(coef, j + 6, b, q2, s2, v0, v1, v2))
            x[w, b], x[w + 1, b], x[w + 2, b] = v0 + d0, v1 + d1, v2 + d2
            torque[3 * i, b] = torque_next[3 * i, b]
            torque[3 * i + 1, b] = torque_next[3 * i + 1, b]
            torque[3 * i + 2, b] = torque_next[3 * i + 2, b]
