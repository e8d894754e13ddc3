"""What a surface of section costs: the same ensemble stepped with and without one, in the same run.

    .venv/bin/python benchmarks/sections.py [--members 4096] [--steps 4000] [--repeats 5]

Example 2 (three bodies on S², ``sphere_nbody`` preset ``paper``, perturbed by 1e-3) by the explicit ``vi`` at
h = 1e-3 on one thread, once without a section, once with ``q[0][0]`` upwards, whose crossings are rare
(one per member in the run), and once with ``sin(30 q[0][0])`` both ways, whose crossings come about once per
120 steps, near the target's limit (the rates per member-step are printed).  Target (issue 48): with rare
crossings (fewer than one per 100 steps) the run with the section costs ≤ 1.1× the run without.  Also printed:
what one crossing costs (its 3–6 one-lane steps of the search), from the two runs with a section.  Cases
alternate and the fastest of ``--repeats`` counts, because this kind of VM's speed drifts within minutes; every
kernel is compiled (or loaded from Numba's cache) before any timing.
"""

import argparse
import time

import numpy as np
from machine import run_conditions, run_start

from armillary import Section, get_system, integrate

SECTIONS = {"rare": Section("x", "q[0][0]", "up", max_crossings=1000),
            "frequent": Section("x", "sin(30 * q[0][0])", "both", max_crossings=1000)}


def ensemble_state(members: int) -> dict:
    """Example 2's state with every member's bodies moved by a tangent Gaussian of 1e-3."""
    system = get_system("sphere_nbody", "paper")
    state = system.initial_state()
    normals = np.random.default_rng(0).standard_normal((members, system.space.normal_count(3)))
    return system, system.space.project(system.space.perturb(state, normals, 1e-3))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", type=int, default=4096)
    parser.add_argument("--steps", type=int, default=4000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    system, state = ensemble_state(args.members)
    cases = {"without": None, **SECTIONS}
    for sections in cases.values():  # compile or load every kernel first
        integrate(system, "vi", state, 1e-3, 2, outputs=(), threads=1, sections=sections)
    start = run_start()
    fastest = dict.fromkeys(cases, float("inf"))
    crossings = dict.fromkeys(SECTIONS, 0)
    for _ in range(args.repeats):
        for name, sections in cases.items():
            began = time.perf_counter()
            run = integrate(system, "vi", state, 1e-3, args.steps, save_every=args.steps, outputs=(), threads=1,
                            sections=sections)
            fastest[name] = min(fastest[name], time.perf_counter() - began)
            if sections is not None:
                crossings[name] = int(run.sections["x"]["count"].sum())
    member_steps = args.members * args.steps
    print(f"sphere_nbody (Example 2), vi, h = 1e-3, {args.members} members x {args.steps} steps, one thread, "
          f"fastest of {args.repeats}")
    print(f"  {'without':<32} {fastest['without']:7.3f} s  {member_steps / fastest['without']:.3e} member-steps/s")
    for name, section in SECTIONS.items():
        rate = crossings[name] / member_steps
        label = f"with {section.expression} {section.direction}"
        print(f"  {label:<32} {fastest[name]:7.3f} s  {member_steps / fastest[name]:.3e} member-steps/s  "
              f"{fastest[name] / fastest['without']:.3f}x  ({crossings[name]} crossings, one per "
              f"{1 / max(rate, 1e-300):.0f} member-steps)")
    per_crossing = (fastest["frequent"] - fastest["rare"]) / max(crossings["frequent"] - crossings["rare"], 1)
    per_step = fastest["without"] / member_steps
    print(f"  one crossing costs {per_crossing * 1e6:.2f} us = {per_crossing / per_step:.0f} member-steps")
    ratio = fastest["rare"] / fastest["without"]
    print(f"  cost with the rare section / without: {ratio:.3f}  (target <= 1.1 with rare crossings: "
          f"{'met' if ratio <= 1.1 else 'NOT met'})")
    print(run_conditions(start))


if __name__ == "__main__":
    main()
