"""Classical Runge–Kutta baselines on the continuous equations (9)–(11) of Lee–Leok–McClamroch in (q, ω).

q̇_i = ω_i × q_i (10) and ω̇ from (9): M_ii ω̇_i − Σ_{j≠i} M_ij q_i × (q_j × ω̇_j)
= Σ_{j≠i} M_ij (ω_j·ω_j) q_i × q_j − q_i × ∂V/∂q_i, which for diagonal M is explicit.
Nothing here keeps ‖q_i‖ = 1 or q_i·ω_i = 0; that is the point of comparing with the VI.
Free names bound at specialisation: ``system_gradient``, ``equations_of_motion``,
``equations_allocate``, ``record_sample``, ``tableau_a``, ``tableau_b``, ``project_after_step``.
"""

import numpy as np

from ..driver import record_work, write_final_state
from ..lanes import (add_power, add_scaled, copy_block, inline_lane_function, lane_function, solve_in_lanes,
                     velocities_into)
from ..sections import any_crossing, sphere_lane_state
from ..status import OK, STEP_SIZE_UNDERFLOW
from .formulations import add_configuration_force
from .vi import assemble_velocity_matrix

MIDPOINT_A = np.array([[0.0, 0.0], [0.5, 0.0]])
MIDPOINT_B = np.array([0.0, 1.0])
CLASSICAL_A = np.array([[0.0, 0.0, 0.0, 0.0], [0.5, 0.0, 0.0, 0.0], [0.0, 0.5, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0]])
CLASSICAL_B = np.array([1.0 / 6.0, 1.0 / 3.0, 1.0 / 3.0, 1.0 / 6.0])

# Dormand–Prince 5(4) with FSAL, its error weights and the 4th-order dense output of Shampine
# (the coefficients scipy's RK45 uses, so results are comparable with solve_ivp).
DOPRI_A = np.array([
    [0, 0, 0, 0, 0, 0],
    [1 / 5, 0, 0, 0, 0, 0],
    [3 / 40, 9 / 40, 0, 0, 0, 0],
    [44 / 45, -56 / 15, 32 / 9, 0, 0, 0],
    [19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729, 0, 0],
    [9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656, 0],
])
DOPRI_B = np.array([35 / 384, 0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84])
DOPRI_E = np.array([-71 / 57600, 0, 71 / 16695, -71 / 1920, 17253 / 339200, -22 / 525, 1 / 40])
#: float64's machine epsilon, a constant the GPU's threads read (np.finfo does not run there)
ROUNDOFF = float(np.finfo(np.float64).eps)
DOPRI_P = np.array([
    [1, -8048581381 / 2820520608, 8663915743 / 2820520608, -12715105075 / 11282082432],
    [0, 0, 0, 0],
    [0, 131558114200 / 32700410799, -68118460800 / 10900136933, 87487479700 / 32700410799],
    [0, -1754552775 / 470086768, 14199869525 / 1410260304, -10690763975 / 1880347072],
    [0, 127303824393 / 49829197408, -318862633887 / 49829197408, 701980252875 / 199316789632],
    [0, -282668133 / 205662961, 2019193451 / 616988883, -1453857185 / 822651844],
    [0, 40617522 / 29380423, -110615467 / 29380423, 69997945 / 29380423],
])
#: rk45 options, in the order of the ``options`` array
RTOL, ATOL, MAX_STEPS = 0, 1, 2


def equations_allocate_diagonal(n, lanes):
    """Work: ∂V/∂q, (unused matrix and vector), the forces' moments g (empty in unforced kernels)."""
    return (np.empty((n, 3, lanes)), np.empty((1, 1, lanes)), np.empty((1, lanes)),
            np.zeros((n if FORCED else 0, 3, lanes)))  # noqa: F821 (bound at specialisation)


def equations_diagonal(t, q, omega, mass_diag, mass_full, coef, topology, dq, domega, work):
    """(10) and (9) for diagonal M at time t (s): ω̇_i = (g_i − q_i × ∂V/∂q_i)/M_ii, g the forces' moments."""
    grad, _, _, moments = work
    system_gradient(q, coef, topology, grad)  # noqa: F821 (bound at specialisation)
    if FORCED:  # noqa: F821
        system_force(t, q, omega, coef, topology, moments)  # noqa: F821
    velocities_into(q, omega, dq)
    for i in range(q.shape[0]):
        for b in range(q.shape[2]):
            inv = 1.0 / mass_diag[i, b]
            domega[i, 0, b] = -inv * (q[i, 1, b] * grad[i, 2, b] - q[i, 2, b] * grad[i, 1, b])
            domega[i, 1, b] = -inv * (q[i, 2, b] * grad[i, 0, b] - q[i, 0, b] * grad[i, 2, b])
            domega[i, 2, b] = -inv * (q[i, 0, b] * grad[i, 1, b] - q[i, 1, b] * grad[i, 0, b])
            if FORCED:  # noqa: F821
                domega[i, 0, b] += inv * moments[i, 0, b]
                domega[i, 1, b] += inv * moments[i, 1, b]
                domega[i, 2, b] += inv * moments[i, 2, b]


def equations_full(t, q, omega, mass_diag, mass_full, coef, topology, dq, domega, work):
    """(10) and (9) for full M at time t (s): a 3n×3n linear solve for ω̇ per member, the forces'
    moments g_i joining −q_i × ∂V/∂q_i on the right (eq. (40) with the digest's corrected moments).
    With configuration-dependent inertia m_jk(q) (``VARIABLE_INERTIA``), eq. (19): M is m(q) and F_i(q, ω)
    joins ∂V/∂q_i.  Work from :func:`kernels.integrators.formulations.formulation_allocate`."""
    grad, matrix, rhs, moments, m, dm, _, _, _ = work
    system_gradient(q, coef, topology, grad)  # noqa: F821
    if FORCED:  # noqa: F821
        system_force(t, q, omega, coef, topology, moments)  # noqa: F821
    velocities_into(q, omega, dq)
    if VARIABLE_INERTIA:  # noqa: F821
        inertia_now(q, mass_full, coef, topology, m, dm)  # noqa: F821
        add_configuration_force(dq, dm, grad)
        mass_full = m
    assemble_velocity_matrix(q, mass_full, matrix)
    n = q.shape[0]
    for i in range(n):
        for b in range(q.shape[2]):
            r0 = -(q[i, 1, b] * grad[i, 2, b] - q[i, 2, b] * grad[i, 1, b])
            r1 = -(q[i, 2, b] * grad[i, 0, b] - q[i, 0, b] * grad[i, 2, b])
            r2 = -(q[i, 0, b] * grad[i, 1, b] - q[i, 1, b] * grad[i, 0, b])
            for j in range(n):
                if j != i:
                    w2 = mass_full[i, j, b] * (omega[j, 0, b] ** 2 + omega[j, 1, b] ** 2 + omega[j, 2, b] ** 2)
                    r0 += w2 * (q[i, 1, b] * q[j, 2, b] - q[i, 2, b] * q[j, 1, b])
                    r1 += w2 * (q[i, 2, b] * q[j, 0, b] - q[i, 0, b] * q[j, 2, b])
                    r2 += w2 * (q[i, 0, b] * q[j, 1, b] - q[i, 1, b] * q[j, 0, b])
            if FORCED:  # noqa: F821
                r0 += moments[i, 0, b]
                r1 += moments[i, 1, b]
                r2 += moments[i, 2, b]
            rhs[3 * i, b] = r0
            rhs[3 * i + 1, b] = r1
            rhs[3 * i + 2, b] = r2
    solve_in_lanes(matrix, rhs)
    for i in range(n):
        for k in range(3):
            for b in range(q.shape[2]):
                domega[i, k, b] = rhs[3 * i + k, b]


@lane_function
def normalise_rows(q):
    for i in range(q.shape[0]):
        for b in range(q.shape[2]):
            norm = np.sqrt(q[i, 0, b] ** 2 + q[i, 1, b] ** 2 + q[i, 2, b] ** 2)
            q[i, 0, b] /= norm
            q[i, 1, b] /= norm
            q[i, 2, b] /= norm


def explicit_rk_allocate(n, lanes):
    """Work: stage slopes of q and v, the stage state, the equations' work, and v (a formulation's own
    velocity variable; none for ``q_omega``, which steps ω itself), and in forced kernels the step's work."""
    stages = tableau_b.shape[0]  # noqa: F821
    return (np.empty((stages, n, 3, lanes)), np.empty((stages, n, 3, lanes)), np.empty((n, 3, lanes)),
            np.empty((n, 3, lanes)), equations_allocate(n, lanes),  # noqa: F821
            np.empty((n if CONVERTS else 0, 3, lanes)), np.zeros(lanes if FORCED else 0))  # noqa: F821


def explicit_rk_begin(q, omega, mass_diag, mass_full, coef, topology, h, options, work):
    pass


def explicit_rk_step(t, q, omega, mass_diag, mass_full, coef, topology, h, options, work, active, code, iterations):
    """One step from time t (s) of the explicit Runge–Kutta method (tableau_a, tableau_b) on (9)–(10), or on
    a formulation's (q, v) (``CONVERTS``: v from the stored ω before the step, ω from v after it).

    Forced kernels also keep the step's work h Σ_s b_s P_s, the method's own quadrature of the forces'
    power P_s = Σ_i g_i·ω_i at its stages (4th order for rk4), from the moments the stages computed anyway
    (a separate power evaluation after the step would cost one more force evaluation per step)."""
    kq, kw, yq, yw, eq_work, v, step_work = work
    if FORCED:  # noqa: F821
        step_work[:] = 0.0
    if CONVERTS:  # noqa: F821
        velocity_from_stored(q, omega, mass_full, coef, topology, v, eq_work)  # noqa: F821
    else:
        v = omega
    stages = tableau_b.shape[0]  # noqa: F821
    for s in range(stages):
        copy_block(q, yq)
        copy_block(v, yw)
        node = 0.0  # c_s = Σ_r a_sr, the stage's time within the step
        for r in range(s):
            a = tableau_a[s, r]  # noqa: F821
            node += a
            if a != 0.0:
                add_scaled(yq, kq[r], h * a)
                add_scaled(yw, kw[r], h * a)
        equations_of_motion(t + node * h, yq, yw, mass_diag, mass_full, coef, topology, kq[s], kw[s],  # noqa: F821
                            eq_work)
        if FORCED:  # noqa: F821 (the moments are eq_work[3]; ω of a converting formulation's stage eq_work[6])
            if CONVERTS:  # noqa: F821
                add_power(eq_work[3], eq_work[6], h * tableau_b[s], step_work)
            else:
                add_power(eq_work[3], yw, h * tableau_b[s], step_work)
    for r in range(stages):
        weight = tableau_b[r]  # noqa: F821
        if weight != 0.0:
            add_scaled(q, kq[r], h * weight)
            add_scaled(v, kw[r], h * weight)
    if project_after_step:  # noqa: F821
        normalise_rows(q)
    if CONVERTS:  # noqa: F821
        velocity_to_stored(q, v, mass_full, coef, topology, omega, eq_work)  # noqa: F821
    for b in range(q.shape[2]):
        code[b] = 0
        iterations[b] = 0


def stage_work(t_next, q, omega, coef, topology, moments, power, next_power, done, h, work):
    """``integrator_work`` of :func:`explicit_rk_step`: done += the step's work it kept (J)."""
    step_work = work[6]
    for b in range(done.shape[0]):
        done[b] += step_work[b]


@lane_function
def dopri_error_norm(q, omega, q_new, omega_new, kq, kw, h, rtol, atol):
    """RMS over all 6n components of h Σ E_r k_r / (atol + rtol max(|y|, |y_new|)) (lane 0)."""
    total = 0.0
    for i in range(q.shape[0]):
        for k in range(3):
            eq = 0.0
            ew = 0.0
            for r in range(7):
                eq += DOPRI_E[r] * kq[r, i, k, 0]
                ew += DOPRI_E[r] * kw[r, i, k, 0]
            sq = atol + rtol * max(abs(q[i, k, 0]), abs(q_new[i, k, 0]))
            sw = atol + rtol * max(abs(omega[i, k, 0]), abs(omega_new[i, k, 0]))
            total += (h * eq / sq) ** 2 + (h * ew / sw) ** 2
    return np.sqrt(total / (6 * q.shape[0]))


@inline_lane_function
def dense_weight(r, theta):
    """Σ_c P[r, c] θ^{c+1}: stage r's weight in the dense output at θ, the powers as running products (no array:
    the GPU's threads allocate nothing)."""
    power = theta
    weight = 0.0
    for c in range(4):
        weight += DOPRI_P[r, c] * power
        power *= theta
    return weight


@lane_function
def dopri_dense_into(q, omega, kq, kw, h, theta, out_q, out_w):
    """y(t + θh) = y + h Σ_r k_r Σ_c P[r, c] θ^{c+1} (lane 0)."""
    for i in range(q.shape[0]):
        for k in range(3):
            sq = 0.0
            sw = 0.0
            for r in range(7):
                weight = dense_weight(r, theta)
                sq += weight * kq[r, i, k, 0]
                sw += weight * kw[r, i, k, 0]
            out_q[i, k, 0] = q[i, k, 0] + h * sq
            out_w[i, k, 0] = omega[i, k, 0] + h * sw


@lane_function
def dopri_next_step(h, h_step, error, last):
    """The controller's next step after a step of size ``h_step`` with error norm ``error``: accepted
    (error ≤ 1) it grows by at most 10 (and a clipped last step never shrinks the proposal ``h``),
    rejected it shrinks by at least 5 (a NaN error: by 5)."""
    if error <= 1.0:
        factor = 10.0 if error == 0.0 else min(10.0, 0.9 * error ** -0.2)
        return max(h, h_step * factor) if last else h_step * factor
    return h_step * (max(0.2, 0.9 * error ** -0.2) if error == error else 0.2)


def dopri_attempt_template(t, h_step, q, v, mass_diag, mass_full, coef, topology, kq, kw, yq, yw, q_new, v_new,
                           eq_work):
    """One Dormand–Prince 5(4) attempt of step h_step (s) from (q, v) at time t (s), k_0 given in kq[0], kw[0]: the
    stages k_1 … k_6 (k_6 at the new point, the next step's k_0 when it is accepted) and the fifth-order solution
    (q_new, v_new); the stage states pass through (yq, yw).  Called by drive_adaptive and the GPU's rk45 template,
    inlined into both (:data:`kernels.compile.ALWAYS_INLINED`)."""
    for s in range(1, 7):
        copy_block(q, yq)
        copy_block(v, yw)
        node = 0.0  # c_s = Σ_r a_sr, the stage's time within the step
        for r in range(s):
            a = DOPRI_A[s, r] if s < 6 else DOPRI_B[r]
            node += a
            if a != 0.0:
                add_scaled(yq, kq[r], h_step * a)
                add_scaled(yw, kw[r], h_step * a)
        if s == 6:
            copy_block(yq, q_new)
            copy_block(yw, v_new)
            node = 1.0
        equations_of_motion(t + node * h_step, yq, yw, mass_diag, mass_full, coef, topology, kq[s], kw[s],  # noqa: F821
                            eq_work)


def dense_power_template(time, theta, q, v, kq, kw, h, mass_full, coef, topology, moments, yq, yw, yomega, eq_work,
                         out):
    """The forces' power at ``time`` (s), the state θ into the step of size h from (q, v) by the dense
    output; a formulation's v is converted to ω (``yomega``) for the forces."""
    dopri_dense_into(q, v, kq, kw, h, theta, yq, yw)
    if CONVERTS:  # noqa: F821
        velocity_to_stored(yq, yw, mass_full, coef, topology, yomega, eq_work)  # noqa: F821
    else:
        yomega[:] = yw
    force_power(time, yq, yomega, coef, topology, moments, out)  # noqa: F821


def simpson_power_template(t_start, t, t_end, q, v, kq, kw, h, mass_full, coef, topology, moments, yq, yw, yomega,
                           eq_work, mid_power, end_power):
    """The forces' power at the midpoint and the end of [t, t_end] within the step of size h from
    (q, v) at t, both from the dense output (the end exactly when t_end closes the step)."""
    dense_power(t_start + 0.5 * (t + t_end), 0.5 * (t_end - t) / h, q, v, kq, kw, h, mass_full,  # noqa: F821
                coef, topology, moments, yq, yw, yomega, eq_work, mid_power)
    dense_power(t_start + t_end, (t_end - t) / h, q, v, kq, kw, h, mass_full, coef, topology,  # noqa: F821
                moments, yq, yw, yomega, eq_work, end_power)


@lane_function
def dopri_gave_up(h, t, t_end, dt, attempts, max_steps, lane_status, lane_failed):
    """Whether a member fails at time t (s): once its step is below round-off of t_end or it has made ``max_steps``
    attempts, STEP_SIZE_UNDERFLOW in lane_status[0] and the step of size dt it failed in, in lane_failed[0]."""
    if h < 16.0 * ROUNDOFF * t_end or attempts >= max_steps:
        lane_status[0] = STEP_SIZE_UNDERFLOW
        lane_failed[0] = int(t / dt) + 1
        return True
    return False


def sphere_dense_values_template(theta, dense, values, lane_state):
    """``dense_values`` of the (S²)ⁿ rk45 kernel (see :func:`kernels.sections.dense_locate_template`): the
    sections' values and the flat state (q, then ω) at θ of the accepted step that ``dense`` describes,
    (q, v, kq, kw, h, mf, c, topology) and scratch (yq, yw, yomega, eq_work), by its dense output."""
    q, v, kq, kw, h, mf, c, topology, yq, yw, yomega, eq_work = dense
    dopri_dense_into(q, v, kq, kw, h, theta, yq, yw)
    if CONVERTS:  # noqa: F821 (bound at specialisation)
        velocity_to_stored(yq, yw, mf, c, topology, yomega, eq_work)  # noqa: F821
    else:
        yomega[:] = yw
    section_values(yq, yomega, c, values)  # noqa: F821
    sphere_lane_state(yq, yomega, lane_state)


def drive_adaptive(q_blocks, omega_blocks, mass_diag, mass_full, coef, shadow_q_blocks, shadow_omega_blocks,
                   log_growth_blocks, reference_blocks, indicator_blocks, topology, dt, n_steps, save_every, options,
                   d0, renormalise_every, step_offset, track_encounters, section_modes, members, save_state,
                   q_out, omega_out, energy, unit_error, tangency_error, work_out, status, failed_step, iterations,
                   q_end, omega_end, carried, min_separation, sample_time, log_growth_out, indicator_out, shadow_q_end,
                   shadow_omega_end, log_growth_end, reference_end, indicators_end, section_time, section_state,
                   section_count):
    """Dormand–Prince 5(4) with a step size per member (blocks of one lane), dense output at the save
    times s·save_every·dt; the last step is clipped to land on n_steps·dt exactly, and the step size
    the controller proposes there is returned in ``carried[:, 0]`` (``step_size``) to continue a later
    segment.  With ``track_encounters``, ``min_separation``: the least close-encounter separation over
    the accepted steps.  A
    non-finite stage makes the step rejected; a member whose step then shrinks below round-off of
    t_end (or that exceeds max_steps attempts) fails with STEP_SIZE_UNDERFLOW.
    Shares :func:`kernels.driver.drive_fixed_step`'s signature; Benettin shadows need renormalisation
    at common fixed steps, so :func:`kernels.integrate` refuses them here and the shadow arguments
    are unused.  Sections (``SECTIONS``, see :mod:`kernels.sections`) are located on each accepted step's dense
    output by ``locate_dense_crossings`` (:func:`kernels.sections.dense_locate_template`, reading it through
    :func:`sphere_dense_values_template`); a member stopped at an escape keeps its samples before it.
    Forced kernels integrate the forces' power P by Simpson's rule over each accepted step
    (P at the step's ends and at its midpoint's dense-output state; to a sample inside a step, over
    [t, t_sample] likewise) into ``work_out``, carried in the last column of ``carried``: fifth order
    per step, so the work is as accurate as the state."""
    n_blocks, n, _, lanes = q_blocks.shape
    t_end = n_steps * dt
    n_samples = n_steps // save_every + 1
    rtol = options[RTOL]
    atol = options[ATOL]
    max_steps = int(options[MAX_STEPS])
    for blk in range(n_blocks):
        q = q_blocks[blk].copy()
        omega = omega_blocks[blk].copy()
        md = mass_diag[blk]
        mf = mass_full[blk]
        c = coef[blk]
        kq = np.empty((7, n, 3, 1))
        kw = np.empty((7, n, 3, 1))
        yq = np.empty((n, 3, 1))
        yw = np.empty((n, 3, 1))
        q_new = np.empty((n, 3, 1))
        omega_new = np.empty((n, 3, 1))
        eq_work = equations_allocate(n, 1)  # noqa: F821
        v = np.empty((n, 3, 1)) if CONVERTS else omega  # noqa: F821 (a formulation's own velocity variable)
        if CONVERTS:  # noqa: F821
            velocity_from_stored(q, omega, mf, c, topology, v, eq_work)  # noqa: F821
        yomega = np.empty((n, 3, 1))
        scratch = np.empty((4, 1))
        lane_status = np.zeros(1, np.int64)
        lane_failed = np.full(1, -1, np.int64)
        accepted = np.zeros(1, np.int64)
        h = carried[blk, 0]
        closest = np.full(1, np.inf)
        record_sample(0, q, omega, md, mf, c, topology, blk, members, lane_status,  # noqa: F821
                      save_state, q_out, omega_out, energy, unit_error, tangency_error, scratch)
        if track_encounters:
            track_separation(q, omega, md, c, topology, lane_status, scratch[:3], closest)  # noqa: F821
        t_start = step_offset * dt  # the segment's time origin, from the global step index
        equations_of_motion(t_start, q, v, md, mf, c, topology, kq[0], kw[0], eq_work)  # noqa: F821
        moments = np.empty((n if FORCED else 0, 3, 1))  # noqa: F821
        done_work = np.zeros(1)
        power = np.zeros(1)
        next_power = np.zeros(1)
        mid_power = np.zeros(1)
        sample_work = np.zeros(1)
        if FORCED:  # noqa: F821
            done_work[0] = carried[blk, carried.shape[1] - 1]
            force_power(t_start, q, omega, c, topology, moments, power)  # noqa: F821
            record_work(0, done_work, blk, members, lane_status, work_out)
        sections = section_modes.shape[1] if SECTIONS else 0  # noqa: F821
        before = np.empty((sections, 1))
        after = np.empty((sections, 1))
        lane_state = np.empty(6 * n if SECTIONS else 0)  # noqa: F821
        if SECTIONS:  # noqa: F821
            section_values(q, omega, c, after)  # noqa: F821
        t = 0.0
        next_sample = 1
        attempts = 0
        while t < t_end:
            attempts += 1
            last = h >= t_end - t
            h_step = t_end - t if last else h
            dopri_attempt(t_start + t, h_step, q, v, md, mf, c, topology, kq, kw, yq, yw, q_new,  # noqa: F821
                          omega_new, eq_work)
            error = dopri_error_norm(q, v, q_new, omega_new, kq, kw, h_step, rtol, atol)
            if error <= 1.0:
                t_new = t_end if last else t + h_step
                stopped_at = np.inf  # (s) a section with stop: samples from then on stay NaN
                if SECTIONS:  # noqa: F821
                    before, after = after, before
                    if CONVERTS:  # noqa: F821
                        velocity_to_stored(q_new, omega_new, mf, c, topology, yomega, eq_work)  # noqa: F821
                    else:
                        yomega[:] = omega_new
                    section_values(q_new, yomega, c, after)  # noqa: F821
                    if any_crossing(section_modes, before, after, lane_status):
                        dense = (q, v, kq, kw, h_step, mf, c, topology, yq, yw, yomega, eq_work)
                        stopped_at = locate_dense_crossings(t_start + t, h_step, dense, before, after,  # noqa: F821
                                                            lane_status, lane_failed, int(t / dt) + 1, blk, members,
                                                            section_modes, section_count, section_time,
                                                            section_state, lane_state)
                while next_sample < n_samples and next_sample * save_every * dt <= t_new \
                        and t_start + next_sample * save_every * dt < stopped_at:
                    t_sample = next_sample * save_every * dt
                    if t_sample == t_new:
                        yq[:] = q_new
                        yw[:] = omega_new
                    else:
                        dopri_dense_into(q, v, kq, kw, h_step, (t_sample - t) / h_step, yq, yw)
                    if CONVERTS:  # noqa: F821
                        velocity_to_stored(yq, yw, mf, c, topology, yomega, eq_work)  # noqa: F821
                    else:
                        yomega[:] = yw
                    record_sample(next_sample, yq, yomega, md, mf, c, topology, blk, members,  # noqa: F821
                                  lane_status, save_state, q_out, omega_out, energy, unit_error, tangency_error,
                                  scratch)
                    if FORCED:  # noqa: F821
                        simpson_power(t_start, t, t_sample, q, v, kq, kw, h_step, mf, c, topology, moments, yq, yw,
                                      yomega, eq_work, mid_power, next_power)
                        sample_work[0] = done_work[0] + (t_sample - t) / 6.0 * (power[0] + 4.0 * mid_power[0]
                                                                               + next_power[0])
                        record_work(next_sample, sample_work, blk, members, lane_status, work_out)
                    next_sample += 1
                if lane_status[0] != OK:  # stopped at an escape
                    break
                if FORCED:  # noqa: F821
                    simpson_power(t_start, t, t_new, q, v, kq, kw, h_step, mf, c, topology, moments, yq, yw, yomega,
                                  eq_work, mid_power, next_power)
                    done_work[0] += (t_new - t) / 6.0 * (power[0] + 4.0 * mid_power[0] + next_power[0])
                    power[0] = next_power[0]
                q[:] = q_new
                v[:] = omega_new
                t = t_new
                if CONVERTS:  # the step ends in the stored (q, ω), so a restart from them continues bitwise
                    velocity_to_stored(q, v, mf, c, topology, omega, eq_work)  # noqa: F821
                    velocity_from_stored(q, omega, mf, c, topology, v, eq_work)  # noqa: F821
                    equations_of_motion(t_start + t, q, v, md, mf, c, topology, kq[0], kw[0], eq_work)  # noqa: F821
                else:
                    kq[0] = kq[6]
                    kw[0] = kw[6]
                if track_encounters:
                    track_separation(q, omega, md, c, topology, lane_status, scratch[:3], closest)  # noqa: F821
                accepted[0] += 1
            h = dopri_next_step(h, h_step, error, last)
            if dopri_gave_up(h, t, t_end, dt, attempts, max_steps, lane_status, lane_failed):
                break
        write_final_state(q, omega, closest, blk, members, lane_status, lane_failed, accepted,
                          status, failed_step, iterations, q_end, omega_end, min_separation)
        carried[blk, 0] = h
        if FORCED:  # noqa: F821
            carried[blk, carried.shape[1] - 1] = done_work[0]
