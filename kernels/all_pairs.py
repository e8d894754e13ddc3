"""Pair potentials without a cutoff (Coulomb, the Riesz s-energy, a model's ``pair_potential`` with cutoff = inf):
every pair's terms, O(N²) per evaluation, for one large system on all cores (the system mode).

For each particle i, by its own thread and in increasing partner id j:

    ∂V/∂q_i = Σ_{j≠i} g(r_ij²)(q_i − q_j),        e_i = ½ Σ_{j≠i} φ(r_ij²)   (V = Σ_i e_i),

with φ = ``pair_energy`` and g = φ'(r)/r = ``pair_gradient_factor`` (a system's
:class:`~kernels.systems.base.PairPotential`, bound at specialisation as :mod:`kernels.neighbours` binds them).
Full rows, not half pairs: each pair's terms are computed twice (n(n − 1) pair terms per gradient), but a particle's
sum is a function of the positions alone, in one fixed order, so the results are bitwise the same for any number of
threads; the GPU (:mod:`kernels.gpu_system`) adds the same terms in the same order (tiles of positions in shared
memory), to round-off (its fused multiply-adds).

**Tiles.**  The positions are first copied into three contiguous component rows ``columns`` (3, n), so that the
partners of a tile (PARTNER_TILE of them) are read as unit-stride runs.  Within a tile, the pair factors g(r_ij²)
come first, in a loop with no sum (its iterations independent, so the SIMD lanes may take several j at once:
vsqrtpd, vdivpd), then the sum over the tile in increasing j, which alone fixes the order of the additions.  The
rows run in parallel (``numba.prange``) over ROW_CHUNKS chunks of consecutive particles, each with its tile's factors
in a scratch row of its own; a row's result does not depend on the chunk it falls in.

Arrays use the lane layout of :mod:`kernels.lanes` with a single lane, as the system mode's do: q and ∂V/∂q are
(n, 3, 1), coef (rows, 1).  A fast multipole or tree method (O(N) or O(N log N), to a stated tolerance) would take the
place of :func:`gradient_template` and :func:`energies_template` with the same arguments and results; none is built.
"""

import functools
import types

import numba
import numpy as np
from numba import float64, njit, prange

from .caches import kernel_cache_directory
from .lanes import bind_template
from .source_hash import SOURCE_HASH
from .systems import system_definition
from .systems.base import no_bonded_gradient

#: the flags of every kernel here: NumPy's division (no check of a zero divisor: the pair j = i divides by 0 and is
#: left out), no GIL
FLAGS = {"error_model": "numpy", "nogil": True}

#: partners per tile: 3 × 256 positions and 256 factors, 8 KiB, well inside a core's L1 cache
PARTNER_TILE = 256
#: partners per tile on a GPU: one per thread of a block (:data:`kernels.gpu.THREADS_PER_BLOCK`, which every launch
#: takes; 3 KiB of shared memory)
DEVICE_TILE = 128
#: pair terms a core computes in a second, what a plan's estimate of a step's time takes (Coulomb's gradient by
#: benchmarks/all_pairs.py on the 2-core development machine: 8.4×10⁸ at N = 10⁴ and 8.1×10⁸ at 10⁵ on its 2 idle
#: cores, 2.9×10⁸ with another job on them; the estimate takes the idle rate a core)
PAIR_TERMS_PER_CORE_SECOND = 4e8
#: chunks of rows the parallel loops split the particles into (at most one a particle): the threads share them
#: statically, so more chunks than threads keep the heaviest thread close to the mean
ROW_CHUNKS = 256


def columns_template(q, columns):
    """columns[k, i] = q[i, k, 0]: the positions (m) as three contiguous component rows, in parallel."""
    for i in prange(q.shape[0]):
        for k in range(3):
            columns[k, i] = q[i, k, 0]


def row_gradient_template(columns, coef, ids, i, factors):
    """∂V/∂q_i = Σ_{j≠i} g(r_ij²)(q_i − q_j) (J), j increasing, a tile of PARTNER_TILE partners at a time: their
    factors g into ``factors`` (a scratch row of PARTNER_TILE), then their terms added in order.  The pair j = i
    (r = 0, g infinite) is computed with the tile and left out of the sum."""
    n = columns.shape[1]
    x0, x1, x2 = columns[0, i], columns[1, i], columns[2, i]
    g0 = g1 = g2 = 0.0
    for first in range(0, n, PARTNER_TILE):
        stop = min(first + PARTNER_TILE, n)
        for j in range(first, stop):
            d0 = x0 - columns[0, j]
            d1 = x1 - columns[1, j]
            d2 = x2 - columns[2, j]
            factors[j - first] = pair_gradient_factor(d0 * d0 + d1 * d1 + d2 * d2, coef, 0, ids[i], ids[j])  # noqa: F821 (bound)
        for j in range(first, stop):
            if j != i:
                f = factors[j - first]
                g0 += f * (x0 - columns[0, j])
                g1 += f * (x1 - columns[1, j])
                g2 += f * (x2 - columns[2, j])
    return g0, g1, g2


def row_energy_template(columns, coef, ids, i):
    """e_i = ½ Σ_{j≠i} φ(r_ij²) (J), j increasing."""
    x0, x1, x2 = columns[0, i], columns[1, i], columns[2, i]
    e = 0.0
    for j in range(columns.shape[1]):
        if j != i:
            d0 = x0 - columns[0, j]
            d1 = x1 - columns[1, j]
            d2 = x2 - columns[2, j]
            e += 0.5 * pair_energy(d0 * d0 + d1 * d1 + d2 * d2, coef, 0, ids[i], ids[j])  # noqa: F821 (bound)
    return e


def gradient_template(q, coef, ids, columns, out):
    """∂V/∂q (J) at q (n, 3, 1) into ``out`` (n, 3, 1), every row by :func:`row_gradient_template`, the rows in
    parallel; ``columns`` (3, n): scratch (the positions by component)."""
    n = q.shape[0]
    positions_by_component(q, columns)  # noqa: F821 (bound: columns_template)
    chunks = min(n, ROW_CHUNKS)
    for c in prange(chunks):
        factors = np.empty(PARTNER_TILE)
        for i in range(c * n // chunks, (c + 1) * n // chunks):
            out[i, 0, 0], out[i, 1, 0], out[i, 2, 0] = row_gradient(columns, coef, ids, i, factors)  # noqa: F821
            if BONDED:  # noqa: F821: its bonds and angles (every position is q's: one configuration); slot = ids
                g0, g1, g2 = bonded_gradient(q, coef, ids, ids[i], i, 0)  # noqa: F821
                out[i, 0, 0] += g0
                out[i, 1, 0] += g1
                out[i, 2, 0] += g2


def energies_template(q, coef, ids, columns, out):
    """The per-particle energies e_i = ½ Σ_{j≠i} φ(r_ij²) (J; V = Σ_i e_i) at q (n, 3, 1) into ``out`` (n,), in
    parallel; ``columns`` (3, n): scratch."""
    positions_by_component(q, columns)  # noqa: F821
    for i in prange(q.shape[0]):
        out[i] = row_energy(columns, coef, ids, i)  # noqa: F821
        if BONDED:  # noqa: F821
            out[i] += bonded_energy(q, coef, ids, ids[i], i, 0)  # noqa: F821


def energy_template(q, coef, ids, columns, per_particle):
    """V = Σ_i e_i (J) at q (n, 3, 1), the per-particle energies (into ``per_particle``, n) added by id."""
    particle_energies(q, coef, ids, columns, per_particle)  # noqa: F821 (bound: energies_template)
    total = 0.0
    for i in range(q.shape[0]):
        total += per_particle[i]
    return total


def device_terms_template(stored, coef, energy, out):
    """Particle i's pair terms at positions ``stored`` (n, 3) by thread i of a GPU launch (blocks of DEVICE_TILE
    threads): ∂V/∂q_i (J) into out[i, 0:3], or with ``energy`` e_i = ½ Σ_{j≠i} φ(r_ij²) (J) into out[i, 0].  The
    CPU's terms (:func:`row_gradient_template`, :func:`row_energy_template`) in the same order, j increasing, each
    tile of DEVICE_TILE partners first copied into shared memory by the block's threads, one position each.  Free
    names: ``cuda`` (numba-cuda's module), ``pair_energy``, ``pair_gradient_factor``.  The particles stay in the
    caller's order on the device, so the pair functions get i and the partner's index as the two ids."""
    tile = cuda.shared.array((3, DEVICE_TILE), float64)  # noqa: F821 (bound: numba-cuda's module)
    i = cuda.grid(1)  # noqa: F821
    t = cuda.threadIdx.x  # noqa: F821
    n = stored.shape[0]
    x0 = x1 = x2 = a0 = a1 = a2 = 0.0
    if i < n:
        x0, x1, x2 = stored[i, 0], stored[i, 1], stored[i, 2]
    for first in range(0, n, DEVICE_TILE):
        if first + t < n:
            tile[0, t], tile[1, t], tile[2, t] = stored[first + t, 0], stored[first + t, 1], stored[first + t, 2]
        cuda.syncthreads()  # noqa: F821
        for s in range(min(DEVICE_TILE, n - first)):
            if i < n and first + s != i:
                d0, d1, d2 = x0 - tile[0, s], x1 - tile[1, s], x2 - tile[2, s]
                r2 = d0 * d0 + d1 * d1 + d2 * d2
                if energy:
                    a0 += 0.5 * pair_energy(r2, coef, 0, i, first + s)  # noqa: F821 (bound)
                else:
                    f = pair_gradient_factor(r2, coef, 0, i, first + s)  # noqa: F821 (bound)
                    a0 += f * d0
                    a1 += f * d1
                    a2 += f * d2
        cuda.syncthreads()  # noqa: F821: every thread has read the tile before it is overwritten
    if i < n:
        out[i, 0] = a0
        if not energy:
            out[i, 1], out[i, 2] = a1, a2


#: the GPU's all-pairs passes, each a kernel of its name without ``_template`` (bound by
#: :func:`kernels.gpu_system.kernel_functions`)
DEVICE_TEMPLATES = (device_terms_template,)
#: how each kind of template is jitted: a parallel loop or a plain function (cached on disk: what callers call), or
#: inlined into its caller (a row, which the parallel loop calls n times)
JIT_FLAGS = {"parallel": {**FLAGS, "parallel": True, "cache": True}, "serial": {**FLAGS, "cache": True},
             "inlined": {**FLAGS, "inline": "always"}}
#: (bound name, template, kind of :data:`JIT_FLAGS`) in the order :func:`compiled_all_pairs` binds them: each may
#: call those before it
TEMPLATES = (("positions_by_component", columns_template, "parallel"), ("row_gradient", row_gradient_template, "inlined"),
             ("row_energy", row_energy_template, "inlined"), ("all_pairs_gradient", gradient_template, "parallel"),
             ("particle_energies", energies_template, "parallel"), ("all_pairs_energy", energy_template, "serial"))


def pair_bindings(system: str) -> dict:
    """What the pair term's templates call of ``system``: its pair functions, its bonded terms (bonds, angles) and
    ``BONDED``, whether it has any (a run without them compiles no bonded pass)."""
    pair = system_definition(system).pair
    return {"pair_energy": pair.energy, "pair_gradient_factor": pair.gradient_factor,
            "bonded_gradient": pair.bonded_gradient, "bonded_energy": pair.bonded_energy,
            "BONDED": pair.bonded_gradient is not no_bonded_gradient}


@functools.cache
def compiled_all_pairs(system: str) -> types.SimpleNamespace:
    """The all-pairs kernels of ``system``'s pair potential, jitted (the parallel ones and the total energy cached on
    disk under the kernels' source hash), by bound name: ``all_pairs_gradient(q, coef, columns, out)``,
    ``particle_energies(q, coef, columns, out)`` and ``all_pairs_energy(q, coef, columns, per_particle)`` → V, with
    q and out (n, 3, 1), coef (rows, 1) (the system's coefficients of one member, transposed), columns (3, n) and
    per_particle (n,) scratch; the row functions ``row_gradient`` and ``row_energy``.  What the system mode's
    drivers call (:mod:`kernels.system_parallel`)."""
    kernel_cache_directory()  # refused before Numba loads anything from a cache another user could write
    bindings = pair_bindings(system)
    for name, template, kind in TEMPLATES:
        bindings[name] = njit(**JIT_FLAGS[kind])(bind_template(template, f"{name}__{system}__{SOURCE_HASH}", bindings))
    return types.SimpleNamespace(**{name: bindings[name] for name, _, _ in TEMPLATES})


def pair_terms(system, q, threads: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """∂V/∂q (n, 3) (J) and the per-particle energies e_i = ½ Σ_{j≠i} φ(r_ij²) (n,) (J, Σ e_i = V) of one
    configuration q (n, 3) of ``system`` (one member's parameters), over every pair, on ``threads`` threads (all
    Numba's by default).  For tests, benchmarks and analysis."""
    q = np.ascontiguousarray(np.asarray(q, dtype=np.float64)[:, :, np.newaxis])
    n = q.shape[0]
    coef = np.ascontiguousarray(system.definition.coefficients(system.broadcast(1, n), n).T)
    kernels = compiled_all_pairs(system.name)
    gradient, energies, columns = np.empty_like(q), np.empty(n), np.empty((3, n))
    ids = np.arange(n)  # every pair in the caller's order
    previous = numba.get_num_threads()
    if threads is not None:
        numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    try:
        kernels.all_pairs_gradient(q, coef, ids, columns, gradient)
        kernels.particle_energies(q, coef, ids, columns, energies)
    finally:
        numba.set_num_threads(previous)
    return gradient[:, :, 0], energies
