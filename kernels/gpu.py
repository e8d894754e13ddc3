"""Ensembles on one CUDA GPU through numba-cuda: one thread per member, running the CPU kernels' own stages.

The stages a fixed-step (S²)ⁿ driver calls (``integrator_begin``, ``integrator_step``, ``record_sample``,
``check_lanes``, ``write_final_state``, and through them the system's gradient and potential) are Python functions
in lane layout, each a member's scalar arithmetic inside loops over a block's lanes (:mod:`kernels.lanes`).  The
GPU runs the same source: :func:`drive_members_template` gives thread m one-lane views ``[..., m:m + 1]`` of arrays
whose lanes are the whole ensemble, so the lane loops run once, neighbouring threads touch neighbouring addresses
(coalesced loads), and numba-cuda compiles the stages, jitted for the CPU by :func:`kernels.compile.specialised_stages`,
again for the device when the kernel calls them.  A segment runs on the device from its first step to its last; the
state, the samples and the outcome cross to the host once, at its end, and a later segment starts from ``final``
as on the CPU (the store's restarts).

Bits: the simulator (``NUMBA_ENABLE_CUDASIM=1``) runs the stages' Python with NumPy's IEEE scalars and equals the
CPU bit for bit (tested).  On a device NVVM contracts a × b + c into one fused multiply-add wherever it can, which
rounds once instead of twice: results agree with the CPU to round-off, are the same run to run, and do not depend on
how members are grouped (a member's arithmetic never sees another's).  numba-cuda's ``cuda.jit`` offers no switch
for NVVM's ``-fma=0`` (only ``fastmath``, which turns contraction on), so exact agreement with the CPU is not
offered.

First tranche: the fixed-step methods on (S²)ⁿ (``vi`` explicit and implicit, ``rk4``), unforced, without shadows,
sections or close-encounter tracking; :func:`check_supported` refuses the rest in one line.
"""

from __future__ import annotations

import functools
import math
import os

import numpy as np

from numba import njit

from .compile import KERNEL_FLAGS, specialised_stages
from .driver import check_lanes, write_final_state
from .errors import InvalidInput
from .lanes import bind_template

#: threads per block of the GPU kernels: members are independent, so any multiple of the warp (32) works; 128
#: leaves the scheduler room to hide memory latency with several blocks per multiprocessor
THREADS_PER_BLOCK = 128
#: the compute capability PTX is compiled for when no device says its own (the suite's check): 8.0, the A100;
#: PTX for 8.0 runs on every later GPU (H100 9.0, H200), which compiles it for itself when it loads it
DEFAULT_COMPUTE_CAPABILITY = (8, 0)
#: methods the GPU steps, per space (the first tranche)
GPU_METHODS = {"sphere_product": ("vi", "rk4")}
#: NumPy functions the stages call on scalars, and the math function numba-cuda lowers each to (see
#: :func:`_register_numpy_math`)
NUMPY_MATH = {"sqrt": math.sqrt, "absolute": math.fabs, "exp": math.exp, "log": math.log, "expm1": math.expm1,
              "log1p": math.log1p}


def cuda_module():
    """numba-cuda's ``numba.cuda``, or InvalidInput naming ``device`` when it is not installed."""
    try:
        from numba import cuda
    except ImportError as error:  # pragma: no cover (the test extras install it)
        raise InvalidInput("device", f"'cuda' needs numba-cuda: pip install 'armillary[cuda]' ({error})") from None
    if not hasattr(cuda, "compile_ptx"):  # Numba's own deprecated target answers to the same name
        raise InvalidInput("device", "'cuda' needs numba-cuda: pip install 'armillary[cuda]'")
    return cuda


def device_problem() -> str | None:
    """Why no CUDA device can run a kernel here (one line), or None when one can (the simulator counts as one)."""
    cuda = cuda_module()
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        return None
    try:
        cuda.current_context()  # starts the driver: its error says what is missing (library, device)
        return None
    except Exception as error:  # noqa: BLE001 (CudaSupportError or CudaDriverError, the driver's own words)
        reason = " ".join(str(error).split()).rstrip(":").strip() or type(error).__name__
    return f"{reason}; run on a GPU node (SLURM: --gres=gpu:1) or use device = 'cpu'"


def check_supported(system, method: str, *, forced: bool, shadow, sections, track_encounters: bool, mode,
                    stochastic: bool, implicit_options: dict) -> None:
    """Refuse, in one line naming the option, what the GPU does not run yet."""
    space = system.space.name
    methods = GPU_METHODS.get(space)
    if methods is None:
        raise InvalidInput("device", f"'cuda' runs {', '.join(GPU_METHODS)} systems so far; {system.name} is on {space}: "
                           "use device = 'cpu'")
    if method not in methods or stochastic:
        raise InvalidInput("method", f"{method!r} does not run on device 'cuda' yet; there: {', '.join(methods)}")
    for name, what, present in (
            ("shadow", "Benettin shadows (lyapunov, megno, sali)", shadow is not None),
            ("sections", "surfaces of section", bool(sections)), ("forcing", f"forces ({system.name} is forced)", forced),
            ("outputs", "close-encounter tracking (min_separation)", track_encounters),
            ("mode", "the system-parallel mode (one large member)", mode == "system"),
            ("adaptive", "adaptive steps", bool(implicit_options.get("adaptive")))):
        if present:
            raise InvalidInput(name, f"device 'cuda' does not run {what} yet; use device = 'cpu' for it")


@functools.cache
def _register_numpy_math() -> None:
    """Teach numba-cuda the NumPy functions of :data:`NUMPY_MATH` on float64 scalars.  numba-cuda 0.30's table of
    NumPy functions on the device has the trigonometric ones but not these, which the stages call (``np.sqrt``);
    each is lowered as its ``math`` twin, the same IEEE operation (sqrt and fabs are correctly rounded)."""
    from numba.cuda import ufuncs
    from numba.cuda.mathimpl import get_unary_impl_for_fn_and_ty

    table = ufuncs.ufunc_db()
    for name, function in NUMPY_MATH.items():
        def lower(context, builder, sig, args, function=function):
            return get_unary_impl_for_fn_and_ty(function, sig.args[0])(context, builder, sig, args)
        table.setdefault(getattr(np, name), {"d->d": lower})


def drive_members_template(q, omega, mass_diag, mass_full, coef, topology, h, n_steps, save_every, options,
                           step_offset, members, save_state, work, scratch, counters, active, q_out, omega_out, energy,
                           unit_error, tangency_error, status, failed_step, iterations, q_end, omega_end,
                           min_separation):
    """Thread m steps member m ``n_steps`` steps of size h (s), saving every ``save_every``: the loop of
    :func:`kernels.driver.drive_fixed_step` for one lane, on one-lane views of arrays whose lanes are the members
    (state (n, 3, members); ``work``: the method's work for all members; ``scratch`` (4, members); ``counters``
    (5, members) int64: status, failing step, most iterations, this step's iterations and code; ``active``
    (members,) bool).  Step k starts at (step_offset + k − 1)·h.  Free names bound at specialisation: the stages
    of :func:`kernels.compile.specialised_stages`, ``member_work`` (the views of ``work``) and ``cuda``."""
    m = cuda.grid(1)  # noqa: F821 (bound at specialisation: numba-cuda's module)
    if m >= members:
        return
    lane = slice(m, m + 1)
    own_q, own_omega = q[:, :, lane], omega[:, :, lane]
    own_md, own_mf, own_coef = mass_diag[:, lane], mass_full[:, :, lane], coef[:, lane]
    own_work = member_work(work, m)  # noqa: F821
    own_scratch = scratch[:, lane]
    lane_status, lane_failed, lane_iterations = counters[0, lane], counters[1, lane], counters[2, lane]
    step_iterations, code, own_active = counters[3, lane], counters[4, lane], active[lane]
    integrator_begin(own_q, own_omega, own_md, own_mf, own_coef, topology, h, options, own_work)  # noqa: F821
    record_sample(0, own_q, own_omega, own_md, own_mf, own_coef, topology, m, members, lane_status,  # noqa: F821
                  save_state, q_out, omega_out, energy, unit_error, tangency_error, own_scratch)
    for k in range(1, n_steps + 1):
        integrator_step((step_offset + k - 1) * h, own_q, own_omega, own_md, own_mf, own_coef, topology, h,  # noqa: F821
                        options, own_work, own_active, code, step_iterations)
        check_lanes(own_q, own_omega, code, own_active, lane_status, lane_failed, step_iterations, lane_iterations, k,
                    own_scratch)
        if k % save_every == 0:
            record_sample(k // save_every, own_q, own_omega, own_md, own_mf, own_coef, topology, m,  # noqa: F821
                          members, lane_status, save_state, q_out, omega_out, energy, unit_error, tangency_error,
                          own_scratch)
    write_final_state(own_q, own_omega, min_separation[lane], m, members, lane_status, lane_failed, lane_iterations,
                      status, failed_step, iterations, q_end, omega_end, min_separation)


def _view_expression(item, path: str) -> str:
    """Source of the one-lane view of ``item`` (an array, lanes last, or a tuple of them, nested) read at ``path``."""
    if isinstance(item, tuple):
        return "(" + "".join(_view_expression(part, f"{path}[{i}]") + ", " for i, part in enumerate(item)) + ")"
    return f"{path}[..., m:m + 1]"


def member_work_source(work: tuple) -> str:
    """A function returning member m's one-lane views of a method's work (a tuple of arrays, or of tuples of
    them, as its ``integrator_allocate`` builds it), written out for the tuple's shape: Numba indexes a tuple
    of mixed arrays only by constants."""
    return f"def member_work(work, m):\n    return {_view_expression(work, 'work')}\n"


@functools.cache
def gpu_kernel(method: str, system: str, inertia_kind: str, work_source: str):
    """The CUDA kernel of ``method`` for ``system`` as a Python function for numba-cuda (``cuda.jit`` to launch it,
    ``compile_ptx`` to check it): :func:`drive_members_template` with the CPU's stages bound, and ``member_work``
    from ``work_source`` (:func:`member_work_source`)."""
    cuda = cuda_module()
    _register_numpy_math()
    recipe, bindings, tag = specialised_stages(method, system, inertia_kind)
    namespace = {}
    exec(work_source, namespace)  # noqa: S102 (our own text: one view per work array)
    stages = dict(bindings, member_work=njit(**KERNEL_FLAGS)(namespace["member_work"]), cuda=cuda)
    return bind_template(drive_members_template, f"drive_members__{tag}", stages)


def lane_layout(array: np.ndarray) -> np.ndarray:
    """(members, ...) → (..., members): the members as the lanes of one block (:func:`kernels.blocks.to_blocks`)."""
    return np.ascontiguousarray(np.moveaxis(array, 0, -1))


def run_sphere(method: str, system, inertia_kind: str, q, omega, mass_diag, mass_full, coef, topology, dt: float,
               n_steps: int, save_every: int, keep_state: bool, option_vector, start_step: int, result: dict) -> None:
    """Step (q, ω) (members, n, 3) on the GPU and fill ``result``'s arrays (those of :func:`kernels.sphere_runner.run`)
    in place: the samples, the outcome per member and the final state."""
    cuda = cuda_module()
    members, n = q.shape[:2]
    recipe, bindings, tag = specialised_stages(method, system.name, inertia_kind)
    work = bindings["integrator_allocate"](n, members)
    kernel = _launchable(method, system.name, inertia_kind, member_work_source(work))
    device = {name: cuda.to_device(lane_layout(array)) for name, array in
              (("q", q), ("omega", omega), ("mass_diag", mass_diag), ("mass_full", mass_full), ("coef", coef))}
    counters = np.zeros((5, members), np.int64)
    counters[1] = -1  # no failing step yet
    names = ("q", "omega", "energy", "unit_error", "tangency_error", "status", "failed_step", "solver_iterations",
             "q_final", "omega_final", "min_separation")
    outputs = {name: cuda.to_device(result[name]) for name in names}
    blocks = -(-members // THREADS_PER_BLOCK)
    kernel[blocks, THREADS_PER_BLOCK](
        device["q"], device["omega"], device["mass_diag"], device["mass_full"], device["coef"], topology, dt, n_steps,
        save_every, option_vector, start_step, members, keep_state, _to_device(cuda, work),
        cuda.device_array((4, members)), cuda.to_device(counters), cuda.to_device(np.ones(members, np.bool_)),
        *(outputs[name] for name in names))
    for name in names:
        outputs[name].copy_to_host(result[name])


def _to_device(cuda, work):
    """A method's work (a tuple of arrays, nested) on the device."""
    if isinstance(work, tuple):
        return tuple(_to_device(cuda, part) for part in work)
    return cuda.to_device(work)


@functools.cache
def _launchable(method: str, system: str, inertia_kind: str, work_source: str):
    """The jitted kernel of :func:`gpu_kernel` (compiled at its first launch, once per process)."""
    return cuda_module().jit(gpu_kernel(method, system, inertia_kind, work_source))
