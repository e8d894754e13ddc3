"""The cost of a stochastic step against the NVE ``vi`` step, in the same run (ensemble mode, one thread):
``langevin`` (geodesic BAOAB, one Philox call and two geodesic flows per body and step) and ``brownian``
(geodesic Euler–Maruyama) over ``vi``'s step, on a system whose force costs almost nothing (two pendula:
the noise's whole cost shows) and on Lennard-Jones particles on the sphere (all pairs, N = 256: a force that
costs what MD forces cost per particle, ~50 neighbours).

    .venv/bin/python benchmarks/langevin.py [--repeats 5] [--members 100000]

Targets (issue 45): langevin ≤ 1.3× vi, brownian ≤ 1.0× (at MD sizes in the system-parallel mode:
``benchmarks/md.py --method langevin``).  Every figure is the fastest of ``--repeats`` rounds, each round timing
the three methods in turn.

Then the weak order of ``langevin`` at full size: two free spherical pendula per member (V = m g l q_z each, a =
m g l/T = 2), ⟨q_z⟩ against the Langevin function −coth a + 1/a at h = 0.4, 0.2 and 0.1 s (ω₀ h = 0.4 … 0.1,
γ = 1/s): after 20 s, every 2 s over 100 s (about two relaxation times apart), averaged; the standard error from the
spread of the members' own averages.  Geodesic BAOAB's configurational bias falls as h², a ratio of 4 when h halves.
"""

import argparse
import time

import numpy as np

from armillary.kernels import get_system, integrate
from armillary.kernels.geometry import fibonacci_sphere, thermal_velocities

METHODS = ("vi", "langevin", "brownian")


def pendula_case(members: int = 8192):
    system = get_system("spring_pendula", m=[1.0, 1.0], l=[1.0, 1.0], g=1.0, gravity_direction=[0.0, 0.0, -1.0],
                        pivots=[[0.0, 0.0, 0.0], [5.0, 0.0, 0.0]], springs=[[0, 1]], kappa=[0.0])
    q = np.random.default_rng(0).normal(size=(members, 2, 3))
    q /= np.linalg.norm(q, axis=-1, keepdims=True)
    return f"2 pendula × {members} members, 1000 steps", system, {"q": q, "omega": np.zeros_like(q)}, 0.02, 1000


def lennard_jones_case():
    n = 256
    sigma = (0.8 * 4 * np.pi / n) ** 0.5
    system = get_system("sphere_lj", epsilon=1.0, sigma=sigma, cutoff=2.5 * sigma)
    q = fibonacci_sphere(n)
    omega = thermal_velocities(q, 1.0, temperature=1.0, seed=0)
    state = {"q": np.repeat(q[None], 16, 0), "omega": np.repeat(omega[None], 16, 0)}
    return f"LJ N = {n} all pairs × 16 members, 200 steps", system, state, 0.005 * sigma, 200


def seconds(system, method, state, dt, steps) -> float:
    options = {"temperature": 1.0, "friction": 1.0, "seed": 1} if method != "vi" else {}
    started = time.perf_counter()
    integrate(system, method, state, dt, steps, steps, threads=1, outputs=("energy",), mode="ensemble", **options)
    return time.perf_counter() - started


def weak_order(members: int) -> None:
    """The bias of ⟨q_z⟩ under langevin at three steps, with its standard error, and the ratios."""
    system, state, _, _ = pendula_case(members)[1:]
    a, settle, span, every = 2.0, 20.0, 100.0, 2.0
    exact = -1.0 / np.tanh(a) + 1.0 / a
    biases = []
    print(f"\nweak order: {members} members × 2 pendula, T = 0.5 J, γ = 1/s, ⟨q_z⟩ exact {exact:.6f}")
    for h in (0.4, 0.2, 0.1):
        steps, spacing = int(round((settle + span) / h)), int(round(every / h))
        started = time.perf_counter()
        run = integrate(system, "langevin", state, h, steps, spacing, outputs=("q",), temperature=0.5, friction=1.0,
                        seed=7)
        heights = run.q[:, int(round(settle / every)) + 1:, :, 2].mean(axis=(1, 2))  # each member's average
        bias, error = heights.mean() - exact, heights.std(ddof=1) / np.sqrt(members)
        biases.append((bias, error))
        print(f"  h = {h:3.1f} s  bias {bias:+.2e} ± {error:.1e}  ({time.perf_counter() - started:.0f} s)")
    for (coarse, coarse_error), (fine, fine_error) in zip(biases, biases[1:]):
        ratio = coarse / fine
        spread = abs(ratio) * np.hypot(coarse_error / coarse, fine_error / fine)
        print(f"  bias ratio when h halves: {ratio:.2f} ± {spread:.2f} (second order: 4)")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--members", type=int, default=100_000, help="members of the weak-order measurement")
    args = parser.parse_args()
    for label, system, state, dt, steps in (pendula_case(), lennard_jones_case()):
        for method in METHODS:  # compile (or load) every kernel before timing
            seconds(system, method, {k: v[:2] for k, v in state.items()}, dt, 2)
        best = {method: np.inf for method in METHODS}
        for _ in range(args.repeats):
            for method in METHODS:
                best[method] = min(best[method], seconds(system, method, state, dt, steps))
        members, bodies = state["q"].shape[:2]
        print(f"{label}:")
        for method in METHODS:
            per_body_step = best[method] / (members * bodies * steps) * 1e9
            print(f"  {method:9s} {best[method]:7.3f} s  {per_body_step:8.1f} ns per body-step  "
                  f"{best[method] / best['vi']:5.2f}× vi")
    weak_order(args.members)


if __name__ == "__main__":
    main()
