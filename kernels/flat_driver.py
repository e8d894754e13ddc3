"""Driver templates for spaces whose kernels step one flat float64 block per member.

A member's state is the concatenation of its space's variables, flattened (``StateSpace.flatten``);
a block of L members is an array (rows, L), lanes innermost.  Free names bound at specialisation by
:mod:`kernels.compile`: ``integrator_allocate(rows, n, lanes)``, ``integrator_begin(x, n, coef,
topology, h, options, work)``, ``integrator_step(x, n, coef, topology, t, h, options, work, active,
code, iterations)`` (the method; t (s) from the global step index), ``vector_field_work(rows, n, lanes)`` (the
system's scratch, its ``work`` below), ``system_energy(x, n, coef, topology, work, out)`` (the system through
its space), ``space_diagnostics(x, n, coef, topology, work, out)`` and ``space_pull_back(x, shadow, n, topology,
factor)`` (the space's, or the system's refinement; ``topology`` is the system's, which some spaces read
their layout from), ``system_constrain(x, n, coef, topology, work, moved)`` (the system's projection onto its
own constraints after every step, setting moved[b] = 1 for each lane it changed; a no-op for most),
``system_admissible(x, n, coef, topology, work, code)`` (after it: the system's status for lanes whose state left
its model, a ball lifting off; a no-op for most), ``shadow_begin``/``shadow_step`` (the stages below, or
nothing), ``section_values``/``locate_crossings`` (:mod:`kernels.sections`) and the constants ``SHADOWS`` and
``SECTIONS``.  Only +, −, ×, ÷, √ (and the scalar
log of Benettin's sum) per member, so results are bitwise independent of block grouping.
"""

import numpy as np

from .driver import lane_bookkeeping, record_lane_failures
from .lanes import lane_function
from .sections import any_crossing
from .lyapunov import (accumulate_indicators, displacement_norms, forget_failed_shadows, orthogonalise,
                       record_indicators, tile_active, tile_lanes_2d, write_final_shadows)
from .status import OK


@lane_function
def check_flat_lanes(x, code, active, lane_status, lane_failed, step_iterations, lane_iterations, step, poison):
    """Record the first failure of each member at ``step`` (its code, or NON_FINITE for a NaN or inf
    anywhere in its state) and stop treating it as active."""
    lanes = x.shape[1]
    for b in range(lanes):
        poison[b] = 0.0
    for r in range(x.shape[0]):
        for b in range(lanes):
            poison[b] += x[r, b] * 0.0
    record_lane_failures(poison, code, active, lane_status, lane_failed, step_iterations, lane_iterations, step)


@lane_function
def flat_displacements(x, shadow, out):
    """out (rows, k·L) = each shadow's difference from its member, x (rows, L)."""
    lanes = x.shape[1]
    k = shadow.shape[1] // lanes
    for r in range(x.shape[0]):
        for j in range(k):
            for l in range(lanes):
                out[r, j * lanes + l] = shadow[r, j * lanes + l] - x[r, l]


@lane_function
def flat_shadow_factor(x, shadow, displacement, rmat, dot):
    """The Gram–Schmidt factor R of the k shadows' displacements (into ``rmat``), in ``displacement``'s space."""
    flat_displacements(x, shadow, displacement)
    orthogonalise(displacement, displacement[:0], x.shape[1], rmat, dot)


@lane_function
def write_flat_final(x, h, first, members, lane_status, lane_failed, lane_iterations, status, failed_step,
                     iterations, x_end, carried):
    """Per-member outcome and end state (the restart point of the next segment); NaN for failed members."""
    for b in range(x.shape[1]):
        m = first + b
        if m >= members:
            break
        status[m] = lane_status[b]
        failed_step[m] = lane_failed[b]
        iterations[m] = lane_iterations[b]
        carried[m, 0] = h[b]
        ok = lane_status[b] == OK
        for r in range(x.shape[0]):
            x_end[m, r] = x[r, b] if ok else np.nan


def record_flat_sample(sample, x, n, coef, topology, first, members, lane_status, save_state, state_out, energy,
                       diagnostics, scratch, system_work):
    """Energy, the space's diagnostics and (optionally) the state of one saved sample; NaN for failed
    members from their failing step on (``system_work``: the system's scratch, vector_field_work's)."""
    lanes = x.shape[1]
    n_diagnostics = diagnostics.shape[1]
    system_energy(x, n, coef, topology, system_work, scratch[0])  # noqa: F821 (bound at specialisation)
    space_diagnostics(x, n, coef, topology, system_work, scratch[1:1 + n_diagnostics])  # noqa: F821
    for b in range(lanes):
        m = first + b
        if m >= members:
            break
        ok = lane_status[b] == OK
        energy[m, sample] = scratch[0, b] if ok else np.nan
        for d in range(n_diagnostics):
            diagnostics[m, d, sample] = scratch[1 + d, b] if ok else np.nan
        if save_state:
            for r in range(x.shape[0]):
                state_out[m, sample, r] = x[r, b] if ok else np.nan


def drive_flat_fixed(x_blocks, coef, shadow_blocks, log_growth_blocks, reference_blocks, indicator_blocks, topology,
                     n, h, n_steps, save_every, options, d0, renormalise_every, step_offset, section_modes, members,
                     save_state, state_out, energy, diagnostics, status, failed_step, iterations, x_end, carried,
                     log_growth_out, indicator_out, shadow_end, log_growth_end, reference_end, indicators_end,
                     section_time, section_state, section_count):
    """March every member ``n_steps`` steps of size ``h``, saving every ``save_every`` steps; with
    ``renormalise_every`` > 0 (and ``SHADOWS``, see :mod:`kernels.compile`) each member's k shadows (blocks
    (rows, k·L), shadow j of lane l in lane j·L + l) are stepped alongside and renormalised together to
    distance ``d0`` at every global step (``step_offset`` + k) divisible by ``renormalise_every`` (see
    :mod:`kernels.lyapunov` for the indicators recorded).  With ``SECTIONS``, crossings of the sections in
    their directions (``section_modes``) are located and recorded, and members stopped, as
    :func:`kernels.driver.drive_fixed_step` does (the state as its flat rows)."""
    n_blocks, rows, lanes = x_blocks.shape
    tracking = SHADOWS and renormalise_every > 0  # noqa: F821 (bound at specialisation, see kernels.compile)
    for blk in range(n_blocks):
        first = blk * lanes
        x = x_blocks[blk].copy()
        c = coef[blk]
        work = integrator_allocate(rows, n, lanes)  # noqa: F821
        system_work = vector_field_work(rows, n, lanes)  # noqa: F821
        scratch = np.empty((diagnostics.shape[1] + 2, lanes))
        lane_status, lane_failed, lane_iterations, step_iterations, code, active = lane_bookkeeping(first, members,
                                                                                                  lanes)
        shadow = shadow_blocks[blk].copy()
        log_growth = log_growth_blocks[blk].copy()
        reference = reference_blocks[blk].copy()
        indicators = indicator_blocks[blk].copy()
        count = shadow.shape[1] // lanes
        shadow_c = tile_lanes_2d(c, count)
        shadow_work = integrator_allocate(rows, n, count * lanes)  # noqa: F821
        shadow_system_work = vector_field_work(rows, n, count * lanes)  # noqa: F821
        shadow_active = np.zeros(count * lanes, np.bool_)
        shadow_code = np.zeros(count * lanes, np.int64)
        shadow_iterations = np.zeros(count * lanes, np.int64)
        shadow_scratch = np.empty((rows, count * lanes))  # displacements, then the tiled member
        rmat = np.empty((count, count, lanes))
        column = np.empty(max(count, 1) * lanes)
        moved = np.zeros(lanes)
        system_constrain(x, n, c, topology, system_work, moved)  # noqa: F821 (put on the constraints first)
        integrator_begin(x, n, c, topology, h, options, work)  # noqa: F821
        shadow_begin(x, shadow, n, shadow_c, topology, h, options, shadow_work, shadow_system_work,  # noqa: F821
                     reference, moved, shadow_scratch, rmat, scratch[-1], column)
        record_flat_sample(0, x, n, c, topology, first, members, lane_status, save_state, state_out, energy,
                           diagnostics, scratch, system_work)
        if tracking:
            flat_shadow_factor(x, shadow, shadow_scratch, rmat, scratch[-1])
            record_indicators(0, step_offset, renormalise_every, h, first, members, log_growth, reference, rmat,
                              indicators, log_growth_out, indicator_out)
        sections = section_modes.shape[1] if SECTIONS else 0  # noqa: F821
        before = np.empty((sections, lanes))
        after = np.empty((sections, lanes))
        if SECTIONS:  # noqa: F821
            section_values(x, c, after)  # noqa: F821
        for k in range(1, n_steps + 1):
            if SECTIONS:  # noqa: F821
                before, after = after, before  # the last step's end values are this one's start
            # the step's start time from the global step index, so a resumed segment sees the same times
            integrator_step(x, n, c, topology, (step_offset + k - 1) * h, h, options, work, active, code,  # noqa: F821
                            step_iterations)
            system_constrain(x, n, c, topology, system_work, moved)  # noqa: F821
            system_admissible(x, n, c, topology, system_work, code)  # noqa: F821
            shadow_step(step_offset + k, x, shadow, n, shadow_c, topology, h, options, shadow_work,  # noqa: F821
                        shadow_system_work, active, shadow_active, shadow_code, shadow_iterations, d0,
                        renormalise_every, log_growth, reference, indicators, shadow_scratch, rmat, scratch[-1],
                        column)
            check_flat_lanes(x, code, active, lane_status, lane_failed, step_iterations, lane_iterations, k,
                             scratch[-1])
            if SECTIONS:  # noqa: F821
                section_values(x, c, after)  # noqa: F821
                if any_crossing(section_modes, before, after, lane_status):
                    locate_crossings((step_offset + k - 1) * h, h, x, before, after, n, c, topology,  # noqa: F821
                                     options, active, lane_status, lane_failed, k, first, members, section_modes,
                                     section_count, section_time, section_state)
            if k % save_every == 0:
                record_flat_sample(k // save_every, x, n, c, topology, first, members, lane_status, save_state,
                                   state_out, energy, diagnostics, scratch, system_work)
                if tracking:
                    flat_shadow_factor(x, shadow, shadow_scratch, rmat, scratch[-1])
                    record_indicators(k // save_every, step_offset + k, renormalise_every, h, first, members,
                                      log_growth, reference, rmat, indicators, log_growth_out, indicator_out)
        write_flat_final(x, np.full(lanes, h), first, members, lane_status, lane_failed, lane_iterations, status,
                         failed_step, iterations, x_end, carried)
        if tracking:
            write_final_shadows(shadow, log_growth, reference, indicators, first, members, shadow_end, log_growth_end,
                                reference_end, indicators_end)


# Shadow stages of the flat driver (bound as ``shadow_begin`` / ``shadow_step``).

def flat_shadow_begin(x, shadow, n, coef, topology, h, options, work, system_work, reference, moved, displacement,
                      rmat, dot, shadow_moved):
    """Put the shadows on the system's constraints and start their integrator (its cached state at the
    shadow; ``system_work``: the system's scratch for the shadows' lanes).  A lane whose member or shadow the constraints moved (``moved``) takes its displacements'
    factor now as its references: the displacement's part off the constraints is gone, and is no growth.
    ``shadow_moved`` (k·L): scratch for which shadow lanes the constraints moved."""
    lanes = x.shape[1]
    k = shadow.shape[1] // lanes
    for s in range(k * lanes):
        shadow_moved[s] = moved[s % lanes]
    system_constrain(shadow, n, coef, topology, system_work, shadow_moved)  # noqa: F821
    flat_shadow_factor(x, shadow, displacement, rmat, dot)
    for j in range(k):
        for l in range(lanes):
            if shadow_moved[j * lanes + l] != 0.0:
                for i in range(k):
                    reference[i * lanes + l] = rmat[i, i, l]
    integrator_begin(shadow, n, coef, topology, h, options, work)  # noqa: F821


def flat_shadow_step(step, x, shadow, n, coef, topology, h, options, work, system_work, active, shadow_active,
                     shadow_code, shadow_iterations, d0, renormalise_every, log_growth, reference, indicators,
                     displacement, rmat, dot, column):
    """Step the k shadows with the members' integrator (on the tiled coefficients ``coef``), forget
    failed ones (NaN exponent for good), and at every global ``step`` divisible by ``renormalise_every``
    orthogonalise their displacements together, accumulate the indicators, and pull each shadow to
    distance d0 along its orthogonalised direction on the manifold (the space's ``pull_back``)."""
    tile_active(active, shadow_active)
    integrator_step(shadow, n, coef, topology, (step - 1) * h, h, options, work, shadow_active,  # noqa: F821
                    shadow_code, shadow_iterations)
    system_constrain(shadow, n, coef, topology, system_work, column)  # noqa: F821 (which lanes moved: not needed)
    system_admissible(shadow, n, coef, topology, system_work, shadow_code)  # noqa: F821
    forget_failed_shadows(shadow_code, log_growth)
    if step % renormalise_every == 0:
        lanes = x.shape[1]
        k = shadow.shape[1] // lanes
        flat_displacements(x, shadow, displacement)
        orthogonalise(displacement, displacement[:0], lanes, rmat, dot)
        accumulate_indicators(step, renormalise_every, h, log_growth, reference, rmat, indicators, column, dot)
        # shadow j ← x + v_j (the first is its own displacement already), then pulled to d0 by the factor
        for r in range(x.shape[0]):
            for j in range(1, k):
                for l in range(lanes):
                    shadow[r, j * lanes + l] = x[r, l] + displacement[r, j * lanes + l]
        for j in range(k):
            for l in range(lanes):
                column[j * lanes + l] = d0 / rmat[j, j, l]
        for r in range(x.shape[0]):
            for j in range(k):
                for l in range(lanes):
                    displacement[r, j * lanes + l] = x[r, l]
        space_pull_back(displacement, shadow, n, topology, column)  # noqa: F821
        flat_displacements(x, shadow, displacement)
        displacement_norms(displacement, displacement[:0], lanes, reference, dot)
        integrator_begin(shadow, n, coef, topology, h, options, work)  # noqa: F821


def no_flat_shadow_begin(x, shadow, n, coef, topology, h, options, work, system_work, reference, moved,
                         displacement, rmat, dot, shadow_moved):
    """Kernels without shadows: nothing to start."""


def no_flat_shadow_step(step, x, shadow, n, coef, topology, h, options, work, system_work, active, shadow_active,
                        shadow_code, shadow_iterations, d0, renormalise_every, log_growth, reference, indicators,
                        displacement, rmat, dot, column):
    """Kernels without shadows: nothing to step."""


FLAT_SHADOW_STAGES = {True: (("shadow_begin", flat_shadow_begin), ("shadow_step", flat_shadow_step)),
                      False: (("shadow_begin", no_flat_shadow_begin), ("shadow_step", no_flat_shadow_step))}
