"""Benettin shadows in the kernels, the store's Lyapunov variables, and their analysis."""

import io

import numpy as np
import pytest
import xarray as xr

from armillary import ensemble
from armillary.ensemble.analysis import chaos_threshold, lyapunov_map, lyapunov_summary
from armillary.ensemble.initial import shadow_directions
from armillary.ensemble.plan import Plan
from armillary.ensemble.report import write_report
from armillary.kernels import InvalidInput, get_system, integrate
from armillary.kernels.lyapunov import displaced_shadow
from armillary.kernels.spaces import SPHERE_PRODUCT

from ensemble_cases import BASE_SPEC


def final_exponent(system, q, omega, dt, steps, d0, every=10, method="vi", seed=1):
    state = {"q": q[np.newaxis], "omega": omega[np.newaxis]}
    directions = np.random.default_rng(seed).standard_normal((1, 2) + q.shape).reshape(1, -1)
    result = integrate(system, method, state, dt, steps, save_every=steps, outputs=("energy",),
                       shadow=displaced_shadow(system.space, state, directions, d0, every))
    assert result.status[0] == 0
    return result.lyapunov()[0, -1]


def test_displaced_shadow_is_on_the_tangent_bundle_at_distance_d0():
    system = get_system("spherical_chain", "paper")
    state = {name: np.repeat(a[np.newaxis], 4, axis=0) for name, a in system.initial_state().items()}
    directions = np.random.default_rng(0).standard_normal((4, 2, 2, 3)).reshape(4, -1)
    shadow = displaced_shadow(system.space, state, directions, 1e-6, 10)
    assert shadow.count == 1 and shadow.state["q"].shape == (4, 1, 2, 3)
    np.testing.assert_allclose(np.linalg.norm(shadow.state["q"], axis=-1), 1.0, atol=2e-16)
    np.testing.assert_allclose(np.sum(shadow.state["q"] * shadow.state["omega"], axis=-1), 0.0, atol=1e-15)
    # the displacement obeys the linearised constraints, so putting the shadow on T(S²)ⁿ changes its
    # length at second order: by O(d0 · |ω|) relative = O(1e-6)
    np.testing.assert_allclose(shadow.reference, 1e-6, rtol=1e-6)
    first = {name: value[:, 0] for name, value in shadow.state.items()}
    np.testing.assert_array_equal(shadow.reference[:, 0], SPHERE_PRODUCT.distance(state, first))


def test_single_spherical_pendulum_is_regular():
    """An integrable system: separations grow polynomially, so λ(1000 s) ≈ p ln(t)/t stays < 0.01 1/s."""
    pendulum = get_system("spherical_chain", m=[1.0], l=[1.0])
    q = np.array([[np.sin(1.0), 0.0, np.cos(1.0)]])
    omega = np.array([[0.3, 0.5, 0.0]])
    omega -= np.sum(q * omega) * q
    assert 0 <= final_exponent(pendulum, q, omega, 0.01, 100_000, 1e-8) < 0.01


def test_example_1_is_chaotic_and_lambda_does_not_depend_on_d0():
    """Example 1 over 100 s: λ > 0.1 1/s, and λ changes by < 10 % from d0 = 1e-10 to 1e-6 (the
    linearised separation: growth factors over each renormalisation interval are ratios of nearly
    parallel displacements, independent of their size)."""
    system = get_system("spherical_chain", "paper")
    state = system.initial_state()
    q, omega = state["q"], state["omega"]
    exponents = [final_exponent(system, q, omega, 0.01, 10_000, d0) for d0 in (1e-10, 1e-8, 1e-6)]
    assert min(exponents) > 0.1
    assert abs(exponents[2] - exponents[0]) < 0.1 * exponents[0]


@pytest.mark.parametrize("method", ["vi", "rk4"])
def test_shadows_restart_bitwise_and_leave_members_untouched(method):
    """Two calls chained through shadow_final equal one call (renormalising every 7 steps, so the
    split falls between renormalisations), and carrying shadows changes no bit of the members."""
    system = get_system("spherical_chain", "paper")
    state = {name: np.repeat(a[np.newaxis], 5, axis=0) for name, a in system.initial_state().items()}
    directions = np.random.default_rng(3).standard_normal((5, 2, 2, 3)).reshape(5, -1)
    shadow = displaced_shadow(system.space, state, directions, 1e-8, 7)
    whole = integrate(system, method, state, 0.01, 1000, 10, outputs=("energy",), shadow=shadow)
    first = integrate(system, method, state, 0.01, 500, 10, outputs=("energy",), shadow=shadow)
    second = integrate(system, method, {"q": first.q_final, "omega": first.omega_final}, 0.01, 500, 10,
                       outputs=("energy",), shadow=first.shadow_final, restart=True)
    assert second.shadow_final.step_offset == 1000
    np.testing.assert_array_equal(whole.log_growth[:, 50:], second.log_growth)
    np.testing.assert_array_equal(whole.shadow_final.state["q"], second.shadow_final.state["q"])
    plain = integrate(system, method, state, 0.01, 1000, 10, outputs=("energy",))
    np.testing.assert_array_equal(plain.energy, whole.energy)
    np.testing.assert_array_equal(plain.q_final, whole.q_final)
    assert np.all(np.isfinite(whole.log_growth)) and whole.log_growth.shape == (5, 101)


def test_bad_shadows_are_refused():
    system = get_system("spherical_chain", "paper")
    state = {name: a[np.newaxis] for name, a in system.initial_state().items()}
    shadow = displaced_shadow(system.space, state, np.ones((1, 12)), 1e-8, 10)
    with pytest.raises(InvalidInput, match="shadow: Benettin shadows need a fixed-step method, not 'rk45'"):
        integrate(system, "rk45", state, 0.01, 10, shadow=shadow)
    with pytest.raises(InvalidInput, match="d0: must be a number in"):
        displaced_shadow(system.space, state, np.ones((1, 12)), 0.0, 10)
    with pytest.raises(InvalidInput, match="renormalise_every: must be an integer >= 1"):
        displaced_shadow(system.space, state, np.ones((1, 12)), 1e-8, 0)


LYAPUNOV_SPEC = BASE_SPEC.replace("[cluster]", "[analysis]\nlyapunov = {{ d0 = 1e-8, renormalise_every = 7 }}\n\n"
                                  "[cluster]")


def test_store_lyapunov_equals_one_kernel_call_for_any_chunking(tmp_path):
    """Segments of 50 steps (not a multiple of 7) and chunks of 2 or 6 members give the store the
    bits of one uninterrupted kernel call from the plan's shadows."""
    stores = []
    for chunk in (2, 6):
        store = str(tmp_path / f"chunk{chunk}.zarr")
        spec = ensemble.parse_spec(LYAPUNOV_SPEC.format(method="vi", t_end=0.2, checkpoint_every=50, members=6,
                                                        chunk=chunk, store=store, variables='["energy"]', workers=2))
        ensemble.run(spec, stream=io.StringIO())
        stores.append(xr.open_zarr(store))
    plan = Plan(spec)
    state = plan.initial_state(0, 6)
    shadow = plan.initial_shadow(0, 6, state)
    count = plan.space.normal_count(3)
    np.testing.assert_array_equal(shadow_directions(count, [4], 7)[0], shadow_directions(count, np.arange(6), 7)[4])
    direct = integrate(plan.chunk_system(0, 6), "vi", state, 0.001, 200, 10, outputs=("energy",), shadow=shadow)
    expected = direct.lyapunov()
    for ds in stores:
        np.testing.assert_array_equal(ds.lyapunov_estimate.values, expected)
        np.testing.assert_array_equal(ds.lyapunov.values, expected[:, -1])
        np.testing.assert_array_equal(ds.energy.values, direct.energy)
        assert ds.lyapunov.attrs["units"] == "1/s"
    assert np.all(np.isfinite(expected[:, 1:])) and np.all(np.isnan(expected[:, 0]))


def test_lyapunov_map_chaotic_fraction_and_report(tmp_path):
    """A synthetic swept store with known exponents: medians and chaotic fractions per grid point,
    the headline cells, and the figures."""
    g = np.repeat([1.0, 2.0, 3.0], 4)
    exponents = np.array([0.001, 0.002, 0.003, 0.5,  0.2, 0.3, 0.4, 0.002,  0.6, 0.7, 0.8, 0.9])
    t = np.linspace(0.0, 100.0, 11)
    ds = xr.Dataset(
        {"energy": (("member", "time"), -1.0 + 1e-9 * np.sin(t)[np.newaxis] * np.ones((12, 1))),
         "status": ("member", np.zeros(12, np.int64)),
         "lyapunov": ("member", exponents, {"units": "1/s"}),
         "lyapunov_estimate": (("member", "time"), np.where(t > 0, exponents[:, np.newaxis] * (1 + 1 / (1 + t)),
                                                             np.nan))},
        coords={"member": np.arange(12), "time": t, "g": ("member", g)},
        attrs={"method": "vi", "system": "spherical_chain", "dt": 0.01})
    ds.chunk(member=6).to_zarr(tmp_path / "swept.zarr", mode="w")
    ds = xr.open_zarr(tmp_path / "swept.zarr")
    assert chaos_threshold(ds) == pytest.approx(0.1)
    grid = lyapunov_map(ds)
    np.testing.assert_allclose(grid.median_lyapunov.values, [0.0025, 0.25, 0.75])
    np.testing.assert_allclose(grid.chaotic_fraction.values, [0.25, 0.75, 1.0])
    summary = lyapunov_summary(ds)
    assert summary["chaotic_fraction"] == pytest.approx(8 / 12)
    assert summary["median_lyapunov"] == pytest.approx(np.median(exponents))

    out = tmp_path / "report"
    write_report([str(tmp_path / "swept.zarr")], str(out))
    for name in ("lyapunov.png", "lyapunov_running.png", "swept.zarr_lyapunov_map.png"):
        assert (out / name).stat().st_size > 10_000, name
    row = next(line for line in (out / "report.md").read_text().splitlines() if line.startswith("| swept.zarr"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert float(cells[12]) == pytest.approx(summary["median_lyapunov"], rel=1e-3)
    assert float(cells[13].rstrip("%")) / 100 == pytest.approx(8 / 12, abs=1e-3)
