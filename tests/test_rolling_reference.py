"""The rolling ball (kernels.systems.rolling_ball) against an independent plain-numpy implementation of
digest_004 §4 (tests/rolling_reference.py) under scipy's DOP853: every preset, and one mixed case that
the presets leave out (a full inertia tensor, a free mass pushed by a rail force, a straight rail and a
circle driven at a constant rate)."""

import numpy as np
import pytest

from armillary.kernels import get_system, integrate

from rolling_reference import reference_solution

#: 500 steps of 0.01 s sampled every 50: t = 0, 0.5, …, 5 s
DT, STEPS, SAVE_EVERY = 0.01, 500, 50
#: compared state variables (the quaternion of the reference turned into R)
COMPARED = ("R", "Omega", "contact", "theta", "theta_dot", "work")


def mixed_case():
    """A ball with a full inertia tensor and an offset shell centre of mass, a free mass on a horizontal
    circle pushed by Q = 0.2 N·m/rad, a mass oscillating along a diagonal straight rail and one turning on a
    vertical circle at 1.5 rad/s; started tilted 0.2 rad about E₂, spinning, off the origin."""
    system = get_system(
        "rolling_ball", radius=1.0, mass=2.0, inertia=[[0.6, 0.05, 0.0], [0.05, 0.7, 0.02], [0.0, 0.02, 0.8]],
        center_of_mass=[0.05, 0.0, -0.1],
        rails=[{"shape": "circle", "center": [0.0, 0.0, 0.1], "normal": [0.0, 0.0, 1.0], "radius": 0.4,
                "motion": "free"},
               {"shape": "line", "point": [0.0, 0.0, -0.2], "direction": [1.0, 1.0, 0.0], "length": 0.6},
               {"shape": "circle", "center": [0.0, 0.2, 0.0], "normal": [0.0, 1.0, 0.0], "radius": 0.3}],
        masses=[0.3, 0.4, 0.2], rail_force=[0.2, 0.0, 0.0], theta0=[0.0, 0.05, 0.4], amplitude=[0.0, 0.2, 0.0],
        frequency=[0.0, 3.0, 0.0], rate=[0.0, 0.0, 1.5])
    c, s = np.cos(0.2), np.sin(0.2)
    state = {"R": np.array([[c, 0.0, s], [0.0, 1.0, 0.0], [-s, 0.0, c]]), "Omega": np.array([0.3, -0.4, 0.6]),
             "contact": np.array([0.1, -0.2]), "clock": np.array(0.0), "work": np.array(0.0),
             "theta": np.array([0.2]), "theta_dot": np.array([0.3])}
    return system, state


def case(name):
    """(system, one member's state without a member axis) of a preset, or of ``mixed_case``."""
    if name == "mixed":
        return mixed_case()
    system = get_system("rolling_ball", name)
    return system, system.initial_state()


# Measured max |kernel − reference| over the 11 samples (rk45 rtol 1e-11, atol 1e-13 against DOP853 rtol =
# atol = 1e-12), and max |E − E_ref| / max |E_ref|:
#   case            R        Omega    contact  theta    theta_dot  work     energy (rel.)
#   chaplygin       1.3e-11  4.2e-12  5.2e-12  -        -          0        1.9e-11
#   routh_sphere    2.5e-11  2.9e-11  1.8e-10  -        -          0        3.4e-11
#   pendulum_drive  1.2e-11  1.6e-11  4.1e-12  -        -          1.7e-11  1.9e-12
#   free_masses     1.3e-11  2.2e-11  8.3e-12  2.2e-10  9.9e-10    0        1.8e-11
#   mixed           3.0e-12  1.1e-11  2.4e-12  3.8e-11  1.5e-10    6.4e-12  4.1e-12
# The reference's own energy balance max |E − E₀ − work| (digest §5.2) measured ≤ 3.4e-11 J.
@pytest.mark.parametrize("name", ["chaplygin", "routh_sphere", "pendulum_drive", "free_masses", "mixed"])
def test_kernels_equal_the_reference_over_five_seconds(name):
    """rk45 here and the reference's DOP853: R, Ω, contact, θ, θ̇ and work agree to 1e-8 at every 0.5 s over
    5 s, energies to 1e-9 of the largest |E|; the reference itself keeps E − E₀ − work within 1e-9 of it."""
    system, state = case(name)
    ours = integrate(system, "rk45", {k: v[np.newaxis] for k, v in state.items()}, DT, STEPS, SAVE_EVERY,
                     rtol=1e-11, atol=1e-13)
    assert ours.status[0] == 0
    reference, energy, _ = reference_solution(system, state, DT * STEPS, t_eval=ours.time)
    np.testing.assert_allclose(ours.state["clock"][0], reference["clock"], rtol=0, atol=1e-12)
    for variable in COMPARED:
        assert np.abs(ours.state[variable][0] - reference[variable]).max(initial=0.0) <= 1e-8, variable
    scale = np.abs(energy).max()
    assert np.abs(ours.energy[0] - energy).max() <= 1e-9 * scale
    assert np.abs(energy - energy[0] - reference["work"]).max() <= 1e-9 * scale
