"""Molecular dynamics on one CUDA GPU: particle-steps per second of the system mode with ``device = "cuda"``
(kernels/gpu_system.py) for Lennard-Jones particles on the unit sphere, beside the same machine's CPU cores in the
same run, and the GPU's difference from the CPU (issue 62).

    .venv/bin/python benchmarks/md_gpu.py [--sizes 64000 1000000] [--steps 200] [--cpu-steps 50] [--repeats 3]
        [--cases vi langevin] [--out FILE.json]

Setup as benchmarks/md.py's (reduced LJ units, τ = σ√(m/ε)): ρ* = N σ²/4π = 0.8 on the unit sphere, r_c = 2.5σ
shifted, the skin "auto", h = 0.005τ, a Fibonacci lattice with Maxwell–Boltzmann velocities at T* = 1;
langevin's bath T* = 1, γ = 1/τ.  Each (case, size) is timed ``--repeats`` times after a compiling call at 1000
particles and the fastest counts; a timed call is a whole ``integrate`` (the first list build and a sample at each
end included, the state not kept).  The CPU runs ``--cpu-steps`` steps on all its cores (the rates are per
particle-step, so the step counts may differ).  The difference from the CPU: the largest |q_gpu − q_cpu| after
``--cpu-steps`` steps at the first size (round-off: the sums run in other orders, and NVVM fuses multiply–adds).

Targets (issue 62, an H100- or H200-class GPU; HOOMD-blue's LJ benchmark on an A100 is ≈ 2.8×10⁸ in single
precision): at 10⁶ particles ≥ 3×10⁸ particle-steps/s in float64 and ≥ 10× the same machine's 16 cores; at
6.4×10⁴ ≥ 1.5×10⁸; langevin ≤ 1.3× the cost of vi on the GPU.

Without a GPU (or its driver) the script says what is missing and exits 2.  ``NUMBA_ENABLE_CUDASIM=1`` runs it
through numba-cuda's simulator, with tiny sizes only (``--sizes 400 --steps 2 --cpu-steps 2 --repeats 1``): a
check of the script, not a measurement.
"""

import argparse
import sys

import numpy as np

from gpu import parsed_where_a_gpu_runs, write_figures
from machine import run_conditions, run_start
from timing import member_step_rates, rates_text

from armillary.kernels import get_system, integrate  # noqa: E402
from armillary.kernels.geometry import fibonacci_sphere, thermal_velocities  # noqa: E402
from armillary.kernels.integration import default_threads  # noqa: E402

#: case → (method, options for σ (the bath's friction 1/τ = 1/σ at m = ε = 1))
CASES = {"vi": ("vi", lambda sigma: {}),
         "langevin": ("langevin", lambda sigma: {"temperature": 1.0, "friction": 1.0 / sigma})}
#: particle-steps per second the GPU should reach (issue 62), by size
TARGETS = {64_000: 1.5e8, 1_000_000: 3e8}
#: particles of the compiling call
WARM_UP = 1000


def lennard_jones(n: int) -> tuple:
    """(system, state, h, σ) of n LJ particles at ρ* = 0.8 on the unit sphere (the module's setup)."""
    sigma = float(np.sqrt(0.8 * 4.0 * np.pi / n))
    q = fibonacci_sphere(n)
    state = {"q": q[np.newaxis], "omega": thermal_velocities(q, 1.0, 1.0, seed=1)[np.newaxis]}
    return get_system("sphere_lj", epsilon=1.0, sigma=sigma, cutoff=2.5 * sigma), state, 0.005 * sigma, sigma


def system_run(case: str, n: int, steps: int, device: str):
    """One system-mode ``integrate`` of ``case`` for n particles and ``steps`` steps on ``device``."""
    method, options = CASES[case]
    system, state, h, sigma = lennard_jones(n)
    return integrate(system, method, state, h, steps, steps, mode="system", device=device, outputs=(),
                     **options(sigma))


def rates(case: str, n: int, steps: int, repeats: int, device: str) -> list[float]:
    """Particle-steps per second of ``repeats`` timed runs, after a compiling one."""
    system_run(case, WARM_UP, 2, device)
    return member_step_rates(lambda: system_run(case, n, steps, device), n, steps, repeats)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=sorted(TARGETS))
    for flag, default in (("--steps", 200), ("--cpu-steps", 50), ("--repeats", 3)):
        parser.add_argument(flag, type=int, default=default)
    args = parsed_where_a_gpu_runs(parser, CASES, "md_gpu.py")
    if args is None:
        return 2
    start = run_start()
    print(f"LJ at ρ* = 0.8, r_c 2.5σ, skin auto; {args.steps} steps on the GPU, {args.cpu_steps} on the CPU's "
          f"{default_threads()} threads; fastest of {args.repeats}", flush=True)
    results = []
    for n in args.sizes:
        for case in args.cases:
            on_gpu = rates(case, n, args.steps, args.repeats, "cuda")
            on_cpu = rates(case, n, args.cpu_steps, args.repeats, "cpu")
            target = TARGETS.get(n)
            results.append({"case": case, "particles": n, "gpu": max(on_gpu), "cpu": max(on_cpu),
                            "ratio": max(on_gpu) / max(on_cpu), "target": target, "gpu_rates": on_gpu,
                            "cpu_rates": on_cpu})
            print(f"{case:<9} N = {n:>8}  gpu {rates_text(on_gpu)}  cpu {rates_text(on_cpu)}  "
                  f"ratio {max(on_gpu) / max(on_cpu):.1f}× (target ≥ 10×)"
                  + (f"  target {target:.1e}: {'met' if max(on_gpu) >= target else 'not met'}" if target else ""),
                  flush=True)
        if {"vi", "langevin"} <= set(args.cases):
            by_case = {result["case"]: result["gpu"] for result in results if result["particles"] == n}
            print(f"langevin costs {by_case['vi'] / by_case['langevin']:.2f}× vi on the GPU at N = {n} (target "
                  "≤ 1.3×)", flush=True)
    first = args.sizes[0]
    difference = max(float(np.abs(system_run(case, first, args.cpu_steps, "cuda").final["q"]
                                  - system_run(case, first, args.cpu_steps, "cpu").final["q"]).max())
                     for case in args.cases)
    print(f"largest |q_gpu − q_cpu| after {args.cpu_steps} steps at N = {first}: {difference:.1e}")
    print(run_conditions(start))
    write_figures(results + [{"q_difference": difference, "particles": first, "steps": args.cpu_steps}], args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
