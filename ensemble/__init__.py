"""Ensembles: planning, per-member seeding and initial conditions, Dask execution, the Zarr store.
No physics here.  The way in: :func:`run` (and :func:`load_spec`)."""

from __future__ import annotations

import sys

import xarray as xr

from jobs.spec import Spec, load_spec, parse_spec
from kernels import InvalidInput

from .execute import RunFailed, execute
from .plan import Plan
from .store import StoreError, check_writable, existing_identity, remove_store, run_lock, write_template

__all__ = ["run", "load_spec", "parse_spec", "Spec", "Plan", "RunFailed", "prepare"]


def prepare(spec: Spec, overwrite: bool = False) -> tuple[Plan, bool]:
    """Validate everything that can be checked before touching the store; returns the plan and
    whether the store must be (re)created.  Raises InvalidInput naming the field."""
    plan = Plan(spec)
    plan.validate()
    try:
        identity = existing_identity(spec.store)
        if identity is None:
            check_writable(spec.store)
    except StoreError as error:
        raise InvalidInput("output.store", str(error)) from None
    if identity is not None and identity != spec.identity() and not overwrite:
        raise InvalidInput("output.store", f"{spec.store!r} holds a run of a different spec; use --overwrite "
                           "(overwrite=True) to replace it, or choose another store")
    return plan, identity is None or overwrite


def run(spec_or_path, overwrite: bool = False, stream=sys.stdout, **overrides) -> xr.Dataset:
    """Run (or resume) the spec and return its store, lazily opened with xarray.

    ``spec_or_path``: a :class:`Spec` or a path to a TOML spec; ``overrides``: store, members,
    workers, scheduler (as the CLI's options).  Finished segments are skipped; the result is bitwise
    identical to an uninterrupted run.  Raises InvalidInput for bad input (nothing is written) and
    RunFailed when a task fails.
    """
    spec = spec_or_path if isinstance(spec_or_path, Spec) else load_spec(spec_or_path, **overrides)
    plan, create = prepare(spec, overwrite)
    try:
        with run_lock(spec.store):
            if create:
                remove_store(spec.store)
                write_template(plan)
            execute(plan, stream)
    except StoreError as error:
        raise InvalidInput("output.store", str(error)) from None
    return xr.open_zarr(spec.store)
