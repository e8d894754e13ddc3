"""
Bounded energy error against drift: vi and rk4 on bodies on a sphere
====================================================================

The variational integrator ``vi`` does not conserve the energy exactly, but its error is a function of
where the system is: it rises and falls with the motion and does not accumulate. The classical Runge–Kutta
method ``rk4`` is far more accurate over a short run, but what it loses it keeps. This example measures both on
Example 2 of Lee, Leok & McClamroch (``sphere_nbody``, preset ``paper``: three unit masses on the unit
sphere, γ = 1) for a small ensemble, with :func:`armillary.integrate`, and plots the
median and the 5–95 % envelope of the relative energy error ``|ΔE|/|E0|`` against time.
"""

# %%
# The ensemble
# ------------
# 32 members: the paper's initial state and 31 copies moved along random tangent directions by 1e-4
# (the space's retraction, so every q_i stays a unit vector). Both methods start from the same states.
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import xarray as xr  # noqa: E402

import armillary  # noqa: E402
from armillary.ensemble.analysis import growth_law, quantile_envelope  # noqa: E402

three_body = armillary.get_system("sphere_nbody", "paper")
start = three_body.initial_state()                      # {"q": (3, 3), "omega": (3, 3)}
members = 32
rng = np.random.default_rng(2)
normals = rng.standard_normal((members, three_body.space.normal_count(three_body.n_bodies)))
normals[0] = 0.0                                        # member 0 is the paper's own state
state0 = three_body.space.perturb(start, normals, 1e-4)


def relative_error(run):
    """|E(t) − E(0)| / |E(0)| per member as an xarray DataArray (member, time)."""
    error = np.abs(run.energy - run.energy[:, :1]) / np.abs(run.energy[:, :1])
    return xr.DataArray(error, dims=("member", "time"), coords={"time": run.time})


# %%
# The paper's run: 10 s at h = 1e-3
# ---------------------------------
# 10⁴ steps of each method, every step saved. The paper stops at T = 10 s; just after it (t ≈ 10.55 s)
# two of the bodies nearly collide, which no fixed step resolves.
h, steps = 1e-3, 10_000
paper = {method: armillary.integrate(three_body, method, state0, h, steps, outputs=("energy",))
         for method in ("vi", "rk4")}
error = {method: relative_error(run) for method, run in paper.items()}
for method, run in paper.items():
    assert np.all(run.status == 0), f"{method}: a member failed"
    e = error[method].values
    print(f"{method:>3}: the paper's state max |dE|/|E0| = {e[0].max():.4e} (at t = {run.time[e[0].argmax()]:.2f} s); "
          f"ensemble median of the max "
          f"{np.median(e.max(axis=1)):.2e}; median at t = 2.5, 5, 7.5, 10 s: "
          + ", ".join(f"{np.median(e[:, k]):.1e}" for k in (2500, 5000, 7500, 10_000)))
print("the paper reports max |dE|/|E0| = 1.1717e-4 for the VI at h = 1e-3")

# %%
# vi reproduces the paper's number to 1 % (the paper printed its initial state to four digits; this is the
# exact state behind them). Its error is largest while two bodies pass close to each other (the worst
# moment is at t = 3.58 s) and comes back down once they are apart: at the quiet moments t = 2.5 s and
# 7.5 s the median member's error is about 1e-8 both times. rk4's error also peaks in the encounter, but
# the encounter leaves a step behind: between the same two moments its median grew some 200-fold. Over
# these 10 s rk4 is still far more accurate. Which one wins over a long run depends on how long, and that
# needs a motion that can be followed for many steps.
#
# Many steps: two bodies of the same system circling the pole
# -----------------------------------------------------------
# The same ``sphere_nbody`` system (m = 1, γ = 1) with two bodies 90° apart, which circle the pole
# without ever approaching, perturbed by 0.02 per member (as in the test suite's 10⁶-step check).
# 40 members, 6×10⁴ steps of h = 0.05 (3000 s, 675 orbits), energy every 300 steps.
two_body = armillary.get_system("sphere_nbody", m=[1.0, 1.0], gamma=1.0)
members = 40
theta = np.radians(45.0)
q = np.array([[np.sin(theta), 0.0, np.cos(theta)], [-np.sin(theta), 0.0, np.cos(theta)]])
rate = np.sqrt(1.0 / (1.0 - (q[0] @ q[1]) ** 2) / (np.sin(theta) * np.cos(theta)))   # attraction = centripetal force
omega = rate * (np.array([0.0, 0.0, 1.0]) - q[:, 2:3] * q)
q = q + 0.02 * rng.standard_normal((members, 2, 3))
q /= np.linalg.norm(q, axis=-1, keepdims=True)
omega = omega + 0.02 * rng.standard_normal((members, 2, 3))
omega -= np.sum(omega * q, axis=-1, keepdims=True) * q                          # tangent to the sphere
h_long, steps_long = 0.05, 60_000
long = {method: armillary.integrate(two_body, method, {"q": q, "omega": omega}, h_long, steps_long,
                                    save_every=300, outputs=("energy",))
        for method in ("vi", "rk4")}
long_error = {method: relative_error(run) for method, run in long.items()}
envelope = {method: quantile_envelope(e) for method, e in long_error.items()}   # (quantile, time): 5, 50, 95 %
for method, e in long_error.items():
    assert np.all(long[method].status == 0), f"{method}: a member failed"
    law = growth_law(e)
    tenth = e.sizes["time"] // 10
    first, last = (float(np.median(e.values[:, part].max(axis=1))) for part in (slice(1, tenth + 1),
                                                                              slice(-tenth, None)))
    print(f"{method:>3}: median max |dE|/|E0| in the first tenth {first:.2e}, in the last {last:.2e} "
          f"({last / first:.1f}x); growth exponent of the ensemble RMS alpha = {law['alpha']:.2f} "
          f"[{law['alpha_low']:.2f}, {law['alpha_high']:.2f}]")


def stays_above(a, b):
    """The first saved time from which ``a`` exceeds ``b`` at every later sample (s)."""
    above = (a > b).values
    from_here_on = np.flip(np.cumprod(np.flip(above))).astype(bool)
    return float(a.time[np.argmax(from_here_on)])


rk4_median = envelope["rk4"].sel(quantile=0.5)
crossing = {level: stays_above(rk4_median, envelope["vi"].sel(quantile=level)) for level in (0.5, 0.95)}
for level, t in crossing.items():
    print(f"rk4's median error stays above vi's {level:.0%} quantile from t = {t:.0f} s ({t / h_long:.0f} steps) on")

# %%
# vi's error is flat (α ≈ 0: bounded; the wide band is the phase of its oscillation at each sample), rk4's
# grows in proportion to time (α = 1: a secular drift, the same in every member). rk4 starts about 5 times
# below vi, stays above vi's median for good after some 14 000 steps and above its 95 % quantile after
# some 43 000. The energy is conserved by neither, but only rk4's error is a sum over the steps taken.
#
# The figure
# ----------
fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), constrained_layout=True)
colours = {"vi": "tab:blue", "rk4": "tab:red"}
for axis, errors, title in ((axes[0], error, "Example 2, three bodies, h = 1e-3"),
                            (axes[1], long_error, "two bodies circling the pole, h = 0.05")):
    for method, e in errors.items():
        band = quantile_envelope(e).isel(time=slice(1, None))
        t = band.time.values
        axis.fill_between(t, band.sel(quantile=0.05), band.sel(quantile=0.95), color=colours[method], alpha=0.25,
                          linewidth=0)
        axis.plot(t, band.sel(quantile=0.5), color=colours[method], label=f"{method} (median, 5–95 %)")
    axis.set(yscale="log", xlabel="t (s)", ylabel="|ΔE| / |E0|", title=title)
    axis.legend(loc="lower right")
axes[1].axvline(crossing[0.5], color="0.4", linestyle=":", linewidth=1)
fig.suptitle("Energy error of a variational integrator (vi) and of rk4 on sphere_nbody")
