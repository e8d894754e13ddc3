"""Ensembles on one CUDA GPU through numba-cuda: one thread per member, running the CPU kernels' own stages.

The stages a fixed-step driver calls (``integrator_begin``, ``integrator_step``, ``record_sample``, the shadows',
and through them the system's gradient, potential or vector field) are Python functions in lane layout: a member's
scalar arithmetic inside loops over a block's lanes (:mod:`kernels.lanes`).  The GPU runs that same source.
:func:`march_members_template` (for (S²)ⁿ) and :func:`march_flat_members_template` (for the flat spaces) give
thread m the views ``[..., m::members]`` of arrays whose lanes are the whole ensemble (its shadows' lanes too:
shadow j of member m is lane j·members + m), so every lane loop runs over its own member only, neighbouring threads
touch neighbouring addresses (coalesced loads), and numba-cuda compiles the stages that
:func:`kernels.compile.specialised_stages` jitted for the CPU again for the device.  A segment runs on the device
from its first step to its last; the samples, the outcome and the end state cross to the host once, at its end,
and the next segment starts from ``final`` as on the CPU (the store's restarts).

The GPU's templates (:data:`TEMPLATES`: the fixed-step drivers' and rk45's adaptive ones, for (S²)ⁿ and the flat
spaces) are the CPU drivers' loops without their allocations: the arrays a driver allocates per block are made on
the host, for the whole ensemble (:func:`gpu_workspace` and its kin); what a step does is the stages' (rk45's
attempt is ``dopri_attempt``, the CPU's own).  One body shared by
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

What runs here is :data:`GPU_METHODS`, without forces, sections, close-encounter tracking or the system-parallel
mode; :func:`check_supported` refuses the rest in one line.
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import threading
import time
import types

import numba
import numpy as np

from .compile import KERNEL_FLAGS, specialised_stages
from .driver import check_lanes, drive_fixed_step, lane_bookkeeping, write_final_state
from .errors import InvalidInput
from .flat_driver import check_flat_lanes, drive_flat_fixed, flat_shadow_factor, write_flat_final
from .integrators.flat_rk import copy_rows, drive_flat_adaptive, flat_dense_into, flat_error_norm
from .integrators.runge_kutta import (ATOL, MAX_STEPS, RTOL, dopri_dense_into, dopri_error_norm, dopri_gave_up,
                                      dopri_next_step, drive_adaptive)
from .lanes import bind_template, copy_block, lane_function
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
GPU_METHODS = {"vi": ("sphere_product",), "lgvi": ("rotation",), "rk4": EVERY_SPACE, "rk45": EVERY_SPACE}
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
                    stochastic: bool) -> None:
    """Refuse, in one line naming the option, what the GPU does not run yet."""
    space = system.space.name
    if method not in GPU_METHODS or stochastic:
        raise InvalidInput("method", f"{method!r} does not run on device 'cuda' yet; there: {', '.join(GPU_METHODS)} "
                           "(vi explicit and implicit, rk4 and rk45 in their default formulations)")
    spaces = GPU_METHODS[method]
    if space not in spaces:
        raise InvalidInput("device", f"{method} runs on device 'cuda' for {', '.join(spaces)} systems so far; "
                           f"{system.name} is on {space}: use device = 'cpu'")
    for name, what, present in (
            ("sections", "surfaces of section", bool(sections)), ("forcing", f"forces ({system.name} is forced)", forced),
            ("outputs", "close-encounter tracking (min_separation)", track_encounters),
            ("mode", "the system-parallel mode (one large member)", mode == "system")):
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


class PerMember:
    """A workspace array that a block's lanes share on the CPU, using it one after another (one member's scratch:
    the articulated-body algorithm's joint rows), given every GPU thread its own: ``array`` has the CPU's shape
    and a last axis of members, and thread m's view is ``array[..., m]``."""

    def __init__(self, array: np.ndarray):
        self.array = array


def for_members(make, per_member: int, members: int):
    """The work ``make(lanes)`` (a method's or system's allocate: arrays, in tuples) gives a block, for ``members``
    threads of ``per_member`` lanes each (1, or a member's shadows): an array with lanes last (its last axis grows
    with ``lanes``: told apart by making it for 1 and 2 lanes) is made for per_member · members lanes, thread m's
    every members-th (:func:`member_views_source`); one the lanes share, as made for ``per_member`` lanes,
    becomes :class:`PerMember`."""
    return _spread(make(per_member * members), make(per_member), make(1), make(2), members)


def _spread(whole, own, one, two, members: int):
    if isinstance(whole, tuple):
        return tuple(_spread(*parts, members) for parts in zip(whole, own, one, two))
    if one.shape[-1:] == (1,) and two.shape == one.shape[:-1] + (2,):
        return whole
    return PerMember(np.repeat(own[..., np.newaxis], members, axis=-1))


def _view_expression(item, path: str) -> str:
    """Source of member m's view of ``item`` (an array, lanes last, a :class:`PerMember` or a tuple of them,
    nested) read at ``path``."""
    if isinstance(item, tuple):
        return "(" + "".join(_view_expression(part, f"{path}[{i}]") + ", " for i, part in enumerate(item)) + ")"
    return f"{path}[..., m]" if isinstance(item, PerMember) else f"{path}[..., m::lanes]"


def member_views_source(workspace: tuple, members: int) -> str:
    """A function returning member m's views of a workspace of ``members`` lanes (:func:`gpu_workspace`), written
    out for the workspace's shape: Numba indexes a tuple of mixed arrays only by constants.  Every array must have
    its lanes last, a whole number of lanes per member, or be a :class:`PerMember` (a scratch shared by the lanes
    of a block and not made per member, which the threads would share, is refused: AssertionError naming its
    shape)."""
    arrays = []
    _each_array(workspace, arrays.append)
    for array in arrays:
        assert array.ndim and array.shape[-1] % members == 0, f"GPU workspace array {array.shape} has no lanes last"
    return f"def member_views(workspace, m, lanes):\n    return {_view_expression(workspace, 'workspace')}\n"


def _each_array(item, function):
    """``item`` (a value, or arrays and :class:`PerMember` in tuples, nested) with ``function`` applied to each
    array (a PerMember's own: what the kernel gets); other values as they are."""
    if isinstance(item, tuple):
        return tuple(_each_array(part, function) for part in item)
    if isinstance(item, PerMember):
        item = item.array
    return function(item) if isinstance(item, np.ndarray) else item


@lane_function
def sphere_member_views(q_blocks, omega_blocks, mass_diag, mass_full, coef, m, members):
    """Member m's views (q, ω, diagonal and full M, coefficients) of an (S²)ⁿ kernel's one block of every member."""
    mine = slice(m, None, members)
    return (q_blocks[0][:, :, mine], omega_blocks[0][:, :, mine], mass_diag[0][:, mine], mass_full[0][:, :, mine],
            coef[0][:, mine])


def gpu_workspace(bindings: dict, blocks: dict, members: int) -> tuple:
    """The arrays :func:`kernels.driver.drive_fixed_step` allocates per block, for one block of every member (lanes
    last; shadow j of member m in lane j·members + m), made on the host: the method's work (``allocate``, its
    ``integrator_allocate``) for the members and for their shadows, the bookkeeping, the scratch, and the shadows'
    coefficients and scratch.  Member m's lanes of every one are ``[..., m::members]``."""
    allocate = bindings["integrator_allocate"]
    n, count = blocks["q"].shape[1], blocks["shadow_q"].shape[-1] // members
    shadows = count * members
    return (allocate(n, members), np.empty((4, members)), lane_bookkeeping(0, members, members), allocate(n, shadows),
            (np.zeros(shadows, np.bool_), np.zeros(shadows, np.int64), np.zeros(shadows, np.int64)),
            (np.empty((3 * n, shadows)), np.empty((3 * n, shadows)), np.empty((count, count, members)),
             np.empty(max(count, 1) * members)),
            (tile_lanes_2d(blocks["mass_diag"][0], count), tile_lanes_3d(blocks["mass_full"][0], count),
             tile_lanes_2d(blocks["coef"][0], count)))


def march_members_template(workspace, q_blocks, omega_blocks, mass_diag, mass_full, coef, shadow_q_blocks,
                           shadow_omega_blocks, log_growth_blocks, reference_blocks, indicator_blocks, topology, h,
                           n_steps, save_every, options, d0, renormalise_every, step_offset, track_encounters,
                           section_modes, members, save_state, q_out, omega_out, energy, unit_error, tangency_error,
                           work_out, status, failed_step, iterations, q_end, omega_end, carried, min_separation,
                           sample_time, log_growth_out, indicator_out, shadow_q_end, shadow_omega_end, log_growth_end,
                           reference_end, indicators_end, section_time, section_state, section_count):
    """Thread m's part of :func:`kernels.driver.drive_fixed_step` (the same arguments, every member in one block, and
    the ``workspace`` of :func:`gpu_workspace`): member m and its shadows stepped by the same stages on their views
    ``[..., m::members]``.  What the GPU refuses (forces, sections, encounters) is left out; their arguments are
    unused.  Free names bound at specialisation: the stages of :func:`kernels.compile.specialised_stages`,
    ``member_views`` (:func:`member_views_source`) and ``cuda``."""
    m = cuda.grid(1)  # noqa: F821 (bound at specialisation: numba-cuda's module)
    if m >= members:
        return
    mine = slice(m, None, members)
    q, omega, md, mf, c = sphere_member_views(q_blocks, omega_blocks, mass_diag, mass_full, coef, m, members)
    shadow_q, shadow_omega = shadow_q_blocks[0][:, :, mine], shadow_omega_blocks[0][:, :, mine]
    log_growth, reference = log_growth_blocks[0][mine], reference_blocks[0][mine]
    indicators = indicator_blocks[0][:, mine]
    work, scratch, bookkeeping, shadow_work, shadow_flags, shadow_scratch, shadow_coefficients = member_views(  # noqa: F821
        workspace, m, members)
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
        for shadow, shadow_end, growth, kept in ((shadow_q_blocks[0], shadow_q_end, log_growth, indicators),
                                                 (shadow_omega_blocks[0], shadow_omega_end, log_growth[:0],
                                                  indicators[:0])):
            write_final_shadows(shadow.reshape(rows, count * members)[:, mine], growth, reference[:growth.shape[0]],
                                kept, m, members, shadow_end.reshape(ends, count, rows), log_growth_end,
                                reference_end, indicators_end)


def flat_gpu_workspace(bindings: dict, blocks: dict, members: int, n: int, diagnostics: int) -> tuple:
    """:func:`gpu_workspace` of :func:`kernels.flat_driver.drive_flat_fixed` (state rows (rows, members), n bodies):
    the method's work (its ``integrator_allocate(rows, n, lanes)``) and the system's (``vector_field_work``) for
    the members, the scratch, the bookkeeping, the constraints' record of moved lanes, the method's and system's
    work for the shadows, the shadows' flags, scratch and coefficients (:func:`for_members`)."""
    allocate, system_work = bindings["integrator_allocate"], bindings["vector_field_work"]
    rows, count = blocks["x"].shape[1], blocks["shadow"].shape[-1] // members
    shadows = count * members
    method_work = functools.partial(allocate, rows, n)
    system_work = functools.partial(system_work, rows, n)
    return (for_members(method_work, 1, members), for_members(system_work, 1, members),
            np.empty((diagnostics + 2, members)), lane_bookkeeping(0, members, members), np.zeros(members),
            for_members(method_work, count, members), for_members(system_work, count, members),
            (np.zeros(shadows, np.bool_), np.zeros(shadows, np.int64), np.zeros(shadows, np.int64)),
            (np.empty((rows, shadows)), np.empty((count, count, members)), np.empty(max(count, 1) * members)),
            tile_lanes_2d(blocks["coef"][0], count))


def march_flat_members_template(workspace, x_blocks, coef, shadow_blocks, log_growth_blocks, reference_blocks,
                                indicator_blocks, topology, n, h, n_steps, save_every, options, d0, renormalise_every,
                                step_offset, section_modes, members, save_state, state_out, energy, diagnostics,
                                status, failed_step, iterations, x_end, carried, log_growth_out, indicator_out,
                                shadow_end, log_growth_end, reference_end, indicators_end, section_time, section_state,
                                section_count):
    """Thread m's part of :func:`kernels.flat_driver.drive_flat_fixed` (its arguments, every member in one block, and
    the ``workspace`` of :func:`flat_gpu_workspace`): member m and its shadows stepped by the same stages on their
    views ``[..., m::members]``, kept on the system's constraints after every step, as on the CPU.  Sections are
    refused on the GPU so far; their arguments are unused.  Free names as :func:`march_members_template`'s."""
    m = cuda.grid(1)  # noqa: F821 (bound at specialisation: numba-cuda's module)
    if m >= members:
        return
    mine = slice(m, None, members)
    x, c, shadow = x_blocks[0][:, mine], coef[0][:, mine], shadow_blocks[0][:, mine]
    log_growth, reference = log_growth_blocks[0][mine], reference_blocks[0][mine]
    indicators = indicator_blocks[0][:, mine]
    (work, system_work, scratch, bookkeeping, moved, shadow_work, shadow_system_work, shadow_flags, shadow_scratch,
     shadow_c) = member_views(workspace, m, members)  # noqa: F821
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


def adaptive_gpu_workspace(bindings: dict, blocks: dict, members: int) -> tuple:
    """The arrays :func:`kernels.integrators.runge_kutta.drive_adaptive` allocates per member, for every member
    (lanes last): the stages kq, kw; the stage, step and sample states yq, yw, q_new, ω_new, ω and the formulation's
    velocity; the equations' work (``equations_allocate``); the sample scratch; and status, failing step and
    accepted steps."""
    n = blocks["q"].shape[1]
    return ((np.empty((7, n, 3, members)), np.empty((7, n, 3, members))),
            tuple(np.empty((n, 3, members)) for _ in range(6)), bindings["equations_allocate"](n, members),
            np.empty((4, members)), (np.zeros(members, np.int64), np.full(members, -1, np.int64),
                                     np.zeros(members, np.int64)))


def march_adaptive_members_template(workspace, q_blocks, omega_blocks, mass_diag, mass_full, coef, shadow_q_blocks,
                                    shadow_omega_blocks, log_growth_blocks, reference_blocks, indicator_blocks,
                                    topology, dt, n_steps, save_every, options, d0, renormalise_every, step_offset,
                                    track_encounters, section_modes, members, save_state, q_out, omega_out, energy,
                                    unit_error, tangency_error, work_out, status, failed_step, iterations, q_end,
                                    omega_end, carried, min_separation, sample_time, log_growth_out, indicator_out,
                                    shadow_q_end, shadow_omega_end, log_growth_end, reference_end, indicators_end,
                                    section_time, section_state, section_count):
    """Thread m's member of :func:`kernels.integrators.runge_kutta.drive_adaptive` (Dormand–Prince 5(4), a step
    size per member, dense output at the save times, the last step clipped onto n_steps·dt, the next step in
    ``carried[m, 0]``), with the ``workspace`` of :func:`adaptive_gpu_workspace`; what the GPU refuses (forces,
    sections, encounters; shadows, which rk45 never takes) is left out.  Free names as
    :func:`march_members_template`'s."""
    m = cuda.grid(1)  # noqa: F821 (bound at specialisation: numba-cuda's module)
    if m >= members:
        return
    q, omega, md, mf, c = sphere_member_views(q_blocks, omega_blocks, mass_diag, mass_full, coef, m, members)
    stages, states, eq_work, scratch, bookkeeping = member_views(workspace, m, members)  # noqa: F821
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


def flat_adaptive_gpu_workspace(bindings: dict, blocks: dict, members: int, n: int, diagnostics: int) -> tuple:
    """The arrays :func:`kernels.integrators.flat_rk.drive_flat_adaptive` allocates per member, for every member
    (lanes last): the stages k; the stage, step, scratch and formulation states y, x_new, scratch_field, u; the
    vector field's work (``vector_field_work``); the sample scratch; the constraints' record of moved lanes; and
    status, failing step, accepted steps and the step's code."""
    rows = blocks["x"].shape[1]
    return (np.empty((7, rows, members)), tuple(np.empty((rows, members)) for _ in range(4)),
            for_members(functools.partial(bindings["vector_field_work"], rows, n), 1, members),
            np.empty((diagnostics + 2, members)), np.zeros(members),
            (np.zeros(members, np.int64), np.full(members, -1, np.int64), np.zeros(members, np.int64),
             np.zeros(members, np.int64)))


def march_flat_adaptive_members_template(workspace, x_blocks, coef, shadow_blocks, log_growth_blocks,
                                         reference_blocks, indicator_blocks, topology, n, dt, n_steps, save_every,
                                         options, d0, renormalise_every, step_offset, section_modes, members,
                                         save_state, state_out, energy, diagnostics, status, failed_step, iterations,
                                         x_end, carried, log_growth_out, indicator_out, shadow_end, log_growth_end,
                                         reference_end, indicators_end, section_time, section_state, section_count):
    """Thread m's member of :func:`kernels.integrators.flat_rk.drive_flat_adaptive` (the flat spaces' rk45, kept on
    the system's constraints after every accepted step), with the ``workspace`` of
    :func:`flat_adaptive_gpu_workspace`; sections are refused on the GPU so far.  Free names as
    :func:`march_members_template`'s."""
    m = cuda.grid(1)  # noqa: F821 (bound at specialisation: numba-cuda's module)
    if m >= members:
        return
    mine = slice(m, None, members)
    x, c = x_blocks[0][:, mine], coef[0][:, mine]
    k, states, field_work, scratch, moved, bookkeeping = member_views(workspace, m, members)  # noqa: F821
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


#: per CPU driver (a recipe's): the GPU's driver template and the host function making its workspace from the
#: kernel's bindings (:func:`kernels.compile.specialised_stages`)
TEMPLATES = {drive_fixed_step: (march_members_template, gpu_workspace),
             drive_flat_fixed: (march_flat_members_template, flat_gpu_workspace),
             drive_adaptive: (march_adaptive_members_template, adaptive_gpu_workspace),
             drive_flat_adaptive: (march_flat_adaptive_members_template, flat_adaptive_gpu_workspace)}


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
def gpu_kernel(method: str, system: str, inertia_kind: str, shadows: bool, views_source: str, fma: bool = True):
    """The CUDA kernel of ``method`` for ``system``: the GPU's twin (:data:`TEMPLATES`) of the method's CPU driver, with
    the CPU's
    stages bound (:func:`kernels.compile.specialised_stages`), as a Python function for numba-cuda (``cuda.jit``
    launches it, ``compile_ptx`` checks it); one per ``fma`` (:func:`nvvm_options`), whose dispatchers differ."""
    cuda = cuda_module()
    _register_numpy_math()
    recipe, bindings, tag = specialised_stages(method, system, inertia_kind, shadows)
    namespace = {}
    exec(views_source, namespace)  # noqa: S102 (our own text: the views of the workspace's arrays)
    # the drivers' own helpers (check_lanes, write_final_state, …) are this module's globals already
    stages = dict(bindings, cuda=cuda, member_views=numba.njit(**KERNEL_FLAGS)(namespace["member_views"]))
    template = TEMPLATES[recipe.driver][0]
    return bind_template(template, f"{template.__name__}__{tag}", stages)


def run_blocks(method: str, system: str, inertia_kind: str, shadows: bool, blocks: dict, shared: tuple,
               keep_state: bool, outputs: list, members: int, fma: bool = True, **workspace_options) -> None:
    """The GPU's :func:`kernels.blocks.run_in_threads`: the same driver arguments, every member in one block (``blocks`` (1, ..., members)); the workspace is made on the host
    (:data:`TEMPLATES`, with ``workspace_options``) and moved to the device with the inputs and outputs, the kernel
    (compiled with ``fma``, see :func:`nvvm_options`) launched with one thread per member, the outputs copied back."""
    recipe, bindings, tag = specialised_stages(method, system, inertia_kind, shadows)
    workspace = TEMPLATES[recipe.driver][1](bindings, blocks, members, **workspace_options)
    function = gpu_kernel(method, system, inertia_kind, shadows, member_views_source(workspace, members), fma)
    arguments = (_each_array(workspace, lambda array: array), *blocks.values(), *shared, members, keep_state, *outputs)
    if _ptx_only.compiled is not None:  # ptx_of: compile for a device this machine lacks, step nothing
        with nvvm_options(fma):
            _ptx_only.compiled.append(_compile_ptx(function, arguments))
        return
    cuda = cuda_module()
    kernel = _launchable(function)
    started = time.perf_counter()
    on_device = [_each_array(argument, cuda.to_device) for argument in arguments]
    launched = time.perf_counter()
    with nvvm_options(fma):  # the first launch compiles
        kernel[-(-members // THREADS_PER_BLOCK), THREADS_PER_BLOCK](*on_device)
    cuda.synchronize()
    stepped = time.perf_counter()
    for array, copy in zip(outputs, on_device[-len(outputs):]):
        copy.copy_to_host(array)
    last_run_seconds.update(to_device=launched - started, kernel=stepped - launched,
                            to_host=time.perf_counter() - stepped)


@functools.cache
def _launchable(function):
    """``function`` (:func:`gpu_kernel`) jitted for the device (compiled at its first launch, once per process)."""
    return cuda_module().jit(function)


#: wall seconds of the last GPU run's parts: ``to_device`` (inputs, workspace and outputs moved to the device),
#: ``kernel`` (the steps, the first launch's compile included) and ``to_host`` (the outputs back), for
#: benchmarks/gpu.py's share of transfers
last_run_seconds = {}

class _PtxOnly(threading.local):
    """:func:`ptx_of`'s state, per thread: the PTX compiled by the runs inside it (None outside)."""

    compiled = None


_ptx_only = _PtxOnly()


def ptx_of(run, compute_capability: tuple = DEFAULT_COMPUTE_CAPABILITY) -> list[str]:
    """The PTX of every GPU kernel ``run()`` launches (a call of :func:`kernels.integrate` with ``device="cuda"``),
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
