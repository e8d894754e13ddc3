"""Stores written before state spaces were declared (tests/fixtures, made by the code of commit 5abed22:
spherical_chain vi with Benettin shadows, sphere_nbody rk45) open, report and resume bitwise."""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
import zarr

from armillary.ensemble.plan import Plan
from armillary.ensemble.spec import parse_spec
from armillary.jobs.cli import main

from ensemble_cases import assert_bitwise_equal

FIXTURES = Path(__file__).parent / "fixtures"


def everything(store) -> dict:
    """Every data array and checkpoint slot of a store."""
    group = zarr.open_group(store, mode="r")
    names = [name for name, _ in group.arrays()] + [f"_progress/{name}" for name, _ in group["_progress"].arrays()
                                                    if name.startswith("slot_")]
    return {name: group[name][:] for name in names}


@pytest.mark.parametrize("name", ["old-vi", "old-rk45"])
def test_an_old_store_resumes_bitwise_and_reports(tmp_path, name, capsys):
    store = tmp_path / f"{name}.zarr"
    shutil.copytree(FIXTURES / f"{name}.zarr", store)
    group = zarr.open_group(str(store), mode="r+")
    text = group.attrs["spec"].replace(json.dumps(f"/tmp/oldfix/{name}.zarr"), json.dumps(str(store)))
    reference = everything(str(store))
    # as if the run had been killed before its last segment: no records, no data of that segment
    plan = Plan(parse_spec(text))
    last = plan.segments[-1]
    group["_progress/done"][:, -1] = np.nan
    for variable, array in group.arrays():
        if array.ndim >= 2 and array.shape[1] == plan.samples and array.dtype == np.float64:
            array[:, last.first_sample:] = np.nan
    if "lyapunov" in group:
        group["lyapunov"][:] = np.nan
    spec = tmp_path / "spec.toml"
    spec.write_text(text)
    assert main(["run", str(spec)]) == 0
    ran = capsys.readouterr().out
    resumed = everything(str(store))
    checked = {key: value for key, value in reference.items() if key != "_progress/slot_step_size"
               or name == "old-rk45"}  # fixed-step methods no longer write a step size they never change
    if name == "old-rk45":
        # sphere_nbody's revision 2 computes separations as ‖q_i × q_j‖: the segment run now agrees with the
        # old one to 10× rk45's rtol (1e-6) on quantities of order one (|q| = 1, |ω| ≈ 1, E ≈ 1), not
        # bitwise, and the run says why; the segments before are untouched.  The controller's next step size
        # (slot_step_size) follows its own error estimates and is left out
        assert "revision 1 of sphere_nbody's numerics, this is revision 2" in ran
        redone = [key for key in checked if key.startswith("_progress/slot_") and key != "_progress/slot_step_size"
                  or key in ("energy", "unit_error", "omega")]
        for key in redone:
            np.testing.assert_allclose(resumed[key], checked[key], rtol=0, atol=1e-5, err_msg=key)
            if key in ("energy", "unit_error", "omega"):
                first = plan.segments[-1].first_sample
                assert np.array_equal(resumed[key][:, :first], checked[key][:, :first]), key
        checked = {key: value for key, value in checked.items()
                   if key not in redone and key != "_progress/slot_step_size"}
    else:
        assert "numerics" not in ran
    assert_bitwise_equal({key: resumed[key] for key in checked}, checked)
    ds = xr.open_zarr(str(store))
    assert set(ds.data_vars) >= {"omega", "energy", "status"} and ds.omega.dims == ("member", "time", "body", "xyz")
    assert main(["status", str(store)]) == 0
    assert main(["report", str(store), "--out", str(tmp_path / "report")]) == 0
    out = ran + capsys.readouterr().out
    segments = len(plan.segments) * len(plan.chunks)
    assert "max unit_error" in out and f"{segments}/{segments} segments" in out
