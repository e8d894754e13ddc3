"""Meshes and vector fields on the unit sphere used by presets and analysis (pure numpy)."""

import functools
from typing import NamedTuple

import numpy as np

from .errors import InvalidInput


def tangent_rows(q: np.ndarray, omega) -> np.ndarray:
    """ω with its component along the unit vectors q removed (rows, any leading axes), so that
    q·ω = 0 exactly up to round-off."""
    omega = np.asarray(omega, dtype=np.float64)
    return omega - np.sum(q * omega, axis=-1, keepdims=True) * q


def icosphere(level: int) -> tuple[np.ndarray, np.ndarray]:
    """Vertices (10·4^level + 2, 3) and faces (20·4^level, 3) of a subdivided icosahedron.

    Each subdivision splits every triangle into four through its edge midpoints, pushed out onto
    the unit sphere.  Level 3 has 642 vertices (Example 6's molecules); level 4 has 5120 faces
    (the mesh of Example 6's kinetic-energy maps).
    """
    if level < 0:
        raise ValueError(f"level must be >= 0, got {level}")
    phi = (1.0 + np.sqrt(5.0)) / 2.0
    vertices = [[-1, phi, 0], [1, phi, 0], [-1, -phi, 0], [1, -phi, 0], [0, -1, phi], [0, 1, phi],
                [0, -1, -phi], [0, 1, -phi], [phi, 0, -1], [phi, 0, 1], [-phi, 0, -1], [-phi, 0, 1]]
    faces = [[0, 11, 5], [0, 5, 1], [0, 1, 7], [0, 7, 10], [0, 10, 11], [1, 5, 9], [5, 11, 4], [11, 10, 2],
             [10, 7, 6], [7, 1, 8], [3, 9, 4], [3, 4, 2], [3, 2, 6], [3, 6, 8], [3, 8, 9], [4, 9, 5],
             [2, 4, 11], [6, 2, 10], [8, 6, 7], [9, 8, 1]]
    vertices = [np.array(v, dtype=np.float64) / np.linalg.norm(v) for v in vertices]
    for _ in range(level):
        midpoint_index: dict[tuple[int, int], int] = {}

        def midpoint(a: int, b: int) -> int:
            key = (min(a, b), max(a, b))
            if key not in midpoint_index:
                m = vertices[a] + vertices[b]
                vertices.append(m / np.linalg.norm(m))
                midpoint_index[key] = len(vertices) - 1
            return midpoint_index[key]

        refined = []
        for a, b, c in faces:
            ab, bc, ca = midpoint(a, b), midpoint(b, c), midpoint(c, a)
            refined += [[a, ab, ca], [b, bc, ab], [c, ca, bc], [ab, bc, ca]]
        faces = refined
    return np.array(vertices), np.array(faces, dtype=np.int64)


def mesh_edges(faces: np.ndarray) -> np.ndarray:
    """Unique undirected edges (E, 2) of a triangle mesh."""
    edges = np.concatenate([faces[:, [0, 1]], faces[:, [1, 2]], faces[:, [2, 0]]])
    return np.unique(np.sort(edges, axis=1), axis=0)


def vortex_velocities(q: np.ndarray, centres: np.ndarray, strength: float, radius: float) -> np.ndarray:
    """Angular velocities ω_i (tangent, rad/s) of a sum of Gaussian vortices on the sphere.

    Vortex v turns the sphere about its centre c_v with rate strength · exp(−θ²/(2 radius²)), θ the
    angle (rad) between q_i and c_v: q̇_i = Σ_v strength · exp(−θ_iv²/(2 radius²)) c_v × q_i, and
    ω_i = q_i × q̇_i (so that q̇_i = ω_i × q_i and q_i·ω_i = 0).
    """
    qdot = np.zeros_like(q)
    for centre in centres:
        theta = np.arccos(np.clip(q @ centre, -1.0, 1.0))
        qdot += strength * np.exp(-0.5 * (theta / radius) ** 2)[:, np.newaxis] * np.cross(centre, q)
    return np.cross(q, qdot)


def fibonacci_sphere(n: int) -> np.ndarray:
    """n (≥ 1) nearly evenly spaced unit vectors (n, 3) on the golden spiral: z_i = 1 − (2i + 1)/n,
    longitude i·π(3 − √5).  Neighbours are about √(8π/(√3 n)) apart (a near-hexagonal lattice, for any n),
    and consecutive indices are close in space, which keeps the neighbour lists' memory access local."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise InvalidInput("n", f"must be an integer >= 1, got {n!r}")
    i = np.arange(n, dtype=np.float64)
    z = 1.0 - (2.0 * i + 1.0) / n
    rho = np.sqrt(np.maximum(0.0, 1.0 - z * z))
    longitude = i * (np.pi * (3.0 - np.sqrt(5.0)))
    q = np.stack([rho * np.cos(longitude), rho * np.sin(longitude), z], axis=1)
    return q / np.linalg.norm(q, axis=1, keepdims=True)


#: random sequential adsorption of discs jams at a covered fraction ≈ 0.547; we stop short of it
MAX_RANDOM_COVERAGE = 0.5


def _pairs_within(a: np.ndarray, b: np.ndarray, radius: float) -> tuple[np.ndarray, np.ndarray]:
    """Index pairs (ia, ib) with ‖a_ia − b_ib‖ < radius, by a cubic grid of side ≥ radius over [−1, 1]³."""
    per_axis = max(1, min(int(2.0 / radius), 1024))
    def cells(x):
        return np.clip(((x + 1.0) * (per_axis / 2.0)).astype(np.int64), 0, per_axis - 1)
    cb = cells(b)
    key_b = (cb[:, 0] * per_axis + cb[:, 1]) * per_axis + cb[:, 2]
    order = np.argsort(key_b, kind="stable")
    sorted_keys = key_b[order]
    ca = cells(a)
    found_a, found_b = [], []
    for dx in (-1, 0, 1):
        for dy in (-1, 0, 1):
            for dz in (-1, 0, 1):
                c = ca + np.array([dx, dy, dz])
                valid = np.all((c >= 0) & (c < per_axis), axis=1)
                key = (c[:, 0] * per_axis + c[:, 1]) * per_axis + c[:, 2]
                lo = np.searchsorted(sorted_keys, key, "left")
                hi = np.searchsorted(sorted_keys, key, "right")
                count = np.where(valid, hi - lo, 0)
                ia = np.repeat(np.arange(len(a)), count)
                start = np.repeat(lo - np.cumsum(count) + count, count)  # row offset of each expanded entry
                ib = order[start + np.arange(count.sum())]
                close = np.sum((a[ia] - b[ib]) ** 2, axis=1) < radius * radius
                found_a.append(ia[close])
                found_b.append(ib[close])
    return np.concatenate(found_a), np.concatenate(found_b)


def random_uniform_separated(n: int, min_separation: float, seed: int) -> np.ndarray:
    """n unit vectors (n, 3), uniform on the sphere subject to chords ≥ ``min_separation`` (m), by random
    sequential adsorption in batches (seeded: the same seed gives the same points).

    Candidates are drawn uniformly; one is kept if it is at least ``min_separation`` from every point
    kept so far and from every earlier candidate of its batch.  The covered fraction
    n π (d/2)² / 4π must stay ≤ 0.5 (below the jamming limit ≈ 0.547 of random disc packing).
    """
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise InvalidInput("n", f"must be an integer >= 1, got {n!r}")
    if not (np.isfinite(min_separation) and 0 <= min_separation < 2):
        raise InvalidInput("min_separation", f"must be a chord in [0, 2) (m), got {min_separation!r}")
    coverage = n * min_separation**2 / 16.0
    if coverage > MAX_RANDOM_COVERAGE:
        raise InvalidInput("min_separation", f"{n} discs of diameter {min_separation:g} cover {coverage:.3f} of the "
                           f"sphere; random placement allows at most {MAX_RANDOM_COVERAGE}")
    rng = np.random.default_rng(seed)
    kept = np.empty((0, 3))
    for _ in range(10_000):
        if len(kept) == n:
            return kept
        batch = rng.standard_normal((max(2 * (n - len(kept)), 64), 3))
        batch /= np.linalg.norm(batch, axis=1, keepdims=True)
        if min_separation > 0:
            ia, _ = _pairs_within(batch, kept, min_separation) if len(kept) else (np.zeros(0, np.int64), None)
            clash = np.zeros(len(batch), bool)
            clash[ia] = True
            ia, ib = _pairs_within(batch, batch, min_separation)
            clash[ia[ib < ia]] = True  # a later candidate yields to every earlier one it is close to
            batch = batch[~clash]
        kept = np.concatenate([kept, batch[:n - len(kept)]])
    raise InvalidInput("min_separation", f"placed only {len(kept)} of {n} points; lower the separation")


def kinetic_temperature(q: np.ndarray, omega: np.ndarray, mass) -> float:
    """T = (½ Σ_i m_i ‖ω_i × q_i‖²)/n (J): the kinetic energy per particle, which is k_B T for 2 degrees of
    freedom per particle on S² (k_B = 1; no correction for conserved angular momentum)."""
    speed2 = np.sum(np.cross(omega, q) ** 2, axis=-1)
    return float(0.5 * np.sum(np.broadcast_to(mass, speed2.shape) * speed2) / q.shape[0])


def rescale_to_temperature(q: np.ndarray, omega: np.ndarray, mass, temperature: float) -> np.ndarray:
    """ω scaled by one factor so that :func:`kinetic_temperature` equals ``temperature`` (J)."""
    if not (np.isfinite(temperature) and temperature >= 0):
        raise InvalidInput("temperature", f"must be a finite number >= 0 (J), got {temperature!r}")
    current = kinetic_temperature(q, omega, mass)
    if current == 0.0:
        if temperature == 0.0:
            return omega.copy()
        raise InvalidInput("omega", "is zero everywhere: no velocity field to rescale to a positive temperature")
    return omega * np.sqrt(temperature / current)


def thermal_velocities(q: np.ndarray, mass, temperature: float, seed: int) -> np.ndarray:
    """Random tangent angular velocities ω (n, 3) (rad/s): Maxwell–Boltzmann velocities q̇_i ~ N(0, T/m_i)
    in the tangent plane, the net angular momentum Σ m_i q_i × q̇_i removed, then rescaled so that
    :func:`kinetic_temperature` is exactly ``temperature`` (J)."""
    rng = np.random.default_rng(seed)
    m = np.broadcast_to(np.asarray(mass, dtype=np.float64), (len(q),))
    qdot = rng.standard_normal(q.shape) / np.sqrt(m)[:, np.newaxis]
    qdot = tangent_rows(q, qdot)
    omega = np.cross(q, qdot)  # ω_i = q_i × q̇_i for tangent q̇_i
    # remove the rigid rotation Ω (ω_i → ω_i − (Ω − (Ω·q_i) q_i)) with the system's net angular momentum
    inertia = np.einsum("i,ij,ik->jk", m, q, q)
    inertia = np.sum(m) * np.eye(3) - inertia
    momentum = np.einsum("i,ij->j", m, omega)
    rotation = np.linalg.solve(inertia, momentum)
    omega = omega - (rotation - (q @ rotation)[:, np.newaxis] * q)
    return rescale_to_temperature(q, omega, m, temperature)


def _face_neighbours(faces: np.ndarray) -> np.ndarray:
    """(F, 3) indices of the faces sharing each face's three edges (a closed mesh has all three)."""
    edges = np.sort(np.concatenate([faces[:, [0, 1]], faces[:, [1, 2]], faces[:, [2, 0]]]), axis=1)
    owner = np.tile(np.arange(len(faces)), 3)
    order = np.lexsort((edges[:, 1], edges[:, 0]))  # the two faces of an edge become adjacent rows
    first, second = order[0::2], order[1::2]
    neighbours = [[] for _ in range(len(faces))]
    for a, b in zip(owner[first], owner[second]):
        neighbours[a].append(b)
        neighbours[b].append(a)
    return np.array(neighbours, dtype=np.int64)


class FaceMesh(NamedTuple):
    """A level-k icosphere seen as faces: unit centroid directions (F, 3) and edge neighbours (F, 3)."""

    centroids: np.ndarray
    neighbours: np.ndarray


@functools.cache
def face_mesh(level: int) -> FaceMesh:
    """The faces of ``icosphere(level)`` (5120 at level 4), built once per process (read-only arrays)."""
    vertices, faces = icosphere(level)
    centroids = vertices[faces].mean(axis=1)
    centroids /= np.linalg.norm(centroids, axis=1, keepdims=True)
    mesh = FaceMesh(centroids, _face_neighbours(faces))
    for array in mesh:
        array.setflags(write=False)
    return mesh


def nearest_face(points: np.ndarray, mesh: FaceMesh, block: int = 4096) -> np.ndarray:
    """Index of the face whose centroid direction is closest to each unit vector in ``points`` (…, 3)."""
    flat = points.reshape(-1, 3)
    index = np.concatenate([np.argmax(flat[i:i + block] @ mesh.centroids.T, axis=1)
                            for i in range(0, len(flat), block)] or [np.zeros(0, np.int64)])
    return index.reshape(points.shape[:-1])


def face_map(points: np.ndarray, values: np.ndarray, level: int = 4) -> np.ndarray:
    """Example 6's map: the mean of ``values`` (n,) over the points (n, 3) nearest each face of the
    level-``level`` icosphere (5120 faces at 4), then averaged over the face and its three edge
    neighbours.  Faces without points count as 0."""
    mesh = face_mesh(level)
    faces = len(mesh.centroids)
    face = nearest_face(points, mesh)
    total = np.bincount(face, weights=values, minlength=faces)
    count = np.bincount(face, minlength=faces)
    mean = np.divide(total, count, out=np.zeros(faces), where=count > 0)
    return (mean + mean[mesh.neighbours].sum(axis=1)) / 4


class _Clearance:
    """Points placed so far, hashed by cells of side ``separation`` (a point's neighbours within it lie in the 27 cells
    about its own), for :func:`polymer_positions`: O(1) per test, not O(placed)."""

    def __init__(self, separation: float):
        self.separation = separation
        self.cells: dict = {}

    def _cell(self, point) -> tuple:
        return tuple(np.floor(point / self.separation).astype(np.int64)) if self.separation > 0 else (0, 0, 0)

    def clear(self, point, ignore=()) -> bool:
        """Whether ``point`` is at least the separation from every placed point but those of ``ignore`` (ids)."""
        if self.separation <= 0:
            return True
        x, y, z = self._cell(point)
        for dx in (-1, 0, 1):
            for dy in (-1, 0, 1):
                for dz in (-1, 0, 1):
                    for index, other in self.cells.get((x + dx, y + dy, z + dz), ()):
                        if index not in ignore and np.linalg.norm(other - point) < self.separation:
                            return False
        return True

    def add(self, index: int, point) -> None:
        self.cells.setdefault(self._cell(point), []).append((index, point))


def polymer_positions(n: int, chains, min_separation: float, seed) -> np.ndarray:
    """n unit vectors (n, 3): each chain (first id, length, ring, bond chord (m)) of consecutive ids placed first,
    a ring as a regular polygon on a small circle about a random centre, a linear chain as a self-avoiding random
    walk of geodesic steps of the bond's chord; then every particle in no chain uniformly at random.  Each new
    particle keeps at least ``min_separation`` (m, chord) from every one placed before, but for its own bonded
    neighbour; a step is tried 100 times and a chain 100 times before the placement is refused (too dense).
    Seeded: the same seed gives the same points."""
    rng = np.random.default_rng(seed)
    placed = np.full((n, 3), np.nan)
    grid = _Clearance(min_separation)

    def random_unit():
        point = rng.standard_normal(3)
        return point / np.linalg.norm(point)

    for first, length, ring, chord in chains:
        for _ in range(100):
            centre = random_unit()
            side = tangent_rows(centre[np.newaxis], random_unit()[np.newaxis])[0]
            side /= np.linalg.norm(side)
            other = np.cross(centre, side)
            if ring:
                opening = np.arcsin(min(chord / (2.0 * np.sin(np.pi / length)), 1.0))
                angles = 2.0 * np.pi * np.arange(length) / length
                points = list(np.cos(opening) * centre + np.sin(opening) * (np.cos(angles)[:, np.newaxis] * side
                                                                               + np.sin(angles)[:, np.newaxis] * other))
                if not all(grid.clear(point) for point in points):
                    continue
            else:
                step = 2.0 * np.arcsin(chord / 2.0)
                points = [centre] if grid.clear(centre) else []
                own = _Clearance(min_separation)
                while points and len(points) < length:
                    own.add(len(points) - 1, points[-1])
                    for _ in range(100):
                        heading = tangent_rows(points[-1][np.newaxis], random_unit()[np.newaxis])[0]
                        candidate = np.cos(step) * points[-1] + np.sin(step) * heading / np.linalg.norm(heading)
                        candidate /= np.linalg.norm(candidate)
                        if grid.clear(candidate) and own.clear(candidate, ignore=(len(points) - 1,)):
                            points.append(candidate)
                            break
                    else:
                        break
                if len(points) < length:
                    continue
            for offset, point in enumerate(points):
                placed[first + offset] = point
                grid.add(first + offset, point)
            break
        else:
            raise InvalidInput("ensemble.placement", f"could not place the chain of particles {first} … "
                               f"{first + length - 1} clear of the others by min_separation = {min_separation:g}")
    for i in np.flatnonzero(np.isnan(placed[:, 0])):
        for _ in range(1000):
            point = random_unit()
            if grid.clear(point):
                placed[i] = point
                grid.add(i, point)
                break
        else:
            raise InvalidInput("ensemble.placement", f"could not place particle {i} clear of the others by "
                               f"min_separation = {min_separation:g}")
    return placed
