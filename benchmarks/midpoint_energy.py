"""The midpoint's long-time energy behaviour at full size (issue 17's acceptance; the test runs 2×10⁴ steps):
n_link_pendulum_on_cart with five unit links hanging from the cart, swung by up to 0.5 rad and released,
10⁶ steps of h = 0.02 s and of h = 0.01 s by ``midpoint`` and by ``rk4``, one member each.  Prints, per
method and h, the largest |E − E0| (J) in each tenth of the run, the last tenth over the first (bounded:
within 2×; drift: more than 5×), the most Newton iterations in a step and the wall time.  (At h = 0.02 rk4
has lost 2.3 J within its first 10⁵ steps and drifts sublinearly after; at h = 0.01 its drift is steady.)"""

import sys
import time

import numpy as np

# This script's folder holds benchmarks/kernels.py, named like the package it measures: keep it off the path.
sys.path = [p for p in sys.path if not p.endswith("benchmarks")]

from armillary.kernels import get_system, integrate  # noqa: E402

STEPS, STEP_SIZES, TENTHS = 1_000_000, (0.02, 0.01), 10
#: the five-link chain hanging from its cart (q = π: down), links swung by up to 0.5 rad, at rest
SWUNG = {"q": np.array([[0.0, np.pi + 0.5, np.pi - 0.3, np.pi + 0.4, np.pi - 0.2, np.pi + 0.1]]), "u": np.zeros((1, 6))}


def main() -> None:
    system = get_system("multibody", "n_link_pendulum_on_cart", m=(1.0,) * 5, l=(1.0,) * 5)
    print(f"5-link pendulum on a cart, {STEPS:.0e} steps, E0 = "
          f"{float(integrate(system, 'rk4', SWUNG, 0.01, 1, 1).energy[0, 0]):.6g} J")
    print(f"{'method':>9} {'h s':>5} {'wall s':>8} {'newton max':>10} {'last/first':>11}  max |E − E0| per tenth (J)")
    for h in STEP_SIZES:
        for method in ("midpoint", "rk4"):
            integrate(system, method, SWUNG, h, 2, 1)  # compile outside the timing
            start = time.perf_counter()
            result = integrate(system, method, SWUNG, h, STEPS, 100)
            wall = time.perf_counter() - start
            error = np.abs(result.energy[0] - result.energy[0, 0])[1:].reshape(TENTHS, -1).max(axis=1)
            print(f"{method:>9} {h:5.2f} {wall:8.1f} {int(result.solver_iterations[0]):10d} {error[-1] / error[0]:11.3g}"
                  "  " + " ".join(f"{e:.3g}" for e in error) + f"  (status {int(result.status[0])})")


if __name__ == "__main__":
    main()
