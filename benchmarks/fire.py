"""FIRE against scipy's L-BFGS on the Thomson problem: N unit charges (Coulomb, k = 1, the system
``sphere_riesz``) from random starts, each minimised until its largest tangential force max_i |P_i ∂V/∂q_i|
is at most 1e-8 (issue 71's performance item; the comparison is the point, not a bound).

    .venv/bin/python benchmarks/fire.py [--quick] [--n 1000] [--starts 3] [--repeats 2] [--dt DT]

Both minimisers start from the same ``--starts`` configurations, uniform on the sphere (normalised Gaussians of
``numpy.random.default_rng(seed)``, seeds 1, 2, …), and run on one thread:

- **FIRE**: ``integrate(system, "fire", …)`` with ``force_tolerance = 1e-8``, one member per call (so serial:
  ``threads = 1``), the first step ``--dt`` (it grows to 10 dt), at most :data:`FIRE_MAX_STEPS` steps.  Its
  kernel is compiled per (method, system), not per N: a warm-up call on 12 charges compiles it (or loads it from
  Numba's cache) before any timing.  One FIRE step evaluates the gradient once (the all-pairs lane kernel,
  N(N − 1)/2 pairs, each used for both of its bodies).
- **L-BFGS**: ``scipy.optimize.minimize(method="L-BFGS-B")`` on V(θ, φ) in spherical angles
  (q_i = (sin θ_i cos φ_i, sin θ_i sin φ_i, cos θ_i)) with its analytic gradient, vectorised in NumPy over the
  N × N matrices of coordinate differences (float64).  Its own tolerances are 0 (gtol: its gradient is the
  angles', which differs from the tangential force by the factors sin θ_i; ftol: scipy refuses less) and a callback
  stops it (StopIteration) once the same NumPy function that measures both final states,
  :func:`largest_tangential_force`, is ≤ 1e-8 at the iterate; the callback reads the gradient the objective
  computed at that iterate, so it costs no evaluation.

L-BFGS does not get to 1e-8: its line search needs the energy to fall, and near a minimum a step lowers V by
about |F|²/K, which at N = 1000 is below the round-off of the computed V (4.8×10⁵ J summed over 5×10⁵ pairs: the
NumPy and Numba sums differ by ~1e-8 J) long before |F| = 1e-8; it then stops with "relative reduction of f"
(ftol = 0: f did not decrease at all).  FIRE steers by the forces alone (the power F·v), so V's round-off does not
stop it.  So each start also has a third row, FIRE to the largest tangential force L-BFGS stopped at, and the
ratio of seconds compares L-BFGS with it: the same force from the same start.

Each minimisation is timed ``--repeats`` times and the fastest counts (this kind of VM drifts by up to 2×).  The
table per start gives steps (FIRE) or iterations (L-BFGS), gradient evaluations (FIRE: steps + 1; L-BFGS: its
objective's calls, each an energy and a gradient), seconds, the final energy as the exactly rounded sum of the
computed pair terms (``math.fsum``, the same function for both) and the final largest tangential force by the same
NumPy function (the minimiser's own figure in brackets), then L-BFGS's seconds over FIRE's to the same force.  Two
minimisers from one start may end in different local minima (N = 1000 has very many); the table says when the
energies differ.  Before the table: what one evaluation costs at this N, the Numba all-pairs lane kernels (the
gradient a FIRE step takes, and energy + gradient) against the NumPy energy + gradient that L-BFGS calls.

``--quick``: N = 200, for a check in seconds.  The first step dt: 0.001 at N = 1000, the fastest of a scan on
three starts (2e-4, 5e-4, 1e-3 and 2e-3 took 4286–4852, 1634–2315, 1153–2149 and 6910–11705 steps): half the
N = 100 test's 0.002, not the tenth that forces growing ~N would suggest; 0.002 at N = 200 (0.001 took 1.6–2.4×
the steps, 0.005 about as many).
"""

import argparse
import math
import os
import sys

# One thread for OpenBLAS too (before NumPy loads it): L-BFGS-B's BLAS calls on 2N numbers gain nothing from
# threads, and OpenBLAS's two threads made its minimisation 7x slower on this 2-core machine (N = 200: 5.8 s
# against 0.8 s); the NumPy energy is single-threaded elementwise work either way.
os.environ["OPENBLAS_NUM_THREADS"] = "1"

import numpy as np  # noqa: E402

from machine import run_conditions, run_start  # noqa: E402
from timing import wall_seconds  # noqa: E402

# This script shares its folder with others named like packages: keep its own folder off the import path.
sys.path = [p for p in sys.path if not p.endswith("benchmarks")]

from armillary.kernels import get_system, integrate  # noqa: E402
from armillary.kernels.status import OK  # noqa: E402

FORCE_TOLERANCE = 1e-8
#: FIRE's step limit (the call's n_steps) and L-BFGS's iteration limit
FIRE_MAX_STEPS = 50_000
LBFGS_MAX_ITERATIONS = 50_000
#: energies closer than this (J) count as the same minimum
SAME_MINIMUM = 1e-8


def first_step(n: int) -> float:
    """FIRE's first step for N charges: 0.002 up to N = 200, 0.001 beyond (module docstring: the scans)."""
    return 0.002 if n <= 200 else 0.001


def random_start(n: int, seed: int) -> np.ndarray:
    """n unit vectors (n, 3), uniform on the sphere: normalised Gaussians of ``default_rng(seed)``."""
    q = np.random.default_rng(seed).normal(size=(n, 3))
    return q / np.linalg.norm(q, axis=1, keepdims=True)


# ------------------------------------------------------------------------------------------ NumPy energy

def coordinate_differences(q: np.ndarray) -> tuple[tuple[np.ndarray, ...], np.ndarray]:
    """The (n, n) matrices of x_i − x_j, y_i − y_j, z_i − z_j, and 1/r_ij with 0 on the diagonal."""
    differences = tuple(np.subtract.outer(coordinate, coordinate) for coordinate in q.T)
    squared = sum(difference * difference for difference in differences)
    np.fill_diagonal(squared, np.inf)
    return differences, 1.0 / np.sqrt(squared)


def energy_and_gradient(q: np.ndarray) -> tuple[float, np.ndarray]:
    """V = Σ_{i<j} 1/r_ij (J) and ∂V/∂q_i = −Σ_j (q_i − q_j)/r_ij³ (n, 3), vectorised over all pairs."""
    differences, inverse = coordinate_differences(q)
    energy = 0.5 * float(inverse.sum())
    cubed = inverse * inverse * inverse
    gradient = -np.stack([np.einsum("ij,ij->i", difference, cubed) for difference in differences], axis=1)
    return energy, gradient


def exact_energy(q: np.ndarray) -> float:
    """V (J) as the exactly rounded sum (``math.fsum``) of the pair terms 1/r_ij, i < j: a sum of 5×10⁵ terms
    that does not depend on the order, so two states' energies compare to 1e-10."""
    _, inverse = coordinate_differences(q)
    return math.fsum(inverse[np.triu_indices(len(q), 1)])


def largest_tangential_force(q: np.ndarray, gradient: np.ndarray) -> float:
    """max_i |P_i ∂V/∂q_i| = max_i |g_i − (g_i·q_i) q_i| (J), the criterion both minimisers stop on."""
    tangential = gradient - np.sum(gradient * q, axis=1, keepdims=True) * q
    return float(np.max(np.linalg.norm(tangential, axis=1)))


# ------------------------------------------------------------------------------------------ L-BFGS in angles

def to_angles(q: np.ndarray) -> np.ndarray:
    """(θ_1 … θ_n, φ_1 … φ_n) of unit vectors (n, 3)."""
    return np.concatenate([np.arccos(np.clip(q[:, 2], -1.0, 1.0)), np.arctan2(q[:, 1], q[:, 0])])


def to_unit_vectors(angles: np.ndarray) -> np.ndarray:
    """Unit vectors (n, 3) of (θ_1 … θ_n, φ_1 … φ_n)."""
    theta, phi = np.split(angles, 2)
    return np.stack([np.sin(theta) * np.cos(phi), np.sin(theta) * np.sin(phi), np.cos(theta)], axis=1)


class AngleObjective:
    """V(θ, φ) and its gradient for scipy, counting evaluations and keeping the largest tangential force at the
    last point evaluated (L-BFGS-B's iterate is the last point its line search evaluated)."""

    def __init__(self):
        self.evaluations = 0
        self.last_point = None
        self.last_largest_force = np.inf

    def __call__(self, angles: np.ndarray) -> tuple[float, np.ndarray]:
        self.evaluations += 1
        theta, phi = np.split(angles, 2)
        q = to_unit_vectors(angles)
        energy, gradient = energy_and_gradient(q)
        d_theta = np.stack([np.cos(theta) * np.cos(phi), np.cos(theta) * np.sin(phi), -np.sin(theta)], axis=1)
        d_phi = np.stack([-np.sin(theta) * np.sin(phi), np.sin(theta) * np.cos(phi), np.zeros_like(phi)], axis=1)
        self.last_point = angles.copy()
        self.last_largest_force = largest_tangential_force(q, gradient)
        return energy, np.concatenate([np.sum(gradient * d_theta, axis=1), np.sum(gradient * d_phi, axis=1)])

    def largest_force_at(self, angles: np.ndarray) -> float:
        """The largest tangential force at ``angles``: the kept one if it is the last point evaluated."""
        if self.last_point is None or not np.array_equal(angles, self.last_point):
            self(angles)
        return self.last_largest_force


def lbfgs(q0: np.ndarray) -> dict:
    """L-BFGS-B from q0 until the largest tangential force is ≤ FORCE_TOLERANCE (or its iteration limit)."""
    from scipy.optimize import minimize

    objective = AngleObjective()

    def stop_when_converged(intermediate_result):
        if objective.largest_force_at(intermediate_result.x) <= FORCE_TOLERANCE:
            raise StopIteration

    result = minimize(objective, to_angles(q0), jac=True, method="L-BFGS-B", callback=stop_when_converged,
                      options={"gtol": 0.0, "ftol": 0.0, "maxiter": LBFGS_MAX_ITERATIONS,
                               "maxfun": 2 * LBFGS_MAX_ITERATIONS})
    return {"q": to_unit_vectors(result.x), "steps": int(result.nit), "evaluations": objective.evaluations,
            "own_force": objective.largest_force_at(result.x), "stopped": result.message}


# ------------------------------------------------------------------------------------------ FIRE

def fire(system, q0: np.ndarray, dt: float, force_tolerance: float = FORCE_TOLERANCE) -> dict:
    """``integrate(..., "fire")`` of one member from q0 at rest, on one thread, to ``force_tolerance``."""
    run = integrate(system, "fire", {"q": q0[np.newaxis], "omega": np.zeros((1,) + q0.shape)}, dt, FIRE_MAX_STEPS,
                    FIRE_MAX_STEPS, outputs=(), threads=1, force_tolerance=force_tolerance)
    steps = int(run.carry["fire_steps"][0])
    stopped = "converged" if run.status[0] == OK else f"status {int(run.status[0])}"
    return {"q": run.final["q"][0], "steps": steps, "evaluations": steps + 1,
            "own_force": float(run.largest_force[0, -1]), "stopped": stopped}


# ------------------------------------------------------------------------------------------ one evaluation

def fastest_seconds(call, repeats: int) -> float:
    seconds, _ = wall_seconds(call, repeats)
    return min(seconds)


def evaluation_costs(system, q: np.ndarray) -> dict:
    """Seconds of one evaluation at q (fastest of several): the Numba all-pairs lane kernels of the system (one
    lane: the gradient, and the energy + gradient) and the NumPy energy + gradient."""
    definition = system.definition
    n = len(q)
    lanes = np.ascontiguousarray(q[:, :, np.newaxis])
    coef = np.ascontiguousarray(definition.member_coefficients(system.broadcast(1, n), n, 1).T)
    topology = definition.topology(system.broadcast(1, n), n)
    gradient, energy = np.empty((n, 3, 1)), np.empty(1)
    definition.gradient(lanes, coef, topology, gradient)  # compiles both outside the timing
    definition.potential(lanes, coef, topology, energy)
    numba_gradient = fastest_seconds(lambda: definition.gradient(lanes, coef, topology, gradient), 20)
    numba_energy = fastest_seconds(lambda: definition.potential(lanes, coef, topology, energy), 20)
    numpy_both = fastest_seconds(lambda: energy_and_gradient(q), 5)
    numpy_energy, numpy_gradient = energy_and_gradient(q)
    return {"numba gradient": numba_gradient, "numba both": numba_gradient + numba_energy, "numpy both": numpy_both,
            "energy difference": abs(numpy_energy - energy[0]),
            "gradient difference": float(np.max(np.abs(numpy_gradient - gradient[:, :, 0])))}


def timed(minimise, repeats: int) -> dict:
    """A minimiser's result, its fastest seconds of ``repeats`` and its final energy and largest tangential
    force by the same NumPy functions whichever minimiser it was."""
    seconds, result = wall_seconds(minimise, repeats)
    q = result["q"]
    return dict(result, seconds=min(seconds), energy=exact_energy(q),
                force=largest_tangential_force(q, energy_and_gradient(q)[1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="N = 200 instead of 1000")
    parser.add_argument("--n", type=int, default=None, help="charges (default 1000; 200 with --quick)")
    parser.add_argument("--starts", type=int, default=3, help="random starts (seeds 1, 2, ...)")
    parser.add_argument("--repeats", type=int, default=2, help="timed minimisations per case (the fastest counts)")
    parser.add_argument("--dt", type=float, default=None, help="FIRE's first step (default: by N, see the docstring)")
    args = parser.parse_args()
    n = args.n or (200 if args.quick else 1000)
    dt = args.dt or first_step(n)
    conditions = run_start()
    system = get_system("sphere_riesz", s=1.0)
    fire(system, random_start(12, 0), 0.01)  # compiles the (fire, sphere_riesz) kernel, which serves every N

    pairs = n * (n - 1) // 2
    costs = evaluation_costs(system, random_start(n, 0))
    print(f"Thomson problem, N = {n} (k = 1), {pairs} pairs; one thread each; stop at max_i |P_i dV/dq_i| <= "
          f"{FORCE_TOLERANCE:g}; FIRE dt = {dt:g} (up to 10 dt), at most {FIRE_MAX_STEPS} steps; fastest of "
          f"{args.repeats}")
    print("one evaluation (fastest of several):")
    print(f"  Numba all-pairs lane kernel, gradient (a FIRE step's): {costs['numba gradient'] * 1e3:8.3f} ms "
          f"({pairs / costs['numba gradient']:.2e} pairs/s)")
    print(f"  Numba all-pairs lane kernels, energy + gradient:       {costs['numba both'] * 1e3:8.3f} ms")
    print(f"  NumPy energy + gradient (L-BFGS's):                    {costs['numpy both'] * 1e3:8.3f} ms "
          f"({costs['numpy both'] / costs['numba both']:.1f}x)")
    print(f"  NumPy against Numba: |dV| {costs['energy difference']:.1e} J, max |d dV/dq| "
          f"{costs['gradient difference']:.1e}")
    print(f"{'start':>5} {'method':>22} {'steps/its':>9} {'gradients':>9} {'seconds':>8} {'final energy':>19} "
          f"{'max |tau| (own)':>21}  stopped")
    for seed in range(1, args.starts + 1):
        q0 = random_start(n, seed)
        rows = {"FIRE": timed(lambda: fire(system, q0, dt), args.repeats),
                "L-BFGS": timed(lambda: lbfgs(q0), args.repeats)}
        reached = rows["L-BFGS"]["force"]
        if reached > FORCE_TOLERANCE:  # FIRE to where L-BFGS stopped: the seconds of the same force
            rows[f"FIRE to {reached:.1e}"] = timed(lambda: fire(system, q0, dt, reached), args.repeats)
        for name, row in rows.items():
            print(f"{seed:>5} {name:>22} {row['steps']:>9} {row['evaluations']:>9} {row['seconds']:>8.2f} "
                  f"{row['energy']:>19.10f} {row['force']:>9.2e} ({row['own_force']:.2e})  {row['stopped']}")
        same_force = list(rows.values())[-1]
        apart = abs(rows["FIRE"]["energy"] - rows["L-BFGS"]["energy"])
        minima = ("the same minimum" if apart <= SAME_MINIMUM else
                  f"FIRE and L-BFGS in different local minima ({apart:.2e} J apart)")
        print(f"{'':>5} L-BFGS seconds / FIRE's to the same force: "
              f"{rows['L-BFGS']['seconds'] / same_force['seconds']:.1f}; {minima}")
    print(run_conditions(conditions))


if __name__ == "__main__":
    main()
