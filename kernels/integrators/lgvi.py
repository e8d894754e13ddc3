"""The Lie group variational integrator on SO(3)ⁿ (Lee, Leok & McClamroch, "Lie group variational
integrators for the full body problem", CMAME 196 (2007); "A Lie group variational integrator for the
attitude dynamics of a rigid body with applications to the 3D pendulum", 2005), in flat lane layout.

With Π = JΩ (body angular momentum), J_d = ½ tr(J) I − J and M the body torque, one step is
    h Π̂_k + (h²/2) M̂_k = F_k J_d − J_d F_kᵀ,     R_{k+1} = R_k F_k,
    Π_{k+1} = F_kᵀ Π_k + (h/2) F_kᵀ M_k + (h/2) M_{k+1}.
F_k is sought in Cayley coordinates, F = (I + f̂)(I − f̂)⁻¹ = I + 2/(1 + ‖f‖²) (f̂ + f̂²), which turns
the first equation into φ(f) = g + g × f + (g·f) f − 2 J f = 0 with g = h Π_k + (h²/2) M_k; Newton's
method with the analytic Jacobian ∇φ = ĝ + (g·f) I + f gᵀ − 2J solves it to ‖φ‖_∞ ≤ tol ‖g‖_∞.
F is orthogonal to round-off by construction, so R stays on SO(3) without projection.
Free names bound at specialisation: ``system_torque``.
"""

import numpy as np

from ..status import NEWTON_FAILED
from ..systems.rigid import HEADER, inertia_times, inverse_inertia_times

#: method options of the Newton solve, in the order of the ``options`` array
NEWTON_TOLERANCE, NEWTON_MAX_ITERATIONS = 0, 1
#: a Newton correction this small relative to f is round-off: the iteration has converged
ROUND_OFF_CORRECTION = 4 * np.finfo(np.float64).eps


def lgvi_allocate(rows, n, lanes):
    """Work: M_k, M_{k+1} (3n, L), the increments A = F − I (9n, L) and Π_k + (h/2) M_k (3n, L)."""
    return (np.empty((3 * n, lanes)), np.empty((3 * n, lanes)), np.empty((9 * n, lanes)), np.empty((3 * n, lanes)))


def lgvi_begin(x, n, coef, topology, h, options, work):
    system_torque(x, n, coef, topology, work[0])  # noqa: F821 (bound at specialisation)


def lgvi_step(x, n, coef, topology, t, h, options, work, active, code, iterations):
    """One step of the LGVI for every lane (see the module docstring).  Newton runs per lane and body
    (scalar code), so a member's bits never depend on the others in its block."""
    torque, torque_next, increment, carried = work
    lanes = x.shape[1]
    tol = options[NEWTON_TOLERANCE]
    max_iterations = int(options[NEWTON_MAX_ITERATIONS])
    half_h = 0.5 * h
    half_h2 = 0.5 * h * h
    for b in range(lanes):
        code[b] = 0
        iterations[b] = 0
    for i in range(n):
        base = 9 * i
        w = 9 * n + 3 * i
        j = HEADER * i
        for b in range(lanes):
            w0, w1, w2 = x[w, b], x[w + 1, b], x[w + 2, b]
            j00, j01, j02 = coef[j, b], coef[j + 1, b], coef[j + 2, b]
            j10, j11, j12 = coef[j + 3, b], coef[j + 4, b], coef[j + 5, b]
            j20, j21, j22 = coef[j + 6, b], coef[j + 7, b], coef[j + 8, b]
            p0, p1, p2 = inertia_times(coef, j, b, w0, w1, w2)
            m0, m1, m2 = torque[3 * i, b], torque[3 * i + 1, b], torque[3 * i + 2, b]
            g0 = h * p0 + half_h2 * m0
            g1 = h * p1 + half_h2 * m1
            g2 = h * p2 + half_h2 * m2
            carried[3 * i, b] = p0 + half_h * m0
            carried[3 * i + 1, b] = p1 + half_h * m1
            carried[3 * i + 2, b] = p2 + half_h * m2
            g_norm = max(abs(g0), max(abs(g1), abs(g2)))
            # first guess: F ≈ exp(h Ω̂), whose Cayley vector is ≈ (h/2) Ω
            f0, f1, f2 = half_h * w0, half_h * w1, half_h * w2
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
            a = 9 * i
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
            for r in range(3):
                x0, x1, x2 = x[base + 3 * r, b], x[base + 3 * r + 1, b], x[base + 3 * r + 2, b]
                for col in range(3):
                    x[base + 3 * r + col, b] += (x0 * increment[a + col, b] + x1 * increment[a + 3 + col, b]
                                                 + x2 * increment[a + 6 + col, b])
    system_torque(x, n, coef, topology, torque_next)  # noqa: F821
    for i in range(n):
        w = 9 * n + 3 * i
        a = 9 * i
        for b in range(lanes):
            y0, y1, y2 = carried[3 * i, b], carried[3 * i + 1, b], carried[3 * i + 2, b]
            # Π_{k+1} = Fᵀ y + (h/2) M_{k+1} = y + Aᵀ y + (h/2) M_{k+1}
            p0 = y0 + (increment[a, b] * y0 + increment[a + 3, b] * y1 + increment[a + 6, b] * y2) \
                + half_h * torque_next[3 * i, b]
            p1 = y1 + (increment[a + 1, b] * y0 + increment[a + 4, b] * y1 + increment[a + 7, b] * y2) \
                + half_h * torque_next[3 * i + 1, b]
            p2 = y2 + (increment[a + 2, b] * y0 + increment[a + 5, b] * y1 + increment[a + 8, b] * y2) \
                + half_h * torque_next[3 * i + 2, b]
            x[w, b], x[w + 1, b], x[w + 2, b] = inverse_inertia_times(coef, HEADER * i, b, p0, p1, p2)
            torque[3 * i, b] = torque_next[3 * i, b]
            torque[3 * i + 1, b] = torque_next[3 * i + 1, b]
            torque[3 * i + 2, b] = torque_next[3 * i + 2, b]
