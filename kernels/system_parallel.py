"""System-parallel mode: one large system of pairs on all cores, the parts its runners share.

The ensemble mode (:mod:`kernels.driver`) gives each thread its own members; here a single member is
split over threads inside each step: the per-body stages of the integrator (for ``vi``, the half kick
and drift of Lee–Leok–McClamroch eqs. (29)–(30), then the second half kick: the very lane functions
the ensemble step calls, :func:`advance_range_template` over fixed chunks, :func:`chunk_pass_template`) and the
gradient run as ``numba.prange`` loops over particles.  Every parallel loop writes disjoint rows and every sum runs
in a fixed order, so results are bitwise the same for any number of threads.  A pair potential with a cutoff runs on
full neighbour rows in :mod:`kernels.domain` (on one process or on many MPI ranks); one without a cutoff (Coulomb,
Riesz) has no list: :func:`drive_all_pairs` takes each gradient from the all-pairs term (:mod:`kernels.all_pairs`,
every pair, each particle's terms in increasing partner id) and the same stages.  The half Verlet rows of
:mod:`kernels.neighbours` serve the minimiser's system mode (:mod:`kernels.system_minimiser`) and
:func:`pair_terms`.

Templates call free names bound at specialisation: ``integrator_drift``, ``integrator_kick``, ``particle_factors``
(a method's ``system_stages``), ``pair_energy``, ``pair_gradient_factor`` (a system's ``pair``) and the helpers of
:data:`ALL_PAIRS_HELPERS`.
"""

from __future__ import annotations

import functools
import types

import numpy as np
import numba
from numba import njit, prange

from . import neighbours as nb
from .all_pairs import ROW_CHUNKS, compiled_all_pairs, pair_bindings
from .caches import kernel_cache_directory
from .compile import KERNEL_FLAGS
from .systems import system_definition
from .errors import InvalidInput
from .integrators import KERNEL_METHODS
from .lanes import bind_template, body_kinetic_energy, constraint_errors_into
from .source_hash import SOURCE_HASH
from .status import NON_FINITE, OK, VI_STEP_INFEASIBLE

MODES = ("ensemble", "system")
#: automatic choice: one member of at least this many bodies with a finite cutoff runs system-parallel
SYSTEM_PARALLEL_MIN_BODIES = 1000
#: rows of the driver's ``info`` output
STATUS, FAILED_STEP, REBUILDS, CAPACITY = range(4)
#: the revision of this mode's sums, which a store run in it records (ensemble-mode runs step each member by the
#: all-pairs lane function and are not concerned): 1, the pair passes over x-slabs of cells; 2, over blocks of
#: equal pair counts (:func:`kernels.neighbours.balanced_blocks`), which add each particle's terms in another order;
#: 3, each particle gathering its terms from a full row in increasing partner id, the sums over particles by id in
#: one binary tree, the bath's heat added per particle between samples (:mod:`kernels.domain`: the same bits on
#: any number of ranks and threads)
SYSTEM_MODE_REVISION = 3
#: the same for the system mode on a GPU (:mod:`kernels.gpu_system`, whose stores say ``device = "cuda"``): 1, each
#: particle's terms in the order of its partners' ids, the sums over particles by id in chunks of 64
GPU_SYSTEM_MODE_REVISION = 1
#: the same for a pair potential without a cutoff, on either device (:mod:`kernels.all_pairs`): 1, each particle's
#: terms over every partner in increasing id, the sums over particles by id (the CPU's in order, the GPU's in chunks
#: of 64)
ALL_PAIRS_REVISION = 1
#: columns of the per-particle factors a method's ``particle_factors`` stage may fill once per call (langevin: e^{−γh}
#: and its spread; brownian: h/ζ and its spread) for its drift stage to read
PARTICLE_FACTORS = 2


def advance_range_template(first, stop, q, q_next, omega, grad, half_h_over_mass, h, margin, reference, kick, drift,
                           step, coef, mass_diag, factors, ids, heat):
    """The per-body stages of bodies first … stop − 1 between two gradients.

    ``kick``: the last stage of step k (vi: second half kick of eq. (30)), q ← q_{k+1}, tracking the smallest
    margin 1 − ‖a_i‖² of the step and whether a NaN or inf appeared in q or ω.  ``drift``: then the first stage of
    step k + 1 (vi: half kick and drift, eqs. (29)–(30)), its margins, and the largest displacement² since the last
    list build (m²).  Each body's stages only read its own rows and its (complete) gradient.  Returns (the smallest
    margin, NaN if a non-finite value appeared; the largest displacement²; with ``HEAT``, the heat the drifts' bath
    gave, J, summed over the bodies in storage order, else 0).  The stages also get what the stochastic methods
    need: the global index ``step`` of the drift's step, the coefficients (the bath rides in their last rows),
    masses, the per-particle factors the method computed once per call (``particle_factors``), original ids (which
    key each particle's noise) and the step's heat per stored particle, each particle writing its own entry."""
    smallest = 1.0
    poison = 0.0
    moved = 0.0
    exchanged = 0.0
    for i in range(first, stop):
        if kick:
            integrator_kick(q_next, omega, grad, half_h_over_mass, q, i, coef, mass_diag, ids, heat)  # noqa: F821
            smallest = min(smallest, margin[i])
            for k in range(3):
                poison += q[i, k, 0] * 0.0 + omega[i, k, 0] * 0.0  # NaN iff some entry is NaN or inf
        if drift:
            margin[i] = integrator_drift(q, omega, grad, half_h_over_mass, h, q_next, i, step, coef,  # noqa: F821
                                         mass_diag, factors, ids, heat)
            moved = max(moved, nb.displacement_squared(q_next, reference, i))
            if HEAT:  # noqa: F821 (bound at specialisation)
                exchanged += heat[i]
    return (smallest if poison == poison else np.nan), moved, exchanged


@njit(**KERNEL_FLAGS)
def step_outcome(block_margin, block_moved, block_heat, blocks):
    """The step's status, largest displacement² (m²) and heat (J) from the first ``blocks`` blocks' (or chunks')
    smallest margins, displacements² and heats: VI_STEP_INFEASIBLE if some margin is < 0, NON_FINITE if one is NaN,
    else OK (the codes and precedence of the ensemble driver); the heats added in block order."""
    code = OK
    largest = 0.0
    exchanged = 0.0
    for x in range(blocks):
        largest = max(largest, block_moved[x])
        exchanged += block_heat[x]
        if block_margin[x] < 0.0:
            code = VI_STEP_INFEASIBLE
        elif block_margin[x] != block_margin[x] and code == OK:
            code = NON_FINITE
    return code, largest, exchanged


def chunk_pass_template(q, q_next, omega, grad, half_h_over_mass, h, margin, reference, kick, drift, chunk_margin,
                        chunk_moved, chunk_heat, step, coef, mass_diag, factors, ids, heat):
    """The all-pairs driver's stages (:func:`advance_range_template`, ``kick`` and ``drift``) of every body, between
    two complete gradients, over the chunks of consecutive bodies that ``chunk_margin`` counts, in parallel; the
    step's outcome by :func:`step_outcome` (the chunks' heats added in chunk order: the chunks are fixed by n, not by
    the threads)."""
    n = q.shape[0]
    chunks = chunk_margin.shape[0]
    for c in prange(chunks):
        chunk_margin[c], chunk_moved[c], chunk_heat[c] = advance_range(  # noqa: F821
            c * n // chunks, (c + 1) * n // chunks, q, q_next, omega, grad, half_h_over_mass, h, margin, reference,
            kick, drift, step, coef, mass_diag, factors, ids, heat)
    return step_outcome(chunk_margin, chunk_moved, chunk_heat, chunks)


def bonded_gradients_template(q, coef, ids, slot, out):
    """Add each stored particle's bonded terms (bonds, angles: the system's ``bonded_gradient``) to its row of ∂V/∂q
    (J), in parallel: each particle gathers its own, at one configuration q, and adds them to its own row once, so
    the bits do not depend on the threads.  ``slot``: each original id's storage index."""
    for s in prange(q.shape[0]):
        g0, g1, g2 = bonded_gradient(q, coef, slot, ids[s], s, 0)  # noqa: F821 (bound: the system's)
        out[s, 0, 0] += g0
        out[s, 1, 0] += g1
        out[s, 2, 0] += g2


def bonded_energies_template(q, coef, ids, slot, out):
    """Add each stored particle's share of its bonds' and angles' energy (J) to out[s], in parallel."""
    for s in prange(q.shape[0]):
        out[s] += bonded_energy(q, coef, slot, ids[s], s, 0)  # noqa: F821 (bound: the system's)


#: the bonded passes by bound name
BONDED_TEMPLATES = {"bonded_gradients": bonded_gradients_template, "bonded_energies": bonded_energies_template}


def list_terms_template(q, coef, ids, slot, neighbours, counts, block_start, out):
    """Every pair's terms from the half rows (both colours of blocks), then, for a system with bonds, each particle's
    bonded terms: ∂V/∂q or the per-particle energies (J), as bound."""
    both_colours(q, coef, ids, neighbours, counts, block_start, out)  # noqa: F821
    if BONDED:  # noqa: F821
        bonded_pass(q, coef, ids, slot, out)  # noqa: F821


def list_energies_template(q, coef, ids, lists, out):
    """The per-particle energies e_i = ½ Σ_j φ(r_ij²) (J) from the neighbour list's half rows, with their bonded shares
    (``ids``: the stored particles' original ids, which the pair functions take)."""
    pair_energies(q, coef, ids, lists[nb.BY_ID], lists[nb.NEIGHBOURS], lists[nb.COUNTS], lists[nb.BLOCK_START], out)  # noqa: F821


def record_template(sample, q, omega, mass_diag, ids, coef, terms, per_particle, by_id, scratch,
                    save_state, q_out, omega_out, energy, temperature, unit_error, tangency_error, exchanged, heat_out):
    """Diagnostics of one saved sample: E = T + V (J), kinetic temperature T/n (J), constraint errors, the heat
    the bath gave so far (``exchanged``, J); q and ω in the caller's particle order when ``save_state``.  Sums run
    over original indices, and each particle's pair energy (``particle_energies`` of what its pair term needs,
    ``terms``: the neighbour list, or the all-pairs term's scratch) adds its terms in the order the term fixes, so
    none depends on the thread count."""
    n = q.shape[0]
    particle_energies(q, coef, ids, terms, per_particle)  # noqa: F821 (bound: the driver's pair term)
    for s in range(n):
        by_id[0, ids[s]] = body_kinetic_energy(q, omega, mass_diag, s, 0)
        by_id[1, ids[s]] = per_particle[s]
    kinetic = 0.0
    potential = 0.0
    for i in range(n):
        kinetic += by_id[0, i]
        potential += by_id[1, i]
    heat_out[sample] = exchanged
    constraint_errors_into(q, omega, scratch[0], scratch[1])
    energy[sample] = kinetic + potential
    temperature[sample] = kinetic / n
    unit_error[sample] = scratch[0, 0]
    tangency_error[sample] = scratch[1, 0]
    if save_state:
        in_callers_order(ids, q, q_out[sample])
        in_callers_order(ids, omega, omega_out[sample])


@njit(**KERNEL_FLAGS)
def in_callers_order(ids, stored, into):
    """A per-particle array in storage order (n, 3, 1) into ``into`` (n, 3) in the caller's order: into[ids[s]] =
    stored[s]."""
    for s in range(stored.shape[0]):
        for k in range(3):
            into[ids[s], k] = stored[s, k, 0]


def per_call_factors_template(coef, h, mass_diag, first):
    """h/(2M_ii) (s/kg, (n, 1)) and the method's per-particle factors (``particle_factors``, (n, PARTICLE_FACTORS))
    of the ids first … first + n − 1 (mass_diag: theirs, row by row), once per call: what the stages would otherwise
    compute every step.  ``particle_factors`` takes the row and the id apart: a per-particle parameter (a type's
    friction) is the id's, the masses and factors are the rows' (a rank of :mod:`kernels.domain` holds ids from
    ``first`` on)."""
    n = mass_diag.shape[0]
    half_h_over_mass = np.empty((n, 1))
    factors = np.zeros((n, PARTICLE_FACTORS))
    for i in range(n):
        half_h_over_mass[i, 0] = 0.5 * h / mass_diag[i, 0]
        particle_factors(coef, h, mass_diag, i, first + i, factors)  # noqa: F821 (bound at specialisation)
    return half_h_over_mass, factors


@njit(parallel=True, error_model="numpy", nogil=True)
def gather_particles(order, q, omega, mass_diag, half_h_over_mass, margin, factors, ids, q_into, omega_into,
                     mass_into, half_into, margin_into, factors_into, ids_into):
    """a_into[s] = a[order[s]] for each per-particle array (q, ω, masses, h/2M, margins, the method's factors, ids):
    one parallel loop per list build.  (The arrays come one by one: unpacked from tuples inside the parallel
    function, the writes were lost with Numba 0.68.1.)"""
    for s in prange(q.shape[0]):
        source = order[s]
        q_into[s] = q[source]
        omega_into[s] = omega[source]
        mass_into[s] = mass_diag[source]
        half_into[s] = half_h_over_mass[source]
        margin_into[s] = margin[source]
        factors_into[s] = factors[source]
        ids_into[s] = ids[source]


def sort_and_rebuild_template(particles, spare, list_range, per_axis, lists):
    """Put the particles (q, ω, masses, h/2M, margins, the method's factors, original ids) in cell order, gathered
    into the arrays of ``spare``, and build the half rows there (see :mod:`kernels.neighbours`).  Returns (lists,
    the particles' arrays now, the spare ones)."""
    order = nb.sort_by_cell(particles[0], particles[6], per_axis, lists)
    gather_particles(order, *particles, *spare)
    nb.storage_slots(spare[6], lists[nb.BY_ID])
    return nb.rebuild(spare[0], list_range, per_axis, lists), spare, particles


def first_lists_template(particles, spare, cutoff, skin, capacity):
    """A run's first list build (range r_c + skin, m; rows of ``capacity`` to start with): the grid, the particles
    put in cell order (:func:`sort_and_rebuild_template`).  Returns (lists, the particles' arrays now, the spare ones,
    cells per axis)."""
    per_axis = nb.grid_cells_per_axis(particles[0].shape[0], cutoff + skin)
    lists, particles, spare = sort_and_rebuild(particles, spare, cutoff + skin, per_axis,  # noqa: F821
                                               nb.allocate(particles[0].shape[0], per_axis, capacity))
    return lists, particles, spare, per_axis


def relist_template(particles, spare, lists, cutoff, skin, adaptive, per_axis, steps_since_build):
    """A rebuild during a run: with ``adaptive``, the skin (m) first set by :func:`~kernels.neighbours.automatic_skin`
    from the last list's life (``steps_since_build`` steps) and the grid reallocated if its cells per axis change;
    then the particles re-sorted and the rows rebuilt (:func:`sort_and_rebuild_template`).  Returns (lists, the
    particles' arrays now, the spare ones, the skin, cells per axis)."""
    if adaptive:
        skin = nb.automatic_skin(skin, steps_since_build, cutoff)
        cells = nb.grid_cells_per_axis(particles[0].shape[0], cutoff + skin)
        if cells != per_axis:
            per_axis = cells
            lists = nb.allocate(particles[0].shape[0], per_axis, lists[nb.NEIGHBOURS].shape[1] - 1)
    lists, particles, spare = sort_and_rebuild(particles, spare, cutoff + skin, per_axis, lists)  # noqa: F821
    return lists, particles, spare, skin, per_axis


@functools.cache
def cached_sort_and_rebuild():
    """:func:`sort_and_rebuild_template` jitted once for every system and method, and cached on disk under the
    kernels' source hash (a stale copy is never replayed): as a plain function each process that compiled a
    system-parallel driver compiled it again with its sort and list build (12 s a process at the suite's -O1)."""
    kernel_cache_directory()  # refused before Numba loads anything from a cache another user could write
    name = f"sort_and_rebuild__{SOURCE_HASH}"
    return njit(cache=True, **KERNEL_FLAGS)(bind_template(sort_and_rebuild_template, name, {}))


def drive_all_pairs(q_start, omega_start, mass_start, coef, h, n_steps, save_every, save_state, q_out, omega_out,
                    energy, temperature, unit_error, tangency_error, q_end, omega_end, info, step_offset, heat_start,
                    heat_out, heat_end):
    """The system mode for a pair potential without a cutoff (the twin of the list driver,
    :func:`kernels.domain.run_decomposed`): each gradient is the all-pairs term's
    (:mod:`kernels.all_pairs`: every row in parallel, each particle's terms in increasing partner id), then every
    body's stages run in parallel over fixed chunks (:func:`chunk_pass_template`).  No list, no skin, no rebuild: the
    particles stay in the caller's order (ids = 0 … n − 1), and ``info`` gets [status, failed step (−1 if none), 0
    builds, 0 capacity].  The same arguments and outputs otherwise (the list's range, capacity and skin left out)."""
    n = q_start.shape[0]
    half_h_over_mass, factors = per_call_factors(coef, h, mass_start, 0)  # noqa: F821
    q_next, omega, mass_diag = q_start.copy(), omega_start.copy(), mass_start
    q = q_start.copy()
    margin = np.ones(n)
    ids = np.arange(n)
    reference = np.zeros((n, 3))  # the stages' displacements from it are not needed: nothing is rebuilt
    grad = np.empty_like(q_start)
    columns = np.empty((3, n))
    per_particle = np.empty(n)
    by_id = np.empty((2, n))
    heat = np.zeros(n)
    exchanged = heat_start
    scratch = np.empty((2, 1))
    chunks = min(n, ROW_CHUNKS)
    chunk_margin, chunk_moved, chunk_heat = np.empty(chunks), np.empty(chunks), np.zeros(chunks)
    # the passes' flags are run-time values: Numba compiles a function once for every literal argument it is given
    no = n_steps < 0
    yes = not no
    system_coefficients_at(coef, step_offset * h)  # noqa: F821 (a protocol's values at the forces' time)
    all_pairs_gradient(q, coef, ids, columns, grad)  # noqa: F821
    record_system_sample(0, q, omega, mass_diag, ids, coef, columns, per_particle, by_id, scratch,  # noqa: F821
                         save_state, q_out, omega_out, energy, temperature, unit_error, tangency_error, exchanged,
                         heat_out)
    status, _, step_heat = advance_chunks(q, q_next, omega, grad, half_h_over_mass, h, margin, reference,  # noqa: F821
                                          no, n_steps > 0, chunk_margin, chunk_moved, chunk_heat, step_offset, coef,
                                          mass_diag, factors, ids, heat)
    failed = -1
    for k in range(1, n_steps + 1):
        if HEAT:  # noqa: F821
            exchanged += step_heat
        system_coefficients_at(coef, (step_offset + k) * h)  # noqa: F821
        all_pairs_gradient(q_next, coef, ids, columns, grad)  # noqa: F821
        saved = k % save_every == 0
        status, _, step_heat = advance_chunks(q, q_next, omega, grad, half_h_over_mass, h, margin,  # noqa: F821
                                              reference, yes, k < n_steps and not saved, chunk_margin, chunk_moved,
                                              chunk_heat, step_offset + k, coef, mass_diag, factors, ids, heat)
        if status != OK:
            failed = k
            break
        if saved:
            record_system_sample(k // save_every, q, omega, mass_diag, ids, coef, columns,  # noqa: F821
                                 per_particle, by_id, scratch, save_state, q_out, omega_out, energy, temperature,
                                 unit_error, tangency_error, exchanged, heat_out)
            if k < n_steps:
                status, _, step_heat = advance_chunks(q, q_next, omega, grad, half_h_over_mass, h,  # noqa: F821
                                                      margin, reference, no, yes, chunk_margin, chunk_moved,
                                                      chunk_heat, step_offset + k, coef, mass_diag, factors, ids,
                                                      heat)
    q_end[:] = q[:, :, 0]
    omega_end[:] = omega[:, :, 0]
    heat_end[0] = exchanged
    info[STATUS] = status
    info[FAILED_STEP] = failed
    info[REBUILDS] = 0
    info[CAPACITY] = 0


#: (bound name, template, parallel) in the order they are bound, each may call those before it: the all-pairs
#: driver's (:func:`drive_all_pairs`), which binds the all-pairs term's kernels first
#: (:func:`kernels.all_pairs.compiled_all_pairs`: its ``particle_energies`` among them)
ALL_PAIRS_HELPERS = (("per_call_factors", per_call_factors_template, False),
                     ("advance_range", advance_range_template, False), ("advance_chunks", chunk_pass_template, True),
                     ("record_system_sample", record_template, False))
#: the per-body stages' loop and a slab's pair rows, inlined into the parallel loops at every optimisation level
#: (called as functions there, they would get each array argument as a dozen machine words, per slab); the driver's
#: other helpers are functions, each compiled once instead of at each of its call sites
INLINED = {**KERNEL_FLAGS, "inline": "always"}


def system_mode_revision(device: str | None, all_pairs: bool = False) -> int:
    """The revision of the system mode's sums on ``device`` ("cuda", or the CPU's for None and "cpu") that a store
    run in that mode records: the neighbour lists', or with ``all_pairs`` (a pair potential without a cutoff) the
    all-pairs term's."""
    if all_pairs:
        return ALL_PAIRS_REVISION
    return GPU_SYSTEM_MODE_REVISION if device == "cuda" else SYSTEM_MODE_REVISION


def cutoff_of(system, params) -> float:
    """The pair cutoff r_c (m) of a one-member system, inf if it has none (or no pair potential)."""
    pair = system.definition.pair
    return np.inf if pair is None else float(pair.cutoff(params))


def sums_all_pairs(system, n: int) -> bool:
    """Whether the system mode steps ``system`` (one member of n bodies) by the all-pairs term
    (:mod:`kernels.all_pairs`): a pair potential without a cutoff."""
    return system.definition.pair is not None and not np.isfinite(cutoff_of(system, system.broadcast(1, n)))


def choose_mode(mode, system, method: str, implicit: bool, members: int, n: int, shadows: bool = False) -> str:
    """"ensemble" or "system" for :func:`kernels.integrate`; None chooses: one member with at least
    SYSTEM_PARALLEL_MIN_BODIES bodies, a pair potential, a method with per-body stages and no Benettin ``shadows``
    (carried by the ensemble kernels only) → system, a minimiser's as the dynamics' (:mod:`kernels.system_minimiser`).
    A pair potential with a cutoff runs there on neighbour lists, one without on the all-pairs term
    (:mod:`kernels.all_pairs`: n(n − 1) pair terms a gradient, on every core);
    below SYSTEM_PARALLEL_MIN_BODIES both run in the ensemble mode unless asked (the all-pairs lane function, half
    the pair terms on one core, is as fast there on two cores and needs no parallel start-up)."""
    if mode is not None and mode not in MODES:
        raise InvalidInput("mode", f"unknown mode {mode!r}; allowed: {', '.join(MODES)} or None (automatic)")
    if mode == "ensemble":
        return mode
    reasons = []
    if members != 1:
        reasons.append(f"it runs one member (got {members})")
    if system.definition.pair is None:
        reasons.append(f"the system has a short-range pair potential ({system.name} has none)")
    runs = KERNEL_METHODS[method]
    if (runs.system_stages is None and not runs.minimiser) or implicit:
        reasons.append(f"the method has per-body stages (vi with diagonal M, langevin, brownian, fire), not "
                       f"{method!r}" + (" implicit" if implicit else ""))
    if shadows:
        reasons.append("no Benettin shadows are carried (they run in ensemble mode)")
    if mode == "system" and reasons:
        raise InvalidInput("mode", "'system' needs " + "; ".join(reasons))
    if mode is None:
        return "system" if not reasons and n >= SYSTEM_PARALLEL_MIN_BODIES else "ensemble"
    return mode


def run(system, method: str, q, omega, mass_diag, coef, dt: float, n_steps: int, save_every: int,
        keep_state: bool, threads: int, start_step: int, carried: np.ndarray) -> dict:
    """Integrate one member (q, ω: (1, n, 3)) of a pair potential without a cutoff system-parallel on ``threads``
    threads (:func:`drive_all_pairs`), continuing after the run's step ``start_step``; returns the arrays of a
    :class:`~kernels.integration.Trajectory` (member axis of 1) plus ``temperature`` (J), ``neighbour_rebuilds``
    (0) and ``exchanged`` (1, samples), the heat a stochastic method's bath gave since the run began (J), continued
    from and returned in the last column of ``carried`` (1, C).  A cutoff's neighbour lists run in
    :func:`kernels.domain.run`."""
    n = q.shape[1]
    out = empty_outputs(n, n_steps, save_every, keep_state)
    info = np.zeros(4, np.int64)
    heat_end = carried[0, -1:].copy()
    q_final = np.empty((1, n, 3))
    omega_final = np.empty((1, n, 3))
    previous = numba.get_num_threads()
    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    try:
        compiled_all_pairs_kernel(method, system.name)(
            np.ascontiguousarray(q[0, :, :, np.newaxis]), np.ascontiguousarray(omega[0, :, :, np.newaxis]),
            np.ascontiguousarray(mass_diag[0, :, np.newaxis]), np.ascontiguousarray(coef.T), float(dt), n_steps,
            save_every, keep_state, out["q"][0], out["omega"][0], out["energy"][0], out["temperature"][0],
            out["unit_error"][0], out["tangency_error"][0], q_final[0], omega_final[0], info, int(start_step),
            float(heat_end[0]), out["exchanged"][0], heat_end)
    finally:
        numba.set_num_threads(previous)
    return finished(out, method, info, q_final, omega_final, heat_end, carried)


def check_no_skin(skin: float | str | None) -> None:
    """Refuse a Verlet skin for a pair potential without a cutoff (summed over every pair: no list); "auto" and None
    (what a run of any pair system may leave as it is) pass."""
    if not (skin is None or (isinstance(skin, str) and skin == "auto")):
        raise InvalidInput("skin", f"the pair potential has no cutoff: every pair is summed, with no neighbour list "
                           f"and no skin (got {skin!r}; leave it out or \"auto\")")


def pair_term_ranges(system, n: int, skin: float | str | None) -> tuple[bool, float, float, bool]:
    """(whether every pair is summed, r_c (m), the first skin (m), whether the skin is automatic) of a system-mode
    run of ``system``'s n bodies with the ``skin`` :func:`run` takes: a pair potential without a cutoff refuses a
    skin (:func:`check_no_skin`; inf, 0 and False then), one with a cutoff has its list's ranges
    (:func:`list_ranges`).  What every system-mode runner asks first."""
    if sums_all_pairs(system, n):
        check_no_skin(skin)
        return True, np.inf, 0.0, False
    return (False,) + list_ranges(system, n, skin)


def list_ranges(system, n: int, skin: float | str | None) -> tuple[float, float, bool]:
    """(r_c (m), the first skin (m), whether the skin is automatic) of a run of ``system``'s n bodies with the
    ``skin`` :func:`run` takes, checked."""
    params = system.broadcast(1, n)
    cutoff = cutoff_of(system, params)
    adaptive = skin is None or (isinstance(skin, str) and skin == "auto")
    if adaptive:
        skin = float(system.definition.pair.default_skin(params))
    if not (isinstance(skin, (int, float, np.floating)) and np.isfinite(skin) and skin > 0):
        raise InvalidInput("skin", f"must be \"auto\" or a finite number > 0 (m, chord), got {skin!r}")
    return cutoff, float(skin), adaptive


def empty_outputs(n: int, n_steps: int, save_every: int, keep_state: bool) -> dict:
    """The sample arrays a system-mode run fills (NaN until written): energy, temperature, the constraint errors
    and exchanged (1, samples), q and ω (1, samples or 0, n, 3), neighbour_skin (1,)."""
    samples = n_steps // save_every + 1
    state_samples = samples if keep_state else 0
    out = {name: np.full((1, samples), np.nan) for name in ("energy", "temperature", "unit_error", "tangency_error",
                                                            "exchanged")}
    out["q"] = np.full((1, state_samples, n, 3), np.nan)
    out["omega"] = np.full((1, state_samples, n, 3), np.nan)
    out["neighbour_skin"] = np.full(1, np.nan)
    return out


def finished(out: dict, method: str, info: np.ndarray, q_final, omega_final, heat_end, carried) -> dict:
    """``out`` with a system-mode run's outcome (``info``: [status, failed step, builds, capacity]), its end state
    (NaN where it failed) and the bath's heat carried on (``heat_end`` (1,) into the last column of ``carried``)."""
    n = q_final.shape[1]
    ok = info[STATUS] == OK
    if KERNEL_METHODS[method].heat:
        carried[0, -1] = heat_end[0]
    out.update(
        status=info[STATUS:STATUS + 1].copy(), failed_step=info[FAILED_STEP:FAILED_STEP + 1].copy(),
        solver_iterations=np.zeros(1, np.int64),
        q_final=(q_final if ok else np.full((1, n, 3), np.nan)),
        omega_final=(omega_final if ok else np.full((1, n, 3), np.nan)),
        neighbour_rebuilds=info[REBUILDS:REBUILDS + 1].copy())
    return out


def pair_terms(system, q, skin: float | None = None, threads: int | None = None) -> tuple[np.ndarray, np.ndarray, int]:
    """∂V/∂q (n, 3) (J) and the per-particle energies e_i = ½ Σ_j φ(r_ij) (n,) (J, Σ e_i = V) of one
    configuration q (n, 3) from a freshly built cell list and Verlet list; also the row capacity.
    For tests and analysis: the integrator keeps its list across steps instead."""
    q = np.ascontiguousarray(np.asarray(q, dtype=np.float64)[:, :, np.newaxis])
    n = q.shape[0]
    params = system.broadcast(1, n)
    cutoff = cutoff_of(system, params)
    if not np.isfinite(cutoff):
        raise InvalidInput("cutoff", "the neighbour list needs a finite cutoff")
    skin = float(system.definition.pair.default_skin(params)) if skin is None else float(skin)
    coef = np.ascontiguousarray(system.definition.coefficients(params, n).T)
    kernel = compiled_pair_kernels(system.name)
    previous = numba.get_num_threads()
    if threads is not None:
        numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    try:
        lists, order, q = nb.fresh_lists(q, np.arange(n), cutoff + skin)
        rows = (lists[nb.NEIGHBOURS], lists[nb.COUNTS], lists[nb.BLOCK_START])
        gradient = np.empty_like(q)
        energies = np.empty(n)
        kernel.pair_gradient(q, coef, order, lists[nb.BY_ID], *rows, gradient)
        kernel.pair_energies(q, coef, order, lists[nb.BY_ID], *rows, energies)
    finally:
        numba.set_num_threads(previous)
    gradient[order] = gradient.copy()
    energies[order] = energies.copy()
    return gradient[:, :, 0], energies, lists[nb.NEIGHBOURS].shape[1] - 1


@functools.cache
def compiled_pair_kernels(system: str) -> types.SimpleNamespace:
    """The half-list pair kernels of ``system``'s pair potential (:mod:`kernels.neighbours`): one block's rows
    (``block_gradient``, ``block_energies``), one colour of blocks in parallel (``gradient_colour_pass``,
    ``energies_colour_pass``) and both colours (``pair_gradient``, ``pair_energies``)."""
    bindings = pair_bindings(system)
    tag = f"{system}__{SOURCE_HASH}"

    def bound(template, name, parallel=False, **more):
        flags = {"parallel": True, **KERNEL_FLAGS} if parallel else INLINED
        bindings[name] = njit(**flags)(bind_template(template, f"{name}__{tag}", {**bindings, **more}))

    for quantity in ("gradient", "energies"):
        bound(getattr(nb, f"block_{quantity}_template"), f"block_{quantity}")
        bound(nb.colour_pass_template, f"{quantity}_colour_pass", parallel=True, block_pairs=bindings[f"block_{quantity}"])
        bound(nb.both_colours_template, f"{quantity}_colours", colour_pass=bindings[f"{quantity}_colour_pass"])
        bonded = {"gradient": "bonded_gradients", "energies": "bonded_energies"}[quantity]
        bound(BONDED_TEMPLATES[bonded], bonded, parallel=True)
        bound(list_terms_template, f"pair_{quantity}", both_colours=bindings[f"{quantity}_colours"],
              bonded_pass=bindings[bonded])
    return types.SimpleNamespace(**{name: bindings[name] for name in (
        "block_gradient", "block_energies", "gradient_colour_pass", "energies_colour_pass", "pair_gradient",
        "pair_energies", "bonded_gradients", "BONDED")})


def bound_driver(method: str, system: str, kind: str, driver, helpers: tuple, bindings: dict):
    """``driver`` jitted (cached on disk) for ``method``'s per-body stages and ``system``, with ``helpers`` ((bound
    name, template, parallel), bound in turn) and the pair term's kernels ``bindings``; ``kind`` names it."""
    kernel_cache_directory()  # refused before Numba loads anything from a cache another user could write
    tag = f"{method}__{system}__{kind}__{SOURCE_HASH}"
    bindings = {**bindings, "HEAT": KERNEL_METHODS[method].heat,
                "system_coefficients_at": system_definition(system).coefficients_at}
    if KERNEL_METHODS[method].system_stages is not None:  # a minimiser's driver composes its stages itself
        drift, kick, factors = KERNEL_METHODS[method].system_stages
        bindings.update(integrator_drift=drift, integrator_kick=kick, particle_factors=factors)
    for name, template, parallel in helpers:
        flags = {"parallel": True, **KERNEL_FLAGS} if parallel else (INLINED if name == "advance_range" else KERNEL_FLAGS)
        bindings[name] = njit(**flags)(bind_template(template, f"{template.__name__}__{tag}", bindings))
    return njit(cache=True, **KERNEL_FLAGS)(bind_template(driver, f"{driver.__name__}__{tag}", bindings))


@functools.cache
def compiled_all_pairs_kernel(method: str, system: str):
    """The jitted all-pairs system driver (:func:`drive_all_pairs`) of ``method`` for ``system`` (a pair potential
    without a cutoff)."""
    return bound_driver(method, system, "all_pairs", drive_all_pairs, ALL_PAIRS_HELPERS,
                        vars(compiled_all_pairs(system)))
