"""Running a spec into its store: :func:`prepare` (everything checked before the store is touched), :func:`run`
(run or resume), :func:`run_array_task` (one task of a SLURM array), and :func:`load_model` (a model file's
system, for :func:`armillary.integrate`).  Running imports Dask and xarray where it starts, so that ``armillary
check`` (:func:`prepare`) starts without them."""

from __future__ import annotations

import contextlib
import json
import os
import sys
from typing import TYPE_CHECKING

from armillary.kernels import InvalidInput, get_system
from armillary.kernels.caches import kernel_cache_directory
from armillary.kernels.systems import system_definition

from .errors import RunFailed, StoreError
from .lock import run_lock
from .mpi import MpiExchange, check_on_ranks, execute_on_ranks, launched_ranks, require_mpi, world
from .plan import Plan
from .spec import Spec, load_spec, read_model_file
from .store import check_writable, existing_identity, remove_store, revision_change, write_template

if TYPE_CHECKING:
    import xarray as xr


def load_model(path, **params):
    """The system of the model file at ``path`` with these parameter values (the file's defaults for the
    others; any numeric value may carry a leading member axis), for :func:`armillary.integrate`.  Its
    ``initial_state()`` is the file's ``initial_state(p)`` at these values, if the file defines one."""
    definition, _ = read_model_file(path)
    return get_system(definition.name, "initial" if "initial" in definition.presets else None, **params)


def prepare(spec: Spec, overwrite: bool = False) -> tuple[Plan, bool]:
    """Validate everything that can be checked before touching the store; returns the plan and
    whether the store must be (re)created.  Raises InvalidInput naming the field."""
    kernel_cache_directory()  # a kernel cache another user could write is refused before anything loads from it
    plan = Plan(spec)
    try:
        plan.validate()
    except InvalidInput as error:  # the kernels name a parameter by itself; the spec knows where it is
        if error.field.split(".")[0] in {p.name for p in system_definition(spec.system).parameters}:
            raise InvalidInput(f"system.params.{error.field}", error.message) from None
        raise
    try:
        identity = existing_identity(spec.store)
        if identity is None:
            check_writable(spec.store)
    except StoreError as error:
        raise InvalidInput("output.store", str(error)) from None
    if identity is not None and identity != spec.identity() and not overwrite:
        if spec.model is not None and json.loads(identity).get("model_source") != spec.model_source:
            raise InvalidInput("system.model", f"{spec.model} changed since {spec.store!r} was written (the model is "
                               "part of the spec); use --overwrite (overwrite=True) to replace the run, or choose "
                               "another store")
        raise InvalidInput("output.store", f"{spec.store!r} holds a run of a different spec; use --overwrite "
                           "(overwrite=True) to replace it, or choose another store")
    return plan, identity is None or overwrite


def require_device(spec: Spec, forks: bool = True) -> list[str] | None:
    """Refuse, before anything is written, a run whose ``[execution] device`` this machine lacks (a spec is checked
    and submitted anywhere; it runs where its device is).  Returns, for device 'cuda', the devices its local workers
    take (:func:`.devices.cuda_devices`, asked of a child process: this one, which ``forks`` workers, must not start
    the CUDA driver), or [] where the workers are elsewhere (a scheduler's, SLURM's: one of them checks its own);
    None for the CPU.  Without ``forks`` (a SLURM array task, which steps its chunks itself) the check runs here."""
    if spec.device != "cuda":
        return None
    if forks:
        from .devices import cuda_devices  # here: it imports Dask

        return cuda_devices(spec.cluster.get("gpus")) if spec.cluster["kind"] == "local" else []
    from armillary.kernels import device_missing  # here: importing it loads the kernels' Numba

    missing = device_missing(spec.device)
    if missing is not None:
        raise InvalidInput("execution.device", missing)
    return []


def note_revision_change(plan: Plan, stream) -> None:
    """Say so when a resumed store was written by another revision of its system's numerics."""
    note = revision_change(plan)
    if note:
        print(note, file=stream)


def run(spec_or_path, overwrite: bool = False, stream=None, **overrides) -> xr.Dataset:
    """Run (or resume) the spec and return its store, lazily opened with xarray.

    ``spec_or_path``: a :class:`Spec` or a path to a TOML spec; ``overrides``: store, members,
    workers, scheduler (as the CLI's options).  Finished segments are skipped; the result is bitwise
    identical to an uninterrupted run.  Raises InvalidInput for bad input (nothing is written) and
    RunFailed when a task fails.
    """
    from .accessor import open_store

    return open_store(run_to_store(spec_or_path, overwrite, stream, **overrides))


def run_to_store(spec_or_path, overwrite: bool = False, stream=None, **overrides) -> str:
    """:func:`run` without opening the store: returns its path.  What ``armillary run`` calls: it opens no
    Dataset, so a resumed run imports neither xarray's store reader nor dask.array (a fresh one imports them to
    write its template)."""
    from .execute import execute

    stream = stream or sys.stdout
    if isinstance(spec_or_path, Spec) and any(value is not None for value in overrides.values()):
        raise InvalidInput(next(iter(overrides)), "overrides apply to a spec file; for a Spec use "
                           "load_spec(path, **overrides) or dataclasses.replace")
    spec = spec_or_path if isinstance(spec_or_path, Spec) else load_spec(spec_or_path, **overrides)
    if (spec.ranks or 1) > 1:
        require_mpi("execution.ranks")
    if launched_ranks() > 1:  # under mpiexec or srun: one member over the ranks
        return _run_on_ranks(spec, overwrite, stream)
    plan, create = prepare(spec, overwrite)
    gpus = require_device(spec)
    if plan.pair_cost is not None:
        print(plan.pair_cost, file=stream)
    try:
        with run_lock(spec.store):
            if create:
                remove_store(spec.store)
                write_template(plan)
            else:
                note_revision_change(plan, stream)
            execute(plan, stream, gpus)
    except StoreError as error:
        raise InvalidInput("output.store", str(error)) from None
    return spec.store


def _run_on_ranks(spec: Spec, overwrite: bool, stream) -> str:
    """:func:`run_to_store` under ``mpiexec -n R`` or ``srun``: rank 0 checks the spec, holds the store's lock,
    writes its template (or notes a revision change) and the member's initial state
    (:func:`.segment.write_initial_state`); then every rank runs the pending segments of the one member
    together (:func:`.mpi.execute_on_ranks`).  Bad input raises InvalidInput on every rank, any other failure of rank
    0's preparation (a full disk) RunFailed on the others (rank 0 raises its own): none is left waiting for it."""
    from .segment import write_initial_state

    exchange = MpiExchange(world())
    lead = exchange.rank == 0
    with contextlib.ExitStack() as held:
        refused = failed = None
        if lead:
            try:
                plan, create = prepare(spec, overwrite)
                check_on_ranks(plan, exchange.size)
                held.enter_context(run_lock(spec.store))
                if create:
                    remove_store(spec.store)
                    write_template(plan)
                else:
                    note_revision_change(plan, stream)
                write_initial_state(plan)
            except InvalidInput as error:
                refused = (error.field, error.message)
            except StoreError as error:
                refused = ("output.store", str(error))
            except Exception as error:
                failed = error
        refused, why = exchange.comm.bcast((refused, None if failed is None else str(failed)), root=0)
        if refused is not None:
            raise InvalidInput(*refused)
        if failed is not None:
            raise failed
        if why is not None:
            raise RunFailed(f"rank 0 could not prepare the store: {why}")
        execute_on_ranks(plan if lead else Plan(spec), exchange, stream if lead else open(os.devnull, "w"))
    return spec.store


def run_array_task(spec: Spec, index: int, size: int, stream=None) -> bool:
    """One SLURM array task: the chunks c with c mod size = index, into the store ``armillary submit``
    created (tasks share the store, each writing only its own chunks).  Returns False when stopped
    by a signal with work left (the task is then requeued and resumes), True when its work is done."""
    from .execute import execute_array_task

    for name, value in (("array-index", index), ("array-size", size)):
        if value is None or value < 0 or (name == "array-size" and value < 1):
            raise InvalidInput(name, f"must be given with the other and be >= {int(name == 'array-size')}, got {value!r}")
    if index >= size:
        raise InvalidInput("array-index", f"must be < array-size = {size}, got {index}")
    kernel_cache_directory()
    plan = Plan(spec)
    try:
        identity = existing_identity(spec.store)
    except StoreError as error:
        raise InvalidInput("output.store", str(error)) from None
    if identity is None:
        raise InvalidInput("output.store", f"{spec.store!r} has no run template; array tasks run into a store that "
                           "`armillary submit` wrote")
    if identity != spec.identity():
        raise InvalidInput("output.store", f"{spec.store!r} holds a run of a different spec")
    require_device(spec, forks=False)
    stream = stream or sys.stdout
    note_revision_change(plan, stream)
    return execute_array_task(plan, index, size, stream)
