"""LLVM settings of the kernels Armillary compiles, in one place: imported by :mod:`kernels.lanes` (and so
by every kernel module) before anything is jitted.  Codegen heuristics only: the IEEE operations per member,
hence the results, are the same under every setting."""

from contextlib import contextmanager

import llvmlite.binding as llvm

#: LLVM's loop vectoriser guards each lane loop with runtime checks that the arrays it writes do not
#: overlap the ones it reads.  The LLVM of llvmlite 0.50 (22) hoists those checks out of the enclosing
#: body loop (``for i in range(n)``) by widening each pointer's range to every body, so a loop that
#: touches rows q[i, 0, :] and q[i, 1, :] of one array "overlaps" itself and always falls back to
#: scalar code; and beyond 8 checks it does not vectorise at all.  Checking per body, with room for
#: the dozen arrays a step touches, lets the lane loops run as SIMD (1.4–1.7× on the benchmark
#: cases).
LLVM_VECTORISER_OPTIONS = ("-hoist-runtime-checks=false",)
#: the most runtime overlap checks a lane loop may need and still be vectorised, unless its state space
#: asks for more (``StateSpace.memory_checks``): every kernel at 1000 vectorises the rolling ball's
#: accelerations too, but its rk4 kernel then compiles in 74 s instead of 14 s (LLVM -O1), its nhvi and rk45
#: in 17 s instead of 4 s, which the test suite cannot afford
DEFAULT_MEMORY_CHECKS = 100


def set_memory_checks(checks: int) -> None:
    """Let the vectoriser emit up to ``checks`` runtime overlap checks per loop (both of LLVM's caps: the
    runtime-check budget and the vectoriser's own, whose default is 128)."""
    llvm.set_option("", f"-runtime-memory-check-threshold={checks}")
    llvm.set_option("", f"-vectorize-memory-check-threshold={max(checks, 128)}")


@contextmanager
def memory_checks(checks: int):
    """Compile under :func:`set_memory_checks` ``(checks)``, then return to the default.  Numba compiles under
    one process-wide lock, so no other kernel compiles meanwhile."""
    set_memory_checks(checks)
    try:
        yield
    finally:
        set_memory_checks(DEFAULT_MEMORY_CHECKS)


for _option in LLVM_VECTORISER_OPTIONS:
    llvm.set_option("", _option)
set_memory_checks(DEFAULT_MEMORY_CHECKS)
