"""Statistics straight from stores (xarray, dask-backed: reductions stream over chunks, nothing
loads a whole store into memory).

Energy errors are strongly autocorrelated (bounded oscillations with the system's periods), so the
standard error of each member's drift rate is a Newey–West heteroskedasticity-and-autocorrelation-
consistent (HAC) estimate with the Bartlett kernel and the plug-in lag L = ⌊4 (T/100)^{2/9}⌋ of
Newey & West (1994) for T samples.  The growth exponent's interval comes from batch means over
members (see :func:`growth_law`).

Drift is fitted over a window after a burn-in (by default the first half of the run, as the growth
law): a variational integrator's error starts at exactly 0 and settles within a few periods onto a
bounded oscillation about a nonzero offset, and a line through that rise would read it as drift.
The offset (the mean error over the window) is reported beside the rate, since an offset is not a drift.
"""

from __future__ import annotations

import re

import dask.array as da
import numpy as np
import xarray as xr

from armillary.kernels.errors import InvalidInput
from armillary.kernels.status import NOT_FAILED

from .particles import angular_radii
from .spec_keys import STATISTICS, section_prefix

#: below this |E0| (J) the error is reported absolute, not relative
ABSOLUTE_BELOW = 1e-12
QUANTILES = (0.05, 0.5, 0.95)
#: member groups of the batch-means interval of the growth exponent, and Student's t quantile for them
GROWTH_BATCHES = 20
T_975 = {20: 2.093}
#: bytes of one member-by-time block the quantile reduction works on at a time
QUANTILE_BLOCK_BYTES = 64 * 2 ** 20
#: a regular orbit's separation grows like a power of t, d ∝ t^p, so its finite-time exponent is
#: about p ln(t)/t; a member counts as chaotic when λ exceeds CHAOS_THRESHOLD_FACTOR / t_end
#: (0.01 1/s over 1000 s), which p ln(t) stays below for p up to about 1.4 at t = 1000 s
CHAOS_THRESHOLD_FACTOR = 10.0


def relative_energy_error(ds: xr.Dataset) -> xr.DataArray:
    """ΔE(t)/|E0| = (E(t) − E(0)) / |E(0)| per member (lazy); absolute (J) for members with
    |E0| < 1e-12, whose count is in ``attrs["absolute_members"]``.  In a forced run's store (one with
    ``work``) the energy balance error (E(t) − E(0) − W(t)) / |E(0)|, and in a Langevin run's (one with ``heat``)
    (E(t) − E(0) − Q(t)) / |E(0)|: what the forces did and what the bath gave are not errors of the integrator."""
    initial = ds.energy.isel(time=0).compute()
    scale = abs(initial).where(abs(initial) >= ABSOLUTE_BELOW, 1.0)
    exchanged = [name for name in ("work", "heat") if name in ds]
    change = ds.energy - initial - sum((ds[name] for name in exchanged), 0.0)
    error = change / scale
    absolute = int((abs(initial) < ABSOLUTE_BELOW).sum())
    symbols = "".join(" - " + {"work": "W", "heat": "Q"}[name] for name in exchanged)
    name = f"energy balance error (dE{symbols})/|E0|" if exchanged else "relative energy error dE/|E0|"
    error.attrs = {"long_name": name, "units": "1", "absolute_members": absolute}
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


def drift_window(time: np.ndarray, burn_in: float | None = None) -> tuple[float, float]:
    """The (start, end) times (s) of the drift fit: after ``burn_in`` seconds, by default half the run.
    A burn-in that leaves fewer than 3 samples is refused (:class:`InvalidInput` naming ``burn_in``)."""
    end = float(time[-1])
    start = end / 2 if burn_in is None else float(burn_in)
    if not (np.isfinite(start) and start >= 0):
        raise InvalidInput("burn_in", f"must be a time >= 0 (s), got {burn_in!r}")
    if np.count_nonzero(time >= start) < 3:
        raise InvalidInput("burn_in", f"{start:g} s leaves fewer than 3 samples of a run that ends at t = {end:g} s")
    return start, end


def drift_rate(error: xr.DataArray, burn_in: float | None = None) -> xr.Dataset:
    """Per member, over the window after ``burn_in`` (s; default half the run, see :func:`drift_window`):
    the secular drift rate (slope of the error against t, units of the error per s), its Newey–West
    standard error, and the offset (the mean error over the window).  Lazy, one task per member chunk;
    the window is in the attributes ``window_start`` and ``window_end`` (s)."""
    start, end = drift_window(error.time.values, burn_in)
    window = error.sel(time=slice(start, None))
    slope, stderr = xr.apply_ufunc(
        newey_west_slope, window.chunk(time=-1), window.time,
        input_core_dims=[["time"], ["time"]], output_core_dims=[[], []],
        dask="parallelized", output_dtypes=[np.float64, np.float64])
    unit = error.attrs.get("units", "1")
    return xr.Dataset({
        "drift_rate": slope.assign_attrs(units=f"{unit}/s", long_name="least-squares slope of the error against time"),
        "drift_stderr": stderr.assign_attrs(units=f"{unit}/s", long_name="Newey-West HAC standard error of the slope"),
        "offset": window.mean("time").assign_attrs(units=unit, long_name="mean error over the drift window"),
    }, attrs={"window_start": start, "window_end": end})


def member_statistics(error: xr.DataArray) -> xr.Dataset:
    """Per member: max |·|, mean |·|, RMS and final value of an error over time (lazy)."""
    size = abs(error)
    return xr.Dataset({"max": size.max("time"), "mean_abs": size.mean("time"),
                       "rms": np.sqrt((error ** 2).mean("time")), "final": error.isel(time=-1)})


def quantile_envelope(error: xr.DataArray, quantiles=QUANTILES, magnitude: bool = True) -> xr.DataArray:
    """Quantiles of |error| (of the signed values when ``magnitude`` is False) over members at each
    time, (quantile, time).  Members are gathered per block of a few time samples, so memory stays
    near QUANTILE_BLOCK_BYTES whatever the ensemble size."""
    block = max(1, QUANTILE_BLOCK_BYTES // (8 * error.sizes["member"]))
    values = abs(error) if magnitude else error
    return values.chunk(member=-1, time=block).quantile(list(quantiles), dim="member").compute()


def _log_log_slope(rms: np.ndarray, time: np.ndarray) -> float:
    """Least-squares slope of log rms against log t over the second half of the run (t > 0)."""
    keep = (time >= time[-1] / 2) & (time > 0) & (rms > 0) & np.isfinite(rms)
    if keep.sum() < 3:
        return np.nan
    return float(np.polyfit(np.log(time[keep]), np.log(rms[keep]), 1)[0])


def growth_law(error: xr.DataArray, batches: int = GROWTH_BATCHES) -> dict:
    """Fit of the ensemble RMS of the error as ∝ t^α over the second half of the run: α with a 95 %
    interval (α ≈ 0 bounded, ≈ ½ random walk, ≈ 1 drift).

    The uncertainty of α comes from which members happen to be in the ensemble, so it is estimated
    by batch means: members are split into ``batches`` groups (member index mod batches), α is fitted
    to each group's RMS, and the interval is α ± t₀.₉₇₅ · std(α_k)/√batches.  Ensembles smaller than
    2·batches give α without an interval."""
    squared = error ** 2
    rms = np.sqrt(squared.mean("member")).compute()
    time = rms.time.values
    alpha = _log_log_slope(rms.values, time)
    members = error.sizes["member"]
    stderr = np.nan
    if members >= 2 * batches and np.isfinite(alpha):
        group = xr.DataArray(np.arange(members) % batches, dims="member", name="batch")
        group_rms = np.sqrt(squared.groupby(group).mean("member")).compute().transpose("batch", "time").values
        slopes = np.array([_log_log_slope(row, time) for row in group_rms])
        stderr = float(np.nanstd(slopes, ddof=1) / np.sqrt(np.isfinite(slopes).sum()))
    half_width = T_975[batches] * stderr
    return {"alpha": alpha, "alpha_stderr": stderr, "alpha_low": alpha - half_width,
            "alpha_high": alpha + half_width, "rms": rms}


def _drift_statistics(error: xr.DataArray, burn_in: float | None = None) -> xr.Dataset:
    drift = drift_rate(error, burn_in)
    stats = member_statistics(error).merge(drift, compat="override")
    stats["significant_drift"] = abs(stats.drift_rate) > 3 * stats.drift_stderr
    stats.attrs.update(drift.attrs, absolute_members=error.attrs["absolute_members"])
    return stats


def energy_drift(ds: xr.Dataset, burn_in: float | None = None) -> xr.Dataset:
    """Per-member energy statistics: max, mean |·|, RMS and final ΔE/|E0| over the whole run; drift
    rate (1/s) with its Newey–West standard error, whether it is significant at 3σ, and the offset,
    over the window after ``burn_in`` (s; default half the run) given in the attributes (lazy)."""
    return _drift_statistics(relative_energy_error(ds), burn_in)


def analyse_store(ds: xr.Dataset, burn_in: float | None = None) -> dict:
    """Everything the report needs from one store, each computed once: the relative energy error
    (lazy), its per-member statistics (computed; drift after ``burn_in`` s, default half the run),
    growth law, momentum-map error (lazy, or None), and ``summary``, the headline numbers as plain floats."""
    error = relative_energy_error(ds)
    stats = _drift_statistics(error, burn_in).compute()
    law = growth_law(error)
    momentum = momentum_error(ds)
    ok = np.isfinite(stats.drift_rate.values)
    summary = {
        "method": ds.attrs["method"], "system": ds.attrs["system"], "members": ds.sizes["member"],
        "dt": float(ds.attrs["dt"]), "t_end": float(ds.time.values[-1]),
        "absolute_members": stats.attrs["absolute_members"],
        "median_max_energy_error": float(np.nanmedian(stats["max"].values)),
        "max_energy_error": float(np.nanmax(stats["max"].values)),
        "mean_energy_error": float(np.nanmean(stats["mean_abs"].values)),
        "median_drift_rate": float(np.nanmedian(stats.drift_rate.values)),
        "median_offset": float(np.nanmedian(stats.offset.values)),
        "drift_window_start": stats.attrs["window_start"], "drift_window_end": stats.attrs["window_end"],
        "significant_drift_fraction": float(stats.significant_drift.values[ok].mean()) if ok.any() else np.nan,
        "alpha": law["alpha"], "alpha_low": law["alpha_low"], "alpha_high": law["alpha_high"],
        "constraint_diagnostic": headline_diagnostic(ds),
        **{f"max_{name}": float(ds[name].max().compute()) if name in ds else np.nan for name in diagnostic_names(ds)},
        "failed_members": int(np.count_nonzero(~np.isin(ds.status.values, NOT_FAILED))),
        "max_momentum_error": float(momentum.max().compute()) if momentum is not None else np.nan,
    }
    summary.update(lyapunov_summary(ds))
    return {"error": error, "stats": stats, "growth_law": law, "momentum": momentum, "summary": summary}


def store_space(ds: xr.Dataset):
    """The state space of a store's system (stores written before spaces were declared are (S²)ⁿ)."""
    from armillary.kernels import SPACES, SYSTEMS

    name, system = ds.attrs.get("space"), ds.attrs.get("system")
    if name in SPACES:
        return SPACES[name]
    return SYSTEMS[system].space if system in SYSTEMS else SPACES["sphere_product"]


def diagnostic_names(ds: xr.Dataset) -> list[str]:
    """The constraint diagnostics of the store's space, in declaration order."""
    return [d.name for d in store_space(ds).diagnostics]


def headline_diagnostic(ds: xr.Dataset) -> str | None:
    """The store's headline constraint diagnostic: the first its space declares that the store holds with a
    value other than 0 (a space's diagnostic a system has no use for reads 0, as quaternion_error of a tree
    without quaternions), else the first declared; None on a space without diagnostics."""
    names = diagnostic_names(ds)
    for name in names:
        if name in ds and float(np.abs(ds[name]).max().compute()) > 0:
            return name
    return names[0] if names else None


def state_of(ds: xr.Dataset) -> dict | None:
    """The store's state variables by name (lazy), or None when the store did not keep all of them."""
    names = store_space(ds).names
    return {name: ds[name] for name in names} if all(name in ds for name in names) else None


def chaos_threshold(ds: xr.Dataset) -> float:
    """λ (1/s) above which a member counts as chaotic: CHAOS_THRESHOLD_FACTOR / t_end."""
    return CHAOS_THRESHOLD_FACTOR / float(ds.time.values[-1])


def lyapunov_summary(ds: xr.Dataset, threshold: float | None = None) -> dict:
    """Median, 5 % and 95 % quantiles of the members' finite-time maximal Lyapunov exponent (1/s), the
    chaotic fraction (λ > ``threshold``, default :func:`chaos_threshold`) among members with a finite
    λ, and the threshold; NaN for stores without ``[analysis] lyapunov``."""
    keys = ("median_lyapunov", "lyapunov_05", "lyapunov_95", "chaotic_fraction", "chaos_threshold")
    if "lyapunov" not in ds:
        return dict.fromkeys(keys, np.nan)
    threshold = chaos_threshold(ds) if threshold is None else threshold
    values = ds.lyapunov.values
    values = values[np.isfinite(values)]
    if values.size == 0:
        return dict.fromkeys(keys[:-1], np.nan) | {"chaos_threshold": threshold}
    low, median, high = np.quantile(values, QUANTILES)
    return dict(zip(keys, (float(median), float(low), float(high), float(np.mean(values > threshold)), threshold)))


def sweep_coordinates(ds: xr.Dataset) -> list[str]:
    """Names of what varies over the members' grid: the coordinates on ``member`` other than ``member``
    itself (swept parameters, and e.g. the ``headings`` sampler's directions)."""
    return [name for name, coord in ds.coords.items() if coord.dims == ("member",) and name != "member"]


def lyapunov_map(ds: xr.Dataset) -> xr.Dataset:
    """Median λ (1/s) and chaotic fraction at each point of the sweep grid: variables
    ``median_lyapunov`` and ``chaotic_fraction`` with one dimension per swept parameter (and per coordinate
    an initial-condition sampler varies over members)."""
    sweeps = sweep_coordinates(ds)
    if "lyapunov" not in ds or not sweeps:
        raise ValueError("a λ map needs a store with [analysis] lyapunov and at least one swept parameter")
    threshold = chaos_threshold(ds)
    frame = ds[["lyapunov"]].reset_coords(sweeps).to_dataframe()
    grouped = frame.groupby(sweeps)["lyapunov"]
    table = grouped.median().to_frame("median_lyapunov")
    table["chaotic_fraction"] = grouped.apply(lambda v: float(np.mean(v.dropna() > threshold)))
    result = table.to_xarray()
    result.median_lyapunov.attrs.update(units="1/s", long_name="median finite-time maximal Lyapunov exponent")
    result.chaotic_fraction.attrs.update(units="1", long_name=f"fraction of members with λ > {threshold:.3g} 1/s")
    return result


def escape_map(ds: xr.Dataset) -> xr.Dataset:
    """Escape times over the sweep grid (``[analysis] escape``): ``median_escape_time`` (s; over the members that
    escaped, NaN where none did) and ``escaped_fraction`` (1), one dimension per swept coordinate."""
    sweeps = sweep_coordinates(ds)
    if "escape_time" not in ds or not sweeps:
        raise InvalidInput("dataset", "an escape-time map needs a store with [analysis] escape and at least one "
                                      "swept parameter (or an initial-condition grid)")
    grouped = ds[["escape_time"]].reset_coords(sweeps).to_dataframe().groupby(sweeps)["escape_time"]
    table = grouped.median().to_frame("median_escape_time")
    table["escaped_fraction"] = grouped.apply(lambda times: float(np.mean(np.isfinite(times))))
    result = table.to_xarray()
    result.median_escape_time.attrs.update(units="s", long_name="median escape time of the members that escaped")
    result.escaped_fraction.attrs.update(units="1", long_name="fraction of members that escaped")
    return result


def drift_table(ds: xr.Dataset, burn_in: float | None = None) -> xr.Dataset:
    """The members' energy statistics of :func:`energy_drift` summarised per sweep point (over the whole
    ensemble when nothing is swept), computed: each statistic's 5 %, 50 % (median) and 95 % quantiles over
    the point's members on a ``quantile`` dimension (units those of the statistic: 1, or 1/s for the drift
    rate and its standard error), and ``significant_drift_fraction`` (1), the fraction of members with a
    finite drift rate whose drift is significant.  One dimension per sweep coordinate; the drift window and
    ``absolute_members`` in the attributes."""
    stats = energy_drift(ds, burn_in).compute()
    finite = np.isfinite(stats.drift_rate)
    significant = stats.significant_drift.where(finite)
    statistics = stats.drop_vars("significant_drift")
    sweeps = sweep_coordinates(ds)
    if sweeps:
        statistics, significant = statistics.groupby(sweeps), significant.groupby(sweeps)
    table = statistics.quantile(list(QUANTILES), dim="member", keep_attrs=True)
    fraction = significant.mean("member").assign_attrs(
        units="1", long_name="fraction of members with a finite drift rate whose drift is significant at 3σ")
    return table.assign(significant_drift_fraction=fraction).assign_attrs(stats.attrs)


def store_summary(ds: xr.Dataset, burn_in: float | None = None) -> dict:
    """The headline numbers of one store: energy error (member statistics, drift after ``burn_in`` s,
    growth law), the maxima of the space's constraint diagnostics, the conserved momentum's error (NaN
    without the state or a symmetry), failures.  Values are plain floats."""
    return analyse_store(ds, burn_in)["summary"]


def store_plan(ds: xr.Dataset):
    """The run's plan, rebuilt from the spec stored in the store (for per-member parameters)."""
    from .plan import Plan
    from .spec import parse_spec

    return Plan(parse_spec(ds.attrs["spec"], stored=True))


def _per_member_blocks(ds: xr.Dataset, plan, function) -> xr.DataArray:
    """Apply ``function(system, state)`` → (members, time, k) to each member chunk of the store's state
    variables, with the system carrying those members' parameters; returns (member, time, component)
    lazily.  Every variable must share the member and time chunks, with its own axes whole."""
    names = plan.space.names
    arrays = [ds[name].data for name in names]
    first = arrays[0]
    k = function(plan.chunk_system(0, 1), {name: ds[name][:1, :1].values for name in names}).shape[-1]
    ids = da.from_array(np.arange(first.shape[0]), chunks=(first.chunks[0],))
    letters = iter("abcdefghijlnopqrsuvwxyz")
    args = [ids, "m"]
    for array in arrays:
        args += [array, "mt" + "".join(next(letters) for _ in range(array.ndim - 2))]

    def block(members, *values):
        return function(plan.chunk_system(int(members[0]), int(members[-1]) + 1), dict(zip(names, values)))

    data = da.blockwise(block, "mtk", *args, new_axes={"k": k}, dtype=np.float64, concatenate=True)
    return xr.DataArray(data, dims=("member", "time", "component"), coords={"member": ds.member, "time": ds.time})


def momentum_error(ds: xr.Dataset) -> xr.DataArray | None:
    """Error of the system's conserved momentum map (kg·m²/s; see its ``momentum_doc``): |L(t) − L(0)|
    of the total angular momentum when V is invariant under every rotation (sphere_nbody, sphere_lj,
    free_rigid_body), its component along the symmetry axis when V is invariant about one axis
    (spherical_chain, heavy_top: the direction of gravity).  None when the store has no state or the
    system no symmetry, or forces act."""
    if "spec" not in ds.attrs or state_of(ds) is None:
        return None
    plan = store_plan(ds)
    if not plan.has_system:  # a store's model, not run here (models declare no momentum map)
        return None
    if plan.system.definition.momentum_map(plan.system.params) is None or plan.system.forced:
        return None

    def change(system, state):
        momentum = system.momentum(state)
        return np.linalg.norm(momentum - momentum[:, :1], axis=-1, keepdims=True)

    # L(0) must come from the first sample of each member, so time is one chunk per block here.
    error = _per_member_blocks(ds[list(plan.space.names)].chunk(time=-1), plan, change).isel(component=0)
    return error.assign_attrs(units="kg m2/s", long_name="change of the conserved momentum map")


def kinetic_temperature(ds: xr.Dataset) -> xr.DataArray:
    """Kinetic temperature T = 2 KE / (k_B · 2N) = KE / N per member over time (J, k_B = 1: each of
    the N particles has two degrees of freedom on S²)."""
    energies = _per_member_blocks(ds, store_plan(ds), lambda system, state: system.body_kinetic_energies(state))
    return energies.mean("component").assign_attrs(units="J", long_name="kinetic temperature (k_B = 1)")


def face_kinetic_energy(ds: xr.Dataset, time_index: int, member: int = 0, level: int = 4) -> np.ndarray:
    """The paper's kinetic-energy map (Example 6): mean kinetic energy (J) of the particles in each
    face of a level-``level`` icosphere (5120 faces at 4), then averaged over the face and its three
    edge neighbours.  Faces without particles count as 0."""
    from armillary.kernels.geometry import face_map

    plan = store_plan(ds)
    system = plan.chunk_system(member, member + 1)
    state = {name: ds[name].isel(member=[member], time=[time_index]).values for name in plan.space.names}
    energies = system.body_kinetic_energies(state)[0, 0]
    return face_map(plan.space.points(state)[0, 0], energies, level)


def particle_points(ds: xr.Dataset, member: int, time_index: int) -> np.ndarray:
    """The particles' unit vectors (N, 3) of one member at one sample (its space's ``points``, from the state
    variables the store keeps: KeyError naming one it needs and lacks)."""
    space = store_space(ds)
    return space.points({name: ds[name].isel(member=member, time=time_index).values for name in space.names
                         if name in ds})


def particle_trajectories(ds: xr.Dataset, members=None) -> np.ndarray:
    """The particles' unit vectors (members, time, N, 3) of ``members`` (positions along ``member``, one or a
    list; all by default) at every saved sample (its space's ``points``), read into memory."""
    space = store_space(ds)
    chosen = slice(None) if members is None else np.atleast_1d(np.asarray(members, dtype=np.int64))
    return space.points({name: ds[name].isel(member=chosen).values for name in space.names})


def _body_values(ds: xr.Dataset, name: str, member: int) -> np.ndarray:
    """The values (body,) of the per-body variable ``name`` for member ``member`` (a store keeps a body property
    on (body,) when every member shares it, else on (member, body))."""
    values = ds[name]
    return (values.isel(member=member) if "member" in values.dims else values).values


def particle_types(ds: xr.Dataset, member: int = 0) -> tuple[np.ndarray, list[str]] | None:
    """The particles' types of member ``member``: (type ids (N,) int64, 0 … K − 1, names (the attribute
    ``type_names`` of ``particle_type``, index = id; "type <id>" where it lacks)), or None for a store without
    ``particle_type`` (particles of one type)."""
    if "particle_type" not in ds:
        return None
    ids = _body_values(ds, "particle_type", member).astype(np.int64)
    names = list(ds["particle_type"].attrs.get("type_names", []))
    return ids, names + [f"type {a}" for a in range(len(names), int(ids.max(initial=-1)) + 1)]


def particle_radii(ds: xr.Dataset, member: int = 0) -> np.ndarray | None:
    """The particles' angular radii (rad) of member ``member``, asin(d/2) of their chord diameters d (the store's
    ``diameter``, m on the unit sphere; :func:`.particles.angular_radii`), or None for a store without
    ``diameter``."""
    return angular_radii(_body_values(ds, "diameter", member)) if "diameter" in ds else None


# ----------------------------------------------------------------------------------- chaos indicators

#: the normal quantile of two-sided 95 % intervals
Z_975 = 1.959963984540054

def median_interval(values: np.ndarray) -> tuple[float, float, float]:
    """(median, low, high) of the finite ``values``: the distribution-free 95 % interval of the median
    from the order statistics of ranks ⌊n/2 − 1.96 √n/2⌋ and ⌈1 + n/2 + 1.96 √n/2⌉ (1-based; the normal
    approximation of the binomial, Conover, Practical Nonparametric Statistics, §3.2); its
    coverage needs no assumption about the values' distribution and no resampling, so the same values
    always give the same interval).  NaN bounds for fewer than 2 values."""
    values = np.sort(np.asarray(values, dtype=np.float64)[np.isfinite(values)])
    n = values.size
    if n < 2:
        return (float(values[0]) if n else np.nan), np.nan, np.nan
    spread = Z_975 * np.sqrt(n) / 2
    low = max(int(np.floor(n / 2 - spread)), 1)
    high = min(int(np.ceil(n / 2 + spread)) + 1, n)
    return float(np.median(values)), float(values[low - 1]), float(values[high - 1])


def fraction_interval(flags: np.ndarray) -> tuple[float, float, float]:
    """(fraction, low, high) of true ``flags``: Wilson's 95 % score interval (good at fractions near 0 and 1)."""
    flags = np.asarray(flags, dtype=bool)
    n = flags.size
    if n == 0:
        return np.nan, np.nan, np.nan
    p = float(flags.mean())
    denominator = 1 + Z_975 ** 2 / n
    centre = (p + Z_975 ** 2 / (2 * n)) / denominator
    half = Z_975 * np.sqrt(p * (1 - p) / n + Z_975 ** 2 / (4 * n * n)) / denominator
    return p, max(centre - half, 0.0), min(centre + half, 1.0)


def member_values(ds: xr.Dataset, statistic: str) -> np.ndarray:
    """The per-member quantity ``statistic`` is taken of (see :data:`STATISTICS`), (members,): λ, whether
    λ exceeds the chaos threshold (NaN where λ is not finite), ⟨Y⟩ at the end, or the energy drift rate."""
    if statistic not in STATISTICS:
        raise InvalidInput("statistic", f"unknown statistic {statistic!r}; allowed: {', '.join(STATISTICS)}")
    variable = STATISTICS[statistic][1]
    if variable not in ds:
        raise InvalidInput("statistic", f"{statistic} needs {variable!r} in the store")
    if statistic == "median_drift":
        return energy_drift(ds).drift_rate.values
    values = ds[variable].values
    if statistic == "chaotic_fraction":
        return np.where(np.isfinite(values), values > chaos_threshold(ds), np.nan)
    return values


def _sweep_groups(ds: xr.Dataset) -> tuple[list[str], list[tuple[tuple, np.ndarray]]]:
    """The sweep coordinates and, per grid point in order, (its coordinate values, its members' indices);
    one group of every member for a store without sweeps."""
    sweeps = sweep_coordinates(ds)
    if not sweeps:
        return [], [((), np.arange(ds.sizes["member"]))]
    keys = list(zip(*(ds[name].values for name in sweeps)))
    groups: dict[tuple, list[int]] = {}
    for index, key in enumerate(keys):
        groups.setdefault(key, []).append(index)
    return sweeps, [(key, np.asarray(members)) for key, members in groups.items()]


def _interval_of(kind: str, values: np.ndarray) -> tuple[float, float, float]:
    if kind == "fraction":
        return fraction_interval(values[np.isfinite(values)] > 0.5)
    return median_interval(values)


def statistic_intervals(ds: xr.Dataset, statistic: str) -> list[dict]:
    """Per sweep point (the whole ensemble without sweeps): its coordinates (``point``), the statistic's
    ``estimate`` with its 95 % interval (``low``, ``high``; :func:`median_interval`,
    :func:`fraction_interval`) and ``members``: what ``[ensemble] until`` stops on."""
    values = member_values(ds, statistic)
    kind = STATISTICS[statistic][2]
    sweeps, groups = _sweep_groups(ds)
    out = []
    for key, members in groups:
        estimate, low, high = _interval_of(kind, values[members])
        out.append({"point": dict(zip(sweeps, (float(v) for v in key))), "estimate": estimate, "low": low,
                    "high": high, "members": int(members.size)})
    return out


#: chaos_table's per-member quantities: variable → (the table's name, units, long name)
CHAOS_QUANTITIES = {
    "lyapunov": ("lyapunov", "1/s", "finite-time maximal Lyapunov exponent"),
    "megno_final": ("megno", "1", "MEGNO <Y> at the end of the run"),
}


def chaos_table(ds: xr.Dataset) -> xr.Dataset:
    """The chaos indicators a store holds, per sweep point (one dimension per sweep coordinate; a
    ``point`` of size 1 without sweeps): for λ and MEGNO the median with its 95 % interval
    (``median_<x>``, ``median_<x>_low``/``_high``) and the 5 % and 95 % quantiles (``<x>_05``, ``<x>_95``);
    the chaotic fraction (λ > 10 / t_end) with its Wilson interval; SALI's median at the end; and the
    spectrum's median per exponent with its interval (dimension ``exponent``)."""
    sweeps, groups = _sweep_groups(ds)
    rows: dict[str, list] = {}

    def add(name, value):
        rows.setdefault(name, []).append(value)

    spectrum = ds.lyapunov_spectrum.values if "lyapunov_spectrum" in ds else None
    sali = ds.sali.isel(time=-1).values if "sali" in ds else None
    for _, members in groups:
        for variable, (name, _, _) in CHAOS_QUANTITIES.items():
            if variable not in ds:
                continue
            values = ds[variable].values[members]
            median, low, high = median_interval(values)
            finite = values[np.isfinite(values)]
            q05, q95 = np.quantile(finite, (0.05, 0.95)) if finite.size else (np.nan, np.nan)
            for suffix, value in (("", median), ("_low", low), ("_high", high)):
                add(f"median_{name}{suffix}", value)
            add(f"{name}_05", q05)
            add(f"{name}_95", q95)
        if "lyapunov" in ds:
            fraction, low, high = _interval_of("fraction", member_values(ds, "chaotic_fraction")[members])
            for suffix, value in (("", fraction), ("_low", low), ("_high", high)):
                add(f"chaotic_fraction{suffix}", value)
        if sali is not None:
            add("median_sali", float(np.nanmedian(sali[members])) if np.isfinite(sali[members]).any() else np.nan)
        if spectrum is not None:
            intervals = np.array([median_interval(spectrum[members, j]) for j in range(spectrum.shape[1])])
            for column, suffix in enumerate(("", "_low", "_high")):
                add(f"median_spectrum{suffix}", intervals[:, column])
        add("members", members.size)
    if sweeps:
        index = {name: np.array([key[k] for key, _ in groups]) for k, name in enumerate(sweeps)}
        dims = ("point",)
        coords = {name: ("point", values) for name, values in index.items()}
    else:
        dims, coords = ("point",), {}
    data = {}
    for name, values in rows.items():
        values = np.asarray(values)
        data[name] = (dims + ("exponent",) * (values.ndim - 1), values)
    table = xr.Dataset(data, coords=coords)
    if sweeps:  # one dimension per swept coordinate
        table = table.set_index(point=sweeps).unstack("point")
    for variable, (name, unit, long_name) in CHAOS_QUANTITIES.items():
        for key in (f"median_{name}", f"median_{name}_low", f"median_{name}_high", f"{name}_05", f"{name}_95"):
            if key in table:
                table[key].attrs.update(units=unit, long_name=f"{key.replace('_', ' ')}: {long_name}")
    if "median_spectrum" in table:
        table["median_spectrum"].attrs.update(units="1/s", long_name="median finite-time Lyapunov exponents")
    table.attrs["interval"] = "95 %: medians from order statistics, fractions by Wilson's score"
    return table


#: a component of a state variable as a section's expression writes it: ``name[i][j]…``
SECTION_COMPONENT = re.compile(r"([A-Za-z_]\w*)((?:\[\d+\])*)")
#: what colours the section's points, first found first (else the member index)
SECTION_COLOURS = ("lyapunov", "megno_final")


def section_names(ds: xr.Dataset) -> list[str]:
    """The surfaces of section a store holds: "section" (``[analysis] section``) and ``[analysis] sections``'."""
    names = [name[len("section_"):-len("_time")] for name in ds.data_vars
             if name.startswith("section_") and name.endswith("_time") and name != "section_time"]
    return ["section"] * ("section_time" in ds.data_vars) + sorted(names)


def section_variables(ds: xr.Dataset, section: str = "section") -> list[str]:
    """The state variables a store recorded at the named section's crossings."""
    prefix = section_prefix(section)
    return [name for name in ds.attrs.get("state_variables", ()) if prefix + name in ds.data_vars]


def _section_of(ds: xr.Dataset, section: str) -> str:
    """``section`` if the store holds it (its variables' prefix), else InvalidInput naming those it holds."""
    held = section_names(ds)
    if not held:
        raise InvalidInput("dataset", "the store has no surface of section; run the spec with [analysis] section")
    if section not in held:
        raise InvalidInput("section", f"unknown section {section!r}; the store holds {', '.join(held)}")
    return section_prefix(section)


def section_component(ds: xr.Dataset, text: str, section: str = "section") -> xr.DataArray:
    """One component of a recorded state variable at every crossing of the named section, (member, crossing):
    ``text`` as a section's expression reads it (``"q[1][0]"``, ``"Omega[0][2]"``); InvalidInput naming what was
    recorded otherwise."""
    prefix = _section_of(ds, section)
    recorded = section_variables(ds, section)
    match = SECTION_COMPONENT.fullmatch(text.replace(" ", ""))
    if match is None or match[1] not in recorded:
        raise InvalidInput("section", f"{text!r} is not a component of a recorded variable; recorded: "
                                      f"{', '.join(recorded)}, indexed as in the section's expression")
    array = ds[prefix + match[1]]
    axes = array.dims[2:]
    indices = [int(index) for index in re.findall(r"\d+", match[2])]
    if len(indices) != len(axes) or any(i >= array.sizes[axis] for i, axis in zip(indices, axes)):
        raise InvalidInput("section", f"{text!r} must index each of {match[1]}'s axes "
                                      f"({', '.join(f'{axis} < {array.sizes[axis]}' for axis in axes)})")
    return array.isel(dict(zip(axes, indices)))


def widest_section_components(ds: xr.Dataset, count: int = 2, section: str = "section") -> list[str]:
    """The ``count`` recorded components that spread most over all crossings of the named section (the section's
    own coordinate, zero there, least): the default axes of a section's picture.  Reduced chunk by chunk."""
    prefix = _section_of(ds, section)
    spreads = []
    for name in section_variables(ds, section):
        array = ds[prefix + name]
        spread = (array.max(("member", "crossing")) - array.min(("member", "crossing"))).fillna(0.0).values
        for index in np.ndindex(*spread.shape):
            spreads.append((spread[index], name + "".join(f"[{i}]" for i in index)))
    return [text for _, text in sorted(spreads, key=lambda item: -item[0])[:count]]


def section_points(ds: xr.Dataset, x: str | None = None, y: str | None = None,
                   section: str = "section") -> xr.Dataset:
    """Every stored crossing of every member of the named section as a point of its picture, over a ``point``
    dimension: ``x`` and ``y`` (two components of recorded variables, default :func:`widest_section_components`),
    the crossing's ``time`` (s) and ``member``, and the member's λ or MEGNO where the store has them
    (``colour``)."""
    prefix = _section_of(ds, section)
    if x is None or y is None:
        widest = widest_section_components(ds, section=section)
        x, y = x or widest[0], y or widest[-1]
    times = ds[prefix + "time"].values
    members, crossings = np.nonzero(np.isfinite(times))
    points = xr.Dataset({"x": ("point", section_component(ds, x, section).values[members, crossings]),
                         "y": ("point", section_component(ds, y, section).values[members, crossings]),
                         "time": ("point", times[members, crossings]),
                         "member": ("point", ds["member"].values[members])})
    colour = next((name for name in SECTION_COLOURS if name in ds), None)
    if colour is not None:
        points["colour"] = ("point", ds[colour].values[members], {"long_name": colour})
    return points.assign_attrs(x=x, y=y, section=section)
