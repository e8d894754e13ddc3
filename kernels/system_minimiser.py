"""The system mode of a minimisation (``method = "fire"``): one large member of a pair potential, every step on all
cores: without a cutoff (Coulomb, the Riesz s-energy, a model's ``pair_potential`` with cutoff = inf) on the
all-pairs term (:func:`drive_fire_all_pairs`), with one (``sphere_lj``) on neighbour lists (:func:`drive_fire_lists`).

A FIRE step (:mod:`kernels.integrators.fire`) is the ensemble kernel's, composed of the same per-particle stages:

1. the gradient at q: the all-pairs term's, every particle's row in parallel (:mod:`kernels.all_pairs`, its terms
   in increasing partner id), or the half Verlet rows' (:mod:`kernels.neighbours`, the blocks of a colour in
   parallel, each particle's terms in the order the list fixes);
2. each particle's torque and its terms of the power and norms (``fire_particle_sums``), in parallel over fixed
   chunks of consecutive stored particles (ROW_CHUNKS of them, fixed by n), each chunk adding its particles in
   order, then the chunks combined in chunk order (``combine_sums``);
3. FIRE's scalar control (``fire_control``: Δt, α, a restart) and the verdict after the step (``fire_verdict``),
   once, serially;
4. each particle's restart, kick, mixing and geodesic move (``fire_particle_move``), in parallel.

On lists the particles are stored in cell order (:func:`kernels.system_parallel.sort_and_rebuild_template`, as the
dynamics' system mode stores them, ``ids`` mapping them back), and the chunks of step 2 are chunks of that storage
order.  After each move the largest displacement since the last build (a max over fixed chunks,
:func:`kernels.neighbours.needs_rebuild`) decides a rebuild: beyond skin/2 the particles (q, ω, masses, ids; the
torques are recomputed after the gradient) are re-sorted and the rows rebuilt before the gradient, the skin
"auto" (:func:`kernels.neighbours.automatic_skin`, from the system's ``default_skin``) or the caller's.

Every sum's order is fixed by n and by the storage order, a function of the positions at the last build, never by
the threads: a run has the same bits on any number of threads.  A run continued in segments (FIRE's carried state:
its Δt, α, downhill count, steps, convergence and V) is the uninterrupted one bit for bit on the all-pairs term.
On lists each call builds its list at its start, as the dynamics' system mode does: the continuation is bitwise
only where the uninterrupted run rebuilt at the cut with the same skin (a numeric skin); elsewhere its gradients
add the same terms in another order, and it follows the uninterrupted run to round-off.  Its bits differ from the
ensemble kernel's for the same member likewise (the ensemble kernel's half-pair lane function over every pair and
index-order sums).  A sample records V alone (the per-particle energies summed by id), the largest tangential force
and the constraint errors, and q and ω in the caller's order.
"""

from __future__ import annotations

import functools

import numba
import numpy as np
from numba import prange

from . import neighbours as nb
from .all_pairs import ROW_CHUNKS, compiled_all_pairs
from .integrators.fire import (CONVERGED, ENERGY_TOLERANCE, FORCE_TOLERANCE, LARGEST_TORQUE, MAX_STEP, MAX_STEPS,
                               POTENTIAL, SUMS, clear_sums, combine_sums, fire_control, fire_particle_move,
                               fire_particle_sums, fire_verdict)
from .lanes import constraint_errors_into
from .status import NON_FINITE, OK
from .system_parallel import (PARTICLE_FACTORS, bound_driver, cached_sort_and_rebuild, compiled_pair_kernels,
                              empty_outputs, first_lists_template, in_callers_order, list_energies_template,
                              pair_term_ranges, relist_template)

#: the entries of the driver's ``info``: the outcome, the step it stopped at (−1 if none), the FIRE steps it took,
#: the list builds (including the first; 0 on the all-pairs term)
STATUS, STOPPED_AT, TAKEN, BUILDS = range(4)


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


def list_gradient_template(q, coef, ids, lists, out):
    """∂V/∂q (J) at q (n, 3, 1) into ``out`` from the neighbour list's half rows (both colours of blocks) and the
    bonded terms."""
    pair_gradient(q, coef, ids, lists[nb.BY_ID], lists[nb.NEIGHBOURS], lists[nb.COUNTS], lists[nb.BLOCK_START], out)  # noqa: F821


def potential_template(q, coef, terms, ids, per_particle, by_id):
    """V = Σ_i e_i (J): the per-particle energies (``particle_energies`` of what the pair term needs, ``terms``: the
    all-pairs scratch or the lists) into ``per_particle`` in storage order, then added by id (``by_id``, n)."""
    particle_energies(q, coef, ids, terms, per_particle)  # noqa: F821 (bound: the driver's pair term)
    for s in range(q.shape[0]):
        by_id[ids[s]] = per_particle[s]
    total = 0.0
    for i in range(q.shape[0]):
        total += by_id[i]
    return total


def forces_template(q, omega, mass_diag, coef, ids, terms, grad, torque, chunk_sums, sums):
    """∂V/∂q at q (``term_gradient`` of the pair term's ``terms``), then the torques and the step's sums
    (:func:`sums_pass_template`); returns the largest tangential force max_i |τ_i| (J)."""
    term_gradient(q, coef, ids, terms, grad)  # noqa: F821 (bound: the driver's pair term)
    return particle_sums(q, grad, omega, mass_diag, torque, chunk_sums, sums)  # noqa: F821


def start_template(q, omega, mass_diag, coef, terms, ids, grad, torque, chunk_sums, sums, per_particle, by_id, row,
                   energy_tolerance):
    """A call's start: the forces and sums at q (:func:`forces_template`) and, for the energy criterion, V at q
    into ``row`` unless it carries one already; returns the largest tangential force (J)."""
    largest = forces(q, omega, mass_diag, coef, ids, terms, grad, torque, chunk_sums, sums)  # noqa: F821
    if energy_tolerance > 0.0 and row[POTENTIAL] != row[POTENTIAL]:  # V of the start, for the first test
        row[POTENTIAL] = potential(q, coef, terms, ids, per_particle, by_id)  # noqa: F821
    return largest


def after_move_template(q, omega, mass_diag, coef, terms, ids, grad, torque, chunk_sums, sums, per_particle, by_id,
                        row, options):
    """What a step's move left: the forces and sums at the new q (:func:`forces_template`), V when the energy
    criterion asks for it, and ``fire_verdict``; returns (the largest tangential force (J), the status code)."""
    largest = forces(q, omega, mass_diag, coef, ids, terms, grad, torque, chunk_sums, sums)  # noqa: F821
    energy_tolerance = options[ENERGY_TOLERANCE]
    value = potential(q, coef, terms, ids, per_particle, by_id) if energy_tolerance > 0.0 else 0.0  # noqa: F821
    return largest, fire_verdict(sums, value, row, options[FORCE_TOLERANCE], energy_tolerance, options[MAX_STEPS])


def record_minimum_template(sample, q, omega, ids, coef, terms, per_particle, by_id, largest, scratch, save_state,
                            q_out, omega_out, energy, largest_force_out, unit_error, tangency_error):
    """One saved sample: V (J; the per-particle energies summed by id), the largest tangential force (J), the
    constraint errors, and q and ω in the caller's order when ``save_state``."""
    energy[sample] = potential(q, coef, terms, ids, per_particle, by_id)  # noqa: F821
    largest_force_out[sample] = largest
    constraint_errors_into(q, omega, scratch[0], scratch[1])
    unit_error[sample] = scratch[0, 0]
    tangency_error[sample] = scratch[1, 0]
    if save_state:
        in_callers_order(ids, q, q_out[sample])
        in_callers_order(ids, omega, omega_out[sample])


def drive_fire_all_pairs(q_start, omega_start, mass_diag, coef, h, n_steps, save_every, options, save_state, q_out,
                         omega_out, energy, largest_force_out, unit_error, tangency_error, q_end, omega_end, row,
                         info):
    """Minimise one member (q, ω (n, 3, 1), masses (n, 1), coef (rows, 1)) of a pair potential without a cutoff by
    up to ``n_steps`` FIRE steps of initial size ``h`` (module docstring), saving every ``save_every`` steps; FIRE's
    state continues from and returns in ``row`` (its carried columns); ``info`` gets [status, the step it stopped at
    (−1 if none), the steps taken, 0 builds].  The particles stay in the caller's order (ids = 0 … n − 1)."""
    n = q_start.shape[0]
    q = q_start.copy()
    omega = omega_start.copy()
    ids = np.arange(n)
    grad = np.empty_like(q_start)
    torque = np.empty((n, 3))
    columns = np.empty((3, n))
    per_particle = np.empty(n)
    by_id = np.empty(n)
    chunk_sums = np.empty((min(n, ROW_CHUNKS), SUMS))
    sums = np.empty(SUMS)
    scratch = np.empty((2, 1))
    largest = begin(q, omega, mass_diag, coef, columns, ids, grad, torque, chunk_sums, sums,  # noqa: F821
                    per_particle, by_id, row, options[ENERGY_TOLERANCE])
    record_minimum(0, q, omega, ids, coef, columns, per_particle, by_id, largest, scratch, save_state,  # noqa: F821
                   q_out, omega_out, energy, largest_force_out, unit_error, tangency_error)
    code = OK
    stopped_at = -1
    taken = 0
    for k in range(1, n_steps + 1):
        if code == OK and row[CONVERGED] == 0.0:
            step, alpha, steer, restart = fire_control(sums, row, h, options[MAX_STEP])
            particle_moves(q, omega, torque, mass_diag, step, alpha, steer, restart)  # noqa: F821
            taken += 1
            largest, code = after_move(q, omega, mass_diag, coef, columns, ids, grad, torque,  # noqa: F821
                                       chunk_sums, sums, per_particle, by_id, row, options)
            stopped_at = k if code != OK else -1
        if k % save_every == 0:
            record_minimum(k // save_every, q, omega, ids, coef, columns, per_particle, by_id,  # noqa: F821
                           largest if code != NON_FINITE else np.nan, scratch, save_state, q_out, omega_out, energy,
                           largest_force_out, unit_error, tangency_error)
    q_end[:] = q[:, :, 0]
    omega_end[:] = omega[:, :, 0]
    info[STATUS] = code
    info[STOPPED_AT] = stopped_at
    info[TAKEN] = taken
    info[BUILDS] = 0


def drive_fire_lists(q_start, omega_start, mass_start, coef, h, n_steps, save_every, options, cutoff, skin, adaptive,
                     capacity, save_state, q_out, omega_out, energy, largest_force_out, unit_error, tangency_error,
                     q_end, omega_end, row, info, skin_end):
    """:func:`drive_fire_all_pairs` for a pair potential with a cutoff r_c (``cutoff``, m) on half Verlet rows of
    range r_c + skin (m), rows of ``capacity`` to start with: built at the start, and after any move that took a
    particle more than skin/2 from where the last build saw it (the particles re-sorted in cell order; with
    ``adaptive`` the skin first set from the last list's life).  ``info`` gets [status, the step it stopped at (−1
    if none), the steps taken, the builds (including the first)], ``skin_end`` the last skin (m); q_end and
    omega_end, like the samples, are in the caller's order."""
    n = q_start.shape[0]
    # the per-particle arrays in storage (cell) order, as the dynamics' (sort_and_rebuild gathers all seven); FIRE
    # reads q, ω, masses and ids: the dynamics' h/2M, margins and factors ride along unset
    particles = (q_start.copy(), omega_start.copy(), mass_start.copy(), np.empty((n, 1)), np.empty(n),
                 np.empty((n, PARTICLE_FACTORS)), np.arange(n))
    spare = (np.empty_like(q_start), np.empty_like(q_start), np.empty_like(mass_start), np.empty((n, 1)),
             np.empty(n), np.empty((n, PARTICLE_FACTORS)), np.empty(n, np.int64))
    lists, particles, spare, per_axis = first_lists(particles, spare, cutoff, skin, capacity)  # noqa: F821
    q, omega, mass_diag, ids = particles[0], particles[1], particles[2], particles[6]
    builds = 1
    built_at = 0
    grad = np.empty_like(q_start)
    torque = np.empty((n, 3))
    per_particle = np.empty(n)
    by_id = np.empty(n)
    chunk_sums = np.empty((min(n, ROW_CHUNKS), SUMS))
    sums = np.empty(SUMS)
    chunk_max = np.empty(nb.REDUCTION_CHUNKS)
    scratch = np.empty((2, 1))
    largest = begin(q, omega, mass_diag, coef, lists, ids, grad, torque, chunk_sums, sums,  # noqa: F821
                    per_particle, by_id, row, options[ENERGY_TOLERANCE])
    record_minimum(0, q, omega, ids, coef, lists, per_particle, by_id, largest, scratch, save_state,  # noqa: F821
                   q_out, omega_out, energy, largest_force_out, unit_error, tangency_error)
    code = OK
    stopped_at = -1
    taken = 0
    for k in range(1, n_steps + 1):
        if code == OK and row[CONVERGED] == 0.0:
            step, alpha, steer, restart = fire_control(sums, row, h, options[MAX_STEP])
            particle_moves(q, omega, torque, mass_diag, step, alpha, steer, restart)  # noqa: F821
            taken += 1
            if nb.needs_rebuild(q, lists[nb.REFERENCE], skin, chunk_max):
                lists, particles, spare, skin, per_axis = relist(particles, spare, lists, cutoff, skin,  # noqa: F821
                                                                 adaptive, per_axis, k - built_at)
                q, omega, mass_diag, ids = particles[0], particles[1], particles[2], particles[6]
                builds += 1
                built_at = k
            largest, code = after_move(q, omega, mass_diag, coef, lists, ids, grad, torque,  # noqa: F821
                                       chunk_sums, sums, per_particle, by_id, row, options)
            stopped_at = k if code != OK else -1
        if k % save_every == 0:
            record_minimum(k // save_every, q, omega, ids, coef, lists, per_particle, by_id,  # noqa: F821
                           largest if code != NON_FINITE else np.nan, scratch, save_state, q_out, omega_out, energy,
                           largest_force_out, unit_error, tangency_error)
    in_callers_order(ids, q, q_end)
    in_callers_order(ids, omega, omega_end)
    skin_end[0] = skin
    info[STATUS] = code
    info[STOPPED_AT] = stopped_at
    info[TAKEN] = taken
    info[BUILDS] = builds


#: (bound name, template, parallel) in the order they are bound, each after what it calls: the steps' stages, then
#: the parts both drivers share, after the pair term's kernels (and, on lists, LIST_HELPERS)
HELPERS = (("particle_sums", sums_pass_template, True), ("particle_moves", move_pass_template, True),
           ("potential", potential_template, False), ("forces", forces_template, False),
           ("begin", start_template, False), ("after_move", after_move_template, False),
           ("record_minimum", record_minimum_template, False))
#: what the list driver binds first: the list's gradient and energies as the pair term, its builds
LIST_HELPERS = (("term_gradient", list_gradient_template, False), ("particle_energies", list_energies_template, False),
                ("first_lists", first_lists_template, False), ("relist", relist_template, False))


@functools.cache
def compiled_fire_kernel(system: str):
    """The jitted system-mode minimisation on the all-pairs term (:func:`drive_fire_all_pairs`) of ``system`` (cached
    on disk)."""
    terms = vars(compiled_all_pairs(system))
    return bound_driver("fire", system, "all_pairs", drive_fire_all_pairs, HELPERS,
                        {**terms, "term_gradient": terms["all_pairs_gradient"]})


@functools.cache
def compiled_fire_lists_kernel(system: str):
    """The jitted system-mode minimisation on neighbour lists (:func:`drive_fire_lists`) of ``system`` (cached on
    disk)."""
    return bound_driver("fire", system, "lists", drive_fire_lists, LIST_HELPERS + HELPERS,
                        {**vars(compiled_pair_kernels(system)), "sort_and_rebuild": cached_sort_and_rebuild()})


def run(system, q, omega, mass_diag, coef, dt: float, n_steps: int, save_every: int, skin, keep_state: bool,
        threads: int, carried: np.ndarray, option_vector: np.ndarray) -> dict:
    """Minimise one member (q, ω: (1, n, 3); masses (1, n), coef (1, rows)) on ``threads`` threads; returns the
    arrays of a :class:`~kernels.integration.Trajectory` (member axis of 1), the largest tangential force of each
    sample as ``exchanged`` (the runner's channel), with FIRE's state continued from and returned in ``carried``
    (1, C).  A pair potential without a cutoff sums every pair: a Verlet ``skin`` is refused.  With a cutoff, on
    neighbour lists: ``skin`` is the Verlet skin (m, chord) or "auto" (what None means: set at each rebuild by
    :func:`~kernels.neighbours.automatic_skin`, from the system's ``pair.default_skin``); the builds come back as
    ``neighbour_rebuilds`` and the last skin as ``neighbour_skin`` (1,)."""
    n = q.shape[1]
    all_pairs, cutoff, skin, adaptive = pair_term_ranges(system, n, skin)
    out = empty_outputs(n, n_steps, save_every, keep_state)
    del out["temperature"]  # a minimisation's velocities are no motion
    info = np.zeros(4, np.int64)
    row = np.ascontiguousarray(carried[0])
    q_final, omega_final = np.empty((1, n, 3)), np.empty((1, n, 3))
    start = (np.ascontiguousarray(q[0, :, :, np.newaxis]), np.ascontiguousarray(omega[0, :, :, np.newaxis]),
             np.ascontiguousarray(mass_diag[0, :, np.newaxis]), np.ascontiguousarray(coef.T), float(dt), n_steps,
             save_every, option_vector)
    samples = (keep_state, out["q"][0], out["omega"][0], out["energy"][0], out["exchanged"][0],
               out["unit_error"][0], out["tangency_error"][0], q_final[0], omega_final[0], row, info)
    previous = numba.get_num_threads()
    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    try:
        if all_pairs:
            compiled_fire_kernel(system.name)(*start, *samples)
        else:
            compiled_fire_lists_kernel(system.name)(*start, cutoff, skin, adaptive,
                                                    nb.initial_capacity(n, cutoff + skin), *samples,
                                                    out["neighbour_skin"])
    finally:
        numba.set_num_threads(previous)
    carried[0] = row
    return minimisation_outcome(out, info[STATUS], info[STOPPED_AT], info[TAKEN], q_final, omega_final, info[BUILDS])


def minimisation_outcome(out: dict, code: int, stopped_at: int, taken: int, q_final, omega_final,
                         builds: int = 0) -> dict:
    """``out`` with a system-mode minimisation's outcome: its status, the step it stopped at (−1 if none), the FIRE
    steps it took (``solver_iterations``), its end state (NaN where it failed: NON_FINITE; an unconverged member
    keeps its own), its list ``builds`` (``neighbour_rebuilds``: 0 on the all-pairs term).  Shared by the CPU's
    runner and the GPU's (:mod:`kernels.gpu_minimiser`)."""
    failed = code == NON_FINITE
    n = q_final.shape[1]
    out.update(status=np.array([code], np.int64), failed_step=np.array([stopped_at], np.int64),
               solver_iterations=np.array([taken], np.int64),
               q_final=np.full((1, n, 3), np.nan) if failed else q_final,
               omega_final=np.full((1, n, 3), np.nan) if failed else omega_final,
               neighbour_rebuilds=np.array([builds], np.int64))
    return out
