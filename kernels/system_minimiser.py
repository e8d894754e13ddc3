"""The system mode of a minimisation (``method = "fire"``): one large member of a pair potential without a cutoff
(Coulomb, the Riesz s-energy, a model's ``pair_potential`` with cutoff = inf), every step on all cores.

A FIRE step (:mod:`kernels.integrators.fire`) is the ensemble kernel's, composed of the same per-particle stages:

1. the gradient at q, every particle's row in parallel (:mod:`kernels.all_pairs`, its terms in increasing
   partner id);
2. each particle's torque and its terms of the power and norms (``fire_particle_sums``), in parallel over fixed
   chunks of consecutive particles (ROW_CHUNKS of them, fixed by n), each chunk adding its particles in order, then
   the chunks combined in chunk order (``combine_sums``);
3. FIRE's scalar control (``fire_control``: Δt, α, a restart) and the verdict after the step (``fire_verdict``),
   once, serially;
4. each particle's restart, kick, mixing and geodesic move (``fire_particle_move``), in parallel.

Every sum's order is fixed by n, not by the threads, so a run has the same bits on any number of threads and across
restarts (FIRE's carried state: its Δt, α, downhill count, steps, convergence and V).  Its bits differ from the
ensemble kernel's for the same member by the order of the gradient's and the sums' additions (the ensemble kernel's
half-pair lane function and index-order sums).  A sample records V alone (the per-particle energies of
:mod:`kernels.all_pairs` summed by id), the largest tangential force and the constraint errors.  Neighbour lists
(a pair potential with a cutoff) are not here: such a minimisation runs in the ensemble mode.
"""

from __future__ import annotations

import functools

import numba
import numpy as np
from numba import prange

from .all_pairs import ROW_CHUNKS, compiled_all_pairs
from .integrators.fire import (CONVERGED, ENERGY_TOLERANCE, FORCE_TOLERANCE, LARGEST_TORQUE, MAX_STEP, MAX_STEPS,
                               POTENTIAL, SUMS, clear_sums, combine_sums, fire_control, fire_particle_move,
                               fire_particle_sums, fire_verdict)
from .lanes import constraint_errors_into
from .status import NON_FINITE, OK
from .system_parallel import bound_driver, check_no_skin, empty_outputs

#: the entries of the driver's ``info``: the outcome, the step it stopped at (−1 if none), the FIRE steps it took
STATUS, STOPPED_AT, TAKEN = range(3)


def sums_pass_template(q, grad, omega, mass_diag, torque, chunk_sums, sums):
    """Every particle's torque into ``torque`` (n, 3) and its terms of the step's sums, the chunks of ``chunk_sums``
    (chunks, SUMS) in parallel, each over its consecutive particles in order, then combined into ``sums`` in chunk
    order; returns the largest tangential force max_i |τ_i|."""
    n = q.shape[0]
    chunks = chunk_sums.shape[0]
    for c in prange(chunks):
        part = chunk_sums[c]
        clear_sums(part)
        for i in range(c * n // chunks, (c + 1) * n // chunks):
            fire_particle_sums(q, grad, omega, mass_diag[i, 0], torque, i, part)
    clear_sums(sums)
    for c in range(chunks):
        combine_sums(sums, chunk_sums[c])
    return sums[LARGEST_TORQUE]


def move_pass_template(q, omega, torque, mass_diag, step, alpha, steer, restart):
    """Every particle's restart, kick, mixing and geodesic move (``fire_particle_move``), in parallel."""
    for i in prange(q.shape[0]):
        fire_particle_move(q, omega, torque, mass_diag[i, 0], step, alpha, steer, restart, i)


def record_minimum_template(sample, q, omega, coef, columns, per_particle, largest, scratch, save_state, q_out,
                            omega_out, energy, largest_force_out, unit_error, tangency_error):
    """One saved sample: V (J; the per-particle energies summed by id), the largest tangential force (J), the
    constraint errors, and q and ω when ``save_state``."""
    energy[sample] = all_pairs_energy(q, coef, columns, per_particle)  # noqa: F821 (bound: the all-pairs term)
    largest_force_out[sample] = largest
    constraint_errors_into(q, omega, scratch[0], scratch[1])
    unit_error[sample] = scratch[0, 0]
    tangency_error[sample] = scratch[1, 0]
    if save_state:
        for i in range(q.shape[0]):
            for k in range(3):
                q_out[sample, i, k] = q[i, k, 0]
                omega_out[sample, i, k] = omega[i, k, 0]


def drive_fire_all_pairs(q_start, omega_start, mass_diag, coef, h, n_steps, save_every, options, save_state, q_out,
                         omega_out, energy, largest_force_out, unit_error, tangency_error, q_end, omega_end, row,
                         info):
    """Minimise one member (q, ω (n, 3, 1), masses (n, 1), coef (rows, 1)) by up to ``n_steps`` FIRE steps of
    initial size ``h`` (module docstring), saving every ``save_every`` steps; FIRE's state continues from and returns
    in ``row`` (its carried columns); ``info`` gets [status, the step it stopped at (−1 if none), the steps taken]."""
    n = q_start.shape[0]
    force_tolerance = options[FORCE_TOLERANCE]
    energy_tolerance = options[ENERGY_TOLERANCE]
    max_steps = options[MAX_STEPS]
    max_step = options[MAX_STEP]
    q = q_start.copy()
    omega = omega_start.copy()
    grad = np.empty_like(q_start)
    torque = np.empty((n, 3))
    columns = np.empty((3, n))
    per_particle = np.empty(n)
    chunk_sums = np.empty((min(n, ROW_CHUNKS), SUMS))
    sums = np.empty(SUMS)
    scratch = np.empty((2, 1))
    all_pairs_gradient(q, coef, columns, grad)  # noqa: F821 (bound: the all-pairs term)
    largest = particle_sums(q, grad, omega, mass_diag, torque, chunk_sums, sums)  # noqa: F821
    if energy_tolerance > 0.0 and row[POTENTIAL] != row[POTENTIAL]:  # V of the start, for the first test
        row[POTENTIAL] = all_pairs_energy(q, coef, columns, per_particle)  # noqa: F821
    record_minimum(0, q, omega, coef, columns, per_particle, largest, scratch, save_state, q_out,  # noqa: F821
                   omega_out, energy, largest_force_out, unit_error, tangency_error)
    code = OK
    stopped_at = -1
    taken = 0
    for k in range(1, n_steps + 1):
        if code == OK and row[CONVERGED] == 0.0:
            step, alpha, steer, restart = fire_control(sums, row, h, max_step)
            particle_moves(q, omega, torque, mass_diag, step, alpha, steer, restart)  # noqa: F821
            taken += 1
            all_pairs_gradient(q, coef, columns, grad)  # noqa: F821
            largest = particle_sums(q, grad, omega, mass_diag, torque, chunk_sums, sums)  # noqa: F821
            potential = 0.0
            if energy_tolerance > 0.0:
                potential = all_pairs_energy(q, coef, columns, per_particle)  # noqa: F821
            code = fire_verdict(sums, potential, row, force_tolerance, energy_tolerance, max_steps)
            stopped_at = k if code != OK else -1
        if k % save_every == 0:
            record_minimum(k // save_every, q, omega, coef, columns, per_particle,  # noqa: F821
                           largest if code != NON_FINITE else np.nan, scratch, save_state, q_out, omega_out, energy,
                           largest_force_out, unit_error, tangency_error)
    q_end[:] = q[:, :, 0]
    omega_end[:] = omega[:, :, 0]
    info[STATUS] = code
    info[STOPPED_AT] = stopped_at
    info[TAKEN] = taken


#: (bound name, template, parallel) in the order they are bound, after the all-pairs term's kernels
HELPERS = (("particle_sums", sums_pass_template, True), ("particle_moves", move_pass_template, True),
           ("record_minimum", record_minimum_template, False))


@functools.cache
def compiled_fire_kernel(system: str):
    """The jitted system-mode minimisation (:func:`drive_fire_all_pairs`) of ``system`` (cached on disk)."""
    return bound_driver("fire", system, "all_pairs", drive_fire_all_pairs, HELPERS, vars(compiled_all_pairs(system)))


def run(system, q, omega, mass_diag, coef, dt: float, n_steps: int, save_every: int, skin, keep_state: bool,
        threads: int, carried: np.ndarray, option_vector: np.ndarray) -> dict:
    """Minimise one member (q, ω: (1, n, 3); masses (1, n), coef (1, rows)) on ``threads`` threads; returns the
    arrays of a :class:`~kernels.integration.Trajectory` (member axis of 1), the largest tangential force of each
    sample as ``exchanged`` (the runner's channel), with FIRE's state continued from and returned in ``carried``
    (1, C).  A Verlet ``skin`` is refused (every pair is summed: no list)."""
    check_no_skin(skin)
    n = q.shape[1]
    out = empty_outputs(n, n_steps, save_every, keep_state)
    del out["temperature"]  # a minimisation's velocities are no motion
    info = np.zeros(3, np.int64)
    row = np.ascontiguousarray(carried[0])
    q_final, omega_final = np.empty((1, n, 3)), np.empty((1, n, 3))
    previous = numba.get_num_threads()
    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    try:
        compiled_fire_kernel(system.name)(
            np.ascontiguousarray(q[0, :, :, np.newaxis]), np.ascontiguousarray(omega[0, :, :, np.newaxis]),
            np.ascontiguousarray(mass_diag[0, :, np.newaxis]), np.ascontiguousarray(coef.T), float(dt), n_steps,
            save_every, option_vector, keep_state, out["q"][0], out["omega"][0], out["energy"][0],
            out["exchanged"][0], out["unit_error"][0], out["tangency_error"][0], q_final[0], omega_final[0], row,
            info)
    finally:
        numba.set_num_threads(previous)
    carried[0] = row
    return minimisation_outcome(out, info[STATUS], info[STOPPED_AT], info[TAKEN], q_final, omega_final)


def minimisation_outcome(out: dict, code: int, stopped_at: int, taken: int, q_final, omega_final) -> dict:
    """``out`` with a system-mode minimisation's outcome: its status, the step it stopped at (−1 if none), the FIRE
    steps it took (``solver_iterations``), its end state (NaN where it failed: NON_FINITE; an unconverged member
    keeps its own), no list builds.  Shared by the CPU's runner and the GPU's (:mod:`kernels.gpu_minimiser`)."""
    failed = code == NON_FINITE
    n = q_final.shape[1]
    out.update(status=np.array([code], np.int64), failed_step=np.array([stopped_at], np.int64),
               solver_iterations=np.array([taken], np.int64),
               q_final=np.full((1, n, 3), np.nan) if failed else q_final,
               omega_final=np.full((1, n, 3), np.nan) if failed else omega_final,
               neighbour_rebuilds=np.zeros(1, np.int64))
    return out
