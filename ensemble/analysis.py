"""Statistics straight from stores (xarray, dask-backed: reductions stream over chunks, nothing
loads a whole store into memory).

Energy errors are strongly autocorrelated (bounded oscillations with the system's periods), so the
standard errors of every least-squares slope here are Newey–West heteroskedasticity-and-
autocorrelation-consistent (HAC) estimates with the Bartlett kernel and the plug-in lag
L = ⌊4 (T/100)^{2/9}⌋ of Newey & West (1994) for T samples.
"""

from __future__ import annotations

import numpy as np
import xarray as xr

#: below this |E0| (J) the error is reported absolute, not relative
ABSOLUTE_BELOW = 1e-12
QUANTILES = (0.05, 0.5, 0.95)
#: bytes of one member-by-time block the quantile reduction works on at a time
QUANTILE_BLOCK_BYTES = 64 * 2 ** 20


def relative_energy_error(ds: xr.Dataset) -> xr.DataArray:
    """ΔE(t)/|E0| = (E(t) − E(0)) / |E(0)| per member (lazy); absolute (J) for members with
    |E0| < 1e-12, whose count is in ``attrs["absolute_members"]``."""
    initial = ds.energy.isel(time=0).compute()
    scale = abs(initial).where(abs(initial) >= ABSOLUTE_BELOW, 1.0)
    error = (ds.energy - initial) / scale
    absolute = int((abs(initial) < ABSOLUTE_BELOW).sum())
    error.attrs = {"long_name": "relative energy error dE/|E0|", "units": "1", "absolute_members": absolute}
    return error


def newey_west_slope(y: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Least-squares slope of each row of ``y`` (…, T) against ``x`` (T,) and its Newey–West HAC
    standard error (Bartlett kernel, lag ⌊4 (T/100)^{2/9}⌋).  NaN rows give NaN."""
    x = np.asarray(x, dtype=np.float64)
    centred = x - x.mean()
    sxx = np.sum(centred * centred)
    slope = np.sum(y * centred, axis=-1) / sxx
    intercept = y.mean(axis=-1) - slope * x.mean()
    score = (y - intercept[..., np.newaxis] - slope[..., np.newaxis] * x) * centred
    lag = int(4 * (x.size / 100) ** (2 / 9))
    long_run = np.sum(score * score, axis=-1)
    for k in range(1, min(lag, x.size - 1) + 1):
        long_run += 2 * (1 - k / (lag + 1)) * np.sum(score[..., k:] * score[..., :-k], axis=-1)
    return slope, np.sqrt(np.maximum(long_run, 0.0)) / sxx


def drift_rate(error: xr.DataArray) -> xr.Dataset:
    """Per member: the secular drift rate (slope of the error against t, units of the error per s)
    and its Newey–West standard error (lazy, one task per member chunk)."""
    slope, stderr = xr.apply_ufunc(
        newey_west_slope, error.chunk(time=-1), error.time,
        input_core_dims=[["time"], ["time"]], output_core_dims=[[], []],
        dask="parallelized", output_dtypes=[np.float64, np.float64])
    unit = error.attrs.get("units", "1")
    return xr.Dataset({
        "drift_rate": slope.assign_attrs(units=f"{unit}/s", long_name="least-squares slope of the error against time"),
        "drift_stderr": stderr.assign_attrs(units=f"{unit}/s", long_name="Newey-West HAC standard error of the slope"),
    })


def member_statistics(error: xr.DataArray) -> xr.Dataset:
    """Per member: max |·|, mean |·|, RMS and final value of an error over time (lazy)."""
    size = abs(error)
    return xr.Dataset({"max": size.max("time"), "mean_abs": size.mean("time"),
                       "rms": np.sqrt((error ** 2).mean("time")), "final": error.isel(time=-1)})


def quantile_envelope(error: xr.DataArray, quantiles=QUANTILES) -> xr.DataArray:
    """Quantiles of |error| over members at each time, (quantile, time).  Members are gathered per
    block of a few time samples, so memory stays near QUANTILE_BLOCK_BYTES whatever the ensemble size."""
    block = max(1, QUANTILE_BLOCK_BYTES // (8 * error.sizes["member"]))
    return abs(error).chunk(member=-1, time=block).quantile(list(quantiles), dim="member").compute()


def growth_law(error: xr.DataArray) -> dict:
    """Fit of the ensemble RMS of the error as ∝ t^α over the second half of the run: α with its
    Newey–West standard error and 95 % interval (α ≈ 0 bounded, ≈ ½ random walk, ≈ 1 drift)."""
    rms = np.sqrt((error ** 2).mean("member")).compute()
    half = rms.time.values >= rms.time.values[-1] / 2
    half &= (rms.time.values > 0) & (rms.values > 0) & np.isfinite(rms.values)
    if half.sum() < 3:
        return {"alpha": np.nan, "alpha_stderr": np.nan, "alpha_low": np.nan, "alpha_high": np.nan, "rms": rms}
    alpha, stderr = newey_west_slope(np.log(rms.values[half]), np.log(rms.time.values[half]))
    alpha, stderr = float(alpha), float(stderr)
    return {"alpha": alpha, "alpha_stderr": stderr, "alpha_low": alpha - 1.96 * stderr,
            "alpha_high": alpha + 1.96 * stderr, "rms": rms}


def energy_drift(ds: xr.Dataset) -> xr.Dataset:
    """Per-member energy statistics: max, mean |·|, RMS and final ΔE/|E0|, drift rate (1/s) with its
    Newey–West standard error, and whether the drift is significant at 3σ (lazy)."""
    error = relative_energy_error(ds)
    stats = member_statistics(error).merge(drift_rate(error))
    stats["significant_drift"] = abs(stats.drift_rate) > 3 * stats.drift_stderr
    stats.attrs["absolute_members"] = error.attrs["absolute_members"]
    return stats


def store_summary(ds: xr.Dataset) -> dict:
    """The headline numbers of one store: energy error (member statistics, drift, growth law),
    unit-length and tangency errors, failures.  Values are plain floats."""
    error = relative_energy_error(ds)
    stats = energy_drift(ds).compute()
    law = growth_law(error)
    ok = np.isfinite(stats.drift_rate.values)
    return {
        "method": ds.attrs["method"], "system": ds.attrs["system"], "members": ds.sizes["member"],
        "dt": float(ds.attrs["dt"]), "t_end": float(ds.time.values[-1]),
        "absolute_members": stats.attrs["absolute_members"],
        "median_max_energy_error": float(np.nanmedian(stats["max"].values)),
        "max_energy_error": float(np.nanmax(stats["max"].values)),
        "mean_energy_error": float(np.nanmean(stats["mean_abs"].values)),
        "median_drift_rate": float(np.nanmedian(stats.drift_rate.values)),
        "significant_drift_fraction": float(stats.significant_drift.values[ok].mean()) if ok.any() else np.nan,
        "alpha": law["alpha"], "alpha_low": law["alpha_low"], "alpha_high": law["alpha_high"],
        "max_unit_error": float(ds.unit_error.max().compute()),
        "max_tangency_error": float(ds.tangency_error.max().compute()),
        "failed_members": int(np.count_nonzero(ds.status.values)),
    }
