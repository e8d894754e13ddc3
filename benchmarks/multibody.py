"""Multibody trees: member-steps per second of `multibody` under rk4 on all cores (its vector field: Kane's
equations in SIMD lanes below 6 joints, the articulated-body algorithm from 6 on), next to MuJoCo's
multithreaded rollout of the same chains (RK4, contacts off), Pinocchio's `aba` called per member-step from
a Python loop, and sympy's KanesMethod right-hand side (lambdified) under scipy.integrate.solve_ivp; and the
time sympy takes to form the equations.  All measured in one run.

    .venv/bin/python benchmarks/multibody.py [--members 10000] [--steps 200] [--links 2 5 10 20] [--dt 1e-3]
        [--repeats 3] [--threads N] [--sympy-links 2 5 10] [--sympy-cap 600] [--no-mujoco]

Cases: sympy's ``n_link_pendulum_on_cart`` with n unit point masses on unit links and a unit cart (q: the
cart's x and the links' absolute angles; gravity 9.81 along −y), and a 7-link revolute arm (``arm``: random
axes, joint points and centres of mass, links solid boxes of random sides and masses, seed 1, gravity along −z).  Members: the chain
released from q = (0, 1.0, 1.2, …) rad (link i at 1 + 0.2 (i − 1) rad mod the pattern) plus 1e-3 N(0, 1), at rest.
MuJoCo: a slide joint on x for the cart and a hinge about z per link (MuJoCo's hinge angles are relative, so
the states are converted), each link's mass at its end with inertia 1e-9 kg·m² (MuJoCo needs one); the arm
with hinges of the same axes and ``fullinertia``.  Pinocchio: the same models, classical RK4 with four
``aba`` calls per step in Python.  sympy: ``KanesMethod`` of the model (forming time capped at
``--sympy-cap`` seconds in a child process), its mass matrix and forcing lambdified, u̇ = M⁻¹F by numpy,
``solve_ivp`` RK45 with ``max_step = dt`` (its steps counted).
Timing: fastest of ``--repeats`` (at least 3); Armillary after a compiling call.  Targets (issue 34): rk4 ≥ 1.5×
MuJoCo rollout's member-steps per second for every n, the cost per member-step growing no faster than O(n²)
from the smallest to the largest n ≥ 5 (5 → 20 links: ≤ (21/6)² = 12.25×), and ≥ 100× the sympy route per
member-step.
"""

import argparse
import multiprocessing
import sys
import time

import numpy as np

from machine import run_conditions, run_start
from timing import MuJoCoRollout, armillary_rates

# This script's folder holds benchmarks/kernels.py, named like the package it measures: keep it off the path.
sys.path = [p for p in sys.path if not p.endswith("benchmarks")]
from armillary.kernels import get_system, integrate  # noqa: E402
from armillary.kernels.integration import default_threads  # noqa: E402

SYMPY_FACTOR_TARGET = 100.0
MUJOCO_FACTOR_TARGET = 1.5
GRAVITY = 9.81


def chain(n: int):
    return get_system("multibody", "n_link_pendulum_on_cart", cart_mass=1.0, m=(1.0,) * n, l=(1.0,) * n, g=GRAVITY)


def arm():
    """A 7-link revolute arm with random axes, joint points and centres of mass (seed 1), each link a solid box
    of random sides (0.05–0.4 m) and mass (0.5–2 kg) turned by a random rotation; gravity along −z."""
    rng = np.random.default_rng(1)
    axes = rng.normal(size=(7, 3))
    axes /= np.linalg.norm(axes, axis=1, keepdims=True)
    masses, sides = rng.uniform(0.5, 2.0, 7), rng.uniform(0.05, 0.4, (7, 3))
    squares = sides ** 2
    principal = masses[:, None] / 12 * (squares.sum(axis=1, keepdims=True) - squares)
    turns = np.linalg.qr(rng.normal(size=(7, 3, 3)))[0]
    inertia = np.einsum("nij,nj,nkj->nik", turns, principal, turns)
    return get_system("multibody", joints=[{"type": "revolute", "parent": j - 1} for j in range(7)], axis=axes,
                      origin=rng.uniform(-0.5, 0.5, (7, 3)), mass=masses, com=rng.uniform(-0.3, 0.3, (7, 3)),
                      inertia=0.5 * (inertia + np.swapaxes(inertia, 1, 2)), g=GRAVITY)


def member_states(n_coordinates: int, members: int) -> dict:
    base = np.concatenate([[0.0], 1.0 + 0.2 * np.arange(n_coordinates - 1)])
    noise = 1e-3 * np.random.default_rng(0).normal(size=(members, n_coordinates))
    return {"q": base + noise, "u": np.zeros((members, n_coordinates))}


def joint_entries_of(system, n: int) -> list:
    """(type, parent, measured-from coordinate, first coordinate) of each joint of a tree of n one-degree-of-freedom
    joints, from the system's topology."""
    from armillary.kernels.systems.tree_kinematics import joint_entries, tree_header
    topology = system.definition.topology(system.broadcast(1, n), n)
    h, joints = tree_header(topology)
    return [joint_entries(topology, h, j) for j in range(joints)]


def relative_angles(system, q: np.ndarray) -> np.ndarray:
    """The joints' own variables θ (MuJoCo's and Pinocchio's coordinates) from ours (θ = q − q_measured_from)."""
    references = np.array([entries[2] for entries in joint_entries_of(system, q.shape[-1])])
    return q - np.where(references >= 0, q[..., np.maximum(references, 0)], 0.0)


def joint_tables(system, n: int):
    """Per joint: (kind, parent, axis, origin, mass, com, inertia) of a bound multibody system."""
    from armillary.kernels.systems.tree_kinematics import AXIS, COM, GRAVITY_ROWS, INERTIA, JOINT_ROWS, MASS, ORIGIN
    coefficients = system.definition.coefficients(system.broadcast(1, n), n)[0]
    rows = coefficients[GRAVITY_ROWS:GRAVITY_ROWS + JOINT_ROWS * n].reshape(n, JOINT_ROWS)
    return [(kind, parent, rows[j, AXIS:AXIS + 3], rows[j, ORIGIN:ORIGIN + 3], rows[j, MASS], rows[j, COM:COM + 3],
             rows[j, INERTIA:INERTIA + 9].reshape(3, 3))
            for j, (kind, parent, _, _) in enumerate(joint_entries_of(system, n))], coefficients[:GRAVITY_ROWS]


def mujoco_xml(system, n: int, dt: float) -> str:
    joints, gravity = joint_tables(system, n)
    bodies = {-1: []}
    for j, (kind, parent, axis, origin, mass, com, inertia) in enumerate(joints):
        joint = (f'<joint type="{"hinge" if kind == 0 else "slide"}" axis="{" ".join(f"{a:.17g}" for a in axis)}"/>')
        full = " ".join(f"{inertia[i, k] + (1e-9 if i == k else 0.0):.17g}" for i, k in ((0, 0), (1, 1), (2, 2), (0, 1), (0, 2), (1, 2)))
        bodies.setdefault(parent, []).append((j, f'<body name="b{j}" pos="{" ".join(f"{o:.17g}" for o in origin)}">'
                                                 f'{joint}<inertial pos="{" ".join(f"{c:.17g}" for c in com)}" '
                                                 f'mass="{max(mass, 1e-9):.17g}" fullinertia="{full}"/>'))

    def nested(parent):
        return "".join(text + nested(j) + "</body>" for j, text in bodies.get(parent, []))
    return (f'<mujoco><option timestep="{dt:.17g}" integrator="RK4" gravity="{" ".join(f"{g:.17g}" for g in gravity)}">'
            f'<flag contact="disable"/></option><worldbody>{nested(-1)}</worldbody></mujoco>')


def mujoco_rates(mujoco, system, state, dt, steps, repeats, threads) -> tuple[list[float], float]:
    """MuJoCo's rollout rates, and the largest difference of member 0's joint variables after ``steps`` steps
    from Armillary's rk4 (rad or m): the two model the same chain."""
    n = state["q"].shape[1]
    sim = MuJoCoRollout(mujoco, mujoco_xml(system, n, dt), threads)
    initial = np.zeros((state["q"].shape[0], sim.nstate))
    initial[:, sim.qpos:sim.qpos + n] = relative_angles(system, state["q"])
    initial[:, sim.qvel:sim.qvel + n] = relative_angles(system, state["u"])
    rates = sim.rates(initial, steps, repeats)
    theirs = sim.run(initial[:1], steps)[0, -1, sim.qpos:sim.qpos + n]
    ours = integrate(system, "rk4", {k: v[:1] for k, v in state.items()}, dt, steps, steps).final["q"]
    return rates, float(np.abs(theirs - relative_angles(system, ours[0])).max())


def pinocchio_rate(system, state, dt, member_steps) -> float:
    import pinocchio
    n = state["q"].shape[1]
    joints, gravity = joint_tables(system, n)
    model = pinocchio.Model()
    ids = []
    for kind, parent, axis, origin, mass, com, inertia in joints:
        joint = (pinocchio.JointModelRevoluteUnaligned if kind == 0 else pinocchio.JointModelPrismaticUnaligned)(axis)
        ids.append(model.addJoint(0 if parent < 0 else ids[parent], joint, pinocchio.SE3(np.eye(3), origin),
                                  f"joint{len(ids)}"))
        model.appendBodyToJoint(ids[-1], pinocchio.Inertia(mass, com, inertia), pinocchio.SE3.Identity())
    model.gravity.linear = gravity
    data = model.createData()
    q, v = relative_angles(system, state["q"][0]), relative_angles(system, state["u"][0])
    tau = np.zeros(n)

    def rates(q, v):
        return v, pinocchio.aba(model, data, q, v, tau)
    start = time.perf_counter()
    for _ in range(member_steps):
        k1 = rates(q, v)
        k2 = rates(q + 0.5 * dt * k1[0], v + 0.5 * dt * k1[1])
        k3 = rates(q + 0.5 * dt * k2[0], v + 0.5 * dt * k2[1])
        k4 = rates(q + dt * k3[0], v + dt * k3[1])
        q = q + dt / 6 * (k1[0] + 2 * k2[0] + 2 * k3[0] + k4[0])
        v = v + dt / 6 * (k1[1] + 2 * k2[1] + 2 * k3[1] + k4[1])
    return member_steps / (time.perf_counter() - start)


def sympy_form(n: int, queue) -> None:
    """Child process: form KanesMethod for n links and put (seconds, lambdified M and F as source) on the queue."""
    import sympy
    from sympy.physics.mechanics.models import n_link_pendulum_on_cart
    start = time.perf_counter()
    kane = n_link_pendulum_on_cart(n, cart_force=False)
    formed = time.perf_counter() - start
    coordinates = sympy.symbols(f"q:{n + 1}") + sympy.symbols(f"u:{n + 1}")
    plain = dict(zip(list(kane.q) + list(kane.u), coordinates))
    args = list(coordinates) + list(sympy.symbols(f"m:{n + 1}")) + list(sympy.symbols(f"l:{n}")) + [sympy.Symbol("g")]
    queue.put((formed, sympy.srepr(args), sympy.srepr(kane.mass_matrix.xreplace(plain)),
               sympy.srepr(kane.forcing.xreplace(plain))))


def sympy_route(n: int, state, dt, cap: float, steps: int):
    """(forming seconds or None past the cap, solve_ivp member-steps per second or None)."""
    queue = multiprocessing.get_context("fork").Queue()
    child = multiprocessing.get_context("fork").Process(target=sympy_form, args=(n, queue))
    child.start()
    child.join(cap)
    if child.is_alive():
        child.kill()
        return None, None
    import sympy
    formed, args, mass, forcing = queue.get()
    args = sympy.sympify(args)
    mass_matrix = sympy.lambdify([args], sympy.sympify(mass), "numpy")
    force = sympy.lambdify([args], sympy.sympify(forcing), "numpy")
    constants = [1.0] * (n + 1) + [1.0] * n + [GRAVITY]
    from scipy.integrate import solve_ivp

    def rates(t, y):
        values = list(y) + constants
        return np.concatenate([y[n + 1:], np.linalg.solve(np.array(mass_matrix(values), float),
                                                          np.array(force(values), float).ravel())])
    y0 = np.concatenate([state["q"][0], state["u"][0]])
    start = time.perf_counter()
    solution = solve_ivp(rates, (0.0, steps * dt), y0, method="RK45", max_step=dt, rtol=1e-9, atol=1e-12)
    return formed, (len(solution.t) - 1) / (time.perf_counter() - start)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--members", type=int, default=10_000)
    parser.add_argument("--steps", type=int, default=200, help="steps per timed call (Armillary and MuJoCo)")
    parser.add_argument("--links", type=int, nargs="+", default=[2, 5, 10, 20])
    parser.add_argument("--dt", type=float, default=1e-3)
    parser.add_argument("--repeats", type=int, default=3, help="timed calls per case, the fastest counts (>= 3)")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--sympy-links", type=int, nargs="*", default=[2, 5, 10])
    parser.add_argument("--sympy-cap", type=float, default=600.0, help="seconds sympy may take to form equations")
    parser.add_argument("--pinocchio-steps", type=int, default=2000)
    parser.add_argument("--no-mujoco", action="store_true")
    args = parser.parse_args()
    if args.repeats < 3:
        parser.error("--repeats must be at least 3: this VM's speed drifts, the fastest of several counts")
    threads = args.threads or default_threads()
    start = run_start()
    mujoco = None
    if not args.no_mujoco:
        try:
            import mujoco
        except ImportError:
            print("MuJoCo skipped: not installed (pip install mujoco, the 'bench' extra)")
    print(f"multibody rk4, {threads} threads, h = {args.dt:g} s, {args.members} members, {args.steps} steps per call, "
          f"fastest of {args.repeats}; MuJoCo {mujoco.__version__ if mujoco else '-'}")
    cases = [(f"cart + {n} links", chain(n), n + 1, n) for n in args.links] + [("7-link arm", arm(), 7, None)]
    rows = []
    for label, system, n_coordinates, links in cases:
        state = member_states(n_coordinates, args.members)
        ours = max(armillary_rates(system, "rk4", state, args.dt, args.steps, args.repeats, threads))
        theirs, difference = None, float("nan")
        if mujoco:
            rates, difference = mujoco_rates(mujoco, system, state, args.dt, args.steps, args.repeats, threads)
            theirs = max(rates)
        pin = pinocchio_rate(system, state, args.dt, args.pinocchio_steps)
        formed, sympy_rate = (sympy_route(links, state, args.dt, args.sympy_cap, 2000)
                              if links in args.sympy_links else (None, None))
        rows.append((label, ours, theirs, pin, formed, sympy_rate, links in args.sympy_links))
        print(f"  {label}: Armillary {ours:.3e}, MuJoCo {theirs or float('nan'):.3e} (joint variables after "
              f"{args.steps} steps differ by {difference:.1e}), Pinocchio loop {pin:.3e} "
              f"member-steps/s; sympy formed in {formed if formed is not None else float('nan'):.1f} s, solve_ivp "
              f"{sympy_rate or float('nan'):.3e} steps/s", flush=True)
    print()
    print(f"{'case':<18}{'Armillary rk4':>15}{'MuJoCo RK4':>13}{'ratio':>8}{'Pinocchio aba loop':>20}{'ratio':>9}"
          f"{'sympy form (s)':>16}{'sympy+solve_ivp':>17}{'ratio':>9}")
    for label, ours, theirs, pin, formed, sympy_rate, tried in rows:
        form = f"{formed:.1f}" if formed is not None else (f"> {args.sympy_cap:.0f}" if tried else "-")
        print(f"{label:<18}{ours:>15.3e}{(f'{theirs:.3e}' if theirs else '-'):>13}"
              f"{(f'{ours / theirs:.2f}' if theirs else '-'):>8}{pin:>20.3e}{ours / pin:>9.0f}{form:>16}"
              f"{(f'{sympy_rate:.3e}' if sympy_rate else '-'):>17}{(f'{ours / sympy_rate:.0f}' if sympy_rate else '-'):>9}")
    print()
    for label, ours, theirs, pin, formed, sympy_rate, tried in rows:
        if theirs:
            factor = ours / theirs
            print(f"target: {label}: rk4 >= {MUJOCO_FACTOR_TARGET}x MuJoCo rollout: {factor:.2f}x "
                  f"({'met' if factor >= MUJOCO_FACTOR_TARGET else 'NOT met'})")
        if sympy_rate:
            factor = ours / sympy_rate
            print(f"target: {label}: >= {SYMPY_FACTOR_TARGET:.0f}x the sympy route: {factor:.0f}x "
                  f"({'met' if factor >= SYMPY_FACTOR_TARGET else 'NOT met'})")
    chains = sorted((links, ours) for (label, ours, *_), (_, _, _, links) in zip(rows, cases) if links and links >= 5)
    if len(chains) > 1:
        (small, fast), (large, slow) = chains[0], chains[-1]
        growth, linear, quadratic = fast / slow, (large + 1) / (small + 1), ((large + 1) / (small + 1)) ** 2
        print(f"target: cost per member-step from {small} to {large} links grows {growth:.2f}x <= O(n^2) "
              f"{quadratic:.2f}x (O(n): {linear:.2f}x) ({'met' if growth <= quadratic else 'NOT met'})")
    print(run_conditions(start))


if __name__ == "__main__":
    main()
