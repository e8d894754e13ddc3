"""Armillary: large ensembles of structure-preserving simulations of mechanical systems.

The everyday calls live here; the layers are :mod:`armillary.kernels` (numerics),
:mod:`armillary.ensemble` (planning, Dask execution, the Zarr store, analysis) and
:mod:`armillary.jobs` (the CLI and SLURM submission).  Model files import their helpers from
:mod:`armillary.model`.  A store opened by armillary (:func:`open_store`, :func:`run`), or with
``xarray.open_zarr``, carries the analysis as ``ds.armillary`` (``energy_drift()``, ``drift_table()``,
``lyapunov_map()``, ``summary()``, …; :mod:`armillary.ensemble.accessor`).  The calls are imported on first use,
and the accessor is registered when xarray is imported, so that the ``armillary`` command, which imports this
package first, starts without Numba, Dask or xarray.
"""

import importlib
import importlib.abc
import importlib.util
import sys

import armillary.jobs.clusters  # noqa: F401 (registers [cluster] kind = "slurm" for load_spec and run)
from armillary.kernels.exports import lazy_exports


class _AccessorAfterXarray(importlib.abc.MetaPathFinder):
    """Registers ``ds.armillary`` right after xarray is imported, by whoever imports it: ``import armillary``
    keeps giving every Dataset the accessor without importing xarray itself (0.5 s the CLI need not pay)."""

    def find_spec(self, name, path=None, target=None):
        if name != "xarray":
            return None
        sys.meta_path.remove(self)  # once, and not for the lookup below
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.loader is not None:
            execute = spec.loader.exec_module

            def execute_then_register(module):
                execute(module)
                importlib.import_module("armillary.ensemble.accessor")

            spec.loader.exec_module = execute_then_register  # this spec's own loader: only this import
        return spec


if "xarray" in sys.modules:
    importlib.import_module("armillary.ensemble.accessor")
else:
    sys.meta_path.insert(0, _AccessorAfterXarray())

__getattr__ = lazy_exports(__name__, {
    "get_system": "armillary.kernels", "integrate": "armillary.kernels", "InvalidInput": "armillary.kernels",
    "Trajectory": "armillary.kernels", "Section": "armillary.kernels.sections", "load_model": "armillary.ensemble.runs", "run": "armillary.ensemble.runs",
    "load_spec": "armillary.ensemble.spec", "open_store": "armillary.ensemble.accessor",
    "store_summary": "armillary.ensemble.analysis", "energy_drift": "armillary.ensemble.analysis",
    "lyapunov_map": "armillary.ensemble.analysis", "chaos_table": "armillary.ensemble.analysis"})

__all__ = ["get_system", "load_model", "integrate", "run", "load_spec", "open_store", "store_summary", "energy_drift",
           "lyapunov_map", "chaos_table", "InvalidInput", "Trajectory", "Section"]
