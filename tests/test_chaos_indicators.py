"""Chaos indicators: Lyapunov spectra, MEGNO and SALI/GALI from k shadows (kernels), their store variables,
chaos_table and report, and ``[ensemble] until``.

The scientific checks run 200 s of the chaotic heavy top and of Example 1 with a few dozen members; the
same checks at 64 members are in benchmarks/chaos.py.
"""

import io
import json
import os

import numpy as np
import pytest
import xarray as xr

from armillary import ensemble
from armillary.ensemble.accessor import open_store
from armillary.ensemble.analysis import chaos_table, fraction_interval, median_interval, statistic_intervals
from armillary.ensemble.plan import Plan
from armillary.jobs.cli import main
from armillary.kernels import get_system, integrate
from armillary.kernels.lyapunov import displaced_shadow

from chaos_reference import scipy_lyapunov_spectrum
from ensemble_cases import (armillary, arrays, assert_bitwise_equal, kill_9_and_resume_match, runner_spec,
                            wait_for_records)

T_END = 200.0


def shadowed_run(name, preset, method, dt, count, members, t_end=T_END, samples=40, seed=0, directions_seed=None):
    """``members`` perturbed (1e-3) members of a preset with ``count`` shadows (d0 = 1e-8, renormalised every
    10 steps) over t_end: the Trajectory."""
    system = get_system(name, preset)
    rng = np.random.default_rng(seed)
    normals = system.space.normal_count(system.n_bodies)
    state = system.space.perturb(system.initial_state(), rng.normal(size=(members, normals)), 1e-3)
    # the same first direction whatever the count (drawn for the whole tangent dimension, then cut)
    directions = np.random.default_rng(seed if directions_seed is None else directions_seed).normal(
        size=(members, system.space.tangent_dimension(system.n_bodies), normals))[:, :count]
    n = int(round(t_end / dt))
    return integrate(system, method, state, dt, n, n // samples, outputs=("energy",),
                     shadow=displaced_shadow(system.space, state, directions, 1e-8, 10))


@pytest.fixture(scope="module")
def chaotic_top():
    """32 members of the chaotic top with its whole spectrum (6 exponents; the tangent space of SO(3) × R³)."""
    return shadowed_run("heavy_top", "chaotic", "lgvi", 2e-3, 6, 32)


def pair_sums(spectrum):
    """λ_i + λ_{2d+1−i} per member, (members, d), of spectra (members, 2d)."""
    half = spectrum.shape[1] // 2
    return spectrum[:, :half] + spectrum[:, ::-1][:, :half]


def test_chaotic_top_spectrum_pairs_and_its_largest_is_benettins(chaotic_top):
    """The symplectic pairing λ_i + λ_{7−i} = 0 within 2 % of λ₁ (the ensemble's median of each member's
    pair sum: a member's finite-time sums are O(1)/t); Σλ = 0 (lgvi preserves volume);
    λ₁ is the single shadow's bit for bit (Gram–Schmidt leaves the first displacement alone), and
    agrees with an independent single shadow's median within that median's 95 % interval."""
    spectrum = chaotic_top.spectrum()[:, -1]
    lambda_1 = np.median(spectrum[:, 0])
    assert 0.15 < lambda_1 < 0.3
    np.testing.assert_array_less(np.abs(np.median(pair_sums(spectrum), axis=0)), 0.02 * lambda_1)
    # volume-preserving: Σλ = 0 but for the finite differences' noise (shadows 1e-8 from states of size 1)
    np.testing.assert_allclose(spectrum.sum(axis=1), 0.0, atol=1e-5)
    single = shadowed_run("heavy_top", "chaotic", "lgvi", 2e-3, 1, 32)
    np.testing.assert_array_equal(single.lyapunov()[:, -1], spectrum[:, 0])
    other = shadowed_run("heavy_top", "chaotic", "lgvi", 2e-3, 1, 32, directions_seed=1).lyapunov()[:, -1]
    median, low, high = median_interval(other)
    assert low <= lambda_1 <= high and median != lambda_1


def test_chaotic_top_megno_grows_like_half_lambda_t_and_sali_vanishes(chaotic_top):
    """Chaotic members: ⟨Y⟩(t) grows like λt/2 (least-squares slope over the second half within 20 % of
    λ/2, ensemble medians); SALI falls like exp(−(λ₁ − λ₂) t) (Skokos 2001), below 1e-8 by 200 s for 90 %
    of the members (the one of 32 above it has (λ₁ − λ₂)·200 s ≈ 20: 1.3e-8)."""
    t = chaotic_top.time
    late = t >= T_END / 2
    slopes = np.polyfit(t[late], chaotic_top.megno[:, late].T, 1)[0]
    spectrum = chaotic_top.spectrum()[:, -1]
    assert np.median(slopes) == pytest.approx(np.median(spectrum[:, 0]) / 2, rel=0.2)
    gap = spectrum[:, 0] - spectrum[:, 1]
    sali = chaotic_top.sali[:, -1]
    assert np.corrcoef(gap, np.log(sali))[0, 1] < -0.5  # the faster the gap, the smaller SALI
    assert np.mean(sali < 1e-8) >= 0.9 and np.median(sali) < 1e-11


@pytest.mark.parametrize("preset", ["lagrange", "kovalevskaya"])
def test_integrable_tops_have_no_exponent_above_log_growth(preset):
    """Regular orbits separate polynomially, d ∝ t^p: every exponent's ensemble median is below
    1.5 ln T / T (0.040 1/s at 200 s); SALI stays away from 0 (above 1e-3 for the Lagrange top; one
    Kovalevskaya member of 8 dips to 4e-4, still 10⁴ times above the chaotic top's by then)."""
    run = shadowed_run("heavy_top", preset, "lgvi", 2e-3, 6, 8)
    spectrum = run.spectrum()[:, -1]
    np.testing.assert_array_less(np.abs(np.median(spectrum, axis=0)), 1.5 * np.log(T_END) / T_END)
    assert np.all(run.sali.min(axis=1) > (1e-3 if preset == "lagrange" else 1e-4))


def test_regular_megno_tends_to_2():
    """⟨Y⟩ of quasi-periodic members tends to 2 (Cincotta & Simó 2000), slowly: the Lagrange top's median
    is 1.84 at 200 s and within 0.1 of 2 by 1000 s, far from the chaotic top's λt/2 ≈ 20."""
    run = shadowed_run("heavy_top", "lagrange", "lgvi", 1e-3, 2, 8, t_end=1000.0, samples=5)
    assert abs(np.median(run.megno[:, -1]) - 2) < 0.1
    assert np.all((run.megno[:, 1] > 1.2) & (run.megno[:, 1] < 2.8))
    assert np.all(run.sali[:, -1] > 1e-3)


def test_example_1_spectrum_pairs_and_matches_an_independent_reference():
    """Example 1 (the double spherical pendulum, 8-dimensional tangent space) by vi: the pairing within 2 %
    of λ₁ (medians of the members' pair sums), and the spectrum of its preset orbit from the variational
    equations integrated by scipy's DOP853 with QR re-orthonormalisation (tests/chaos_reference.py) lies
    within the finite-time spread (min–max) of 16 perturbed members' for its two positive exponents; the
    next two, which vanish as t → ∞ (energy, and the momentum about the vertical), are below 1.5 ln T / T
    (the reference's four: 0.0894, 0.0379, 0.0135, 0.0064 1/s)."""
    run = shadowed_run("spherical_chain", "paper", "vi", 1e-2, 8, 24, samples=4)
    spectrum = run.spectrum()[:, -1]
    lambda_1 = np.median(spectrum[:, 0])
    np.testing.assert_array_less(np.abs(np.median(pair_sums(spectrum), axis=0)), 0.02 * lambda_1)
    system = get_system("spherical_chain", "paper")
    state = system.initial_state()
    reference = scipy_lyapunov_spectrum(state["q"], state["omega"], system.params, T_END, 2, renormalise_dt=0.1)
    spread = spectrum[:16, :2]
    assert np.all((spread.min(axis=0) <= reference) & (reference <= spread.max(axis=0))), (reference, spread)
    assert np.all(np.abs(np.median(spectrum[:, 2:4], axis=0)) < 1.5 * np.log(T_END) / T_END)


def test_intervals():
    """The median's order-statistic interval and Wilson's interval, against their closed forms."""
    values = np.arange(100.0)
    median, low, high = median_interval(values)
    assert (median, low, high) == (49.5, 39.0, 60.0)  # order statistics ⌊50 − 9.8⌋ = 40 and ⌈51 + 9.8⌉ = 61
    fraction, low, high = fraction_interval(np.arange(100) < 30)
    assert fraction == 0.3 and low == pytest.approx(0.2189, abs=1e-4) and high == pytest.approx(0.3958, abs=1e-4)


INDICATORS = """
[analysis]
lyapunov = { d0 = 1e-8, renormalise_every = 7 }
lyapunov_spectrum = { count = 3, d0 = 1e-8, renormalise_every = 7 }
megno = { d0 = 1e-8, renormalise_every = 7 }
sali = { d0 = 1e-8, renormalise_every = 7 }
"""
TOP = 'name = "heavy_top"\npreset = "chaotic"'
STORED = ("lyapunov", "lyapunov_estimate", "lyapunov_spectrum", "lyapunov_spectrum_estimate", "megno", "megno_final",
          "sali", "gali", "energy", "status")


def indicator_spec(directory, name, *, chunk=3, workers=1, segment=20, t_end=1.0, members=6, extra=INDICATORS):
    path = runner_spec(str(directory), name, TOP, ["energy"], method="lgvi", segment=segment, chunk=chunk,
                       workers=workers, t_end=t_end, members=members)
    with open(path, "a") as handle:
        handle.write(extra)
    return path


def test_indicators_in_the_store_are_one_kernel_call_for_any_layout(tmp_path):
    """Every indicator over chunks of 1, 3 or 6 members, 1 or 2 workers and segments of 20 or 50 steps
    (renormalising every 7): the same bits, those of one kernel call from the plan's shadows; chaos_table
    and the report read them."""
    stores = []
    for chunk, workers, segment in ((1, 1, 20), (6, 1, 50), (3, 2, 20)):
        path = indicator_spec(tmp_path, f"c{chunk}w{workers}s{segment}.toml", chunk=chunk, workers=workers,
                              segment=segment)
        ensemble.run(path, stream=io.StringIO())
        stores.append(arrays(path.replace(".toml", ".zarr"), STORED))
    for other in stores[1:]:
        assert_bitwise_equal(other, stores[0])
    plan = Plan(ensemble.load_spec(path))
    assert plan.spec.shadows == {"count": 3, "d0": 1e-8, "renormalise_every": 7}
    state = plan.initial_state(0, 6)
    direct = integrate(plan.chunk_system(0, 6), "lgvi", state, 0.01, 100, 10, outputs=("energy",),
                       shadow=plan.initial_shadow(0, 6, state))
    first = stores[0]
    elapsed = plan.sample_steps * plan.spec.dt  # the store's times (steps × dt)
    np.testing.assert_array_equal(first["lyapunov_spectrum_estimate"], direct.spectrum(elapsed))
    np.testing.assert_array_equal(first["lyapunov_estimate"], direct.lyapunov(elapsed))
    np.testing.assert_array_equal(first["megno"], direct.megno)
    np.testing.assert_array_equal(first["megno_final"], direct.megno[:, -1])
    np.testing.assert_array_equal(first["sali"], direct.sali)
    np.testing.assert_array_equal(first["gali"], direct.gali)
    assert first["lyapunov_spectrum"].shape == (6, 3)
    table = chaos_table(open_store(path.replace(".toml", ".zarr")))
    np.testing.assert_allclose(table.median_spectrum.values[0], np.median(direct.spectrum(elapsed)[:, -1], axis=0))
    assert table.median_megno.values[0] == np.median(direct.megno[:, -1])
    out = tmp_path / "report"
    assert main(["report", path.replace(".toml", ".zarr"), "--out", str(out)]) == 0
    for figure in ("spectrum.png", "megno_sali.png"):
        assert (out / figure).stat().st_size > 10_000, figure


def test_indicators_resume_bitwise_after_kill_9(tmp_path):
    kill_9_and_resume_match(indicator_spec(tmp_path, "spec.toml", chunk=2, segment=10, t_end=1.0), str(tmp_path),
                            STORED)


def until_spec(directory, name, until="{ statistic = \"median_lyapunov\", half_width = 0.01, batch = 8, "
                                      "max_members = 400 }"):
    """The chaotic top over 20 s sized by ``until`` (batches of 8 members, chunks of 4)."""
    path = indicator_spec(directory, name, chunk=4, segment=500, t_end=20.0, members=8,
                          extra="[analysis]\nlyapunov = { d0 = 1e-8, renormalise_every = 10 }\n")
    text = open(path).read().replace("members = 8\n", f"until = {until}\n")
    with open(path, "w") as handle:
        handle.write(text)
    return path


@pytest.fixture(scope="module")
def until_run(tmp_path_factory):
    """The until spec run to its end: (spec path, store, the run's Dataset, what it printed)."""
    path = until_spec(tmp_path_factory.mktemp("until"), "until.toml")
    out = io.StringIO()
    ds = ensemble.run(path, stream=out)
    return path, path.replace(".toml", ".zarr"), ds, out.getvalue()


def test_until_stops_at_the_first_batch_that_knows_the_median(until_run, tmp_path):
    """The rule stops at the first batch where the median λ's 95 % interval is within ± 0.01; the store then
    reads as a fixed-size run of its members, bit for bit; status shows the interval."""
    path, store, ds, printed = until_run
    state = json.loads(xr.open_zarr(store).attrs["until"])
    members = state["members"]
    assert state["stopped"] and state["reason"] == "known" and members == ds.sizes["member"] == 8 * state["batches"]
    assert 2 <= state["batches"] < 50

    def half_width(batches):
        interval = statistic_intervals(open_store(store, until=dict(state, batches=batches)), "median_lyapunov")[0]
        return (interval["high"] - interval["low"]) / 2

    assert half_width(state["batches"]) <= 0.01 < min(half_width(b) for b in range(1, state["batches"]))
    fixed = runner_spec(str(tmp_path), "fixed.toml", TOP, ["energy"], method="lgvi", segment=500, chunk=4,
                        t_end=20.0, members=members)
    with open(fixed, "a") as handle:
        handle.write("[analysis]\nlyapunov = { d0 = 1e-8, renormalise_every = 10 }\n")
    expected = ensemble.run(fixed, stream=io.StringIO())
    for name in ("lyapunov", "lyapunov_estimate", "energy", "status", "R0", "Omega0"):
        np.testing.assert_array_equal(ds[name].values, expected[name].values)
    assert "stopping: the statistic is known at every point" in printed
    process = armillary("status", store)
    text, _ = process.communicate(timeout=120)
    assert f"until         median_lyapunov within ± 0.01: {members} members" in text and "stopped: known" in text


def test_until_resumed_after_kill_9_stops_at_the_same_size(until_run, tmp_path):
    import psutil
    import signal

    _, reference, _, _ = until_run
    expected = json.loads(xr.open_zarr(reference).attrs["until"])
    path = until_spec(tmp_path, "killed.toml")
    store = path.replace(".toml", ".zarr")
    process = armillary("run", path)
    wait_for_records(store, 3)  # within the second batch (2 chunks per batch)
    workers = psutil.Process(process.pid).children(recursive=True)
    process.send_signal(signal.SIGKILL)
    process.wait()
    psutil.wait_procs(workers, timeout=15)
    process = armillary("run", path)
    _, err = process.communicate(timeout=600)
    assert process.returncode == 0, err
    resumed = json.loads(xr.open_zarr(store).attrs["until"])
    assert (resumed["members"], resumed["intervals"]) == (expected["members"], expected["intervals"])
    assert_bitwise_equal(arrays(store, ("lyapunov", "energy")), arrays(reference, ("lyapunov", "energy")))


@pytest.mark.parametrize("change, field", [
    (("count = 3", "count = 7"), "analysis.lyapunov_spectrum.count"),
    (('method = "lgvi"', 'method = "rk45"'), "analysis.lyapunov"),
    (("", "until = { statistic = \"median_megno\", half_width = 0.01, batch = 3, max_members = 6 }"),
     "ensemble.until.statistic"),
    (("", "until = { statistic = \"median_lyapunov\", half_width = 0.0, batch = 3, max_members = 6 }"),
     "ensemble.until.half_width"),
])
def test_bad_indicator_input_is_one_line_exit_2_nothing_written(tmp_path, capsys, change, field):
    path = indicator_spec(tmp_path, "bad.toml", extra=INDICATORS.replace("megno = { d0 = 1e-8, renormalise_every = 7 }\n", ""))
    text = open(path).read()
    old, new = change
    text = text.replace(old, new) if old else text.replace("members = 6\n", new + "\n")
    with open(path, "w") as handle:
        handle.write(text)
    capsys.readouterr()
    assert main(["run", path]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"armillary: {field}:") and "\n" not in err, err
    assert not os.path.exists(path.replace(".toml", ".zarr"))
