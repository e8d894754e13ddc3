"""Sweeping one component of a per-item parameter: ``"phase[1]" = { values = [...] }`` in [system.params]
sets only that component per member, the others keeping the parameter's fixed value."""

import io

import numpy as np
import pytest

from armillary import ensemble
from armillary.ensemble.analysis import lyapunov_map
from armillary.ensemble.plan import Plan
from armillary.ensemble.report import write_report
from armillary.ensemble.spec import Sweep, parse_spec
from armillary.kernels import InvalidInput

#: two pendula driving a ball (per-mass phase (0, π/2) and amplitude (1, 1) from the preset)
SPEC = """
[system]
name = "rolling_ball"
preset = "pendulum_drive"
params = {{ {params} }}

[integrator]
method = "rk4"
dt = 0.01
t_end = {t_end}
save_every = 5
checkpoint_every = 10

[ensemble]
members = {members}
chunk = 2

[output]
store = "{store}"
variables = ["energy"]

[cluster]
kind = "local"
workers = 1
{analysis}"""


def spec_text(params, members=6, t_end=0.1, store="component.zarr", analysis=""):
    return SPEC.format(params=params, members=members, t_end=t_end, store=store, analysis=analysis)


def test_component_keys_are_parsed_and_round_trip():
    spec = parse_spec(spec_text('amplitude = [1.0, 2.0], "phase[1]" = { values = [0.5, 1.0, 1.5] }, '
                                '"phase[0]" = { linspace = [0.0, 1.0, 2] }', members=12))
    assert spec.params == {"amplitude": [1.0, 2.0]}
    assert spec.sweeps == (Sweep("phase[1]", (0.5, 1.0, 1.5)), Sweep("phase[0]", (0.0, 1.0)))
    assert [(s.parameter, s.component) for s in spec.sweeps] == [("phase", 1), ("phase", 0)]
    assert '"phase[1]" = { values = [0.5, 1.0, 1.5] }' in spec.to_toml()
    assert parse_spec(spec.to_toml()) == spec


def test_identity_of_whole_parameter_sweeps_is_unchanged():
    spec = parse_spec(spec_text("phase = { values = [0.5, 1.0] }", members=2))
    assert spec.sweeps[0].component is None and spec.sweeps[0].parameter == "phase"
    assert '"sweeps": [{"name": "phase", "values": [0.5, 1.0]}]' in spec.identity()


@pytest.mark.parametrize("params, field, message", [
    ('"phase[x]" = { values = [1.0] }', "system.params.phase[x]", "must be a parameter name, or name[k]"),
    ('"phase[-1]" = { values = [1.0] }', "system.params.phase[-1]", "must be a parameter name, or name[k]"),
    ('"phase[01]" = { values = [1.0] }', "system.params.phase[01]", "must be a parameter name, or name[k]"),
    ('"phase[1" = { values = [1.0] }', "system.params.phase[1", "must be a parameter name, or name[k]"),
    ('"phsae[1]" = { values = [1.0] }', "system.params.phsae[1]", "unknown parameter of rolling_ball; allowed:"),
    ('"radius[0]" = { values = [1.0] }', "system.params.radius[0]", "radius is a scalar, it has no components"),
    ('"rails[0]" = { values = [1.0] }', "system.params.rails[0]", "is structural and cannot be swept"),
    ('"phase[1]" = 0.5', "system.params.phase[1]", "a component takes a sweep"),
    ('"phase[1]" = { values = [] }', "system.params.phase[1].values", "must be a non-empty list of numbers"),
    ('phase = { values = [0.5, 1.0] }, "phase[1]" = { values = [1.0] }', "system.params.phase[1]",
     "cannot be swept together with a sweep of the whole phase"),
])
def test_bad_component_keys_are_refused_naming_the_key(params, field, message):
    with pytest.raises(InvalidInput) as error:
        parse_spec(spec_text(params, members=2))
    assert error.value.field == field
    assert message in error.value.message and "\n" not in error.value.message


def test_index_beyond_the_bound_systems_items_is_refused():
    plan = Plan(parse_spec(spec_text('"phase[2]" = { values = [1.0] }', members=2)))
    with pytest.raises(InvalidInput) as error:
        plan.validate()
    assert error.value.field == "system.params.phase[2]"
    assert error.value.message == ("index 2 is out of range: phase (mass) has 2 entries in this rolling_ball; "
                                   "allowed: 0 to 1")


def test_chunk_system_sets_only_the_swept_components():
    plan = Plan(parse_spec(spec_text('"phase[1]" = { values = [0.5, 1.0, 1.5] }, '
                                     '"amplitude[0]" = { values = [2.0, 3.0] }', members=12)))
    plan.validate()
    system = plan.chunk_system(0, 12)
    # last sweep fastest, two members per grid point
    np.testing.assert_array_equal(system.params["phase"][:, 0], 0.0)
    np.testing.assert_array_equal(system.params["phase"][:, 1], np.repeat([0.5, 1.0, 1.5], 4))
    np.testing.assert_array_equal(system.params["amplitude"][:, 0], np.tile(np.repeat([2.0, 3.0], 2), 3))
    np.testing.assert_array_equal(system.params["amplitude"][:, 1], 1.0)
    np.testing.assert_array_equal(plan.chunk_system(4, 6).params["phase"], [[0.0, 1.0], [0.0, 1.0]])
    both = Plan(parse_spec(spec_text('"phase[0]" = { values = [0.1, 0.2] }, "phase[1]" = { values = [0.3] }',
                                     members=2))).chunk_system(0, 2)
    np.testing.assert_array_equal(both.params["phase"], [[0.1, 0.3], [0.2, 0.3]])


def test_component_sweep_run_stores_its_coordinate_and_maps_lambda(tmp_path):
    store = tmp_path / "component.zarr"
    lyapunov = '\n[analysis]\nlyapunov = { d0 = 1e-8, renormalise_every = 5 }\n'
    path = tmp_path / "component.toml"
    path.write_text(spec_text('"phase[1]" = { values = [0.5, 1.5] }, "amplitude[0]" = { values = [0.5, 1.0] }',
                              members=4, t_end=0.2, store=store, analysis=lyapunov))
    ds = ensemble.run(str(path), stream=io.StringIO())
    np.testing.assert_array_equal(ds["phase[1]"].values, [0.5, 0.5, 1.5, 1.5])
    np.testing.assert_array_equal(ds["amplitude[0]"].values, [0.5, 1.0, 0.5, 1.0])
    assert ds["phase[1]"].dims == ("member",) and ds["phase[1]"].attrs["units"] == "rad"
    assert int(ds.status.max()) == 0 and np.all(np.isfinite(ds.energy.values))
    grid = lyapunov_map(ds)
    assert set(grid.median_lyapunov.dims) == {"phase[1]", "amplitude[0]"}
    np.testing.assert_array_equal(grid["phase[1]"].values, [0.5, 1.5])
    write_report([str(store)], str(tmp_path / "report"))
    assert (tmp_path / "report" / "component.zarr_lyapunov_map.png").stat().st_size > 0
    assert parse_spec(ds.attrs["spec"]).identity() == ensemble.load_spec(path).identity()
