"""The GPU's all-pairs term (kernels/all_pairs.py's device templates) for tests/test_all_pairs.py, run as a script in
numba-cuda's simulator:

    NUMBA_ENABLE_CUDASIM=1 NUMBA_DISABLE_JIT=1 python tests/gpu_all_pairs.py OUT.npz

writes the gradient and per-particle energies of :data:`N` Coulomb charges gathered on the (simulated) device, and
a vi run of :data:`STEPS` steps in the system mode with device="cuda" (q, ω and the energy at each step), and a fire
minimisation of :data:`FIRE_STEPS` steps there (its samples, status and carried state)."""

import sys

import numpy as np

from armillary.kernels import get_system, integrate
from armillary.kernels.geometry import random_uniform_separated, thermal_velocities
from armillary.kernels.gpu import cuda_module, launch
from armillary.kernels.gpu_system import kernel_functions

#: 150 charges: a full tile of 128 and a partial one; uniform at random, at least 0.05 apart
N = 150
Q = random_uniform_separated(N, 0.05, 4)
STATE = {"q": Q[None], "omega": thermal_velocities(Q, 1.0, 1.0, seed=2)[None]}
DT, STEPS = 1e-3, 3


def riesz_system(s: float = 1.0):
    """sphere_riesz with k = 1 and exponent ``s``."""
    return get_system("sphere_riesz", s=s)


def run(device: str):
    """vi in the system mode for :data:`STEPS` steps on ``device``, every state kept."""
    return integrate(riesz_system(), "vi", STATE, DT, STEPS, 1, mode="system", device=device)


#: a minimisation in the system mode: the first 40 of the charges at rest, FIRE_STEPS steps of fire
FIRE_STATE = {"q": Q[None, :40], "omega": np.zeros((1, 40, 3))}
FIRE_STEPS = 12


def minimise(device: str):
    """fire in the system mode for :data:`FIRE_STEPS` steps on ``device`` (the energy test on, so that V is taken
    every step; the step limit 10 stops it NOT_CONVERGED), every state kept."""
    return integrate(riesz_system(), "fire", FIRE_STATE, 0.002, FIRE_STEPS, 1, mode="system", device=device,
                     energy_tolerance=1e-16, max_steps=10)


def main(path: str) -> None:
    cuda = cuda_module()
    system = riesz_system()
    functions = kernel_functions("vi", system.name)
    coef = cuda.to_device(np.ascontiguousarray(system.definition.coefficients(system.broadcast(1, N), N).T))
    stored = cuda.to_device(np.ascontiguousarray(Q))
    gradient, energies = cuda.device_array((N, 3)), cuda.device_array((N, 1))
    terms = cuda.jit(functions["device_terms"])
    launch(terms, N, stored, coef, False, gradient)
    launch(terms, N, stored, coef, True, energies)
    trajectory = run("cuda")
    minimisation = minimise("cuda")
    np.savez(path, gradient=gradient.copy_to_host(), energies=energies.copy_to_host()[:, 0], q=trajectory.q,
             omega=trajectory.omega, energy=trajectory.energy, status=trajectory.status,
             neighbour_rebuilds=trajectory.neighbour_rebuilds, fire_q=minimisation.q,
             fire_energy=minimisation.energy, fire_force=minimisation.largest_force, fire_status=minimisation.status,
             **{f"fire_{name}": value for name, value in minimisation.carry.items()})


if __name__ == "__main__":
    main(sys.argv[1])
