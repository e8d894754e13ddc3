"""Neighbour search on S² for short-range pair potentials: a cell list and half Verlet lists, O(N) per step.

Positions are unit vectors and distances are chords in the embedding space R³, so the search runs on
a uniform grid of cubic cells over [−1, 1]³ whose side is at least r_list = r_c + skin: every pair
closer than r_list lies in the same or in adjacent cells (27 at most).  Only the cells that the sphere
crosses are ever occupied; the empty ones cost 4 bytes each (the grid is capped at 16 cells per
particle) and are counted slab by slab, in parallel, at each build.

**Storage order.**  Callers store particles cell by cell, cells in (x, y, z) order (:func:`sort_by_cell`,
redone at every build), and carry ``ids``, the original index of each stored particle.  Within a cell the
particles are in increasing original index, so the order is a function of the positions alone: the same
at a build whatever the storage order before it (a run resumed from a checkpoint builds the list an
uninterrupted run builds at the same positions).  An x-slab of cells (all cells of one x index) is one
run of storage indices.

**Half rows.**  Each pair within r_list at the build appears once, in the row of its member stored first
(Newton's third law: its force is added to both): particle i's row holds the j > i of its own cell and of
the 13 cells after it in (x, y, z) order among its 26 neighbours, in scan order.  A row's partners lie in
i's x-slab or the next one.  The list stays valid while no particle has moved more than skin/2 (chord)
since the build (triangle inequality: a pair now within r_c was within r_c + skin at the build); pairs
beyond r_c add an exact 0.

**Blocks.**  The pair passes run over blocks of consecutive storage indices (:func:`balanced_blocks`, redone at
every build), each carrying the same number of pairs except where a block's rows would reach beyond the next
block: the largest power of two of them, up to MAX_BLOCKS, whose heaviest block stays within BLOCK_IMBALANCE of the
mean.  The count and the cuts are functions of the build's rows alone, never of the thread count; a power of two of
blocks, half of each colour, splits evenly over 2, 4, 8, 16 … threads (the x-slabs of cells, the unit before, left
36 slabs of a colour to 16 threads at 10⁵ particles: the heaviest thread carried 1.4× the mean).

**Bits.**  Forces are scattered: i's row adds f·(q_i − q_j) to i and subtracts it from j.  The blocks run
in two colours, even then odd: a block's rows write only its own particles and the next block's, so
the blocks of one colour run in parallel (``numba.prange``) with no two threads writing one particle,
each block in storage order.  The order in which any particle's terms are added is therefore fixed by
the list, not by the threads: results are bitwise the same for any number of threads, and, the list
being a function of the build's positions, for any restart at a build.  Against the full rows that
each particle gathered before (and the all-pairs lane function), the same terms are summed in another
order: they agree to round-off (tests/test_md.py).

Arrays use the lane layout of :mod:`kernels.lanes` with a single lane: q is (n, 3, 1).
Templates call the free names ``pair_energy`` and ``pair_gradient_factor`` (a system's
:class:`~kernels.systems.base.PairPotential`), bound by :mod:`kernels.compile`.
"""

import numpy as np
from numba import njit, prange

#: at most this many grid cells per particle (the grid is O(n^{3/2}) cells otherwise)
MAX_CELLS_PER_PARTICLE = 16
#: half-row capacity: the expected count within r_list times this, plus NEIGHBOUR_SLACK; rows that
#: overflow are detected by the build, which is then repeated with a larger capacity
NEIGHBOUR_HEADROOM = 1.5
NEIGHBOUR_SLACK = 12
#: chunks of the parallel maxima (displacements) and scans (rows); fixed, so no result depends on the thread count
REDUCTION_CHUNKS = 64
#: at most this many blocks of the pair passes (a power of two, see :func:`balanced_blocks`), and at most this
#: fraction more pairs in the heaviest block than in the mean
MAX_BLOCKS = 1024
BLOCK_IMBALANCE = 0.1
#: positions in the tuple of :func:`allocate`
(STORAGE_CELL, CELL_START, ORDER, NEIGHBOURS, COUNTS, REFERENCE, SLAB_START, BY_ID, PAIRS_BEFORE, FURTHEST,
 BLOCK_START) = range(11)

_parallel = njit(parallel=True, error_model="numpy", nogil=True)
_serial = njit(error_model="numpy", nogil=True)


#: a list build (sort, permutation, rows) costs this many pair passes (the gradient of one step) at the same
#: range: 3.4, 3.3 and 3.9 at 10⁴, 10⁵ and 10⁶ LJ particles, ρ* = 0.8, 2 threads (interleaved timings on one
#: machine, 2026-11-27); the automatic skin's cost model uses it
BUILD_COST_IN_GRADIENTS = 3.5
#: the automatic skin stays within [SKIN_LIMITS[0] r_c, SKIN_LIMITS[1] r_c]
SKIN_LIMITS = (0.05, 1.0)


@_serial
def grid_cells_per_axis(n, list_range):
    """Cells per axis of the grid over [−1, 1]³: side 2/L ≥ ``list_range`` (m), at most 16 n cells."""
    per_axis = max(1, int(np.floor(2.0 / list_range)))
    cap = max(1, int(np.floor((MAX_CELLS_PER_PARTICLE * n) ** (1.0 / 3.0))))
    return min(per_axis, cap)


@_serial
def automatic_skin(skin, steps_since_build, cutoff, build_cost=BUILD_COST_IN_GRADIENTS):
    """The skin (m) for the next list, from the last one's life: it lasted ``steps_since_build`` steps with skin
    ``skin``, so the fastest particle moves δ ≈ skin / (2 · steps) a step.  A step costs about (r_c + s)² per
    pair pass plus (r_c + s)² β per build (β = ``build_cost``, gradients a build costs: by default these half
    lists' BUILD_COST_IN_GRADIENTS), a build every s/(2δ) steps: (r_c + s)² (1 + 2βδ/s), least at
    s = (−c + √(c² + 8 r_c c))/4 with c = 2βδ.  Within SKIN_LIMITS."""
    c = build_cost * skin / steps_since_build
    best = (-c + np.sqrt(c * c + 8.0 * cutoff * c)) / 4.0
    return min(max(best, SKIN_LIMITS[0] * cutoff), SKIN_LIMITS[1] * cutoff)


def initial_capacity(n: int, list_range: float) -> int:
    """Half-row capacity for n particles spread uniformly over the unit sphere (area 4π): the expected
    number within a chord r_list is about n r_list²/4, half of them in a half row."""
    return int(min(n, NEIGHBOUR_HEADROOM * n * list_range**2 / 8.0 + NEIGHBOUR_SLACK))


@_serial
def allocate(n, per_axis, capacity):
    """The arrays of one neighbour list of n particles (indexed by STORAGE_CELL … BLOCK_START): each stored
    particle's cell, the cells' first storage indices (L³ + 1), the build's permutation, the half rows
    (n, capacity + 1: the last column takes the candidates of a full row), their lengths, the build's
    positions (n, 3), the slabs' first storage indices (L + 1), each original index's storage index, the
    pairs of the rows before each row (n + 1), the furthest storage index the rows up to each row reach, and
    the blocks' first storage indices (:func:`balanced_blocks`; set by :func:`rebuild`).
    4(L³ + 8n + n·capacity) + 32n bytes."""
    return (np.empty(n, np.int32), np.zeros(per_axis**3 + 1, np.int32), np.empty(n, np.int32),
            np.empty((n, capacity + 1), np.int32), np.zeros(n, np.int32), np.empty((n, 3)),
            np.zeros(per_axis + 1, np.int32), np.empty(n, np.int32), np.zeros(n + 1, np.int64),
            np.empty(n, np.int32), np.zeros(2, np.int32))


@_parallel
def storage_slots(ids, slot):
    """slot[ids[s]] = s: each original index's storage index, for the stored particles' original indices ``ids``
    (after a sort, into the lists' BY_ID, which the bonded terms read their partners' rows from)."""
    for s in prange(ids.shape[0]):
        slot[ids[s]] = s


@_serial
def cell_index(x, y, z, per_axis):
    """The cell of the point (x, y, z) of [−1, 1]³ in a grid of per_axis³ cells, numbered in (x, y, z) order (the
    CPU's builds and the GPU's, :mod:`kernels.gpu_neighbours`)."""
    scale = 0.5 * per_axis
    index = 0
    for coordinate in (x, y, z):
        # clamp: ‖q_i‖ = 1 only to round-off, and the cell [1, 1 + side) does not exist
        index = index * per_axis + min(max(int((coordinate + 1.0) * scale), 0), per_axis - 1)
    return index


@_parallel
def _assign_cells(q, ids, per_axis, cell, by_id):
    """Each stored particle's cell, and each original index's storage index (before the sort)."""
    for i in prange(q.shape[0]):
        by_id[ids[i]] = i
        cell[i] = cell_index(q[i, 0, 0], q[i, 1, 0], q[i, 2, 0], per_axis)


@_parallel
def _sort_slabs(per_axis, cell, slab_start, slab_particles, cell_start, order, storage_cell):
    """Counting sort of each slab's particles (given in increasing original index) into its L² cells,
    slabs in parallel: ``order`` gets the cell order, ``cell_start`` the cells' first positions."""
    per_slab = per_axis * per_axis
    for x in prange(per_axis):
        base = x * per_slab
        for c in range(base, base + per_slab):
            cell_start[c] = 0
        for s in range(slab_start[x], slab_start[x + 1]):
            cell_start[cell[slab_particles[s]]] += 1
        cursor = slab_start[x]
        for c in range(base, base + per_slab):
            count = cell_start[c]
            cell_start[c] = cursor
            cursor += count
        for s in range(slab_start[x], slab_start[x + 1]):  # cell_start[c] is c's fill cursor, then c's end
            i = slab_particles[s]
            order[cell_start[cell[i]]] = i
            storage_cell[cell_start[cell[i]]] = cell[i]
            cell_start[cell[i]] += 1
        for c in range(base + per_slab - 1, base, -1):
            cell_start[c] = cell_start[c - 1]
        cell_start[base] = slab_start[x]


@_serial
def sort_by_cell(q, ids, per_axis, lists):
    """The storage order that puts particles cell by cell, cells in (x, y, z) order and each cell's
    particles in increasing original index (``ids``: each stored particle's).  Callers permute every
    per-particle array with it, including ``ids``; ``lists`` then describes the permuted storage (its
    cells and slabs) for :func:`rebuild`.  Two O(n) serial passes (the slab counts and the particles' distribution
    to their slabs) plus O(L³ + n) spread over the slabs."""
    storage_cell, cell_start, order, by_id, slab_start = (lists[STORAGE_CELL], lists[CELL_START], lists[ORDER],
                                                          lists[BY_ID], lists[SLAB_START])
    n = q.shape[0]
    per_slab = per_axis * per_axis
    cell = np.empty(n, np.int32)
    _assign_cells(q, ids, per_axis, cell, by_id)
    slab_start[:] = 0
    for i in range(n):
        slab_start[cell[i] // per_slab + 1] += 1
    for x in range(per_axis):
        slab_start[x + 1] += slab_start[x]
    cursor = slab_start[:-1].copy()
    slab_particles = np.empty(n, np.int32)
    for k in range(n):  # in increasing original index: the cells keep that order
        i = by_id[k]
        x = cell[i] // per_slab
        slab_particles[cursor[x]] = i
        cursor[x] += 1
    _sort_slabs(per_axis, cell, slab_start, slab_particles, cell_start, order, storage_cell)
    cell_start[per_axis**3] = n
    return order


@_parallel
def _build_rows(q, list_range_squared, per_axis, storage_cell, cell_start, neighbours, counts, reference):
    """Half rows in storage order: for each i, the j within r_list among the later particles of its own
    cell and the particles of the 13 neighbouring cells after it.  Those are five runs of storage indices:
    the rest of i's cell with the cell above it in z (x, y, z…z+1), the three cells (x, y+1, z−1…z+1) and
    the three of each of the columns (x+1, y−1…y+1).  Candidates are appended branch-free (the slot is
    always written, the count advances only for a neighbour)."""
    n = q.shape[0]
    capacity = neighbours.shape[1] - 1
    for i in prange(n):
        cell = storage_cell[i]
        iz = cell % per_axis
        iy = (cell // per_axis) % per_axis
        ix = cell // (per_axis * per_axis)
        z_low = max(iz - 1, 0)
        z_high = min(iz + 1, per_axis - 1)
        x0, x1, x2 = q[i, 0, 0], q[i, 1, 0], q[i, 2, 0]
        count = 0
        for run in range(5):
            if run == 0:
                first, stop = i + 1, cell_start[cell - iz + z_high + 1]
            else:
                x, y = (ix, iy + 1) if run == 1 else (ix + 1, iy + run - 3)
                if x >= per_axis or y < 0 or y >= per_axis:
                    continue
                column = (x * per_axis + y) * per_axis
                first, stop = cell_start[column + z_low], cell_start[column + z_high + 1]
            for j in range(first, stop):
                d0 = x0 - q[j, 0, 0]
                d1 = x1 - q[j, 1, 0]
                d2 = x2 - q[j, 2, 0]
                neighbours[i, min(count, capacity)] = j
                count += d0 * d0 + d1 * d1 + d2 * d2 < list_range_squared
        counts[i] = count
        for k in range(3):
            reference[i, k] = q[i, k, 0]


@_parallel
def _scan_rows(neighbours, counts, chunk_totals, pairs_before, furthest):
    """pairs_before[i] = Σ_{i' < i} counts[i'] (pairs_before has n + 1 entries) and furthest[i] = the largest storage
    index a row i' ≤ i writes (its last partner: a row's partners increase; i' itself for an empty row), by
    REDUCTION_CHUNKS chunks in parallel, a serial scan of their totals between the two passes.  Returns the longest
    row.  Rows longer than the capacity are read up to it (the build is then redone)."""
    n = counts.shape[0]
    chunks = chunk_totals.shape[1]
    stored = neighbours.shape[1]
    for c in prange(chunks):
        pairs = 0
        reach = 0
        longest = 0
        for i in range(c * n // chunks, (c + 1) * n // chunks):
            pairs += counts[i]
            reach = max(reach, neighbours[i, min(counts[i], stored) - 1] if counts[i] > 0 else i)
            longest = max(longest, counts[i])
        chunk_totals[0, c], chunk_totals[1, c], chunk_totals[2, c] = pairs, reach, longest
    pairs = 0
    reach = 0
    longest = 0
    for c in range(chunks):  # each chunk's pairs before it and the furthest reach before it
        chunk_pairs, chunk_reach = chunk_totals[0, c], chunk_totals[1, c]
        chunk_totals[0, c], chunk_totals[1, c] = pairs, reach
        pairs += chunk_pairs
        reach = max(reach, chunk_reach)
        longest = max(longest, chunk_totals[2, c])
    pairs_before[n] = pairs
    for c in prange(chunks):
        pairs = chunk_totals[0, c]
        reach = chunk_totals[1, c]
        for i in range(c * n // chunks, (c + 1) * n // chunks):
            pairs_before[i] = pairs
            pairs += counts[i]
            reach = max(reach, neighbours[i, min(counts[i], stored) - 1] if counts[i] > 0 else i)
            furthest[i] = reach
    return longest


@_serial
def block_cuts(pairs_before, furthest, blocks):
    """The first storage indices (blocks + 1) of ``blocks`` runs of rows with the same number of pairs, W/blocks
    (W pairs in all), except where a block's rows reach further: block k starts at the first row with at least
    ⌊k W / blocks⌋ pairs before it, or, if later, just after the furthest partner of the rows before block k − 1, so
    that every block's rows write only its own particles and the next block's."""
    n = furthest.shape[0]
    total = pairs_before[n]
    start = np.empty(blocks + 1, np.int32)
    start[0] = 0
    for k in range(1, blocks):
        start[k] = np.searchsorted(pairs_before, k * total // blocks)
        if k >= 2 and start[k - 1] > 0:
            start[k] = max(start[k], furthest[start[k - 1] - 1] + 1)
    start[blocks] = n
    return start


@_serial
def balanced_blocks(pairs_before, furthest):
    """The blocks of the pair passes (their first storage indices, blocks + 1): :func:`block_cuts` of the largest
    power of two of blocks, up to MAX_BLOCKS, whose heaviest block carries at most BLOCK_IMBALANCE more pairs than
    the mean (where the rows reach further than a block, the cuts move and the blocks grow unequal), else 2.  A
    function of the rows alone, O(MAX_BLOCKS log n) for pairs_before and furthest from :func:`_scan_rows`."""
    total = pairs_before[furthest.shape[0]]
    blocks = MAX_BLOCKS
    while blocks > 2:
        start = block_cuts(pairs_before, furthest, blocks)
        heaviest = 0
        for k in range(blocks):
            heaviest = max(heaviest, pairs_before[start[k + 1]] - pairs_before[start[k]])
        if heaviest * blocks <= (1.0 + BLOCK_IMBALANCE) * total:
            return start
        blocks //= 2
    return block_cuts(pairs_before, furthest, 2)


def thread_pairs(lists, threads: int) -> np.ndarray:
    """The pairs each of ``threads`` threads carries in each colour pass of the lists' blocks, (2, threads): a
    colour's blocks shared out as Numba's static schedule of a parallel loop does, in runs of consecutive blocks as
    even as the count allows.  What the balance test and benchmarks/md.py's model read the partition by."""
    per_block = np.add.reduceat(lists[COUNTS].astype(np.int64), lists[BLOCK_START][:-1])
    return np.array([[part.sum() for part in np.array_split(per_block[colour::2], threads)] for colour in (0, 1)])


@_serial
def rebuild(q, list_range, per_axis, lists):
    """Build every half row at positions q, which must be in the storage order :func:`sort_by_cell` just
    gave (every per-particle array permuted by it), and the blocks of the pair passes (:func:`balanced_blocks`);
    grows the rows' capacity (new arrays) until no row overflows.  Returns the lists (the same arrays unless they
    grew, and new blocks)."""
    n = q.shape[0]
    neighbours, counts = lists[NEIGHBOURS], lists[COUNTS]
    pairs_before, furthest = lists[PAIRS_BEFORE], lists[FURTHEST]
    chunk_totals = np.empty((3, REDUCTION_CHUNKS), np.int64)
    while True:
        _build_rows(q, list_range * list_range, per_axis, lists[STORAGE_CELL], lists[CELL_START], neighbours, counts,
                    lists[REFERENCE])
        longest = _scan_rows(neighbours, counts, chunk_totals, pairs_before, furthest)
        if longest < neighbours.shape[1]:
            return (lists[STORAGE_CELL], lists[CELL_START], lists[ORDER], neighbours, counts, lists[REFERENCE],
                    lists[SLAB_START], lists[BY_ID], pairs_before, furthest, balanced_blocks(pairs_before, furthest))
        neighbours = np.empty((n, longest + NEIGHBOUR_SLACK + 1), np.int32)


def fresh_lists(q, ids, list_range):
    """A neighbour list built from nothing for the particles ``ids`` at positions q (n, 3, 1): allocated, the
    particles put in storage order (:func:`sort_by_cell`) and the rows and blocks built (:func:`rebuild`).
    Returns the lists, the storage order (storage position k holds q[order[k]]) and the positions in storage
    order.  For one configuration (tests, benchmarks, :func:`kernels.system_parallel.pair_terms`); a run keeps
    its lists across steps and rebuilds them in place."""
    n = q.shape[0]
    per_axis = grid_cells_per_axis(n, list_range)
    lists = allocate(n, per_axis, initial_capacity(n, list_range))
    order = sort_by_cell(q, ids, per_axis, lists)
    stored = np.ascontiguousarray(q[order])
    storage_slots(ids[order], lists[BY_ID])
    return rebuild(stored, list_range, per_axis, lists), order, stored


@_serial
def displacement_squared(q, reference, i):
    """‖q_i − q_i(at the last build)‖² (m²)."""
    d0 = q[i, 0, 0] - reference[i, 0]
    d1 = q[i, 1, 0] - reference[i, 1]
    d2 = q[i, 2, 0] - reference[i, 2]
    return d0 * d0 + d1 * d1 + d2 * d2


@_serial
def beyond_half_skin(largest_displacement_squared, skin):
    """The rebuild criterion: the largest displacement² (m²) since the last build exceeds (skin/2)²."""
    return largest_displacement_squared > 0.25 * skin * skin


@_parallel
def max_displacement_squared(q, reference, chunk_max):
    """max_i ‖q_i − q_i(at the last build)‖² (m²)."""
    n = q.shape[0]
    chunks = chunk_max.shape[0]
    for c in prange(chunks):
        largest = 0.0
        for i in range(c * n // chunks, (c + 1) * n // chunks):
            largest = max(largest, displacement_squared(q, reference, i))
        chunk_max[c] = largest
    result = 0.0
    for c in range(chunks):
        result = max(result, chunk_max[c])
    return result


@_serial
def needs_rebuild(q, reference, skin, chunk_max):
    """True when some particle has moved more than skin/2 (chord, m) since the last build."""
    return beyond_half_skin(max_displacement_squared(q, reference, chunk_max), skin)


def block_gradient_template(q, coef, ids, neighbours, counts, block_start, x, out):
    """Add block x's pair terms to ∂V/∂q (J): for each pair (i, j) of a row, t = g(r_ij²)(q_i − q_j) is added
    to out_i and subtracted from out_j (out_j = −t is what j's own gather of the pair would add, bit for bit)."""
    for i in range(block_start[x], block_start[x + 1]):
        x0, x1, x2 = q[i, 0, 0], q[i, 1, 0], q[i, 2, 0]
        g0, g1, g2 = out[i, 0, 0], out[i, 1, 0], out[i, 2, 0]
        for s in range(counts[i]):
            j = neighbours[i, s]
            d0 = x0 - q[j, 0, 0]
            d1 = x1 - q[j, 1, 0]
            d2 = x2 - q[j, 2, 0]
            f = pair_gradient_factor(d0 * d0 + d1 * d1 + d2 * d2, coef, 0, ids[i], ids[j])  # noqa: F821 (bound at specialisation)
            t0, t1, t2 = f * d0, f * d1, f * d2
            g0 += t0
            g1 += t1
            g2 += t2
            out[j, 0, 0] -= t0
            out[j, 1, 0] -= t1
            out[j, 2, 0] -= t2
        out[i, 0, 0], out[i, 1, 0], out[i, 2, 0] = g0, g1, g2


def block_energies_template(q, coef, ids, neighbours, counts, block_start, x, out):
    """Add block x's pair energies to the per-particle energies e_i = ½ Σ_j φ(r_ij²) (J; V = Σ_i e_i)."""
    for i in range(block_start[x], block_start[x + 1]):
        e = out[i]
        for s in range(counts[i]):
            j = neighbours[i, s]
            d0 = q[i, 0, 0] - q[j, 0, 0]
            d1 = q[i, 1, 0] - q[j, 1, 0]
            d2 = q[i, 2, 0] - q[j, 2, 0]
            half = 0.5 * pair_energy(d0 * d0 + d1 * d1 + d2 * d2, coef, 0, ids[i], ids[j])  # noqa: F821
            e += half
            out[j] += half
        out[i] = e


@_serial
def clear_blocks(block_start, x, out):
    """Zero ``out`` (per particle, any trailing shape) on block x and on block x + 1, which x's rows also write:
    what an even block does before its rows."""
    stop = block_start[min(x + 2, block_start.shape[0] - 1)]
    for i in range(block_start[x], stop):
        out[i] = 0.0


def colour_pass_template(q, coef, ids, neighbours, counts, block_start, colour, out):
    """One colour of blocks in parallel: even blocks (``colour`` 0) clear their own and the next block's rows of
    ``out`` and add their pairs; then odd blocks (1) add theirs.  Call with 0, then 1."""
    for half in prange((block_start.shape[0] - 1) // 2):
        x = 2 * half + colour
        if colour == 0:
            clear_blocks(block_start, x, out)
        block_pairs(q, coef, ids, neighbours, counts, block_start, x, out)  # noqa: F821


def both_colours_template(q, coef, ids, neighbours, counts, block_start, out):
    """Every pair's terms (∂V/∂q, or the per-particle energies, J) from the half rows: the even blocks (clearing what
    they write), then the odd ones."""
    for colour in range(2):
        colour_pass(q, coef, ids, neighbours, counts, block_start, colour, out)  # noqa: F821
