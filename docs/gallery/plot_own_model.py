"""
Your own model: a double pendulum on a free cart, midpoint against rk4
======================================================================

A model file states the physics in a few lines of Python; Armillary derives the equations of motion from it
(sympy), generates Numba kernels and registers the result as a system that every method of its state space
runs. This example loads ``examples/models/cart_pendulum.py`` (a cart on a horizontal rail carrying two
links with point masses at their ends, in joint coordinates) with :func:`armillary.load_model`, integrates
it with the canonical implicit ``midpoint`` rule and with ``rk4``, and compares their energy errors and the
cart's horizontal momentum, which the model conserves.
"""

# %%
# The model file
# --------------
# The whole file: the space (``generalised``: joint coordinates q with speeds u = q̇), the coordinates, the
# parameters with units, the mass matrix M(q) of T = ½ uᵀ M u, the potential and a release state. Lagrange's
# equations, with their Christoffel terms, are derived from ``mass_matrix`` and ``potential``.
import pathlib

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import armillary  # noqa: E402

# this file's folder, docs/gallery (sphinx-gallery runs an example in its folder, without __file__)
gallery = pathlib.Path(globals().get("__file__", "plot_own_model.py")).resolve().parent
path = gallery.parents[1] / "examples" / "models" / "cart_pendulum.py"
print(path.read_text())

# %%
# Loading it
# ----------
# :func:`armillary.load_model` returns the system with the file's defaults (any parameter may be given as a
# keyword). Its name carries a hash of the file's text; the derivation and the compiled kernels are cached on
# disk, so a second load takes well under a second.
cart = armillary.load_model(path)
state0 = {name: value[None] for name, value in cart.initial_state().items()}     # q (1, 3), u (1, 3)
print(f"system {cart.name}: parameters "
      + ", ".join(f"{name} = {np.asarray(value).tolist()}" for name, value in cart.params.items()))
print(f"release state: q = {state0['q'][0].round(4).tolist()} (cart x in m, link angles from upright in rad), "
      f"u = {state0['u'][0].tolist()}")

# %%
# 2000 s: 10⁵ steps of h = 0.02 s with each method
# ------------------------------------------------
# The released chain tumbles chaotically. ``midpoint`` steps the canonical coordinates (q, p = M(q) u) by the
# implicit midpoint rule, solved by Newton with a complex-step Jacobian (symplectic and symmetric, second
# order); ``rk4`` integrates (q, u) directly.
h, steps = 0.02, 100_000
runs = {method: armillary.integrate(cart, method, state0, h, steps, save_every=2) for method in ("midpoint", "rk4")}
m_cart, (m1, m2), (l1, l2) = float(cart.params["cart_mass"]), cart.params["m"], cart.params["l"]


def positions(q):
    """The cart's and the two masses' (x, y) (m), from the model file's geometry (gravity along −y)."""
    x, a1, a2 = q[..., 0], q[..., 1], q[..., 2]
    mass1 = np.stack([x - l1 * np.sin(a1), l1 * np.cos(a1)], axis=-1)
    mass2 = mass1 + np.stack([-l2 * np.sin(a2), l2 * np.cos(a2)], axis=-1)
    return np.stack([x, np.zeros_like(x)], axis=-1), mass1, mass2


def horizontal_momentum(q, u):
    """p_x = ∂T/∂ẋ, the first row of M(q) u (kg·m/s): conserved, since nothing in the model depends on x."""
    return ((m_cart + m1 + m2) * u[..., 0] - l1 * np.cos(q[..., 1]) * (m1 + m2) * u[..., 1]
            - l2 * np.cos(q[..., 2]) * m2 * u[..., 2])


results = {}
for method, run in runs.items():
    assert run.status[0] == 0, f"{method} failed"
    q, u = run.q[0], run.u[0]
    energy_error = np.abs(run.energy[0] - run.energy[0, 0])
    tenth = energy_error.size // 10
    first, last = energy_error[1:tenth + 1].max(), energy_error[-tenth:].max()
    cart_xy, mass1, mass2 = positions(q)
    centre_x = (m_cart * cart_xy[:, 0] + m1 * mass1[:, 0] + m2 * mass2[:, 0]) / (m_cart + m1 + m2)
    p_x = horizontal_momentum(q, u)
    results[method] = energy_error, p_x, centre_x
    print(f"{method:>8}: max |E - E0| in the first tenth {first:.3f} J, in the last {last:.3f} J "
          f"({last / first:.2f}x); max |p_x| {np.abs(p_x).max():.1e} kg m/s; the centre of mass moved by up to "
          f"{np.abs(centre_x - centre_x[0]).max():.1e} m")
print(f"E0 = {runs['midpoint'].energy[0, 0]:.4f} J; the midpoint's Newton solves took at most "
      f"{runs['midpoint'].solver_iterations[0]} iterations per step")
worst_midpoint = results["midpoint"][0].max()
passes = runs["rk4"].time[np.argmax(results["rk4"][0] > worst_midpoint)]
print(f"rk4's energy error first exceeds the midpoint's worst ({worst_midpoint:.3f} J) at t = {passes:.0f} s")

# %%
# The midpoint rule's energy error is bounded: its worst in the last 200 s is its worst in the first 200 s.
# rk4's starts far smaller (10⁻⁷ J after the first steps) but grows with the steps taken, passes the
# midpoint's worst after about 150 s and keeps growing. The horizontal momentum is a
# conserved canonical momentum (x is cyclic), so the midpoint rule, whose ṗ_x is exactly 0 at every step,
# keeps it to round-off and the system's centre of mass stays where it was released (to within the
# method's bounded position error, millimetres here); rk4, in (q, u), lets p_x wander and the centre of
# mass with it. The two runs part after about 7 s, as the chaotic motion amplifies their differences.
fig, axes = plt.subplots(2, 2, figsize=(13, 8), constrained_layout=True)
run = runs["midpoint"]
cart_xy, mass1, mass2 = positions(run.q[0])
axes[0, 0].plot(mass2[:76, 0], mass2[:76, 1], color="tab:orange", linewidth=0.8, label="outer mass, 0–3 s")
for k in range(0, 76, 15):                              # the chain every 0.6 s
    shade = str(0.75 - 0.75 * k / 75)
    xs = [cart_xy[k, 0], mass1[k, 0], mass2[k, 0]]
    ys = [cart_xy[k, 1], mass1[k, 1], mass2[k, 1]]
    axes[0, 0].plot(xs, ys, "-o", color=shade, markersize=4, linewidth=1.2)
    axes[0, 0].plot(cart_xy[k, 0], 0.0, "s", color=shade, markersize=10)
axes[0, 0].axhline(0.0, color="0.6", linewidth=0.5)
axes[0, 0].set(aspect="equal", xlabel="x (m)", ylabel="y (m)",
               title="midpoint: the chain at t = 0, 0.6, …, 3 s (light to dark)")
axes[0, 0].legend(loc="lower left")

first_20 = run.time <= 20.0
for column, label in enumerate(("cart x (m)", "link 1 angle (rad)", "link 2 angle (rad)")):
    axes[0, 1].plot(run.time[first_20], run.q[0, first_20, column], label=f"midpoint: {label}")
    axes[0, 1].plot(run.time[first_20], runs["rk4"].q[0, first_20, column], color="k", linestyle=":", linewidth=0.8)
axes[0, 1].set(xlabel="t (s)", title="coordinates over 20 s (dotted: rk4)")
axes[0, 1].legend(loc="lower left", fontsize="small")

colours = {"midpoint": "tab:blue", "rk4": "tab:red"}
for method, (energy_error, p_x, centre_x) in results.items():
    t = runs[method].time
    axes[1, 0].plot(t[1::50], energy_error[1::50], color=colours[method], linewidth=0.8, label=method)
    axes[1, 1].plot(t, centre_x - centre_x[0], color=colours[method], label=method)
axes[1, 0].set(yscale="log", xlabel="t (s)", ylabel="|E − E0| (J)", title="energy error, 10⁵ steps of h = 0.02 s")
axes[1, 0].legend(loc="lower right")
axes[1, 1].set(xlabel="t (s)", ylabel="Δx of the centre of mass (m)",
               title="horizontal centre of mass (p_x = 0 at release)")
axes[1, 1].legend(loc="lower left")
