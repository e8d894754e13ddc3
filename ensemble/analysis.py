"""Statistics straight from stores (xarray, dask-backed: reductions stream over chunks, nothing
loads a whole store)."""

from __future__ import annotations

import numpy as np
import xarray as xr


def relative_energy_error(ds: xr.Dataset) -> xr.DataArray:
    """ΔE(t)/|E0| = (E(t) − E(0)) / |E(0)| per member (dimensionless; lazy)."""
    initial = ds.energy.isel(time=0)
    return (ds.energy - initial) / abs(initial)


def energy_error_summary(ds: xr.Dataset) -> dict:
    """The headline numbers of one store: mean and max |ΔE|/|E0| over members and time, mean
    unit-length error, failed members."""
    error = abs(relative_energy_error(ds))
    mean, largest, unit = xr.broadcast(error.mean(), error.max(), ds.unit_error.mean())
    values = {name: float(v.compute()) for name, v in
              (("mean_relative_energy_error", mean), ("max_relative_energy_error", largest),
               ("mean_unit_error", unit))}
    values["failed_members"] = int(np.count_nonzero(ds.status.values))
    return {"method": ds.attrs["method"], "members": ds.sizes["member"], **values}
