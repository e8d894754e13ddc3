"""One suite of invariants run against every registered (S²)ⁿ system and every integrator that steps it."""

import numpy as np
import pytest

from conftest import ALL_SYSTEM_METHODS, ALL_SYSTEMS, SPHERE_SYSTEMS, STEP, VI_SYSTEMS, case
from armillary.kernels import SYSTEMS, integrate


def random_configuration(system, q, rng):
    """A random point of (S²)ⁿ near the case's configuration (nearby so singular potentials stay finite)."""
    dq = 0.05 * rng.standard_normal((4,) + q.shape[1:])
    qs = q + dq
    return qs / np.linalg.norm(qs, axis=-1, keepdims=True)


@pytest.mark.parametrize("name", ALL_SYSTEMS)
def test_gradient_matches_central_differences(name):
    system, q, _ = case(name)
    qs = random_configuration(system, q, np.random.default_rng(1))
    gradient = system.gradient(qs)
    numeric = np.empty_like(qs)
    for i in range(qs.shape[1]):
        for k in range(3):
            step = 1e-6
            plus, minus = qs.copy(), qs.copy()
            plus[:, i, k] += step
            minus[:, i, k] -= step
            numeric[:, i, k] = (system.potential(plus) - system.potential(minus)) / (2 * step)
    scale = np.linalg.norm(gradient.reshape(4, -1), axis=1)
    error = np.linalg.norm((gradient - numeric).reshape(4, -1), axis=1)
    assert np.all(error <= 1e-6 * scale), error / scale


@pytest.mark.parametrize("name", [name for name in SPHERE_SYSTEMS if SYSTEMS[name].configuration_inertia is not None])
def test_configuration_inertia_gradient_matches_central_differences(name):
    """∂m_jk/∂q_i of systems with configuration-dependent inertia against central differences of m(q)."""
    system, q, _ = case(name)
    qs = random_configuration(system, q, np.random.default_rng(2))
    n = qs.shape[1]
    params = system.broadcast(1, n)
    definition = system.definition

    def lanes(function, configurations, shape):
        out = np.empty(shape + (len(configurations),))
        coef = np.ascontiguousarray(np.repeat(definition.coefficients(params, n), len(configurations), 0).T)
        function(np.ascontiguousarray(np.moveaxis(configurations, 0, -1)), coef, definition.topology(params, n), out)
        return np.moveaxis(out, -1, 0)

    gradient = lanes(definition.configuration_inertia_gradient, qs, (n, n, n, 3))
    for i in range(n):
        for k in range(3):
            plus, minus = qs.copy(), qs.copy()
            plus[:, i, k] += 1e-6
            minus[:, i, k] -= 1e-6
            numeric = (lanes(definition.configuration_inertia, plus, (n, n))
                       - lanes(definition.configuration_inertia, minus, (n, n))) / 2e-6
            np.testing.assert_allclose(gradient[:, :, :, i, k], numeric, rtol=1e-6, atol=1e-6 * np.abs(numeric).max())


@pytest.mark.parametrize("name, method", ALL_SYSTEM_METHODS)
def test_every_method_runs_with_finite_diagnostics(name, method):
    system, q, omega = case(name)
    result = integrate(system, method, {"q": np.repeat(q, 2, 0), "omega": np.repeat(omega, 2, 0)}, STEP[name], 50, 10)
    assert result.energy.shape == (2, 6) and result.q.shape == (2, 6) + q.shape[1:]
    assert np.all(result.status == 0) and np.all(np.isfinite(result.energy))
    np.testing.assert_allclose(result.q[:, 0], np.repeat(q, 2, 0), rtol=0, atol=4e-16)  # q0 is renormalised
    # a 2nd-or-higher-order method moves the energy by far less than its size over 50 small steps
    assert np.all(np.abs(result.energy[:, -1] - result.energy[:, 0]) <= 1e-3 * np.abs(result.energy[:, 0]) + 1e-9)


@pytest.mark.parametrize("name", VI_SYSTEMS)
def test_vi_keeps_unit_length_and_tangency_over_ten_thousand_steps(name):
    system, q, omega = case(name)
    result = integrate(system, "vi", {"q": q, "omega": omega}, STEP[name], 10_000, 100)
    assert result.status[0] == 0
    assert result.unit_error.max() <= 1e-13
    assert result.tangency_error.max() <= 1e-12


def test_rk4_without_projection_drifts_off_the_sphere():
    system, q, omega = case("spherical_chain")
    result = integrate(system, "rk4", {"q": q, "omega": omega}, 0.01, 10_000, 100)
    assert result.unit_error.max() > 1e-10
    assert result.tangency_error.max() > 1e-10
