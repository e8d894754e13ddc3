"""Bad input is refused before any compute, with a message naming the field; divergence is data."""

import dataclasses

import numpy as np
import pytest

from conftest import case, ensemble
from armillary.kernels import InvalidInput, get_system, integrate
from armillary.kernels.status import VI_STEP_INFEASIBLE


def refused(field, call, *args, **kwargs):
    with pytest.raises(InvalidInput) as info:
        call(*args, **kwargs)
    assert info.value.field == field
    assert str(info.value).startswith(f"{field}:")
    return str(info.value)


def test_unknown_system_preset_parameter_and_method():
    assert "sphere_nbody" in refused("system", get_system, "pendulum")
    assert "paper" in refused("preset", get_system, "sphere_nbody", "book")
    refused("mass", get_system, "sphere_nbody", "paper", mass=[1, 1, 1])
    system, q, omega = case("sphere_nbody")
    assert "rk45" in refused("method", integrate, system, "euler", {"q": q, "omega": omega}, 1e-3, 10)
    refused("rtol", integrate, system, "vi", {"q": q, "omega": omega}, 1e-3, 10, rtol=1e-3)


def test_q_off_the_sphere_is_refused_beyond_tolerance_and_normalised_within():
    system, q, omega = case("sphere_nbody")
    refused("q0", integrate, system, "vi", {"q": q * (1 + 1e-5), "omega": omega}, 1e-3, 10)
    result = integrate(system, "vi", {"q": q * (1 + 1e-7), "omega": omega}, 1e-3, 1)
    np.testing.assert_allclose(np.linalg.norm(result.q[0, 0], axis=-1), 1.0, rtol=0, atol=1e-15)


def test_omega_not_tangent_is_refused_beyond_tolerance_and_projected_within():
    system, q, omega = case("sphere_nbody")
    refused("omega0", integrate, system, "vi", {"q": q, "omega": omega + 1e-5 * q}, 1e-3, 10)
    result = integrate(system, "vi", {"q": q, "omega": omega + 1e-8 * q}, 1e-3, 1)
    assert result.tangency_error[0, 0] <= 1e-15


def test_inertia_that_is_not_positive_definite_is_refused():
    system = get_system("spherical_chain", "paper")
    indefinite = dataclasses.replace(system.definition, inertia=lambda params, n: np.array([[[1.0, 2.0], [2.0, 1.0]]]))
    state = system.initial_state()
    q, omega = state["q"], state["omega"]
    broken = dataclasses.replace(system, definition=indefinite)
    refused("inertia", integrate, broken, "vi", {"q": q[None], "omega": omega[None]}, 0.01, 10)


@pytest.mark.parametrize("field, params", [("m", {"m": [1.0, -1.0]}), ("l", {"l": [9.81, 0.0]}), ("g", {"g": "x"})])
def test_non_positive_masses_and_lengths_are_refused(field, params):
    refused(field, get_system, "spherical_chain", "paper", **params)


@pytest.mark.parametrize("field, dt, n_steps", [("dt", 0.0, 10), ("dt", -1e-3, 10), ("n_steps", 1e-3, 0),
                                                ("n_steps", 1e-3, 2.5)])
def test_non_positive_dt_and_n_steps_are_refused(field, dt, n_steps):
    system, q, omega = case("sphere_nbody")
    refused(field, integrate, system, "vi", {"q": q, "omega": omega}, dt, n_steps)


def test_wrong_shapes_are_refused():
    system, q, omega = case("sphere_nbody")
    refused("q", integrate, system, "vi", {"q": q[0], "omega": omega[0]}, 1e-3, 10)
    refused("q", integrate, system, "vi", {"q": q[:, :2], "omega": omega[:, :2]}, 1e-3, 10)
    refused("omega", integrate, system, "vi", {"q": q, "omega": omega[:, :, :2]}, 1e-3, 10)
    two_bodies = get_system("sphere_nbody", m=[1.0, 1.0])
    assert "(1, 2, 3)" in refused("q", integrate, two_bodies, "vi", {"q": q, "omega": omega}, 1e-3, 10)


def test_a_diverging_member_is_recorded_and_leaves_the_others_untouched():
    system, q, omega = case("sphere_nbody")
    qs, ws = ensemble(q, omega, 200)
    reference = integrate(system, "vi", {"q": qs, "omega": ws}, 1e-3, 500, 10)
    ws[7] *= 2000.0  # ‖hω‖ > 1: no real solution of (29)
    result = integrate(system, "vi", {"q": qs, "omega": ws}, 1e-3, 500, 10)
    assert result.status[7] == VI_STEP_INFEASIBLE and result.failed_step[7] == 1
    assert np.all(np.isnan(result.energy[7, 1:]))
    others = np.arange(200) != 7
    assert np.all(result.status[others] == 0) and np.all(result.failed_step[others] == -1)
    np.testing.assert_array_equal(result.q[others], reference.q[others])
    np.testing.assert_array_equal(result.energy[others], reference.energy[others])


def test_per_member_parameters_match_separate_runs():
    base = get_system("spherical_chain", "paper")
    state = base.initial_state()
    q, omega = state["q"], state["omega"]
    g = np.array([9.81, 3.7, 1.62])
    members = {"q": np.repeat(q[None], 3, 0), "omega": np.repeat(omega[None], 3, 0)}
    swept = integrate(base.with_params(g=g), "rk4", members, 0.01, 100, 10)
    for k in range(3):
        alone = integrate(base.with_params(g=g[k]), "rk4", {"q": q[None], "omega": omega[None]}, 0.01, 100, 10)
        np.testing.assert_array_equal(swept.energy[k], alone.energy[0])
