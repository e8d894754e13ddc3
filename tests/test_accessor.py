"""The ``ds.armillary`` accessor: each method returns what its function of ensemble.analysis returns, and a
Dataset that is not a store, or lacks what a method reads, is refused naming what is missing."""

import io

import numpy as np
import pytest
import xarray as xr

import armillary
from armillary import ensemble
from armillary.ensemble.analysis import (
    QUANTILES, energy_drift, growth_law, kinetic_temperature, lyapunov_map, lyapunov_summary, momentum_error,
    particle_points, quantile_envelope, relative_energy_error, store_summary,
)
from armillary.ensemble.particles import pair_distribution

from ensemble_cases import runner_spec

pytestmark = pytest.mark.xdist_group("accessor")

#: sphere_nbody with vi and Benettin shadows (kernels the ensemble and Lyapunov tests compile), γ swept over two
#: points of two members each
SWEPT_NBODY = 'name = "sphere_nbody"\npreset = "paper"\nparams = { gamma = { values = [1.0, 2.0] } }'


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """The path of a run of 4 members over 1 s (11 samples) with its state and λ kept."""
    directory = str(tmp_path_factory.mktemp("accessor"))
    path = runner_spec(directory, "swept.toml", SWEPT_NBODY, ("q", "omega", "energy", "unit_error", "tangency_error"),
                       method="vi", chunk=2, members=4)
    with open(path, "a") as handle:
        handle.write("\n[analysis]\nlyapunov = { d0 = 1e-8, renormalise_every = 7 }\n")
    ensemble.run(path, stream=io.StringIO())
    return path.replace(".toml", ".zarr")


def test_methods_return_what_analysis_returns(store):
    ds = xr.open_zarr(store)
    accessor = ds.armillary
    assert accessor.sweep_coordinates() == ["gamma"]
    assert accessor.energy_error().identical(relative_energy_error(ds))
    assert accessor.energy_drift().identical(energy_drift(ds))
    assert accessor.energy_drift(burn_in=0.3).identical(energy_drift(ds, burn_in=0.3))
    law, expected = accessor.growth_law(), growth_law(relative_energy_error(ds))
    assert law.pop("rms").identical(expected.pop("rms"))
    np.testing.assert_equal(law, expected)
    assert accessor.energy_envelope().identical(quantile_envelope(relative_energy_error(ds)))
    assert accessor.lyapunov() == lyapunov_summary(ds)
    assert accessor.lyapunov(threshold=1.0) == lyapunov_summary(ds, threshold=1.0)
    assert accessor.lyapunov_map().identical(lyapunov_map(ds))
    assert accessor.momentum_error().identical(momentum_error(ds))
    assert accessor.temperature().identical(kinetic_temperature(ds))
    np.testing.assert_equal(accessor.pair_distribution(member=1, time_index=5, bins=30),
                            pair_distribution(particle_points(ds, 1, 5), bins=30))
    np.testing.assert_equal(armillary.open_store(store).armillary.summary(), store_summary(ds))  # NaN equals NaN


def test_drift_table_holds_quantiles_of_the_drift_statistics_per_sweep_point(store):
    ds = armillary.open_store(store)
    stats = energy_drift(ds).compute()
    table = ds.armillary.drift_table()
    assert table.drift_rate.dims == ("gamma", "quantile") and list(table["quantile"].values) == list(QUANTILES)
    assert table.attrs == stats.attrs and table.drift_rate.attrs["units"] == "1/s"
    for gamma in (1.0, 2.0):
        members = stats.where(stats.gamma == gamma, drop=True)
        for name in ("max", "mean_abs", "rms", "final", "drift_rate", "drift_stderr", "offset"):
            np.testing.assert_allclose(table[name].sel(gamma=gamma), np.quantile(members[name], QUANTILES),
                                       rtol=1e-12, err_msg=name)
        assert float(table.significant_drift_fraction.sel(gamma=gamma)) == float(members.significant_drift.mean())
    whole = ds.drop_vars("gamma").armillary.drift_table(burn_in=0.3)
    assert whole.drift_rate.dims == ("quantile",) and whole.attrs["window_start"] == 0.3
    np.testing.assert_allclose(whole.offset, np.quantile(energy_drift(ds, burn_in=0.3).offset, QUANTILES), rtol=1e-12)


def test_what_is_missing_is_named(store):
    with pytest.raises(armillary.InvalidInput, match=r"^dataset: not an armillary store \(no dimension 'member', "
                       r"dimension 'time', attribute 'system', attribute 'method'\)"):
        xr.Dataset({"energy": ("t", [1.0, 2.0])}).armillary.energy_error()
    ds = xr.open_zarr(store)
    with pytest.raises(armillary.InvalidInput, match=r"lyapunov\(\) needs the store's variable 'lyapunov', which this "
                       r"store lacks; run the spec with \[analysis\] lyapunov$"):
        ds.drop_vars("lyapunov").armillary.lyapunov()
    with pytest.raises(armillary.InvalidInput, match=r"lyapunov_map\(\) needs a store that sweeps a parameter"):
        ds.drop_vars("gamma").armillary.lyapunov_map()
    with pytest.raises(armillary.InvalidInput, match=r"momentum_error\(\) needs the store's variable 'omega', "
                       r"attribute 'spec', which this store lacks; keep the state"):
        ds.drop_vars("omega").drop_attrs().assign_attrs(system="sphere_nbody", method="vi").armillary.momentum_error()
    rotations = ds.rename_vars(q="R", omega="Omega").assign_attrs(space="rotation")
    with pytest.raises(armillary.InvalidInput, match=r"temperature\(\) is defined for particles on \(S²\)ⁿ; this "
                       r"store's state space is rotation$"):
        rotations.armillary.temperature()
    with pytest.raises(armillary.InvalidInput, match=r"summary\(\) needs the store's variable 'energy'"):
        ds.drop_vars("energy").armillary.summary()
