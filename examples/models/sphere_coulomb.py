"""Unit charges on the unit sphere repelling by Coulomb's law of the chord r (m), summed over every pair:

    φ(r) = k / r            (J),

with no cutoff (``cutoff = inf``: φ(∞) = 0, so nothing is shifted).  The same energy as the built-in
``sphere_riesz`` at s = 1, written as a model file: change φ to try another long-range law (k/r² , a screened
k exp(−r/λ)/r, …); a φ that does not vanish at infinity (a logarithm) needs a finite cutoff.  Run it with
``initial = "uniform"`` and ``bodies = N`` and ``method = "fire"`` for the Thomson problem's minima.
"""

space = "sphere_product"
parameters = {"m": 1.0, "k": 1.0, "cutoff": float("inf")}
units = {"m": "kg", "k": "J·m", "cutoff": "m"}


def inertia(p):
    """Each particle's mass (kg)."""
    return p.m


def pair_potential(r, p):
    """φ(r) = k / r (J) of the chord r (m)."""
    return p.k / r
