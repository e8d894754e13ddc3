"""`armillary report` over a large energy-only store: wall time and peak memory of the report process.

    .venv/bin/python benchmarks/report.py [--members 1000000] [--samples 100]

Runs Example 2 (``sphere_nbody``, vi, perturbed members) into an energy-only store, then runs
``armillary report`` on it in a child process.  Target (issue 4): peak RSS < 2 GB at 10⁶ members ×
100 samples.  The store goes to a temporary directory that is removed afterwards.
"""

import argparse
import io
import os
import subprocess
import sys
import tempfile
import time

# This script shares its name with a module of the package it measures: keep its folder off the path.
sys.path = [p for p in sys.path if not p.endswith("benchmarks")]

from armillary import ensemble  # noqa: E402

SPEC = """
[system]
name = "sphere_nbody"
preset = "paper"
[integrator]
method = "vi"
dt = 0.001
t_end = {t_end}
save_every = 1
[ensemble]
members = {members}
initial = "perturb"
chunk = 50000
[output]
store = "{store}"
variables = ["energy"]
"""


def build_store(path: str, members: int, samples: int) -> None:
    """A real run: Example 2 perturbed, ``samples`` − 1 steps saving every step, energy only."""
    spec = SPEC.format(t_end=round((samples - 1) * 0.001, 9), members=members, store=path)
    ensemble.run(ensemble.parse_spec(spec), stream=io.StringIO())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", type=int, default=1_000_000)
    parser.add_argument("--samples", type=int, default=100)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="armillary-report-") as scratch:
        store = os.path.join(scratch, "large.zarr")
        started = time.perf_counter()
        build_store(store, args.members, args.samples)
        print(f"store: {args.members:.0e} members x {args.samples} samples, "
              f"{args.members * args.samples * 8 / 1e6:.0f} MB of energy, run in {time.perf_counter() - started:.1f} s")
        started = time.perf_counter()
        # the report's own peak: VmHWM (RUSAGE_CHILDREN would count the run's worker processes, and a
        # child's ru_maxrss starts from this process's peak at the fork)
        code = (f"import sys; sys.path.append({os.path.dirname(os.path.abspath(__file__))!r}); "
                "from machine import peak_memory_megabytes; from armillary.jobs.cli import main; code = main(); "
                "print(peak_memory_megabytes()); sys.exit(code)")
        output = subprocess.run([sys.executable, "-c", code, "report", store, "--out", os.path.join(scratch, "report")],
                                check=True, stdout=subprocess.PIPE, text=True).stdout  # errors (stderr) stay visible
        wall = time.perf_counter() - started
        peak = float(output.split()[-1])
        print(f"armillary report: {wall:.1f} s wall, peak RSS {peak:.0f} MB "
              f"({'meets' if peak < 2048 else 'MISSES'} the < 2 GB target)")


if __name__ == "__main__":
    main()
