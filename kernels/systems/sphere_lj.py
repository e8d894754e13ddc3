"""Lennard-Jones particles confined to the unit sphere (Lee–Leok–McClamroch, Example 6).

M = diag(m); distances are chords r_ij = ‖q_i − q_j‖ and, for r_ij < cutoff,
V = Σ_{i<j} 4ε[(σ/r)¹² − (σ/r)⁶] − V_c with V_c = 4ε[(σ/r_c)¹² − (σ/r_c)⁶] so V is continuous at the
cutoff (no cutoff: every pair, V_c = 0).  ∂V/∂q_i = Σ_{j≠i} 4ε(6σ⁶/r⁸ − 12σ¹²/r¹⁴)(q_i − q_j).
The number of particles is the second dimension of the initial state.
"""

import numpy as np

from ..geometry import icosphere, mesh_edges, vortex_velocities
from ..lanes import lane_function
from .base import SCALAR, PairPotential, Parameter, Preset, SystemDefinition, all_pairs

#: Example 6's initial velocity field (the paper gives none): two co-rotating Gaussian vortices with
#: centres 30° apart, each turning at 0.5 rad/s at its centre, angular radius 20°.
VORTEX_SEPARATION_DEG = 30.0
VORTEX_STRENGTH = 0.5  # rad/s
VORTEX_RADIUS_DEG = 20.0
#: default Verlet skin of the neighbour list, in units of σ (LAMMPS' default for LJ units)
SKIN_SIGMAS = 0.3


def lj_coefficients(params, n):
    """[4ε, σ⁶, σ¹², r_c², V_c] per member, from ``epsilon``, ``sigma`` and ``cutoff`` (members,) (also each type
    pair's of :mod:`kernels.systems.sphere_mixture`)."""
    eps4 = 4.0 * params["epsilon"]
    s6 = params["sigma"] ** 6
    rc = params["cutoff"]
    shift = np.where(np.isfinite(rc), eps4 * (s6**2 / rc**12 - s6 / rc**6), 0.0)
    return np.stack([eps4, s6, s6 * s6, rc * rc, shift], axis=1)


@lane_function
def pair_energy(r2, coef, b, i, j):
    """φ(r²) = 4ε[(σ²/r²)⁶ − (σ²/r²)³] − V_c for a chord² r2 < r_c², else 0 (J), lane b.

    The one LJ pair formula: the all-pairs lane functions below and the neighbour-list kernels of
    :mod:`kernels.neighbours` both call it (so both give the same pair terms bit for bit)."""
    inv6 = 1.0 / (r2 * r2 * r2)
    inside = 1.0 if r2 < coef[3, b] else 0.0
    return inside * (coef[0, b] * (coef[2, b] * inv6 * inv6 - coef[1, b] * inv6) - coef[4, b])


@lane_function
def pair_gradient_factor(r2, coef, b, i, j):
    """g(r²) = 4ε(6σ⁶/r⁸ − 12σ¹²/r¹⁴) for r2 < r_c², else 0 (J/m²): ∂V/∂q_i = Σ_j g(r_ij²)(q_i − q_j)."""
    inv2 = 1.0 / r2
    inv6 = inv2 * inv2 * inv2
    inside = 1.0 if r2 < coef[3, b] else 0.0
    return inside * coef[0, b] * inv2 * inv6 * (6.0 * coef[1, b] - 12.0 * coef[2, b] * inv6)


#: V = Σ_{i<j} φ and ∂V/∂q over every pair (the neighbour lists' kernels call the pair functions directly)
potential, gradient = all_pairs(pair_energy, pair_gradient_factor, "sphere_lj")


def zero_force_sigma(q: np.ndarray, edges: np.ndarray) -> float:
    """σ at which the LJ force vanishes at the mean neighbour chord (force zero at r = 2^{1/6} σ)."""
    chords = np.linalg.norm(q[edges[:, 0]] - q[edges[:, 1]], axis=1)
    return float(chords.mean() / 2.0 ** (1.0 / 6.0))


def _paper():
    """Example 6: 642 particles at the vertices of a level-3 icosphere, ε = 0.01, m = 1."""
    q0, faces = icosphere(3)
    half = np.radians(VORTEX_SEPARATION_DEG) / 2.0
    centres = np.array([[np.sin(half), 0.0, np.cos(half)], [-np.sin(half), 0.0, np.cos(half)]])
    omega0 = vortex_velocities(q0, centres, VORTEX_STRENGTH, np.radians(VORTEX_RADIUS_DEG))
    return Preset(
        doc="Example 6: 642 LJ particles (level-3 icosphere), ε = 0.01, σ at zero neighbour force, "
        "two co-rotating Gaussian vortices 30° apart (0.5 rad/s, radius 20°); run h = 0.005, T = 5",
        params={"m": 1.0, "epsilon": 0.01, "sigma": zero_force_sigma(q0, mesh_edges(faces)), "cutoff": None},
        state={"q": q0, "omega": omega0},
    )


DEFINITION = SystemDefinition(
    name="sphere_lj",
    summary="Lennard-Jones particles on the unit sphere (Example 6)",
    parameters=(
        Parameter("m", SCALAR, "kg", "mass of each particle", default=1.0),
        Parameter("epsilon", SCALAR, "J", "LJ well depth ε"),
        Parameter("sigma", SCALAR, "m", "LJ length σ (chord)"),
        Parameter("cutoff", SCALAR, "m", "chord cutoff r_c (none: all pairs)", default=None, check="cutoff"),
    ),
    presets={"paper": _paper},
    diagonal_inertia=True,
    bodies=lambda params: None,
    inertia=lambda params, n: np.repeat(params["m"][:, np.newaxis], n, axis=1),
    coefficients=lj_coefficients,
    potential=potential,
    gradient=gradient,
    full_rotation_symmetry=True,
    pair=PairPotential(pair_energy, pair_gradient_factor, cutoff=lambda params: params["cutoff"][0],
                       default_skin=lambda params: SKIN_SIGMAS * params["sigma"][0]),
)
