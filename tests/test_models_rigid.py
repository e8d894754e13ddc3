"""Users' models on SO(3)ⁿ and SE(3)ⁿ (issue 33): the example files restating heavy_top's chaotic top and
kirchhoff_body's ellipsoid run as the built-ins do; the derived loads against the built-ins' and against
central differences; applied torques and wrenches against closed forms; bad models refused in one line."""

from pathlib import Path

import numpy as np
import pytest

from armillary.jobs.cli import main
from armillary.kernels import InvalidInput, get_system, integrate, methods_for
from armillary.kernels.models import build_model
from armillary.kernels.models.checks import check_states, gradient_error
from armillary.kernels.spaces.rotation import exp_right, rotations_from_quaternions

from ensemble_cases import runner_spec

pytestmark = pytest.mark.xdist_group("models_rigid")

ROOT = Path(__file__).resolve().parent.parent
HEAVY_TOP = ROOT / "examples" / "models" / "heavy_top.py"
ELLIPSOID = ROOT / "examples" / "models" / "kirchhoff_ellipsoid.py"


def model(path: Path):
    """The model file at ``path``, built."""
    return build_model(path.read_text(), str(path))


def turned(system, members, scale):
    """Members of the system's preset state, each but the first turned by a random rotation (body frame) of
    about ``scale`` rad."""
    state = {name: np.repeat(value[np.newaxis], members, axis=0) for name, value in system.initial_state().items()}
    turns = scale * np.random.default_rng(11).standard_normal((members, 1, 3))
    turns[0] = 0.0
    state["R"] = exp_right(state["R"], turns)
    return state


def relative_difference(a, b) -> float:
    return float(np.abs(a - b).max() / np.abs(b).max())


# ---------------------------------------------------------------------------------------------- the examples

@pytest.mark.parametrize("method", ["lgvi", "rk4"])
def test_heavy_top_model_runs_as_the_builtin_chaotic_top(method):
    """10⁴ steps of 1 ms, 10 s of the chaotic top: the model sums its torque in another order than the built-in,
    and that round-off grows along the chaotic flow, to 1e-13 relative in the states at 10 s (measured over these
    128 members: R 1.1e-13, Ω 5.0e-14, energy 4.2e-14 of E0 with lgvi; 6.3e-14, 5.2e-14, 1.4e-14 with rk4); for
    the preset's member 1e-14 at 10 s, 3e-12 at 40 s and past 1e-10 only after about 60 s, so 10 s compares the
    evaluations well before the trajectories part."""
    builtin = get_system("heavy_top", "chaotic")
    derived = get_system(model(HEAVY_TOP).name, "initial")
    state = turned(builtin, 128, 0.05)  # lgvi steps blocks of 64 lanes, rk4 of 64 too
    np.testing.assert_array_equal(derived.initial_state()["R"], builtin.initial_state()["R"])
    expected = integrate(builtin, method, state, 1e-3, 10_000, 1000)
    result = integrate(derived, method, state, 1e-3, 10_000, 1000)
    assert np.all(result.status == 0) and np.all(expected.status == 0)
    for name in ("R", "Omega"):
        assert relative_difference(result.state[name], expected.state[name]) <= 1e-10, name
    assert np.abs(result.energy - expected.energy).max() <= 1e-12 * np.abs(expected.energy[:, :1]).min()
    alone = integrate(derived, method, {name: value[77:78] for name, value in state.items()}, 1e-3, 10_000, 1000)
    for name in ("R", "Omega"):  # a member's bits do not depend on the lanes it shares a block with
        np.testing.assert_array_equal(alone.state[name][0], result.state[name][77])


def test_kirchhoff_ellipsoid_model_runs_as_the_builtin_ellipsoid():
    """lgvi on SE(3), 10⁴ steps of 10 ms; the model's 𝕄 has the built-in's bits and its loads are zeros, so
    the runs agree (bit for bit when measured) over the whole 100 s of the unstable end-on translation."""
    builtin = get_system("kirchhoff_body", "ellipsoid")
    derived = get_system(model(ELLIPSOID).name, "initial")
    state = turned(builtin, 2, 0.1)
    expected = integrate(builtin, "lgvi", state, 0.01, 10_000, 1000)
    result = integrate(derived, "lgvi", state, 0.01, 10_000, 1000)
    assert np.all(result.status == 0) and np.all(expected.status == 0)
    for name in ("R", "x", "Omega", "V"):
        assert relative_difference(result.state[name], expected.state[name]) <= 1e-10, name
    assert np.abs(result.energy - expected.energy).max() <= 1e-12 * np.abs(expected.energy[:, :1]).min()


def lanes(system, state):
    """(flat x, coef, topology) of states with a member axis, for a definition's lane functions."""
    n = system.space.body_count(state)
    x = np.ascontiguousarray(system.space.flatten(state).T)
    coef = np.ascontiguousarray(system.definition.coefficients(system.broadcast(x.shape[1], n), n).T)
    return x, coef, np.zeros(1, np.int64)


def potential_and_loads(system, state, rows):
    x, coef, topology = lanes(system, state)
    potential, loads = np.empty(x.shape[1]), np.empty((rows, x.shape[1]))
    system.definition.potential(x, 1, coef, topology, potential)
    system.definition.torque(x, 1, coef, topology, loads)
    return potential, loads


def random_state(space, members, seed):
    rng = np.random.default_rng(seed)
    state = {"R": rotations_from_quaternions(rng.standard_normal((members, 1, 4))),
             "Omega": rng.standard_normal((members, 1, 3))}
    if space == "rigid_motion":
        state.update(x=rng.standard_normal((members, 1, 3)), V=rng.standard_normal((members, 1, 3)))
    return state


GRAVITY = list(np.array([0.2, -0.5, 1.0]) / np.linalg.norm([0.2, -0.5, 1.0]))
LOADED = {
    "heavy_top": ("chaotic", HEAVY_TOP, 3,
                  dict(inertia=[2.0, 1.5, 1.2], m=1.3, g=9.7, center_of_mass=[0.3, -0.2, 0.4],
                       gravity_direction=GRAVITY)),
    "kirchhoff_body": ("ellipsoid", ELLIPSOID, 6,
                       dict(m=50.0, g=9.81, buoyancy=400.0, center_of_mass=[0.1, -0.2, 0.05],
                            center_of_buoyancy=[0.0, 0.1, -0.1], gravity_direction=GRAVITY)),
}


@pytest.mark.parametrize("name", LOADED)
def test_derived_potential_loads_and_inertia_are_the_builtins_and_pass_the_checks(name):
    """With every load switched on (gravity off the axes, the centre of mass off O, buoyancy), at random states:
    V and the loads of the model equal the built-in's to round-off, so do the inertia headers; the derived
    torque (and force) match central differences along the retraction (the checks of ``armillary check``)."""
    preset, path, rows, params = LOADED[name]
    builtin = get_system(name, preset, **params)
    derived = get_system(model(path).name, "initial", **params)
    state = random_state(builtin.space.name, 5, 3)
    header = 28 if rows == 3 else 72
    assert relative_difference(lanes(derived, state)[1][:header], lanes(builtin, state)[1][:header]) <= 1e-15
    for ours, theirs in zip(potential_and_loads(derived, state, rows), potential_and_loads(builtin, state, rows)):
        assert relative_difference(ours, theirs) <= 1e-13
    check_states(derived, state)
    assert gradient_error(derived, state) <= 1e-8


@pytest.mark.parametrize("path", [HEAVY_TOP, ELLIPSOID])
def test_armillary_check_of_an_example_model_spec(tmp_path, capsys, path):
    spec = runner_spec(str(tmp_path), "spec.toml", f'model = "{path}"', ["R", "Omega", "energy"], method="lgvi")
    assert main(["check", spec]) == 0
    assert "∂V/∂q against central differences" in capsys.readouterr().out


TWO_BODIES = {
    "rotation": '''
from armillary.model import dot
space = "rotation"
bodies = 2
parameters = {"moments": [1.0, 2.0, 2.5], "k": 3.0, "tilt": 0.2}
def inertia(p):
    return [p.moments, [[2.0, p.tilt, 0.0], [p.tilt, 1.5, 0.0], [0.0, 0.0, 1.0]]]
def potential(R, p):
    a, b = R[0].T @ [0.0, 0.0, 1.0], R[1].T @ [0.0, 1.0, 0.0]
    return p.k / 2 * dot(a - b, a - b) + sum(R[1][i, i] for i in range(3))
''',
    "rigid_motion": '''
from armillary.model import dot
space = "rigid_motion"
bodies = 2
parameters = {"m": [1.0, 2.0], "k": 3.0}
def inertia(p):
    return [[1.0, 1.1, 1.2, p.m[0], p.m[0], p.m[0]], [2.0, 2.1, 2.2, p.m[1], p.m[1], p.m[1]]]
def potential(R, x, p):
    d = x[0] + R[0] @ [0.5, 0.0, 0.0] - x[1] - R[1] @ [0.0, 0.0, -0.3]
    return p.k / 2 * dot(d, d) + 9.81 * dot([0.0, 0.0, 1.0], p.m[0] * x[0] + p.m[1] * x[1])
''',
}


@pytest.mark.parametrize("space", TWO_BODIES)
def test_two_bodies_inertias_in_every_form_and_their_loads_against_central_differences(space):
    """Two bodies (per-body rows of the state and the header), one inertia given by its diagonal and one as a
    matrix; and the refusal of an inertia made indefinite by one member's parameter values."""
    system = get_system(build_model(TWO_BODIES[space], f"two_{space}.py").name)
    rng = np.random.default_rng(7)
    members = 4
    state = {"R": rotations_from_quaternions(rng.standard_normal((members, 2, 4))),
             "Omega": rng.standard_normal((members, 2, 3))}
    if space == "rigid_motion":
        state.update(x=rng.standard_normal((members, 2, 3)), V=rng.standard_normal((members, 2, 3)))
    check_states(system, state)
    assert gradient_error(system, state) <= 1e-8
    coef = lanes(system, state)[1]
    if space == "rotation":
        np.testing.assert_array_equal(coef[:9, 0], np.diag([1.0, 2.0, 2.5]).ravel())
        np.testing.assert_array_equal(coef[28:37, 0], [2.0, 0.2, 0.0, 0.2, 1.5, 0.0, 0.0, 0.0, 1.0])
        with pytest.raises(InvalidInput, match=r"body 1 is not symmetric positive definite at the given parameters "
                                               r"\(member 1, least eigenvalue"):
            system.with_params(tilt=[0.2, 3.0])
    else:
        np.testing.assert_array_equal(np.diag(coef[72:108, 0].reshape(6, 6)), [2.0, 2.1, 2.2, 2.0, 2.0, 2.0])
        with pytest.raises(InvalidInput, match=r"body 0 is not symmetric positive definite at the given parameters "
                                               r"\(member 2, least eigenvalue"):
            system.with_params(m=[[1.0, 2.0], [1.0, 2.0], [-1.0, 2.0]])


# ---------------------------------------------------------------------------------------------- applied loads

APPLIED = {
    "rotation": '''
from armillary.model import sin
space = "rotation"
bodies = 1
parameters = {"A": 1.0, "C": 2.0, "k": 0.3, "amplitude": 0.5, "nu": 3.0}
def inertia(p):
    return [p.A, p.A, p.C]
def potential(R, p):
    return 0
def torque(t, R, Omega, p):
    return [-p.k * Omega[0][0], -p.k * Omega[0][1], p.amplitude * sin(p.nu * t) - p.k * Omega[0][2]]
''',
    "rigid_motion": '''
from armillary.model import sin
space = "rigid_motion"
bodies = 1
parameters = {"m": 2.0, "k": 0.6, "amplitude": 1.0, "nu": 3.0}
def inertia(p):
    return [1.0, 1.0, 1.0, p.m, p.m, p.m]
def potential(R, x, p):
    return 0
def wrench(t, R, x, Omega, V, p):
    return [0, 0, 0, p.amplitude * sin(p.nu * t) - p.k * V[0][0], -p.k * V[0][1], -p.k * V[0][2]]
''',
}


def damped_and_driven(t, start, a, drive, nu):
    """u(t) of u̇ = drive sin(ν t) − a u, u(0) = start, and its integral from 0."""
    scale = drive / (a * a + nu * nu)
    decay = np.exp(-a * t)
    value = start * decay + scale * (a * np.sin(nu * t) - nu * np.cos(nu * t) + nu * decay)
    integral = start * (1 - decay) / a + scale * (a * (1 - np.cos(nu * t)) / nu - np.sin(nu * t) + nu * (1 - decay) / a)
    return value, integral


@pytest.mark.parametrize("space", APPLIED)
def test_applied_loads_that_read_time_and_velocity_follow_the_closed_form(space):
    """A symmetric free body (A = B) with the torque (−kΩ₁, −kΩ₂, a sin νt − kΩ₃): C Ω̇₃ = a sin νt − kΩ₃, and
    |Ω⊥| decays as exp(−k t/A); a free body at rest in attitude 1 pushed along x by a sin νt − kV₁: the same
    equation for V₁, with x₁ its integral.  rk4 at 10 ms over 10 s, then 10 s more from step 1000 (the time
    origin of a continued run); lgvi refuses the model, whose applied loads it cannot take."""
    system = get_system(build_model(APPLIED[space], f"applied_{space}.py").name)
    assert "lgvi" not in methods_for(system.definition) and "rk4" in methods_for(system.definition)
    if space == "rotation":
        state = {"R": np.eye(3)[np.newaxis, np.newaxis], "Omega": np.array([[[0.4, 0.1, 1.0]]])}
    else:
        state = {"R": np.eye(3)[np.newaxis, np.newaxis], "x": np.zeros((1, 1, 3)), "Omega": np.zeros((1, 1, 3)),
                 "V": np.array([[[1.0, 0.0, 0.0]]])}
    with pytest.raises(InvalidInput, match="'lgvi' does not support"):
        integrate(system, "lgvi", state, 0.01, 10)
    first = integrate(system, "rk4", state, 0.01, 1000, 100)
    second = integrate(system, "rk4", first.final, 0.01, 1000, 100, restart=True, start_step=1000)
    t = np.concatenate([first.time, 10.0 + second.time[1:]])
    if space == "rotation":
        omega = np.concatenate([first.Omega[0, :, 0], second.Omega[0, 1:, 0]])
        expected = damped_and_driven(t, 1.0, 0.3 / 2.0, 0.5 / 2.0, 3.0)[0]
        np.testing.assert_allclose(omega[:, 2], expected, rtol=0, atol=1e-9)
        np.testing.assert_allclose(np.hypot(omega[:, 0], omega[:, 1]), np.hypot(0.4, 0.1) * np.exp(-0.3 * t),
                                   rtol=0, atol=1e-9)
    else:
        velocity = np.concatenate([first.V[0, :, 0], second.V[0, 1:, 0]])
        position = np.concatenate([first.x[0, :, 0], second.x[0, 1:, 0]])
        expected, travelled = damped_and_driven(t, 1.0, 0.6 / 2.0, 1.0 / 2.0, 3.0)
        np.testing.assert_allclose(velocity[:, 0], expected, rtol=0, atol=1e-9)
        np.testing.assert_allclose(position[:, 0], travelled, rtol=0, atol=1e-9)
        assert np.abs(velocity[:, 1:]).max() == 0 and np.abs(position[:, 1:]).max() == 0


# ---------------------------------------------------------------------------------------------- bad models

ROTATION_MODEL = '''
space = "rotation"
bodies = 1
parameters = {"c": [0.0, 0.0, 1.0]}
def inertia(p):
    return [1.0, 2.0, 2.5]
def potential(R, p):
    return R[0][2, 2]
'''
MOTION_MODEL = '''
space = "rigid_motion"
bodies = 1
parameters = {"m": 2.0}
def inertia(p):
    return [1.0, 1.0, 1.0, p.m, p.m, p.m]
def potential(R, x, p):
    return x[0][2]
'''


@pytest.mark.parametrize("base, replace, by, message", [
    (ROTATION_MODEL, "return R[0][2, 2]", "return R[0] @ p.c", "potential(R, p) must return a scalar"),
    (MOTION_MODEL, "return x[0][2]", "return x[0]", "potential(R, x, p) must return a scalar"),
    (ROTATION_MODEL, "[1.0, 2.0, 2.5]", "[1.0, -2.0, 2.5]",
     "inertia(p) of body 0 is not symmetric positive definite at the default parameters (least eigenvalue -2)"),
    (MOTION_MODEL, '{"m": 2.0}', '{"m": -2.0}',
     "inertia(p) of body 0 is not symmetric positive definite at the default parameters (least eigenvalue -2)"),
    (ROTATION_MODEL, "return [1.0, 2.0, 2.5]", "return [[1.0, 0.5, 0.0], [0.0, 2.0, 0.0], [0.0, 0.0, 2.5]]",
     "inertia(p) must be symmetric"),
    (ROTATION_MODEL, "[1.0, 2.0, 2.5]", "[1.0, 2.0, 2.5, 3.0]",
     "inertia(p) must return one inertia per body (1), each 3 principal values or a 3×3 matrix"),
    (ROTATION_MODEL, "bodies = 1", "bodies = 2",
     "inertia(p) must return one inertia per body (2), each 3 principal values or a 3×3 matrix"),
    (MOTION_MODEL, "return [1.0, 1.0, 1.0, p.m, p.m, p.m]", "return [[1.0, 2.0], [2.0, 1.0]]",
     "inertia(p) must return one inertia per body (1), each 6 principal values or a 6×6 matrix"),
    (ROTATION_MODEL, "def potential", "def torque(t, R, Omega, p):\n    return [1.0, 2.0]\ndef potential",
     "torque(t, R, Omega, p) must return 1 vector(s) of 3 components"),
    (MOTION_MODEL, "def potential", "def wrench(t, R, x, Omega, V, p):\n    return [1.0, 2.0, 3.0]\ndef potential",
     "wrench(t, R, x, Omega, V, p) must return 1 vector(s) of 6 components"),
])
def test_bad_rigid_models_are_refused_in_one_line(base, replace, by, message):
    assert replace in base
    with pytest.raises(InvalidInput) as refused:
        build_model(base.replace(replace, by), "bad.py")
    assert refused.value.field == "system.model" and "\n" not in str(refused.value)
    assert f"bad.py: {message}" in refused.value.message, refused.value.message
