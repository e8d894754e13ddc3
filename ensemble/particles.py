"""Particles on the unit sphere: geometry and statistics of their unit vectors only (numpy, and scipy at call
time).  Nothing here knows a system: the points come from a store's state space
(:func:`.analysis.particle_points`, ``store_space(ds).points(state)``).

- :func:`geodesic_displacement`: mean-square geodesic displacement ⟨θ(τ)²⟩ and orientation correlation
  ⟨q(t+τ)·q(t)⟩ over every time origin, with standard errors across members;
- :func:`pair_distribution`: the geodesic pair-distribution function g(θ) of all particles, by k-d tree pair
  counts at chord lengths;
- :func:`voronoi_order`: coordination numbers, topological charges and the local hexatic order ψ₆ from the
  spherical Voronoi tessellation; :func:`defect_clusters` groups the defects (Bausch et al., Science 299,
  1716 (2003): a crystal on a sphere carries 12 clusters of net charge +1);
- :func:`coordination_figure`: the sphere from two sides, particles coloured by coordination.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from armillary.kernels.errors import InvalidInput

#: bytes of the (members, origins, N, 3) block one lag of :func:`geodesic_displacement` works on at a time
DISPLACEMENT_BLOCK_BYTES = 32 * 2 ** 20
#: pairs a bin at the first peak of an ideal gas should hold on average, and the range of the bin count
PAIRS_PER_BIN = 100
BINS_RANGE = (30, 400)
#: up to this many particles g(θ) spans [0, π] by default; beyond, ``SPACINGS_SHOWN`` mean spacings
FULL_RANGE_PARTICLES = 5000
SPACINGS_SHOWN = 10
#: chord length counted as "every pair" for θ_max = π: above the largest chord 2 of unit vectors plus round-off
ALL_PAIRS_CHORD = 4.0
#: the fewest particles with a spherical Voronoi tessellation
VORONOI_MIN_PARTICLES = 4
#: colours of the coordination figure: 5 red, 6 light grey, 7 blue, any other black
COORDINATION_COLOURS = {5: "tab:red", 6: "0.8", 7: "tab:blue"}
OTHER_COLOUR = "black"


def _unit_vectors(points, trailing: int, name: str = "points") -> np.ndarray:
    """``points`` as float64 with ``trailing`` axes before the last (of length 3); else InvalidInput."""
    array = np.asarray(points, dtype=np.float64)
    if array.ndim != trailing + 1 or array.shape[-1] != 3:
        raise InvalidInput(name, f"expected an array of unit vectors with {trailing + 1} axes, the last of "
                                 f"length 3; got shape {array.shape}")
    if not np.all(np.isfinite(array)):
        raise InvalidInput(name, "holds NaN or infinite values")
    return array


def mean_spacing(n: int) -> float:
    """The mean spacing (rad) of ``n`` particles on the unit sphere, √(4π/n): the side of the square each
    particle's share 4π/n of the area would be."""
    return float(np.sqrt(4 * np.pi / n))


# ------------------------------------------------------------------------------------ displacement


class Displacement(NamedTuple):
    """What :func:`geodesic_displacement` returns (a tuple: it unpacks in this order)."""

    #: lag τ in samples (int), 0 … T − 1
    lags: np.ndarray
    #: mean-square geodesic displacement ⟨θ(τ)²⟩ (rad²)
    msd: np.ndarray
    #: orientation correlation ⟨q(t+τ)·q(t)⟩ (1)
    correlation: np.ndarray
    #: standard errors of the two across members (NaN with one member)
    msd_stderr: np.ndarray
    correlation_stderr: np.ndarray


def geodesic_displacement(points) -> Displacement:
    """Mean-square geodesic displacement and orientation correlation of particles on the unit sphere.

    ``points``: unit vectors (members, times, N, 3), or (times, N, 3) for one member, sampled at equal
    intervals.  For a lag of k samples every pair of samples (t, t + k) is a time origin; the angle each
    particle turned through is θ = atan2(|a × b|, a · b) (a = q(t), b = q(t + k)), which, unlike
    arccos(a · b), keeps full precision at small and at near-π angles.  Returns a :class:`Displacement`
    ``(lags, msd, correlation, msd_stderr, correlation_stderr)``: lags (samples, int, 0 … times − 1),
    ⟨θ(τ)²⟩ (rad²) and ⟨q(t+τ)·q(t)⟩ (1), both averaged over particles, time origins and members, and
    their standard errors.

    The windows of different origins overlap (θ(t, t+k) and θ(t+1, t+k+1) share most of their path), so
    origins are not independent and their spread says nothing of the error; members are independent
    replicas, so the standard error is std over members (of each member's average over particles and
    origins, ddof = 1) / √members: NaN with one member.  Direct sums (no FFT), one lag at a time,
    vectorised over members, origins and particles; cost ∝ times² · N."""
    array = np.asarray(points, dtype=np.float64)
    if array.ndim == 3:
        array = array[np.newaxis]
    array = _unit_vectors(array, 3)
    members, times, n, _ = array.shape
    if times < 1 or n < 1:
        raise InvalidInput("points", f"needs at least one sample of one particle; got shape {array.shape}")
    lags = np.arange(times)
    msd = np.zeros((members, times))
    correlation = np.zeros((members, times))
    # origins per block, so that a block's temporaries stay near DISPLACEMENT_BLOCK_BYTES for any size
    block = max(1, DISPLACEMENT_BLOCK_BYTES // (members * n * 3 * 8))
    for k in lags:
        origins = times - k
        for start in range(0, origins, block):
            stop = min(origins, start + block)
            a, b = array[:, start:stop], array[:, start + k:stop + k]
            dot = np.einsum("mtni,mtni->mtn", a, b)
            angle = np.arctan2(np.linalg.norm(np.cross(a, b), axis=-1), dot)
            msd[:, k] += np.sum(angle * angle, axis=(1, 2))
            correlation[:, k] += np.sum(dot, axis=(1, 2))
        msd[:, k] /= origins * n
        correlation[:, k] /= origins * n

    def stderr(values):
        if members < 2:
            return np.full(times, np.nan)
        return np.std(values, axis=0, ddof=1) / np.sqrt(members)

    return Displacement(lags, msd.mean(axis=0), correlation.mean(axis=0), stderr(msd), stderr(correlation))


# ----------------------------------------------------------------------------------- pair distribution


def default_theta_max(n: int) -> float:
    """The range (rad) of g(θ) when none is given: π up to 5000 particles; beyond, 10 mean spacings
    10 √(4π/n) (0.079 rad at 2·10⁵ particles), which holds the structure of a liquid or crystal and keeps
    the pair count ∝ n (n² θ²/8 = 50π n ≈ 160 n pairs, about 314 neighbours each) instead of n²/2."""
    return np.pi if n <= FULL_RANGE_PARTICLES else min(np.pi, SPACINGS_SHOWN * mean_spacing(n))


def default_bins(n: int, theta_max: float) -> int:
    """The number of bins of g(θ) over [0, ``theta_max``] when none is given: the most bins for which a bin at
    the first peak of an ideal gas (θ ≈ one mean spacing √(4π/n)) still holds ≥ 100 pairs on average, i.e.
    Δθ ≥ 100 / (n(n − 1)/4 · sin θ), clipped to [30, 400] (30 up to about 100 particles, 400 from 600 on)."""
    peak = min(mean_spacing(n), np.pi / 2)
    width = PAIRS_PER_BIN / (n * (n - 1) / 4 * np.sin(peak))
    return int(np.clip(np.floor(theta_max / width), *BINS_RANGE))


def pair_distribution(points, bins: int | None = None, theta_max: float | None = None):
    """Geodesic pair-distribution function g(θ) of unit vectors ``points`` (N, 3), from every pair of
    particles (no subset).

    Pairs are counted with a k-d tree, ``cKDTree.count_neighbors`` at the chord lengths 2 sin(θ/2) of the bin
    edges: the cost grows with the pairs within ``theta_max`` (about 160 N with the default range beyond 5000
    particles), not with N², so 2·10⁵ particles take 2–8 s on one core (from 1 to 400 bins) and 10⁶ five
    times that.  ``theta_max`` (rad): the upper edge, by default π up to 5000 particles and 10 mean spacings
    10 √(4π/N) beyond (:func:`default_theta_max`).  ``bins``: the number
    of equal bins over [0, θ_max], by default as many as leave ≥ 100 pairs of an ideal gas in a bin at the
    first peak, within [30, 400] (:func:`default_bins`).  Each bin's count is divided by the ideal gas's
    N(N − 1)/2 · (cos θ_lo − cos θ_hi)/2, so g = 1 for uniformly distributed points.  Returns (bin centres
    (rad), g (1))."""
    from scipy.spatial import cKDTree

    points = _unit_vectors(points, 1)
    n = len(points)
    if n < 2:
        raise InvalidInput("points", f"g(θ) needs at least 2 particles; got {n}")
    theta_max = default_theta_max(n) if theta_max is None else float(theta_max)
    if not 0 < theta_max <= np.pi:
        raise InvalidInput("theta_max", f"must be in (0, π] rad; got {theta_max!r}")
    bins = default_bins(n, theta_max) if bins is None else int(bins)
    if bins < 1:
        raise InvalidInput("bins", f"must be a positive number of bins; got {bins!r}")
    edges = np.linspace(0.0, theta_max, bins + 1)
    chords = 2 * np.sin(edges / 2)
    if theta_max == np.pi:  # every pair: antipodes' chord may round to just above 2
        chords[-1] = ALL_PAIRS_CHORD
    tree = cKDTree(points)
    # Ordered pairs (each particle with itself included) per chord shell r[k-1] < d ≤ r[k], and d ≤ 0 first:
    # at hundreds of radii the per-shell form is far faster than cumulative counts (8 s against 70 s at
    # 2·10⁵ particles and 400 bins, measured: it finds each pair's shell once instead of testing every radius).
    shells = tree.count_neighbors(tree, chords, cumulative=False).astype(np.float64)
    counts = shells[1:] / 2
    counts[0] += (shells[0] - n) / 2  # coincident particles (d = 0) are pairs at θ = 0
    expected = n * (n - 1) / 2 * (np.cos(edges[:-1]) - np.cos(edges[1:])) / 2
    return (edges[:-1] + edges[1:]) / 2, counts / expected


# ---------------------------------------------------------------------------------- Voronoi order


@dataclass(frozen=True)
class VoronoiOrder:
    """What :func:`voronoi_order` returns."""

    #: z_i: Voronoi neighbours of each particle (its region's vertex count), (N,) int
    coordination: np.ndarray
    #: topological charge 6 − z_i, (N,) int
    charge: np.ndarray
    #: local hexatic order ψ₆,i = (1/z_i) Σ_j exp(6i φ_ij), (N,) complex
    psi6: np.ndarray
    #: the Voronoi neighbour pairs (i, j), i < j, (P, 2) int: regions sharing an edge
    neighbours: np.ndarray
    #: counts of particles with z = 5 (``"z5"``), z = 7 (``"z7"``) and any other z ≠ 6 (``"other"``)
    defects: dict
    #: Σ (6 − z_i): 12 for any N ≥ 4 points in general position (Euler's formula)
    total_charge: int
    #: share of particles with z = 6 (1)
    six_fold_fraction: float
    #: mean |ψ₆,i| over all particles (1)
    mean_abs_psi6: float


def _tangent_frames(points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """An orthonormal tangent frame (e1, e2) at each unit vector: e1 ∝ a × q with a = e_z, or e_x where q is
    within 26° of ±e_z (so that a × q is never short); e2 = q × e1."""
    axis = np.zeros_like(points)
    polar = np.abs(points[:, 2]) > 0.9
    axis[~polar, 2] = 1.0
    axis[polar, 0] = 1.0
    e1 = np.cross(axis, points)
    e1 /= np.linalg.norm(e1, axis=1, keepdims=True)
    return e1, np.cross(points, e1)


def voronoi_order(points) -> VoronoiOrder:
    """Coordination, topological charge and local hexatic order of unit vectors ``points`` (N, 3, distinct,
    N ≥ 4) from their spherical Voronoi tessellation (``scipy.spatial.SphericalVoronoi``, radius 1, centre 0).

    z_i is the vertex count of particle i's region (its number of Voronoi neighbours), its charge 6 − z_i.
    Neighbours are the particles whose regions share an edge with i's: each pair of consecutive vertices of a
    sorted region is an edge, found in exactly one other region, so pairs are matched through the sorted
    vertex-index pair.  ψ₆,i = (1/z_i) Σ_j exp(6i φ_ij), φ_ij the angle of the bond to j projected onto the
    tangent plane at q_i, measured in a tangent frame of q_i (any frame: it changes ψ₆,i by a phase only, not
    |ψ₆,i|).  Returns a :class:`VoronoiOrder`: ``coordination``, ``charge``, ``psi6``, ``neighbours``,
    ``defects`` (counts of z = 5, z = 7 and other z ≠ 6), ``total_charge`` (12 by Euler's formula),
    ``six_fold_fraction`` and ``mean_abs_psi6`` (1)."""
    from scipy.spatial import SphericalVoronoi

    points = _unit_vectors(points, 1)
    n = len(points)
    if n < VORONOI_MIN_PARTICLES:
        raise InvalidInput("points", f"a spherical Voronoi tessellation needs at least {VORONOI_MIN_PARTICLES} "
                                     f"particles; got {n}")
    # SphericalVoronoi checks |q| = radius to 1e-6 relative: the store's unit vectors are unit to round-off
    unit = points / np.linalg.norm(points, axis=1, keepdims=True)
    try:
        tessellation = SphericalVoronoi(unit, radius=1.0, center=np.zeros(3))
    except ValueError as error:  # duplicate or degenerate generators
        raise InvalidInput("points", f"no spherical Voronoi tessellation: {error}") from None
    tessellation.sort_vertices_of_regions()
    regions = tessellation.regions
    coordination = np.array([len(region) for region in regions], dtype=np.int64)

    # every edge (v_k, v_k+1) of every region with its region's index, keyed by the sorted vertex pair
    first = np.concatenate([np.asarray(region) for region in regions])
    second = np.concatenate([np.roll(region, -1) for region in regions])
    owner = np.repeat(np.arange(n), coordination)
    low, high = np.minimum(first, second), np.maximum(first, second)
    order = np.lexsort((owner, high, low))
    low, high, owner = low[order], high[order], owner[order]
    # an edge's two regions are adjacent after sorting; a key seen once (a degenerate edge) pairs nothing
    same = (low[1:] == low[:-1]) & (high[1:] == high[:-1]) & (owner[1:] != owner[:-1])
    pairs = np.stack([owner[:-1][same], owner[1:][same]], axis=1)
    pairs = np.unique(np.sort(pairs, axis=1), axis=0)

    # ψ₆: each bond in both directions, its direction in the tangent frame of its first particle
    i = np.concatenate([pairs[:, 0], pairs[:, 1]])
    j = np.concatenate([pairs[:, 1], pairs[:, 0]])
    e1, e2 = _tangent_frames(unit)
    bond = unit[j] - unit[i]  # its tangential part points along the geodesic from q_i to q_j
    phase = np.exp(6j * np.arctan2(np.sum(bond * e2[i], axis=1), np.sum(bond * e1[i], axis=1)))
    bonds = np.bincount(i, minlength=n)
    total = np.bincount(i, phase.real, minlength=n) + 1j * np.bincount(i, phase.imag, minlength=n)
    psi6 = total / np.maximum(bonds, 1)

    charge = 6 - coordination
    defects = {"z5": int(np.sum(coordination == 5)), "z7": int(np.sum(coordination == 7)),
               "other": int(np.sum((coordination != 5) & (coordination != 6) & (coordination != 7)))}
    return VoronoiOrder(coordination=coordination, charge=charge, psi6=psi6, neighbours=pairs, defects=defects,
                        total_charge=int(charge.sum()), six_fold_fraction=float(np.mean(coordination == 6)),
                        mean_abs_psi6=float(np.mean(np.abs(psi6))))


@dataclass(frozen=True)
class DefectCluster:
    """One cluster of Voronoi-adjacent defects (particles with z ≠ 6)."""

    #: the particles' indices, ascending
    members: np.ndarray
    #: net topological charge Σ (6 − z_i)
    charge: int
    #: the direction of the members' mean unit vector (unit; NaN if the mean vanishes)
    centre: np.ndarray


def defect_clusters(points, order: VoronoiOrder) -> list[DefectCluster]:
    """The defects of ``order`` (a :func:`voronoi_order` of ``points``), particles with z ≠ 6, grouped into
    clusters of Voronoi neighbours: the connected components of the neighbour graph restricted to defects
    (``scipy.sparse.csgraph.connected_components``, what a union-find over the neighbour pairs gives).
    Returns a :class:`DefectCluster` per cluster (members, net charge Σ(6 − z), centre direction), ordered
    by their lowest member."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    points = _unit_vectors(points, 1)
    if len(points) != len(order.coordination):
        raise InvalidInput("order", f"describes {len(order.coordination)} particles, points holds {len(points)}")
    defect = order.coordination != 6
    index = np.flatnonzero(defect)
    if index.size == 0:
        return []
    local = np.full(len(points), -1)
    local[index] = np.arange(index.size)
    pairs = order.neighbours[defect[order.neighbours].all(axis=1)]
    graph = coo_matrix((np.ones(len(pairs)), (local[pairs[:, 0]], local[pairs[:, 1]])),
                       shape=(index.size, index.size))
    count, labels = connected_components(graph, directed=False)
    clusters = []
    for label in range(count):  # labels are numbered in order of their lowest member
        members = index[labels == label]
        mean = points[members].mean(axis=0)
        size = np.linalg.norm(mean)
        centre = mean / size if size > 0 else np.full(3, np.nan)
        clusters.append(DefectCluster(members=members, charge=int(order.charge[members].sum()), centre=centre))
    return clusters


# ---------------------------------------------------------------------------------------- figure


def coordination_figure(points, coordination, path):
    """The sphere seen from +x and from −x (two orthographic panels, each showing the hemisphere that faces
    the viewer, y to the right and z up as seen from that side), the particles ``points`` (N, 3) as dots
    coloured by ``coordination`` (N,): 5 red, 6 light grey, 7 blue, any other black.  Written as a PNG
    (120 dpi, as the report's figures) to ``path``; returns ``path``."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    points = _unit_vectors(points, 1)
    coordination = np.asarray(coordination)
    if coordination.shape != (len(points),):
        raise InvalidInput("coordination", f"needs one value per particle ({len(points)}); got shape "
                                           f"{coordination.shape}")
    # a Figure on the Agg canvas, not pyplot: nothing global to switch or to close, as the report's
    # "Agg, then plt.close" achieves, and an interactive session's backend is left alone
    fig = Figure(figsize=(8, 4.2), layout="constrained")
    FigureCanvasAgg(fig)
    size = float(np.clip(2e4 / len(points), 0.3, 40))  # dots shrink as the sphere fills
    classes = [(f"z = {z}", coordination == z, colour) for z, colour in COORDINATION_COLOURS.items()]
    other = ~np.isin(coordination, list(COORDINATION_COLOURS))
    classes.append(("other z", other, OTHER_COLOUR))
    for column, (side, title) in enumerate(((1.0, "seen from +x"), (-1.0, "seen from −x"))):
        ax = fig.add_subplot(1, 2, column + 1)
        facing = side * points[:, 0] >= 0
        ax.add_patch(_circle())
        for label, chosen, colour in classes:  # six-fold first, so the defects are drawn over them
            shown = facing & chosen
            ax.scatter(side * points[shown, 1], points[shown, 2], s=size, c=colour, linewidths=0,
                       label=f"{label} ({int(chosen.sum())})")
        ax.set_aspect("equal")
        ax.set_xlim(-1.05, 1.05)
        ax.set_ylim(-1.05, 1.05)
        ax.set_axis_off()
        ax.set_title(title, fontsize=9)
    handles, labels = fig.axes[0].get_legend_handles_labels()  # the same classes in both panels: listed once
    fig.legend(handles, labels, loc="outside lower center", ncols=len(labels), fontsize=8, frameon=False,
               markerscale=max(1.0, 20 / size) ** 0.5)
    fig.suptitle(f"Voronoi coordination of {len(points)} particles", fontsize=9)
    fig.savefig(path, dpi=120)
    return path


def _circle():
    from matplotlib.patches import Circle

    return Circle((0, 0), 1.0, fill=False, linewidth=0.6, edgecolor="0.4")
