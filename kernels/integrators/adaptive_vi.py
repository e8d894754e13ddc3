"""Time-reversible adaptive steps for the explicit variational integrator on (S²)ⁿ.

Each member keeps its own step sequence, chosen by the explicit reversible controller of Hairer &
Söderlind ("Explicit, time reversible, adaptive step size control", SIAM J. Sci. Comput. 26, 2005):
a step density ρ (1/s) is integrated alongside the state in a fictive time in which every step has
unit length, h_n = 1/ρ_{n+1/2}, with the symmetric update

    ρ_{n+1/2} = ρ_n + G(y_n)/2,   y_{n+1} = Φ_{h_n}(y_n),   ρ_{n+1} = ρ_{n+1/2} + G(y_{n+1})/2,

where Φ_h is the explicit step of Lee–Leok–McClamroch eqs. (29)–(30) (symmetric) and G = d ln ρ*/dt
keeps ρ proportional to the target density ρ*(y) along the flow.  Under the reversal (q, ω) → (q, −ω)
G changes sign, so the map (y_n, ρ_n) → (y_{n+1}, ρ_{n+1}) is reversible: stepping back from
(q_N, −ω_N, ρ_N) retraces the sequence.  The target density comes from the system's closest
encounter (its ``encounter`` function: the time scale τ of motion at the smallest separation):

    ρ*(y) = √(1/h_max² + 1/(ε τ(y))²),   G(y) = −b/(a + b) · d ln τ/dt,  a = 1/h_max², b = 1/(ε τ)²,

so steps are h_max far from encounters and about ε τ in them (ε = ``tolerance``: a second-order
method's relative energy error over an encounter then scales as ε²).

Output: the trajectory is never bent to land on the save times (that would break reversibility).
The saved sample is the state after the first step that reaches or passes the sample's nominal time;
``sample_lag`` records by how much (s, less than one step).  The clock restarts at every save time
from that lag, which is carried with ρ to a later segment, so segments continue bit for bit.
Free names bound at specialisation: ``integrator_allocate``, ``integrator_begin``,
``integrator_step`` (the explicit vi step), ``record_sample``, ``system_encounter``.
"""

import numpy as np

from ..driver import check_lanes, lane_bookkeeping, write_final_state
from ..lanes import lane_function
from ..sections import any_crossing
from ..status import OK, STEP_SIZE_UNDERFLOW

#: the adaptive options in the ``options`` array, after the Newton tolerance and iteration limit
TOLERANCE, MAX_STEP, MAX_STEPS = 2, 3, 4
#: columns of the carried per-member state: ρ_n (1/s; NaN: start at ρ*(y_0)) and the lag (s) of the
#: last saved sample behind its nominal time
STEP_DENSITY, SAMPLE_LAG = 0, 1


@lane_function
def target_density(encounter_out, inverse_max_step2, tolerance):
    """(ρ*, G): the target step density ρ* (1/s) of the state whose encounter is ``encounter_out``
    (lane 0) and its logarithmic rate G = d ln ρ*/dt (1/s); see the module docstring."""
    tau = encounter_out[1, 0]
    b = 0.0 if not tau < np.inf else 1.0 / (tolerance * tau) ** 2
    total = inverse_max_step2 + b
    return np.sqrt(total), -b / total * encounter_out[2, 0]


@lane_function
def nominal_step(next_sample, save_every, elapsed, dt):
    """The fixed-step count a failure at ``elapsed`` s past sample ``next_sample`` − 1 reports."""
    return (next_sample - 1) * save_every + int(elapsed / dt) + 1


def drive_adaptive_vi(q_blocks, omega_blocks, mass_diag, mass_full, coef, shadow_q_blocks, shadow_omega_blocks,
                      log_growth_blocks, reference_blocks, indicator_blocks, topology, dt, n_steps, save_every, options,
                      d0, renormalise_every, step_offset, track_encounters, section_modes, members, save_state,
                      q_out, omega_out, energy, unit_error, tangency_error, work_out, status, failed_step, iterations,
                      q_end, omega_end, carried, min_separation, sample_time, log_growth_out, indicator_out, shadow_q_end,
                      shadow_omega_end, log_growth_end, reference_end, indicators_end, section_time, section_state,
                      section_count):
    """March each member (blocks of one lane) with its own reversible step sequence until it has
    passed every save time s·save_every·dt, s ≤ n_steps/save_every (see the module docstring).
    ``sample_time`` receives each sample's lag behind its nominal time (s); ``iterations`` the steps
    taken; ``carried`` holds (ρ, lag) in and out.  The controller evaluates the encounter at every
    step anyway, so ``min_separation`` is kept whatever ``track_encounters`` says.  A member whose density stops being positive or
    that needs more than ``max_steps`` steps fails with STEP_SIZE_UNDERFLOW.  Shares
    :func:`kernels.driver.drive_fixed_step`'s signature; shadows are refused by :func:`kernels.integrate`.
    Sections (``SECTIONS``) are located in each step by re-stepping it (``locate_crossings``, as the fixed-step
    drivers do: the step of the member's own size h, backwards from its end)."""
    n_blocks, n, _, lanes = q_blocks.shape
    tolerance = options[TOLERANCE]
    max_step = options[MAX_STEP]
    max_steps = int(options[MAX_STEPS])
    inverse_max_step2 = 1.0 / (max_step * max_step)
    interval = save_every * dt
    n_samples = n_steps // save_every + 1
    for blk in range(n_blocks):
        q = q_blocks[blk].copy()
        omega = omega_blocks[blk].copy()
        md = mass_diag[blk]
        mf = mass_full[blk]
        c = coef[blk]
        work = integrator_allocate(n, 1)  # noqa: F821 (bound at specialisation)
        half_h_over_mass = work[3]
        scratch = np.empty((4, 1))
        encounter_out = np.empty((3, 1))
        closest = np.full(1, np.inf)
        lane_status, lane_failed, lane_iterations, step_iterations, code, active = lane_bookkeeping(blk, members, 1)
        integrator_begin(q, omega, md, mf, c, topology, max_step, options, work)  # noqa: F821 (∂V/∂q at q_0)
        system_encounter(q, omega, md, c, topology, encounter_out)  # noqa: F821
        density, rate = target_density(encounter_out, inverse_max_step2, tolerance)
        rho = carried[blk, STEP_DENSITY]
        if not np.isfinite(rho):
            rho = density
        elapsed = carried[blk, SAMPLE_LAG]
        closest[0] = encounter_out[0, 0]
        sample_time[blk, 0] = elapsed
        record_sample(0, q, omega, md, mf, c, topology, blk, members, lane_status,  # noqa: F821
                      save_state, q_out, omega_out, energy, unit_error, tangency_error, scratch)
        next_sample = 1
        steps = 0
        sections = section_modes.shape[1] if SECTIONS else 0  # noqa: F821
        before = np.empty((sections, 1))
        after = np.empty((sections, 1))
        if SECTIONS:  # noqa: F821
            section_values(q, omega, c, after)  # noqa: F821
        while next_sample < n_samples:
            rho_half = rho + 0.5 * rate
            if not rho_half > 0.0 or steps >= max_steps:
                lane_status[0] = STEP_SIZE_UNDERFLOW
                lane_failed[0] = nominal_step(next_sample, save_every, elapsed, dt)
                break
            h = 1.0 / rho_half
            for i in range(n):
                half_h_over_mass[i, 0] = 0.5 * h / md[i, 0]
            t = (step_offset + (next_sample - 1) * save_every) * dt + elapsed
            integrator_step(t, q, omega, md, mf, c, topology, h, options, work, active, code,  # noqa: F821
                            step_iterations)
            steps += 1
            check_lanes(q, omega, code, active, lane_status, lane_failed, step_iterations, lane_iterations, 0, scratch)
            if lane_status[0] != OK:
                lane_failed[0] = nominal_step(next_sample, save_every, elapsed, dt)
                break
            if SECTIONS:  # noqa: F821 (located by re-stepping this step of size h, see kernels.sections)
                before, after = after, before
                section_values(q, omega, c, after)  # noqa: F821
                if any_crossing(section_modes, before, after, lane_status):
                    locate_crossings(t, h, q, omega, before, after, md, mf, c, topology, options, active,  # noqa: F821
                                     lane_status, lane_failed, nominal_step(next_sample, save_every, elapsed, dt), blk,
                                     members, section_modes, section_count, section_time, section_state)
                    if lane_status[0] != OK:  # stopped at an escape: its samples from then on stay NaN
                        break
            system_encounter(q, omega, md, c, topology, encounter_out)  # noqa: F821
            closest[0] = min(closest[0], encounter_out[0, 0])
            rate = target_density(encounter_out, inverse_max_step2, tolerance)[1]
            rho = rho_half + 0.5 * rate
            elapsed += h
            while next_sample < n_samples and elapsed >= interval:
                elapsed -= interval
                sample_time[blk, next_sample] = elapsed
                record_sample(next_sample, q, omega, md, mf, c, topology, blk, members, lane_status,  # noqa: F821
                              save_state, q_out, omega_out, energy, unit_error, tangency_error, scratch)
                next_sample += 1
        lane_iterations[0] = steps
        write_final_state(q, omega, closest, blk, members, lane_status, lane_failed, lane_iterations,
                          status, failed_step, iterations, q_end, omega_end, min_separation)
        carried[blk, STEP_DENSITY] = rho
        carried[blk, SAMPLE_LAG] = elapsed
