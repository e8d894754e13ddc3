"""Lee–Leok–McClamroch variational integrators on (S²)ⁿ, in lane layout.

``explicit_vi_*``: the explicit form (29)–(30) for diagonal M.
``implicit_vi_*``: the implicit form (22)–(25) for any SPD M; (22) is solved in Cayley coordinates
(27)–(28) by Newton's method with the analytic Jacobian, then (25) gives ω_{k+1}.  With forces (the
discrete Lagrange–d'Alembert principle) and with configuration-dependent inertia m_jk(q) (a symmetric
discrete Lagrangian, see :func:`implicit_vi_step`).
Free names bound at specialisation: ``system_gradient``, ``system_force``, ``system_force_damping``,
``system_inertia``, ``system_inertia_gradient``, ``FORCED``, ``VARIABLE_INERTIA``.
"""

import numpy as np

from ..lanes import add_cross, add_metric_gradient, lane_function, solve_in_lanes
from ..status import NEWTON_FAILED, VI_STEP_INFEASIBLE

#: method options of the implicit solve, in the order of the ``options`` array
NEWTON_TOLERANCE, NEWTON_MAX_ITERATIONS = 0, 1
#: Newton is also accepted as converged when its correction has shrunk to round-off relative to f,
#: or when the residual has stalled (not halved by an iteration) within STALLED_RESIDUAL_FACTOR × tol:
#: with ill-conditioned M (Example 4's spans 6e-6…1.3e-3) round-off in R alone exceeds 1e-14 ‖d‖.
ROUND_OFF_CORRECTION = 4 * np.finfo(np.float64).eps
STALLED_RESIDUAL_FACTOR = 1e3
#: rows of the implicit step's per-lane ``norms``: ‖d‖_∞, the previous and current ‖R‖_∞, and the
#: ∞-norms of the last Newton correction and of the corrected f
D_NORM, PREVIOUS_RESIDUAL, RESIDUAL, CORRECTION, SIZE = range(5)
NORM_ROWS = 5


def explicit_vi_allocate(n, lanes):
    """Work: q_{k+1}, ∂V/∂q at the current q, q_i × ∂V/∂q_i, h/(2 M_ii), min_i (1 − ‖a_i‖²)."""
    return (np.empty((n, 3, lanes)), np.empty((n, 3, lanes)), np.empty((n, 3, lanes)),
            np.empty((n, lanes)), np.empty(lanes))


def explicit_vi_begin(q, omega, mass_diag, mass_full, coef, topology, h, options, work):
    q_next, grad, torque, half_h_over_mass, margin = work
    system_gradient(q, coef, topology, grad)  # noqa: F821 (bound at specialisation)
    half_steps_over_mass(mass_diag, h, half_h_over_mass)


@lane_function
def half_steps_over_mass(mass_diag, h, out):
    """out[i, b] = h/(2 M_ii) of every body and lane: the half kick's factor (eq. (30)), shared with langevin."""
    for i in range(mass_diag.shape[0]):
        for b in range(mass_diag.shape[1]):
            out[i, b] = 0.5 * h / mass_diag[i, b]


@lane_function
def explicit_vi_drift(q, omega, grad, half_h_over_mass, h, q_next, i, b):
    """Body i, lane b: the first half kick of Lee–Leok–McClamroch eq. (30) and the drift (29).

    ω_i ← ω_i − (h/2M_ii) q_i × ∂V_k/∂q_i; a_i = h ω_i; q_{k+1} = a_i × q_i + √(1 − ‖a_i‖²) q_i
    (evaluated as an increment of q_i, see below).
    Returns 1 − ‖a_i‖² (negative: no real q_{k+1}, the step is infeasible).  Shared by the ensemble
    step below and the system-parallel driver (:mod:`kernels.system_parallel`).
    """
    c = half_h_over_mass[i, b]
    q0, q1, q2 = q[i, 0, b], q[i, 1, b], q[i, 2, b]
    t0 = q1 * grad[i, 2, b] - q2 * grad[i, 1, b]
    t1 = q2 * grad[i, 0, b] - q0 * grad[i, 2, b]
    t2 = q0 * grad[i, 1, b] - q1 * grad[i, 0, b]
    # half kick of (30): ω − (h/2M_ii) q_k × ∂V_k/∂q ; a_i = h × that, eq. (29)
    w0 = omega[i, 0, b] - c * t0
    w1 = omega[i, 1, b] - c * t1
    w2 = omega[i, 2, b] - c * t2
    a0, a1, a2 = h * w0, h * w1, h * w2
    squared = a0 * a0 + a1 * a1 + a2 * a2
    s = 1.0 - squared
    # q_{k+1} = q_k + (a_i × q_i + (r − 1) q_i) with r − 1 = −‖a_i‖²/(1 + r), r = √(1 − ‖a_i‖²): the
    # same point as (29) without forming r itself.  For ‖a_i‖ < 2e-4 (small steps), √ of the float
    # 1 − k·2⁻⁵³ lies just below a midpoint of the float grid whenever k is odd and rounds down, so r
    # came out 2⁻⁵⁵ ≈ 2.8e-17 too small on average and ‖q_i‖ shrank by that much every step.
    shrink = -squared / (1.0 + np.sqrt(s))  # NaN when ‖a_i‖ > 1: the caller flags the member
    q_next[i, 0, b] = q0 + ((a1 * q2 - a2 * q1) + shrink * q0)
    q_next[i, 1, b] = q1 + ((a2 * q0 - a0 * q2) + shrink * q1)
    q_next[i, 2, b] = q2 + ((a0 * q1 - a1 * q0) + shrink * q2)
    omega[i, 0, b] = w0
    omega[i, 1, b] = w1
    omega[i, 2, b] = w2
    return s


@lane_function
def explicit_vi_kick(q_next, omega, grad, half_h_over_mass, q, i, b):
    """Body i, lane b: the second half kick of eq. (30) with ∂V/∂q at q_{k+1}; then q_i ← q_{k+1,i}."""
    c = half_h_over_mass[i, b]
    q0, q1, q2 = q_next[i, 0, b], q_next[i, 1, b], q_next[i, 2, b]
    omega[i, 0, b] -= c * (q1 * grad[i, 2, b] - q2 * grad[i, 1, b])
    omega[i, 1, b] -= c * (q2 * grad[i, 0, b] - q0 * grad[i, 2, b])
    omega[i, 2, b] -= c * (q0 * grad[i, 1, b] - q1 * grad[i, 0, b])
    q[i, 0, b] = q0
    q[i, 1, b] = q1
    q[i, 2, b] = q2


@lane_function
def explicit_vi_particle_factors(coef, h, mass_diag, i, body, factors):
    """The system-parallel driver's per-call factors of particle i: vi's stages need none beyond h/(2M_ii)."""


@lane_function
def explicit_vi_particle_drift(q, omega, grad, half_h_over_mass, h, q_next, i, step, coef, mass_diag, factors, ids,
                               heat):
    """The system-parallel driver's first stage of particle i (:mod:`kernels.system_parallel`, whose stages all take
    the step index, coefficients, masses, per-call factors, original ids and heat that the stochastic methods need):
    the half kick and drift of :func:`explicit_vi_drift`."""
    return explicit_vi_drift(q, omega, grad, half_h_over_mass, h, q_next, i, 0)


@lane_function
def explicit_vi_particle_kick(q_next, omega, grad, half_h_over_mass, q, i, coef, mass_diag, ids, heat):
    """The system-parallel driver's last stage of particle i: :func:`explicit_vi_kick`."""
    explicit_vi_kick(q_next, omega, grad, half_h_over_mass, q, i, 0)


def explicit_vi_step(t, q, omega, mass_diag, mass_full, coef, topology, h, options, work, active, code, iterations):
    """One step of Lee–Leok–McClamroch eqs. (29)–(30); ∂V/∂q_{k+1} is kept for the next step.  Unforced
    systems only (forces take the implicit path, see :func:`implicit_vi_step`), so t is unused."""
    q_next, grad, torque, half_h_over_mass, margin = work
    n = q.shape[0]
    lanes = q.shape[2]
    for b in range(lanes):
        margin[b] = 1.0
    for i in range(n):
        for b in range(lanes):
            margin[b] = min(margin[b], explicit_vi_drift(q, omega, grad, half_h_over_mass, h, q_next, i, b))
    system_gradient(q_next, coef, topology, grad)  # noqa: F821
    for i in range(n):
        for b in range(lanes):
            explicit_vi_kick(q_next, omega, grad, half_h_over_mass, q, i, b)
    for b in range(lanes):
        code[b] = VI_STEP_INFEASIBLE if margin[b] < 0.0 else 0
        iterations[b] = 0


def implicit_vi_allocate(n, lanes):
    """Work: ∂V/∂q, d (22), f, y = F q − q, 2/(1 + ‖f_j‖²), u, D_j = ∂y_j/∂f_j, Newton matrix and
    vector, q_i × Σ_j M_ij y_j and its inner sums, per-lane norms (see NORM_ROWS), done; for forced
    kernels the moments g and a zero ω; for configuration-dependent inertia the trial q_{k+1}, m(q_k),
    m̄, m(q_{k+1}), ∂m/∂q at q_k and q_{k+1} and Σ_jl (y_j·y_l) ∂m_jl/∂q_i (empty when not needed)."""
    forced_n = n if FORCED else 0  # noqa: F821 (bound at specialisation)
    v = n if VARIABLE_INERTIA else 0  # noqa: F821
    return (np.empty((n, 3, lanes)), np.empty((n, 3, lanes)), np.empty((n, 3, lanes)), np.empty((n, 3, lanes)),
            np.empty((n, lanes)), np.empty((n, 3, lanes)), np.empty((n, 3, 3, lanes)), np.empty((3 * n, 3 * n, lanes)),
            np.empty((3 * n, lanes)), np.empty((n, 3, lanes)), np.empty((3, lanes)), np.empty((NORM_ROWS, lanes)),
            np.empty(lanes, np.bool_), np.empty((forced_n, 3, lanes)), np.zeros((forced_n, 3, lanes)),
            np.empty((v, 3, lanes)), np.empty((v, v, lanes)), np.empty((v, v, lanes)), np.empty((v, v, lanes)),
            np.empty((v, v, v, 3, lanes)), np.empty((v, v, v, 3, lanes)), np.empty((v, 3, lanes)))


def implicit_vi_begin(q, omega, mass_diag, mass_full, coef, topology, h, options, work):
    system_gradient(q, coef, topology, work[0])  # noqa: F821


@lane_function
def cayley_displacement(q, f, y, cayley_scale):
    """y_j = F_j q_j − q_j = 2(f_j × q_j − ‖f_j‖² q_j)/(1 + ‖f_j‖²), eq. (27), without cancellation.

    Also keeps 2/(1 + ‖f_j‖²) in ``cayley_scale``: the residual and Jacobian of (28) reuse it, so a
    Newton iteration divides once per body.
    """
    for j in range(q.shape[0]):
        for b in range(q.shape[2]):
            ss = f[j, 0, b] ** 2 + f[j, 1, b] ** 2 + f[j, 2, b] ** 2
            scale = 2.0 / (1.0 + ss)
            cayley_scale[j, b] = scale
            y[j, 0, b] = scale * (f[j, 1, b] * q[j, 2, b] - f[j, 2, b] * q[j, 1, b] - ss * q[j, 0, b])
            y[j, 1, b] = scale * (f[j, 2, b] * q[j, 0, b] - f[j, 0, b] * q[j, 2, b] - ss * q[j, 1, b])
            y[j, 2, b] = scale * (f[j, 0, b] * q[j, 1, b] - f[j, 1, b] * q[j, 0, b] - ss * q[j, 2, b])


@lane_function
def cross_with_mass_sums(q, mass_full, y, skip_diagonal, sums, out):
    """out_i = q_i × Σ_j M_ij y_j for every body and lane (j ≠ i when ``skip_diagonal``).

    Lanes innermost, so each loop is one SIMD sweep; ``sums`` (3, L) is scratch.
    """
    n = q.shape[0]
    lanes = q.shape[2]
    for i in range(n):
        for k in range(3):
            for b in range(lanes):
                sums[k, b] = 0.0
        for j in range(n):
            if skip_diagonal and j == i:
                continue
            for b in range(lanes):
                m = mass_full[i, j, b]
                sums[0, b] += m * y[j, 0, b]
                sums[1, b] += m * y[j, 1, b]
                sums[2, b] += m * y[j, 2, b]
        for b in range(lanes):
            out[i, 0, b] = q[i, 1, b] * sums[2, b] - q[i, 2, b] * sums[1, b]
            out[i, 1, b] = q[i, 2, b] * sums[0, b] - q[i, 0, b] * sums[2, b]
            out[i, 2, b] = q[i, 0, b] * sums[1, b] - q[i, 1, b] * sums[0, b]


@lane_function
def assemble_velocity_matrix(q, mass_full, a):
    """Blocks M_ii I₃ (diagonal) and −M_ij q̂_i q̂_j = −M_ij (q_j q_iᵀ − (q_i·q_j) I₃): eqs. (9), (25)."""
    n = q.shape[0]
    for i in range(n):
        for j in range(n):
            for r in range(3):  # one block row per lane sweep (see the Jacobian in implicit_vi_step)
                for b in range(q.shape[2]):
                    if i == j:
                        for c in range(3):
                            a[3 * i + r, 3 * j + c, b] = mass_full[i, i, b] if r == c else 0.0
                    else:
                        dot = q[i, 0, b] * q[j, 0, b] + q[i, 1, b] * q[j, 1, b] + q[i, 2, b] * q[j, 2, b]
                        for c in range(3):
                            value = q[j, r, b] * q[i, c, b] - (dot if r == c else 0.0)
                            a[3 * i + r, 3 * j + c, b] = -mass_full[i, j, b] * value


@lane_function
def metric_moment(q, dm, y, scale, metric, out):
    """out_i += scale · q_i × Σ_jl (y_j·y_l) ∂m_jl/∂q_i, the discrete Lagrangian's inertia-gradient moment
    (``metric`` is scratch)."""
    metric[:] = 0.0
    add_metric_gradient(dm, y, 1.0, metric)
    add_cross(q, metric, scale, out)


@lane_function
def add_inertia_variation_jacobian(q, f, y, cayley_scale, dy, dm_now, dm_next, jac):
    """jac += ∂/∂f_j of the configuration-inertia terms of :func:`implicit_vi_step`'s residual R_i.

    Through m̄ = ½(m(q_k) + m(q_k + y)): Σ_l v_il ⊗ ½ D_jᵀ ∂m_il/∂q_j(q_{k+1}), with v_ii = 2f_i/(1 + ‖f_i‖²)
    and v_il = q_i × y_l (l ≠ i) the factors m̄_il multiplies; through −¼ q_i × Σ_jl (y_j·y_l) ∂m_jl/∂q_i(q_k)
    (m symmetric): −½ Σ_l (q_i × ∂m_jl/∂q_i(q_k)) ⊗ D_jᵀ y_l.  D_j = ∂y_j/∂f_j is ``dy[j, row, column]``.
    """
    n = q.shape[0]
    for i in range(n):
        for j in range(n):
            for l in range(n):
                for b in range(q.shape[2]):
                    if l == i:
                        v0 = cayley_scale[i, b] * f[i, 0, b]
                        v1 = cayley_scale[i, b] * f[i, 1, b]
                        v2 = cayley_scale[i, b] * f[i, 2, b]
                    else:
                        v0 = q[i, 1, b] * y[l, 2, b] - q[i, 2, b] * y[l, 1, b]
                        v1 = q[i, 2, b] * y[l, 0, b] - q[i, 0, b] * y[l, 2, b]
                        v2 = q[i, 0, b] * y[l, 1, b] - q[i, 1, b] * y[l, 0, b]
                    h0, h1, h2 = dm_now[j, l, i, 0, b], dm_now[j, l, i, 1, b], dm_now[j, l, i, 2, b]
                    w0 = q[i, 1, b] * h2 - q[i, 2, b] * h1
                    w1 = q[i, 2, b] * h0 - q[i, 0, b] * h2
                    w2 = q[i, 0, b] * h1 - q[i, 1, b] * h0
                    for c in range(3):
                        e = 0.5 * (dm_next[i, l, j, 0, b] * dy[j, 0, c, b] + dm_next[i, l, j, 1, b] * dy[j, 1, c, b]
                                   + dm_next[i, l, j, 2, b] * dy[j, 2, c, b])
                        z = 0.5 * (y[l, 0, b] * dy[j, 0, c, b] + y[l, 1, b] * dy[j, 1, c, b] + y[l, 2, b] * dy[j, 2, c, b])
                        jac[3 * i, 3 * j + c, b] += v0 * e - w0 * z
                        jac[3 * i + 1, 3 * j + c, b] += v1 * e - w1 * z
                        jac[3 * i + 2, 3 * j + c, b] += v2 * e - w2 * z


def implicit_vi_step(t, q, omega, mass_diag, mass_full, coef, topology, h, options, work, active, code, iterations):
    """One step of Lee–Leok–McClamroch eqs. (22)–(25), from time t (s).

    Forces (kernels compiled with FORCED) enter by the discrete Lagrange–d'Alembert principle with the
    trapezoidal discrete forces f⁻_k = (h/2) g(t_k, q_k, ω_k) and f⁺_k = (h/2) g(t_{k+1}, q_{k+1}, ω_{k+1}):
    (h²/2) g_k joins d of (22) beside −(h²/2) q × ∂V_k/∂q, and (h/2) g_{k+1} the right side of (25) beside
    −(h/2) q × ∂V_{k+1}/∂q.  g is affine in ω, so (25) stays linear: its matrix loses (h/2) ∂g/∂ω.

    Configuration-dependent inertia (kernels compiled with VARIABLE_INERTIA): the discrete Lagrangian
    (13) with m̄ = ½(m(q_k) + m(q_{k+1})) in place of M, L_d = (1/2h) Σ m̄_jl Δ_j·Δ_l − (h/2)(V_k + V_{k+1}),
    Δ_j = q_{j,k+1} − q_{j,k}: symmetric in its two points, hence second order.  Its derivatives add one
    term each to (22) and (25): the left side of (22) becomes q_i × Σ_j m̄_ij Δ_j − ¼ q_i × Σ_jl (Δ_j·Δ_l)
    ∂m_jl/∂q_i(q_k), with h π_k (π_i = q_i × Σ_j m_ij(q_k) q̇_j) on its right; the right side of (24) is
    (1/h) q_i × [Σ_j m̄_ij Δ_j + ¼ Σ_jl (Δ_j·Δ_l) ∂m_jl/∂q_i(q_{k+1})] − …, and (25)'s matrix takes m(q_{k+1}).
    Newton's Jacobian carries the f-derivatives of both new terms (:func:`add_inertia_variation_jacobian`).

    Newton on the residual R_i(f) = 2M_ii f_i/(1+‖f_i‖²) + q_i × Σ_{j≠i} M_ij y_j(f) − d_i + q_i (q_i·f_i):
    its tangential part is (28) and its normal part pins f_i·q_i = 0 so the Jacobian is regular.
    Converged when ‖R‖_∞ ≤ tol ‖d‖_∞ (or stalled at round-off, see STALLED_RESIDUAL_FACTOR);
    per-member failure → status NEWTON_FAILED.  Residual, Jacobian and solve sweep every lane of the
    block; only the bookkeeping is per lane, and a lane stops changing once it is done, so its result
    does not depend on which other members share its block.
    """
    grad, d, f, y, cayley_scale, u, dy, jac, vec, cross, sums, norms, done, moments, at_rest = work[:15]
    if VARIABLE_INERTIA:  # noqa: F821 (a compile-time constant, as FORCED)
        q_next, mass_now, mass_mean, mass_next, dm_now, dm_next, metric = work[15:]
        system_inertia(q, coef, topology, mass_now)  # noqa: F821
        system_inertia_gradient(q, coef, topology, dm_now)  # noqa: F821
    else:
        mass_now, mass_mean, mass_next = mass_full, mass_full, mass_full
    n = q.shape[0]
    lanes = q.shape[2]
    tol = options[NEWTON_TOLERANCE]
    max_iterations = int(options[NEWTON_MAX_ITERATIONS])
    # d_i of (22): h M_ii ω_i − q_i × Σ_{j≠i} M_ij (q_j × h ω_j) − (h²/2) q_i × ∂V/∂q_i
    for j in range(n):
        for b in range(lanes):
            u[j, 0, b] = h * (q[j, 1, b] * omega[j, 2, b] - q[j, 2, b] * omega[j, 1, b])
            u[j, 1, b] = h * (q[j, 2, b] * omega[j, 0, b] - q[j, 0, b] * omega[j, 2, b])
            u[j, 2, b] = h * (q[j, 0, b] * omega[j, 1, b] - q[j, 1, b] * omega[j, 0, b])
    cross_with_mass_sums(q, mass_now, u, True, sums, cross)
    half_h = 0.5 * h
    half_h2 = 0.5 * h * h
    if FORCED:  # noqa: F821
        system_force(t, q, omega, coef, topology, moments)  # noqa: F821
    for b in range(lanes):
        norms[D_NORM, b] = 0.0
        norms[PREVIOUS_RESIDUAL, b] = np.inf
        done[b] = not active[b]
        iterations[b] = 0
        code[b] = 0
    for i in range(n):
        for b in range(lanes):
            hm = h * mass_now[i, i, b]
            d[i, 0, b] = hm * omega[i, 0, b] - cross[i, 0, b] - half_h2 * (q[i, 1, b] * grad[i, 2, b]
                                                                            - q[i, 2, b] * grad[i, 1, b])
            d[i, 1, b] = hm * omega[i, 1, b] - cross[i, 1, b] - half_h2 * (q[i, 2, b] * grad[i, 0, b]
                                                                            - q[i, 0, b] * grad[i, 2, b])
            d[i, 2, b] = hm * omega[i, 2, b] - cross[i, 2, b] - half_h2 * (q[i, 0, b] * grad[i, 1, b]
                                                                            - q[i, 1, b] * grad[i, 0, b])
            if FORCED:  # noqa: F821 (a compile-time constant: the branch is pruned in unforced kernels)
                d[i, 0, b] += half_h2 * moments[i, 0, b]
                d[i, 1, b] += half_h2 * moments[i, 1, b]
                d[i, 2, b] += half_h2 * moments[i, 2, b]
            for k in range(3):
                norms[D_NORM, b] = max(norms[D_NORM, b], abs(d[i, k, b]))
            # first guess f_i = (h/2) ω_i: y_i ≈ 2 f_i × q_i must match h q̇_i = h ω_i × q_i to first order
            f[i, 0, b] = half_h * omega[i, 0, b]
            f[i, 1, b] = half_h * omega[i, 1, b]
            f[i, 2, b] = half_h * omega[i, 2, b]
    for iteration in range(max_iterations + 1):
        cayley_displacement(q, f, y, cayley_scale)
        if VARIABLE_INERTIA:  # noqa: F821
            for j in range(n):
                for k in range(3):
                    for b in range(lanes):
                        q_next[j, k, b] = q[j, k, b] + y[j, k, b]
            system_inertia(q_next, coef, topology, mass_next)  # noqa: F821
            system_inertia_gradient(q_next, coef, topology, dm_next)  # noqa: F821
            for j in range(n):
                for k in range(n):
                    for b in range(lanes):
                        mass_mean[j, k, b] = 0.5 * (mass_now[j, k, b] + mass_next[j, k, b])
        cross_with_mass_sums(q, mass_mean, y, True, sums, cross)
        if VARIABLE_INERTIA:  # noqa: F821
            metric_moment(q, dm_now, y, -0.25, metric, cross)
        for b in range(lanes):
            norms[RESIDUAL, b] = 0.0
        for i in range(n):
            for b in range(lanes):
                scaled_mass = mass_mean[i, i, b] * cayley_scale[i, b]
                normal = q[i, 0, b] * f[i, 0, b] + q[i, 1, b] * f[i, 1, b] + q[i, 2, b] * f[i, 2, b]
                for k in range(3):
                    r = scaled_mass * f[i, k, b] + cross[i, k, b] - d[i, k, b] + q[i, k, b] * normal
                    vec[3 * i + k, b] = r
                    norms[RESIDUAL, b] = max(norms[RESIDUAL, b], abs(r))
        remaining = 0
        for b in range(lanes):
            if done[b]:
                continue
            residual = norms[RESIDUAL, b]
            stalled = (residual > 0.5 * norms[PREVIOUS_RESIDUAL, b]
                       and residual <= STALLED_RESIDUAL_FACTOR * tol * norms[D_NORM, b])
            norms[PREVIOUS_RESIDUAL, b] = residual
            if residual <= tol * norms[D_NORM, b] or stalled:
                done[b] = True
            elif iteration == max_iterations:
                done[b] = True
                code[b] = NEWTON_FAILED
            else:
                remaining += 1
        if remaining == 0:
            break
        # analytic Jacobian: ∂/∂f_i of 2M_ii f_i/(1+s_i) plus q_i q_iᵀ, and M_ij q̂_i D_j off the diagonal,
        # D_j = ∂y_j/∂f_j = −2/(1+s_j) [q̂_j + (y_j + 2 q_j) f_jᵀ]
        # (one row r per sweep: each lane loop then writes three arrays' worth of rows, within the
        # vectoriser's budget of runtime overlap checks)
        for j in range(n):
            for r in range(3):
                r1 = (r + 1) % 3
                r2 = (r + 2) % 3
                for b in range(lanes):
                    scale = -cayley_scale[j, b]
                    g = y[j, r, b] + 2.0 * q[j, r, b]
                    dy[j, r, r, b] = scale * (0.0 + g * f[j, r, b])  # q̂_j has a zero diagonal
                    dy[j, r, r1, b] = scale * (-q[j, r2, b] + g * f[j, r1, b])
                    dy[j, r, r2, b] = scale * (q[j, r1, b] + g * f[j, r2, b])
        for i in range(n):
            for j in range(n):
                for r in range(3):
                    if i == j:
                        for b in range(lanes):
                            inv = 0.5 * cayley_scale[i, b]  # 1/(1 + ‖f_i‖²), exactly
                            m2 = 2.0 * mass_mean[i, i, b]
                            for c in range(3):
                                value = -2.0 * m2 * inv * inv * f[i, r, b] * f[i, c, b] + q[i, r, b] * q[i, c, b]
                                if r == c:
                                    value += m2 * inv
                                jac[3 * i + r, 3 * j + c, b] = value
                    else:
                        c = r  # column c of the block M_ij q̂_i D_j
                        for b in range(lanes):
                            m = mass_mean[i, j, b]
                            x0, x1, x2 = dy[j, 0, c, b], dy[j, 1, c, b], dy[j, 2, c, b]
                            jac[3 * i, 3 * j + c, b] = m * (q[i, 1, b] * x2 - q[i, 2, b] * x1)
                            jac[3 * i + 1, 3 * j + c, b] = m * (q[i, 2, b] * x0 - q[i, 0, b] * x2)
                            jac[3 * i + 2, 3 * j + c, b] = m * (q[i, 0, b] * x1 - q[i, 1, b] * x0)
        if VARIABLE_INERTIA:  # noqa: F821
            add_inertia_variation_jacobian(q, f, y, cayley_scale, dy, dm_now, dm_next, jac)
        solve_in_lanes(jac, vec)
        # f ← f − Newton correction in lanes still iterating (a select, so the sweep stays SIMD)
        for b in range(lanes):
            norms[CORRECTION, b] = 0.0
            norms[SIZE, b] = 0.0
        for i in range(n):
            for k in range(3):
                for b in range(lanes):
                    updated = f[i, k, b] - vec[3 * i + k, b]
                    f[i, k, b] = f[i, k, b] if done[b] else updated
                    norms[CORRECTION, b] = max(norms[CORRECTION, b], abs(vec[3 * i + k, b]))
                    norms[SIZE, b] = max(norms[SIZE, b], abs(updated))
        for b in range(lanes):
            if not done[b]:
                iterations[b] += 1
                if norms[CORRECTION, b] <= ROUND_OFF_CORRECTION * norms[SIZE, b]:
                    done[b] = True
    # q_{k+1} = F q_k (23); ω_{k+1} from the linear system (25).  Every exit from the Newton loop
    # follows a residual evaluation, so y already holds F q_k − q_k for the final f (and m(q_{k+1}),
    # ∂m/∂q at q_{k+1} and m̄ belong to it).
    for j in range(n):
        for k in range(3):
            for b in range(lanes):
                q[j, k, b] += y[j, k, b]
    system_gradient(q, coef, topology, grad)  # noqa: F821
    assemble_velocity_matrix(q, mass_next, jac)
    cross_with_mass_sums(q, mass_mean, y, False, sums, cross)
    if VARIABLE_INERTIA:  # noqa: F821
        metric_moment(q, dm_next, y, 0.25, metric, cross)
    inverse_h = 1.0 / h
    for i in range(n):
        for b in range(lanes):
            vec[3 * i, b] = cross[i, 0, b] * inverse_h - 0.5 * h * (q[i, 1, b] * grad[i, 2, b] - q[i, 2, b] * grad[i, 1, b])
            vec[3 * i + 1, b] = cross[i, 1, b] * inverse_h - 0.5 * h * (q[i, 2, b] * grad[i, 0, b] - q[i, 0, b] * grad[i, 2, b])
            vec[3 * i + 2, b] = cross[i, 2, b] * inverse_h - 0.5 * h * (q[i, 0, b] * grad[i, 1, b] - q[i, 1, b] * grad[i, 0, b])
    if FORCED:  # noqa: F821
        system_force(t + h, q, at_rest, coef, topology, moments)  # noqa: F821 (g at ω = 0: its affine part)
        system_force_damping(q, coef, topology, -half_h, jac)  # noqa: F821 (jac += −(h/2) ∂g/∂ω)
        for r in range(3 * n):
            for b in range(lanes):
                vec[r, b] += half_h * moments[r // 3, r % 3, b]
    solve_in_lanes(jac, vec)
    for i in range(n):
        for k in range(3):
            for b in range(lanes):
                omega[i, k, b] = vec[3 * i + k, b]
