"""Members in SIMD blocks and blocks on threads: shared by every kernel runner."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numba
import numpy as np

from .llvm_options import DEFAULT_MEMORY_CHECKS
from .llvm_options import memory_checks as codegen_memory_checks

#: members per SIMD block for the fixed-step kernels, widest first: an ensemble uses the widest that
#: still gives two blocks.  Every lane loop pays a fixed set-up (its runtime overlap checks), which
#: wider blocks spread over more members; 256 measured best of 64–512 on AVX-512 (≈1.2–1.4× over 64).
LANE_WIDTHS = (256, 64)


def lane_width(method_lanes: int | None, members: int) -> int:
    """The method's own width (rk45: 1) or the widest of LANE_WIDTHS that still gives two blocks."""
    return method_lanes or next((width for width in LANE_WIDTHS if members >= 2 * width), 1)


def to_blocks(array: np.ndarray, lanes: int) -> np.ndarray:
    """(members, ...) → (blocks, ..., lanes), padding with copies of the last member."""
    members = array.shape[0]
    blocks = -(-members // lanes)
    padded = np.concatenate([array, np.repeat(array[-1:], blocks * lanes - members, axis=0)])
    shaped = padded.reshape((blocks, lanes) + array.shape[1:])
    return np.ascontiguousarray(np.moveaxis(shaped, 1, -1))


def to_shadow_blocks(array: np.ndarray, lanes: int) -> np.ndarray:
    """(members, k, ...) → (blocks, ..., k·lanes): shadow j of a block's lane l in lane j·lanes + l, so that
    the members' integrator steps all k shadows of a block as one block of k·lanes lanes."""
    blocks = to_blocks(array, lanes)
    shaped = np.moveaxis(blocks, 1, -2)
    return np.ascontiguousarray(shaped).reshape(shaped.shape[:-2] + (-1,))


def member_outcomes(members: int) -> dict:
    """Per member, as every kernel writes them: ``status`` (:mod:`kernels.status`), ``failed_step`` (the step
    it failed at, −1 if none) and ``solver_iterations`` (the most iterations its solver took in a step)."""
    return {"status": np.zeros(members, np.int64), "failed_step": np.full(members, -1, np.int64),
            "solver_iterations": np.zeros(members, np.int64)}


def default_threads() -> int:
    """Threads for :func:`kernels.integrate`: NUMBA_NUM_THREADS if set, else the CPUs this process may use."""
    configured = os.environ.get("NUMBA_NUM_THREADS")
    return int(configured) if configured else len(os.sched_getaffinity(0))


def run_in_threads(kernel, blocks: dict, shared: tuple, keep_state: bool, outputs: list, lanes: int, members: int,
                   threads: int, memory_checks: int = DEFAULT_MEMORY_CHECKS):
    """Run ``kernel`` on disjoint, contiguous ranges of blocks, one per thread (kernels release the GIL), after
    compiling it (or loading it from the cache) here, with up to ``memory_checks`` runtime overlap checks per
    vectorised loop (:mod:`kernels.llvm_options`)."""
    n_blocks = next(iter(blocks.values())).shape[0]
    bounds = np.linspace(0, n_blocks, min(threads, n_blocks) + 1).astype(int)

    def arguments(start: int, stop: int) -> tuple:
        first, last = start * lanes, min(stop * lanes, members)
        return (*(array[start:stop] for array in blocks.values()), *shared, last - first, keep_state,
                *(array[first:last] for array in outputs))

    def run(start: int, stop: int) -> None:
        kernel(*arguments(start, stop))

    if hasattr(kernel, "compile"):  # not under NUMBA_DISABLE_JIT, where the kernel is its Python function
        with codegen_memory_checks(memory_checks):
            kernel.compile(tuple(numba.typeof(value) for value in arguments(0, n_blocks)))
    if len(bounds) == 2:
        run(0, n_blocks)
        return
    with ThreadPoolExecutor(len(bounds) - 1) as pool:
        for future in [pool.submit(run, a, b) for a, b in zip(bounds[:-1], bounds[1:])]:
            future.result()
