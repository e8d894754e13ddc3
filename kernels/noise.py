"""Counter-based noise for the stochastic methods: Philox4×32-10 (Salmon, Moraes, Dror & Shaw 2011,
"Parallel random numbers: as easy as 1, 2, 3", SC'11), in Numba, and standard normals from its words by the
Ziggurat method (Marsaglia & Tsang 2000, "The Ziggurat method for generating random variables", J. Stat. Softw.
5(8); in Doornik's form ZIGNOR, "An improved Ziggurat method to generate normal random samples", 2005).

A Gaussian number is a pure function of where it is used: the key is the run's seed (through
``SeedSequence(seed, spawn_key=(NOISE_STREAM,))``, 64 bits), the counter holds the global member id, the
global step index, the body (particle tag) and the stage of the step.  No stream is kept per thread,
worker or chunk, so a stochastic run gives the same bits for every chunking, worker count, thread count,
lane width, neighbour order and restart, as HOOMD-blue keys its ``RandomGenerator`` on (seed, timestep,
particle tag).

Counter words: c0 = step mod 2³², c1 = member id, c2 = body, c3 = stage + 16·(step div 2³²) + 2²⁴·r (stage <
16, step < 2⁵² so that 16·(step div 2³²) < 2²⁴; r = 0 for a draw's first call, 1 + lane + 4m for the m-th retry
call of the normal on word ``lane``, m < 63, so r < 256 fills the word).  One call gives four 32-bit words, four
uniforms in (0, 1), and up to four standard normals, one a word: :func:`gaussian_triple` (the Ornstein–Uhlenbeck
and Brownian kicks), :func:`gaussian_pair` (an active particle's heading), :func:`gaussian_quartet`.

The Ziggurat covers the half-normal density f(x) = exp(−x²/2) by 256 layers of equal area V (the bottom one
with the tail beyond R = 3.6542), tables computed once at import in float64.  Each word gives a layer from its
low 8 bits and, from its other 24, a uniform u in (−1, 1) carrying the sign; when |u| < X[i+1]/X[i] (98.5 % of
words) the normal is u·X[i]: no logarithm, root or sine, a mask, a conversion, a compare and a multiply.  The
other words finish in :func:`ziggurat_retry` by ZIGNOR's wedge test (two exponentials) or Marsaglia's tail
(two logarithms), their further uniforms from retry calls of the same counter with r > 0 (above), so a retry
is as deterministic as the first draw.  One word per attempt, not two (a 53-bit uniform): three normals per
Philox call instead of one and a half, the call being the larger part of the cost (three normals 14.9 ns,
Box–Muller's four 60.0 ns: fastest of 9 interleaved rounds, 2026-11-28, docs/background/performance.md), at a
resolution of 2⁻²³·X[i] ≤ 4.7·10⁻⁷ in the normal: a layer's 2²⁴ values are equally likely and symmetric about 0,
so the moments differ from the normal's by less than 10⁻⁶, far below what a run can resolve (tests/test_noise.py
checks mean, variance, kurtosis, P(|ξ| > 4) and a histogram of 4·10⁶ draws within 5 standard errors, and that
a 1 % variance error fails).  256 layers rather than 128: 98.5 % of words on the fast path instead of 97.2 %,
7 % less time per three normals (measured).  The layer and the uniform come from disjoint bits, so they are
independent (Doornik's objection to the original's shared bits).

Only uint64 arithmetic on 32-bit values: Numba turns uint64 mixed with int64 into float64, so every
constant is a np.uint64.
"""

import math

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


@njit(inline="always")
def philox4x32_10(c0, c1, c2, c3, k0, k1):
    """The 4 output words of Philox4×32-10 for counter (c0, c1, c2, c3) and key (k0, k1), each a uint64
    holding a 32-bit value.  Checked against Random123's known-answer vectors (tests/test_stochastic.py)."""
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


#: Ziggurat layers (a power of two: the layer is the low bits of a word)
LAYERS = 256


def _ziggurat_tables(layers: int = LAYERS):
    """The ZIGNOR tables of ``layers`` layers in float64 (Doornik 2005, section 3; Marsaglia & Tsang 2000): the
    right edges X[0] > X[1] = R > … > X[layers − 1] > X[layers] = 0 of the layers of equal area V under
    f(x) = exp(−x²/2), the ratios X[i+1]/X[i] (the fast test) and f(X[i]) (the wedge test), and R.  R solves
    V(R)/X[C−1] + f(X[C−1]) = 1 (the top layer closes at f(0) = 1), V(R) = R f(R) + ∫_R^∞ f, by bisection."""
    def edges(r):
        area = r * math.exp(-0.5 * r * r) + math.sqrt(0.5 * math.pi) * math.erfc(r / math.sqrt(2.0))
        x = np.zeros(layers + 1)
        x[0], x[1] = area / math.exp(-0.5 * r * r), r
        for i in range(2, layers):
            inner = area / x[i - 1] + math.exp(-0.5 * x[i - 1] ** 2)
            if inner >= 1.0:
                return x, 1.0  # R too small: the layers reach the top before the last one
            x[i] = math.sqrt(-2.0 * math.log(inner))
        return x, area / x[layers - 1] + math.exp(-0.5 * x[layers - 1] ** 2) - 1.0

    low, high = 2.0, 5.0  # closure − 1 > 0 at low, < 0 at high
    for _ in range(200):
        middle = 0.5 * (low + high)
        if middle in (low, high):
            break
        if edges(middle)[1] > 0.0:
            low = middle
        else:
            high = middle
    x = edges(high)[0]
    return x, x[1:] / x[:-1], np.exp(-0.5 * x * x), high


_ZIG_X, _ZIG_RATIO, _ZIG_F, _ZIG_R = _ziggurat_tables()
_LAYER_MASK = np.uint64(LAYERS - 1)
_LAYER_BITS = np.uint64(LAYERS.bit_length() - 1)
#: (j + ½)·2⁻²³ − 1 for the 24-bit j above 8 layer bits: (−1, 1), symmetric
_UNIFORM_SCALE = 2.0 ** (LAYERS.bit_length() - 32)
#: counter word 3 carries the retry calls of a draw's rejected attempts from this bit on (module docstring)
RETRY_BIT = 24
_RETRY_UNIT = np.uint64(1 << RETRY_BIT)
#: retry calls a draw may make (the chance that one needs them all is below 10⁻¹⁰⁰)
RETRIES = 63


@njit(inline="always")
def signed_uniform(word):
    """The 24 bits j of ``word`` above its layer bits as (j + ½)·2⁻²³ − 1: a uniform in (−1, 1), symmetric about
    0, exact in float64 (the int64 conversion is one instruction, uint64's is not)."""
    return (np.float64(np.int64(word >> _LAYER_BITS)) + _HALF) * _UNIFORM_SCALE - 1.0


@njit(inline="always")
def retry_words(c0, c1, c2, c3, k0, k1, lane, m):
    """The four words of the m-th retry call of the normal on word ``lane`` (counter word 3 + 2²⁴·(1 + lane + 4m):
    the module docstring)."""
    return philox4x32_10(c0, c1, c2, c3 + _RETRY_UNIT * (np.uint64(1 + lane) + np.uint64(4 * m)), k0, k1)


@njit
def ziggurat_retry(word, c0, c1, c2, c3, k0, k1, lane):
    """The normal of word ``lane`` of the call at (c0, c1, c2, c3) once its first attempt ``word`` has failed the
    fast test: ZIGNOR's wedge test and tail (Doornik 2005, Algorithm ZIGNOR; Marsaglia's tail method), then new
    attempts, every further word from :func:`retry_words` m = 0, 1, …: deterministic, so the normal stays a pure
    function of its counter.  After RETRIES calls (probability below 10⁻¹⁰⁰) the last attempt's u·X[i] stands."""
    layer, u = word & _LAYER_MASK, signed_uniform(word)
    for m in range(RETRIES):
        w0, w1, _, _ = retry_words(c0, c1, c2, c3, k0, k1, lane, m)
        if layer == 0:  # the tail beyond R: x = R + E₁/R accepted when 2E₂ > (E₁/R)², E₁, E₂ exponential
            for tail in range(m + 1, RETRIES + 1):
                x = -np.log(open_uniform(w0)) / _ZIG_R
                y = -np.log(open_uniform(w1))
                if y + y > x * x or tail == RETRIES:
                    return _ZIG_R + x if u > 0.0 else -_ZIG_R - x
                w0, w1, _, _ = retry_words(c0, c1, c2, c3, k0, k1, lane, tail)
        x = u * _ZIG_X[layer]
        # the wedge between X[layer+1] and X[layer]: accept under f with a uniform height between the layer's edges
        if _ZIG_F[layer] + open_uniform(w0) * (_ZIG_F[layer + 1] - _ZIG_F[layer]) < np.exp(-0.5 * x * x):
            return x
        layer, u = w1 & _LAYER_MASK, signed_uniform(w1)  # a new attempt, from the retry call's second word
        if abs(u) < _ZIG_RATIO[layer]:
            return u * _ZIG_X[layer]
    return u * _ZIG_X[layer]


@njit(inline="always")
def ziggurat(word, c0, c1, c2, c3, k0, k1, lane):
    """The standard normal of word ``lane`` (0–3) of the Philox call at (c0, c1, c2, c3): u·X[i] when the word's
    uniform u falls inside layer i's rectangle (about 98.5 % of words: a mask, a conversion, a compare and a
    multiply), else :func:`ziggurat_retry`."""
    layer = word & _LAYER_MASK
    u = signed_uniform(word)
    if abs(u) < _ZIG_RATIO[layer]:
        return u * _ZIG_X[layer]
    return ziggurat_retry(word, c0, c1, c2, c3, k0, k1, lane)


@njit(inline="always")
def counter_words(step, member, body, stage):
    """The Philox counter of (step, member, body, stage) (module docstring)."""
    s = np.uint64(step)
    return (s & _MASK, np.uint64(member), np.uint64(body),
            np.uint64(stage) + np.uint64(STAGES) * (s >> _SHIFT))


@njit(inline="always")
def gaussian_triple(step, member, body, stage, k0, k1):
    """Three independent standard normals for (step, member, body, stage) under key (k0, k1): the Ziggurat
    (:func:`ziggurat`) on words 0, 1, 2 of one Philox call."""
    c0, c1, c2, c3 = counter_words(step, member, body, stage)
    r0, r1, r2, _ = philox4x32_10(c0, c1, c2, c3, k0, k1)
    return (ziggurat(r0, c0, c1, c2, c3, k0, k1, 0), ziggurat(r1, c0, c1, c2, c3, k0, k1, 1),
            ziggurat(r2, c0, c1, c2, c3, k0, k1, 2))


@njit(inline="always")
def gaussian_pair(step, member, body, stage, k0, k1):
    """Two independent standard normals for (step, member, body, stage): words 0 and 1 of one Philox call
    (the first two of :func:`gaussian_triple` at the same counter)."""
    c0, c1, c2, c3 = counter_words(step, member, body, stage)
    r0, r1, _, _ = philox4x32_10(c0, c1, c2, c3, k0, k1)
    return ziggurat(r0, c0, c1, c2, c3, k0, k1, 0), ziggurat(r1, c0, c1, c2, c3, k0, k1, 1)


@njit(inline="always")
def gaussian_quartet(step, member, body, stage, k0, k1):
    """Four independent standard normals for (step, member, body, stage) under key (k0, k1): the Ziggurat on the
    four words of one Philox call (the first three are :func:`gaussian_triple`'s)."""
    c0, c1, c2, c3 = counter_words(step, member, body, stage)
    r0, r1, r2, r3 = philox4x32_10(c0, c1, c2, c3, k0, k1)
    return (ziggurat(r0, c0, c1, c2, c3, k0, k1, 0), ziggurat(r1, c0, c1, c2, c3, k0, k1, 1),
            ziggurat(r2, c0, c1, c2, c3, k0, k1, 2), ziggurat(r3, c0, c1, c2, c3, k0, k1, 3))


@njit(cache=True)
def gaussian_block(steps, member, bodies, stage, k0, k1):
    """The :func:`gaussian_quartet` of every (step, body) for step < ``steps``, body < ``bodies``, as a (steps,
    bodies, 4) array: the sampler's test draws its millions of normals through the kernels' own code."""
    out = np.empty((steps, bodies, 4))
    key0, key1 = np.uint64(k0), np.uint64(k1)
    for j in range(steps):
        for i in range(bodies):
            out[j, i, 0], out[j, i, 1], out[j, i, 2], out[j, i, 3] = gaussian_quartet(j, member, i, stage, key0,
                                                                                      key1)
    return out


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
