"""Users' models in joint coordinates (issue 33): the example restating multibody's two-link pendulum on a cart
runs as the built-in does with the midpoint and rk4; a damped, driven oscillator against its closed form; the
derived potential gradient against central differences; bad models refused in one line."""

from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from armillary.jobs.cli import main
from armillary.kernels import InvalidInput, get_system, integrate, methods_for
from armillary.kernels.models import build_model
from armillary.kernels.models.checks import check_states, gradient_error

from ensemble_cases import runner_spec
from multibody_cases import MULTIBODY_KERNELS

pytestmark = MULTIBODY_KERNELS  # the cart-pendulum model is compared with the built-in multibody kernels

CART = Path(__file__).resolve().parent.parent / "examples" / "models" / "cart_pendulum.py"


def cart_states(members: int) -> dict:
    """The built-in preset's release, all but the first member's angles moved by about 0.05 rad."""
    builtin = get_system("multibody", "n_link_pendulum_on_cart")
    state = {name: np.repeat(np.asarray(value)[np.newaxis], members, axis=0)
             for name, value in builtin.initial_state().items()}
    moves = 0.05 * np.random.default_rng(3).standard_normal((members, 3))
    moves[0] = 0.0
    state["q"] = state["q"] + moves
    return state


def relative_difference(a, b) -> float:
    return float(np.abs(a - b).max() / np.abs(b).max())


@pytest.mark.parametrize("method, dt", [("rk4", 1e-3), ("midpoint", 5e-4)])
def test_cart_pendulum_model_runs_as_the_builtin_two_link_pendulum_on_a_cart(method, dt):
    """10⁴ steps from the chaotic release (90° and 170° from upright) and 7 neighbours: Kane's equations of the
    built-in tree and Lagrange's of the model's M(q) and V(q) round differently, and chaos grows that (measured
    at 10 s with rk4: q 2.9e-12, u 5.0e-12, energy 1.1e-13 of E0; the midpoint's Newton stops at its round-off
    floor, which the trajectories amplify faster: 7e-11 in q at 10 s, hence its 5 s horizon)."""
    builtin = get_system("multibody", "n_link_pendulum_on_cart")
    derived = get_system(build_model(CART.read_text(), str(CART)).name, "initial")
    np.testing.assert_array_equal(derived.initial_state()["q"], builtin.initial_state()["q"])
    state = cart_states(8)
    expected = integrate(builtin, method, state, dt, 10_000, 1000)
    result = integrate(derived, method, state, dt, 10_000, 1000)
    assert np.all(result.status == 0) and np.all(expected.status == 0)
    for name in ("q", "u"):
        assert relative_difference(result.state[name], expected.state[name]) <= 1e-10, name
    assert np.abs(result.energy - expected.energy).max() <= 1e-12 * np.abs(expected.energy[:, :1]).min()
    alone = integrate(derived, method, {name: value[5:6] for name, value in state.items()}, dt, 10_000, 1000)
    np.testing.assert_array_equal(alone.state["q"][0], result.state["q"][5])  # its bits are its own


def test_cart_pendulum_checks_and_labels():
    """At random states the derived ∂V/∂q matches central differences (``armillary check``'s test) and M(q) is
    positive definite; the model labels its coordinates as the built-in does."""
    derived = get_system(build_model(CART.read_text(), str(CART)).name, "initial")
    rng = np.random.default_rng(5)
    state = {"q": rng.uniform(-3, 3, (6, 3)), "u": rng.standard_normal((6, 3))}
    check_states(derived, state)
    assert gradient_error(derived, state) <= 1e-8
    assert derived.definition.dimension_labels(derived.params, 3) == \
        get_system("multibody", "n_link_pendulum_on_cart").definition.dimension_labels(
            get_system("multibody", "n_link_pendulum_on_cart").params, 3)


OSCILLATOR = '''
"""A damped, driven mass on a spring."""
from armillary.model import cos
space = "generalised"
coordinates = 1
parameters = {"m": 2.0, "k": 8.0, "c": 0.4, "F": 1.5, "nu": 1.3}
def mass_matrix(q, p):
    return [[p.m]]
def potential(q, p):
    return p.k / 2 * q[0] * q[0]
def generalised_force(t, q, u, p):
    return [p.F * cos(p.nu * t) - p.c * u[0]]
'''


def driven_oscillator(t, x0, v0, m, k, c, force, nu):
    """x(t) of m ẍ + c ẋ + k x = F cos ν t, x(0) = x0, ẋ(0) = v0 (underdamped): the steady response plus the
    decaying transient."""
    across = (k - m * nu * nu) ** 2 + (c * nu) ** 2
    a, b = force * (k - m * nu * nu) / across, force * c * nu / across
    gamma = c / (2 * m)
    omega = np.sqrt(k / m - gamma * gamma)
    c1 = x0 - a
    c2 = (v0 - b * nu + gamma * c1) / omega
    return a * np.cos(nu * t) + b * np.sin(nu * t) + np.exp(-gamma * t) * (c1 * np.cos(omega * t)
                                                                           + c2 * np.sin(omega * t))


def test_damped_driven_oscillator_follows_the_closed_form_and_the_midpoint_refuses_it():
    """rk4 at 10 ms over 20 s (in two calls, the second continuing the time origin) against the closed form:
    fourth order, 1e-8 at this step; the midpoint, whose canonical force must be autonomous, refuses the
    time-dependent Q by name."""
    system = get_system(build_model(OSCILLATOR, "oscillator.py").name)
    assert "midpoint" not in methods_for(system.definition) and "rk4" in methods_for(system.definition)
    state = {"q": np.array([[0.3]]), "u": np.array([[-0.2]])}
    with pytest.raises(InvalidInput, match="'midpoint' does not support"):
        integrate(system, "midpoint", state, 0.01, 10)
    first = integrate(system, "rk4", state, 0.01, 1000, 10)
    second = integrate(system, "rk4", first.final, 0.01, 1000, 10, restart=True, start_step=1000)
    t = np.concatenate([first.time, 10.0 + second.time[1:]])
    q = np.concatenate([first.q[0, :, 0], second.q[0, 1:, 0]])
    np.testing.assert_allclose(q, driven_oscillator(t, 0.3, -0.2, 2.0, 8.0, 0.4, 1.5, 1.3), rtol=0, atol=1e-8)


def test_a_cart_pendulum_spec_runs_through_the_runner_with_labelled_coordinates(tmp_path):
    """``[system] model`` with the midpoint (two chunks): the store labels the coordinates, and its members hold
    the bits of ``integrate`` from the stored initial states (dt 10 ms, 100 steps)."""
    spec = runner_spec(str(tmp_path), "cart.toml", f'model = "{CART}"', ["q", "u", "energy"], method="midpoint")
    assert main(["run", spec]) == 0
    ds = xr.open_zarr(str(tmp_path / "cart.zarr"))
    assert list(ds.coordinate.values) == ["cart_x", "link_1_angle", "link_2_angle"]
    derived = get_system(build_model(CART.read_text(), str(CART)).name)
    result = integrate(derived, "midpoint", {"q": ds.q0.values, "u": ds.u0.values}, 0.01, 100, 100)
    np.testing.assert_array_equal(ds.q.values[:, -1], result.final["q"])
    np.testing.assert_array_equal(ds.energy.values[:, -1], result.energy[:, -1])


GENERALISED_MODEL = '''
space = "generalised"
coordinates = 2
parameters = {"m": 1.0}
def mass_matrix(q, p):
    return [[p.m, 0.0], [0.0, p.m]]
def potential(q, p):
    return q[0] * q[1]
'''


@pytest.mark.parametrize("replace, by, message", [
    ("coordinates = 2", "bodies = 2", "coordinates = <number of coordinates> is required"),
    ("[[p.m, 0.0], [0.0, p.m]]", "[[p.m, 0.5], [0.0, p.m]]", "mass_matrix(q, p) must be symmetric"),
    ("[[p.m, 0.0], [0.0, p.m]]", "[p.m, p.m, p.m]", "mass_matrix(q, p) must return a 2×2 matrix"),
    ("return q[0] * q[1]", "return q", "potential(q, p) must return a scalar"),
    ("def potential", "def generalised_force(t, q, u, p):\n    return [1.0]\ndef potential",
     "generalised_force(t, q, u, p) must return 2 values, one per coordinate"),
    ("def potential", "coordinate_names = ['x', 'x']\ndef potential",
     "coordinate_names must be 2 different non-empty strings"),
    ("def mass_matrix", "def mass_matrx", "a generalised model must define mass_matrix(…)"),
])
def test_bad_generalised_models_are_refused_in_one_line(replace, by, message):
    assert replace in GENERALISED_MODEL
    with pytest.raises(InvalidInput) as refused:
        build_model(GENERALISED_MODEL.replace(replace, by), "bad.py")
    assert refused.value.field == "system.model" and "\n" not in str(refused.value)
    assert f"bad.py: {message}" in refused.value.message, refused.value.message


def test_a_mass_matrix_indefinite_at_a_state_is_refused_naming_the_member():
    system = get_system(build_model(GENERALISED_MODEL.replace("[[p.m, 0.0], [0.0, p.m]]", "[[p.m, q[0]], [q[0], p.m]]"),
                                    "indefinite.py").name)
    state = {"q": np.array([[0.1, 0.0], [3.0, 0.0]]), "u": np.zeros((2, 2))}
    with pytest.raises(InvalidInput, match=r"indefinite.py: mass_matrix\(q, p\) is not positive definite at the "
                                           r"initial state of member 1 \(least eigenvalue -2\)"):
        check_states(system, state)
