"""Process-wide LLVM settings of every kernel Armillary compiles, in one place: imported by
:mod:`kernels.lanes` (and so by every kernel module) before anything is jitted."""

import llvmlite.binding as llvm

#: LLVM's loop vectoriser guards each lane loop with runtime checks that the arrays it writes do not
#: overlap the ones it reads.  The LLVM of llvmlite 0.50 (22) hoists those checks out of the enclosing
#: body loop (``for i in range(n)``) by widening each pointer's range to every body, so a loop that
#: touches rows q[i, 0, :] and q[i, 1, :] of one array "overlaps" itself and always falls back to
#: scalar code; and beyond 8 checks it does not vectorise at all.  Checking per body, with room for
#: the dozen arrays a step touches, lets the lane loops run as SIMD (1.4–1.7× on the benchmark
#: cases).  Codegen heuristics only: the IEEE operations per member, hence the results, are unchanged.
LLVM_VECTORISER_OPTIONS = ("-hoist-runtime-checks=false", "-runtime-memory-check-threshold=100")
for _option in LLVM_VECTORISER_OPTIONS:
    llvm.set_option("", _option)
