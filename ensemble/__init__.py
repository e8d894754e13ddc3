"""Ensemble planning, Dask execution, Zarr stores and xarray analysis (no physics here)."""
