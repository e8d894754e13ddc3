"""The rolling ball: member-steps per second of `rolling_ball` under rk4 and nhvi on all cores, against
scipy.integrate.solve_ivp and a plain numpy RK4 loop on an independent right-hand side of the same
equations (tests/rolling_reference.py, digest_004 §4), all measured in one run.

    .venv/bin/python benchmarks/rolling.py [--members 10000] [--steps 1000] [--dt 1e-3] [--repeats 3]
        [--threads N] [--scipy-members 3] [--scipy-span 1.0] [--numpy-steps 300]

The case: ``get_system("rolling_ball", "pendulum_drive")``: a ball of radius 1 m (shell 1 kg, inertia
0.5 kg·m² about each axis) rolled by two 0.5 kg masses swinging on circular rails as θ_i = sin(2t + φ_i)
(prescribed motion, so the equations depend on time), released at rest.  Members: that state with
Ω + 1e-3·N(0, 1) rad/s each (seed 0).  h = --dt (1e-3 s).
Timing: each case is timed ``--repeats`` times and the fastest counts (every rate is printed), because
this kind of VM's speed drifts by up to 2× within minutes.
  Armillary: ``integrate(system, method, state, h, --steps, save_every=--steps, outputs=())`` on
    ``--threads`` threads (default: all) after a compiling call (benchmarks/timing.py's
    ``armillary_rates``), for rk4 and, once registered in ``kernels.integrators.METHODS``, nhvi.
  scipy: ``solve_ivp`` RK45, rtol 1e-9, atol 1e-12, on the reference right-hand side (y = quaternion, Ω,
    contact point, work), the first --scipy-members members one after the other over --scipy-span s;
    its rate is accepted steps per wall second.
  numpy RK4: classical RK4 with the fixed step h on the same right-hand side, --numpy-steps steps of the
    same members: the fairer per-step comparison with Armillary's rk4 (four right-hand sides per step;
    RK45 takes six and longer steps).  Its end states are compared with Armillary rk4's after as many
    steps (they differ by the two schemes' truncation errors: RK4 on R and on the quaternion).

Target (2 cores): Armillary rk4 ≥ 3000× scipy's RK45 per member-step.
"""

import argparse
import sys
from pathlib import Path

import numpy as np
from machine import run_conditions, run_start
from scipy.integrate import solve_ivp
from timing import armillary_rates, perturbed_members, rates_text, wall_seconds

# This script's folder holds benchmarks/kernels.py, named like the package it measures: keep it off the path.
sys.path = [p for p in sys.path if not p.endswith("benchmarks")]
# The independent reference right-hand side lives with the tests.
sys.path.append(str(Path(__file__).resolve().parents[1] / "tests"))

from armillary.kernels import get_system, integrate  # noqa: E402
from armillary.kernels.integration import default_threads  # noqa: E402
from armillary.kernels.integrators import METHODS  # noqa: E402
from rolling_reference import reference_rhs, state_to_y, y_to_state  # noqa: E402

SCIPY_FACTOR_TARGET = 3000.0


def member(state: dict, k: int) -> dict:
    """Member k of an ensemble's state, without the member axis."""
    return {name: value[k] for name, value in state.items()}


def scipy_rates(system, state: dict, members: int, span: float, repeats: int) -> tuple[list[float], int]:
    """(accepted RK45 steps per wall second of each repeat, steps per repeat): solve_ivp over ``span`` s of
    the first ``members`` members, one after the other."""
    starts = [state_to_y(member(state, k)) for k in range(members)]

    def run():
        return sum(solve_ivp(reference_rhs, (float(t0), float(t0) + span), y0, method="RK45", rtol=1e-9, atol=1e-12,
                             args=(system.params,)).t.size - 1 for y0, t0 in starts)

    seconds, taken = wall_seconds(run, repeats)
    return [taken / wall for wall in seconds], taken


def numpy_rk4(system, y0: np.ndarray, t0: float, dt: float, steps: int) -> np.ndarray:
    """y after ``steps`` classical RK4 steps of ``dt`` (s) on the reference right-hand side from (t0, y0)."""
    params, y, t = system.params, y0.copy(), t0
    for _ in range(steps):
        k1 = reference_rhs(t, y, params)
        k2 = reference_rhs(t + dt / 2, y + dt / 2 * k1, params)
        k3 = reference_rhs(t + dt / 2, y + dt / 2 * k2, params)
        k4 = reference_rhs(t + dt, y + dt * k3, params)
        y = y + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        t += dt
    return y


def numpy_rk4_rates(system, state: dict, members: int, dt: float, steps: int,
                    repeats: int) -> tuple[list[float], dict]:
    """(member-steps per wall second of each repeat, the end states as a kernel state dict (members, …)) of
    :func:`numpy_rk4` on the first ``members`` members."""
    starts = [state_to_y(member(state, k)) for k in range(members)]
    seconds, ends = wall_seconds(lambda: [numpy_rk4(system, y0, float(t0), dt, steps) for y0, t0 in starts],
                                 repeats)
    clocks = np.array([float(t0) + steps * dt for _, t0 in starts])
    return [members * steps / wall for wall in seconds], y_to_state(np.array(ends), clocks)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--members", type=int, default=10_000)
    parser.add_argument("--steps", type=int, default=1_000, help="Armillary steps per timed call")
    parser.add_argument("--dt", type=float, default=1e-3, help="step h (s)")
    parser.add_argument("--repeats", type=int, default=3, help="timed calls per case (the fastest counts)")
    parser.add_argument("--threads", type=int, default=None, help="Armillary's threads (default: all)")
    parser.add_argument("--scipy-members", type=int, default=3, help="members scipy and numpy RK4 integrate")
    parser.add_argument("--scipy-span", type=float, default=1.0, help="simulated time of each scipy run (s)")
    parser.add_argument("--numpy-steps", type=int, default=300, help="numpy RK4 steps per member")
    args = parser.parse_args()
    threads = args.threads or default_threads()
    start = run_start()
    system = get_system("rolling_ball", "pendulum_drive")
    state = perturbed_members(system, args.members)
    print(f"rolling_ball pendulum_drive, {threads} threads, h = {args.dt:g} s, {args.members} members, "
          f"{args.steps} steps per call, fastest of {args.repeats}")
    rows = []
    for method in ("rk4", "nhvi"):
        if method not in METHODS:
            print(f"  {method}: not available")
            continue
        rates = armillary_rates(system, method, state, args.dt, args.steps, args.repeats, threads)
        rows.append((f"Armillary {method}", rates))
        print(f"  Armillary {method}: {rates_text(rates)} member-steps/s", flush=True)
    rates, taken = scipy_rates(system, state, args.scipy_members, args.scipy_span, args.repeats)
    rows.append((f"scipy RK45 ({args.scipy_members} members)", rates))
    print(f"  scipy RK45: {rates_text(rates)} member-steps/s; {taken} accepted steps over {args.scipy_members} × "
          f"{args.scipy_span:g} s", flush=True)
    rates, ends = numpy_rk4_rates(system, state, args.scipy_members, args.dt, args.numpy_steps, args.repeats)
    rows.append((f"numpy RK4 ({args.scipy_members} members)", rates))
    few = {name: value[:args.scipy_members] for name, value in state.items()}
    ours = integrate(system, "rk4", few, args.dt, args.numpy_steps, save_every=args.numpy_steps, threads=threads)
    difference = {name: np.abs(ours.final[name] - ends[name]).max() for name in ("R", "Omega", "contact", "work")}
    print(f"  numpy RK4: {rates_text(rates)} member-steps/s; end state after {args.numpy_steps} steps vs Armillary "
          f"rk4: " + ", ".join(f"max |Δ{name}| = {value:.1e}" for name, value in difference.items()), flush=True)
    scipy_rate, numpy_rate = max(rows[-2][1]), max(rows[-1][1])
    print()
    print(f"{'case':<26}{'member-steps/s':>16}{'/ scipy RK45':>14}{'/ numpy RK4':>13}")
    for case, rates in rows:
        print(f"{case:<26}{max(rates):>16.3e}{max(rates) / scipy_rate:>14.0f}{max(rates) / numpy_rate:>13.0f}")
    print()
    for case, rates in rows[:-2]:
        factor = max(rates) / scipy_rate
        print(f"target: {case} >= {SCIPY_FACTOR_TARGET:.0f}x scipy RK45 per member-step: {factor:.0f}x "
              f"({'met' if factor >= SCIPY_FACTOR_TARGET else 'NOT met'})")
    print(run_conditions(start))


if __name__ == "__main__":
    main()
