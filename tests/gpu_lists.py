"""The GPU's neighbour lists (kernels/gpu_neighbours.py) for tests/test_gpu.py, run as a script in numba-cuda's
simulator:

    NUMBA_ENABLE_CUDASIM=1 NUMBA_DISABLE_JIT=1 python tests/gpu_lists.py OUT.npz

builds the full rows of :data:`CASES` on the (simulated) device and writes each case's positions, storage order and
rows (storage indices, -1 past a row's end) to OUT.npz, and for the cases of :data:`PAIR_CASES` the gradient
and per-particle energies of LJ (ε = 1, r_c = 2.5σ) gathered on the device, in storage order; and the running
sums of 10⁴ random counts (``scan_values``, ``scan_starts``)."""

import sys

import numpy as np

from armillary.kernels import get_system
from armillary.kernels.geometry import fibonacci_sphere, random_uniform_separated
from armillary.kernels.gpu import cuda_module
from armillary.kernels.gpu_neighbours import build_full_rows, pair_terms_on_device, running_sums

#: 400 particles at LJ's ρ* = 0.8 (σ² = 0.8 · 4π / 400), r_list = 2.8 σ: a liquid (uniform at random, at least
#: 0.8 σ apart) and a crystal (the Fibonacci lattice); the liquid once more with a capacity of 2 (rows grown)
SIGMA = np.sqrt(0.8 * 4 * np.pi / 400)
CASES = {"liquid": (random_uniform_separated(400, 0.8 * SIGMA, 3), None),
         "crystal": (fibonacci_sphere(400), None),
         "liquid_grown": (random_uniform_separated(400, 0.8 * SIGMA, 3), 2)}
LIST_RANGE = 2.8 * SIGMA
#: the cases whose LJ pair terms are gathered too
PAIR_CASES = ("liquid", "crystal")


def lj_system():
    """sphere_lj at the cases' σ: ε = 1, r_c = 2.5σ."""
    return get_system("sphere_lj", epsilon=1.0, sigma=SIGMA, cutoff=2.5 * SIGMA)


def main(path: str) -> None:
    cuda = cuda_module()
    out = {}
    for name, (q, capacity) in CASES.items():
        lists = build_full_rows(cuda.to_device(np.ascontiguousarray(q)), LIST_RANGE, capacity)
        neighbours, counts = lists.neighbours.copy_to_host(), lists.counts.copy_to_host()
        rows = np.full(neighbours.shape, -1, np.int64)
        for k, count in enumerate(counts):
            rows[k, :count] = neighbours[k, :count]
        out.update({f"{name}_q": q, f"{name}_order": lists.order.copy_to_host(), f"{name}_rows": rows})
        if name in PAIR_CASES:
            gradient, energies = pair_terms_on_device(lj_system(), lists)
            out.update({f"{name}_gradient": gradient.copy_to_host(), f"{name}_energies": energies.copy_to_host()})
    values = np.random.default_rng(0).integers(0, 9, 10_000).astype(np.int32)  # 3 levels of chunks of 64
    starts = cuda.device_array(len(values), np.int32)
    running_sums(cuda.to_device(values), starts)
    out.update(scan_values=values, scan_starts=starts.copy_to_host())
    np.savez(path, **out)


if __name__ == "__main__":
    main(sys.argv[1])
