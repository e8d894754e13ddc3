"""Ensembles: the spec, planning, per-member seeding and initial states, Dask execution, the Zarr store,
analysis.  No physics here: what a state is comes from the kernels' declarations.  The way in: :func:`run` (and :func:`load_spec`).
The names below are imported on first use: reading a spec or a store needs neither Dask nor xarray."""

from armillary.kernels.exports import lazy_exports

__getattr__ = lazy_exports(__name__, {
    "run": ".runs", "load_model": ".runs", "run_array_task": ".runs", "prepare": ".runs", "load_spec": ".spec",
    "parse_spec": ".spec", "Spec": ".spec", "Plan": ".plan", "RunFailed": ".errors"})

__all__ = ["run", "load_model", "run_array_task", "load_spec", "parse_spec", "Spec", "Plan", "RunFailed", "prepare"]
