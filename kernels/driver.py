"""Driver templates: the time loop shared by every fixed-step integrator, and its bookkeeping.

These are plain Python functions, specialised per (integrator, system) by :mod:`kernels.compile`,
which binds the free names ``integrator_allocate``, ``integrator_begin``, ``integrator_step``,
``record_sample``, ``track_separation``, ``system_potential``, ``system_encounter``, ``system_force``,
``system_force_damping``, ``kinetic_energy``, ``system_inertia``, ``system_inertia_gradient``,
``section_values``, ``locate_crossings`` and the constants ``FORCED``, ``EXCHANGES`` (the members exchange
energy with the outside: forces or a heat bath), ``VARIABLE_INERTIA``, ``SHADOWS`` and ``SECTIONS`` before jitting.  Every step
gets the time t (s) at its start, (step_offset + k − 1)·h, computed from the global step index so a
resumed segment sees the same bits.  Members are processed
in blocks of ``lanes`` (see :mod:`kernels.lanes`).  Kernels are serial and release the GIL;
:func:`kernels.integrate` runs disjoint ranges of blocks on several threads.
"""

import numpy as np

from .lanes import add_power, constraint_errors_into, lane_function
from .lyapunov import record_sphere_indicators, tile_lanes_2d, tile_lanes_3d, write_final_shadows
from .sections import any_crossing
from .status import NON_FINITE, OK


def record_sample_template(sample, q, omega, mass_diag, mass_full, coef, topology, first, members, lane_status,
                           save_state, q_out, omega_out, energy, unit_error, tangency_error, scratch):
    """Write diagnostics (and optionally the state) of one saved sample for the block's members.

    E = ½ Σ_ij M_ij q̇_i·q̇_j + V (J); failed members get NaN from their failing step on.
    """
    lanes = q.shape[2]
    kinetic_energy(q, omega, mass_diag, mass_full, coef, topology, scratch[0])  # noqa: F821 (bound at specialisation)
    system_potential(q, coef, topology, scratch[1])  # noqa: F821
    constraint_errors_into(q, omega, scratch[2], scratch[3])
    for b in range(lanes):
        m = first + b
        if m >= members:
            break
        ok = lane_status[b] == OK
        energy[m, sample] = scratch[0, b] + scratch[1, b] if ok else np.nan
        unit_error[m, sample] = scratch[2, b] if ok else np.nan
        tangency_error[m, sample] = scratch[3, b] if ok else np.nan
        if save_state:
            for i in range(q.shape[0]):
                for k in range(3):
                    q_out[m, sample, i, k] = q[i, k, b] if ok else np.nan
                    omega_out[m, sample, i, k] = omega[i, k, b] if ok else np.nan


@lane_function
def check_lanes(q, omega, code, active, lane_status, lane_failed, step_iterations, lane_iterations, step, scratch):
    """Record the first failure of each member at ``step`` and stop treating it as active."""
    n = q.shape[0]
    lanes = q.shape[2]
    poison = scratch[0]
    for b in range(lanes):
        poison[b] = 0.0
    for i in range(n):
        for k in range(3):
            for b in range(lanes):
                poison[b] += q[i, k, b] * 0.0 + omega[i, k, b] * 0.0  # NaN iff some entry is NaN or inf
    record_lane_failures(poison, code, active, lane_status, lane_failed, step_iterations, lane_iterations, step)


@lane_function
def record_lane_failures(poison, code, active, lane_status, lane_failed, step_iterations, lane_iterations, step):
    """Of every active lane: its Newton iterations, and its first failure at ``step`` (the step's
    code, or NON_FINITE where ``poison`` — Σ state × 0 — is NaN), after which it is inactive.  One
    branch-free sweep screens the lanes; they are visited one by one only when some lane failed.
    Shared by both state layouts' drivers."""
    lanes = poison.shape[0]
    failures = 0
    for b in range(lanes):
        lane_iterations[b] = max(lane_iterations[b], step_iterations[b] if active[b] else 0)
        failures += active[b] & ((code[b] != OK) | (poison[b] != poison[b]))
    if failures == 0:
        return
    for b in range(lanes):
        if active[b]:
            failure = code[b]
            if failure == OK and poison[b] != poison[b]:
                failure = NON_FINITE
            if failure != OK:
                lane_status[b] = failure
                lane_failed[b] = step
                active[b] = False


def track_separation_template(q, omega, mass_diag, coef, topology, lane_status, encounter_out, closest):
    """closest[b] ← min(closest[b], the system's close-encounter separation) for lanes still OK
    (``system_encounter`` is bound at specialisation; systems without one leave ``closest`` at inf)."""
    system_encounter(q, omega, mass_diag, coef, topology, encounter_out)  # noqa: F821
    for b in range(q.shape[2]):
        if lane_status[b] == OK:
            closest[b] = min(closest[b], encounter_out[0, b])


@lane_function
def no_encounter(q, omega, mass_diag, coef, topology, out):
    """``system_encounter`` of systems without singular encounters: an infinite separation."""
    for b in range(q.shape[2]):
        out[0, b] = np.inf
        out[1, b] = np.inf
        out[2, b] = 0.0


def force_power_template(t, q, omega, coef, topology, moments, out):
    """out[b] = Σ_i g_i·ω_i (W), the power of the forces at time t (``system_force`` bound at
    specialisation; called in forced kernels only)."""
    system_force(t, q, omega, coef, topology, moments)  # noqa: F821
    for b in range(q.shape[2]):
        out[b] = 0.0
    add_power(moments, omega, 1.0, out)


def trapezoid_work_template(t_next, q, omega, coef, topology, moments, power, next_power, done, h, work):
    """``integrator_work`` of methods without their own quadrature (vi): done += h (P_k + P_{k+1})/2 with
    P_{k+1} the forces' power at the new state and time t_next (s); P_k ← P_{k+1}."""
    force_power(t_next, q, omega, coef, topology, moments, next_power)  # noqa: F821
    accumulate_work(done, power, next_power, h)


@lane_function
def accumulate_work(done, power, next_power, h):
    """The trapezoidal rule over one step of size h: done += h (P_k + P_{k+1})/2; then P_k ← P_{k+1}."""
    for b in range(done.shape[0]):
        done[b] += 0.5 * h * (power[b] + next_power[b])
        power[b] = next_power[b]


@lane_function
def record_work(sample, done, first, members, lane_status, work_out):
    """Write the block's work done so far (J) at one saved sample (NaN for failed members)."""
    for b in range(done.shape[0]):
        m = first + b
        if m >= members:
            break
        work_out[m, sample] = done[b] if lane_status[b] == OK else np.nan


@lane_function
def no_force(t, q, omega, coef, topology, out):
    """``system_force`` of kernels compiled without forces (never called: FORCED is False there)."""


@lane_function
def no_force_damping(q, coef, topology, scale, out):
    """``system_force_damping`` of kernels compiled without forces."""


@lane_function
def write_final_state(q, omega, closest, first, members, lane_status, lane_failed, lane_iterations,
                      status, failed_step, iterations, q_end, omega_end, min_separation):
    """Per-member outcome, end state (the restart point of the next segment) and the least
    close-encounter separation reached.  A driver that carries solver state writes it itself."""
    for b in range(q.shape[2]):
        m = first + b
        if m >= members:
            break
        status[m] = lane_status[b]
        failed_step[m] = lane_failed[b]
        iterations[m] = lane_iterations[b]
        min_separation[m] = closest[b]
        ok = lane_status[b] == OK
        for i in range(q.shape[0]):
            for k in range(3):
                q_end[m, i, k] = q[i, k, b] if ok else np.nan
                omega_end[m, i, k] = omega[i, k, b] if ok else np.nan


@lane_function
def lane_bookkeeping(first, members, lanes):
    """Per-lane status, failing step, max iterations, this step's iterations and code, and whether the
    lane is a member (lanes past the last member pad the block): the fixed-step drivers' bookkeeping."""
    active = np.empty(lanes, np.bool_)
    for b in range(lanes):
        active[b] = first + b < members
    return (np.zeros(lanes, np.int64), np.full(lanes, -1, np.int64), np.zeros(lanes, np.int64),
            np.zeros(lanes, np.int64), np.zeros(lanes, np.int64), active)


def drive_fixed_step(q_blocks, omega_blocks, mass_diag, mass_full, coef, shadow_q_blocks, shadow_omega_blocks,
                     log_growth_blocks, reference_blocks, indicator_blocks, topology, h, n_steps, save_every, options,
                     d0, renormalise_every, step_offset, track_encounters, section_modes, members, save_state,
                     q_out, omega_out, energy, unit_error, tangency_error, work_out, status, failed_step, iterations,
                     q_end, omega_end, carried, min_separation, sample_time, log_growth_out, indicator_out,
                     shadow_q_end, shadow_omega_end, log_growth_end, reference_end, indicators_end,
                     section_time, section_state, section_count):
    """March every member ``n_steps`` steps of size ``h``, saving every ``save_every`` steps; with
    ``track_encounters`` also each member's least close-encounter separation over every step
    (``min_separation``, else left at inf).  Forced kernels also integrate the forces' power into
    ``work_out`` at the samples, continuing from (and returning in) the last column of ``carried``, each
    step by the method's ``integrator_work`` (the trapezoidal rule, or the method's own quadrature); kernels of
    a stochastic method (``EXCHANGES`` without ``FORCED``) likewise the heat their bath gives.

    ``step_offset`` is the global index of the step before the call's first: step k starts at time
    (step_offset + k − 1)·h.  With ``renormalise_every`` > 0 (and ``SHADOWS``, see :mod:`kernels.compile`)
    each member's k shadows (see :mod:`kernels.lyapunov`; blocks (n, 3, k·L), shadow j of lane l in lane
    j·L + l) are stepped alongside it and renormalised together to distance ``d0`` at every global step
    (``step_offset`` + k) divisible by ``renormalise_every``, their exponents' numerators going to
    ``log_growth_out`` (members, samples, k) and MEGNO, SALI and GALI_k to ``indicator_out`` (members,
    samples, 3); otherwise the shadow arrays have no lanes and are ignored.  The member's own arithmetic
    is the same either way.  ``shadow_begin`` and ``shadow_step`` are bound at specialisation to the
    shadow's stages, or to nothing in kernels compiled without shadows (a second inlined step would double
    a kernel's code and compile time).

    With ``SECTIONS`` (kernels compiled with sections, see :mod:`kernels.sections`) every step that crosses a
    section in its direction (``section_modes`` (2, S): direction, stop) is searched for the crossing, whose time
    and state go to ``section_time`` (members, S, C), ``section_state`` (members, S, C, 6n: q then ω) and
    ``section_count`` (members, S); a section with stop stops the member there (status ESCAPED).
    ``locate_crossings`` and ``section_values`` are bound to the stages, or to nothing.
    """
    n_blocks, n, _, lanes = q_blocks.shape
    tracking = SHADOWS and renormalise_every > 0  # noqa: F821 (SHADOWS: a constant bound at specialisation)
    for blk in range(n_blocks):
        first = blk * lanes
        q = q_blocks[blk].copy()
        omega = omega_blocks[blk].copy()
        md = mass_diag[blk]
        mf = mass_full[blk]
        c = coef[blk]
        work = integrator_allocate(n, lanes)  # noqa: F821
        scratch = np.empty((4, lanes))
        closest = np.full(lanes, np.inf)
        lane_status, lane_failed, lane_iterations, step_iterations, code, active = lane_bookkeeping(first, members,
                                                                                                  lanes)
        shadow_q = shadow_q_blocks[blk].copy()
        shadow_omega = shadow_omega_blocks[blk].copy()
        log_growth = log_growth_blocks[blk].copy()
        reference = reference_blocks[blk].copy()
        indicators = indicator_blocks[blk].copy()
        count = shadow_q.shape[2] // lanes
        # the shadows' coefficients: their members', once per shadow lane
        shadow_md = tile_lanes_2d(md, count)
        shadow_mf = tile_lanes_3d(mf, count)
        shadow_c = tile_lanes_2d(c, count)
        shadow_work = integrator_allocate(n, count * lanes)  # noqa: F821
        shadow_active = np.zeros(count * lanes, np.bool_)
        shadow_code = np.zeros(count * lanes, np.int64)
        shadow_iterations = np.zeros(count * lanes, np.int64)
        dq = np.empty((3 * n, count * lanes))
        dw = np.empty((3 * n, count * lanes))
        rmat = np.empty((count, count, lanes))
        column = np.empty(max(count, 1) * lanes)
        # the coefficients of a protocol take the values of the time of the configuration whose forces come next
        system_coefficients_at(c, step_offset * h)  # noqa: F821 (bound: the system's)
        system_coefficients_at(shadow_c, step_offset * h)  # noqa: F821
        integrator_begin(q, omega, md, mf, c, topology, h, options, work)  # noqa: F821
        shadow_begin(shadow_q, shadow_omega, shadow_md, shadow_mf, shadow_c, topology, h, options,  # noqa: F821
                     shadow_work)
        record_sample(0, q, omega, md, mf, c, topology, first, members, lane_status,  # noqa: F821
                      save_state, q_out, omega_out, energy, unit_error, tangency_error, scratch)
        work_column = carried.shape[1] - 1
        moments = np.empty((n if FORCED else 0, 3, lanes))  # noqa: F821
        done_work = np.zeros(lanes)
        power = np.zeros(lanes)
        next_power = np.zeros(lanes)
        if EXCHANGES:  # noqa: F821
            for b in range(min(lanes, members - first)):
                done_work[b] = carried[first + b, work_column]
            if FORCED:  # noqa: F821
                force_power(step_offset * h, q, omega, c, topology, moments, power)  # noqa: F821
            record_work(0, done_work, first, members, lane_status, work_out)
        if track_encounters:
            track_separation(q, omega, md, c, topology, lane_status, scratch[:3], closest)  # noqa: F821
        if tracking:
            record_sphere_indicators(0, step_offset, renormalise_every, h, q, omega, shadow_q, shadow_omega, first,
                                     members, log_growth, reference, indicators, log_growth_out, indicator_out, dq,
                                     dw, rmat, scratch[0])
        sections = section_modes.shape[1] if SECTIONS else 0  # noqa: F821
        before = np.empty((sections, lanes))
        after = np.empty((sections, lanes))
        if SECTIONS:  # noqa: F821
            section_values(q, omega, c, after)  # noqa: F821
        for k in range(1, n_steps + 1):
            if SECTIONS:  # noqa: F821
                before, after = after, before  # the last step's end values are this one's start
            system_coefficients_at(c, (step_offset + k) * h)  # noqa: F821 (the forces at the step's end)
            system_coefficients_at(shadow_c, (step_offset + k) * h)  # noqa: F821
            integrator_step((step_offset + k - 1) * h, q, omega, md, mf, c, topology, h, options, work,  # noqa: F821
                            active, code, step_iterations)
            shadow_step(step_offset + k, q, omega, shadow_q, shadow_omega, shadow_md, shadow_mf,  # noqa: F821
                        shadow_c, topology, h, options, shadow_work, active, shadow_active, shadow_code,
                        shadow_iterations, d0, renormalise_every, log_growth, reference, indicators, dq, dw, rmat,
                        scratch[0], column)
            check_lanes(q, omega, code, active, lane_status, lane_failed, step_iterations, lane_iterations, k, scratch)
            if SECTIONS:  # noqa: F821
                section_values(q, omega, c, after)  # noqa: F821
                if any_crossing(section_modes, before, after, lane_status):
                    locate_crossings((step_offset + k - 1) * h, h, q, omega, before, after, md, mf, c,  # noqa: F821
                                     topology, options, active, lane_status, lane_failed, k, first, members,
                                     section_modes, section_count, section_time, section_state)
            if track_encounters:
                track_separation(q, omega, md, c, topology, lane_status, scratch[:3], closest)  # noqa: F821
            if EXCHANGES:  # noqa: F821
                integrator_work((step_offset + k) * h, q, omega, c, topology, moments, power,  # noqa: F821
                                next_power, done_work, h, work)
            if k % save_every == 0:
                record_sample(k // save_every, q, omega, md, mf, c, topology, first, members, lane_status,  # noqa: F821
                              save_state, q_out, omega_out, energy, unit_error, tangency_error, scratch)
                if EXCHANGES:  # noqa: F821
                    record_work(k // save_every, done_work, first, members, lane_status, work_out)
                if tracking:
                    record_sphere_indicators(k // save_every, step_offset + k, renormalise_every, h, q, omega,
                                             shadow_q, shadow_omega, first, members, log_growth, reference,
                                             indicators, log_growth_out, indicator_out, dq, dw, rmat, scratch[0])
        write_final_state(q, omega, closest, first, members, lane_status, lane_failed, lane_iterations,
                          status, failed_step, iterations, q_end, omega_end, min_separation)
        if EXCHANGES:  # noqa: F821
            for b in range(min(lanes, members - first)):
                carried[first + b, work_column] = done_work[b]
        if tracking:
            ends = shadow_q_end.shape[0]
            write_final_shadows(shadow_q.reshape(3 * n, count * lanes), log_growth, reference, indicators, first,
                                members, shadow_q_end.reshape(ends, count, 3 * n), log_growth_end, reference_end,
                                indicators_end)
            write_final_shadows(shadow_omega.reshape(3 * n, count * lanes), log_growth[:0], reference[:0],
                                indicators[:0], first, members, shadow_omega_end.reshape(ends, count, 3 * n),
                                log_growth_end, reference_end, indicators_end)


@lane_function
def no_configuration_inertia(q, coef, topology, out):
    """``system_inertia`` and ``system_inertia_gradient`` of systems with constant inertia (never called:
    VARIABLE_INERTIA is False there)."""
