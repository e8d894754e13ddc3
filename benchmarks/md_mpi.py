"""One MD system on MPI ranks (issue 72): what the domain decomposition costs, measured here and modelled at scale.

    .venv/bin/python benchmarks/md_mpi.py [--particles 100000] [--steps 200] [--repeats 3]
                                          [--runs 1x1 1x2 2x1 4x1] [--latency 2e-6] [--bandwidth 100e9]

Each run ``RxT`` is R MPI ranks (the MPICH wheel's ``mpiexec``) of T Numba threads each stepping one sphere_lj
system of N particles at ρ* = N σ²/4π = 0.8 (r_c = 2.5σ, skin 0.3σ, vi, h = 0.005τ, T* = 1 from a Fibonacci lattice)
through :func:`armillary.kernels.domain.run_decomposed`, in its own processes; a run on one rank uses the
single-process exchange (what ``armillary run`` does without a launcher).  Every figure is the fastest of
``--repeats`` rounds, each round running every configuration in turn.  Printed per run: particle-steps per second,
the ratio to the 1-rank run on as many cores, the particles each rank owns and its ghosts (at the last build), the
halo's bytes a rank sends per step, the share of the step spent inside communication calls (waiting for a slower rank
included) and the imbalance (most owned over the mean).  Runs with more ranks × threads than cores are marked
oversubscribed.

Then a model of T ranks at 10⁶–10⁸ particles on a network of the given latency α (s) and bandwidth β (bits/s),
built from this machine's measured per-particle cost c (s per particle-step on one core, from the 1x1 run) and per-step
overhead t₀ (the driver's calls: bounded by the whole step of a 1000-particle run on one rank), and the patches' geometry: the cell order is
(x, y, z), the sphere's area is uniform in x (Archimedes), so with L = ⌊2/r_list⌋ cells per axis each rank of R ≤ L
owns a band of L/R x-slabs and its ghosts are the two slabs beside it, G = 2N/L (one slab at the poles); beyond L
ranks a rank owns part of one slab and its ghosts are about three times its own, G ≈ 3N/R, from up to 8 neighbours.
A step costs

    t(R, N) = c N/R + t₀ + (m α + 24 G·8/β)  [halo: m neighbours, 24 bytes a ghost]
              + ⌈log₂ R⌉ α                    [the step's one reduction: its status and largest displacement]
              + (a rebuild every 10 steps: the cut search, 40 ⌈log₂ R⌉ α, and the ghosts' ids and the particles that
                 cross a border, about a tenth of the ghosts, 128 bytes each: G (8 + 12.8)·8/β)

and the efficiency is c N / (R t(R, N)) (strong scaling at N fixed; weak scaling at N = 10⁵ R).  Samples (two
all-to-alls and a tree of sums every save_every steps) are left out: at save_every ≥ 100 they cost < 1 % of a step.
"""

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
BIN = os.path.dirname(sys.executable)
#: Verlet range in σ (r_c 2.5σ + skin 0.3σ), and the density ρ* = N σ²/4π
LIST_SIGMAS, DENSITY = 2.8, 0.8


class TimedExchange:
    """An exchange that adds up the seconds spent in its calls and the bytes its halo sends."""

    def __init__(self, inner):
        self.inner, self.seconds, self.halo_bytes = inner, 0.0, 0
        self.rank, self.size, self.id_grain = inner.rank, inner.size, inner.id_grain

    def __getattr__(self, name):
        call = getattr(self.inner, name)

        def timed(*args):
            started = time.perf_counter()
            try:
                return call(*args)
            finally:
                self.seconds += time.perf_counter() - started
        return timed

    def halo(self, sends, receive_counts):
        self.halo_bytes += sum(rows.nbytes for rows in sends.values())
        started = time.perf_counter()
        try:
            return self.inner.halo(sends, receive_counts)
        finally:
            self.seconds += time.perf_counter() - started


def lj_start(n: int):
    """sphere_lj at ρ* = 0.8 and its start: a Fibonacci lattice, Maxwell–Boltzmann velocities at T* = 1."""
    from armillary.kernels import get_system
    from armillary.kernels.geometry import fibonacci_sphere, thermal_velocities

    sigma = math.sqrt(DENSITY * 4.0 * math.pi / n)
    system = get_system("sphere_lj", epsilon=1.0, sigma=sigma, cutoff=2.5 * sigma)
    q = fibonacci_sphere(n)
    return system, sigma, q, thermal_velocities(q, np.ones(n), 1.0, seed=1)


def worker(n: int, steps: int, threads: int, out: str) -> None:
    """One run, on the ranks of this mpiexec: rank 0 writes its figures (JSON) to ``out``."""
    import numba

    from armillary.kernels import domain

    numba.set_num_threads(threads)
    if int(os.environ.get("PMI_SIZE", "1")) > 1:
        from armillary.ensemble.mpi import MpiExchange, world

        exchange = TimedExchange(MpiExchange(world()))
    else:
        exchange = TimedExchange(domain.SingleRank())
    system, sigma, q, omega = lj_start(n)
    coef = np.ascontiguousarray(system.definition.coefficients(system.broadcast(1, n), n).T)
    mine = slice(*domain.id_range(n, exchange))

    def run(count):
        return domain.run_decomposed(system, "vi", np.ascontiguousarray(q[mine, :, None]),
                                     np.ascontiguousarray(omega[mine, :, None]), np.ones((mine.stop - mine.start, 1)),
                                     coef.copy(), 0.005 * sigma, count, count, 2.5 * sigma, 0.3 * sigma, False, False,
                                     0, 0.0, n, exchange)

    run(2)  # the kernels from Numba's cache
    exchange.seconds, exchange.halo_bytes = 0.0, 0
    started = time.perf_counter()
    result = run(steps)
    elapsed = time.perf_counter() - started
    figures = exchange.inner.allgather((elapsed, exchange.seconds, exchange.halo_bytes, result["owned"],
                                        result["ghosts"])) if exchange.size > 1 else [
        (elapsed, exchange.seconds, exchange.halo_bytes, result["owned"], result["ghosts"])]
    if exchange.rank == 0:
        elapsed, comm, sent, owned, ghosts = (np.array(column, float) for column in zip(*figures))
        with open(out, "w") as handle:
            json.dump({"rate": n * steps / elapsed.max(), "comm_share": float((comm / elapsed).mean()),
                       "halo_bytes_per_step": float(sent.mean() / steps), "owned": float(owned.mean()),
                       "ghosts": float(ghosts.mean()), "imbalance": float(owned.max() / owned.mean()),
                       "rebuilds": int(result["rebuilds"])}, handle)


def measure(ranks: int, threads: int, n: int, steps: int) -> dict:
    """One run ``ranks``x``threads`` in its own processes."""
    with tempfile.TemporaryDirectory() as directory:
        out = os.path.join(directory, "figures.json")
        command = [sys.executable, os.path.abspath(__file__), "--worker", str(n), str(steps), str(threads), out]
        if ranks > 1:
            command = [os.path.join(BIN, "mpiexec"), "-n", str(ranks)] + command
        subprocess.run(command, check=True, env={**os.environ, "NUMBA_NUM_THREADS": str(threads)})
        with open(out) as handle:
            return json.load(handle)


def cells_per_axis(n: int) -> int:
    """L of the list's grid at n particles (kernels.neighbours.grid_cells_per_axis, cap included)."""
    list_range = LIST_SIGMAS * math.sqrt(DENSITY * 4.0 * math.pi / n)
    return min(int(2.0 / list_range), int((16 * n) ** (1.0 / 3.0)))


def ghosts_and_neighbours(n: int, ranks: int) -> tuple[float, int]:
    """The model's ghosts per rank and neighbour ranks (see the module's docstring)."""
    if ranks == 1:
        return 0.0, 0
    slabs = cells_per_axis(n)
    if ranks <= slabs:
        return 2.0 * n / slabs, 2
    return 3.0 * n / ranks, 8


#: the step's collectives (one Allreduce of its outcome and largest displacement), each ⌈log₂R⌉ latencies deep
REDUCTIONS_PER_STEP = 1


def step_seconds(n: int, ranks: int, cost: float, fixed: float, latency: float, bandwidth: float) -> float:
    ghosts, neighbours = ghosts_and_neighbours(n, ranks)
    hops = math.ceil(math.log2(ranks)) if ranks > 1 else 0
    halo = (neighbours * latency + 24.0 * ghosts * 8.0 / bandwidth) if ranks > 1 else 0.0
    return cost * n / ranks + fixed + halo + REDUCTIONS_PER_STEP * hops * latency + rebuild_seconds(ghosts, hops, latency, bandwidth)


def rebuild_seconds(ghosts: float, hops: int, latency: float, bandwidth: float) -> float:
    """A rebuild's traffic, per step (one every 10 steps)."""
    return (40 * hops * latency + ghosts * (8.0 + 12.8) * 8.0 / bandwidth) / 10.0 if hops else 0.0


def model_table(cost: float, fixed: float, latency: float, bandwidth: float) -> None:
    print(f"\nmodel: c = {cost:.3e} s per particle-step on one core, t0 = {fixed * 1e6:.0f} µs a step, "
          f"α = {latency * 1e6:g} µs, β = {bandwidth / 1e9:g} Gb/s")
    print("| scaling | N | ranks | particles/rank | ghosts/rank | efficiency | largest term beside c N/R |")
    print("|---|---|---|---|---|---|---|")
    for kind, sizes in (("strong", (10**6, 10**7, 10**8)), ("weak", (None,))):
        for n_fixed in sizes:
            for ranks in (16, 64, 256, 1024):
                n = n_fixed if n_fixed is not None else 10**5 * ranks
                t = step_seconds(n, ranks, cost, fixed, latency, bandwidth)
                ghosts, neighbours = ghosts_and_neighbours(n, ranks)
                hops = math.ceil(math.log2(ranks))
                terms = {"t0 (driver calls)": fixed, "halo": neighbours * latency + 24.0 * ghosts * 8 / bandwidth,
                         "reductions": REDUCTIONS_PER_STEP * hops * latency,
                         "rebuild traffic": rebuild_seconds(ghosts, hops, latency, bandwidth)}
                largest = max(terms, key=terms.get)
                print(f"| {kind} | {n:.0e} | {ranks} | {n // ranks} | {ghosts:.0f} | {cost * n / (ranks * t):.1%} | "
                      f"{largest} ({terms[largest] * 1e6:.0f} µs of {t * 1e6:.0f} µs) |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--particles", type=int, default=100_000)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--runs", nargs="+", default=["1x1", "1x2", "2x1", "4x1"])
    parser.add_argument("--latency", type=float, default=2e-6)
    parser.add_argument("--bandwidth", type=float, default=100e9)
    args = parser.parse_args()
    cores = len(os.sched_getaffinity(0))
    runs = [tuple(int(part) for part in run.split("x")) for run in args.runs]
    best = {}
    small = None
    for _ in range(args.repeats):
        for ranks, threads in runs:
            figures = measure(ranks, threads, args.particles, args.steps)
            if (ranks, threads) not in best or figures["rate"] > best[(ranks, threads)]["rate"]:
                best[(ranks, threads)] = figures
        figures = measure(1, 1, 1000, 400)
        small = figures if small is None or figures["rate"] > small["rate"] else small
    print(f"one sphere_lj system of {args.particles} particles, vi, {args.steps} steps, {cores} cores; fastest of "
          f"{args.repeats}")
    print("| ranks × threads | particle-steps/s | vs 1 rank, same cores | owned/rank | ghosts/rank | "
          "halo bytes/rank/step | in communication | imbalance |")
    print("|---|---|---|---|---|---|---|---|")
    for (ranks, threads), figures in best.items():
        same = best.get((1, ranks * threads))
        ratio = f"{figures['rate'] / same['rate']:.2f}×" if same and ranks > 1 else "—"
        note = " (oversubscribed)" if ranks * threads > cores else ""
        print(f"| {ranks} × {threads}{note} | {figures['rate']:.3e} | {ratio} | {figures['owned']:.0f} | "
              f"{figures['ghosts']:.0f} | {figures['halo_bytes_per_step']:.0f} | {figures['comm_share']:.1%} | "
              f"{figures['imbalance']:.3f} |")
    if (1, 1) in best:
        cost = 1.0 / best[(1, 1)]["rate"]
        fixed = 1000 / small["rate"]  # a whole step of 1000 particles: an upper bound of the driver's own time
        model_table(cost, fixed, args.latency, args.bandwidth)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker(*(int(value) for value in sys.argv[2:5]), sys.argv[5])
    else:
        main()
