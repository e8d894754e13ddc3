"""Example 6 of Lee–Leok–McClamroch: 642 Lennard-Jones particles on a sphere, h = 0.005 s, T = 5 s, VI only."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import Run, run_example  # noqa: E402

run_example(
    "example6_lennard_jones", "Example 6: Lennard-Jones particles on a sphere", "sphere_lj", 5.0,
    [Run("vi", "vi", 0.005, save_every=10, paper={"mean_abs_dE": 1.8893e-3, "mean_unit": 5.2623e-15})],
    notes=("the paper shows no baseline for this example",
           "the initial velocity field is the package's choice (the paper gives none); saved every 10th step"),
)
