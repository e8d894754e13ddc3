"""Armillary: large ensembles of structure-preserving simulations of mechanical systems.

The everyday calls live here; the layers are :mod:`armillary.kernels` (numerics),
:mod:`armillary.ensemble` (planning, Dask execution, the Zarr store, analysis) and
:mod:`armillary.jobs` (the CLI and SLURM submission).  Model files import their helpers from
:mod:`armillary.model`.  A store opened by armillary (:func:`open_store`, :func:`run`), or with
``xarray.open_zarr`` once one of those was used or ``armillary.ensemble.accessor`` imported, carries the analysis
as ``ds.armillary`` (``energy_drift()``, ``drift_table()``, ``lyapunov_map()``, ``summary()``, …;
:mod:`armillary.ensemble.accessor`).  The calls are imported on first use, so that the ``armillary`` command,
which imports this package first, starts without Numba, Dask or xarray.
"""

import armillary.jobs.clusters  # noqa: F401 (registers [cluster] kind = "slurm" for load_spec and run)
from armillary.kernels.exports import lazy_exports

__getattr__ = lazy_exports(__name__, {
    "get_system": "armillary.kernels", "integrate": "armillary.kernels", "InvalidInput": "armillary.kernels",
    "Trajectory": "armillary.kernels", "load_model": "armillary.ensemble.runs", "run": "armillary.ensemble.runs",
    "load_spec": "armillary.ensemble.spec", "open_store": "armillary.ensemble.accessor",
    "store_summary": "armillary.ensemble.analysis", "energy_drift": "armillary.ensemble.analysis",
    "lyapunov_map": "armillary.ensemble.analysis", "chaos_table": "armillary.ensemble.analysis"})

__all__ = ["get_system", "load_model", "integrate", "run", "load_spec", "open_store", "store_summary", "energy_drift",
           "lyapunov_map", "chaos_table", "InvalidInput", "Trajectory"]
