"""The GPU's system mode (kernels/gpu_system.py) for tests/test_gpu.py, run as a script in numba-cuda's simulator:

    NUMBA_ENABLE_CUDASIM=1 NUMBA_DISABLE_JIT=1 python tests/gpu_system.py OUT.npz

runs each of :data:`RUNS` with ``mode="system", device="cuda"`` and, for :data:`SPLIT`, the same run in two calls
split at step :data:`SPLIT_AT` (a restart, with another skin), and writes what :func:`outcome` keeps of each to OUT.npz."""

import sys

import numpy as np

from armillary.kernels import get_system, integrate
from armillary.kernels.geometry import fibonacci_sphere, thermal_velocities

#: 400 LJ particles at ρ* = 0.8 (σ² = 0.8 · 4π / 400), r_c = 2.5σ, started on the Fibonacci lattice at T = 2
SIGMA = np.sqrt(0.8 * 4 * np.pi / 400)
Q = fibonacci_sphere(400)
STATE = {"q": Q[None], "omega": thermal_velocities(Q, 1.0, 2.0, seed=1)[None]}
DT = 0.005 * SIGMA
#: a skin small enough that the lists are rebuilt within the runs (2 builds in each); the split run's second call
#: takes a wider one, whose cell grid differs (3 cells per axis against 4), so that its lists are built at other
#: steps and store the particles in another order
SKIN, WIDE_SKIN = 0.3 * SIGMA, 1.0 * SIGMA
def lj_system():
    """sphere_lj at the cases' σ: ε = 1, r_c = 2.5σ."""
    return get_system("sphere_lj", epsilon=1.0, sigma=SIGMA, cutoff=2.5 * SIGMA)


def mixture_system():
    """A 50:50 binary LJ mixture at the cases' area fraction (σ_A = 0.83σ, σ_B = 1.4σ_A, B twice as heavy, 10 %
    polydisperse, Lorentz–Berthelot, r_c = 2.5σ_ab), B with a friction of its own (3/σ, A the method's 1/σ), 10
    chains of 20 joined by soft harmonic bonds (the lattice's consecutive ids lie about a radian apart: rest chord
    1 m, k = 20 J/m²) with cosine angles."""
    sigma_a = SIGMA * np.sqrt(2.0 / (1.0 + 1.4**2))
    return get_system("sphere_mixture", types={"A": {"sigma": sigma_a},
                                               "B": {"sigma": 1.4 * sigma_a, "mass": 2.0, "friction": 3.0 / SIGMA}},
                      composition={"A": 0.5, "B": 0.5}, polydispersity=0.1,
                      bond_types={"b": {"style": "harmonic", "k": 20.0, "r0": 1.0}},
                      angle_types={"a": {"style": "cosine", "k": 0.5}},
                      polymers={"count": 10, "length": 20, "bond": "b", "angle": "a"})


#: (method, steps, options, system) by name: as few steps as keep a rebuild inside each run (the simulator takes
#: ~0.9 s a step of 400 particles); the mixture under a temperature ramp
RUNS = {"vi": ("vi", 9, {}, lj_system),
        "langevin": ("langevin", 12, {"temperature": 1.0, "friction": 1.0 / SIGMA, "seed": 5}, lj_system),
        "brownian": ("brownian", 6, {"temperature": 1.0, "friction": 20.0 / SIGMA, "seed": 5}, lj_system),
        "mixture": ("langevin", 9, {"temperature_schedule": [[0.0, 2.0], [4 * DT, 0.5]], "friction": 1.0 / SIGMA,
                                    "seed": 6}, mixture_system)}
SPLIT, SPLIT_AT = "langevin", 6
#: samples every 3 steps
SAVE_EVERY = 3
#: the arrays of a run compared
KEPT = ("q", "omega", "energy", "temperature", "unit_error", "tangency_error", "status", "neighbour_rebuilds")


def run(name: str, device: str, state=STATE, steps=None, start_step: int = 0, carry=None, skin: float = SKIN):
    """Run ``name`` of :data:`RUNS` in the system mode on ``device`` (``steps`` of it from ``start_step``)."""
    method, all_steps, options, system = RUNS[name]
    return integrate(system(), method, state, DT, steps or all_steps, SAVE_EVERY, mode="system", device=device,
                     skin=skin, restart=start_step > 0, start_step=start_step, carry=carry, **options)


def outcome(trajectory) -> dict:
    """What the test compares of a run: :data:`KEPT`, the end state and the heat when there is one."""
    kept = {name: getattr(trajectory, name) for name in KEPT}
    kept.update(q_final=trajectory.final["q"], omega_final=trajectory.final["omega"])
    if trajectory.heat is not None:
        kept["heat"] = trajectory.heat
    return kept


def main(path: str) -> None:
    out = {}
    for name in RUNS:
        out.update({f"{name}_{key}": value for key, value in outcome(run(name, "cuda")).items()})
    first = run(SPLIT, "cuda", steps=SPLIT_AT)
    second = run(SPLIT, "cuda", state=first.final, steps=RUNS[SPLIT][1] - SPLIT_AT, start_step=SPLIT_AT,
                 carry=first.carry, skin=WIDE_SKIN)
    for key, value in outcome(second).items():
        out[f"split_{key}"] = value
    np.savez(path, **out)


if __name__ == "__main__":
    main(sys.argv[1])
