"""Neighbour search on S² for short-range pair potentials: a cell list and Verlet lists, O(N) per step.

Positions are unit vectors and distances are chords in the embedding space R³, so the search runs on
a uniform grid of cubic cells over [−1, 1]³ whose side is at least r_list = r_c + skin: every pair
closer than r_list lies in the same or in adjacent cells (27 at most).  Only the cells that the sphere
crosses are ever occupied; the empty ones cost 4 bytes each (the grid is capped at 16 cells per
particle) and one pass of the counting sort per rebuild.

The Verlet list holds, for every particle, all particles within r_list when it was built (a full
list: each pair appears twice).  It stays valid while no particle has moved more than skin/2 (chord)
since then (triangle inequality: a pair now within r_c was within r_c + skin at the build).

Memory order and sum order are kept apart.  Callers store particles cell by cell
(:func:`sort_by_cell`, redone at every rebuild) so that neighbours sit close in memory and each
(x, y) column of cells is one run of storage indices for the row build to scan, and carry
``ids``, the original index of each stored particle.  Rows are sorted by ``ids``, and forces and
energies are gathered: particle i sums over its own row in increasing original index.  So the
parallel loops (``numba.prange``) write disjoint rows and need no atomics; the result is bitwise the
same for any number of threads, any storage order and any rebuild schedule (pairs beyond r_c add an
exact 0); and it equals the all-pairs lane function of the same system bit for bit (the same pair
terms, summed in the same order).

Arrays use the lane layout of :mod:`kernels.lanes` with a single lane: q is (n, 3, 1).
Templates call the free names ``pair_energy`` and ``pair_gradient_factor`` (a system's
:class:`~kernels.systems.base.PairPotential`), bound by :mod:`kernels.compile`.
"""

import numpy as np
from numba import njit, prange

from .lanes import chord

#: at most this many grid cells per particle (the grid is O(n^{3/2}) cells otherwise)
MAX_CELLS_PER_PARTICLE = 16
#: Verlet-row capacity: the expected count within r_list times this, plus NEIGHBOUR_SLACK; rows that
#: overflow are detected by the build, which is then repeated with a larger capacity
NEIGHBOUR_HEADROOM = 1.5
NEIGHBOUR_SLACK = 16
#: chunks of the parallel loops that keep per-chunk scratch (the row build) or reduce (maxima); fixed,
#: so no result depends on the thread count
REDUCTION_CHUNKS = 64

_parallel = njit(parallel=True, error_model="numpy", nogil=True)
_serial = njit(error_model="numpy", nogil=True)


def grid_cells_per_axis(n: int, list_range: float) -> int:
    """Cells per axis of the grid over [−1, 1]³: side 2/L ≥ ``list_range`` (m), at most 16 n cells."""
    per_axis = max(1, int(np.floor(2.0 / list_range)))
    cap = max(1, int(np.floor((MAX_CELLS_PER_PARTICLE * n) ** (1.0 / 3.0))))
    return min(per_axis, cap)


def initial_capacity(n: int, list_range: float) -> int:
    """Verlet-row capacity for n particles spread uniformly over the unit sphere (area 4π): the
    expected number within a chord r_list is about n r_list²/4."""
    return int(min(n, NEIGHBOUR_HEADROOM * n * list_range**2 / 4.0 + NEIGHBOUR_SLACK))


@_serial
def bin_particles(q, per_axis, particle_cell, cell_start, cell_particles):
    """Counting sort of the particles into grid cells: the particles of cell c are
    ``cell_particles[cell_start[c]:cell_start[c + 1]]``, in increasing index.  O(n + cells)."""
    n = q.shape[0]
    scale = 0.5 * per_axis
    cell_start[:] = 0
    for i in range(n):
        cell = 0
        for k in range(3):
            # clamp: ‖q_i‖ = 1 only to round-off, and the cell [1, 1 + side) does not exist
            index = min(max(int((q[i, k, 0] + 1.0) * scale), 0), per_axis - 1)
            cell = cell * per_axis + index
        particle_cell[i] = cell
        cell_start[cell + 1] += 1
    for c in range(cell_start.shape[0] - 1):
        cell_start[c + 1] += cell_start[c]
    for i in range(n):  # cell_start[c] is the fill cursor of cell c, then shifted back by one cell
        cell = particle_cell[i]
        cell_particles[cell_start[cell]] = i
        cell_start[cell] += 1
    for c in range(cell_start.shape[0] - 1, 0, -1):
        cell_start[c] = cell_start[c - 1]
    cell_start[0] = 0


@_parallel
def build_rows(q, ids, list_range_squared, per_axis, particle_cell, cell_start, neighbours, counts, reference):
    """Verlet rows: every j ≠ i with chord² < r_list², sorted by ``ids[j]`` (the particle's original
    index), from the 27 cells around i's cell.  The particles must be stored in cell order (as
    :func:`sort_by_cell` leaves them), so that the three cells (x, y, z−1 … z+1) of each of the nine
    (x, y) columns are one contiguous run of storage indices: the scan reads positions in sequence,
    with no cell-membership lookup.  Candidates are appended branch-free (the slot is always
    written, the count advances only for a neighbour) to a scratch buffer (their ids are looked up
    after the scan, for the kept ones only: 10 % off the build at N = 10⁵), and each goes to its
    rank among the row's keys (the count of smaller ones; ids are unique), a branch-free count that
    LLVM vectorises: a build at N = 10⁵ took 51 instead of 70 ms of CPU with insertion sort.

    Rows longer than the capacity are counted but truncated; returns the longest row so that the
    caller can rebuild with a larger capacity.  Also stores the positions of this build (``reference``).
    """
    n = q.shape[0]
    capacity = neighbours.shape[1]
    for chunk in prange(REDUCTION_CHUNKS):
        keys = np.empty(capacity, np.int64)
        slots = np.empty(capacity + 1, np.int32)  # slot ``capacity`` takes the candidates of a full row
        for i in range(chunk * n // REDUCTION_CHUNKS, (chunk + 1) * n // REDUCTION_CHUNKS):
            cell = particle_cell[i]
            iz = cell % per_axis
            iy = (cell // per_axis) % per_axis
            ix = cell // (per_axis * per_axis)
            z_low = max(iz - 1, 0)
            z_high = min(iz + 1, per_axis - 1)
            x0, x1, x2 = q[i, 0, 0], q[i, 1, 0], q[i, 2, 0]
            count = 0
            for x in range(max(ix - 1, 0), min(ix + 2, per_axis)):
                for y in range(max(iy - 1, 0), min(iy + 2, per_axis)):
                    column = (x * per_axis + y) * per_axis
                    for j in range(cell_start[column + z_low], cell_start[column + z_high + 1]):
                        d0 = x0 - q[j, 0, 0]
                        d1 = x1 - q[j, 1, 0]
                        d2 = x2 - q[j, 2, 0]
                        slot = min(count, capacity)
                        slots[slot] = j
                        count += (d0 * d0 + d1 * d1 + d2 * d2 < list_range_squared) & (j != i)
            counts[i] = count
            kept = min(count, capacity)
            for a in range(kept):  # keys of the kept candidates only: no ids[j] load for the ~2/3 rejected
                keys[a] = ids[slots[a]]
            for a in range(kept):
                key = keys[a]
                rank = 0
                for b in range(kept):
                    rank += keys[b] < key
                neighbours[i, rank] = slots[a]
            for k in range(3):
                reference[i, k] = q[i, k, 0]
    longest = 0
    for i in range(n):
        longest = max(longest, counts[i])
    return longest


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
def sort_by_cell(q, per_axis, lists):
    """The storage order that puts particles cell by cell (``lists`` as from :func:`allocate`), so that
    the particles of a cell, and neighbours generally, sit close together in memory.  Callers permute
    every per-particle array with it, including ``ids``, the original indices."""
    particle_cell, cell_start, cell_particles = lists[0], lists[1], lists[2]
    bin_particles(q, per_axis, particle_cell, cell_start, cell_particles)
    return cell_particles.copy()


@_serial
def needs_rebuild(q, reference, skin, chunk_max):
    """True when some particle has moved more than skin/2 (chord, m) since the last build."""
    return beyond_half_skin(max_displacement_squared(q, reference, chunk_max), skin)


@_serial
def allocate(n, per_axis, capacity):
    """The arrays of one neighbour list of n particles: (particle_cell, cell_start, cell_particles,
    neighbours (n, capacity), counts, reference positions (n, 3), chunk_max).  4(L³ + 3n + n·capacity)
    + 24n bytes: about 0.3 KB per particle at r_c = 2.5σ, skin 0.3σ, ρ* = 0.8."""
    return (np.empty(n, np.int32), np.zeros(per_axis**3 + 1, np.int32), np.empty(n, np.int32),
            np.empty((n, capacity), np.int32), np.zeros(n, np.int32), np.empty((n, 3)),
            np.empty(REDUCTION_CHUNKS))


@_serial
def rebuild(q, ids, list_range, per_axis, lists):
    """Bin the particles and build every Verlet row at positions q, which must be in cell order (just
    permuted by :func:`sort_by_cell`); grows the rows' capacity (new arrays) until no row overflows.
    Returns the lists (the same arrays unless they grew)."""
    particle_cell, cell_start, cell_particles, neighbours, counts, reference, chunk_max = lists
    n = q.shape[0]
    bin_particles(q, per_axis, particle_cell, cell_start, cell_particles)
    for i in range(1, n):
        if particle_cell[i] < particle_cell[i - 1]:
            raise ValueError("neighbour rows need the particles in cell order: permute them by sort_by_cell first")
    while True:
        longest = build_rows(q, ids, list_range * list_range, per_axis, particle_cell, cell_start, neighbours, counts,
                             reference)
        if longest <= neighbours.shape[1]:
            return particle_cell, cell_start, cell_particles, neighbours, counts, reference, chunk_max
        neighbours = np.empty((n, longest + NEIGHBOUR_SLACK), np.int32)


def gradient_template(q, coef, neighbours, counts, out):
    """∂V/∂q_i = Σ_{j in row i} g(r_ij²)(q_i − q_j) (J), gathered per particle in row order.

    One scalar loop per row: a first pass storing the pair terms so that LLVM could vectorise it
    (gathering q_j), then summing them in row order, gave the same bits but took 24 ms against 14 ms
    for this loop at N = 10⁵ on one thread (CPU time, interleaved runs)."""
    for i in prange(q.shape[0]):
        x0, x1, x2 = q[i, 0, 0], q[i, 1, 0], q[i, 2, 0]
        g0 = 0.0
        g1 = 0.0
        g2 = 0.0
        for s in range(counts[i]):
            j = neighbours[i, s]
            d0 = x0 - q[j, 0, 0]
            d1 = x1 - q[j, 1, 0]
            d2 = x2 - q[j, 2, 0]
            f = pair_gradient_factor(d0 * d0 + d1 * d1 + d2 * d2, coef, 0)  # noqa: F821 (bound at specialisation)
            g0 += f * d0
            g1 += f * d1
            g2 += f * d2
        out[i, 0, 0] = g0
        out[i, 1, 0] = g1
        out[i, 2, 0] = g2


def energies_template(q, coef, neighbours, counts, out):
    """Per-particle energies e_i = ½ Σ_{j in row i} φ(r_ij²) (J); V = Σ_i e_i."""
    for i in prange(q.shape[0]):
        e = 0.0
        for s in range(counts[i]):
            j = neighbours[i, s]
            d0, d1, d2, r2 = chord(q, i, j, 0)
            e += pair_energy(r2, coef, 0)  # noqa: F821
        out[i] = 0.5 * e


#: (bound name, template) of the pair kernels, specialised per system by :mod:`kernels.compile`
PAIR_TEMPLATES = (("pair_gradient", gradient_template), ("pair_energies", energies_template))
