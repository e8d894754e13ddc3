"""Initial conditions of ensemble members (geometry on (S²)ⁿ only, no physics).

Member i's random numbers depend only on (seed, i): they come from a counter-based generator
(SplitMix64 of the global member id and draw index, keyed by the seed through ``SeedSequence``),
so any chunk of members can be generated on any worker, in any order, without materialising the
others.  That is what makes a store bitwise independent of chunking, worker count and restarts.
"""

import numpy as np

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)


def _splitmix64(x: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser (Steele, Lea & Flood 2014): a bijection of uint64 with full avalanche."""
    x = x + _GOLDEN
    x = (x ^ (x >> np.uint64(30))) * _MIX1
    x = (x ^ (x >> np.uint64(27))) * _MIX2
    return x ^ (x >> np.uint64(31))


#: independent streams of random numbers per member: initial conditions, Benettin shadow directions
INITIAL_STREAM, SHADOW_STREAM = 0, 1


def member_normals(seed: int, member_ids, count: int, stream: int = INITIAL_STREAM) -> np.ndarray:
    """(len(member_ids), count) standard normal numbers; row r depends only on (seed, stream,
    member_ids[r]).  Streams are keyed by ``SeedSequence(seed, spawn_key=(stream,))`` (stream 0 by
    ``SeedSequence(seed)`` itself), so adding a stream never changes another's numbers."""
    sequence = np.random.SeedSequence(seed, spawn_key=(stream,)) if stream else np.random.SeedSequence(seed)
    key = sequence.generate_state(1, np.uint64)[0]
    ids = np.asarray(member_ids, dtype=np.uint64)[:, np.newaxis]
    draws = np.arange(2 * count, dtype=np.uint64)[np.newaxis, :]
    bits = _splitmix64(_splitmix64(ids * np.uint64(2 * count) + draws) ^ key)
    uniform = (bits >> np.uint64(11)).astype(np.float64) * 2.0 ** -53  # in [0, 1), 53 random bits
    radius = np.sqrt(-2.0 * np.log1p(-uniform[:, :count]))  # Box–Muller
    return radius * np.cos(2.0 * np.pi * uniform[:, count:])


def _tangent(q: np.ndarray, v: np.ndarray) -> np.ndarray:
    """v with its component along the unit vector q removed."""
    return v - np.sum(v * q, axis=-1, keepdims=True) * q


def perturbed_members(q, omega, member_ids, scale: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """States around (q, ω) (each (n, 3)) for the given global member ids.

    Each q_i moves along a tangent Gaussian δ of std ``scale`` by the exponential map of S²,
    q_i' = cos‖δ‖ q_i + sin‖δ‖ δ/‖δ‖ (so ‖q_i'‖ = 1 up to round-off); ω_i gets a Gaussian of the same
    std and is projected tangent to q_i'.  Returns (members, n, 3) arrays.
    """
    q = np.asarray(q, dtype=np.float64)
    omega = np.asarray(omega, dtype=np.float64)
    n = q.shape[0]
    normals = scale * member_normals(seed, member_ids, 6 * n).reshape(-1, 2, n, 3)
    delta = _tangent(q, normals[:, 0])
    angle = np.linalg.norm(delta, axis=-1, keepdims=True)
    direction = np.divide(delta, angle, out=np.zeros_like(delta), where=angle > 0)
    moved = np.cos(angle) * q + np.sin(angle) * direction
    moved /= np.linalg.norm(moved, axis=-1, keepdims=True)
    return moved, _tangent(moved, omega + normals[:, 1])


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
    return q, _tangent(q, omega_scale * normals[:, 1])
