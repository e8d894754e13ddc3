"""
A crystal on a droplet: Langevin annealing and the twelve disclinations
========================================================================

1000 Lennard-Jones particles on the unit sphere, from a random packing at T* = 1 (a liquid), cooled
linearly to T* = 0.1 by ``langevin`` (geodesic BAOAB) with ``cooling_rate``, one member in the
system-parallel mode. The Voronoi tessellation counts each particle's neighbours: a triangular crystal is
six-fold everywhere except where Euler's theorem forces Σ(6 − z) = 12, the disclinations, which gather into
isolated five-folds and scars (Bausch et al. 2003). This is ``examples/droplet-crystal.toml`` in Python.
"""

# %%
# The anneal
# ----------
# Reduced units ε = m = 1, areal density ρ* = 0.8, cutoff 2.5σ, h = 0.005τ and friction 1/τ. The bath's
# temperature falls as T(t) = 1 − rate·t over 40000 steps (200τ), and the state is saved every 4000 steps.
import pathlib
import tempfile

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import armillary  # noqa: E402
from armillary.ensemble.particles import coordination_figure, defect_clusters, voronoi_order  # noqa: E402
from armillary.kernels.geometry import random_uniform_separated, thermal_velocities  # noqa: E402

n = 1000
sigma = np.sqrt(0.8 * 4 * np.pi / n)
tau, steps = sigma, 40_000
droplet = armillary.get_system("sphere_lj", epsilon=1.0, sigma=sigma, cutoff=2.5 * sigma)
q = random_uniform_separated(n, 0.8 * sigma, 3)
state = {"q": q[None], "omega": thermal_velocities(q, 1.0, 1.0, seed=1)[None]}
run = armillary.integrate(droplet, "langevin", state, 0.005 * tau, steps, 4000, temperature=1.0,
                          cooling_rate=0.9 / (steps * 0.005 * tau), friction=1.0 / tau, seed=2, mode="system")
orders = [voronoi_order(points) for points in run.q[0]]
for t, kinetic, order in zip(run.time / tau, run.temperature[0], orders):
    print(f"t = {t:5.0f} tau  T = {kinetic:.3f}  six-fold {order.six_fold_fraction:.2f}  "
          f"<|psi6|> {order.mean_abs_psi6:.2f}  sum(6 - z) = {order.total_charge}")

# %%
# Order against temperature
# -------------------------
# The six-fold share and the mean bond-orientational order rise as the liquid freezes.
fig, ax = plt.subplots(figsize=(6, 3.5), layout="constrained")
ax.plot(run.temperature[0], [o.six_fold_fraction for o in orders], "o-", label="six-fold share")
ax.plot(run.temperature[0], [o.mean_abs_psi6 for o in orders], "s-", label="mean |ψ₆|")
ax.invert_xaxis()
ax.set_xlabel("kinetic temperature T* (J)")
ax.set_ylabel("order")
ax.legend()

# %%
# The crystal's defects
# ---------------------
# Clusters of Voronoi-adjacent defects and their net charges. A perfect anneal leaves twelve of +1; what this
# cooling rate leaves is printed. The figure shows the sphere from both sides, with five-folds red,
# seven-folds blue and six-folds grey.
crystal = orders[-1]
charges = sorted(c.charge for c in defect_clusters(run.q[0, -1], crystal) if c.charge != 0)
print(f"charged defect clusters: {charges} (net {sum(charges)})")
picture = pathlib.Path(tempfile.mkdtemp(prefix="armillary-gallery-")) / "droplet_coordination.png"
coordination_figure(run.q[0, -1], crystal.coordination, picture)
fig, ax = plt.subplots(figsize=(8, 4.2), layout="constrained")
ax.imshow(plt.imread(picture))
ax.set_axis_off()
