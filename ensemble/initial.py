"""Random numbers of ensemble members, per member (the space's samplers and retraction turn them into
states; no geometry or physics here).

Member i's random numbers depend only on (seed, i): they come from a counter-based generator
(SplitMix64 of the global member id and draw index, keyed by the seed through ``SeedSequence``,
turned into normals by Box–Muller; compiled with Numba: ~0.9 µs per 3-body member),
so any chunk of members can be generated on any worker, in any order, without materialising the
others.  That is what makes a store bitwise independent of chunking, worker count and restarts.
"""

import numpy as np
from numba import njit


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


#: independent streams of random numbers per member: initial conditions, Benettin shadow directions, the
#: directions of a spectrum's further shadows
INITIAL_STREAM, SHADOW_STREAM, SPECTRUM_STREAM = 0, 1, 2


def member_normals(seed: int, member_ids, count: int, stream: int = INITIAL_STREAM) -> np.ndarray:
    """(len(member_ids), count) standard normal numbers; row r depends only on (seed, stream,
    member_ids[r]).  Streams are keyed by ``SeedSequence(seed, spawn_key=(stream,))`` (stream 0 by
    ``SeedSequence(seed)`` itself), so adding a stream never changes another's numbers."""
    sequence = np.random.SeedSequence(seed, spawn_key=(stream,)) if stream else np.random.SeedSequence(seed)
    key = sequence.generate_state(1, np.uint64)[0]
    out = np.empty((np.size(member_ids), count))
    _fill_normals(key, np.asarray(member_ids, dtype=np.uint64).reshape(-1), out)
    return out


def shadow_directions(count: int, member_ids, seed: int) -> np.ndarray:
    """(members, count) standard normals for each member's Benettin shadow displacement, from the
    member's own seed in a stream of its own."""
    return member_normals(seed, member_ids, count, SHADOW_STREAM)


def spectrum_directions(count: int, member_ids, seed: int) -> np.ndarray:
    """(members, count) standard normals for the displacements of each member's shadows beyond the first
    (a spectrum's), in a stream of their own, so the first shadow's are those of a lone Benettin shadow."""
    return member_normals(seed, member_ids, count, SPECTRUM_STREAM)
