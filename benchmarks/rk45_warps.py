"""How busy rk45's warps would be on a GPU, measured on the CPU: whether regrouping members by their step sizes
between segments would help.

    .venv/bin/python benchmarks/rk45_warps.py [--members 4096] [--steps 200 1000] [--cases rk45_full ...]

On the GPU a thread steps one member, and the 32 threads of a warp run until the member needing the most accepted
steps is done (kernels/gpu.py). For each rk45 case of ``tests/gpu_cases.py`` (the case's members: its state
perturbed by 1e-2), this script runs two segments of ``--steps`` steps on the CPU and prints, for the second
segment, the warps' efficiency Σ steps / Σ over warps of 32 × the warp's most steps (1: no thread waits), with
the members in their own order, sorted by the step size the first segment carried into the second (what a
runner could regroup them by), and sorted by the first segment's own step counts. Rejected attempts are not
counted (the drivers do not record them): the figures describe accepted steps.
"""

import argparse
import os
import sys

import numpy as np

sys.path = [p for p in sys.path if not p.endswith("benchmarks")]  # benchmarks/kernels.py is not the package
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))
from gpu_cases import DT, case_state  # noqa: E402

from armillary.kernels import integrate  # noqa: E402

#: threads of a warp
WARP = 32
RK45_CASES = ("rk45_full", "rk45_rotation", "rk45_rolling_disk", "rk45_loop_closure")


def warp_efficiency(steps: np.ndarray) -> float:
    """Σ steps / Σ over whole warps of WARP × the warp's largest count (members past the last whole warp left
    out)."""
    warps = steps[: steps.size // WARP * WARP].reshape(-1, WARP)
    return float(warps.sum() / (WARP * warps.max(axis=1)).sum())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", type=int, default=4096)
    parser.add_argument("--steps", type=int, nargs="+", default=[200, 1000])
    parser.add_argument("--cases", nargs="+", default=list(RK45_CASES), choices=RK45_CASES)
    args = parser.parse_args()
    print(f"{'case':<20} {'steps':>6} {'accepted mean':>13} {'max':>5}  warp efficiency: own order, by carried step, "
          "by last segment's steps")
    for case in args.cases:
        system, method, options, state, shadow = case_state(case, args.members)
        for steps in args.steps:
            first = integrate(system, method, state, DT, steps, steps, **options)
            second = integrate(system, method, first.final, DT, steps, steps, restart=True, carry=first.carry,
                               start_step=steps, **options)
            accepted = second.solver_iterations
            by_step = np.argsort(first.carry["step_size"], kind="stable")
            by_count = np.argsort(first.solver_iterations, kind="stable")
            print(f"{case:<20} {steps:>6} {accepted.mean():>13.1f} {accepted.max():>5}  "
                  f"{warp_efficiency(accepted):.3f}, {warp_efficiency(accepted[by_step]):.3f}, "
                  f"{warp_efficiency(accepted[by_count]):.3f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
