"""Neighbour lists built on a CUDA GPU: :mod:`kernels.neighbours`' grid and storage order, with full rows.

The first part of one large system on a GPU (the system-parallel mode there, issue 62): the positions stay on the
device, and so does every step of the build.

- **Cells.**  Each particle's cell of the grid over [−1, 1]³ (:func:`kernels.neighbours.cell_index`, the CPU's
  own), counted per cell with atomic additions (a count does not depend on their order).
- **Storage order.**  The counts' running sum gives each cell's first storage index (:func:`running_sums`, in
  chunks of SCAN_CHUNK cells a thread; L³ at most 16 n); each particle takes a slot of its cell by an atomic
  increment, whose order varies from launch to launch, and then each cell's particles are sorted by id (their
  original index), so the storage order is the CPU's (:func:`kernels.neighbours.sort_by_cell`): cells in
  (x, y, z) order, each cell's particles in increasing id, a function of the positions alone.
- **Full rows.**  Thread k (a stored particle) scans the 27 cells around its own, column by column in (x, y)
  order, each column's z-run of storage indices at once, and appends every other particle closer than r_list
  (chord): its row holds each such partner once.  A row longer than the capacity is counted but not written; the
  build says so (the longest row) and the caller builds again with room for it.  Each row is then put in
  increasing id of its partners.
- **Pair terms.**  Each thread sums its own particle's gradient and energy over its row
  (:func:`pair_terms_on_device`), with no atomics, in the order the partners' ids fix.  A partner between r_c and
  r_list adds an exact zero (a pair function vanishes beyond r_c), which changes no sum, so a particle's sums are
  the same bits from any list that holds its partners within r_c, whenever and from whatever storage order it was
  built: the system mode on the GPU (:mod:`kernels.gpu_system`) gives the same bits whatever its rebuilds and
  restarts.  They agree with the CPU's half-list passes to round-off (the same terms, to their signs, in another
  order).

Arrays: positions (n, 3) on the device; templates with the free name ``cuda`` (numba-cuda's module), bound by
:func:`kernel_functions` so that the simulator can swap it.
"""

from __future__ import annotations

import functools
import typing

import numpy as np

from .gpu import _register_numpy_math, cuda_module, launch
from .lanes import bind_template
from .neighbours import NEIGHBOUR_SLACK, cell_index, grid_cells_per_axis, initial_capacity
from .systems import system_definition

#: entries one thread sums or scans in :func:`running_sums`
SCAN_CHUNK = 64


class DeviceLists(typing.NamedTuple):
    """A neighbour list on the device: the storage order (storage index → original index), the positions in
    storage order (n, 3), each stored particle's cell, the cells' first storage indices (L³ + 1), the full rows
    (n, capacity) of storage indices and their lengths, and the cells per axis."""

    order: typing.Any
    stored: typing.Any
    storage_cell: typing.Any
    cell_start: typing.Any
    neighbours: typing.Any
    counts: typing.Any
    per_axis: int


def count_cells_template(q, per_axis, cell, cell_counts):
    """cell[i] = particle i's cell; cell_counts[c] += 1 for it."""
    i = cuda.grid(1)  # noqa: F821
    if i < q.shape[0]:
        c = cell_index(q[i, 0], q[i, 1], q[i, 2], per_axis)
        cell[i] = c
        cuda.atomic.add(cell_counts, c, 1)  # noqa: F821


def chunk_totals_template(values, totals):
    """totals[c] = the sum of chunk c of ``values`` (SCAN_CHUNK entries), a thread a chunk."""
    c = cuda.grid(1)  # noqa: F821
    if c < totals.shape[0]:
        total = 0
        for i in range(c * SCAN_CHUNK, min((c + 1) * SCAN_CHUNK, values.shape[0])):
            total += values[i]
        totals[c] = total


def chunk_starts_template(values, offsets, starts):
    """starts[i] = offsets[c] + the sum of the entries of ``values`` before i in its chunk c, a thread a chunk: the
    running sum, given in ``offsets`` the sum of every chunk before each."""
    c = cuda.grid(1)  # noqa: F821
    if c < offsets.shape[0]:
        total = offsets[c]
        for i in range(c * SCAN_CHUNK, min((c + 1) * SCAN_CHUNK, values.shape[0])):
            starts[i] = total
            total += values[i]


def scatter_template(cell, cursor, order):
    """Particle i into a free slot of its cell (which slot depends on the atomics' order: sorted next)."""
    i = cuda.grid(1)  # noqa: F821
    if i < cell.shape[0]:
        order[cuda.atomic.add(cursor, cell[i], 1)] = i  # noqa: F821


def sort_cells_template(cell_start, ids, order):
    """Each cell's particles in increasing id (insertion sort: a cell holds a few)."""
    c = cuda.grid(1)  # noqa: F821
    if c < cell_start.shape[0] - 1:
        for k in range(cell_start[c] + 1, cell_start[c + 1]):
            particle = order[k]
            j = k - 1
            while j >= cell_start[c] and ids[order[j]] > ids[particle]:
                order[j + 1] = order[j]
                j -= 1
            order[j + 1] = particle


def gather_template(q, cell, order, stored, storage_cell):
    """The positions and cells in storage order."""
    k = cuda.grid(1)  # noqa: F821
    if k < order.shape[0]:
        i = order[k]
        storage_cell[k] = cell[i]
        for axis in range(3):
            stored[k, axis] = q[i, axis]


def full_rows_template(stored, storage_cell, cell_start, per_axis, list_range_squared, neighbours, counts, longest):
    """Row k: every other stored particle within r_list of k (chord), from the 27 cells around k's, in increasing
    storage index; its length in counts[k] even where it exceeds the capacity, and the longest row in longest[0]."""
    k = cuda.grid(1)  # noqa: F821
    if k < stored.shape[0]:
        cell = storage_cell[k]
        iz = cell % per_axis
        iy = (cell // per_axis) % per_axis
        ix = cell // (per_axis * per_axis)
        z_low, z_high = max(iz - 1, 0), min(iz + 1, per_axis - 1)
        x0, x1, x2 = stored[k, 0], stored[k, 1], stored[k, 2]
        count = 0
        for x in range(max(ix - 1, 0), min(ix + 1, per_axis - 1) + 1):
            for y in range(max(iy - 1, 0), min(iy + 1, per_axis - 1) + 1):
                column = (x * per_axis + y) * per_axis
                for j in range(cell_start[column + z_low], cell_start[column + z_high + 1]):
                    d0, d1, d2 = x0 - stored[j, 0], x1 - stored[j, 1], x2 - stored[j, 2]
                    if j != k and d0 * d0 + d1 * d1 + d2 * d2 < list_range_squared:
                        if count < neighbours.shape[1]:
                            neighbours[k, count] = j
                        count += 1
        counts[k] = count
        cuda.atomic.max(longest, 0, count)  # noqa: F821


def sort_rows_template(order, ids, neighbours, counts):
    """Row k in increasing id of its particles (insertion sort; ``order`` maps a storage index to an index of the
    ``ids``), so that a particle's sums over its row run in an order its neighbours' ids fix."""
    k = cuda.grid(1)  # noqa: F821
    if k < counts.shape[0]:
        for s in range(1, counts[k]):
            partner = neighbours[k, s]
            j = s - 1
            while j >= 0 and ids[order[neighbours[k, j]]] > ids[order[partner]]:
                neighbours[k, j + 1] = neighbours[k, j]
                j -= 1
            neighbours[k, j + 1] = partner


def gather_gradient_template(stored, coef, ids, neighbours, counts, out):
    """∂V/∂q_k (J) of stored particle k at positions ``stored`` (n, 3), gathered by its own thread from its full row
    in the row's order:
    Σ_j g(r_kj²)(q_k − q_j).  Each term is, to its sign, the CPU's half-list term of the pair bit for bit
    (:func:`kernels.neighbours.block_gradient_template`); only the order of the sum differs."""
    k = cuda.grid(1)  # noqa: F821
    if k < stored.shape[0]:
        x0, x1, x2 = stored[k, 0], stored[k, 1], stored[k, 2]
        g0 = g1 = g2 = 0.0
        for s in range(counts[k]):
            j = neighbours[k, s]
            d0, d1, d2 = x0 - stored[j, 0], x1 - stored[j, 1], x2 - stored[j, 2]
            f = pair_gradient_factor(d0 * d0 + d1 * d1 + d2 * d2, coef, 0, ids[k], ids[j])  # noqa: F821 (the system's pair)
            g0 += f * d0
            g1 += f * d1
            g2 += f * d2
        out[k, 0], out[k, 1], out[k, 2] = g0, g1, g2


def gather_energies_template(stored, coef, ids, neighbours, counts, out):
    """e_k = ½ Σ_j φ(r_kj²) (J; V = Σ_k e_k), gathered as :func:`gather_gradient_template`."""
    k = cuda.grid(1)  # noqa: F821
    if k < stored.shape[0]:
        e = 0.0
        for s in range(counts[k]):
            j = neighbours[k, s]
            d0, d1, d2 = stored[k, 0] - stored[j, 0], stored[k, 1] - stored[j, 1], stored[k, 2] - stored[j, 2]
            e += 0.5 * pair_energy(d0 * d0 + d1 * d1 + d2 * d2, coef, 0, ids[k], ids[j])  # noqa: F821
        out[k] = e


TEMPLATES = (count_cells_template, chunk_totals_template, chunk_starts_template, scatter_template,
             sort_cells_template, gather_template, full_rows_template, sort_rows_template)


@functools.cache
def kernel_functions() -> dict:
    """The templates with numba-cuda's module bound, by name (``count_cells`` …): what ``cuda.jit`` launches and
    ``compile_ptx`` checks."""
    cuda = cuda_module()
    return {template.__name__.removesuffix("_template"): bind_template(template, template.__name__, {"cuda": cuda})
            for template in TEMPLATES}


#: the pair passes, bound to a system's pair potential (:func:`pair_kernel_functions`)
PAIR_TEMPLATES = (gather_gradient_template, gather_energies_template)


@functools.cache
def pair_kernel_functions(system: str) -> dict:
    """The pair passes of :data:`PAIR_TEMPLATES` with ``system``'s pair potential (``pair_energy``,
    ``pair_gradient_factor``) and numba-cuda's module bound, by name (``gather_gradient``, ``gather_energies``)."""
    _register_numpy_math()  # a model's pair functions call np.exp, np.sqrt, … on scalars
    pair = system_definition(system).pair
    bindings = {"cuda": cuda_module(), "pair_energy": pair.energy, "pair_gradient_factor": pair.gradient_factor}
    return {template.__name__.removesuffix("_template"): bind_template(template, f"{template.__name__}__{system}",
                                                                       bindings)
            for template in PAIR_TEMPLATES}


def pair_terms_on_device(system, lists: DeviceLists) -> tuple:
    """∂V/∂q (n, 3) and the per-particle energies e (n,) (J) of ``system`` (a pair system, one member's
    coefficients) at the lists' positions, on the device and in storage order (``lists.order[k]`` is stored
    particle k's original index), each particle's terms gathered by its own thread."""
    cuda = cuda_module()
    n = lists.stored.shape[0]
    coef = cuda.to_device(np.ascontiguousarray(system.definition.coefficients(system.broadcast(1, n), n).T))
    kernels = _launchable(system.name)
    gradient, energies = cuda.device_array((n, 3)), cuda.device_array(n)
    launch(kernels["gather_gradient"], n, lists.stored, coef, lists.order, lists.neighbours, lists.counts, gradient)
    launch(kernels["gather_energies"], n, lists.stored, coef, lists.order, lists.neighbours, lists.counts, energies)
    return gradient, energies


@functools.cache
def _launchable(system: str | None = None) -> dict:
    """:func:`kernel_functions` (``system`` None) or ``system``'s :func:`pair_kernel_functions` as CUDA kernels
    (compiled at their first launch)."""
    functions = kernel_functions() if system is None else pair_kernel_functions(system)
    return {name: cuda_module().jit(function) for name, function in functions.items()}


def running_sums(values, starts) -> None:
    """starts[i] = Σ_{j<i} values[j] of the one-dimensional int32 device array ``values``, into ``starts`` (as
    long), on the device: a thread sums each chunk of SCAN_CHUNK entries (:func:`chunk_totals_template`), the
    chunks' totals get their running sums the same way in turn, and a thread then writes each chunk's starts
    from its chunk's (:func:`chunk_starts_template`): O(L³/SCAN_CHUNK) threads at each of log_SCAN_CHUNK(L³)
    levels, where one thread's pass over 10⁷ cells (10⁶ particles) took milliseconds."""
    cuda = cuda_module()
    kernels = _launchable()
    chunks = -(-values.shape[0] // SCAN_CHUNK)
    if chunks == 1:
        offsets = cuda.to_device(np.zeros(1, np.int32))
    else:
        totals, offsets = cuda.device_array(chunks, np.int32), cuda.device_array(chunks, np.int32)
        launch(kernels["chunk_totals"], chunks, values, totals)
        running_sums(totals, offsets)
    launch(kernels["chunk_starts"], chunks, values, offsets, starts)


def build_full_rows(q, list_range: float, capacity: int | None = None, ids=None) -> DeviceLists:
    """A neighbour list with full rows of the n positions ``q`` ((n, 3) on the device, unit vectors) within
    ``list_range`` (chord), built on the device (see the module's text); ``ids`` (n,) on the device: the particles'
    ids, which order each cell and each row (default: their index in ``q``).  ``capacity`` (default: twice the half
    rows' of :func:`kernels.neighbours.initial_capacity`) grows until every row fits: a row that did not is found
    by the build itself, and only its length crosses to the host."""
    cuda = cuda_module()
    kernels = _launchable()
    n = q.shape[0]
    per_axis = grid_cells_per_axis(n, list_range)
    cells = per_axis ** 3
    if ids is None:
        ids = cuda.to_device(np.arange(n, dtype=np.int64))
    # one count more than cells, always 0: its running sum, the last start, is n
    cell, counts_per_cell = cuda.device_array(n, np.int32), cuda.to_device(np.zeros(cells + 1, np.int32))
    cell_start, cursor = cuda.device_array(cells + 1, np.int32), cuda.device_array(cells + 1, np.int32)
    order, storage_cell = cuda.device_array(n, np.int32), cuda.device_array(n, np.int32)
    stored = cuda.device_array((n, 3))
    launch(kernels["count_cells"], n, q, per_axis, cell, counts_per_cell)
    running_sums(counts_per_cell, cell_start)
    cursor.copy_to_device(cell_start)
    launch(kernels["scatter"], n, cell, cursor, order)
    launch(kernels["sort_cells"], cells, cell_start, ids, order)
    launch(kernels["gather"], n, q, cell, order, stored, storage_cell)
    capacity = capacity or 2 * initial_capacity(n, list_range)
    counts = cuda.device_array(n, np.int32)
    while True:
        neighbours, longest = cuda.device_array((n, capacity), np.int32), cuda.to_device(np.zeros(1, np.int32))
        launch(kernels["full_rows"], n, stored, storage_cell, cell_start, per_axis, list_range * list_range,
               neighbours, counts, longest)
        needed = int(longest.copy_to_host()[0])
        if needed <= capacity:
            launch(kernels["sort_rows"], n, order, ids, neighbours, counts)
            return DeviceLists(order, stored, storage_cell, cell_start, neighbours, counts, per_axis)
        capacity = needed + NEIGHBOUR_SLACK
