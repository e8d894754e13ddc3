"""Counter-based noise for the stochastic methods: Philox4×32-10 (Salmon, Moraes, Dror & Shaw 2011,
"Parallel random numbers: as easy as 1, 2, 3", SC'11), in Numba.

A Gaussian number is a pure function of where it is used: the key is the run's seed (through
``SeedSequence(seed, spawn_key=(NOISE_STREAM,))``, 64 bits), the counter holds the global member id, the
global step index, the body (particle tag) and the stage of the step.  No stream is kept per thread,
worker or chunk, so a stochastic run gives the same bits for every chunking, worker count, thread count,
lane width, neighbour order and restart, as HOOMD-blue keys its ``RandomGenerator`` on (seed, timestep,
particle tag).

Counter words: c0 = step mod 2³², c1 = member id, c2 = body, c3 = stage + 16·(step div 2³²) (stage < 16).
One call gives four 32-bit words, four uniforms in (0, 1) and, by Box–Muller, four standard normals.

Only uint64 arithmetic on 32-bit values: Numba turns uint64 mixed with int64 into float64, so every
constant is a np.uint64.
"""

import numpy as np
from numba import njit

#: the stream of the noise among a run's per-member random numbers (ensemble.initial: 0 initial conditions,
#: 1 and 2 Benettin shadows); ``SeedSequence(seed, spawn_key=(NOISE_STREAM,))`` keys it
NOISE_STREAM = 3
#: stages a step may draw separately (the low 4 bits of counter word 3)
STAGES = 16

_MASK = np.uint64(0xFFFFFFFF)
_SHIFT = np.uint64(32)
_M0 = np.uint64(0xD2511F53)  # Philox4×32 round multipliers and Weyl key increments (Salmon et al., Table 2)
_M1 = np.uint64(0xCD9E8D57)
_W0 = np.uint64(0x9E3779B9)
_W1 = np.uint64(0xBB67AE85)
_HALF = 0.5
_TWO_TO_MINUS_32 = 2.0 ** -32
_TWO_PI = 2.0 * np.pi


@njit(inline="always")
def philox4x32_10(c0, c1, c2, c3, k0, k1):
    """The 4 output words of Philox4×32-10 for counter (c0, c1, c2, c3) and key (k0, k1), each a uint64
    holding a 32-bit value.  Checked against Random123's known-answer vectors (tests/test_noise.py)."""
    for _ in range(10):
        product0 = _M0 * c0
        product1 = _M1 * c2
        hi0, lo0 = product0 >> _SHIFT, product0 & _MASK
        hi1, lo1 = product1 >> _SHIFT, product1 & _MASK
        c0, c1, c2, c3 = hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0
        k0 = (k0 + _W0) & _MASK
        k1 = (k1 + _W1) & _MASK
    return c0, c1, c2, c3


@njit(inline="always")
def open_uniform(word):
    """(word + ½)·2⁻³²: a uniform in (0, 1), never 0 or 1, exact in float64."""
    return (np.float64(word) + _HALF) * _TWO_TO_MINUS_32


@njit(inline="always")
def gaussian_quartet(step, member, body, stage, k0, k1):
    """Four independent standard normals for (step, member, body, stage) under key (k0, k1): Box–Muller on
    the four uniforms of one Philox call (Box & Muller 1958; the cosine and the sine half of each pair)."""
    s = np.uint64(step)
    r0, r1, r2, r3 = philox4x32_10(s & _MASK, np.uint64(member), np.uint64(body),
                                   np.uint64(stage) + np.uint64(STAGES) * (s >> _SHIFT), k0, k1)
    radius0 = np.sqrt(-2.0 * np.log(open_uniform(r0)))
    angle0 = _TWO_PI * open_uniform(r1)
    radius1 = np.sqrt(-2.0 * np.log(open_uniform(r2)))
    angle1 = _TWO_PI * open_uniform(r3)
    return (radius0 * np.cos(angle0), radius0 * np.sin(angle0), radius1 * np.cos(angle1),
            radius1 * np.sin(angle1))


def noise_key(seed: int) -> tuple[int, int]:
    """The Philox key (k0, k1) of a run's seed: the first 64 bits of ``SeedSequence(seed,
    spawn_key=(NOISE_STREAM,))``, so the noise is independent of the seed's other streams."""
    k0, k1 = np.random.SeedSequence(seed, spawn_key=(NOISE_STREAM,)).generate_state(2, np.uint32)
    return int(k0), int(k1)


@njit(cache=True)
def philox_words(counter, key):
    """Philox4×32-10 of one counter (4,) and key (2,) (uint64 arrays of 32-bit values), as a (4,) array."""
    out = np.empty(4, np.uint64)
    out[0], out[1], out[2], out[3] = philox4x32_10(counter[0], counter[1], counter[2], counter[3], key[0], key[1])
    return out
