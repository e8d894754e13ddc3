"""One system-mode member on any number of ranks: domain decomposition of the sphere, every sum in a fixed order.

The CPU's system mode for a pair potential with a cutoff (revision 3 of its sums, see
:data:`kernels.system_parallel.SYSTEM_MODE_REVISION`) runs here, on one process or on R ranks that each own a patch
of the sphere.  What a rank computes never depends on R, on the patches or on the threads:

- **Forces.**  Each owned particle gathers its own pair terms from a *full* Verlet row (every partner within
  r_list = r_c + skin at the last build, owned or ghost) sorted by the partners' original ids, then adds its bonded
  terms (bonds and angles, in the system's order): g_i = Σ_j g(r_ij²)(q_i − q_j) in increasing id j, as the GPU's
  system mode sums (:mod:`kernels.gpu_system`).  Each pair's factor g(r²) is evaluated once, by the member of
  smaller id, and written into both members' entries (:func:`back_rows`; by both members where they sit on two
  ranks: r² and g are symmetric bit for bit).  A partner beyond r_c adds an exact 0, so g_i depends on the
  positions alone, not on which list holds them, when it was built or with which skin: a run is the same bit for
  bit whatever its rebuilds, restarts and decomposition.
- **Stages.**  Each particle's integrator stages (the method's ``system_stages``) read its own rows; its noise is
  keyed by its original id and the step.
- **Global sums.**  The kinetic and potential energy and the bath's heat at a sample are summed over original ids
  by one fixed binary tree (:func:`tree_sums`); a particle's heat is added up step by step in its own accumulator
  (which migrates with it) and enters the total at each sample.  Maxima (displacements, constraint errors) and the
  step's status are order-free.

**Patches.**  The list's grid of cubic cells (side ≥ r_list over [−1, 1]³, :mod:`kernels.neighbours`) numbers its
cells in (x, y, z) order; rank r owns the particles whose cell lies in [cuts[r], cuts[r + 1]) of that order,
contiguous ranges cut at equal particle counts (:func:`balanced_cuts`) and cut again at a rebuild when the most
loaded rank holds more than REBALANCE_BOUND times the mean.  A rank's ghosts are the particles of the cells next to
its own (every pair within r_list lies in neighbouring cells), sent by their owners after each rebuild (ids) and each
step (positions).  Particles migrate to their cell's owner at each rebuild.  At a sample each particle's record goes
to the rank that owns its id range (about N/R ids, cut at multiples of the store's particles per chunk:
:func:`id_cuts`), which sums the tree's leaves it holds and keeps the state of its ids: no rank gathers all N
particles while the run steps.

Communication goes through an ``exchange`` object (:class:`SingleRank` here; the MPI one is
:class:`armillary.ensemble.mpi.MpiExchange`): this module holds the numerics only and knows nothing of MPI.
"""

from __future__ import annotations

import functools
import types

import numba
import numpy as np
from numba import njit, prange

from . import neighbours as nb
from .all_pairs import ROW_CHUNKS, pair_bindings
from .caches import kernel_cache_directory
from .compile import KERNEL_FLAGS
from .errors import InvalidInput
from .integrators import KERNEL_METHODS
from .lanes import bind_template, body_constraint_errors, body_kinetic_energy
from .source_hash import SOURCE_HASH
from .status import NON_FINITE, OK, VI_STEP_INFEASIBLE
from .system_parallel import (INLINED, PARTICLE_FACTORS, advance_range_template, chunk_pass_template, finished,
                              list_ranges, per_call_factors_template)

#: a rebuild (migration, ghosts, full rows sorted by id, where each pair's factor goes) costs this many gradients:
#: 10 at 10⁵ LJ particles, ρ* = 0.8, on one rank of one or two threads (2026-11-29); the automatic skin's cost model
#: (:func:`kernels.neighbours.automatic_skin`) weighs it
BUILD_COST_IN_GRADIENTS = 10.0
#: re-cut the patches at a rebuild when the most loaded rank owns more than this many times the mean
REBALANCE_BOUND = 1.05
#: the columns of a particle's record when it migrates: q_k, q_{k+1}, ω (3 each), mass, h/2M, margin, the method's
#: factors, the heat since the last sample, the original id
RECORD_COLUMNS = 14 + PARTICLE_FACTORS
#: a step's outcomes in the order of the ensemble driver's precedence: the largest over the ranks is the step's
OUTCOMES = (OK, NON_FINITE, VI_STEP_INFEASIBLE)
#: the columns of a particle's record at a sample, sent to its id's owner: id, kinetic and potential energy, heat
#: since the last sample, q, ω
SAMPLE_COLUMNS = 10
# cached on disk (every rank's process would compile them again): :func:`compiled_domain_kernels`, which every run
# calls first, refuses a cache directory another user could write before any of them loads
_serial = njit(error_model="numpy", nogil=True, cache=True)
_parallel = njit(parallel=True, error_model="numpy", nogil=True, cache=True)


class SingleRank:
    """The exchange of a run on one process: every particle is owned here, nothing travels."""

    rank = 0
    size = 1
    id_grain = 1

    def maximum(self, values: np.ndarray) -> np.ndarray:
        """The elementwise maxima of ``values`` over the ranks."""
        return values

    def sum_counts(self, counts: np.ndarray) -> np.ndarray:
        return counts

    def allgather(self, value) -> list:
        return [value]

    def alltoallv(self, blocks: list) -> list:
        """Blocks (one 2-D float64 array per rank) sent; the blocks received from each rank."""
        return blocks

    def halo(self, sends: dict, receive_counts: dict) -> dict:
        """Per neighbour rank, the (k, 3) rows sent to it; per neighbour rank, the rows received from it."""
        return {}


# ----------------------------------------------------------------------------------------------------------- numerics

@_parallel
def cell_keys(points, per_axis, out):
    """out[i] = the cell of the point points[i] (n, 3) in the list's grid of per_axis³ cells over [−1, 1]³, numbered
    in (x, y, z) order."""
    for i in prange(out.shape[0]):
        out[i] = nb.cell_index(points[i, 0], points[i, 1], points[i, 2], per_axis)


@_parallel
def full_rows(q, ids, owned, per_axis, list_range_squared, keys, cell_start, cell_members, neighbours, partner_ids,
              counts):
    """Each owned particle's full row: every other local particle (owned or ghost) within r_list of it, from the
    27 cells around its own, sorted by original id (``partner_ids``: the row's ids, which the insertion compares).
    ``cell_members``: the local particles by cell (cell c's are cell_members[cell_start[c]:cell_start[c + 1]]).  A
    row longer than the capacity is counted, not written: the caller rebuilds with more (the largest count is
    returned)."""
    capacity = neighbours.shape[1]
    longest = 0
    for i in prange(owned):
        key = keys[i]
        cz = key % per_axis
        cy = (key // per_axis) % per_axis
        cx = key // (per_axis * per_axis)
        x0, x1, x2 = q[i, 0, 0], q[i, 1, 0], q[i, 2, 0]
        count = 0
        for ax in range(max(cx - 1, 0), min(cx + 2, per_axis)):
            for ay in range(max(cy - 1, 0), min(cy + 2, per_axis)):
                first = (ax * per_axis + ay) * per_axis
                for t in range(cell_start[first + max(cz - 1, 0)], cell_start[first + min(cz + 2, per_axis)]):
                    j = cell_members[t]
                    d0, d1, d2 = x0 - q[j, 0, 0], x1 - q[j, 1, 0], x2 - q[j, 2, 0]
                    if j != i and d0 * d0 + d1 * d1 + d2 * d2 < list_range_squared:
                        if count < capacity:
                            neighbours[i, count] = j
                            partner_ids[i, count] = ids[j]
                        count += 1
        counts[i] = count
        if count <= capacity:
            sort_row(neighbours, partner_ids, i, count)
    for i in range(owned):
        longest = max(longest, counts[i])
    return longest


@_serial
def sort_row(neighbours, partner_ids, i, count):
    """Row i's first ``count`` entries in increasing partner id, in place: insertion, the fastest measured for rows
    of ~20 (a Shell sort took 1.2× as long at 10⁵ particles)."""
    for s in range(1, count):
        partner, j = partner_ids[i, s], neighbours[i, s]
        t = s
        while t > 0 and partner_ids[i, t - 1] > partner:
            partner_ids[i, t] = partner_ids[i, t - 1]
            neighbours[i, t] = neighbours[i, t - 1]
            t -= 1
        partner_ids[i, t] = partner
        neighbours[i, t] = j


#: :func:`back_rows`' marks: the partner is a ghost (this row evaluates the pair alone), or owned with a smaller id
#: (the partner's row evaluates it and writes it here)
GHOST_PARTNER, PARTNER_WRITES = -1, -2


@_parallel
def back_rows(ids, neighbours, partner_ids, counts, back):
    """For each entry of an owned particle i's row: where i stands in its partner j's row if j is owned with a larger
    id (i evaluates the pair and writes its factor into both rows: Newton's third law, each pair's g(r²) evaluated
    once), PARTNER_WRITES if j is owned with a smaller id, GHOST_PARTNER if j is a ghost.  Found by id in j's row
    (sorted by id; it holds i, the list's range being symmetric)."""
    owned = counts.shape[0]
    for i in prange(owned):
        me = ids[i]
        for s in range(counts[i]):
            j = neighbours[i, s]
            if j >= owned:
                back[i, s] = GHOST_PARTNER
            elif partner_ids[i, s] < me:
                back[i, s] = PARTNER_WRITES
            else:
                low, high = 0, counts[j]
                while low < high:
                    middle = (low + high) // 2
                    if partner_ids[j, middle] < me:
                        low = middle + 1
                    else:
                        high = middle
                back[i, s] = low


def pair_factors_template(q, coef, ids, neighbours, counts, back, factors):
    """g(r_ij²) (J/m²) of every pair in the owned particles' rows, in parallel: each row evaluates the pairs whose
    partner is a ghost or has a larger id and writes the factor into its own entry and, for an owned partner, into the
    partner's entry for it (:func:`back_rows`: each entry has one writer).  r_ij² and g are symmetric bit for bit (the
    differences' squares do not see their sign), so either member's evaluation is the pair's."""
    for i in prange(counts.shape[0]):
        x0, x1, x2 = q[i, 0, 0], q[i, 1, 0], q[i, 2, 0]
        me = ids[i]
        for s in range(counts[i]):
            where = back[i, s]
            if where == PARTNER_WRITES:
                continue
            j = neighbours[i, s]
            d0, d1, d2 = x0 - q[j, 0, 0], x1 - q[j, 1, 0], x2 - q[j, 2, 0]
            f = pair_gradient_factor(d0 * d0 + d1 * d1 + d2 * d2, coef, 0, me, ids[j])  # noqa: F821
            factors[i, s] = f
            if where >= 0:
                factors[j, where] = f


def gather_gradient_template(q, coef, ids, slot, neighbours, counts, factors, grad):
    """∂V/∂q_i (J) of every owned particle i (the rows of ``counts``), in parallel: its pair terms g(r_ij²)(q_i − q_j)
    in increasing partner id (g from :func:`pair_factors_template`), then its bonded terms.  Each particle writes
    its own row once."""
    for i in prange(counts.shape[0]):
        x0, x1, x2 = q[i, 0, 0], q[i, 1, 0], q[i, 2, 0]
        g0 = g1 = g2 = 0.0
        for s in range(counts[i]):
            j = neighbours[i, s]
            f = factors[i, s]
            g0 += f * (x0 - q[j, 0, 0])
            g1 += f * (x1 - q[j, 1, 0])
            g2 += f * (x2 - q[j, 2, 0])
        if BONDED:  # noqa: F821 (bound at specialisation)
            b0, b1, b2 = bonded_gradient(q, coef, slot, ids[i], i, 0)  # noqa: F821
            g0 += b0
            g1 += b1
            g2 += b2
        grad[i, 0, 0], grad[i, 1, 0], grad[i, 2, 0] = g0, g1, g2


def gather_energies_template(q, coef, ids, slot, neighbours, counts, out):
    """e_i = ½ Σ_j φ(r_ij²) in increasing partner id, plus particle i's share of its bonds and angles (J), for every
    owned particle, in parallel (Σ_i e_i = V)."""
    for i in prange(counts.shape[0]):
        e = 0.0
        for s in range(counts[i]):
            j = neighbours[i, s]
            d0, d1, d2 = q[i, 0, 0] - q[j, 0, 0], q[i, 1, 0] - q[j, 1, 0], q[i, 2, 0] - q[j, 2, 0]
            e += 0.5 * pair_energy(d0 * d0 + d1 * d1 + d2 * d2, coef, 0, ids[i], ids[j])  # noqa: F821
        if BONDED:  # noqa: F821
            e += bonded_energy(q, coef, slot, ids[i], i, 0)  # noqa: F821
        out[i] = e


@_parallel
def accumulate_heat(heat, since_sample):
    """Each particle's heat of the step added to its heat since the last sample (J), in step order."""
    for i in prange(heat.shape[0]):
        since_sample[i] += heat[i]


@_parallel
def sample_records(q, omega, mass_diag, ids, potential, since_sample, out):
    """Each owned particle's sample record (SAMPLE_COLUMNS): id, ½M‖ω × q‖², its potential energy, its heat since the
    last sample, q, ω; and the largest |‖q_i‖ − 1| and |q_i·ω_i| (returned)."""
    for i in prange(out.shape[0]):
        out[i, 0] = ids[i]
        out[i, 1] = body_kinetic_energy(q, omega, mass_diag, i, 0)
        out[i, 2] = potential[i]
        out[i, 3] = since_sample[i]
        for k in range(3):
            out[i, 4 + k] = q[i, k, 0]
            out[i, 7 + k] = omega[i, k, 0]
    unit = 0.0
    tangency = 0.0
    for i in range(out.shape[0]):
        u, t = body_constraint_errors(q, omega, i, 0)
        unit = max(unit, u)
        tangency = max(tangency, t)
    return unit, tangency


def aligned_blocks(first: int, stop: int) -> list[tuple[int, int]]:
    """The largest aligned dyadic blocks (level l, index k: leaves [k·2^l, (k + 1)·2^l)) that tile [first, stop)."""
    blocks = []
    while first < stop:
        level = 0
        while first % (2 << level) == 0 and first + (2 << level) <= stop:
            level += 1
        blocks.append((level, first >> level))
        first += 1 << level
    return blocks


def tree_sums(values: np.ndarray, first: int, total: int, exchange) -> np.ndarray:
    """Σ over leaves 0 … total − 1 of per-leaf vectors, by one fixed binary tree: leaves padded with zeros to a power
    of two, each node the sum of its two halves (left + right).  This rank holds leaves [first, first + len(values))
    (values: (m, k)); every rank gets the k sums, the same bits whatever the ranks' ranges: each rank reduces the
    aligned blocks inside its range, and the tree above them is evaluated from what every rank sent."""
    nodes = {}
    for level, index in aligned_blocks(first, first + values.shape[0]):
        block = values[(index << level) - first:((index + 1) << level) - first]
        while block.shape[0] > 1:
            block = block[0::2] + block[1::2]
        nodes[(level, index)] = block[0]
    for gathered in exchange.allgather(nodes):
        nodes.update(gathered)
    top = max(1, int(np.ceil(np.log2(max(total, 1)))))
    zero = np.zeros(values.shape[1])

    def node(level, index):
        if (level, index) in nodes:
            return nodes[(level, index)]
        if index << level >= total or level == 0:
            return zero
        return node(level - 1, 2 * index) + node(level - 1, 2 * index + 1)

    return node(top, 0)


def id_cuts(total: int, ranks: int, grain: int = 1) -> np.ndarray:
    """The id ranges of the ranks: rank r holds ids [cuts[r], cuts[r + 1]) of the state and the sums' leaves, about
    total/ranks each, every cut a multiple of ``grain`` (the store's particles per chunk: each chunk then has one
    writer; a rank may hold none)."""
    inner = [min(total, -(-(r * total // ranks) // grain) * grain) for r in range(1, ranks)]
    return np.array([0] + inner + [total], np.int64)


def id_range(total: int, exchange) -> tuple[int, int]:
    """The ids [first, stop) of ``total`` particles whose state this rank of ``exchange`` holds (:func:`id_cuts`):
    what each rank passes to :func:`run`, and gets back."""
    cuts = id_cuts(total, exchange.size, exchange.id_grain)
    return int(cuts[exchange.rank]), int(cuts[exchange.rank + 1])


def member_particles(held: int, exchange) -> int:
    """The particles of the member whose ids' state the ranks of ``exchange`` hold, ``held`` of them here."""
    return held if exchange is None or exchange.size == 1 else int(sum(exchange.allgather(held)))


def balanced_cuts(sorted_keys: np.ndarray, total: int, cells: int, exchange) -> np.ndarray:
    """Cuts of the cell order [0, cells) into exchange.size ranges of about total/size particles each: cuts[r] is
    the smallest cell c with at least r·total/size particles in cells < c (bisection over cells, one sum of the
    ranks' counts per halving).  ``sorted_keys``: this rank's particles' cells, sorted."""
    ranks = exchange.size
    targets = np.array([r * total // ranks for r in range(1, ranks)], np.int64)
    low = np.zeros(ranks - 1, np.int64)
    high = np.full(ranks - 1, cells, np.int64)
    while (low < high).any():
        middle = (low + high) // 2
        below = exchange.sum_counts(np.searchsorted(sorted_keys, middle, side="left").astype(np.int64))
        enough = below >= targets
        high = np.where(enough, middle, high)
        low = np.where(enough, low, middle + 1)
    return np.concatenate([[0], low, [cells]]).astype(np.int64)


def owners(keys: np.ndarray, cuts: np.ndarray) -> np.ndarray:
    """The rank that owns each cell."""
    return np.searchsorted(cuts, keys, side="right") - 1


@_serial
def ghost_pairs(keys, per_axis, cuts, rank, particles, destinations):
    """(particle, rank) pairs, into ``particles`` and ``destinations`` (grown by the caller when full: the count
    needed is returned either way): each owned particle (in order) with each other rank that owns one of the 26 cells
    around its own, each such rank once."""
    found = 0
    seen = np.empty(26, np.int64)
    for i in range(keys.shape[0]):
        key = keys[i]
        cz = key % per_axis
        cy = (key // per_axis) % per_axis
        cx = key // (per_axis * per_axis)
        distinct = 0
        for ax in range(max(cx - 1, 0), min(cx + 2, per_axis)):
            for ay in range(max(cy - 1, 0), min(cy + 2, per_axis)):
                for az in range(max(cz - 1, 0), min(cz + 2, per_axis)):
                    owner = np.searchsorted(cuts, (ax * per_axis + ay) * per_axis + az, side="right") - 1
                    if owner == rank:
                        continue
                    new = True
                    for t in range(distinct):
                        new = new and seen[t] != owner
                    if new:
                        seen[distinct] = owner
                        distinct += 1
                        if found < particles.shape[0]:
                            particles[found] = i
                            destinations[found] = owner
                        found += 1
    return found


def ghost_destinations(keys: np.ndarray, per_axis: int, cuts: np.ndarray, rank: int) -> dict:
    """Per other rank, the owned particles (sorted local indices) in a cell next to one of that rank's cells."""
    capacity = keys.shape[0] // 4 + 16
    while True:
        particles, destinations = np.empty(capacity, np.int64), np.empty(capacity, np.int64)
        found = ghost_pairs(keys, per_axis, cuts, rank, particles, destinations)
        if found <= capacity:
            break
        capacity = found
    particles, destinations = particles[:found], destinations[:found]
    order = np.argsort(destinations, kind="stable")  # each rank's particles stay in increasing index
    ranks, starts = np.unique(destinations[order], return_index=True)
    return {int(other): rows for other, rows in zip(ranks, np.split(particles[order], starts[1:]))}


# -------------------------------------------------------------------------------------------------------- the run

class Patch:
    """The particles a rank holds: owned ones first (rows [0, owned)), then its ghosts; their neighbour rows; what
    to send to the neighbour ranks each step.  Arrays use the lane layout of :mod:`kernels.lanes` (q: (n, 3, 1))."""

    def __init__(self, records: np.ndarray, total: int, exchange, kernels, bonded: bool):
        self.exchange, self.total, self.kernels = exchange, total, kernels
        self.bonded = bonded
        self.cuts = None
        self.check_bonds = False
        self.owned = 0
        self.neighbours = np.zeros((0, 1), np.int32)
        self.counts = np.zeros(0, np.int32)
        self.unpack(records)

    def unpack(self, records: np.ndarray) -> None:
        """The owned particles from their records (RECORD_COLUMNS), ghosts none yet."""
        n = records.shape[0]
        self.owned = n
        self.q = np.ascontiguousarray(records[:, 0:3, np.newaxis])
        self.q_next = np.ascontiguousarray(records[:, 3:6, np.newaxis])
        self.omega = np.ascontiguousarray(records[:, 6:9, np.newaxis])
        self.mass = np.ascontiguousarray(records[:, 9:10])
        self.half = np.ascontiguousarray(records[:, 10:11])
        self.margin = np.ascontiguousarray(records[:, 11])
        self.factors = np.ascontiguousarray(records[:, 12:12 + PARTICLE_FACTORS])
        self.since_sample = np.ascontiguousarray(records[:, 12 + PARTICLE_FACTORS])
        self.ids = records[:, 13 + PARTICLE_FACTORS].astype(np.int64)
        self.fresh_work()

    def take(self, order: np.ndarray) -> None:
        """The owned particles in ``order`` (ghosts dropped: a rebuild fetches them again)."""
        n = self.owned
        for name in ("q", "q_next", "omega", "mass", "half", "margin", "factors", "since_sample", "ids"):
            setattr(self, name, getattr(self, name)[:n][order])
        self.fresh_work()

    def fresh_work(self) -> None:
        """The owned particles' work arrays (∂V/∂q, the step's heat) and the build's positions, for their order."""
        self.grad = np.zeros((self.owned, 3, 1))
        self.heat = np.zeros(self.owned)
        self.reference = np.ascontiguousarray(self.q_next[:self.owned, :, 0])

    def records(self, rows=slice(None)) -> np.ndarray:
        """The owned particles' records (RECORD_COLUMNS) of ``rows`` (a slice, mask or index)."""
        n = self.owned
        columns = (self.q[:n, :, 0], self.q_next[:n, :, 0], self.omega[:, :, 0], self.mass, self.half,
                   self.margin[:, np.newaxis], self.factors, self.since_sample[:, np.newaxis],
                   self.ids[:n, np.newaxis].astype(np.float64))
        return np.concatenate([column[rows] for column in columns], axis=1)

    def rebuild(self, per_axis: int, list_range: float) -> None:
        """Migrate the particles to their cells' owners (the patches re-cut first where the load is off by more than
        REBALANCE_BOUND or the grid changed), put them in cell order, fetch the ghosts and build the full rows."""
        exchange = self.exchange
        cells = per_axis ** 3
        n = self.owned
        keys = np.empty(n, np.int64)
        cell_keys(self.q_next[:n, :, 0], per_axis, keys)
        if exchange.size > 1:
            if self.cuts is None or self.cuts[-1] != cells or self._imbalance() > REBALANCE_BOUND:
                self.cuts = balanced_cuts(np.sort(keys), self.total, cells, exchange)
            destination = owners(keys, self.cuts)
            leaving = destination != exchange.rank
            records = self.records(leaving)  # only the particles that cross a border travel
            arrived = np.concatenate(exchange.alltoallv([records[destination[leaving] == r]
                                                         for r in range(exchange.size)]))
            staying = np.flatnonzero(~leaving)
            self.unpack(np.concatenate([self.records(staying), arrived]))
            keys = np.concatenate([keys[staying], np.empty(arrived.shape[0], np.int64)])
            cell_keys(arrived[:, 3:6], per_axis, keys[staying.shape[0]:])
        else:
            self.cuts = np.array([0, cells], np.int64)
        order = np.argsort(keys * self.total + self.ids[:self.owned], kind="stable")  # cells in order, ids within
        self.take(order)
        keys = keys[order]
        self.sends = ghost_destinations(keys, per_axis, self.cuts, exchange.rank) if exchange.size > 1 else {}
        ghost_ids = exchange.alltoallv([self.ids[self.sends[r]].astype(np.float64)[:, np.newaxis]
                                        if r in self.sends else np.zeros((0, 1)) for r in range(exchange.size)])
        self.receives = {r: block.shape[0] for r, block in enumerate(ghost_ids) if block.shape[0]}
        ghosts = sum(self.receives.values())
        n = self.owned
        # the ghosts' rows, then one of NaN: where ``slot`` sends a bonded partner that is not here
        self.q = np.concatenate([self.q, np.zeros((ghosts, 3, 1)), np.full((1, 3, 1), np.nan)])
        self.q_next = np.concatenate([self.q_next, np.zeros((ghosts, 3, 1)), np.full((1, 3, 1), np.nan)])
        self.ids = np.concatenate([self.ids] + [block[:, 0].astype(np.int64) for block in ghost_ids] + [[-1]])
        self.exchange_ghosts()
        local_keys = np.concatenate([keys, np.empty(ghosts, np.int64)])
        cell_keys(self.q_next[n:n + ghosts, :, 0], per_axis, local_keys[n:])
        members = np.argsort(local_keys, kind="stable")
        cell_start = np.concatenate([[0], np.cumsum(np.bincount(local_keys, minlength=cells))])
        capacity = max(self.neighbours.shape[1], 2 * nb.initial_capacity(self.total, list_range))
        while True:
            self.neighbours = np.empty((n, capacity), np.int32)
            partner_ids = np.empty((n, capacity), np.int64)
            self.counts = np.empty(n, np.int32)
            longest = full_rows(self.q_next, self.ids, n, per_axis, list_range * list_range, local_keys, cell_start,
                                members, self.neighbours, partner_ids, self.counts)
            if longest <= capacity:
                break
            capacity = longest + nb.NEIGHBOUR_SLACK
        self.back = np.empty_like(self.neighbours)
        back_rows(self.ids, self.neighbours, partner_ids, self.counts, self.back)
        self.factors_of_pairs = np.empty(self.neighbours.shape)
        self.slot = np.full(self.total if self.bonded else 1, n + ghosts, np.int64)
        if self.bonded:
            self.slot[self.ids[:-1]] = np.arange(n + ghosts)
        self.check_bonds = self.bonded and exchange.size > 1

    def _imbalance(self) -> float:
        loads = np.array(self.exchange.allgather(self.owned), np.float64)
        return float(loads.max() / max(loads.mean(), 1.0))

    def exchange_ghosts(self) -> None:
        """The ghosts' q_{k+1} from their owners (the rows each owner sends, in its order, rank by rank)."""
        got = self.exchange.halo({r: np.ascontiguousarray(self.q_next[rows, :, 0]) for r, rows in self.sends.items()},
                                 self.receives)
        start = self.owned
        for r in sorted(self.receives):
            stop = start + self.receives[r]
            self.q_next[start:stop, :, 0] = got[r]
            start = stop

    def gradient(self, coef) -> None:
        """∂V/∂q at q_{k+1} of the owned particles (the ghosts' rows current)."""
        self.kernels.pair_factors(self.q_next, coef, self.ids, self.neighbours, self.counts, self.back,
                                  self.factors_of_pairs)
        self.kernels.gather_gradient(self.q_next, coef, self.ids, self.slot, self.neighbours, self.counts,
                                     self.factors_of_pairs, self.grad)
        if self.check_bonds:  # once after each build: a bonded partner beyond the ghosts reads the NaN row
            self.check_bonds = False
            n = self.owned
            if np.isfinite(self.q_next[:n]).all() and not np.isfinite(self.grad).all():
                raise InvalidInput("ranks", "a bond or angle reaches beyond r_c + skin of a patch's border, where a "
                                   "rank has no ghosts: run it on one rank, or with a larger skin")


def run_decomposed(system, method: str, q_start, omega_start, mass_start, coef, h: float, n_steps: int, save_every: int,
                   cutoff: float, skin: float, adaptive: bool, save_state: bool, start_step: int, heat_start: float,
                   total: int, exchange=None) -> dict:
    """March one system of N bodies ``n_steps`` steps of size ``h`` (s), continuing after the run's step
    ``start_step``, saving every ``save_every`` steps, on this rank's share of the sphere (:class:`Patch`).
    q_start, omega_start (n, 3, 1), mass_start (n, 1): the initial state of the ids of ``total`` that this rank holds
    (:func:`id_range`), coef (rows, 1) the member's coefficients.  Full rows of range r_c + skin (m), rebuilt when
    the largest displacement since the last build exceeds skin/2; with ``adaptive`` the skin is set at each rebuild
    (:func:`~kernels.neighbours.automatic_skin`).  Returns the samples (energy, temperature, constraint errors,
    the heat the bath gave since the run began from ``heat_start``: (samples,) on every rank), this rank's ids' q and
    ω at the samples (samples or 0, n, 3) and at the end, the status, failed step, builds, row capacity and last
    skin, and the particles this rank owned and its ghosts at the last build."""
    exchange = exchange or SingleRank()
    kernels = compiled_domain_kernels(method, system.name)
    n_here = q_start.shape[0]
    ranges = id_cuts(total, exchange.size, exchange.id_grain)
    first = int(ranges[exchange.rank])
    half_h_over_mass, factors = kernels.per_call_factors(coef, h, mass_start, first)
    records = np.concatenate([q_start[:, :, 0], q_start[:, :, 0], omega_start[:, :, 0], mass_start, half_h_over_mass,
                              np.ones((n_here, 1)), factors, np.zeros((n_here, 1)),
                              np.arange(first, first + n_here, dtype=np.float64)[:, np.newaxis]], axis=1)
    bonded = pair_bindings(system.name)["BONDED"]
    patch = Patch(records, total, exchange, kernels, bonded)
    per_axis = nb.grid_cells_per_axis(total, cutoff + skin)
    samples = n_steps // save_every + 1
    out = {name: np.full(samples, np.nan) for name in ("energy", "temperature", "unit_error", "tangency_error",
                                                       "exchanged")}
    out["q"] = np.full((samples if save_state else 0, n_here, 3), np.nan)
    out["omega"] = np.full((samples if save_state else 0, n_here, 3), np.nan)
    heat_total = [heat_start]
    heat = KERNEL_METHODS[method].heat
    chunk = np.empty((3, ROW_CHUNKS))

    def stages(kick, drift, step):
        n = patch.owned
        chunks = max(1, min(n, ROW_CHUNKS))
        code, moved, _ = kernels.advance_chunks(
            patch.q[:n], patch.q_next[:n], patch.omega, patch.grad, patch.half, h, patch.margin, patch.reference,
            kick, drift, chunk[0, :chunks], chunk[1, :chunks], chunk[2, :chunks], step, coef, patch.mass,
            patch.factors, patch.ids[:n], patch.heat)
        if heat and drift:
            accumulate_heat(patch.heat, patch.since_sample)
        # one collective a step: the worst outcome and the largest displacement since the last build
        worst, largest = exchange.maximum(np.array([OUTCOMES.index(int(code)), moved], np.float64))
        return OUTCOMES[int(worst)], float(largest)

    def record(sample):
        n = patch.owned
        patch.q[n:] = patch.q_next[n:]  # the ghosts' q_k: the kick copied q_{k+1} into the owned rows
        potential = np.empty(n)
        kernels.gather_energies(patch.q, coef, patch.ids, patch.slot, patch.neighbours, patch.counts, potential)
        rows = np.empty((n, SAMPLE_COLUMNS))
        unit, tangency = sample_records(patch.q, patch.omega, patch.mass, patch.ids, potential, patch.since_sample,
                                        rows)
        patch.since_sample[:] = 0.0
        mine = by_id(rows)
        kinetic, potential_total, exchanged = tree_sums(mine[:, 1:4], first, total, exchange)
        heat_total[0] += exchanged
        out["energy"][sample] = kinetic + potential_total
        out["temperature"][sample] = kinetic / total
        out["unit_error"][sample], out["tangency_error"][sample] = exchange.maximum(np.array([unit, tangency]))
        out["exchanged"][sample] = heat_total[0]
        if save_state:
            out["q"][sample] = mine[:, 4:7]
            out["omega"][sample] = mine[:, 7:10]

    def by_id(rows):
        """This rank's ids' rows, in id order, from every rank's records."""
        destination = np.searchsorted(ranges, rows[:, 0], side="right") - 1
        got = np.concatenate(exchange.alltoallv([rows[destination == r] for r in range(exchange.size)]))
        mine = np.empty((n_here, SAMPLE_COLUMNS))
        mine[got[:, 0].astype(np.int64) - first] = got
        return mine

    scheduled = system.scheduled  # (a protocol's coefficients at the forces' time; the others never change)
    if scheduled:
        system.definition.coefficients_at(coef, start_step * h)
    patch.rebuild(per_axis, cutoff + skin)
    patch.q[:] = patch.q_next
    rebuilds, built_at = 1, 0
    patch.gradient(coef)
    record(0)
    status, moved = stages(False, n_steps > 0, start_step)
    failed = -1
    for k in range(1, n_steps + 1):
        if scheduled:
            system.definition.coefficients_at(coef, (start_step + k) * h)
        if nb.beyond_half_skin(moved, skin):
            if adaptive:
                skin = nb.automatic_skin(skin, k - built_at, cutoff, BUILD_COST_IN_GRADIENTS)
                per_axis = nb.grid_cells_per_axis(total, cutoff + skin)
            patch.rebuild(per_axis, cutoff + skin)
            rebuilds += 1
            built_at = k
        else:
            patch.exchange_ghosts()
        patch.gradient(coef)
        saved = k % save_every == 0
        status, moved = stages(True, k < n_steps and not saved, start_step + k)
        if status != OK:
            failed = k
            break
        if saved:
            record(k // save_every)
            if k < n_steps:
                status, moved = stages(False, True, start_step + k)
    final = np.empty((patch.owned, SAMPLE_COLUMNS))
    final[:, 0] = patch.ids[:patch.owned]
    final[:, 4:7] = patch.q[:patch.owned, :, 0]
    final[:, 7:10] = patch.omega[:, :, 0]
    end = by_id(final)
    out.update(q_end=end[:, 4:7], omega_end=end[:, 7:10], status=status, failed_step=failed, rebuilds=rebuilds,
               capacity=patch.neighbours.shape[1], skin=skin, heat_end=heat_total[0], owned=patch.owned,
               ghosts=patch.q.shape[0] - patch.owned - 1)
    return out


@functools.cache
def compiled_gather_kernels(system: str) -> types.SimpleNamespace:
    """The full-row pair factors, gradient and energies of ``system`` (:func:`pair_factors_template`,
    :func:`gather_gradient_template`, :func:`gather_energies_template`), jitted and cached on disk."""
    kernel_cache_directory()  # refused before Numba loads anything from a cache another user could write
    bindings = pair_bindings(system)
    tag = f"{system}__{SOURCE_HASH}"
    return types.SimpleNamespace(**{
        name: njit(parallel=True, cache=True, **KERNEL_FLAGS)(bind_template(template, f"{name}__{tag}", bindings))
        for name, template in (("pair_factors", pair_factors_template), ("gather_gradient", gather_gradient_template),
                               ("gather_energies", gather_energies_template))})


@functools.cache
def compiled_domain_kernels(method: str, system: str) -> types.SimpleNamespace:
    """What :func:`run_decomposed` calls for ``method`` and ``system``: the method's stages over owned particles in
    fixed chunks (``advance_chunks``), its per-call factors and the full-row pair kernels."""
    kernel_cache_directory()
    tag = f"{method}__{system}__domain__{SOURCE_HASH}"
    drift, kick, factors = KERNEL_METHODS[method].system_stages
    bindings = {"HEAT": KERNEL_METHODS[method].heat, "integrator_drift": drift, "integrator_kick": kick,
                "particle_factors": factors}
    bindings["advance_range"] = njit(**INLINED)(bind_template(advance_range_template, f"advance_range__{tag}",
                                                             bindings))
    stages = njit(parallel=True, cache=True, **KERNEL_FLAGS)(bind_template(chunk_pass_template,
                                                                           f"advance_chunks__{tag}", bindings))
    per_call = njit(cache=True, **KERNEL_FLAGS)(bind_template(per_call_factors_template, f"per_call_factors__{tag}",
                                                             bindings))
    return types.SimpleNamespace(advance_chunks=stages, per_call_factors=per_call,
                                 **vars(compiled_gather_kernels(system)))


def run(system, method: str, q, omega, mass_diag, coef, dt: float, n_steps: int, save_every: int,
        skin: float | str | None, keep_state: bool, threads: int, start_step: int, carried: np.ndarray,
        exchange=None) -> dict:
    """Integrate one member of N particles of a pair potential with a cutoff in the system mode on ``threads``
    threads of each rank of ``exchange`` (None: this process alone), continuing after the run's step
    ``start_step``: q, ω (1, n, 3) the state of the ids [first, stop) this rank holds (:func:`id_range`: all N on one
    rank), mass_diag (1, N) and coef every particle's parameters.  Returns the arrays of a
    :class:`~kernels.integration.Trajectory` (member axis of 1) as :func:`kernels.system_parallel.run` does, its
    per-particle ones (q, ω at the samples and at the end) for this rank's ids.  ``skin``: the Verlet skin (m,
    chord), or "auto" (what None means), set at each rebuild by :func:`~kernels.neighbours.automatic_skin`; the last
    one comes back as ``neighbour_skin`` (1,)."""
    exchange = exchange or SingleRank()
    n = mass_diag.shape[1]
    cutoff, skin, adaptive = list_ranges(system, n, skin)
    first, stop = id_range(n, exchange)
    if q.shape[1] != stop - first:
        raise InvalidInput("state0", f"rank {exchange.rank} of {exchange.size} holds the state of ids [{first}, {stop}) "
                           f"of the member's {n} particles (kernels.domain.id_range), got {q.shape[1]} particles")
    previous = numba.get_num_threads()
    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    try:
        result = run_decomposed(
            system, method, np.ascontiguousarray(q[0, :, :, np.newaxis]), np.ascontiguousarray(omega[0, :, :, np.newaxis]),
            np.ascontiguousarray(mass_diag[0, first:stop, np.newaxis]), np.ascontiguousarray(coef.T), float(dt),
            n_steps, save_every, cutoff, skin, adaptive, keep_state, int(start_step), float(carried[0, -1]), n, exchange)
    finally:
        numba.set_num_threads(previous)
    out = {name: result[name][np.newaxis] for name in ("energy", "temperature", "unit_error", "tangency_error",
                                                        "exchanged", "q", "omega")}
    out["neighbour_skin"] = np.array([result["skin"]])
    info = np.array([result["status"], result["failed_step"], result["rebuilds"], result["capacity"]], np.int64)
    out = finished(out, method, info, result["q_end"][np.newaxis], result["omega_end"][np.newaxis],
                   np.array([result["heat_end"]]), carried)
    return out
