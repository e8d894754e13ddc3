"""
Surfaces of section and escape times: the double pendulum
=========================================================

Two pictures a chaos study is known by. The first is the double pendulum's surface of section: Example 1's
chain released in a vertical plane (it then stays in it, a planar double pendulum with two degrees of
freedom), with every upward crossing of its first link through the vertical (q₁ₓ = 0) located inside the
step by ``vi``'s own step (``[analysis] section``), drawn for 24 members: small swings trace closed curves,
large ones scatter over the chaotic sea. The second drives the chain at its base over a grid of torque
amplitudes and frequencies (``examples/escape-map.toml``) and stops each member the first time its first
link rises above the pivot's horizontal plane (``[analysis] escape``): the map of escape times.
"""

# %%
# The section
# -----------
# 24 members start at rest with the first link hanging (θ₁ = 0, on the section) and the second link raised
# by θ₂ = 0.1 … 2.6 rad in the xz-plane: from small swings to the chaotic regime. The initial states go to a
# ``.npz`` that the spec reads (``initial = "file"``); each member also carries a Benettin shadow for λ.
import pathlib
import re
import tempfile

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import armillary  # noqa: E402

# this file's folder, docs/gallery (sphinx-gallery runs an example in its folder, without __file__)
gallery = pathlib.Path(globals().get("__file__", "plot_section_and_escape.py")).resolve().parent
examples = gallery.parents[1] / "examples"
workdir = pathlib.Path(tempfile.mkdtemp(prefix="armillary-gallery-"))

raised = np.linspace(0.1, 2.6, 24)
q0 = np.zeros((24, 2, 3))
q0[:, 0, 2] = 1.0                                   # gravity along +z: the first link hangs at q₁ = e_z
q0[:, 1, 0], q0[:, 1, 2] = np.sin(raised), np.cos(raised)
np.savez(workdir / "planar.npz", q0=q0, omega0=np.zeros_like(q0))
(workdir / "section.toml").write_text(f"""
[system]
name = "spherical_chain"
preset = "paper"

[integrator]
method = "vi"
dt = 0.01
t_end = 400.0
save_every = 1000
checkpoint_every = 20000

[ensemble]
members = 24
initial = "file"
path = "{workdir / 'planar.npz'}"
chunk = 12

[output]
store = "{workdir / 'section.zarr'}"
variables = ["energy"]

[analysis]
lyapunov = {{ d0 = 1e-8, renormalise_every = 10 }}
section = {{ expression = "q[0][0]", direction = "up", record = ["q", "omega"], max_crossings = 500 }}
""")
section = armillary.run(str(workdir / "section.toml"))
print(f"{section.sizes['member']} members, {int(section.section_count.sum())} crossings; the motion stays in the "
      f"plane: largest |q_y| at a crossing {float(abs(section.section_q.sel(xyz=1)).max()):.1e}")

# %%
# :meth:`ds.armillary.section_points <armillary.ensemble.accessor.ArmillaryAccessor.section_points>` gives
# every stored crossing as a point, in two recorded components written as in the section's expression: here
# the second link's sin θ₂ (``q[1][0]``) and its angular velocity (``omega[1][1]``, about y), coloured by the
# member's λ. The small swings (dark: λ of a few 10⁻³ 1/s, the ln(t)/t of a regular orbit) trace curves; the
# members raised beyond about 1.3 rad are chaotic (λ above 10/T = 0.025 1/s) and scatter.
points = section.armillary.section_points("q[1][0]", "omega[1][1]")
fig, ax = plt.subplots(figsize=(6.5, 5.5), constrained_layout=True)
drawn = ax.scatter(points.x, points.y, c=points.colour, s=3, cmap="viridis", linewidths=0)
fig.colorbar(drawn, ax=ax, label="λ (1/s)")
ax.set(xlabel="sin θ₂ at the crossing", ylabel="ω₂ (rad/s) at the crossing",
       title="Planar double pendulum: crossings of θ₁ = 0 upwards, 24 members")
lam = section.lyapunov.values
print("θ₂ at the start (rad):", np.round(raised[::4], 2))
print("λ (1/s):              ", np.round(lam[::4], 3))

# %%
# The escape-time map
# -------------------
# 144 members, one per grid point of (amplitude, frequency); each stops at its escape, so the map costs only
# the time to escape. :meth:`ds.armillary.escape_map <armillary.ensemble.accessor.ArmillaryAccessor.escape_map>`
# takes the median escape time per grid point; blank points never escaped in 100 s.
text = (examples / "escape-map.toml").read_text()
print(text)
(workdir / "escape-map.toml").write_text(re.sub(r'store = ".*"', f'store = "{workdir / "escape-map.zarr"}"', text))
escape = armillary.run(str(workdir / "escape-map.toml"))
table = escape.armillary.escape_map()
print(f"escaped: {float(table.escaped_fraction.mean()):.0%} of the grid; status 8 (escaped) is not a failure: "
      f"{int(((escape.status != 0) & (escape.status != 8)).sum())} failed")
fig, ax = plt.subplots(figsize=(6.5, 5), constrained_layout=True)
table.median_escape_time.plot(ax=ax, x="base_torque_frequency", y="base_torque_amplitude",
                              cbar_kwargs={"label": "escape time (s)"})
ax.set(xlabel="drive frequency ν (rad/s)", ylabel="drive amplitude a (N·m)",
       title="When the driven chain's first link first rises above the pivot")
print(np.round(table.median_escape_time.values[::3, ::3], 1))
