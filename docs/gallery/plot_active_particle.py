"""
An active particle on a sphere: the oscillating return
======================================================

A self-propelled particle on the unit sphere follows a great circle until its heading diffuses away. So it
comes back towards where it started, and the mean overlap ⟨q(t)·q(0)⟩ oscillates (Castro-Villarreal &
Sevilla 2018). ``brownian`` with ``active = {speed, rotational_diffusion}`` carries each heading in ω,
transports it along the geodesic, and turns it by its rotational diffusion. The closed form follows from
the moment equations d⟨u⟩/dt = v₀⟨w⟩ and d⟨w⟩/dt = −v₀⟨u⟩ − D_r⟨w⟩, with u = q(t)·q(0) and
w = n(t)·q(0).
"""

# %%
# 4000 free particles at three speeds
# -----------------------------------
# Each member holds two free particles: two pendula with a negligible g and no spring between them.
# T = 0 leaves no translational noise. D_r = 1 rad²/s.
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import armillary  # noqa: E402

free = armillary.get_system("spring_pendula", m=[1.0, 1.0], l=[1.0, 1.0], g=1e-12, gravity_direction=[0.0, 0.0, -1.0],
                            pivots=[[0.0, 0.0, 0.0], [5.0, 0.0, 0.0]], springs=[[0, 1]], kappa=[0.0])
rng = np.random.default_rng(0)
q = rng.normal(size=(2000, 2, 3))
q /= np.linalg.norm(q, axis=-1, keepdims=True)
omega = np.cross(q, rng.normal(size=q.shape))   # tangent: its direction is each heading
fig, ax = plt.subplots(figsize=(6, 3.5), layout="constrained")
for speed in (1.0, 2.0, 4.0):
    run = armillary.integrate(free, "brownian", {"q": q, "omega": omega}, 0.002, 2000, 20, temperature=0.0, seed=4,
                              active={"speed": speed, "rotational_diffusion": 1.0})
    overlap = np.einsum("mtbk,mbk->t", run.q, q) / (2 * len(q))
    frequency = np.sqrt(speed ** 2 - 0.25)             # Ω = √(v₀² − D_r²/4), above critical damping
    closed = np.exp(-run.time / 2) * (np.cos(frequency * run.time) + np.sin(frequency * run.time) / (2 * frequency))
    print(f"v0 = {speed}: largest deviation from the closed form {np.abs(overlap - closed).max():.3f}")
    ax.plot(run.time, overlap, label=f"v₀ = {speed} rad/s")
    ax.plot(run.time, closed, "k:", linewidth=0.8)
ax.axhline(0.0, color="0.7", linewidth=0.5)
ax.set_xlabel("t (s)")
ax.set_ylabel("⟨q(t)·q(0)⟩")
ax.set_title("active Brownian particles on the unit sphere (dotted: closed form)")
ax.legend()
