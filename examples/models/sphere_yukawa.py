"""Charged colloids on a droplet: particles on the unit sphere repelling one another by a screened Coulomb
(Yukawa, Debye–Hückel) pair potential of the chord r (m),

    φ(r) = ε (σ/r) exp(−(r − σ)/λ_D)            (J; φ(σ) = ε),

cut off at r_c and shifted by φ(r_c), which armillary does itself, so the energy is continuous there.  With
r_c = σ + 6λ_D the force's jump at the cutoff is below 10⁻³ of its value at σ.  The defaults suit 10⁴
particles (σ = 0.038 m, about their nearest-neighbour chord); no initial_state: run it with
`initial = "particles"` (the molecular-dynamics tutorial, docs/tutorials/molecular-dynamics.md).

A Morse variant changes one line: φ(r) = ε[(1 − exp(−(r − σ)/a))² − 1], attractive at long range.
"""
from armillary.model import exp

space = "sphere_product"
parameters = {"m": 1.0, "epsilon": 1.0, "sigma": 0.038, "debye": 0.0127, "cutoff": 0.114}
units = {"m": "kg", "epsilon": "J", "sigma": "m", "debye": "m", "cutoff": "m"}


def inertia(p):
    """Each particle's mass (kg)."""
    return p.m


def pair_potential(r, p):
    """φ(r) = ε (σ/r) exp(−(r − σ)/λ_D) (J) of the chord r (m)."""
    return p.epsilon * p.sigma / r * exp(-(r - p.sigma) / p.debye)
