"""Initial conditions of ensemble members (geometry on (S²)ⁿ only, no physics).

Member i's random numbers depend only on (seed, i): they come from a counter-based generator
(SplitMix64 of the global member id and draw index, keyed by the seed through ``SeedSequence``,
turned into normals by Box–Muller; compiled with Numba: ~0.9 µs per 3-body member),
so any chunk of members can be generated on any worker, in any order, without materialising the
others.  That is what makes a store bitwise independent of chunking, worker count and restarts.
"""

import numpy as np
from numba import njit

from kernels.geometry import tangent_rows

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)


@njit(inline="always")
def _splitmix64(x):
    """SplitMix64's finaliser (Steele, Lea & Flood 2014): a bijection of uint64 with full avalanche.
    (Every operand is uint64: Numba would turn uint64 mixed with int64 into float64.)"""
    x = x + _GOLDEN
    x = (x ^ (x >> np.uint64(30))) * _MIX1
    x = (x ^ (x >> np.uint64(27))) * _MIX2
    return x ^ (x >> np.uint64(31))


@njit(inline="always")
def _uniform(counter, key):
    """A float in [0, 1) with 53 random bits, a function of (counter, key) only."""
    return np.float64(_splitmix64(_splitmix64(counter) ^ key) >> np.uint64(11)) * 2.0 ** -53


@njit(cache=True)
def _fill_normals(key, ids, out):
    """out[r, :] ← standard normals of member ids[r]: Box–Muller on consecutive pairs of uniforms
    (counters 2·pairs·id + 0, 1, …), both the cosine and the sine half used."""
    count = out.shape[1]
    pairs = (count + 1) // 2
    stride = np.uint64(2 * pairs)
    for r in range(ids.size):
        base = ids[r] * stride
        for p in range(pairs):
            radius = np.sqrt(-2.0 * np.log1p(-_uniform(base + np.uint64(2 * p), key)))
            angle = 2.0 * np.pi * _uniform(base + np.uint64(2 * p + 1), key)
            out[r, 2 * p] = radius * np.cos(angle)
            if 2 * p + 1 < count:
                out[r, 2 * p + 1] = radius * np.sin(angle)


#: independent streams of random numbers per member: initial conditions, Benettin shadow directions
INITIAL_STREAM, SHADOW_STREAM = 0, 1


def member_normals(seed: int, member_ids, count: int, stream: int = INITIAL_STREAM) -> np.ndarray:
    """(len(member_ids), count) standard normal numbers; row r depends only on (seed, stream,
    member_ids[r]).  Streams are keyed by ``SeedSequence(seed, spawn_key=(stream,))`` (stream 0 by
    ``SeedSequence(seed)`` itself), so adding a stream never changes another's numbers."""
    sequence = np.random.SeedSequence(seed, spawn_key=(stream,)) if stream else np.random.SeedSequence(seed)
    key = sequence.generate_state(1, np.uint64)[0]
    out = np.empty((np.size(member_ids), count))
    _fill_normals(key, np.asarray(member_ids, dtype=np.uint64).reshape(-1), out)
    return out


@njit(cache=True)
def _perturb(q, omega, normals, moved, moved_omega):
    """The loop of :func:`perturbed_members` (normals: (members, 2, n, 3), already scaled)."""
    for m in range(normals.shape[0]):
        for i in range(q.shape[0]):
            qx, qy, qz = q[i, 0], q[i, 1], q[i, 2]
            gx, gy, gz = normals[m, 0, i, 0], normals[m, 0, i, 1], normals[m, 0, i, 2]
            along = gx * qx + gy * qy + gz * qz
            dx, dy, dz = gx - along * qx, gy - along * qy, gz - along * qz  # δ, tangent at q
            angle = np.sqrt(dx * dx + dy * dy + dz * dz)
            c, s = np.cos(angle), (np.sin(angle) / angle if angle > 0.0 else 0.0)
            px, py, pz = c * qx + s * dx, c * qy + s * dy, c * qz + s * dz
            length = np.sqrt(px * px + py * py + pz * pz)
            px, py, pz = px / length, py / length, pz / length
            # ω plus its perturbation, made tangent at the moved q
            wx = omega[i, 0] + normals[m, 1, i, 0]
            wy = omega[i, 1] + normals[m, 1, i, 1]
            wz = omega[i, 2] + normals[m, 1, i, 2]
            along = wx * px + wy * py + wz * pz
            moved[m, i, 0], moved[m, i, 1], moved[m, i, 2] = px, py, pz
            moved_omega[m, i, 0] = wx - along * px
            moved_omega[m, i, 1] = wy - along * py
            moved_omega[m, i, 2] = wz - along * pz


def perturbed_members(q, omega, member_ids, scale: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """States around (q, ω) (each (n, 3)) for the given global member ids.

    Each q_i moves along a tangent Gaussian δ of std ``scale`` by the exponential map of S²,
    q_i' = cos‖δ‖ q_i + sin‖δ‖ δ/‖δ‖ (so ‖q_i'‖ = 1 up to round-off); ω_i gets a Gaussian of the same
    std and is projected tangent to q_i'.  Returns (members, n, 3) arrays.
    """
    q = np.ascontiguousarray(q, dtype=np.float64)
    omega = np.ascontiguousarray(omega, dtype=np.float64)
    n = q.shape[0]
    normals = scale * member_normals(seed, member_ids, 6 * n).reshape(-1, 2, n, 3)
    moved, moved_omega = np.empty((normals.shape[0], n, 3)), np.empty((normals.shape[0], n, 3))
    _perturb(q, omega, normals, moved, moved_omega)
    return moved, moved_omega


def shadow_directions(n: int, member_ids, seed: int) -> np.ndarray:
    """(members, 2, n, 3) standard normals for each member's Benettin shadow displacement (q and ω
    parts), from the member's own seed in a stream of their own."""
    return member_normals(seed, member_ids, 6 * n, SHADOW_STREAM).reshape(-1, 2, n, 3)


def perturbed_ensemble(q, omega, members: int, scale: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Members 0 … members−1 of :func:`perturbed_members`."""
    return perturbed_members(q, omega, np.arange(members), scale, seed)


def uniform_members(n: int, member_ids, omega_scale: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Each q_i uniform on S² (a normalised 3-D Gaussian), ω_i a tangent Gaussian of std
    ``omega_scale`` (rad/s).  Returns (members, n, 3) arrays."""
    normals = member_normals(seed, member_ids, 6 * n).reshape(-1, 2, n, 3)
    q = normals[:, 0] / np.linalg.norm(normals[:, 0], axis=-1, keepdims=True)
    return q, tangent_rows(q, omega_scale * normals[:, 1])
