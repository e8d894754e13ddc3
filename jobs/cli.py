"""The ``armillary`` command line.  Exit codes: 0 success, 1 failed run, 2 bad input."""

import argparse
import sys
import time

import numpy as np

from ensemble.initial import perturbed_ensemble
from kernels import METHODS, SYSTEMS, InvalidInput, get_system, integrate


def demo(args) -> int:
    """Example 1 (double spherical pendulum) as a perturbed ensemble, vi against rk45."""
    system = get_system("spherical_chain", "paper")
    q, omega = perturbed_ensemble(*system.initial_state(), args.members, 1e-3, args.seed)
    steps = round(args.t_end / args.dt)
    print(f"Example 1, double spherical pendulum: {args.members} members perturbed by 1e-3, "
          f"{args.t_end:g} s at h = {args.dt:g} s ({steps} steps)")
    print(f"{'method':<18}{'mean |dE|/|E0|':>16}{'max |dE|/|E0|':>16}{'mean unit err':>16}{'failed':>8}{'wall s':>9}")
    for method, options in (("vi", {}), ("rk45", {"rtol": 1e-6})):
        start = time.perf_counter()
        result = integrate(system, method, q, omega, args.dt, steps, 10, outputs=("energy",), **options)
        wall = time.perf_counter() - start
        relative = np.abs(result.energy - result.energy[:, :1]) / np.abs(result.energy[:, :1])
        label = method + (" (rtol 1e-6)" if options else "")
        print(f"{label:<18}{np.nanmean(relative):>16.3e}{np.nanmax(relative):>16.3e}"
              f"{np.nanmean(result.unit_error):>16.3e}{int(np.sum(result.status != 0)):>8}{wall:>9.1f}")
    return 0


def systems(args) -> int:
    """Names, parameters and presets of every system."""
    for definition in SYSTEMS.values():
        print(f"{definition.name}: {definition.summary}")
        for p in definition.parameters:
            print(f"    {p.name:<18} {p.shape:<8} [{p.unit}] {p.doc}")
        for name, preset in definition.presets.items():
            print(f"    preset {name}: {preset().doc}")
    print("methods: " + ", ".join(f"{m.name} (order {m.order})" for m in METHODS.values()))
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="armillary", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    run_demo = commands.add_parser("demo", help="Example 1 ensemble: vi vs rk45 energy and unit-length errors")
    run_demo.add_argument("--members", type=int, default=256)
    run_demo.add_argument("--t-end", type=float, default=100.0)
    run_demo.add_argument("--dt", type=float, default=0.01)
    run_demo.add_argument("--seed", type=int, default=2026)
    run_demo.set_defaults(handler=demo)
    commands.add_parser("systems", help="list systems, their parameters and presets").set_defaults(handler=systems)
    args = parser.parse_args(argv)
    try:
        return args.handler(args)
    except InvalidInput as error:
        print(f"armillary: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
