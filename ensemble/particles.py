"""Particles on the unit sphere: geometry and statistics of their unit vectors only (numpy, and scipy at call
time).  Nothing here knows a system: the points come from a store's state space
(:func:`.analysis.particle_points`, ``store_space(ds).points(state)``).

- :func:`geodesic_displacement`: mean-square geodesic displacement ⟨θ(τ)²⟩ and orientation correlation
  ⟨q(t+τ)·q(t)⟩ over every time origin, with standard errors across members;
- :func:`msd_by_type`: the same for each type of particle apart;
- :func:`pair_distribution`: the geodesic pair-distribution function g(θ) of all particles, by k-d tree pair
  counts at chord lengths; :func:`partial_pair_distributions`: the partial g_ab(θ) of each pair of types;
- :func:`voronoi_order`: coordination numbers, topological charges and the local hexatic order ψ₆ from the
  spherical Voronoi tessellation, or the power (radical) tessellation of discs of given radii;
  :func:`defect_clusters` groups the defects (Bausch et al., Science 299, 1716 (2003): a crystal on a sphere
  carries 12 clusters of net charge +1); :func:`coordination_by_type` counts coordinations per type;
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


def msd_by_type(trajectories, types) -> dict[int, Displacement]:
    """:func:`geodesic_displacement` of each type's particles apart: ``trajectories`` (members, times, N, 3), or
    (times, N, 3) for one member, as there; ``types`` (N,) the particles' type ids (int ≥ 0).  Returns {type id:
    :class:`Displacement`} over the types present, ascending: per type the lags (samples), ⟨θ(τ)²⟩ (rad²) and
    ⟨q(t+τ)·q(t)⟩ (1) averaged over that type's particles, time origins and members, with their standard
    errors across members.  θ is the angle between q(t) and q(t + τ), in [0, π], not a path length: it saturates
    once particles have turned through π."""
    array = np.asarray(trajectories, dtype=np.float64)
    ids = _type_ids(types, array.shape[-2] if array.ndim >= 2 else 0)
    return {int(a): geodesic_displacement(array[..., ids == a, :]) for a in np.unique(ids)}


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


def _pair_bins(n: int, bins: int | None, theta_max: float | None) -> tuple[np.ndarray, np.ndarray]:
    """The bin edges (rad) of g(θ) of ``n`` particles, ``bins`` equal bins over [0, ``theta_max``] (the defaults
    of :func:`default_bins` and :func:`default_theta_max` where None), and the chord lengths 2 sin(θ/2) (m on the
    unit sphere) of the edges; InvalidInput for fewer than 2 particles or a range or bin count out of bounds."""
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
    return edges, chords


def _pairs_per_bin(chords: np.ndarray, tree, other=None) -> np.ndarray:
    """Pairs per bin (float64, one per interval of ``chords``) of the particles of the k-d tree ``tree``: among
    themselves, each unordered pair once, when ``other`` is None; else with those of the tree ``other``, each
    (``tree``, ``other``) pair once.  Coincident particles (chord 0) count in the first bin."""
    # Ordered pairs (each particle with itself included among themselves) per chord shell r[k-1] < d ≤ r[k], and
    # d ≤ 0 first: at hundreds of radii the per-shell form is far faster than cumulative counts (8 s against 70 s
    # at 2·10⁵ particles and 400 bins, measured: it finds each pair's shell once instead of testing every radius).
    shells = tree.count_neighbors(tree if other is None else other, chords, cumulative=False).astype(np.float64)
    if other is not None:
        counts = shells[1:]
        counts[0] += shells[0]
        return counts
    counts = shells[1:] / 2
    counts[0] += (shells[0] - tree.n) / 2
    return counts


def _annulus_shares(edges: np.ndarray) -> np.ndarray:
    """The share of the sphere's area (1) between the polar angles of consecutive ``edges`` (rad) about any
    point, (cos θ_lo − cos θ_hi)/2: the chance that a uniformly distributed point lies in each bin."""
    return (np.cos(edges[:-1]) - np.cos(edges[1:])) / 2


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
    edges, chords = _pair_bins(n, bins, theta_max)
    counts = _pairs_per_bin(chords, cKDTree(points))
    return (edges[:-1] + edges[1:]) / 2, counts / (n * (n - 1) / 2 * _annulus_shares(edges))


def _type_ids(types, n: int) -> np.ndarray:
    """``types`` as an int64 array of one type id ≥ 0 per particle (``n``); else InvalidInput."""
    ids = np.asarray(types)
    if ids.shape != (n,) or not np.issubdtype(ids.dtype, np.integer) or np.any(ids < 0):
        raise InvalidInput("types", f"needs one integer type id >= 0 per particle ({n}); got shape {ids.shape}, "
                                    f"dtype {ids.dtype}")
    return ids.astype(np.int64)


def pair_fractions(types) -> dict[tuple[int, int], float]:
    """The share of all N(N − 1)/2 pairs of particles that join a particle of type a to one of type b, for the
    types ``types`` (N,) (int ids) of the particles: N_a(N_a − 1)/(N(N − 1)) for a = b and 2 N_a N_b/(N(N − 1))
    for a < b, keyed (a, b) with a ≤ b over the types present, a type alone in its kind left without (a, a).
    They add up to 1 and tend to the number fractions' x_a² and 2 x_a x_b as N grows; they weigh the partial
    g_ab of :func:`partial_pair_distributions` into the total g exactly: g = Σ_{a ≤ b} w_ab g_ab."""
    ids = np.asarray(types)
    ids = _type_ids(ids, ids.size)
    n = ids.size
    present, sizes = np.unique(ids, return_counts=True)
    fractions = {}
    for k, (a, size_a) in enumerate(zip(present, sizes)):
        for b, size_b in zip(present[k:], sizes[k:]):
            pairs = size_a * (size_a - 1) / 2 if a == b else size_a * size_b
            if pairs:
                fractions[(int(a), int(b))] = float(pairs / (n * (n - 1) / 2))
    return fractions


def partial_pair_distributions(points, types, bins: int | None = None, theta_max: float | None = None):
    """Partial geodesic pair-distribution functions g_ab(θ) of unit vectors ``points`` (N, 3) whose particles
    have the types ``types`` (N,) (int ids ≥ 0), from every pair (no subset).

    The bins are those of :func:`pair_distribution` for all N particles (the same defaults of ``bins`` and
    ``theta_max``), so the partials share the total's θ.  Each partial counts the pairs of an a-particle and a
    b-particle (a ≤ b; each pair once, by a k-d tree per type) and divides by what uniformly and independently
    placed particles would give, as g(θ) does: N_a(N_a − 1)/2 · s(θ) pairs for a = b and N_a N_b · s(θ) for
    a < b, s = (cos θ_lo − cos θ_hi)/2 the bin's share of the sphere's area, so each g_ab = 1 for an ideal
    mixture.  Since the partials' counts add up to the total's, g = Σ_{a ≤ b} w_ab g_ab exactly with the pair
    fractions w_ab of :func:`pair_fractions`, which tend to x_a² and 2 x_a x_b (x the number fractions):
    Σ_ab x_a x_b g_ab = g up to O(1/N_a).  Fewer pairs per bin than the total means more noise: a partial's
    relative counting error is about 1/√(expected pairs in the bin).  Returns (bin centres (rad), {(a, b): g_ab
    (1)}) over the pairs of types present, a ≤ b, leaving out (a, a) for a type with one particle (no pairs)."""
    from scipy.spatial import cKDTree

    points = _unit_vectors(points, 1)
    ids = _type_ids(types, len(points))
    edges, chords = _pair_bins(len(points), bins, theta_max)
    shares = _annulus_shares(edges)
    trees = {int(a): cKDTree(points[ids == a]) for a in np.unique(ids)}
    partials = {}
    for a, b in pair_fractions(ids):
        same = a == b
        pairs = trees[a].n * (trees[a].n - 1) / 2 if same else trees[a].n * trees[b].n
        counts = _pairs_per_bin(chords, trees[a], None if same else trees[b])
        partials[(a, b)] = counts / (pairs * shares)
    return (edges[:-1] + edges[1:]) / 2, partials


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


def angular_radii(diameters) -> np.ndarray:
    """The angular radii (rad) of particles of chord diameters ``diameters`` (m on the unit sphere, 0 ≤ d < 2):
    two equal particles of chord diameter d touch when their centres are a chord d apart, an angle 2 asin(d/2),
    so each one's angular diameter is 2 asin(d/2) and its angular radius asin(d/2), the radius of its disc in
    :func:`voronoi_order`."""
    diameters = np.asarray(diameters, dtype=np.float64)
    if not np.all((diameters >= 0) & (diameters < 2)):
        raise InvalidInput("diameters", "chord diameters must lie in [0, 2) m, a disc's angular radius asin(d/2) "
                                        "in [0, π/2)")
    return np.arcsin(diameters / 2)


def _neighbour_pairs(unit: np.ndarray, radii) -> np.ndarray:
    """The pairs (i, j), i < j, (P, 2) int, of particles ``unit`` whose cells of the power (radical, Laguerre)
    diagram on the sphere share an edge, the discs of angular radii ``radii`` (rad, < π/2), the Voronoi diagram
    without radii.

    A disc of radius ρ about p is the cap p·x ≥ cos ρ; its power at a unit vector x, 1 − x·p/cos ρ, is 0 on the
    disc's rim and equal for two discs on the great circle through their rims' crossings (or common tangent
    point): x·(p_i/cos ρ_i − p_j/cos ρ_j) = 0.  So x lies in the cell of the particle whose pole point
    p_i/cos ρ_i reaches farthest along x: the cells are the normal cones of the convex hull of the pole points,
    two cells adjacent when their pole points share a hull edge (the regular, weighted Delaunay, triangulation),
    and a particle whose pole point is no hull vertex has no cell.  Without radii, or with equal radii (a
    common factor leaves the hull's combinatorics unchanged), the pole points are the unit vectors themselves:
    the hull is the one ``scipy.spatial.SphericalVoronoi`` builds, its edges the Delaunay triangulation's."""
    from scipy.spatial import ConvexHull, QhullError

    if radii is None or np.all(radii == radii[0]):
        poles = unit
    else:
        poles = unit / np.cos(radii)[:, np.newaxis]
    try:
        hull = ConvexHull(poles)
    except QhullError as error:  # all points on one great circle, or fewer than 4 distinct
        raise InvalidInput("points", f"no spherical tessellation: {error}".splitlines()[0]) from None
    if radii is None and hull.vertices.size < len(unit):  # every distinct unit vector is a hull vertex
        raise InvalidInput("points", f"{len(unit) - hull.vertices.size} particles coincide with others (to qhull's "
                                     f"precision): no Voronoi tessellation")
    simplices = hull.simplices
    edges = np.concatenate([simplices[:, [0, 1]], simplices[:, [1, 2]], simplices[:, [2, 0]]])
    return np.unique(np.sort(edges, axis=1), axis=0)


def voronoi_order(points, radii=None) -> VoronoiOrder:
    """Coordination, topological charge and local hexatic order of unit vectors ``points`` (N, 3, distinct,
    N ≥ 4) from their spherical Voronoi tessellation (radius 1, centre 0) or, with ``radii``, the power
    (radical, Laguerre) tessellation of discs of those angular radii (N,) (rad, in [0, π/2); from chord
    diameters by :func:`angular_radii`), whose cell boundaries lie where two discs' powers are equal: a larger
    disc's cell reaches further, and two touching discs' cells meet at their point of contact.

    Two particles are neighbours when their cells share an edge: the edges of the convex hull of the points,
    or with radii of the pole points p_i/cos ρ_i (the regular triangulation: the power of a unit vector x with
    respect to disc i, 1 − x·p_i/cos ρ_i, is least for the pole point reaching farthest along x), as
    ``scipy.spatial.SphericalVoronoi`` finds the Voronoi neighbours.  Equal radii give the Voronoi
    tessellation's neighbours exactly.  z_i is particle i's number of neighbours (its cell's edge count), its
    charge 6 − z_i; with radii a particle whose disc lies within the others' cells may have no cell, z = 0 (it
    counts as "other" and adds 6 to the total charge).  ψ₆,i = (1/z_i) Σ_j exp(6i φ_ij), φ_ij the angle of the
    bond to j projected onto the tangent plane at q_i, measured in a tangent frame of q_i (any frame: it changes
    ψ₆,i by a phase only, not |ψ₆,i|); 0 without neighbours.  Returns a :class:`VoronoiOrder`: ``coordination``, ``charge``, ``psi6``,
    ``neighbours``, ``defects`` (counts of z = 5, z = 7 and other z ≠ 6), ``total_charge`` (12 by Euler's
    formula when every particle has a cell), ``six_fold_fraction`` and ``mean_abs_psi6`` (1)."""
    points = _unit_vectors(points, 1)
    n = len(points)
    if n < VORONOI_MIN_PARTICLES:
        raise InvalidInput("points", f"a spherical Voronoi tessellation needs at least {VORONOI_MIN_PARTICLES} "
                                     f"particles; got {n}")
    if radii is not None:
        radii = np.asarray(radii, dtype=np.float64)
        if radii.shape != (n,) or not np.all((radii >= 0) & (radii < np.pi / 2)):
            raise InvalidInput("radii", f"needs one angular radius in [0, π/2) rad per particle ({n}); got shape "
                                        f"{radii.shape}")
    unit = points / np.linalg.norm(points, axis=1, keepdims=True)
    pairs = _neighbour_pairs(unit, radii)
    coordination = np.bincount(pairs.ravel(), minlength=n).astype(np.int64)

    # ψ₆: each bond in both directions, its direction in the tangent frame of its first particle
    i = np.concatenate([pairs[:, 0], pairs[:, 1]])
    j = np.concatenate([pairs[:, 1], pairs[:, 0]])
    e1, e2 = _tangent_frames(unit)
    bond = unit[j] - unit[i]  # its tangential part points along the geodesic from q_i to q_j
    phase = np.exp(6j * np.arctan2(np.sum(bond * e2[i], axis=1), np.sum(bond * e1[i], axis=1)))
    total = np.bincount(i, phase.real, minlength=n) + 1j * np.bincount(i, phase.imag, minlength=n)
    psi6 = total / np.maximum(coordination, 1)

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
    #: with types: {type id: {z: members of that type with coordination z}} (:func:`coordination_by_type`)
    type_counts: dict | None = None


def coordination_by_type(coordination, types, sites=None) -> dict[int, dict[int, int]]:
    """How many particles of each type have each coordination: {type id: {z: count}} of the particles
    ``sites`` (indices; all by default), ``coordination`` (N,) their z (:attr:`VoronoiOrder.coordination`) and
    ``types`` (N,) their type ids (int ≥ 0).  Types and coordinations without particles are left out; keys
    ascend."""
    coordination = np.asarray(coordination)
    ids = _type_ids(types, len(coordination))
    chosen = slice(None) if sites is None else np.asarray(sites, dtype=np.int64)
    classes, counts = np.unique(np.stack([ids[chosen], coordination[chosen]], axis=1), axis=0, return_counts=True)
    table = {}
    for (a, z), count in zip(classes, counts):  # sorted by type, then z
        table.setdefault(int(a), {})[int(z)] = int(count)
    return table


def defect_clusters(points, order: VoronoiOrder, types=None) -> list[DefectCluster]:
    """The defects of ``order`` (a :func:`voronoi_order` of ``points``), particles with z ≠ 6, grouped into
    clusters of Voronoi neighbours: the connected components of the neighbour graph restricted to defects
    (``scipy.sparse.csgraph.connected_components``, what a union-find over the neighbour pairs gives).
    Returns a :class:`DefectCluster` per cluster (members, net charge Σ(6 − z), centre direction and, with
    ``types`` (N,) the particles' type ids, how many members of each type have each z), ordered by their
    lowest member.  :func:`coordination_by_type` gives the same counts over all particles."""
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
        type_counts = None if types is None else coordination_by_type(order.coordination, types, members)
        clusters.append(DefectCluster(members=members, charge=int(order.charge[members].sum()), centre=centre,
                                      type_counts=type_counts))
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
