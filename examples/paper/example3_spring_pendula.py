"""Example 3 of Lee–Leok–McClamroch: spherical pendula coupled by springs, VI vs RK2 (plain and projected)."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import Run, run_example  # noqa: E402

H = 1e-3
run_example(
    "example3_spring_pendula", "Example 3: spherical pendula connected by springs", "spring_pendula", 10.0,
    [Run("vi", "vi", H, paper={"mean_abs_dE": 3.6171e-5, "mean_unit": 4.2712e-15}),
     Run("rk2", "rk2", H),
     Run("rk2_projected", "rk2_projected", H)],
    notes=("the paper gives no step or duration for this example; h = 1e-3 s and T = 10 s are our choice, "
           "so its numbers are only indicative",),
)
