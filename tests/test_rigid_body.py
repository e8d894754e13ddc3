"""Rigid bodies on SO(3): the space, free_rigid_body and heavy_top, lgvi against closed forms and the
classical methods, and the ensemble guarantees through the store (chunks, workers, segments, kill -9)."""

import io
import json
import os

import numpy as np
import pytest
import xarray as xr
from scipy.special import ellipk

from armillary import ensemble
from armillary.ensemble.analysis import momentum_error
from armillary.ensemble.plan import Plan
from armillary.kernels import METHODS, SYSTEMS, InvalidInput, get_system, integrate, methods_for
from armillary.kernels.spaces import ROTATION
from armillary.kernels.spaces.rotation import exp_right

from ensemble_cases import kill_9_and_resume_match, run_stores_alike, write_spec

RIGID = [name for name, definition in SYSTEMS.items() if definition.space is ROTATION]
PRESETS = {"free_rigid_body": "dzhanibekov", "heavy_top": "chaotic"}
PAIRS = [(name, method) for name in RIGID for method in methods_for(SYSTEMS[name])]
STATE_NAMES = ("R", "Omega", "energy", "orthogonality_error", "R0", "Omega0", "status", "failed_step")


def initial(system, members=1):
    return {name: np.repeat(value[np.newaxis], members, 0) for name, value in system.initial_state().items()}


def random_attitudes(count, seed):
    rng = np.random.default_rng(seed)
    return exp_right(np.repeat(np.eye(3)[None, None], count, 0), rng.standard_normal((count, 1, 3)))


def test_every_method_declares_a_space_and_rigid_systems_have_their_methods():
    assert {m for name in RIGID for m in methods_for(SYSTEMS[name])} == {"lgvi", "rk2", "rk4", "rk45"}
    assert all(METHODS[m].spaces for m in METHODS)
    assert "lgvi" not in methods_for(SYSTEMS["spherical_chain"])


@pytest.mark.parametrize("name", RIGID)
def test_torque_matches_central_differences_of_the_potential(name):
    """M·η = −dV/dε of R exp(ε η̂): the torque is the (negative) gradient of V on SO(3)."""
    system = get_system(name, PRESETS[name], center_of_mass=[0.3, -0.2, 0.4]) if name == "heavy_top" \
        else get_system(name, PRESETS[name])
    definition = system.definition
    rotations = random_attitudes(4, 1)
    params = system.broadcast(4, 1)
    coef = np.ascontiguousarray(definition.coefficients(params, 1).T)

    def flat(r):
        return np.ascontiguousarray(ROTATION.flatten({"R": r, "Omega": np.zeros((4, 1, 3))}).T)

    def potential(r):
        out = np.empty(4)
        definition.potential(flat(r), 1, coef, np.zeros(1, np.int64), out)
        return out

    torque = np.empty((3, 4))
    definition.torque(flat(rotations), 1, coef, np.zeros(1, np.int64), torque)
    numeric = np.empty((3, 4))
    step = 1e-6
    for k in range(3):
        eta = np.zeros((4, 1, 3))
        eta[:, 0, k] = step
        numeric[k] = -(potential(exp_right(rotations, eta)) - potential(exp_right(rotations, -eta))) / (2 * step)
    scale = max(np.abs(torque).max(), 1.0)
    assert np.abs(torque - numeric).max() <= 1e-8 * scale


@pytest.mark.parametrize("name, method", PAIRS)
def test_every_rigid_pair_runs_with_finite_diagnostics(name, method):
    system = get_system(name, PRESETS[name])
    result = integrate(system, method, initial(system, 2), 1e-3, 50, 10)
    assert result.R.shape == (2, 6, 1, 3, 3) and result.Omega.shape == (2, 6, 1, 3)
    assert np.all(result.status == 0) and np.all(np.isfinite(result.energy))
    assert np.all(np.abs(result.energy[:, -1] - result.energy[:, 0]) <= 1e-6 * np.abs(result.energy[:, 0]))


def test_lgvi_stays_on_so3_and_rk4_leaves_it():
    system = get_system("heavy_top", "chaotic")
    lgvi = integrate(system, "lgvi", initial(system), 1e-3, 10_000, 100)
    rk4 = integrate(system, "rk4", initial(system), 1e-3, 10_000, 100)
    assert lgvi.orthogonality_error.max() <= 1e-13
    assert rk4.orthogonality_error.max() > 10 * lgvi.orthogonality_error.max()


def symmetric_top_error(h):
    """max |Ω(10 s) − closed form| for lgvi at step h: Ω₃ constant, Ω₁ + iΩ₂ turning at (C − A)Ω₃/A."""
    system = get_system("free_rigid_body", "symmetric_top")
    state = initial(system)
    omega0 = state["Omega"][0, 0]
    rate = (2.0 - 1.0) * omega0[2] / 1.0
    turned = (omega0[0] + 1j * omega0[1]) * np.exp(1j * rate * 10.0)
    exact = np.array([turned.real, turned.imag, omega0[2]])
    steps = int(round(10.0 / h))
    return np.abs(integrate(system, "lgvi", state, h, steps, steps).final["Omega"][0, 0] - exact).max()


def test_lgvi_is_second_order_on_the_symmetric_top():
    ratio = symmetric_top_error(0.01) / symmetric_top_error(0.005)
    assert 4 * 0.9 <= ratio <= 4 * 1.1, ratio


def test_lgvi_conserves_the_free_bodys_spatial_angular_momentum_and_casimir():
    system = get_system("free_rigid_body", "symmetric_top")
    result = integrate(system, "lgvi", initial(system), 1e-3, 100_000, 1000)
    momentum = system.momentum(result.state)
    assert np.abs(momentum - momentum[:, :1]).max() <= 1e-12 * np.linalg.norm(momentum[0, 0])
    body = np.einsum("ij,mtj->mti", np.diag([1.0, 1.0, 2.0]), result.Omega[:, :, 0])
    casimir = np.sum(body**2, axis=-1)
    assert np.abs(casimir - casimir[:, :1]).max() <= 1e-12 * casimir[0, 0]


def test_dzhanibekov_flip_period_matches_the_elliptic_integral():
    """Landau & Lifshitz §37: for L² > 2E I₂, Ω₂ ∝ sn(τ, k) with τ = t √((I₃ − I₂)(L² − 2E I₁)/(I₁I₂I₃)),
    k² = (I₂ − I₁)(2E I₃ − L²)/((I₃ − I₂)(L² − 2E I₁)): the period of a full flip-and-back is 4K(k) in τ."""
    system = get_system("free_rigid_body", "dzhanibekov")
    state = initial(system)
    inertia = np.array([1.0, 2.0, 3.0])
    omega = state["Omega"][0, 0]
    energy, momentum2 = 0.5 * np.sum(inertia * omega**2), np.sum((inertia * omega) ** 2)
    i1, i2, i3 = inertia if momentum2 > 2 * energy * inertia[1] else inertia[::-1]
    k2 = (i2 - i1) * (2 * energy * i3 - momentum2) / ((i3 - i2) * (momentum2 - 2 * energy * i1))
    period = 4 * ellipk(k2) * np.sqrt(i1 * i2 * i3 / ((i3 - i2) * (momentum2 - 2 * energy * i1)))
    result = integrate(system, "lgvi", state, 1e-3, 130_000, 1)
    spin = result.Omega[0, :, 0, 1]
    up = np.nonzero((spin[:-1] < 0) & (spin[1:] >= 0))[0]
    crossings = result.time[up] - spin[up] * (result.time[up + 1] - result.time[up]) / (spin[up + 1] - spin[up])
    assert len(crossings) >= 2
    assert np.all(np.abs(np.diff(crossings) / period - 1) < 0.01), (np.diff(crossings), period)


@pytest.mark.slow
def test_chaotic_heavy_top_lgvi_energy_bounded_rk4_drifts_over_a_million_steps():
    system = get_system("heavy_top", "chaotic")

    def growth(method):
        result = integrate(system, method, initial(system), 0.01, 1_000_000, 100)
        error = np.abs(result.energy[0] - result.energy[0, 0]) / abs(result.energy[0, 0])
        tenth = error.size // 10
        return error[-tenth:].max() / error[1:tenth].max(), result

    lgvi, result = growth("lgvi")
    rk4, _ = growth("rk4")
    assert lgvi <= 2.0 and rk4 > 5.0, (lgvi, rk4)
    # e·L, L = R J Ω: relative to |L| (the momentum's size; its vertical part itself may be near 0)
    vertical = system.momentum(result.state)[0, :, 0]
    from armillary.kernels.systems.rigid import spatial_angular_momentum
    size = np.linalg.norm(spatial_angular_momentum(result.state, system.broadcast(1, 1))[0, 0])
    assert np.abs(vertical - vertical[0]).max() <= 1e-12 * size


# ------------------------------------------------------------------------------------- bad input

def refused(field, call, *args, **kwargs):
    with pytest.raises(InvalidInput) as info:
        call(*args, **kwargs)
    assert info.value.field == field
    return str(info.value)


def test_attitudes_off_so3_are_refused_beyond_tolerance_and_reorthonormalised_within():
    system = get_system("heavy_top", "lagrange")
    state = initial(system)
    refused("R", integrate, system, "lgvi", {**state, "R": state["R"] * (1 + 1e-5)}, 1e-3, 10)
    result = integrate(system, "lgvi", {**state, "R": state["R"] * (1 + 1e-7)}, 1e-3, 1)
    assert result.orthogonality_error[0, 0] <= 1e-15
    assert "det" in refused("R", integrate, system, "lgvi", {**state, "R": -state["R"]}, 1e-3, 10)


@pytest.mark.parametrize("inertia, words", [([1.0, -1.0, 1.0], "positive definite"),
                                            ([1.0, 1.0, 3.0], "triangle inequality"),
                                            ([[1.0, 0.5, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]], "symmetric")])
def test_impossible_inertia_is_refused(inertia, words):
    assert words in refused("inertia", get_system, "free_rigid_body", inertia=inertia)


def test_a_method_of_another_space_is_refused_listing_those_that_fit():
    system = get_system("heavy_top", "lagrange")
    message = refused("method", integrate, system, "vi", initial(system), 1e-3, 10)
    assert all(name in message for name in ("lgvi", "rk4", "rk45"))


def test_missing_or_misnamed_state_variables_are_refused_listing_the_expected():
    system = get_system("heavy_top", "lagrange")
    state = initial(system)
    message = refused("state0", integrate, system, "lgvi", {"R": state["R"], "omega": state["Omega"]}, 1e-3, 10)
    assert "Omega (members, 1, 3)" in message and "R (members, 1, 3, 3)" in message and "omega" in message
    assert "(1, 1, 3, 3)" in refused("R", integrate, system, "lgvi", {**state, "R": state["R"][:, :, :2]}, 1e-3, 10)


# ------------------------------------------------------------------------------- through the store

TOP_SPEC = """
[system]
name = "heavy_top"
preset = "{preset}"

[integrator]
method = "lgvi"
dt = {dt}
t_end = {t_end}
save_every = {save_every}
checkpoint_every = {checkpoint_every}

[ensemble]
members = {members}
seed = 11
initial = "perturb"
scale = 1e-3
chunk = {chunk}

[output]
store = "{store}"
variables = {variables}
{analysis}
[cluster]
kind = "local"
workers = {workers}
"""


def top_spec(directory, name, *, preset="chaotic", dt=1e-3, t_end=0.2, save_every=10, checkpoint_every=50,
             members=6, chunk=3, workers=1, variables=("R", "Omega", "energy", "orthogonality_error"), analysis=""):
    store = os.path.join(directory, name.replace(".toml", ".zarr"))
    return write_spec(directory, name, text=TOP_SPEC.format(
        preset=preset, dt=dt, t_end=t_end, save_every=save_every, checkpoint_every=checkpoint_every, members=members,
        chunk=chunk, store=store, workers=workers, variables=json.dumps(list(variables)), analysis=analysis))


def test_heavy_top_stores_are_bitwise_equal_across_chunks_workers_and_segments(tmp_path):
    reference = run_stores_alike([top_spec(tmp_path, f"c{chunk}w{workers}s{segment}.toml", chunk=chunk,
                                           workers=workers, checkpoint_every=segment)
                                  for chunk, workers, segment in ((1, 1, 50), (6, 1, 200), (3, 2, 50), (2, 2, 100))],
                                 STATE_NAMES)
    # and equal to one uninterrupted kernel call from the same initial states
    plan = Plan(ensemble.load_spec(os.path.join(tmp_path, "c1w1s50.toml")))
    direct = integrate(get_system("heavy_top", "chaotic"), "lgvi", plan.initial_state(0, 6), 1e-3, 200, 10)
    assert np.array_equal(reference["R"], direct.R) and np.array_equal(reference["energy"], direct.energy)
    ds = xr.open_zarr(os.path.join(tmp_path, "c1w1s50.zarr"))
    assert ds.R.dims == ("member", "time", "body", "row", "col") and ds.Omega.dims == ("member", "time", "body", "xyz")
    assert ds.attrs["space"] == "rotation" and ds.R.attrs["units"] == "1" and ds.Omega.attrs["units"] == "rad/s"
    assert "Newton" in ds.attrs["status_meanings"]
    assert float(momentum_error(ds).max()) <= 1e-13


def test_kill_9_and_resume_of_a_heavy_top_run_is_bitwise(tmp_path):
    spec = top_spec(tmp_path, "long.toml", t_end=4.0, checkpoint_every=400, members=800, chunk=200,
                    workers=2, variables=("energy", "orthogonality_error"))
    kill_9_and_resume_match(spec, str(tmp_path), ("energy", "orthogonality_error", "R0", "Omega0", "status"))


@pytest.mark.slow
def test_lyapunov_through_the_store_separates_integrable_from_chaotic_tops(tmp_path):
    analysis = "[analysis]\nlyapunov = { d0 = 1e-8, renormalise_every = 10 }\n"
    medians = {}
    for preset in ("lagrange", "chaotic"):
        spec = top_spec(tmp_path, f"{preset}.toml", preset=preset, dt=2e-3, t_end=100.0, save_every=500,
                        checkpoint_every=25_000, members=16, chunk=8, workers=2, variables=("energy",),
                        analysis=analysis)
        ds = ensemble.run(spec, stream=io.StringIO())
        medians[preset] = float(np.median(ds.lyapunov.values))
    t_end = 100.0
    assert medians["lagrange"] < 1.5 * np.log(t_end) / t_end, medians
    assert medians["chaotic"] > 10 / t_end, medians
