"""Numerics in lane layout: arrays whose last axis runs over ensemble members ("lanes").

Every kernel works on a block of ``L`` members at once, with state arrays shaped ``(n, 3, L)``
(bodies, xyz, lanes).  Loops put the lane index innermost so that LLVM vectorises across members;
each member's arithmetic is exactly the same sequence of IEEE operations as it would be alone,
because the kernels use only +, −, ×, ÷, sqrt and fused multiply-add (correctly rounded in scalar and
SIMD form alike) and never fast-math.  That is what makes results bitwise independent of how members are grouped
into blocks, chunks or workers.
"""

import fractions
import math
import types as python_types

import numpy as np
from numba import njit, types
from numba.core import config
from numba.extending import intrinsic

from . import llvm_options  # noqa: F401  (process-wide codegen settings, before any kernel compiles)


#: Decorator for every jitted kernel function: float division by zero gives inf/NaN (recorded as
#: divergence per member) instead of raising, and no fast-math so results are reproducible.
lane_function = njit(error_model="numpy", nogil=True)
#: the same for small helpers called inside lane loops: inlined in Numba's IR, so that LLVM sees one loop body it
#: can vectorise (a call it keeps out of line stops the loop vectoriser).  Below -O2 (the test suite's -O1, chosen
#: for compile time) they stay out of line: Numba types an inlined helper again at every call site, which made
#: the SE(3) lgvi kernel compile 1.7x longer (24 s against 14 s), and inlining changes no bit (no fast-math:
#: the same IEEE operations).
inline_lane_function = njit(error_model="numpy", nogil=True, inline="always" if config.OPT >= 2 else "never")


def bind_template(template, name: str, bindings: dict):
    """A copy of ``template`` whose free global names in ``bindings`` are bound, named ``name``."""
    namespace = dict(template.__globals__)
    namespace.update(bindings)
    function = python_types.FunctionType(template.__code__, namespace, name, template.__defaults__, template.__closure__)
    function.__qualname__ = name
    function.__module__ = template.__module__
    function.__doc__ = template.__doc__
    return function


@lane_function
def pull_toward(x, shadow, factor):
    """shadow ← x + factor (shadow − x) row by row, lane b scaled by factor[b]: Benettin's renormalisation
    in a flat space's coordinates (a space with a manifold puts the shadow back on it afterwards)."""
    for r in range(x.shape[0]):
        for b in range(x.shape[1]):
            shadow[r, b] = x[r, b] + factor[b] * (shadow[r, b] - x[r, b])


@lane_function
def solve_in_lanes(a, x):
    """Solve ``a[:, :, l] @ y = x[:, l]`` for every lane ``l``; ``x`` is overwritten by ``y``.

    Gaussian elimination without pivoting, lanes innermost.  Used only for the symmetric
    positive-definite (or nearly so) block systems of Lee–Leok–McClamroch eqs. (9), (25) and the
    Newton matrix of (28) near f = 0, for which pivoting is unnecessary.  ``a`` is destroyed; its
    diagonal ends up holding the pivots' reciprocals, one division per pivot instead of one per
    eliminated entry (divisions share one slow unit per core: 21 → 6 per 6×6 solve).
    """
    size = a.shape[0]
    lanes = a.shape[2]
    for k in range(size):
        for b in range(lanes):
            a[k, k, b] = 1.0 / a[k, k, b]
        for i in range(k + 1, size):
            for b in range(lanes):
                factor = a[i, k, b] * a[k, k, b]
                a[i, k, b] = factor
            for j in range(k + 1, size):
                for b in range(lanes):
                    a[i, j, b] -= a[i, k, b] * a[k, j, b]
            for b in range(lanes):
                x[i, b] -= a[i, k, b] * x[k, b]
    for k in range(size - 1, -1, -1):
        for j in range(k + 1, size):
            for b in range(lanes):
                x[k, b] -= a[k, j, b] * x[j, b]
        for b in range(lanes):
            x[k, b] *= a[k, k, b]


@lane_function
def cholesky_solve_in_lanes(a, x):
    """Solve a y = x for every lane by the Cholesky factorisation a = L Lᵀ (a symmetric positive definite,
    lanes innermost); x is overwritten by y and a's lower triangle by L (1/L_kk on the diagonal)."""
    size, lanes = a.shape[0], a.shape[2]
    for k in range(size):
        for j in range(k):
            for b in range(lanes):
                a[k, k, b] -= a[k, j, b] * a[k, j, b]
        for b in range(lanes):
            a[k, k, b] = 1.0 / np.sqrt(a[k, k, b])
        for i in range(k + 1, size):
            for j in range(k):
                for b in range(lanes):
                    a[i, k, b] -= a[i, j, b] * a[k, j, b]
            for b in range(lanes):
                a[i, k, b] *= a[k, k, b]
    for k in range(size):
        for j in range(k):
            for b in range(lanes):
                x[k, b] -= a[k, j, b] * x[j, b]
        for b in range(lanes):
            x[k, b] *= a[k, k, b]
    for k in range(size - 1, -1, -1):
        for j in range(k + 1, size):
            for b in range(lanes):
                x[k, b] -= a[j, k, b] * x[j, b]
        for b in range(lanes):
            x[k, b] *= a[k, k, b]


@lane_function
def solve_pivoted_in_lanes(a, x):
    """Solve ``a[:, :, l] @ y = x[:, l]`` for every lane ``l`` by Gaussian elimination with partial
    pivoting, lane by lane (the pivot rows differ between lanes); ``x`` is overwritten by ``y`` and
    ``a`` destroyed.  For the non-symmetric matrix of Lee–Leok–McClamroch eq. (13)."""
    size = a.shape[0]
    for b in range(a.shape[2]):
        for k in range(size):
            pivot = k
            for i in range(k + 1, size):
                if abs(a[i, k, b]) > abs(a[pivot, k, b]):
                    pivot = i
            if pivot != k:
                for j in range(k, size):
                    a[k, j, b], a[pivot, j, b] = a[pivot, j, b], a[k, j, b]
                x[k, b], x[pivot, b] = x[pivot, b], x[k, b]
            inverse = 1.0 / a[k, k, b]
            for i in range(k + 1, size):
                factor = a[i, k, b] * inverse
                for j in range(k + 1, size):
                    a[i, j, b] -= factor * a[k, j, b]
                x[i, b] -= factor * x[k, b]
            a[k, k, b] = inverse
        for k in range(size - 1, -1, -1):
            for j in range(k + 1, size):
                x[k, b] -= a[k, j, b] * x[j, b]
            x[k, b] *= a[k, k, b]


@inline_lane_function
def cross3(a0, a1, a2, b0, b1, b2):
    """a × b of two 3-vectors given as scalars."""
    return a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0


@lane_function
def add_scaled(target, source, scale):
    """target += scale · source, elementwise over (n, 3, lanes)."""
    for i in range(target.shape[0]):
        for k in range(3):
            for b in range(target.shape[2]):
                target[i, k, b] += scale * source[i, k, b]


@lane_function
def copy_block(source, target):
    """target ← source, (n, 3, lanes) arrays, element by element: an array assignment ``target[:] = source`` that a
    kernel on the GPU can run too (numba-cuda does not lower the slice assignment)."""
    for i in range(source.shape[0]):
        for k in range(3):
            for b in range(source.shape[2]):
                target[i, k, b] = source[i, k, b]


@lane_function
def add_cross(q, v, scale, out):
    """out_i += scale · q_i × v_i for every body and lane."""
    for i in range(q.shape[0]):
        for b in range(q.shape[2]):
            out[i, 0, b] += scale * (q[i, 1, b] * v[i, 2, b] - q[i, 2, b] * v[i, 1, b])
            out[i, 1, b] += scale * (q[i, 2, b] * v[i, 0, b] - q[i, 0, b] * v[i, 2, b])
            out[i, 2, b] += scale * (q[i, 0, b] * v[i, 1, b] - q[i, 1, b] * v[i, 0, b])


@lane_function
def add_power(moments, omega, scale, out):
    """out += scale · Σ_i g_i·ω_i per lane (J for scale in s; W for scale 1): the power of moments g on ω."""
    for i in range(moments.shape[0]):
        for k in range(3):
            for b in range(moments.shape[2]):
                out[b] += scale * moments[i, k, b] * omega[i, k, b]


@lane_function
def add_metric_gradient(dm, a, scale, out):
    """out_i += scale · Σ_jk (a_j·a_k) ∂m_jk/∂q_i (J for a = q̇): the kinetic energy's explicit q-gradient."""
    n = a.shape[0]
    for j in range(n):
        for k in range(n):
            for b in range(a.shape[2]):
                weight = scale * (a[j, 0, b] * a[k, 0, b] + a[j, 1, b] * a[k, 1, b] + a[j, 2, b] * a[k, 2, b])
                for i in range(n):
                    for c in range(3):
                        out[i, c, b] += weight * dm[j, k, i, c, b]


@lane_function
def chord(q, i, j, b):
    """q_i − q_j and its squared length (chord², m²) for lane b."""
    d0 = q[i, 0, b] - q[j, 0, b]
    d1 = q[i, 1, b] - q[j, 1, b]
    d2 = q[i, 2, b] - q[j, 2, b]
    return d0, d1, d2, d0 * d0 + d1 * d1 + d2 * d2


@lane_function
def velocities_into(q, omega, out):
    """Body velocities q̇_i = ω_i × q_i (Lee–Leok–McClamroch eq. (10)), lane layout."""
    n = q.shape[0]
    lanes = q.shape[2]
    for i in range(n):
        for b in range(lanes):
            out[i, 0, b] = omega[i, 1, b] * q[i, 2, b] - omega[i, 2, b] * q[i, 1, b]
            out[i, 1, b] = omega[i, 2, b] * q[i, 0, b] - omega[i, 0, b] * q[i, 2, b]
            out[i, 2, b] = omega[i, 0, b] * q[i, 1, b] - omega[i, 1, b] * q[i, 0, b]


@lane_function
def body_velocity(q, omega, i, b):
    """q̇_i = ω_i × q_i (m/s on the unit sphere, Lee–Leok–McClamroch eq. (10)) of body i in lane b, as scalars."""
    return (omega[i, 1, b] * q[i, 2, b] - omega[i, 2, b] * q[i, 1, b],
            omega[i, 2, b] * q[i, 0, b] - omega[i, 0, b] * q[i, 2, b],
            omega[i, 0, b] * q[i, 1, b] - omega[i, 1, b] * q[i, 0, b])


@lane_function
def body_kinetic_energy(q, omega, mass_diag, i, b):
    """½ M_ii ‖ω_i × q_i‖² (J) of body i in lane b."""
    v0, v1, v2 = body_velocity(q, omega, i, b)
    return 0.5 * mass_diag[i, b] * (v0 * v0 + v1 * v1 + v2 * v2)


@lane_function
def kinetic_energy_diagonal(q, omega, mass_diag, mass_full, coef, topology, out):
    """T = ½ Σ_i M_ii ‖ω_i × q_i‖² for diagonal inertia (J); ``mass_full``, ``coef`` and ``topology`` are unused
    (the signature of every ``kinetic_energy``)."""
    n = q.shape[0]
    lanes = q.shape[2]
    for b in range(lanes):
        out[b] = 0.0
    for i in range(n):
        for b in range(lanes):
            out[b] += body_kinetic_energy(q, omega, mass_diag, i, b)


@lane_function
def kinetic_energy_full(q, omega, mass_diag, mass_full, coef, topology, out):
    """T = ½ Σ_ij M_ij (ω_i × q_i)·(ω_j × q_j) for a full inertia matrix (J).  The velocities are formed again for
    each pair rather than kept in an array: a kernel on the GPU (:mod:`kernels.gpu`) cannot allocate one, and the
    n² cross products cost nothing beside a sample's other work."""
    n = q.shape[0]
    lanes = q.shape[2]
    for b in range(lanes):
        out[b] = 0.0
        for i in range(n):
            vi0, vi1, vi2 = body_velocity(q, omega, i, b)
            for j in range(n):
                vj0, vj1, vj2 = body_velocity(q, omega, j, b)
                out[b] += 0.5 * mass_full[i, j, b] * (vi0 * vj0 + vi1 * vj1 + vi2 * vj2)


@lane_function
def constraint_errors_into(q, omega, unit_error, tangency_error):
    """unit_error = max_i |‖q_i‖ − 1| and tangency_error = max_i |q_i·ω_i| per lane."""
    n = q.shape[0]
    lanes = q.shape[2]
    for b in range(lanes):
        unit_error[b] = 0.0
        tangency_error[b] = 0.0
    for i in range(n):
        for b in range(lanes):
            unit, tangency = body_constraint_errors(q, omega, i, b)
            unit_error[b] = max(unit_error[b], unit)
            tangency_error[b] = max(tangency_error[b], tangency)


@lane_function
def body_constraint_errors(q, omega, i, b):
    """|‖q_i‖ − 1| and |q_i·ω_i| of body i in lane b (the GPU's system mode takes their maxima over bodies in a
    reduction of its own)."""
    norm = np.sqrt(q[i, 0, b] ** 2 + q[i, 1, b] ** 2 + q[i, 2, b] ** 2)
    dot = q[i, 0, b] * omega[i, 0, b] + q[i, 1, b] * omega[i, 1, b] + q[i, 2, b] * omega[i, 2, b]
    return abs(norm - 1.0), abs(dot)


@intrinsic
def fused_multiply_add(typingctx, a, b, c):
    """a·b + c with one rounding (IEEE 754 fusedMultiplyAdd, LLVM's llvm.fma: the FMA instruction where
    the CPU has one, else libm's correctly rounded fma, so the bits are the same on every machine).
    fused_multiply_add(a, b, −a·b) is the exact rounding error of a product (Ogita–Rump–Oishi's TwoProduct)."""
    signature = types.float64(types.float64, types.float64, types.float64)

    def codegen(context, builder, sig, args):
        return builder.fma(*args)
    return signature, codegen


if config.DISABLE_JIT:  # Numba's interpreter (the GPU simulator's test, tests/gpu_cases.py) has no intrinsics
    def fused_multiply_add(a, b, c):  # noqa: F811 (the same single rounding: exact rationals, rounded once)
        """a·b + c rounded once, as :func:`fused_multiply_add` (NaN and inf as the plain expression gives them)."""
        if not (math.isfinite(a) and math.isfinite(b) and math.isfinite(c)):
            return a * b + c
        return float(fractions.Fraction(a) * fractions.Fraction(b) + fractions.Fraction(c))


@inline_lane_function
def accumulate_product(total, error, a, z):
    """One step of Ogita–Rump–Oishi's Dot2: (total + a·z, error + the rounding errors of the product
    (from an FMA) and of the sum (Knuth's TwoSum))."""
    product = a * z
    partial = total + product
    back = partial - total
    return partial, error + (((total - (partial - back)) + (product - back)) + fused_multiply_add(a, z, -product))


@inline_lane_function
def compensated_dot6(start, a0, a1, a2, a3, a4, a5, z0, z1, z2, z3, z4, z5):
    """start + a·z as if summed in twice the working precision and rounded once (Ogita, Rump & Oishi,
    "Accurate sum and dot product", SIAM J. Sci. Comput. 26 (2005), Algorithm Dot2)."""
    total, error = accumulate_product(start, 0.0, a0, z0)
    total, error = accumulate_product(total, error, a1, z1)
    total, error = accumulate_product(total, error, a2, z2)
    total, error = accumulate_product(total, error, a3, z3)
    total, error = accumulate_product(total, error, a4, z4)
    total, error = accumulate_product(total, error, a5, z5)
    return total + error
