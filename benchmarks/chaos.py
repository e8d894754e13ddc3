"""Chaos indicators: what k shadows cost against the bare step, what the indicators (Gram–Schmidt, MEGNO,
SALI/GALI) add on top of the shadows, and the spectrum checks of the tests at full size, all in one run.

    .venv/bin/python benchmarks/chaos.py [--members 4000] [--steps 1000] [--repeats 3] [--science-members 64]
        [--no-science]

Cost: the chaotic heavy top (lgvi, h = 2e-3) and Example 1 (spherical_chain "paper", vi, h = 1e-2),
``--members`` members perturbed by 1e-3, ``--steps`` steps, fastest of ``--repeats``; member-steps per second
of the bare step, and with k = 1, 2 and the whole tangent dimension of shadows (renormalised every 10
steps), whose cost relative to the bare step is printed against the target (1 + k) × 1.1.  The
indicators' share: the same k = 2 run renormalising every 10 steps against never (renormalise_every
beyond the run: the shadows are stepped but never orthogonalised, so neither MEGNO nor SALI is
accumulated), target ≤ 1.05.
Science (``--science-members``, 200 s): the medians of the members' pair sums λᵢ + λ₂d₊₁₋ᵢ relative to λ₁
(target ≤ 0.02), Σλ, and the regular Lagrange top's MEGNO at 200 and 1000 s.
"""

import argparse
import sys

import numpy as np
from machine import run_conditions, run_start
from timing import member_step_rates

sys.path = [p for p in sys.path if not p.endswith("benchmarks")]

from armillary.kernels import get_system, integrate  # noqa: E402
from armillary.kernels.lyapunov import displaced_shadow  # noqa: E402

CASES = (("heavy_top", "chaotic", "lgvi", 2e-3), ("spherical_chain", "paper", "vi", 1e-2))


def ensemble(name, preset, members, seed=0):
    system = get_system(name, preset)
    normals = system.space.normal_count(system.n_bodies)
    state = system.space.perturb(system.initial_state(), np.random.default_rng(seed).normal(size=(members, normals)),
                                 1e-3)
    return system, state, normals


def shadows(system, state, normals, count, every):
    directions = np.random.default_rng(1).normal(size=(len(state[system.space.names[0]]), count, normals))
    return displaced_shadow(system.space, state, directions, 1e-8, every)


def rate(system, method, state, dt, steps, repeats, shadow=None) -> float:
    """The fastest member-steps per second of ``repeats`` timed calls, after one untimed (compiling) call."""
    def call():
        return integrate(system, method, state, dt, steps, steps, outputs=(), shadow=shadow)

    call()
    return max(member_step_rates(call, len(state[system.space.names[0]]), steps, repeats))


def cost(args):
    print(f"# cost of shadows: {args.members} members × {args.steps} steps, fastest of {args.repeats}")
    print(f"{'system':<16}{'method':<7}{'shadows':>8}{'member-steps/s':>16}{'cost / bare':>13}{'target':>9}")
    for name, preset, method, dt in CASES:
        system, state, normals = ensemble(name, preset, args.members)
        bare = rate(system, method, state, dt, args.steps, args.repeats)
        print(f"{name:<16}{method:<7}{0:>8}{bare:>16.3e}{1.0:>13.2f}{'':>9}")
        dimension = system.space.tangent_dimension(system.n_bodies)
        for count in (1, 2, dimension):
            shadowed = rate(system, method, state, dt, args.steps, args.repeats,
                               shadows(system, state, normals, count, 10))
            ratio = bare / shadowed
            target = (1 + count) * 1.1
            print(f"{name:<16}{method:<7}{count:>8}{shadowed:>16.3e}{ratio:>13.2f}{target:>9.2f}"
                  f"  {'met' if ratio <= target else 'NOT MET'}")
        # the indicators' share: renormalising every 10 steps against never (same shadows stepped)
        often = rate(system, method, state, dt, args.steps, args.repeats, shadows(system, state, normals, 2, 10))
        never = rate(system, method, state, dt, args.steps, args.repeats,
                        shadows(system, state, normals, 2, 10 * args.steps))
        print(f"{name:<16}{method:<7}{'2':>8}  Gram–Schmidt + MEGNO + SALI every 10 steps: {never / often:.3f}× "
              f"the shadows alone (target ≤ 1.05: {'met' if never / often <= 1.05 else 'NOT MET'}); rates "
              f"{often:.3e} / {never:.3e}")


def science(args):
    members = args.science_members
    print(f"# spectra over 200 s, {members} members (the tests use 32 and 24)")
    for name, preset, method, dt in CASES:
        system, state, normals = ensemble(name, preset, members)
        count = system.space.tangent_dimension(system.n_bodies)
        run = integrate(system, method, state, dt, int(round(200 / dt)), int(round(200 / dt)), outputs=(),
                        shadow=shadows(system, state, normals, count, 10))
        spectrum = run.spectrum()[:, -1]
        half = count // 2
        pairs = spectrum[:, :half] + spectrum[:, ::-1][:, :half]
        lambda_1 = np.median(spectrum[:, 0])
        print(f"{name} {method}: median spectrum {np.array2string(np.median(spectrum, axis=0), precision=4)} 1/s; "
              f"median pair sums / λ₁ {np.array2string(np.median(pairs, axis=0) / lambda_1, precision=4)} "
              f"(target |·| ≤ 0.02); max |Σλ| {np.max(np.abs(spectrum.sum(axis=1))):.1e}; "
              f"SALI median {np.median(run.sali[:, -1]):.1e}, MEGNO median {np.median(run.megno[:, -1]):.1f}")
    system, state, normals = ensemble("heavy_top", "lagrange", 8)
    run = integrate(system, "lgvi", state, 1e-3, 1_000_000, 200_000, outputs=(),
                    shadow=shadows(system, state, normals, 2, 10))
    print(f"Lagrange top (regular) MEGNO median at 200 s {np.median(run.megno[:, 1]):.3f}, at 1000 s "
          f"{np.median(run.megno[:, -1]):.3f} (→ 2); SALI min {run.sali.min():.2e}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--members", type=int, default=4000)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--science-members", type=int, default=64)
    parser.add_argument("--no-science", action="store_true")
    args = parser.parse_args()
    start = run_start()
    cost(args)
    if not args.no_science:
        science(args)
    print(run_conditions(start))


if __name__ == "__main__":
    main()
