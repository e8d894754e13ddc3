"""Shared run / print / plot logic for the scripts reproducing Examples 1–6 of
Lee, Leok & McClamroch, "Lagrangian Mechanics and Variational Integrators on Two-Spheres".

Each example script only states its system, step, duration, methods and the paper's numbers, then
calls :func:`run_example`.  Statistics (all over the saved samples, sample 0 = initial state):

  mean |dE|      time-average of |E_k - E_0|                (J)
  mean |dE|/|E0| the same divided by |E_0|
  max |dE|/|E0|  maximum of |E_k - E_0| / |E_0|
  mean unit      time-average of max_i | ||q_i|| - 1 |
  max unit       maximum of the same
"""

from __future__ import annotations

import argparse
import os
import time
from dataclasses import dataclass, field

import numpy as np

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from armillary.kernels import get_system, integrate  # noqa: E402
from armillary.kernels.status import MEANINGS, OK  # noqa: E402

#: statistic key -> column header
STATS = {
    "mean_abs_dE": "mean |dE| (J)",
    "mean_rel_dE": "mean |dE|/|E0|",
    "max_rel_dE": "max |dE|/|E0|",
    "mean_unit": "mean unit err",
    "max_unit": "max unit err",
}


@dataclass
class Run:
    """One integration of the example: a label for tables and plots, a method, a step and options."""

    label: str
    method: str
    dt: float
    save_every: int = 1
    options: dict = field(default_factory=dict)
    #: the paper's numbers for this run, keyed by a STATS key
    paper: dict = field(default_factory=dict)
    #: kernels.integrate's ``outputs`` (the state variables to keep samples of; energy and the unit error are
    #: always kept): add "q", "omega" to get the saved states
    outputs: tuple = ("energy", "unit_error")


def parse_args(description: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--out", default="out/paper", help="directory for the PNG (default: out/paper/)")
    return parser.parse_args()


def statistics(trajectory) -> dict:
    energy = trajectory.energy[0]
    unit = trajectory.unit_error[0]
    e0 = energy[0]
    deviation = np.abs(energy - e0)
    return {
        "E0": e0,
        "mean_abs_dE": float(np.mean(deviation)),
        "mean_rel_dE": float(np.mean(deviation) / abs(e0)),
        "max_rel_dE": float(np.max(deviation) / abs(e0)),
        "mean_unit": float(np.mean(unit)),
        "max_unit": float(np.max(unit)),
    }


def run_one(system, run: Run, duration: float):
    state = {name: value[None] for name, value in system.initial_state().items()}
    n_steps = int(round(duration / run.dt))
    start = time.perf_counter()
    trajectory = integrate(system, run.method, state, run.dt, n_steps, run.save_every,
                           outputs=run.outputs, **run.options)
    elapsed = time.perf_counter() - start
    status = int(trajectory.status[0])
    if status != OK:
        print(f"  WARNING: {run.label} stopped at step {trajectory.failed_step[0]}: {MEANINGS[status]}")
    return trajectory, elapsed, n_steps


def plot_energy(path: str, title: str, results: list) -> None:
    """Top: E(t) - E0; bottom: |E(t) - E0| on a log scale (for runs that differ by orders of magnitude)."""
    fig, (linear, log) = plt.subplots(2, 1, figsize=(8, 6.5), sharex=True)
    for run, trajectory, _ in results:
        deviation = trajectory.energy[0] - trajectory.energy[0, 0]
        linear.plot(trajectory.time, deviation, lw=0.8, label=run.label)
        log.semilogy(trajectory.time[1:], np.maximum(np.abs(deviation[1:]), 1e-18), lw=0.8, label=run.label)
    linear.set_ylabel("E - E0 (J)")
    log.set_ylabel("|E - E0| (J)")
    log.set_xlabel("t (s)")
    linear.set_title(title)
    linear.legend(fontsize=8)
    linear.grid(alpha=0.3)
    log.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def run_example(name: str, title: str, system_name: str, duration: float, runs: list[Run],
                notes: tuple[str, ...] = (), system_params: dict | None = None) -> list:
    """Integrate every run, print the statistics and the paper's numbers, save ``<out>/<name>.png``."""
    args = parse_args(title)
    os.makedirs(args.out, exist_ok=True)
    system = get_system(system_name, "paper", **(system_params or {}))
    print(f"{title}\n  system {system_name!r} (preset 'paper', {system.initial_state()['q'].shape[0]} bodies), "
          f"T = {duration:g} s")
    for note in notes:
        print(f"  note: {note}")

    results = []
    for run in runs:
        trajectory, elapsed, n_steps = run_one(system, run, duration)
        results.append((run, trajectory, statistics(trajectory)))
        print(f"  ran {run.label:<22} {n_steps} steps of h = {run.dt:g} s in {elapsed:6.1f} s (incl. any compilation)")

    print(f"\n  E0 = {results[0][2]['E0']:.10g} J\n")
    header = f"  {'run':<22}" + "".join(f"{h:>16}" for h in STATS.values())
    print(header)
    print("  " + "-" * (len(header) - 2))
    for run, _, stats in results:
        print(f"  {run.label:<22}" + "".join(f"{stats[key]:>16.4e}" for key in STATS))

    compared = [(run, stats) for run, _, stats in results if run.paper]
    if compared:
        print(f"\n  {'run':<22}{'statistic':<18}{'paper':>14}{'measured':>14}")
        for run, stats in compared:
            for key, value in run.paper.items():
                print(f"  {run.label:<22}{STATS[key]:<18}{value:>14.4e}{stats[key]:>14.4e}")

    path = os.path.join(args.out, f"{name}.png")
    plot_energy(path, title, results)
    print(f"\n  energy plot: {path}")
    return results
