"""Spherical and free joints of multibody trees (unit quaternions on the generalised space), the gyroscope and
free-floating momentum, against Pinocchio's articulated-body algorithm and closed forms."""

import numpy as np
import pinocchio
import pytest

from armillary.kernels import InvalidInput, get_system, integrate
from armillary.kernels.systems.multibody import GYROSCOPE, tree_terms

from multibody_cases import MULTIBODY_KERNELS, random_tree

pytestmark = MULTIBODY_KERNELS


def rotation_of(quaternion):
    """The rotation of a unit quaternion (x, y, z, w) by Pinocchio (its storage order too)."""
    return pinocchio.Quaternion(np.asarray(quaternion, dtype=np.float64)).normalized().toRotationMatrix()


def our_speeds(kinds, q, v):
    """Pinocchio's velocity v as our speeds u, and the map of our accelerations to Pinocchio's: a free joint's
    linear speeds are its position's rates in the parent frame (Pinocchio's v is R ṡ's body-frame
    components; its v̇ = Rᵀ s̈ − ω × v), a spherical joint's fourth speed (the norm rate) is 0."""
    u, row, column = [], 0, 0
    pieces = []
    for kind in kinds:
        if kind == "free":
            rotation = rotation_of(q[row + 3:row + 7])
            u += list(rotation @ v[column:column + 3]) + list(v[column + 3:column + 6]) + [0.0]
            pieces.append((kind, row, column, rotation))
            row, column = row + 7, column + 6
        elif kind == "spherical":
            u += list(v[column:column + 3]) + [0.0]
            pieces.append((kind, row, column, None))
            row, column = row + 4, column + 3
        else:
            u.append(v[column])
            pieces.append((kind, row, column, None))
            row, column = row + 1, column + 1

    def accelerations(udot):
        out = []
        for kind, row, column, rotation in pieces:
            if kind == "free":
                out += list(rotation.T @ udot[row:row + 3] - np.cross(v[column + 3:column + 6], v[column:column + 3]))
                out += list(udot[row + 3:row + 6])
            elif kind == "spherical":
                out += list(udot[row:row + 3])
            else:
                out.append(udot[row])
        return np.array(out)
    return np.array(u), accelerations


@pytest.mark.parametrize("kinds, parents", [
    (["spherical"] * 5, list(range(-1, 4))),
    (["free", "spherical", "revolute", "prismatic", "spherical", "free"], [-1, 0, 1, 0, 3, 4]),
], ids=["5-link spherical chain", "free-floating tree of every joint type"])
def test_forward_dynamics_of_spherical_and_free_joints_equal_pinocchios(kinds, parents):
    """20 random states (Pinocchio's random configurations, Gaussian speeds): our u̇ = M⁻¹(f − h) equals
    pinocchio.aba to 1e-10 of its largest entry (measured ≤ 1e-14), and the norm rate's u̇ is exactly 0;
    q̇ = B(q) u keeps η̇ ⟂ η."""
    rng = np.random.default_rng(len(kinds))
    system, model = random_tree(rng, kinds, parents)
    data = model.createData()
    for _ in range(20):
        q = pinocchio.randomConfiguration(model, -np.ones(model.nq), np.ones(model.nq))
        v = rng.normal(size=model.nv)
        u, accelerations = our_speeds(kinds, q, v)
        terms = tree_terms(system, {"q": q[np.newaxis], "u": u[np.newaxis]})
        udot = np.linalg.solve(terms["mass"][0], terms["forcing"][0])
        reference = pinocchio.aba(model, data, q, v, np.zeros(model.nv))
        assert np.abs(accelerations(udot) - reference).max() <= 1e-10 * np.abs(reference).max()
        for row, _ in system.space.quaternions:
            assert udot[row + 3] == 0.0
            assert abs(np.dot(terms["rates"][0, row:row + 4], q[row:row + 4])) <= 1e-15 * np.abs(u).max()


def test_quaternions_are_admitted_within_tolerance_and_refused_beyond_naming_the_joint():
    """A quaternion 5e-7 off unit length is normalised; 0.1 off is refused naming q and the joint, as is a
    non-zero norm rate (naming u); the canonical midpoint is refused for a tree with quaternions."""
    system = get_system("multibody", "spherical_chain_3d")
    state = {name: np.array(value)[np.newaxis] for name, value in system.initial_state().items()}
    near = {"q": state["q"] * (1 + 5e-7), "u": state["u"]}
    result = integrate(system, "rk4", near, 1e-3, 1, 1)
    assert abs(np.linalg.norm(result.q[0, 0, 4:8]) - 1.0) <= 1e-15
    for bad, field, joint in (({"q": state["q"] * 1.1, "u": state["u"]}, "q", "ball_1"),
                              ({"q": state["q"], "u": state["u"] + np.eye(12)[7]}, "u", "ball_2")):
        with pytest.raises(InvalidInput) as error:
            integrate(system, "rk4", bad, 1e-3, 1, 1)
        assert error.value.field == field and joint in str(error.value)
    with pytest.raises(InvalidInput) as error:
        integrate(system, "midpoint", state, 1e-3, 1, 1)
    assert error.value.field == "method" and "rk4" in str(error.value)


def test_spherical_chain_is_fourth_order_and_keeps_energy_and_unit_quaternions():
    """spherical_chain_3d for 2 s: rk4's energy error falls 16-fold (within 25 %; measured 16.3) from h = 4 ms to
    2 ms, rk45 at rtol 1e-12 keeps E to 1e-10 relative (measured 1.4e-12), and both keep |η| = 1 within their
    truncation (quaternion_error ≤ 7.8e-9 for rk4 at 4 ms, 7.5e-13 for rk45)."""
    system = get_system("multibody", "spherical_chain_3d")
    state = {name: np.array(value)[np.newaxis] for name, value in system.initial_state().items()}
    errors = []
    for h in (4e-3, 2e-3):
        result = integrate(system, "rk4", state, h, int(round(2.0 / h)), int(round(0.1 / h)),
                           outputs=("q", "energy", "quaternion_error"))
        errors.append(np.abs(result.energy[0] - result.energy[0, 0]).max())
        assert result.quaternion_error[0].max() <= 1e-7
    assert 16 / 1.25 <= errors[0] / errors[1] <= 16 * 1.25
    tight = integrate(system, "rk45", state, 0.1, 20, 1, rtol=1e-12, atol=1e-12,
                      outputs=("q", "energy", "quaternion_error"))
    assert tight.status[0] == 0
    assert np.abs(tight.energy[0] / tight.energy[0, 0] - 1).max() <= 1e-10
    assert tight.quaternion_error[0].max() <= 1e-10


def test_free_floating_tree_keeps_its_momentum():
    """A free-floating tree (free root, a ball joint and a sprung, damped hinge) under gravity, rk45 at rtol
    1e-12 for 2 s: the linear momentum across gravity and the angular momentum along it stay to 1e-9 of
    their scale, while the vertical momentum changes by −M g t (1e-9 relative)."""
    rng = np.random.default_rng(3)
    system, _ = random_tree(rng, ["free", "spherical", "revolute"], [-1, 0, 1])
    system = system.with_params(stiffness=[0.0, 0.0, 5.0], damping=[0.0, 0.0, 0.3])
    quaternions = rng.normal(size=(2, 4))
    quaternions /= np.linalg.norm(quaternions, axis=1, keepdims=True)
    q = np.concatenate([[0.1, -0.2, 0.3], quaternions[0], quaternions[1], [0.4]])
    u = np.concatenate([rng.normal(size=6), [0.0], rng.normal(size=3), [0.0], rng.normal(size=1)])
    result = integrate(system, "rk45", {"q": q[np.newaxis], "u": u[np.newaxis]}, 0.1, 20, 1, rtol=1e-12,
                       atol=1e-12)
    assert result.status[0] == 0
    momentum = system.momentum({"q": result.q, "u": result.u})[0]
    scale = np.abs(momentum).max()
    assert np.abs(momentum - momentum[0]).max() <= 1e-9 * scale
    terms = tree_terms(system, {"q": result.q[0], "u": result.u[0]})
    masses = system.params["mass"]
    com_velocity = np.einsum("tbjc,tc->tbj", terms["jacobians"][:, 1], result.u[0])
    momentum_z = np.einsum("b,tb->t", masses, com_velocity[:, :, 2])
    expected = momentum_z[0] - masses.sum() * 9.81 * np.linspace(0.0, 2.0, 21)
    assert np.abs(momentum_z - expected).max() <= 1e-9 * np.abs(expected).max()


def test_gyroscope_precesses_at_m_g_l_over_i3_omega_s():
    """The gyroscope preset (rotor spinning at ω_s = 200 rad/s in two gimbals, released with them at rest):
    the outer gimbal's mean rate over 4 s (about 130 nutations) is m g l / (I₃ ω_s) within 2 % (measured
    0.09 %), by rk4 at h = 1 ms; the spin axis stays within 0.01 rad of horizontal (measured 2.5e-3)."""
    system = get_system("multibody", "gyroscope")
    state = {name: np.array(value)[np.newaxis] for name, value in system.initial_state().items()}
    result = integrate(system, "rk4", state, 1e-3, 4000, 100)
    rotor = GYROSCOPE
    expected = rotor["mass"] * 9.81 * rotor["offset"] / (rotor["spin_inertia"] * rotor["spin"])  # 0.245 rad/s
    measured = result.q[0, -1, 0] / 4.0
    assert abs(measured / expected - 1) <= 0.02, (measured, expected)
    assert np.abs(result.q[0, :, 1]).max() <= 0.01


def test_spherical_chains_through_the_store_are_bitwise_across_layouts_and_stay_on_s3(tmp_path):
    """spherical_chain_3d perturbed (1e-2, along S³'s geodesics) with g swept, rk4 through the store in the
    three layouts: the same bits; the ``coordinate`` labels name each quaternion component; the perturbed
    quaternions are unit to 1e-15 with zero norm rates, and quaternion_error is stored (rk4 lets |η| drift by
    its truncation error, 4.7e-7 in 1 s at h = 10 ms)."""
    import xarray as xr

    from ensemble_cases import run_across_layouts

    system = 'name = "multibody"\npreset = "spherical_chain_3d"\nparams = { g = { values = [9.81, 3.0] } }'
    names = ("q", "u", "energy", "quaternion_error", "q0", "u0", "status")
    _, reference = run_across_layouts(str(tmp_path), system, ["q", "u", "energy", "quaternion_error"], names,
                                      method="rk4", scale=1e-2)
    assert not reference["status"].any()
    ds = xr.open_zarr(tmp_path / "c1w1s20.zarr")
    assert list(ds.coordinate.values) == [f"ball_{k}.{axis}" for k in (1, 2, 3) for axis in "xyzw"]
    quaternions = reference["q0"].reshape(-1, 3, 4)
    assert np.abs(np.linalg.norm(quaternions, axis=-1) - 1).max() <= 1e-15
    assert not reference["u0"].reshape(-1, 3, 4)[:, :, 3].any()
    assert 0 < reference["quaternion_error"].max() <= 1e-6  # rk4's truncation at h = 10 ms: measured 4.7e-7


def test_periodic_joint_forces_drive_a_pendulum_as_scipy_does():
    """A damped pendulum (one revolute joint, bob 1.5 kg at 0.8 m, inertia 0.02 kg·m² about its centre) driven by
    τ = F + A sin(ν t + φ): rk45 at rtol 1e-12 equals scipy's DOP853 on (I + m l²) θ̈ = −m g l sin θ + τ(t) − D θ̇
    to 1e-9 over 10 s, also when started at t = 3 s (start_step); the canonical midpoint is refused for it."""
    from scipy.integrate import solve_ivp

    mass, length, inertia, damping, force, amplitude, frequency, phase = 1.5, 0.8, 0.02, 0.1, 0.3, 2.0, 2.5, 0.4
    system = get_system("multibody", joints=[{"type": "revolute", "name": "swing"}], mass=mass,
                        com=[0.0, -length, 0.0], inertia=np.diag([0.0, 0.0, inertia]), damping=damping,
                        joint_force=force, force_amplitude=amplitude, force_frequency=frequency, force_phase=phase,
                        gravity_direction=[0.0, -1.0, 0.0])

    def rates(t, y):
        torque = force + amplitude * np.sin(frequency * t + phase) - damping * y[1]
        return [y[1], (-mass * 9.81 * length * np.sin(y[0]) + torque) / (inertia + mass * length ** 2)]
    state = {"q": np.array([[0.3]]), "u": np.array([[-1.0]])}
    for start in (0, 300):
        times = start * 0.01 + np.linspace(0.0, 10.0, 11)
        reference = solve_ivp(rates, (times[0], times[-1]), [0.3, -1.0], method="DOP853", rtol=1e-12, atol=1e-12,
                              t_eval=times).y.T
        ours = integrate(system, "rk45", state, 0.01, 1000, 100, rtol=1e-12, atol=1e-12, start_step=start)
        assert ours.status[0] == 0
        assert np.abs(ours.q[0, :, 0] - reference[:, 0]).max() <= 1e-9
        assert np.abs(ours.u[0, :, 0] - reference[:, 1]).max() <= 1e-9
    with pytest.raises(InvalidInput) as error:
        integrate(system, "midpoint", state, 0.01, 1, 1)
    assert error.value.field == "method"


def test_driven_runs_are_bitwise_across_layouts_and_equal_one_kernel_call(tmp_path):
    """The gyroscope with a periodic torque on its outer gimbal, g swept, rk4 through the store in the three
    layouts: the same bits (each segment's loads see the global step's time), equal to one kernel call."""
    from armillary import ensemble
    from armillary.ensemble.plan import Plan

    from ensemble_cases import run_across_layouts

    system = ('name = "multibody"\npreset = "gyroscope"\nparams = { force_amplitude = [0.05, 0.0, 0.0], '
              'force_frequency = 3.0, g = { values = [9.81, 5.0] } }')
    names = ("q", "u", "energy", "status")
    specs, reference = run_across_layouts(str(tmp_path), system, ["q", "u", "energy"], names, method="rk4",
                                          scale=1e-3)
    plan = Plan(ensemble.load_spec(specs[0]))
    direct = integrate(plan.chunk_system(0, 6), "rk4", plan.initial_state(0, 6), 0.01, 100, 10)
    assert np.array_equal(reference["q"], direct.q) and np.array_equal(reference["u"], direct.u)
    undriven = integrate(plan.chunk_system(0, 6).with_params(force_amplitude=0.0), "rk4", plan.initial_state(0, 6),
                         0.01, 100, 10)
    assert np.abs(undriven.q - direct.q).max() > 1e-4  # the drive acts
