"""Example 2 of Lee–Leok–McClamroch: three bodies on a sphere, T = 10 s, VI vs RK2 at h = 1e-3 and 1e-4."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import Run, run_example  # noqa: E402

run_example(
    "example2_three_body", "Example 2: three bodies on a sphere", "sphere_nbody", 10.0,
    [Run("vi h=1e-3", "vi", 1e-3, paper={"max_rel_dE": 1.1717e-4}),
     Run("rk2 h=1e-3", "rk2", 1e-3),
     Run("vi h=1e-4", "vi", 1e-4, save_every=10, paper={"max_rel_dE": 1.1986e-6}),
     Run("rk2 h=1e-4", "rk2", 1e-4, save_every=10)],
    notes=("the paper reports max |dE|/E0 for the VI only; RK2 is its baseline",
           "h = 1e-4 runs save every 10th step"),
)
