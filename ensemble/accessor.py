"""``ds.armillary``: the analysis of :mod:`armillary.ensemble.analysis` on any store opened with xarray
(``xarray.open_zarr(path)`` or :func:`open_store`, here, which every store armillary opens goes through), registered
when this module is imported, which ``import armillary`` arranges as soon as xarray is imported (not before: the
CLI imports the package and should not pay for xarray).

Each method hands the Dataset to the function of :mod:`.analysis` it is named after and returns what that
returns; it first checks that the Dataset is an armillary store holding what the function reads, and
otherwise raises :class:`InvalidInput` (field ``dataset``) naming what is missing.
"""

from __future__ import annotations

import json

import dask.array as da
import numpy as np
import xarray as xr
import zarr

from armillary.kernels.errors import InvalidInput
from armillary.kernels.spaces import SPHERE_PRODUCT

from .analysis import (
    GROWTH_BATCHES, QUANTILES, chaos_table, drift_table, energy_drift, escape_map, growth_law, kinetic_temperature,
    lyapunov_map, lyapunov_summary, momentum_error, particle_points, particle_trajectories,
    quantile_envelope, relative_energy_error, section_points, store_space, store_summary, sweep_coordinates,
)
from .particles import Displacement, VoronoiOrder, geodesic_displacement, pair_distribution, voronoi_order

#: what every store has: its (member, time) grid and the names of its system and method
STORE_DIMENSIONS = ("member", "time")
STORE_ATTRIBUTES = ("system", "method")
#: how the stores that lack a variable get it
LYAPUNOV_HINT = "run the spec with [analysis] lyapunov"
STATE_HINT = "keep the state: list its variables in [output] variables"


def until_members(until: dict) -> np.ndarray:
    """The members an ``[ensemble] until`` run holds after its ``batches`` batches: the first
    batches·batch of each sweep point's block of ``per_point``."""
    taken = until["batches"] * until["batch"]
    return np.concatenate([p * until["per_point"] + np.arange(taken) for p in range(until["points"])])


def open_store(url: str, damaged=(), until: dict | None = None) -> xr.Dataset:
    """The store at ``url`` as a lazy Dataset.  ``damaged``: (variable, chunk index) pairs known to
    fail their checksums (from :func:`ensemble.verify.verify`), read as NaN (−1 for integer
    variables: an unknown status) instead of raising when a computation reaches them.  A run sized by
    ``[ensemble] until`` is opened with the members of the batches its rule has evaluated (its attribute
    ``until``, or ``until`` given), so it reads as a fixed-size run of those members."""
    ds = xr.open_zarr(url)
    bad: dict[str, set] = {}
    for name, chunk in damaged:
        bad.setdefault(name, set()).add(tuple(chunk))
    for name, chunks in bad.items():
        if name not in ds.data_vars:
            continue
        source = ds[name].data
        array = zarr.open_array(url, path=name, mode="r")
        fill = -1 if np.issubdtype(source.dtype, np.integer) else np.nan

        def block(block_id=None, block_info=None, array=array, chunks=chunks, fill=fill, dtype=source.dtype):
            where = tuple(slice(*bounds) for bounds in block_info[None]["array-location"])
            if tuple(block_id) in chunks:
                return np.full(tuple(s.stop - s.start for s in where), fill, dtype)
            return array[where]

        masked = da.map_blocks(block, chunks=source.chunks, dtype=source.dtype, meta=np.array((), source.dtype))
        ds[name] = ds[name].copy(data=masked)
    until = until or (json.loads(ds.attrs["until"]) if "until" in ds.attrs else None)
    return ds if until is None else ds.isel(member=until_members(until))


@xr.register_dataset_accessor("armillary")
class ArmillaryAccessor:
    """The analysis of an armillary store, as ``ds.armillary.<method>()``."""

    def __init__(self, ds: xr.Dataset):
        self._ds = ds

    def _require(self, method: str, variables=(), attributes=(), hint: str = "") -> xr.Dataset:
        """The Dataset, once it is a store with ``variables`` and ``attributes``; else InvalidInput naming what is
        missing (``hint``: how a store gets it)."""
        ds = self._ds
        missing = [f"dimension {name!r}" for name in STORE_DIMENSIONS if name not in ds.dims]
        missing += [f"attribute {name!r}" for name in STORE_ATTRIBUTES if name not in ds.attrs]
        if missing:
            raise InvalidInput("dataset", f"not an armillary store (no {', '.join(missing)}); open one with "
                               "armillary.open_store(path)")
        missing = [f"variable {name!r}" for name in variables if name not in ds.variables]
        missing += [f"attribute {name!r}" for name in attributes if name not in ds.attrs]
        if missing:
            raise InvalidInput("dataset", f"ds.armillary.{method}() needs the store's {', '.join(missing)}, which "
                               "this store lacks" + (f"; {hint}" if hint else ""))
        return ds

    def _require_state(self, method: str) -> xr.Dataset:
        """The Dataset, once it is a store with its spec and every state variable (what :func:`.analysis.store_plan`
        rebuilds the system from, and the state its observables are computed from)."""
        return self._require(method, store_space(self._ds).names, ("spec",), STATE_HINT)

    def _require_sphere_product(self, method: str) -> xr.Dataset:
        """The Dataset, once it is a store of particles on (S²)ⁿ with its spec and state."""
        ds = self._require_state(method)
        if store_space(ds) is not SPHERE_PRODUCT:
            raise InvalidInput("dataset", f"ds.armillary.{method}() is defined for particles on (S²)ⁿ; this store's "
                               f"state space is {store_space(ds).name}")
        return ds

    def sweep_coordinates(self) -> list[str]:
        """Names of the coordinates that vary over the members' grid (swept parameters, with their units in
        their attributes, and an initial-condition sampler's coordinates); empty when nothing is swept."""
        return sweep_coordinates(self._require("sweep_coordinates"))

    def energy_error(self) -> xr.DataArray:
        """Relative energy error ΔE(t)/|E0| (units 1) per (member, time), lazy; absolute (J) for members with
        |E0| < 1e-12, counted in ``attrs["absolute_members"]``; for a forced run the energy balance error
        (E − E0 − W)/|E0|.  :func:`.analysis.relative_energy_error`."""
        return relative_energy_error(self._require("energy_error", ("energy",)))

    def energy_drift(self, burn_in: float | None = None) -> xr.Dataset:
        """Per member (lazy): max, mean |·|, RMS and final value of ΔE/|E0| (1) over the run; over the window
        after ``burn_in`` (s; default half the run, in ``attrs["window_start"]``, ``attrs["window_end"]``) the
        drift rate (1/s) with its Newey–West standard error (1/s), ``significant_drift`` (beyond 3 standard
        errors) and the offset (1).  :func:`.analysis.energy_drift`."""
        return energy_drift(self._require("energy_drift", ("energy",)), burn_in)

    def drift_table(self, burn_in: float | None = None) -> xr.Dataset:
        """The members' energy statistics of :meth:`energy_drift` summarised per sweep point (over the whole
        ensemble when nothing is swept), computed: quantiles of each statistic and the fraction of members whose
        drift is significant.  :func:`.analysis.drift_table`."""
        return drift_table(self._require("drift_table", ("energy",)), burn_in)

    def growth_law(self, batches: int = GROWTH_BATCHES) -> dict:
        """Fit of the ensemble RMS of ΔE/|E0| as ∝ t^α over the second half of the run: ``alpha`` (1) with its
        batch-means standard error and 95 % interval (``alpha_low``, ``alpha_high``; NaN below 2·``batches``
        members) and ``rms`` (1, per time, computed).  :func:`.analysis.growth_law`."""
        return growth_law(self.energy_error(), batches)

    def energy_envelope(self, quantiles=QUANTILES) -> xr.DataArray:
        """Quantiles of |ΔE/|E0|| (1) over members at each time, (quantile, time), computed: the report's energy
        error figure.  :func:`.analysis.quantile_envelope`."""
        return quantile_envelope(self.energy_error(), quantiles)

    def lyapunov(self, threshold: float | None = None) -> dict:
        """The whole ensemble's finite-time maximal Lyapunov exponents: ``median_lyapunov``, ``lyapunov_05``,
        ``lyapunov_95`` (1/s), ``chaotic_fraction`` (1) of members with λ > ``threshold`` (1/s; default 10 / t_end,
        returned as ``chaos_threshold``).  :func:`.analysis.lyapunov_summary`; per sweep point:
        :meth:`lyapunov_map`."""
        return lyapunov_summary(self._require("lyapunov", ("lyapunov",), hint=LYAPUNOV_HINT), threshold)

    def lyapunov_map(self) -> xr.Dataset:
        """Per sweep point: ``median_lyapunov`` (1/s) and ``chaotic_fraction`` (1), one dimension per sweep
        coordinate.  :func:`.analysis.lyapunov_map`."""
        ds = self._require("lyapunov_map", ("lyapunov",), hint=LYAPUNOV_HINT)
        if not sweep_coordinates(ds):
            raise InvalidInput("dataset", "ds.armillary.lyapunov_map() needs a store that sweeps a parameter "
                               "(its members all share one point); ds.armillary.lyapunov() summarises them")
        return lyapunov_map(ds)

    def chaos_table(self) -> xr.Dataset:
        """The chaos indicators the store holds, per sweep point (a ``point`` of size 1 without sweeps): medians
        of λ and MEGNO ⟨Y⟩ with 95 % intervals and 5/95 % quantiles, the chaotic fraction with its interval,
        SALI's median, the spectrum's medians per exponent.  :func:`.analysis.chaos_table`."""
        ds = self._require("chaos_table")
        if not any(name in ds for name in ("lyapunov", "lyapunov_spectrum", "megno_final", "sali")):
            raise InvalidInput("dataset", "ds.armillary.chaos_table() needs a chaos indicator in the store; run the "
                               "spec with [analysis] lyapunov, lyapunov_spectrum, megno or sali")
        return chaos_table(ds)

    def summary(self, burn_in: float | None = None) -> dict:
        """The store's headline numbers as plain floats, the report's table row: energy error statistics
        (1; drift rates in 1/s after ``burn_in`` s, default half the run), growth exponent α, maxima of the
        constraint diagnostics, the momentum map's error (kg·m²/s), λ (1/s), failed members.
        :func:`.analysis.store_summary`."""
        return store_summary(self._require("summary", ("energy", "status"), ("dt",)), burn_in)

    def momentum_error(self) -> xr.DataArray:
        """Change of the system's conserved momentum map per (member, time) (kg·m²/s), lazy: |L(t) − L(0)| of
        the total angular momentum, or its component on the symmetry axis.  :func:`.analysis.momentum_error`."""
        error = momentum_error(self._require_state("momentum_error"))
        if error is None:
            raise InvalidInput("dataset", f"ds.armillary.momentum_error(): {self._ds.attrs['system']} conserves no "
                               "momentum map in this run (its potential has no symmetry, or forces act)")
        return error

    def temperature(self) -> xr.DataArray:
        """Kinetic temperature KE/N per (member, time) (J, k_B = 1) of N particles on (S²)ⁿ, lazy.
        :func:`.analysis.kinetic_temperature`."""
        return kinetic_temperature(self._require_sphere_product("temperature"))

    def escape_map(self) -> xr.Dataset:
        """Per sweep point: ``median_escape_time`` (s, of the members that escaped) and ``escaped_fraction`` (1).
        :func:`.analysis.escape_map`."""
        return escape_map(self._require("escape_map", ("escape_time",), hint="run the spec with [analysis] escape"))

    def section_points(self, x: str | None = None, y: str | None = None, section: str = "section") -> xr.Dataset:
        """A surface of section's stored crossings as points: ``x`` and ``y`` (components of recorded variables
        as the section's expression writes them, e.g. ``"q[1][0]"``; default the two that spread most), ``time``
        (s), ``member``, and ``colour`` (the member's λ or MEGNO ⟨Y⟩ where stored), over ``point``; ``section``
        the name of one of ``[analysis] sections`` (default ``[analysis] section``).
        :func:`.analysis.section_points`."""
        return section_points(self._require("section_points"), x, y, section)

    def pair_distribution(self, member: int = 0, time_index: int = -1, bins: int | None = None,
                          theta_max: float | None = None) -> tuple:
        """Geodesic pair-distribution function g(θ) (1) of one member's particles on (S²)ⁿ at sample
        ``time_index``, from all of them: (bin centres θ (rad), g), ``bins`` bins over [0, ``theta_max``] (rad;
        by default π up to 5000 particles, 10 mean spacings beyond, and 30–400 bins from the particle count).
        :func:`.particles.pair_distribution`."""
        ds = self._require_sphere_product("pair_distribution")
        return pair_distribution(particle_points(ds, member, time_index), bins, theta_max)

    def geodesic_displacement(self, members=None) -> Displacement:
        """Mean-square geodesic displacement ⟨θ(τ)²⟩ (rad²) and orientation correlation ⟨q(t+τ)·q(t)⟩ (1) of the
        particles on (S²)ⁿ of ``members`` (positions, one or a list; all by default), over every saved sample as a
        time origin, with their standard errors across members (NaN for one): ``(lags, msd, correlation,
        msd_stderr, correlation_stderr)``, lags in samples (times ``ds.time`` spacing for seconds).  Reads those
        members' states into memory.  :func:`.particles.geodesic_displacement`."""
        ds = self._require_sphere_product("geodesic_displacement")
        return geodesic_displacement(particle_trajectories(ds, members))

    def voronoi_order(self, member: int = 0, time_index: int = -1) -> VoronoiOrder:
        """Spherical Voronoi order of one member's particles on (S²)ⁿ at sample ``time_index``: coordination z
        and charge 6 − z per particle, local hexatic order ψ₆ (complex), neighbour pairs, defect counts, total
        charge (12 by Euler's formula), six-fold fraction and mean |ψ₆| (1).  :func:`.particles.voronoi_order`."""
        ds = self._require_sphere_product("voronoi_order")
        return voronoi_order(particle_points(ds, member, time_index))
