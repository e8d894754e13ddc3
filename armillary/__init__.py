"""Armillary: large ensembles of structure-preserving simulations of mechanical systems.

The everyday calls live here; the layers are :mod:`armillary.kernels` (numerics),
:mod:`armillary.ensemble` (planning, Dask execution, the Zarr store, analysis) and
:mod:`armillary.jobs` (the CLI and SLURM submission).  Model files import their helpers from
:mod:`armillary.model`.  A store opened with xarray (``xarray.open_zarr`` or :func:`open_store`) carries
the analysis as ``ds.armillary`` (``energy_drift()``, ``drift_table()``, ``lyapunov_map()``, ``summary()``, …;
:mod:`armillary.ensemble.accessor`).
"""

import armillary.jobs.clusters  # noqa: F401 (registers [cluster] kind = "slurm" for load_spec and run)
from armillary.ensemble import load_model, load_spec, run
from armillary.ensemble.analysis import chaos_table, energy_drift, lyapunov_map, open_store, store_summary
from armillary.kernels import InvalidInput, Trajectory, get_system, integrate

__all__ = ["get_system", "load_model", "integrate", "run", "load_spec", "open_store", "store_summary", "energy_drift",
           "lyapunov_map", "chaos_table", "InvalidInput", "Trajectory"]
