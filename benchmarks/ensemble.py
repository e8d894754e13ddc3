"""End-to-end ensemble runs through the product against the bare kernel on the same cores.

    .venv/bin/python benchmarks/ensemble.py [--members 100000] [--steps 10000] [--wide-members 10000000]

Case 1 (the issue's): Example 2 (sphere_nbody, vi), 1e5 members × 1e4 steps saving every 100 steps,
through ``ensemble.run`` on the local cluster (one single-threaded worker per core) vs one
``kernels.integrate`` call on all cores.  Targets: wall ≤ 1.15× the bare kernel, Zarr writes < 5 %
of wall, client peak memory < 1 GB.  Case 2: 1e7 members × 1e2 steps, energy only (per-task
overhead).  Stores go to a temporary directory that is removed afterwards.
"""

import argparse
import io
import os
import resource
import sys
import tempfile
import time

# This script shares its name with the package it measures: keep its own folder off the import path.
sys.path = [p for p in sys.path if not p.endswith("benchmarks")]

import ensemble  # noqa: E402
from ensemble.plan import Plan  # noqa: E402
from ensemble.store import summary  # noqa: E402
from kernels import integrate  # noqa: E402
from kernels.integrate import default_threads  # noqa: E402

SPEC = """
[system]
name = "sphere_nbody"
preset = "paper"

[integrator]
method = "vi"
dt = 0.001
t_end = {t_end}
save_every = {save_every}
checkpoint_every = {checkpoint_every}

[ensemble]
members = {members}
seed = 1
initial = "perturb"
chunk = {chunk}

[output]
store = "{store}"
variables = ["energy"{extra}]

[cluster]
kind = "local"
workers = {workers}
"""


def peak_client_megabytes() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure(directory, label, members, steps, save_every, checkpoint_every, chunk, extra=""):
    workers = default_threads()
    store = os.path.join(directory, f"{label}.zarr")
    spec = ensemble.parse_spec(SPEC.format(t_end=steps * 1e-3, save_every=save_every, checkpoint_every=checkpoint_every,
                                           members=members, chunk=chunk, store=store, workers=workers, extra=extra))
    start = time.perf_counter()
    ensemble.run(spec, stream=io.StringIO())
    wall = time.perf_counter() - start
    client_mb = peak_client_megabytes()
    status = summary(store)

    plan = Plan(spec)
    q, omega = plan.initial_state(0, members)
    integrate(plan.system, "vi", q[:256], omega[:256], 1e-3, 10, 10)  # compile / load from cache
    start = time.perf_counter()
    integrate(plan.system, "vi", q, omega, 1e-3, steps, save_every, outputs=("energy",), threads=workers)
    bare = time.perf_counter() - start
    write_share = status["write_seconds"] / workers / wall
    print(f"{label:<28}{members:>10}{steps:>8}{wall:>10.1f}{bare:>10.1f}{wall / bare:>8.2f}{write_share:>9.1%}"
          f"{client_mb:>11.0f}{members * steps / wall:>12.3e}", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--members", type=int, default=100_000)
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--wide-members", type=int, default=10_000_000)
    args = parser.parse_args()
    print(f"{default_threads()} workers; wall = ensemble.run end to end (cluster start, ICs, kernel, Zarr), "
          "bare = one integrate call on all cores")
    print(f"{'case':<28}{'members':>10}{'steps':>8}{'wall s':>10}{'bare s':>10}{'ratio':>8}{'writes':>9}"
          f"{'client MB':>11}{'m-steps/s':>12}")
    with tempfile.TemporaryDirectory() as directory:
        measure(directory, "Example 2, save every 100", args.members, args.steps, 100, 2500, 12_500)
        measure(directory, "energy only, 100 steps", args.wide_members, 100, 100, 100, 500_000)
    print("targets (case 1): ratio <= 1.15, writes < 5 % of wall, client < 1000 MB")


if __name__ == "__main__":
    main()
