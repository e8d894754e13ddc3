"""Meshes and vector fields on the unit sphere used by presets and analysis (pure numpy)."""

import functools
from typing import NamedTuple

import numpy as np


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
