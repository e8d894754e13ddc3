"""The Ziggurat normals of kernels.noise against the standard normal, from fixed seeds, and their counter.

4·10⁶ normals (1000 steps × 1000 bodies × the four words of a call, key of seed 2026, stage 0) are drawn by the
kernels' own compiled sampler (:func:`kernels.noise.gaussian_block`).  Each statistic is compared with its value
under N(0, 1) within 5 of its standard errors under N(0, 1) (the draws are independent, so the standard error of a
sample mean of g(ξ) is sd(g(ξ))/√N):

==============  ============  ==================================  =================
statistic       expected      sd of one term                      standard error
==============  ============  ==================================  =================
mean            0             1                                   5.0·10⁻⁴
mean of ξ²      1             √2                                  7.1·10⁻⁴
mean of ξ⁴      3 (excess 0)  √(105 − 9) = √96                    4.9·10⁻³
P(|ξ| > 4)      6.334·10⁻⁵    √(p(1 − p))                         4.0·10⁻⁶ (6.3 %)
==============  ============  ==================================  =================

and a χ² test of 100 equiprobable bins at p > 10⁻⁴ checks the shape between (each layer's wedge and the tail beyond
R = 3.65).  A sampler whose variance is 1 % off (the same draws × √1.01) is 14 standard errors off in ξ² and fails.
The seeds are fixed, so the test gives the same answer every run; a correct sampler would fail one of the four 5σ
checks on a fresh seed with probability about 2·10⁻⁶.
"""

import math

import numpy as np
import pytest
from scipy import stats

from armillary.kernels import noise
from armillary.kernels.noise import gaussian_block, noise_key

STEPS, BODIES = 1000, 1000
SIGMAS = 5.0


@pytest.fixture(scope="module")
def draws():
    k0, k1 = noise_key(2026)
    return gaussian_block(STEPS, 7, BODIES, 0, k0, k1).ravel()


def rejected(xi):
    """The checks of the module docstring that ``xi`` fails (names), empty for a sample of N(0, 1)."""
    n = xi.size
    tail = math.erfc(4.0 / math.sqrt(2.0))
    checks = {"mean": (xi.mean(), 0.0, 1.0), "variance": ((xi * xi).mean(), 1.0, math.sqrt(2.0)),
              "kurtosis": ((xi ** 4).mean(), 3.0, math.sqrt(96.0)),
              "P(|xi| > 4)": ((np.abs(xi) > 4.0).mean(), tail, math.sqrt(tail * (1.0 - tail)))}
    failed = [name for name, (value, expected, sd) in checks.items()
              if abs(value - expected) > SIGMAS * sd / math.sqrt(n)]
    counts = np.bincount(np.searchsorted(stats.norm.ppf(np.linspace(0.0, 1.0, 101)[1:-1]), xi), minlength=100)
    if stats.chisquare(counts).pvalue < 1e-4:
        failed.append("histogram")
    return failed


def test_ziggurat_normals_have_the_normal_moments_and_tails(draws):
    assert draws.size == 4 * STEPS * BODIES
    assert rejected(draws) == []
    assert (np.abs(draws) > noise._ZIG_R).sum() > 800  # the tail beyond R is drawn (P = 2.6·10⁻⁴ each)


def test_a_one_percent_variance_error_is_rejected(draws):
    assert "variance" in rejected(draws * math.sqrt(1.01))
    assert "variance" in rejected(draws * math.sqrt(0.99))


def test_tables_close_at_marsaglia_and_tsangs_values():
    """R and the layers' area V of the Ziggurat of 256 layers (Marsaglia & Tsang 2000: r = 3.6541528853610088,
    v = 0.00492867323399); the top layer ends at f(0) = 1."""
    area = noise._ZIG_X[0] * math.exp(-0.5 * noise._ZIG_R ** 2)
    assert noise._ZIG_R == pytest.approx(3.6541528853610088, abs=1e-12)
    assert area == pytest.approx(0.00492867323399, rel=1e-11)
    top = noise._ZIG_X[noise.LAYERS - 1]
    assert top * (1.0 - math.exp(-0.5 * top * top)) == pytest.approx(area, rel=1e-12)


def test_normals_are_a_pure_function_of_their_counter():
    k0, k1 = noise_key(5)
    first = gaussian_block(50, 3, 400, 0, k0, k1)
    assert first.tobytes() == gaussian_block(50, 3, 400, 0, k0, k1).tobytes()
    assert first[:20, :100].tobytes() == gaussian_block(20, 3, 100, 0, k0, k1).tobytes()  # any block of them
    for other in (gaussian_block(50, 3, 400, 1, k0, k1), gaussian_block(50, 4, 400, 0, k0, k1),
                  gaussian_block(50, 3, 400, 0, *noise_key(6))):
        assert (other == first).mean() < 1e-3  # another stage, member or key: other numbers (2³² values: rare ties)
    assert np.unique(first).size > 0.999 * first.size  # bodies and steps differ too
