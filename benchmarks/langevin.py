"""The cost of a stochastic step against the NVE ``vi`` step, in the same run (ensemble mode, one thread):
``langevin`` (geodesic BAOAB, one Philox call and two geodesic flows per body and step) and ``brownian``
(geodesic Euler–Maruyama) over ``vi``'s step, on a system whose force costs almost nothing (two pendula:
the noise's whole cost shows) and on Lennard-Jones particles on the sphere (all pairs, N = 256: a force that
costs what MD forces cost per particle, ~50 neighbours).

    .venv/bin/python benchmarks/langevin.py [--repeats 5]

Targets (issue 45, at MD sizes in the system-parallel mode, not built yet): langevin ≤ 1.3× vi, brownian
≤ 1.0×.  Every figure is the fastest of ``--repeats`` rounds, each round timing the three methods in turn.
"""

import argparse
import time

import numpy as np

from armillary.kernels import get_system, integrate
from armillary.kernels.geometry import fibonacci_sphere, thermal_velocities

METHODS = ("vi", "langevin", "brownian")


def pendula_case():
    system = get_system("spring_pendula", m=[1.0, 1.0], l=[1.0, 1.0], g=1.0, gravity_direction=[0.0, 0.0, -1.0],
                        pivots=[[0.0, 0.0, 0.0], [5.0, 0.0, 0.0]], springs=[[0, 1]], kappa=[0.0])
    q = np.random.default_rng(0).normal(size=(8192, 2, 3))
    q /= np.linalg.norm(q, axis=-1, keepdims=True)
    return "2 pendula × 8192 members, 1000 steps", system, {"q": q, "omega": np.zeros_like(q)}, 0.02, 1000


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


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
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


if __name__ == "__main__":
    main()
