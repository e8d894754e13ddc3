"""Classical Runge–Kutta methods on any flat space's vector field ẋ = X(x) (e.g. Euler's equations with
Ṙ = R Ω̂ on SO(3)ⁿ): the baselines that leave the manifold slowly, which is what comparing them with
a structure-preserving method shows.
Free names bound at specialisation: ``vector_field(x, n, coef, topology, t, dx, work)`` (t in s) with
``work`` from ``vector_field_work(rows, n, lanes)``, ``tableau_a``,
``tableau_b``, ``record_flat_sample``, and for a formulation other than the space's own (``CONVERTS``, see
:mod:`kernels.integrators.motion_formulations`) ``to_formulation(x, n, coef, y, code)`` and
``from_formulation(y, n, coef, x, code)``: every step converts the stored state to the formulation's
variables, steps those with the formulation's ``vector_field`` and converts back.  The adaptive driver
applies the system's ``system_constrain`` and ``system_admissible`` (:mod:`kernels.flat_driver`) to each
accepted step, as the
fixed-step driver does after every step (systems with constraints have no formulations).
"""

import numpy as np

from ..flat_driver import write_flat_final
from ..lanes import lane_function
from ..sections import any_crossing
from ..status import OK
from .runge_kutta import (ATOL, DOPRI_A, DOPRI_B, DOPRI_E, MAX_STEPS, RTOL, dense_weight, dopri_gave_up,
                          dopri_next_step)


@lane_function
def copy_rows(source, target):
    """target ← source, (rows, lanes) arrays, element by element: ``target[:] = source`` in a form a kernel on the GPU
    runs too (numba-cuda does not lower the slice assignment)."""
    for r in range(source.shape[0]):
        for b in range(source.shape[1]):
            target[r, b] = source[r, b]


@lane_function
def add_scaled_rows(target, source, scale):
    """target += scale · source over (rows, lanes)."""
    for r in range(target.shape[0]):
        for b in range(target.shape[1]):
            target[r, b] += scale * source[r, b]


def flat_rk_allocate(rows, n, lanes):
    """Work: stage derivatives (stages, rows, L), the stage state, the vector field's work (the system's
    ``vector_field_work``, allocated once per block) and the formulation's variables."""
    stages = tableau_b.shape[0]  # noqa: F821
    return (np.empty((stages, rows, lanes)), np.empty((rows, lanes)), vector_field_work(rows, n, lanes),  # noqa: F821
            np.empty((rows, lanes)))


def flat_rk_begin(x, n, coef, topology, h, options, work):
    pass


def flat_rk_step(x, n, coef, topology, t, h, options, work, active, code, iterations):
    """One step from time t (s) of the explicit Runge–Kutta method (tableau_a, tableau_b), in the formulation's
    variables."""
    k, y, scratch, variables = work
    for b in range(x.shape[1]):
        code[b] = 0
        iterations[b] = 0
    state = x
    if CONVERTS:  # noqa: F821
        to_formulation(x, n, coef, variables, code)  # noqa: F821
        state = variables
    stages = tableau_b.shape[0]  # noqa: F821
    for s in range(stages):
        copy_rows(state, y)
        node = 0.0  # the stage's time is t + c_s h, c_s = Σ_r a_sr
        for r in range(s):
            a = tableau_a[s, r]  # noqa: F821
            node += a
            if a != 0.0:
                add_scaled_rows(y, k[r], h * a)
        vector_field(y, n, coef, topology, t + node * h, k[s], scratch)  # noqa: F821
    for r in range(stages):
        weight = tableau_b[r]  # noqa: F821
        if weight != 0.0:
            add_scaled_rows(state, k[r], h * weight)
    if CONVERTS:  # noqa: F821
        from_formulation(variables, n, coef, x, code)  # noqa: F821


@lane_function
def flat_error_norm(x, x_new, k, h, rtol, atol):
    """RMS over every row of h Σ E_r k_r / (atol + rtol max(|x|, |x_new|)) (lane 0)."""
    total = 0.0
    for row in range(x.shape[0]):
        e = 0.0
        for r in range(7):
            e += DOPRI_E[r] * k[r, row, 0]
        scale = atol + rtol * max(abs(x[row, 0]), abs(x_new[row, 0]))
        total += (h * e / scale) ** 2
    return np.sqrt(total / x.shape[0])


@lane_function
def flat_dense_into(x, k, h, theta, out):
    """x(t + θh) = x + h Σ_r k_r Σ_c P[r, c] θ^{c+1} (lane 0): Shampine's 4th-order dense output."""
    for row in range(x.shape[0]):
        total = 0.0
        for r in range(7):
            total += dense_weight(r, theta) * k[r, row, 0]
        out[row, 0] = x[row, 0] + h * total


def flat_dopri_attempt_template(t, h_step, x, n, coef, topology, k, y, x_new, field_work):
    """One Dormand–Prince 5(4) attempt of step h_step (s) from the rows x at time t (s), k_0 given in k[0]: the
    stages k_1 … k_6 and the fifth-order solution x_new, the stage states passing through y (see
    :func:`kernels.integrators.runge_kutta.dopri_attempt_template`).  Called by drive_flat_adaptive and the GPU's
    template, inlined into both."""
    for s in range(1, 7):
        copy_rows(x, y)
        node = 0.0  # c_s = Σ_r a_sr, the stage's time within the step
        for r in range(s):
            a = DOPRI_A[s, r] if s < 6 else DOPRI_B[r]
            node += a
            if a != 0.0:
                add_scaled_rows(y, k[r], h_step * a)
        if s == 6:
            copy_rows(y, x_new)
            node = 1.0
        vector_field(y, n, coef, topology, t + node * h_step, k[s], field_work)  # noqa: F821


def flat_dense_values_template(theta, dense, values, lane_state):
    """``dense_values`` of the flat rk45 kernel (see :func:`kernels.sections.dense_locate_template`): the
    sections' values and the state at θ of the accepted step that ``dense`` describes, (u, k, h, n, c,
    topology) and scratch (y, stored, moved, code, the system's work), by its dense output, in the stored variables
    and put on the system's constraints as the step's end is."""
    u, k, h, n, c, topology, y, stored, moved, code, system_work = dense
    flat_dense_into(u, k, h, theta, y)
    if CONVERTS:  # noqa: F821 (bound at specialisation)
        from_formulation(y, n, c, stored, code)  # noqa: F821
    else:
        stored[:] = y
    system_constrain(stored, n, c, topology, system_work, moved)  # noqa: F821
    section_values(stored, c, values)  # noqa: F821
    lane_state[:] = stored[:, 0]


def drive_flat_adaptive(x_blocks, coef, shadow_blocks, log_growth_blocks, reference_blocks, indicator_blocks, topology,
                        n, dt, n_steps, save_every, options, d0, renormalise_every, step_offset, section_modes, members,
                        save_state, state_out, energy, diagnostics, status, failed_step, iterations, x_end, carried,
                        log_growth_out, indicator_out, shadow_end, log_growth_end, reference_end, indicators_end,
                        section_time, section_state, section_count):
    """Dormand–Prince 5(4) with a step size per member (blocks of one lane), dense output at the save
    times, the last step clipped onto n_steps·dt, and the controller's next step returned in
    ``carried[:, 0]`` (``step_size``, the carried state of a later segment); the same controller as the (S²)ⁿ kernel
    (:func:`kernels.integrators.runge_kutta.drive_adaptive`), sections located on the dense output
    (:func:`kernels.sections.dense_locate_template`, reading it through :func:`flat_dense_values_template`).
    Shares :func:`kernels.flat_driver.drive_flat_fixed`'s signature; shadows are refused for it."""
    n_blocks, rows, lanes = x_blocks.shape
    t_end = n_steps * dt
    n_samples = n_steps // save_every + 1
    rtol = options[RTOL]
    atol = options[ATOL]
    max_steps = int(options[MAX_STEPS])
    for blk in range(n_blocks):
        x = x_blocks[blk].copy()
        c = coef[blk]
        k = np.empty((7, rows, 1))
        y = np.empty((rows, 1))
        x_new = np.empty((rows, 1))
        scratch_field = np.empty((rows, 1))
        field_work = vector_field_work(rows, n, 1)  # noqa: F821
        scratch = np.empty((diagnostics.shape[1] + 2, 1))
        lane_status = np.zeros(1, np.int64)
        lane_failed = np.full(1, -1, np.int64)
        accepted = np.zeros(1, np.int64)
        h = carried[blk, 0]
        moved = np.zeros(1)
        # the system's own calls share its vector field's work: none runs inside another, none carries its contents
        system_constrain(x, n, c, topology, field_work, moved)  # noqa: F821 (put on the constraints first)
        record_flat_sample(0, x, n, c, topology, blk, members, lane_status, save_state, state_out, energy,  # noqa: F821
                           diagnostics, scratch, field_work)
        # u: the formulation's variables (the stored state itself unless CONVERTS)
        u = x
        code = np.zeros(1, np.int64)
        if CONVERTS:  # noqa: F821
            u = np.empty((rows, 1))
            to_formulation(x, n, c, u, code)  # noqa: F821
        t_start = step_offset * dt  # the segment's time origin, from the global step index
        vector_field(u, n, c, topology, t_start, k[0], field_work)  # noqa: F821
        sections = section_modes.shape[1] if SECTIONS else 0  # noqa: F821
        before = np.empty((sections, 1))
        after = np.empty((sections, 1))
        lane_state = np.empty(rows if SECTIONS else 0)  # noqa: F821
        if SECTIONS:  # noqa: F821
            section_values(x, c, after)  # noqa: F821
        t = 0.0
        next_sample = 1
        attempts = 0
        while t < t_end and code[0] == 0:
            attempts += 1
            last = h >= t_end - t
            h_step = t_end - t if last else h
            flat_dopri_attempt(t_start + t, h_step, u, n, c, topology, k, y, x_new, field_work)  # noqa: F821
            error = flat_error_norm(u, x_new, k, h_step, rtol, atol)
            if error <= 1.0:
                moved[0] = 0.0
                system_constrain(x_new, n, c, topology, field_work, moved)  # noqa: F821
                system_admissible(x_new, n, c, topology, field_work, code)  # noqa: F821
                if code[0] != 0:  # the accepted step left the system's model: the member stops here
                    break
                t_new = t_end if last else t + h_step
                stopped_at = np.inf  # (s) a section with stop: samples from then on stay NaN
                if SECTIONS:  # noqa: F821
                    before, after = after, before
                    if CONVERTS:  # noqa: F821
                        from_formulation(x_new, n, c, scratch_field, code)  # noqa: F821
                    else:
                        scratch_field[:] = x_new
                    section_values(scratch_field, c, after)  # noqa: F821
                    if any_crossing(section_modes, before, after, lane_status):
                        dense = (u, k, h_step, n, c, topology, y, scratch_field, np.zeros(1), np.zeros(1, np.int64),
                                 field_work)
                        stopped_at = locate_dense_crossings(t_start + t, h_step, dense, before, after,  # noqa: F821
                                                            lane_status, lane_failed, int(t / dt) + 1, blk, members,
                                                            section_modes, section_count, section_time,
                                                            section_state, lane_state)
                while next_sample < n_samples and next_sample * save_every * dt <= t_new \
                        and t_start + next_sample * save_every * dt < stopped_at:
                    t_sample = next_sample * save_every * dt
                    if t_sample == t_new:
                        y[:] = x_new
                    else:
                        flat_dense_into(u, k, h_step, (t_sample - t) / h_step, y)
                    if CONVERTS:  # noqa: F821
                        from_formulation(y, n, c, scratch_field, code)  # noqa: F821
                        y[:] = scratch_field
                    record_flat_sample(next_sample, y, n, c, topology, blk, members, lane_status,  # noqa: F821
                                       save_state, state_out, energy, diagnostics, scratch, field_work)
                    next_sample += 1
                if lane_status[0] != OK:  # stopped at an escape
                    break
                u[:] = x_new
                if CONVERTS:  # noqa: F821
                    # every step starts from the stored state, as a resumed segment does (no FSAL)
                    from_formulation(u, n, c, x, code)  # noqa: F821
                    to_formulation(x, n, c, u, code)  # noqa: F821
                    vector_field(u, n, c, topology, t_start + t_new, k[0], field_work)  # noqa: F821
                elif moved[0] != 0.0:  # the projected step ends elsewhere than the last stage's point
                    vector_field(u, n, c, topology, t_start + t_new, k[0], field_work)  # noqa: F821
                else:
                    k[0] = k[6]
                t = t_new
                accepted[0] += 1
            h = dopri_next_step(h, h_step, error, last)
            if dopri_gave_up(h, t, t_end, dt, attempts, max_steps, lane_status, lane_failed):
                break
        if code[0] != 0:
            lane_status[0] = code[0]
            lane_failed[0] = int(t / dt) + 1
        write_flat_final(x, np.full(1, h), blk, members, lane_status, lane_failed, accepted, status, failed_step,
                         iterations, x_end, carried)
