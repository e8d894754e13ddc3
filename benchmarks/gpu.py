"""Member-steps per second on one CUDA GPU (``device = "cuda"``) beside the same machine's CPU cores, in one run;
the share of a GPU run's wall time that transfers take; and the GPU's largest relative difference from the CPU
per case (round-off: NVVM fuses multiply–adds).

    .venv/bin/python benchmarks/gpu.py [--members 1000000] [--cpu-members 20000] [--steps 1000] [--save-every 100]
        [--repeats 3] [--cases explicit_vi lgvi_top rk4_cart rk45_chain] [--out FILE.json]

Cases (issue 50's):

- ``explicit_vi``: Example 2, 3 bodies (``sphere_nbody`` paper, diagonal M). Target ≥ 2×10¹⁰ member-steps/s on
  an H100-class GPU and ≥ 20× the same machine's 16 cores.
- ``lgvi_top``: the chaotic heavy top on SO(3). Target ≥ 5×10⁹.
- ``rk4_cart``: rk4 on sympy's cart with 5 unit links and masses (``multibody``, the articulated-body algorithm),
  released at rest from q = (0, 1.0, 1.2, 1.4, 1.6, 1.8). Target ≥ 10⁹. Its work is some 27 kB per thread (the
  method's and the system's, Kane's and the closures' scratch included), in each thread's local memory: the
  GPU reserves it for the threads resident at once, not for every member, and none of it crosses from the host
  but one member's start.
- ``rk45_chain``: rk45 on Example 1 (default tolerances), in accepted member-steps/s: the rates of ``--steps``
  units of time scaled by the CPU run's mean accepted steps per member. Target ≥ 10⁹.

Members are the preset's (or the case's) state perturbed by 1e-3 (seed 0). The GPU steps ``--members``, the CPU ``--cpu-members``
on all its cores (the rates are per member-step, so the sizes may differ). Each case is timed ``--repeats``
times after a compiling call, and the fastest counts. The transfer share is that of the last GPU run, from
:data:`kernels.gpu.last_run_seconds`, at one saved sample per ``--save-every`` steps, with the bytes it moved per
member (:data:`kernels.gpu.last_run_bytes`). The difference from the CPU
is the largest |q_gpu − q_cpu| / max |q_cpu| over the first ``--cpu-members`` members' end states.

Without a GPU (or its driver) the script says what is missing and exits 2. ``NUMBA_ENABLE_CUDASIM=1`` runs it
through numba-cuda's simulator, with tiny sizes only: a check of the script, not a measurement.
"""

import argparse
import json
import sys

import numpy as np

from machine import run_conditions, run_start
from timing import armillary_rates, rates_text, wall_seconds

# This script's folder holds benchmarks/kernels.py, named like the package it measures: keep it off the path.
sys.path = [p for p in sys.path if not p.endswith("benchmarks")]
from armillary.kernels import get_system, gpu, integrate  # noqa: E402
from armillary.kernels.integration import default_threads  # noqa: E402

#: sympy's n_link_pendulum_on_cart with 5 links (parameters, and the state its members are perturbed from)
CART = ({"m": (1.0,) * 5, "l": (1.0,) * 5}, {"q": np.array([0.0, 1.0, 1.2, 1.4, 1.6, 1.8]), "u": np.zeros(6)})
#: case → (system, preset, (parameters, state) or None for the preset's, method, dt (s), target member-steps/s on
#: the GPU)
CASES = {"explicit_vi": ("sphere_nbody", "paper", None, "vi", 1e-3, 2e10),
         "lgvi_top": ("heavy_top", "chaotic", None, "lgvi", 2e-3, 5e9),
         "rk4_cart": ("multibody", "n_link_pendulum_on_cart", CART, "rk4", 1e-3, 1e9),
         "rk45_chain": ("spherical_chain", "paper", None, "rk45", 1e-2, 1e9)}


def members_of(system, base: dict, count: int) -> dict:
    """``count`` members: ``base`` perturbed by 1e-3 (seed 0)."""
    rng = np.random.default_rng(0)
    normals = rng.normal(size=(count, system.space.normal_count(system.n_bodies)))
    return system.space.perturb(base, normals, 1e-3)


def measure(name: str, args) -> dict:
    """One case: GPU and CPU rates, the GPU run's transfer share and its difference from the CPU."""
    system_name, preset, given, method, dt, target = CASES[name]
    params, base = given or ({}, None)
    system = get_system(system_name, preset, **params)
    state = members_of(system, base or system.initial_state(), args.members)
    gpu_rates = armillary_rates(system, method, state, dt, args.steps, args.repeats, save_every=args.save_every,
                                device="cuda")
    parts, moved = dict(gpu.last_run_seconds), dict(gpu.last_run_bytes)
    cpu_state = {variable: value[:args.cpu_members] for variable, value in state.items()}
    cpu_rates = armillary_rates(system, method, cpu_state, dt, args.steps, args.repeats,
                                save_every=args.save_every)
    _, on_gpu = wall_seconds(lambda: integrate(system, method, cpu_state, dt, args.steps, args.save_every,
                                               outputs=(), device="cuda"), 1)
    _, on_cpu = wall_seconds(lambda: integrate(system, method, cpu_state, dt, args.steps, args.save_every,
                                               outputs=()), 1)
    if method == "rk45":  # accepted member-steps: the solver's count per member, not the nominal steps
        accepted = float(np.mean(on_cpu.solver_iterations)) / args.steps
        gpu_rates, cpu_rates = ([rate * accepted for rate in rates] for rates in (gpu_rates, cpu_rates))
    difference = max(float(np.nanmax(np.abs(on_gpu.final[v] - on_cpu.final[v])) / np.nanmax(np.abs(on_cpu.final[v])))
                     for v in on_cpu.final)
    transfer = (parts["to_device"] + parts["to_host"]) / sum(parts.values())
    result = {"case": name, "gpu": max(gpu_rates), "cpu": max(cpu_rates), "ratio": max(gpu_rates) / max(cpu_rates),
              "transfer_share": transfer, "relative_difference": difference, "target": target,
              "gpu_rates": gpu_rates, "cpu_rates": cpu_rates, "parts_seconds": parts,
              "bytes_per_member": {way: count / args.members for way, count in moved.items()}}
    print(f"{name:<12} gpu {rates_text(gpu_rates)}  cpu ({default_threads()} threads) {rates_text(cpu_rates)}  "
          f"ratio {result['ratio']:.1f}×  transfers {100 * transfer:.1f} % ({moved['to_device'] / args.members:.0f} B "
          f"in, {moved['to_host'] / args.members:.0f} B out per member)  max rel diff {difference:.1e}"
          + (f"  target {target:.0e}: {'met' if result['gpu'] >= target else 'not met'}" if target else ""),
          flush=True)
    return result


def parsed_where_a_gpu_runs(parser: argparse.ArgumentParser, cases, script: str):
    """``parser``'s arguments, with ``--cases`` (of ``cases``) and ``--out`` added; None, having said why on stderr,
    where no GPU runs (the script then exits 2)."""
    parser.add_argument("--cases", nargs="+", default=list(cases), choices=list(cases))
    parser.add_argument("--out", help="also write the figures to this JSON file")
    args = parser.parse_args()
    problem = gpu.device_problem()
    if problem is not None:
        print(f"{script}: no GPU here: {problem}", file=sys.stderr)
        return None
    return args


def write_figures(results: list, path: str | None) -> None:
    """The figures as JSON to ``path`` (``--out``), if given."""
    if path:
        with open(path, "w") as out:
            json.dump(results, out, indent=1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", type=int, default=1_000_000)
    parser.add_argument("--cpu-members", type=int, default=20_000)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--save-every", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    args = parsed_where_a_gpu_runs(parser, CASES, "gpu.py")
    if args is None:
        return 2
    start = run_start()
    print(f"{args.members} members on the GPU, {args.cpu_members} on the CPU, {args.steps} steps, a sample every "
          f"{args.save_every}, fastest of {args.repeats}", flush=True)
    results = [measure(name, args) for name in args.cases]
    print(run_conditions(start))
    write_figures(results, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
