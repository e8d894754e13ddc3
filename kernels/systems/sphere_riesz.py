"""Charges on the unit sphere with the Riesz s-energy, summed over every pair (no cutoff).

M = diag(m); distances are chords r_ij = ‖q_i − q_j‖ and

    V = k Σ_{i<j} r_ij^{−s}        (s > 0; s = 1: Coulomb charges, the Thomson problem),
    V = −k Σ_{i<j} ln r_ij          (s = 0: the logarithmic energy, Smale's 7th problem),

∂V/∂q_i = Σ_{j≠i} g(r_ij²)(q_i − q_j) with g = φ'(r)/r = −s k r^{−s−2} (s > 0), −k r^{−2} (s = 0).
The sum runs over every pair whatever N (a long-range potential has no cutoff): O(N²) per evaluation.
The putative ground states of s = 1 (Wales, McKay & Altschuler, Phys. Rev. B 79, 224115 (2009)) are the
test oracles of ``method = "fire"``: 49.165253058 (N = 12, the icosahedron), 412.261274651 (N = 32),
4448.350634331 (N = 100), for k = 1.

s = 1 and s = 2 take a square root or nothing where other s take a power, so the Coulomb sum needs no
transcendental function (its pair costs one square root and one division).
"""

import numpy as np

from ..geometry import fibonacci_sphere, vortex_velocities
from ..lanes import lane_function
from .base import SCALAR, PairPotential, Parameter, Preset, SystemDefinition, all_pairs

#: the exponents with their own branch (no ``pow``): the logarithm, Coulomb and the inverse square
LOG, COULOMB, INVERSE_SQUARE = 0.0, 1.0, 2.0


def _coefficients(params, n):
    """[k, s, −s k]: the strength, the exponent and the gradient factor's prefactor."""
    k = params["strength"]
    s = params["s"]
    return np.stack([k, s, np.where(s == LOG, -k, -s * k)], axis=1)


@lane_function
def pair_energy(r2, coef, b, i, j):
    """φ(r²) = k r^{−s} (s > 0) or −k ln r (s = 0) for the chord² r2 (J), lane b."""
    s = coef[1, b]
    if s == COULOMB:
        return coef[0, b] / np.sqrt(r2)
    if s == INVERSE_SQUARE:
        return coef[0, b] / r2
    if s == LOG:
        return -0.5 * coef[0, b] * np.log(r2)
    return coef[0, b] * r2 ** (-0.5 * s)


@lane_function
def pair_gradient_factor(r2, coef, b, i, j):
    """g(r²) = φ'(r)/r = −s k r^{−s−2} (s > 0), −k r^{−2} (s = 0) (J/m²): ∂V/∂q_i = Σ_j g(r_ij²)(q_i − q_j)."""
    s = coef[1, b]
    if s == COULOMB:
        inverse = 1.0 / np.sqrt(r2)
        return coef[2, b] * inverse * inverse * inverse
    if s == INVERSE_SQUARE or s == LOG:
        return coef[2, b] / (r2 * r2) if s == INVERSE_SQUARE else coef[2, b] / r2
    return coef[2, b] * r2 ** (-0.5 * s - 1.0)


#: V = Σ_{i<j} φ and ∂V/∂q over every pair
potential, gradient = all_pairs(pair_energy, pair_gradient_factor, "sphere_riesz")


def _fibonacci_32():
    """32 unit charges on the Fibonacci lattice (not the ground state, so they move), stirred by one Gaussian
    vortex (0.5 rad/s at its centre on the z axis, angular radius 40°) so that the motion is not a rigid turn."""
    q0 = fibonacci_sphere(32)
    omega0 = vortex_velocities(q0, np.array([[0.0, 0.0, 1.0]]), 0.5, np.radians(40.0))
    return Preset(doc="32 Coulomb charges (k = 1, m = 1) on the Fibonacci lattice, stirred by a Gaussian vortex "
                  "about z (0.5 rad/s, radius 40°)", params={}, state={"q": q0, "omega": omega0})


DEFINITION = SystemDefinition(
    name="sphere_riesz",
    summary="charges on the unit sphere: Coulomb (s = 1), Riesz s-energy or logarithmic energy, all pairs",
    parameters=(
        Parameter("m", SCALAR, "kg", "mass of each particle", default=1.0),
        Parameter("strength", SCALAR, "J·m^s", "k in V = k Σ r^{−s} (for charges e: e²/4πε₀)", default=1.0),
        Parameter("s", SCALAR, "1", "Riesz exponent s >= 0 (1: Coulomb, 0: logarithmic energy −k Σ ln r)",
                  default=1.0, check="nonnegative"),
    ),
    presets={"fibonacci_32": _fibonacci_32},
    diagonal_inertia=True,
    bodies=lambda params: None,
    inertia=lambda params, n: np.repeat(params["m"][:, np.newaxis], n, axis=1),
    coefficients=_coefficients,
    potential=potential,
    gradient=gradient,
    full_rotation_symmetry=True,
    pair=PairPotential(pair_energy, pair_gradient_factor, cutoff=lambda params: np.inf,
                       default_skin=lambda params: 0.0),
)
