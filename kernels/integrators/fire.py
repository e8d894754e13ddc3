"""FIRE minimisation on (S²)ⁿ: the fast inertial relaxation engine with every move along a geodesic.

FIRE (Bitzek, Bitzek, Gumbsch & Gumbsch, "Structural relaxation made simple", PRL 97, 170201 (2006)) descends a
potential V by damped dynamics whose velocity is steered towards the force, its step growing while the power
P = F·v stays positive and the velocity being zeroed when P turns negative.  This is its 2.0 form (Guénolé et
al., "Assessment and optimization of the fast inertial relaxation engine (FIRE) for energy minimization in
atomistic simulations and its implementation in LAMMPS", Comput. Mater. Sci. 175, 109584 (2020), Algorithm 2
with the semi-implicit Euler integrator, the initial delay and the half step back), with the parameters of their
Table 1 (N_delay = 20, f_inc = 1.1, f_dec = 0.5, α_start = 0.25, f_α = 0.99, Δt_min = 0.02 Δt₀; Δt_max the
``max_step`` option, default 10 Δt₀, Δt₀ the run's ``dt``).

On the sphere the velocity of body i is carried as its angular velocity ω_i (q̇_i = ω_i × q_i, ω_i ⊥ q_i) and the
force as its torque τ_i = q_i × (−∂V/∂q_i), the tangential force turned by 90° about q_i: |τ_i| = |P_i ∂V/∂q_i|,
τ_i·ω_i = F_i·v_i, and the turn is an isometry of the tangent plane, so FIRE's power, norms and mixing
v ← (1 − α) v + α |v| F̂ read the same in (ω, τ).  A step of size Δt

    ω_i ← ω_i + (Δt/M_ii) τ_i,   ω ← (1 − α) ω + α (‖ω‖/‖τ‖) τ   (norms over all bodies),
    q_i ← q_i turned about ω_i by |ω_i| Δt   (the exact geodesic, ω_i unchanged along it),

moves each q_i along a great circle and renormalises it (:func:`kernels.integrators.langevin.geodesic_flow`), so
‖q_i‖ = 1 to round-off at every step; the half step back on P ≤ 0 is the same flow for −Δt/2.

A member converges when its largest tangential force max_i |τ_i| falls to ``force_tolerance`` (J per unit chord,
the units of ∂V/∂q) or, with ``energy_tolerance``, when one step changes V by at most
energy_tolerance · (|V_k| + |V_{k−1}|)/2 (LAMMPS' ``etol``); it then stops where it is (status OK, its samples
repeat the minimum).  A member that reaches ``max_steps`` FIRE steps unconverged stops there with status
NOT_CONVERGED (its state kept: it is not a failure).  FIRE's own state (Δt, α, the steps since P ≤ 0, the steps
taken, whether it converged, V) is carried between calls, so a minimisation continued in segments is bit for bit
the uninterrupted one.  The recorded ``energy`` of a minimisation is V alone (``kinetic_energy`` is bound to
:func:`no_kinetic_energy`): FIRE's velocities are a device of the search, not a physical motion.

Free names bound at specialisation: ``system_gradient``, ``system_potential``, ``record_sample``.
"""

import numpy as np

from ..lanes import lane_function
from ..status import NON_FINITE, NOT_CONVERGED, OK
from .langevin import geodesic_flow

#: FIRE 2.0's parameters (Guénolé et al. 2020, Table 1)
N_DELAY = 20
F_INC = 1.1
F_DEC = 0.5
ALPHA_START = 0.25
F_ALPHA = 0.99
MIN_STEP_FRACTION = 0.02
#: the default largest step, in units of the run's dt
MAX_STEP_FACTOR = 10.0

#: the kernel's option vector, in order
FORCE_TOLERANCE, ENERGY_TOLERANCE, MAX_STEPS, MAX_STEP = range(4)
#: what a minimisation carries from one call to the next, in column order: FIRE's step Δt (s), its mixing α, the
#: steps since the power was last ≤ 0, the FIRE steps taken, 1 once converged (else 0), V at the current state (J)
CARRY = ("fire_step", "fire_mixing", "fire_downhill", "fire_steps", "fire_converged", "fire_potential")
STEP, MIXING, DOWNHILL, STEPS, CONVERGED, POTENTIAL = range(len(CARRY))
CARRIED = len(CARRY)


def initial_carry(dt: float) -> dict:
    """The carried state of a fresh minimisation: Δt = dt, α = α_start, nothing taken, V not yet known (NaN)."""
    return {"fire_step": dt, "fire_mixing": ALPHA_START, "fire_downhill": 0.0, "fire_steps": 0.0,
            "fire_converged": 0.0, "fire_potential": np.nan}


@lane_function
def no_kinetic_energy(q, omega, mass_diag, mass_full, coef, topology, out):
    """``kinetic_energy`` of a minimisation: 0, so that the recorded energy is V alone (J)."""
    for b in range(q.shape[2]):
        out[b] = 0.0


#: the partial sums a step's control needs of each particle (:func:`fire_particle_sums`), in order: the power
#: τ_i·ω_i, |ω_i|², |τ_i|², τ_i·ω_i/M_ii, |τ_i|²/M_ii², and (by max, not sum) |τ_i|
POWER, SPEED_SQUARED, TORQUE_SQUARED, POWER_OVER_MASS, TORQUE_OVER_MASS_SQUARED, LARGEST_TORQUE = range(6)
SUMS = 6


@lane_function
def fire_particle_sums(q, grad, omega, mass, torque, i, sums):
    """The first stage of particle i (lane 0): its torque τ_i = q_i × (−∂V/∂q_i) = ∂V/∂q_i × q_i into
    torque[i] and its terms added into ``sums`` (:data:`SUMS`; the largest |τ_i| by max).  Every runner sums
    these over its particles in a fixed order (the ensemble driver by index; the system runners by block)."""
    g0, g1, g2 = grad[i, 0, 0], grad[i, 1, 0], grad[i, 2, 0]
    q0, q1, q2 = q[i, 0, 0], q[i, 1, 0], q[i, 2, 0]
    t0 = g1 * q2 - g2 * q1
    t1 = g2 * q0 - g0 * q2
    t2 = g0 * q1 - g1 * q0
    torque[i, 0], torque[i, 1], torque[i, 2] = t0, t1, t2
    w0, w1, w2 = omega[i, 0, 0], omega[i, 1, 0], omega[i, 2, 0]
    power = t0 * w0 + t1 * w1 + t2 * w2
    size = t0 * t0 + t1 * t1 + t2 * t2
    sums[POWER] += power
    sums[SPEED_SQUARED] += w0 * w0 + w1 * w1 + w2 * w2
    sums[TORQUE_SQUARED] += size
    sums[POWER_OVER_MASS] += power / mass
    sums[TORQUE_OVER_MASS_SQUARED] += size / (mass * mass)
    sums[LARGEST_TORQUE] = max(sums[LARGEST_TORQUE], np.sqrt(size))


@lane_function
def clear_sums(sums):
    for k in range(SUMS):
        sums[k] = 0.0


@lane_function
def combine_sums(into, part):
    """A group's sums (:func:`fire_particle_sums` over its particles) added into ``into``: summed, the largest |τ_i|
    by max (the system runners' groups, combined in a fixed order)."""
    for k in range(SUMS):
        into[k] = max(into[k], part[k]) if k == LARGEST_TORQUE else into[k] + part[k]


@lane_function
def fire_control(sums, carried_row, h, max_step):
    """FIRE 2.0's control of one step from the particles' sums (module docstring): updates the carried Δt, α, the
    steps since P ≤ 0 and the steps taken in ``carried_row``; returns (Δt, α, the steering factor α‖ω'‖/‖τ‖ of the
    mixing, whether the step restarts: half a step back, ω ← 0).  ‖ω'‖, the speed after the kick
    ω' = ω + (Δt/M) τ (ω = 0 on a restart), is expanded from the sums, so that the particles' second stage needs no
    second reduction: ‖ω'‖² = Σ|ω|² + 2Δt Σ τ·ω/M + Δt² Σ |τ|²/M²."""
    step = carried_row[STEP]
    restart = not sums[POWER] > 0.0
    if not restart:
        carried_row[DOWNHILL] += 1.0
        if carried_row[DOWNHILL] > N_DELAY:
            step = min(step * F_INC, max_step)
            carried_row[MIXING] *= F_ALPHA
    else:
        carried_row[DOWNHILL] = 0.0
        if carried_row[STEPS] >= N_DELAY:  # the initial delay: no slowing down in the first N_delay steps
            if step * F_DEC >= MIN_STEP_FRACTION * h:
                step *= F_DEC
            carried_row[MIXING] = ALPHA_START
    speed_squared = step * step * sums[TORQUE_OVER_MASS_SQUARED]
    if not restart:
        speed_squared += sums[SPEED_SQUARED] + 2.0 * step * sums[POWER_OVER_MASS]
    alpha = carried_row[MIXING]
    steer = alpha * np.sqrt(max(speed_squared, 0.0) / sums[TORQUE_SQUARED]) if sums[TORQUE_SQUARED] > 0.0 else 0.0
    carried_row[STEP] = step
    carried_row[STEPS] += 1.0
    return step, alpha, steer, restart


@lane_function
def fire_particle_move(q, omega, torque, mass, step, alpha, steer, restart, i):
    """The second stage of particle i (lane 0): on a restart half a step back along its geodesic and ω_i ← 0;
    then the kick ω_i ← ω_i + (Δt/M_ii) τ_i, the mixing ω_i ← (1 − α) ω_i + steer τ_i and the geodesic move by
    Δt (q_i renormalised, ω_i kept tangent)."""
    if restart:
        geodesic_flow(q, omega, -0.5 * step, i, 0)
        for k in range(3):
            omega[i, k, 0] = 0.0
    kick = step / mass
    for k in range(3):
        omega[i, k, 0] = (1.0 - alpha) * (omega[i, k, 0] + kick * torque[i, k]) + steer * torque[i, k]
    geodesic_flow(q, omega, step, i, 0)


@lane_function
def fire_verdict(sums, potential, carried_row, force_tolerance, energy_tolerance, max_steps):
    """What a step left (after the sums at its new state): NON_FINITE where the forces hold a NaN or inf (the state
    left the finite); else converged (carried_row[CONVERGED] ← 1, status OK) when the largest tangential force is at
    most ``force_tolerance`` or, with ``energy_tolerance`` > 0, when V (``potential``, J) changed by at most
    etol (|V_k| + |V_{k−1}|)/2 since the step before (LAMMPS' etol test; carried_row[POTENTIAL] ← V); else
    NOT_CONVERGED once the steps taken reach ``max_steps``; else OK."""
    done = sums[LARGEST_TORQUE] <= force_tolerance
    if energy_tolerance > 0.0:
        before = carried_row[POTENTIAL]
        done = done or abs(potential - before) <= energy_tolerance * 0.5 * (abs(potential) + abs(before))
        carried_row[POTENTIAL] = potential
    if not (sums[TORQUE_SQUARED] < np.inf):
        return NON_FINITE
    if done:
        carried_row[CONVERGED] = 1.0
        return OK
    return NOT_CONVERGED if carried_row[STEPS] >= max_steps else OK


@lane_function
def member_sums(q, grad, omega, mass_diag, torque, sums):
    """The sums of every particle of lane 0 in index order (:func:`fire_particle_sums`); returns max_i |τ_i|."""
    clear_sums(sums)
    for i in range(q.shape[0]):
        fire_particle_sums(q, grad, omega, mass_diag[i, 0], torque, i, sums)
    return sums[LARGEST_TORQUE]


@lane_function
def member_workspace(n):
    """The arrays one member's minimisation works in: ∂V/∂q (n, 3, 1), the torques (n, 3), the particles' sums, V
    (1,), the sample scratch (4, 1), the lane status (1,) and FIRE's carried state (a GPU thread's own copy through
    the time loop).  Made inside the CPU's driver, and on the host as every GPU thread's start
    (:data:`kernels.gpu.TEMPLATES`)."""
    return (np.empty((n, 3, 1)), np.empty((n, 3)), np.empty(SUMS), np.empty(1), np.empty((4, 1)),
            np.zeros(1, np.int64), np.empty(CARRIED))


def minimise_member_template(own, m, q_blocks, omega_blocks, mass_diag, mass_full, coef, shadow_q_blocks,
                             shadow_omega_blocks, log_growth_blocks, reference_blocks, indicator_blocks, topology, h,
                             n_steps, save_every, options, d0, renormalise_every, step_offset, track_encounters,
                             section_modes, members, save_state, q_out, omega_out, energy, unit_error, tangency_error,
                             largest_force_out, status, failed_step, iterations, q_end, omega_end, carried,
                             min_separation, sample_time, log_growth_out, indicator_out, shadow_q_end, shadow_omega_end,
                             log_growth_end, reference_end, indicators_end, section_time, section_state, section_count):
    """Member m's minimisation (module docstring) by up to ``n_steps`` FIRE steps of initial size ``h`` on the arrays
    of its own in ``own`` (its q, ω (n, 3, 1), masses, full inertia and coefficients, and a :func:`member_workspace`),
    saving every ``save_every`` steps; the largest tangential force max_i |τ_i| of each sample goes to
    ``largest_force_out`` (members, samples) (the channel in which other drivers return a forced run's work), the
    FIRE steps this call took to ``iterations``.  FIRE's state continues from and returns in ``carried[m]`` (columns
    :data:`CARRY`).  Written once for both devices: :func:`drive_fire` calls it for each member on the CPU, a GPU
    thread for its own (:mod:`kernels.gpu`).  Shadows and sections are refused for a minimisation by
    :func:`kernels.integrate`, so their arguments are unused.  Free names: ``system_gradient``,
    ``system_potential``, ``record_sample``."""
    q, omega, md, mf, c, (grad, torque, sums, potential, scratch, lane_status, row) = own
    n = q.shape[0]
    force_tolerance = options[FORCE_TOLERANCE]
    energy_tolerance = options[ENERGY_TOLERANCE]
    max_steps = options[MAX_STEPS]
    max_step = options[MAX_STEP]
    for k in range(CARRIED):
        row[k] = carried[m, k]
    code = OK
    stopped_at = -1
    taken = 0
    system_gradient(q, c, topology, grad)  # noqa: F821 (bound at specialisation)
    largest = member_sums(q, grad, omega, md, torque, sums)
    if energy_tolerance > 0.0 and row[POTENTIAL] != row[POTENTIAL]:
        system_potential(q, c, topology, potential)  # noqa: F821
        row[POTENTIAL] = potential[0]
    record_sample(0, q, omega, md, mf, c, topology, m, members, lane_status,  # noqa: F821
                  save_state, q_out, omega_out, energy, unit_error, tangency_error, scratch)
    largest_force_out[m, 0] = largest
    for k in range(1, n_steps + 1):
        if code == OK and row[CONVERGED] == 0.0:
            step, alpha, steer, restart = fire_control(sums, row, h, max_step)
            for i in range(n):
                fire_particle_move(q, omega, torque, md[i, 0], step, alpha, steer, restart, i)
            taken += 1
            system_gradient(q, c, topology, grad)  # noqa: F821
            largest = member_sums(q, grad, omega, md, torque, sums)
            if energy_tolerance > 0.0:
                system_potential(q, c, topology, potential)  # noqa: F821
            code = fire_verdict(sums, potential[0], row, force_tolerance, energy_tolerance, max_steps)
            stopped_at = k if code != OK else -1
        if k % save_every == 0:
            lane_status[0] = NON_FINITE if code == NON_FINITE else OK  # an unconverged member keeps its samples
            record_sample(k // save_every, q, omega, md, mf, c, topology, m, members, lane_status,  # noqa: F821
                          save_state, q_out, omega_out, energy, unit_error, tangency_error, scratch)
            largest_force_out[m, k // save_every] = largest if code != NON_FINITE else np.nan
    for k in range(CARRIED):
        carried[m, k] = row[k]
    status[m] = code
    failed_step[m] = stopped_at
    iterations[m] = taken
    for i in range(n):
        for k in range(3):
            q_end[m, i, k] = q[i, k, 0] if code != NON_FINITE else np.nan
            omega_end[m, i, k] = omega[i, k, 0] if code != NON_FINITE else np.nan


def drive_fire(q_blocks, omega_blocks, mass_diag, mass_full, coef, shadow_q_blocks, shadow_omega_blocks,
               log_growth_blocks, reference_blocks, indicator_blocks, topology, h, n_steps, save_every, options, d0,
               renormalise_every, step_offset, track_encounters, section_modes, members, save_state, q_out, omega_out,
               energy, unit_error, tangency_error, largest_force_out, status, failed_step, iterations, q_end, omega_end,
               carried, min_separation, sample_time, log_growth_out, indicator_out, shadow_q_end, shadow_omega_end,
               log_growth_end, reference_end, indicators_end, section_time, section_state, section_count):
    """Minimise every member (blocks of one lane) by :func:`minimise_member_template` (bound as
    ``minimise_member``).  Shares :func:`kernels.driver.drive_fixed_step`'s signature."""
    n_blocks, n = q_blocks.shape[:2]
    for blk in range(n_blocks):
        own = (q_blocks[blk].copy(), omega_blocks[blk].copy(), mass_diag[blk], mass_full[blk], coef[blk],
               member_workspace(n))
        minimise_member(own, blk, q_blocks, omega_blocks, mass_diag, mass_full, coef, shadow_q_blocks,  # noqa: F821
                        shadow_omega_blocks, log_growth_blocks, reference_blocks, indicator_blocks, topology, h,
                        n_steps, save_every, options, d0, renormalise_every, step_offset, track_encounters,
                        section_modes, members, save_state, q_out, omega_out, energy, unit_error, tangency_error,
                        largest_force_out, status, failed_step, iterations, q_end, omega_end, carried, min_separation,
                        sample_time, log_growth_out, indicator_out, shadow_q_end, shadow_omega_end, log_growth_end,
                        reference_end, indicators_end, section_time, section_state, section_count)
