"""Ensembles on one CUDA GPU through numba-cuda: one thread per member, running the CPU kernels' own stages.

The stages a fixed-step driver calls (``integrator_begin``, ``integrator_step``, ``record_sample``, the shadows',
and through them the system's gradient, potential or vector field) are Python functions in lane layout: a member's
scalar arithmetic inside loops over a block's lanes (:mod:`kernels.lanes`).  The GPU runs that same source, each
thread on arrays of one lane (its member; its shadows' lanes for the shadows) that are its own: the kernel
(:func:`member_kernel_source`, written out for the run's shapes) copies thread m's part of the state, its shadows
and its parameters (lanes ``m + j·members`` of the ensemble's arrays) and the workspace into ``cuda.local.array``
before the first step, and the template steps those.  Their shapes are constants of the kernel, so NVVM unrolls
the stages' loops and keeps a small system's arrays in registers, a larger one's in the thread's local memory;
from the first step to the last a thread reads only its read-only parameters (topology, options) from global
memory and writes only its samples (the suite checks this in the PTX).  numba-cuda compiles the stages that
:func:`kernels.compile.specialised_stages` jitted for the CPU again for the device.  A segment runs on the device
from its first step to its last; the samples, the outcome and the end state cross to the host once, at its end,
and the next segment starts from ``final`` as on the CPU (the store's restarts).

The GPU's templates (:data:`TEMPLATES`: the fixed-step drivers' and rk45's adaptive ones, for (S²)ⁿ and the flat
spaces) are the CPU drivers' loops without their allocations: the arrays a driver allocates per block are made on
the host for one member (:func:`gpu_workspace` and its kin), every thread's start of its own; what a step does is
the stages' (rk45's attempt is ``dopri_attempt``, the CPU's own).  One body shared by
CPU and GPU, taking those arrays as a tuple, cost 2.1–4.5 s more to compile per CPU kernel at -O1 (Example 2's
explicit vi 7.2 → 9.3 s, Example 1's implicit vi 11.3 → 15.8 s, measured), Numba taking the tuples apart again
in its IR, so the CPU keeps its drivers and the GPU its templates, which leave out what it refuses.

Bits: the simulator (``NUMBA_ENABLE_CUDASIM=1`` with ``NUMBA_DISABLE_JIT=1``) runs the stages' Python with NumPy's
IEEE scalars and equals the CPU bit for bit (tested).  On a device NVVM contracts a × b + c into one fused
multiply-add wherever it can, which rounds once instead of twice: results agree with the CPU to round-off, are the
same run to run, and do not depend on how members are grouped (a member's arithmetic never sees another's).  With
``fma=False`` (``[execution] fma = false``) NVVM fuses nothing (``-fma=0``, :func:`nvvm_options`), so each
product and sum rounds as on the CPU; on an H200 the results still were not the CPU's bits (libdevice's
transcendental functions, the logarithms of Benettin's sums and a system's sin and cos, need not round as glibc's:
one source of difference, not shown to be the only one), and the docs promise no more than round-off.

What runs here is :data:`GPU_METHODS`, without forces, sections or close-encounter tracking; the system mode (one
large member) is :mod:`kernels.gpu_system`'s; :func:`check_supported` refuses the rest in one line.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import math
import os
import threading
import time
import types
import typing

import numba
import numpy as np

from .compile import KERNEL_FLAGS, specialised_stages
from .driver import check_lanes, drive_fixed_step, lane_bookkeeping, write_final_state
from .errors import InvalidInput
from .flat_driver import check_flat_lanes, drive_flat_fixed, flat_shadow_factor, write_flat_final
from .integrators import KERNEL_METHODS
from .integrators.fire import drive_fire, member_workspace, minimise_member_template
from .integrators.flat_rk import copy_rows, drive_flat_adaptive, flat_dense_into, flat_error_norm
from .integrators.runge_kutta import (ATOL, MAX_STEPS, RTOL, dopri_dense_into, dopri_error_norm, dopri_gave_up,
                                      dopri_next_step, drive_adaptive)
from .lanes import bind_template, copy_block
from .system_parallel import sums_all_pairs
from .lyapunov import (record_indicators, record_sphere_indicators, tile_lanes_2d, tile_lanes_3d,
                       write_final_shadows)

#: threads per block of the GPU kernels: members are independent, so any multiple of the warp (32) works; 128
#: leaves the scheduler room to hide memory latency with several blocks per multiprocessor
THREADS_PER_BLOCK = 128
#: the compute capability PTX is compiled for when no device says its own (the suite's check): 8.0, the A100;
#: PTX for 8.0 runs on every later GPU (H100 9.0, H200), which compiles it for itself when it loads it
DEFAULT_COMPUTE_CAPABILITY = (8, 0)
#: the spaces rk4 and rk45 step on the GPU: every one
EVERY_SPACE = ("sphere_product", "rotation", "rigid_motion", "generalised", "rolling", "rolling_disk")
#: the methods the GPU steps (the first tranche), each with the spaces it runs there
GPU_METHODS = {"vi": ("sphere_product",), "lgvi": ("rotation",), "rk4": EVERY_SPACE, "rk45": EVERY_SPACE,
               "fire": ("sphere_product",)}
#: NumPy functions the stages call on scalars, and the math function numba-cuda lowers each to (see
#: :func:`_register_numpy_math`)
NUMPY_MATH = {"sqrt": math.sqrt, "absolute": math.fabs, "exp": math.exp, "log": math.log, "expm1": math.expm1,
              "log1p": math.log1p}


def cuda_module():
    """numba-cuda's ``numba.cuda``, or InvalidInput naming ``device`` when it is not installed."""
    if not hasattr(np, "row_stack"):  # numba-cuda 0.30 registers an overload of np.row_stack, gone from NumPy 2.5
        np.row_stack = np.vstack
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
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1" or _ptx_only.compiled is not None:
        return None
    try:
        cuda.current_context()  # starts the driver: its error says what is missing (library, device)
        return None
    except Exception as error:  # noqa: BLE001 (CudaSupportError or CudaDriverError, the driver's own words)
        reason = " ".join(str(error).split()).rstrip(":").strip() or type(error).__name__
    return f"{reason}; run on a GPU node (SLURM: --gres=gpu:1) or use device = 'cpu'"


def named_devices() -> list[str]:
    """The devices ``CUDA_VISIBLE_DEVICES`` names (ordinals, UUIDs or MIG names; SLURM's ``--gres`` sets it to a
    job's devices), in its order; empty where it is unset.  Reads the environment only: the driver stays unstarted."""
    return [name.strip() for name in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if name.strip()]


def visible_devices() -> list[str]:
    """The CUDA devices this process may use, as :func:`named_devices` names them (what a worker is pinned to),
    else their ordinals; asks the driver, so only where :func:`device_problem` found none missing.  The simulator
    has one device unless the variable names more."""
    return named_devices() or [str(ordinal) for ordinal in range(len(cuda_module().gpus))]


def check_supported(system, method: str, *, forced: bool, sections, track_encounters: bool, mode,
                    stochastic: bool, bodies: int | None = None) -> None:
    """Refuse, in one line naming the option, what the GPU does not run yet.  ``mode``: the mode the run takes
    ("system": one large member, :mod:`kernels.gpu_system`, whose methods the mode's own choice checked; a
    minimisation there, :mod:`kernels.gpu_minimiser`, sums every pair: one of ``bodies`` bodies with a cutoff is
    refused)."""
    space = system.space.name
    if mode == "system" and KERNEL_METHODS[method].minimiser and bodies is not None \
            and not sums_all_pairs(system, bodies):
        raise InvalidInput("device", f"{method}'s system mode on device 'cuda' sums every pair (a pair potential "
                           f"without a cutoff); {system.name} has a cutoff: use device = 'cpu' (neighbour lists)")
    if mode != "system" and (method not in GPU_METHODS or stochastic):
        raise InvalidInput("method", f"{method!r} does not run on device 'cuda' in the ensemble mode yet; there: "
                           f"{', '.join(GPU_METHODS)} (vi explicit and implicit, rk4 and rk45 in their default "
                           "formulations, fire); langevin and brownian run there in the system mode (one large member)")
    spaces = GPU_METHODS.get(method, ())
    if mode != "system" and space not in spaces:
        raise InvalidInput("device", f"{method} runs on device 'cuda' for {', '.join(spaces)} systems so far; "
                           f"{system.name} is on {space}: use device = 'cpu'")
    pair = getattr(system.definition, "pair", None)
    for name, what, present in (
            ("sections", "surfaces of section", bool(sections)), ("forcing", f"forces ({system.name} is forced)", forced),
            ("bonds", "bonds and angles in the ensemble mode", mode != "system" and pair is not None
             and pair.bonded_present(system.params)),
            ("outputs", "close-encounter tracking (min_separation)", track_encounters),
            ("density_schedule", "coefficients that change over the run (a density schedule)",
             system.scheduled)):
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


class Tiled:
    """A workspace array holding a member's parameters once per lane of its shadows (``array``: as made for one
    member; shadow j's lane j holds the member's own ``source``): each thread tiles its own parameters, the kernel
    argument ``source`` names, rather than reading the host's copy."""

    def __init__(self, source: str, array: np.ndarray):
        self.source, self.array = source, array


def member_kernel_source(template, parameters: list, owned: dict, workspace: tuple, members: int) -> str:
    """The source of the kernel around ``template`` (one of :data:`TEMPLATES`), whose arguments after ``(own, m)``
    are named ``parameters`` (the kernel's arguments after ``workspace``).  Thread m copies its member's part
    of every array ``owned`` names (a kernel argument: its block 0, lanes last) into arrays of its own
    (``cuda.local.array``), and the ``workspace`` made for one member (nested tuples of arrays, the same start for
    every thread; a :class:`Tiled` array made from the thread's own parameters), calls the template with them and
    its other arguments, and so touches global memory only to read its start here and, inside the template, its
    read-only parameters and to write samples, outcome and end state.  Written out for the arrays' shapes, which
    the local arrays must know at compile time: NVVM keeps an array whose every index is a constant after
    unrolling (small systems) in registers, the others in the thread's local memory, which no other thread
    shares (so the CPU's scratch shared by a block's lanes is each thread's own here).  Member m's part of an
    owned array of ``lanes`` per member is ``[..., m + j·members]``, j < lanes (shadow j of member m); an empty
    part, as of a member without shadows, is the global array as it is (a local array has a size)."""
    lines = [f"def {template.__name__}_kernel(workspace, {', '.join(parameters)}):",
             "    m = cuda.grid(1)", "    if m >= members:", "        return"]
    locals_of = {}

    def own(item, path: str, lanes_of=None) -> str:
        """A local array for ``item`` read at ``path`` (its lane j at ``lanes_of(j)``), written into ``lines``."""
        if isinstance(item, tuple):
            return "(" + "".join(own(part, f"{path}[{i}]") + ", " for i, part in enumerate(item)) + ")"
        array = item.array if isinstance(item, Tiled) else item
        shape = array.shape[:-1] + (array.shape[-1] // members,) if lanes_of else array.shape
        if 0 in shape:  # nothing to copy (no shadows): the global array, as empty, never read
            return path
        if isinstance(item, Tiled):
            path, lanes_of = locals_of[item.source], (lambda lane: "0")
        name = f"own{len(lines)}"
        rows = "".join(f"i{d}, " for d in range(len(shape) - 1))
        lane = f"i{len(shape) - 1}"
        # the scalar type's own name: np.bool_ under NumPy 1.26, np.bool under 2 (a dtype's name is 'bool' in both)
        lines.append(f"    {name} = cuda.local.array({shape}, np.{array.dtype.type.__name__})")
        lines.extend(f"    {'    ' * d}for i{d} in range({size}):" for d, size in enumerate(shape))
        source_lane = lanes_of(lane) if lanes_of else lane
        lines.append(f"    {'    ' * len(shape)}{name}[{rows}{lane}] = {path}[{rows}{source_lane}]")
        return name

    for name, array in owned.items():
        locals_of[name] = own(array[0], f"{name}[0]", lambda lane: f"m + {lane} * members")
    parts = [*locals_of.values(), own(workspace, "workspace")]
    lines.append(f"    {template.__name__}(({''.join(part + ', ' for part in parts)}), m, {', '.join(parameters)})")
    return "\n".join(lines) + "\n"


def _each_array(item, function):
    """``item`` (a value, or arrays and :class:`Tiled` in tuples, nested) with ``function`` applied to each array
    (a Tiled's own: what the kernel gets); other values as they are."""
    if isinstance(item, tuple):
        return tuple(_each_array(part, function) for part in item)
    if isinstance(item, Tiled):
        item = item.array
    return function(item) if isinstance(item, np.ndarray) else item


def gpu_workspace(bindings: dict, one: dict) -> tuple:
    """The arrays :func:`kernels.driver.drive_fixed_step` allocates per block, for one member (``one``: its blocks,
    its own lanes last), made on the host as every thread's start (:func:`member_kernel_source`): the method's work
    (``integrator_allocate``) for the member and for its shadows, the bookkeeping, the scratch, and the shadows'
    scratch and coefficients (the member's parameters, :class:`Tiled`)."""
    allocate = bindings["integrator_allocate"]
    n, count = one["q"].shape[1], one["shadow_q"].shape[-1]
    return (allocate(n, 1), np.empty((4, 1)), lane_bookkeeping(0, 1, 1), allocate(n, count),
            (np.zeros(count, np.bool_), np.zeros(count, np.int64), np.zeros(count, np.int64)),
            (np.empty((3 * n, count)), np.empty((3 * n, count)), np.empty((count, count, 1)), np.empty(max(count, 1))),
            (Tiled("mass_diag", tile_lanes_2d(one["mass_diag"][0], count)),
             Tiled("mass_full", tile_lanes_3d(one["mass_full"][0], count)),
             Tiled("coef", tile_lanes_2d(one["coef"][0], count))))


def march_members_template(own, m, q_blocks, omega_blocks, mass_diag, mass_full, coef, shadow_q_blocks,
                           shadow_omega_blocks, log_growth_blocks, reference_blocks, indicator_blocks, topology, h,
                           n_steps, save_every, options, d0, renormalise_every, step_offset, track_encounters,
                           section_modes, members, save_state, q_out, omega_out, energy, unit_error, tangency_error,
                           work_out, status, failed_step, iterations, q_end, omega_end, carried, min_separation,
                           sample_time, log_growth_out, indicator_out, shadow_q_end, shadow_omega_end, log_growth_end,
                           reference_end, indicators_end, section_time, section_state, section_count):
    """Thread m's part of :func:`kernels.driver.drive_fixed_step` (the same arguments, every member in one block):
    member m and its shadows stepped by the same stages on the arrays of its own in ``own``
    (:func:`member_kernel_source`: its state, shadows, parameters and the workspace of :func:`gpu_workspace`).
    What the GPU refuses (forces, sections, encounters) is left out; their arguments are unused.  Free names
    bound at specialisation: the stages of :func:`kernels.compile.specialised_stages`."""
    (q, omega, md, mf, c, shadow_q, shadow_omega, log_growth, reference, indicators,
     (work, scratch, bookkeeping, shadow_work, shadow_flags, shadow_scratch, shadow_coefficients)) = own
    lane_status, lane_failed, lane_iterations, step_iterations, code, active = bookkeeping
    shadow_active, shadow_code, shadow_iterations = shadow_flags
    dq, dw, rmat, column = shadow_scratch
    shadow_md, shadow_mf, shadow_c = shadow_coefficients
    tracking = renormalise_every > 0
    integrator_begin(q, omega, md, mf, c, topology, h, options, work)  # noqa: F821
    shadow_begin(shadow_q, shadow_omega, shadow_md, shadow_mf, shadow_c, topology, h, options, shadow_work)  # noqa: F821
    for k in range(n_steps + 1):
        if k > 0:
            integrator_step((step_offset + k - 1) * h, q, omega, md, mf, c, topology, h, options, work,  # noqa: F821
                            active, code, step_iterations)
            shadow_step(step_offset + k, q, omega, shadow_q, shadow_omega, shadow_md, shadow_mf,  # noqa: F821
                        shadow_c, topology, h, options, shadow_work, active, shadow_active, shadow_code,
                        shadow_iterations, d0, renormalise_every, log_growth, reference, indicators, dq, dw, rmat,
                        scratch[0], column)
            check_lanes(q, omega, code, active, lane_status, lane_failed, step_iterations, lane_iterations, k,
                        scratch)
        if k % save_every == 0:
            record_sample(k // save_every, q, omega, md, mf, c, topology, m, members, lane_status,  # noqa: F821
                          save_state, q_out, omega_out, energy, unit_error, tangency_error, scratch)
            if tracking:
                record_sphere_indicators(k // save_every, step_offset + k, renormalise_every, h, q, omega, shadow_q,
                                         shadow_omega, m, members, log_growth, reference, indicators, log_growth_out,
                                         indicator_out, dq, dw, rmat, scratch[0])
    write_final_state(q, omega, min_separation[m:m + 1], m, members, lane_status, lane_failed, lane_iterations,
                      status, failed_step, iterations, q_end, omega_end, min_separation)
    if tracking:
        rows, count = 3 * q.shape[0], shadow_q.shape[2]
        ends = shadow_q_end.shape[0]
        for shadow, shadow_end, growth, kept in ((shadow_q, shadow_q_end, log_growth, indicators),
                                                 (shadow_omega, shadow_omega_end, log_growth[:0], indicators[:0])):
            write_final_shadows(shadow.reshape(rows, count), growth, reference[:growth.shape[0]],
                                kept, m, members, shadow_end.reshape(ends, count, rows), log_growth_end,
                                reference_end, indicators_end)


def flat_gpu_workspace(bindings: dict, one: dict, n: int, diagnostics: int) -> tuple:
    """:func:`gpu_workspace` of :func:`kernels.flat_driver.drive_flat_fixed` (state rows (rows, lanes), n bodies):
    the method's work (its ``integrator_allocate(rows, n, lanes)``) and the system's (``vector_field_work``) for
    the member, the scratch, the bookkeeping, the constraints' record of moved lanes, the method's and system's
    work for the shadows, the shadows' flags, scratch and coefficients (:class:`Tiled`)."""
    allocate, system_work = bindings["integrator_allocate"], bindings["vector_field_work"]
    rows, count = one["x"].shape[1], one["shadow"].shape[-1]
    return (allocate(rows, n, 1), system_work(rows, n, 1), np.empty((diagnostics + 2, 1)), lane_bookkeeping(0, 1, 1),
            np.zeros(1), allocate(rows, n, count), system_work(rows, n, count),
            (np.zeros(count, np.bool_), np.zeros(count, np.int64), np.zeros(count, np.int64)),
            (np.empty((rows, count)), np.empty((count, count, 1)), np.empty(max(count, 1))),
            Tiled("coef", tile_lanes_2d(one["coef"][0], count)))


def march_flat_members_template(own, m, x_blocks, coef, shadow_blocks, log_growth_blocks, reference_blocks,
                                indicator_blocks, topology, n, h, n_steps, save_every, options, d0, renormalise_every,
                                step_offset, section_modes, members, save_state, state_out, energy, diagnostics,
                                status, failed_step, iterations, x_end, carried, log_growth_out, indicator_out,
                                shadow_end, log_growth_end, reference_end, indicators_end, section_time, section_state,
                                section_count):
    """Thread m's part of :func:`kernels.flat_driver.drive_flat_fixed` (its arguments, every member in one block):
    member m and its shadows stepped by the same stages on the arrays of its own in ``own`` (the workspace of
    :func:`flat_gpu_workspace`), kept on the system's constraints after every step, as on the CPU.  Sections are
    refused on the GPU so far; their arguments are unused.  Free names as :func:`march_members_template`'s."""
    (x, c, shadow, log_growth, reference, indicators, (work, system_work, scratch, bookkeeping, moved, shadow_work,
                                                       shadow_system_work, shadow_flags, shadow_scratch, shadow_c)) = own
    lane_status, lane_failed, lane_iterations, step_iterations, code, active = bookkeeping
    shadow_active, shadow_code, shadow_iterations = shadow_flags
    displacement, rmat, column = shadow_scratch
    tracking = renormalise_every > 0
    system_constrain(x, n, c, topology, system_work, moved)  # noqa: F821 (put on the constraints first)
    integrator_begin(x, n, c, topology, h, options, work)  # noqa: F821
    shadow_begin(x, shadow, n, shadow_c, topology, h, options, shadow_work, shadow_system_work,  # noqa: F821
                 reference, moved, displacement, rmat, scratch[-1], column)
    for k in range(n_steps + 1):
        if k > 0:
            integrator_step(x, n, c, topology, (step_offset + k - 1) * h, h, options, work, active, code,  # noqa: F821
                            step_iterations)
            system_constrain(x, n, c, topology, system_work, moved)  # noqa: F821
            system_admissible(x, n, c, topology, system_work, code)  # noqa: F821
            shadow_step(step_offset + k, x, shadow, n, shadow_c, topology, h, options, shadow_work,  # noqa: F821
                        shadow_system_work, active, shadow_active, shadow_code, shadow_iterations, d0,
                        renormalise_every, log_growth, reference, indicators, displacement, rmat, scratch[-1], column)
            check_flat_lanes(x, code, active, lane_status, lane_failed, step_iterations, lane_iterations, k,
                             scratch[-1])
        if k % save_every == 0:
            record_flat_sample(k // save_every, x, n, c, topology, m, members, lane_status, save_state,  # noqa: F821
                               state_out, energy, diagnostics, scratch, system_work)
            if tracking:
                flat_shadow_factor(x, shadow, displacement, rmat, scratch[-1])
                record_indicators(k // save_every, step_offset + k, renormalise_every, h, m, members, log_growth,
                                  reference, rmat, indicators, log_growth_out, indicator_out)
    step = scratch[-1]
    step[0] = h  # the step the next segment starts with
    write_flat_final(x, step, m, members, lane_status, lane_failed, lane_iterations, status, failed_step, iterations,
                     x_end, carried)
    if tracking:
        write_final_shadows(shadow, log_growth, reference, indicators, m, members, shadow_end, log_growth_end,
                            reference_end, indicators_end)


def adaptive_gpu_workspace(bindings: dict, one: dict) -> tuple:
    """The arrays :func:`kernels.integrators.runge_kutta.drive_adaptive` allocates per member, for one (lanes
    last): the stages kq, kw; the stage, step and sample states yq, yw, q_new, ω_new, ω and the formulation's
    velocity; the equations' work (``equations_allocate``); the sample scratch; and status, failing step and
    accepted steps."""
    n = one["q"].shape[1]
    return ((np.empty((7, n, 3, 1)), np.empty((7, n, 3, 1))), tuple(np.empty((n, 3, 1)) for _ in range(6)),
            bindings["equations_allocate"](n, 1), np.empty((4, 1)),
            (np.zeros(1, np.int64), np.full(1, -1, np.int64), np.zeros(1, np.int64)))


def march_adaptive_members_template(own, m, q_blocks, omega_blocks, mass_diag, mass_full, coef, shadow_q_blocks,
                                    shadow_omega_blocks, log_growth_blocks, reference_blocks, indicator_blocks,
                                    topology, dt, n_steps, save_every, options, d0, renormalise_every, step_offset,
                                    track_encounters, section_modes, members, save_state, q_out, omega_out, energy,
                                    unit_error, tangency_error, work_out, status, failed_step, iterations, q_end,
                                    omega_end, carried, min_separation, sample_time, log_growth_out, indicator_out,
                                    shadow_q_end, shadow_omega_end, log_growth_end, reference_end, indicators_end,
                                    section_time, section_state, section_count):
    """Thread m's member of :func:`kernels.integrators.runge_kutta.drive_adaptive` (Dormand–Prince 5(4), a step
    size per member, dense output at the save times, the last step clipped onto n_steps·dt, the next step in
    ``carried[m, 0]``), on the arrays of its own in ``own`` (the workspace of :func:`adaptive_gpu_workspace`); what the GPU refuses (forces,
    sections, encounters; shadows, which rk45 never takes) is left out.  Free names as
    :func:`march_members_template`'s."""
    q, omega, md, mf, c, (stages, states, eq_work, scratch, bookkeeping) = own
    kq, kw = stages
    yq, yw, q_new, omega_new, yomega, velocity = states
    lane_status, lane_failed, accepted = bookkeeping
    v = velocity if CONVERTS else omega  # noqa: F821 (a formulation's own velocity variable)
    if CONVERTS:  # noqa: F821
        velocity_from_stored(q, omega, mf, c, topology, v, eq_work)  # noqa: F821
    t_end = n_steps * dt
    n_samples = n_steps // save_every + 1
    rtol, atol, max_steps = options[RTOL], options[ATOL], int(options[MAX_STEPS])
    h = carried[m, 0]
    record_sample(0, q, omega, md, mf, c, topology, m, members, lane_status, save_state, q_out,  # noqa: F821
                  omega_out, energy, unit_error, tangency_error, scratch)
    t_start = step_offset * dt
    equations_of_motion(t_start, q, v, md, mf, c, topology, kq[0], kw[0], eq_work)  # noqa: F821
    t = 0.0
    next_sample = 1
    attempts = 0
    while t < t_end:
        attempts += 1
        last = h >= t_end - t
        h_step = t_end - t if last else h
        dopri_attempt(t_start + t, h_step, q, v, md, mf, c, topology, kq, kw, yq, yw, q_new, omega_new,  # noqa: F821
                      eq_work)
        error = dopri_error_norm(q, v, q_new, omega_new, kq, kw, h_step, rtol, atol)
        if error <= 1.0:
            t_new = t_end if last else t + h_step
            while next_sample < n_samples and next_sample * save_every * dt <= t_new:
                t_sample = next_sample * save_every * dt
                if t_sample == t_new:
                    copy_block(q_new, yq)
                    copy_block(omega_new, yw)
                else:
                    dopri_dense_into(q, v, kq, kw, h_step, (t_sample - t) / h_step, yq, yw)
                if CONVERTS:  # noqa: F821
                    velocity_to_stored(yq, yw, mf, c, topology, yomega, eq_work)  # noqa: F821
                else:
                    copy_block(yw, yomega)
                record_sample(next_sample, yq, yomega, md, mf, c, topology, m, members, lane_status,  # noqa: F821
                              save_state, q_out, omega_out, energy, unit_error, tangency_error, scratch)
                next_sample += 1
            copy_block(q_new, q)
            copy_block(omega_new, v)
            t = t_new
            if CONVERTS:  # the step ends in the stored (q, ω), so a restart from them continues bitwise
                velocity_to_stored(q, v, mf, c, topology, omega, eq_work)  # noqa: F821
                velocity_from_stored(q, omega, mf, c, topology, v, eq_work)  # noqa: F821
                equations_of_motion(t_start + t, q, v, md, mf, c, topology, kq[0], kw[0], eq_work)  # noqa: F821
            else:
                copy_block(kq[6], kq[0])
                copy_block(kw[6], kw[0])
            accepted[0] += 1
        h = dopri_next_step(h, h_step, error, last)
        if dopri_gave_up(h, t, t_end, dt, attempts, max_steps, lane_status, lane_failed):
            break
    write_final_state(q, omega, min_separation[m:m + 1], m, members, lane_status, lane_failed, accepted, status,
                      failed_step, iterations, q_end, omega_end, min_separation)
    carried[m, 0] = h


def flat_adaptive_gpu_workspace(bindings: dict, one: dict, n: int, diagnostics: int) -> tuple:
    """The arrays :func:`kernels.integrators.flat_rk.drive_flat_adaptive` allocates per member, for one (lanes
    last): the stages k; the stage, step, scratch and formulation states y, x_new, scratch_field, u; the vector
    field's work (``vector_field_work``); the sample scratch; the constraints' record of moved lanes; and status,
    failing step, accepted steps and the step's code."""
    rows = one["x"].shape[1]
    return (np.empty((7, rows, 1)), tuple(np.empty((rows, 1)) for _ in range(4)),
            bindings["vector_field_work"](rows, n, 1), np.empty((diagnostics + 2, 1)), np.zeros(1),
            (np.zeros(1, np.int64), np.full(1, -1, np.int64), np.zeros(1, np.int64), np.zeros(1, np.int64)))


def march_flat_adaptive_members_template(own, m, x_blocks, coef, shadow_blocks, log_growth_blocks,
                                         reference_blocks, indicator_blocks, topology, n, dt, n_steps, save_every,
                                         options, d0, renormalise_every, step_offset, section_modes, members,
                                         save_state, state_out, energy, diagnostics, status, failed_step, iterations,
                                         x_end, carried, log_growth_out, indicator_out, shadow_end, log_growth_end,
                                         reference_end, indicators_end, section_time, section_state, section_count):
    """Thread m's member of :func:`kernels.integrators.flat_rk.drive_flat_adaptive` (the flat spaces' rk45, kept on
    the system's constraints after every accepted step), on the arrays of its own in ``own`` (the workspace of
    :func:`flat_adaptive_gpu_workspace`); sections are refused on the GPU so far.  Free names as
    :func:`march_members_template`'s."""
    x, c, (k, states, field_work, scratch, moved, bookkeeping) = own
    y, x_new, scratch_field, formulated = states
    lane_status, lane_failed, accepted, code = bookkeeping
    t_end = n_steps * dt
    n_samples = n_steps // save_every + 1
    rtol, atol, max_steps = options[RTOL], options[ATOL], int(options[MAX_STEPS])
    h = carried[m, 0]
    system_constrain(x, n, c, topology, field_work, moved)  # noqa: F821 (put on the constraints first)
    record_flat_sample(0, x, n, c, topology, m, members, lane_status, save_state, state_out, energy,  # noqa: F821
                       diagnostics, scratch, field_work)
    u = formulated if CONVERTS else x  # noqa: F821 (the formulation's variables: the stored state unless CONVERTS)
    if CONVERTS:  # noqa: F821
        to_formulation(x, n, c, u, code)  # noqa: F821
    t_start = step_offset * dt
    vector_field(u, n, c, topology, t_start, k[0], field_work)  # noqa: F821
    t = 0.0
    next_sample = 1
    attempts = 0
    while t < t_end and code[0] == 0:
        attempts += 1
        last = h >= t_end - t
        h_step = t_end - t if last else h
        flat_dopri_attempt(t_start + t, h_step, u, n, c, topology, k, y, x_new, field_work)  # noqa: F821
        error = flat_error_norm(u, x_new, k, h_step, rtol, atol)
        if error <= 1.0:
            moved[0] = 0.0
            system_constrain(x_new, n, c, topology, field_work, moved)  # noqa: F821
            system_admissible(x_new, n, c, topology, field_work, code)  # noqa: F821
            if code[0] != 0:  # the accepted step left the system's model: the member stops here
                break
            t_new = t_end if last else t + h_step
            while next_sample < n_samples and next_sample * save_every * dt <= t_new:
                t_sample = next_sample * save_every * dt
                if t_sample == t_new:
                    copy_rows(x_new, y)
                else:
                    flat_dense_into(u, k, h_step, (t_sample - t) / h_step, y)
                if CONVERTS:  # noqa: F821
                    from_formulation(y, n, c, scratch_field, code)  # noqa: F821
                    copy_rows(scratch_field, y)
                record_flat_sample(next_sample, y, n, c, topology, m, members, lane_status,  # noqa: F821
                                   save_state, state_out, energy, diagnostics, scratch, field_work)
                next_sample += 1
            copy_rows(x_new, u)
            if CONVERTS:  # noqa: F821
                from_formulation(u, n, c, x, code)  # noqa: F821
                to_formulation(x, n, c, u, code)  # noqa: F821
                vector_field(u, n, c, topology, t_start + t_new, k[0], field_work)  # noqa: F821
            elif moved[0] != 0.0:  # the projected step ends elsewhere than the last stage's point
                vector_field(u, n, c, topology, t_start + t_new, k[0], field_work)  # noqa: F821
            else:
                copy_rows(k[6], k[0])
            t = t_new
            accepted[0] += 1
        h = dopri_next_step(h, h_step, error, last)
        if dopri_gave_up(h, t, t_end, dt, attempts, max_steps, lane_status, lane_failed):
            break
    if code[0] != 0:
        lane_status[0] = code[0]
        lane_failed[0] = int(t / dt) + 1
    step = scratch[-1]
    step[0] = h  # the step the next segment starts with
    write_flat_final(x, step, m, members, lane_status, lane_failed, accepted, status, failed_step, iterations, x_end,
                     carried)


#: per CPU driver (a recipe's): the GPU's driver template, the host function making its workspace from the
#: kernel's bindings (:func:`kernels.compile.specialised_stages`), and the template's arguments whose member part
#: each thread keeps as its own (:func:`member_kernel_source`: the state, its shadows and the parameters)
TEMPLATES = {
    drive_fixed_step: (march_members_template, gpu_workspace,
                       ("q_blocks", "omega_blocks", "mass_diag", "mass_full", "coef", "shadow_q_blocks",
                        "shadow_omega_blocks", "log_growth_blocks", "reference_blocks", "indicator_blocks")),
    drive_flat_fixed: (march_flat_members_template, flat_gpu_workspace,
                       ("x_blocks", "coef", "shadow_blocks", "log_growth_blocks", "reference_blocks",
                        "indicator_blocks")),
    drive_adaptive: (march_adaptive_members_template, adaptive_gpu_workspace,
                     ("q_blocks", "omega_blocks", "mass_diag", "mass_full", "coef")),
    drive_flat_adaptive: (march_flat_adaptive_members_template, flat_adaptive_gpu_workspace, ("x_blocks", "coef")),
    # fire's member template is its CPU driver's own (written once for both devices)
    drive_fire: (minimise_member_template, lambda bindings, one: member_workspace(one["q"].shape[1]),
                 ("q_blocks", "omega_blocks", "mass_diag", "mass_full", "coef"))}


@contextlib.contextmanager
def nvvm_options(fma: bool):
    """NVVM compiles with ``-fma=0`` inside (``fma`` False): no a·b + c fused into one multiply–add, so each product
    and sum rounds as on the CPU.  numba-cuda 0.30's ``cuda.jit`` passes NVVM only ``opt`` and ``fastmath``; the
    option is added where numba-cuda hands its IR to NVVM, for the compiles (a kernel's first launch, or
    :func:`ptx_of`) inside."""
    from numba.cuda.cudadrv import nvvm

    if fma:
        yield
        return
    original = nvvm.compile_ir

    def compile_ir(llvmir, **options):
        return original(llvmir, **{**options, "fma": False})
    nvvm.compile_ir = compile_ir
    try:
        yield
    finally:
        nvvm.compile_ir = original


@functools.cache
def gpu_kernel(method: str, system: str, inertia_kind: str, shadows: bool, kernel_source: str, fma: bool = True):
    """The CUDA kernel of ``method`` for ``system``: ``kernel_source`` (:func:`member_kernel_source`) calling the
    GPU's twin (:data:`TEMPLATES`) of the method's CPU driver with the CPU's stages bound
    (:func:`kernels.compile.specialised_stages`), as a Python function for numba-cuda (``cuda.jit`` launches it,
    ``compile_ptx`` checks it); one per ``fma`` (:func:`nvvm_options`), whose dispatchers differ."""
    cuda = cuda_module()
    _register_numpy_math()
    recipe, bindings, tag = specialised_stages(method, system, inertia_kind, shadows)
    template = TEMPLATES[recipe.driver][0]
    # the drivers' own helpers (check_lanes, write_final_state, …) are this module's globals already
    body = numba.njit(**KERNEL_FLAGS)(bind_template(template, f"{template.__name__}__{tag}", bindings))
    namespace = {"__name__": __name__, "cuda": cuda, "np": np, template.__name__: body}
    exec(kernel_source, namespace)  # noqa: S102 (our own text: the member's arrays copied to its own)
    kernel = namespace[f"{template.__name__}_kernel"]
    kernel.__name__ = kernel.__qualname__ = f"{template.__name__}__{tag}"
    return kernel


def run_blocks(method: str, system: str, inertia_kind: str, shadows: bool, blocks: dict, shared: tuple,
               keep_state: bool, outputs: list, members: int, fma: bool = True, **workspace_options) -> None:
    """The GPU's :func:`kernels.blocks.run_in_threads`: the same driver arguments, every member in one block
    (``blocks`` (1, ..., members)).  The workspace is made on the host for one member (:data:`TEMPLATES`, with
    ``workspace_options``), every thread's start of its own arrays (:func:`member_kernel_source`); it, the inputs
    and the outputs that do not start as one value throughout go to the device, the others are made and filled
    there (:func:`_output_on_device`); the kernel (compiled with ``fma``, see :func:`nvvm_options`) runs one
    thread per member, and the outputs come back.  :data:`last_run_seconds` and :data:`last_run_bytes` say what
    the transfers took."""
    recipe, bindings, tag = specialised_stages(method, system, inertia_kind, shadows)
    template, make_workspace, owned = TEMPLATES[recipe.driver]
    one = {name: array[..., :array.shape[-1] // members] for name, array in blocks.items()}
    workspace = make_workspace(bindings, one, **workspace_options)
    arguments = (_each_array(workspace, lambda array: array), *blocks.values(), *shared, members, keep_state, *outputs)
    named = dict(zip(list(inspect.signature(template).parameters)[2:], arguments[1:]))
    source = member_kernel_source(template, list(named), {name: named[name] for name in owned}, workspace, members)
    function = gpu_kernel(method, system, inertia_kind, shadows, source, fma)
    if _ptx_only.compiled is not None:  # ptx_of: compile for a device this machine lacks, step nothing
        with nvvm_options(fma):
            parameters = [each for name, argument in zip(["workspace", *named], arguments)
                          for each in _parameters(name, argument)]
            empty = frozenset(name.removesuffix(".nitems") for name, value in parameters
                              if name.endswith(".nitems") and value == 0)
            _ptx_only.compiled.append(KernelPtx(_compile_ptx(function, arguments), [name for name, _ in parameters],
                                                empty))
        return
    cuda = cuda_module()
    kernel = _launchable(function)
    started = time.perf_counter()
    copied = []
    inputs = [_each_array(argument, lambda array: copied.append(array.nbytes) or cuda.to_device(array))
              for argument in arguments[:-len(outputs)]]
    on_device = inputs + [_output_on_device(array, copied) for array in outputs]
    cuda.synchronize()
    launched = time.perf_counter()
    with nvvm_options(fma):  # the first launch compiles
        launch(kernel, members, *on_device)
    cuda.synchronize()
    stepped = time.perf_counter()
    for array, copy in zip(outputs, on_device[-len(outputs):]):
        copy.copy_to_host(array)
    last_run_seconds.update(to_device=launched - started, kernel=stepped - launched,
                            to_host=time.perf_counter() - stepped)
    last_run_bytes.update(to_device=sum(copied), to_host=sum(array.nbytes for array in outputs))


def _output_on_device(array: np.ndarray, copied: list):
    """An output array on the device: made there and filled when the host's holds one value throughout (the NaN,
    infinity, zero or -1 an output starts as), else copied (its bytes appended to ``copied``)."""
    cuda = cuda_module()
    flat = array.reshape(-1) if array.flags.c_contiguous else array
    if flat.ndim == 1 and flat.size and np.array_equal(flat, np.broadcast_to(flat[0], flat.shape),
                                                       equal_nan=flat.dtype.kind == "f"):
        made = cuda.device_array(array.shape, array.dtype)
        launch(_filler(), flat.size, made.reshape(flat.size), flat[0])
        return made
    copied.append(array.nbytes)
    return cuda.to_device(array)


def launch(kernel, threads: int, *arguments) -> None:
    """``kernel`` launched on ``threads`` threads or a few more (whole blocks of :data:`THREADS_PER_BLOCK`, at least
    one), each of which checks its index against the size it serves: the grid of every launch here."""
    kernel[max(1, -(-threads // THREADS_PER_BLOCK)), THREADS_PER_BLOCK](*arguments)


def fill_template(flat, value):
    """Every element of the one-dimensional device array ``flat`` set to ``value``, a thread each.  Free name:
    ``cuda``, bound by :func:`_filler` (the simulator swaps a kernel's global ``cuda`` for its own)."""
    i = cuda.grid(1)  # noqa: F821
    if i < flat.size:
        flat[i] = value


@functools.cache
def _filler():
    """:func:`fill_template` as a CUDA kernel."""
    return cuda_module().jit(bind_template(fill_template, "fill", {"cuda": cuda_module()}))


@functools.cache
def _launchable(function):
    """``function`` (:func:`gpu_kernel`) jitted for the device (compiled at its first launch, once per process)."""
    return cuda_module().jit(function)


#: wall seconds of the last GPU run's parts: ``to_device`` (inputs, workspace and outputs moved to the device),
#: ``kernel`` (the steps, the first launch's compile included) and ``to_host`` (the outputs back), for
#: benchmarks/gpu.py's share of transfers
last_run_seconds = {}
#: bytes the last GPU run moved: ``to_device`` (inputs, the one member's workspace and the outputs that do not
#: start as one value) and ``to_host`` (the outputs)
last_run_bytes = {}

class KernelPtx(typing.NamedTuple):
    """A kernel's PTX (:func:`ptx_of`) and the name of each of its parameters, in order.  numba-cuda passes a
    tuple as its items and an array as its fields, each a parameter of its own: meminfo, parent, nitems,
    itemsize, data, the shape's and the strides' entries (``q_blocks.data``, ``workspace[0][1].shape0``);
    ``empty``: the arrays among them without elements (a member's shadows where it has none), which the kernel's
    code may name but never reads or writes."""

    ptx: str
    parameters: list
    empty: frozenset


def _parameters(name: str, value) -> list[tuple]:
    """The PTX parameters an argument ``value`` named ``name`` is passed as (:class:`KernelPtx`): (name, value)."""
    if isinstance(value, tuple):
        return [each for i, part in enumerate(value) for each in _parameters(f"{name}[{i}]", part)]
    if not isinstance(value, np.ndarray):
        return [(name, value)]
    fields = {"meminfo": None, "parent": None, "nitems": value.size, "itemsize": value.itemsize, "data": None,
              **{f"shape{d}": size for d, size in enumerate(value.shape)},
              **{f"strides{d}": stride for d, stride in enumerate(value.strides)}}
    return [(f"{name}.{field}", each) for field, each in fields.items()]


class _PtxOnly(threading.local):
    """:func:`ptx_of`'s state, per thread: the PTX compiled by the runs inside it (None outside)."""

    compiled = None


_ptx_only = _PtxOnly()


def ptx_of(run, compute_capability: tuple = DEFAULT_COMPUTE_CAPABILITY) -> list[KernelPtx]:
    """The PTX (:class:`KernelPtx`) of every GPU kernel ``run()`` launches (a call of :func:`kernels.integrate`
    with ``device="cuda"``),
    compiled for ``compute_capability`` without a GPU and without stepping anything (the run's results are NaN and
    are dropped).  How the suite checks that each method and space of the GPU compiles for the device on a machine
    without one."""
    _ptx_only.compiled = []
    try:
        run()
        return _ptx_only.compiled
    finally:
        _ptx_only.compiled = None


def _compile_ptx(function, arguments: tuple, compute_capability: tuple = DEFAULT_COMPUTE_CAPABILITY) -> str:
    """PTX of a kernel for these arguments.  numba-cuda 0.30 compiles a kernel for a given capability without a
    GPU, but asks the current device for its capability when the kernel calls another function (every stage);
    without a device that starts the driver and fails, so for the compile the device is a stand-in saying
    ``compute_capability``."""
    cuda = cuda_module()
    from numba.cuda import dispatcher

    signature = tuple(numba.typeof(argument) for argument in arguments)
    asked = dispatcher.get_current_device
    dispatcher.get_current_device = lambda: types.SimpleNamespace(compute_capability=compute_capability)
    try:
        return cuda.compile_ptx(function, signature, cc=compute_capability)[0]
    finally:
        dispatcher.get_current_device = asked
