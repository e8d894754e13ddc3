"""How closely a CUDA GPU's ensembles agree with the CPU's, and whether they repeat: per case of
``tests/gpu_cases.py`` (every method, space and kind of kernel the GPU runs), on a machine with a GPU.

    .venv/bin/python benchmarks/gpu_agreement.py [--members 256] [--steps 1000] [--save-every 1]
        [--cases explicit_vi lgvi_rotation ...] [--out FILE.json]

For each case, the members (the case's preset perturbed by 1e-2, seed 0) run on the CPU, on the GPU, and on the
GPU with ``fma=False``. Printed and written per case:

- ``relative_difference``: the largest |x_gpu − x_cpu| / max |x_cpu| over members and state variables, at the
  samples of steps 1, 10, 100 and 1000 (those within ``--steps`` that are saved), with and without fused multiply–adds. Chaotic
  cases amplify the first round-off difference at their Lyapunov rate, so the later samples measure the system
  as much as the kernel: the first sample is the kernel's own figure.
- ``energy_difference``: the same for the energy, over the whole run.
- ``repeats``: a second GPU run has the same bits.
- ``chunk_independent``: the first members run alone have the bits they have in the whole ensemble.
- ``restart_bitwise``: the run in two segments has the bits of the run in one (fixed-step cases without shadows).

It exits 2, saying why, on a machine without a GPU. Not in ``make bench``: development machines have none.
"""

import argparse
import os
import sys

import numpy as np

from gpu import parsed_where_a_gpu_runs, write_figures  # benchmarks/gpu.py, which takes its folder off the path

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))
from gpu_cases import CASES, DT, case_state  # noqa: E402

from armillary.kernels import integrate  # noqa: E402

#: the steps whose samples the relative differences are reported at
REPORTED_STEPS = (1, 10, 100, 1000)


def relative_difference(gpu_states: dict, cpu_states: dict) -> np.ndarray:
    """Per sample: the largest |x_gpu − x_cpu| / max |x_cpu| over members and variables (a variable of no
    components, as some of the rolling spaces' state has, is left out: it has no difference to show)."""
    worst = None
    for name, cpu_value in cpu_states.items():
        if cpu_value[0, 0].size == 0:
            continue
        scale = np.nanmax(np.abs(cpu_value)) or 1.0
        per_sample = np.nanmax(np.abs(gpu_states[name] - cpu_value).reshape(*cpu_value.shape[:2], -1),
                               axis=(0, 2)) / scale
        worst = per_sample if worst is None else np.maximum(worst, per_sample)
    return worst


def same_bits(first: dict, second: dict) -> bool:
    return all(np.array_equal(first[name], second[name], equal_nan=True) for name in first)


def agreement(name: str, members: int, steps: int, save_every: int) -> dict:
    system, method, options, state, shadow = case_state(name, members)

    def run(device="cuda", start=state, n_steps=steps, **extra):
        return integrate(system, method, start, DT, n_steps, save_every, shadow=shadow, device=device,
                         **options, **extra)

    on_cpu, on_gpu, again, unfused = run("cpu"), run(), run(), run(fma=False)
    sample_steps = on_cpu.time / DT
    at = {step: int(np.flatnonzero(sample_steps == step)[0]) for step in REPORTED_STEPS
          if step <= steps and step % save_every == 0}
    difference = relative_difference(on_gpu.state, on_cpu.state)
    difference_unfused = relative_difference(unfused.state, on_cpu.state)
    energy = float(np.nanmax(np.abs(on_gpu.energy - on_cpu.energy)) / np.nanmax(np.abs(on_cpu.energy)))
    result = {"case": name, "method": method, "space": system.space.name, "members": members, "steps": steps,
              "relative_difference": {step: float(difference[index]) for step, index in at.items()},
              "relative_difference_fma_false": {step: float(difference_unfused[index]) for step, index in at.items()},
              "energy_difference": energy,
              "fma_false_equals_cpu": same_bits(unfused.state, on_cpu.state),
              "repeats": same_bits(on_gpu.state, again.state) and same_bits(on_gpu.final, again.final),
              "failed_members": int(np.count_nonzero(on_gpu.status))}
    if shadow is None:
        few = {variable: value[:3] for variable, value in state.items()}
        alone = run(start=few)
        result["chunk_independent"] = same_bits(alone.final, {v: x[:3] for v, x in on_gpu.final.items()})
    if shadow is None and method != "rk45":  # rk45 clips a step onto a segment's end: two segments are not one run
        half = steps // 2
        first = run(n_steps=half)
        second = integrate(system, method, first.final, DT, steps - half, save_every, restart=True,
                           carry=first.carry, start_step=half, device="cuda", **options)
        result["restart_bitwise"] = same_bits(second.final, on_gpu.final)
    print(f"{name:<22} {method:<4} rel. diff at steps " + ", ".join(
        f"{step}: {value:.1e}" for step, value in result["relative_difference"].items())
        + "; fma=false " + ", ".join(f"{value:.1e}" for value in result["relative_difference_fma_false"].values())
        + f"; energy {energy:.1e}; repeats {result['repeats']}; chunk {result.get('chunk_independent', '-')}; "
        f"restart {result.get('restart_bitwise', '-')}; fma=false is the CPU's bits {result['fma_false_equals_cpu']}",
        flush=True)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", type=int, default=256)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--save-every", type=int, default=1)
    args = parsed_where_a_gpu_runs(parser, CASES, "gpu_agreement.py")
    if args is None:
        return 2
    write_figures([agreement(name, args.members, args.steps, args.save_every) for name in args.cases], args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
