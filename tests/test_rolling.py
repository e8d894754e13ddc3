"""The rolling ball and the rolling disk (issue 18; Putkaradze & Rogers 2018, digest_004 §4–§6): the
digest's conservation checks under rk45, the planar reduction, the rolling kinematics, nhvi's long-time
energy and order, lift-off, bad input."""

import numpy as np
import pytest

from armillary.kernels import integrate
from armillary.kernels.errors import InvalidInput
from armillary.kernels.status import LIFT_OFF
from armillary.kernels.systems import get_system
from armillary.kernels.systems.rolling_ball import FIRST_RAIL, ball_field_work, ball_vector_field, jellett_integral

TIGHT = {"rtol": 1e-11, "atol": 1e-13}


def preset_state(system, members=1):
    return {name: np.repeat(value[np.newaxis], members, axis=0) for name, value in system.initial_state().items()}


def relative_change(values, scale):
    return np.max(np.abs(values - values[..., :1])) / scale


def test_fixed_masses_asymmetric_inertia_offset_centre_of_mass_conserve_energy_over_20_s():
    """Digest §6: I = (1, 1.3, 0.8), two fixed masses, the shell's centre of mass off the centre, 20 s of rk45
    at rtol 1e-11: |E − E₀| ≤ 1e-9 |E₀| (measured 1.2e-10) and no actuator work."""
    system = get_system("rolling_ball", "chaplygin", center_of_mass=[0.05, -0.1, -0.2])
    result = integrate(system, "rk45", preset_state(system), 0.01, 2000, 100, **TIGHT)
    assert result.status[0] == 0
    energy = result.energy[0]
    assert relative_change(energy, abs(energy[0])) <= 1e-9
    assert np.all(result.state["work"] == 0.0)


def test_prescribed_masses_change_the_energy_by_the_actuators_work():
    """pendulum_drive, 20 s: E(T) − E(0) equals the integrated actuator power to 1e-9 relative (measured
    4e-11 of the 11.9 J done), at every sample."""
    system = get_system("rolling_ball", "pendulum_drive")
    result = integrate(system, "rk45", preset_state(system), 0.01, 2000, 100, **TIGHT)
    energy, work = result.energy[0], result.state["work"][0]
    assert abs(work[-1]) > 1.0
    assert np.max(np.abs(energy - energy[0] - work)) <= 1e-9 * np.max(np.abs(work))


def test_free_masses_on_an_ellipse_and_a_figure_eight_conserve_energy():
    """free_masses (Q = 0), 20 s: |E − E₀| ≤ 1e-9 |E₀| while the masses travel their rails."""
    system = get_system("rolling_ball", "free_masses")
    result = integrate(system, "rk45", preset_state(system), 0.01, 2000, 100, **TIGHT)
    energy = result.energy[0]
    assert relative_change(energy, abs(energy[0])) <= 1e-9
    assert np.ptp(result.state["theta"][0], axis=0).min() > 0.5  # both masses move


def test_a_chaplygin_ball_keeps_its_angular_momentum_about_the_contact_point():
    """chaplygin, 20 s: each of the 3 components of R[𝕀Ω + Σ m s × (Ω × s)] constant to 1e-9 relative."""
    system = get_system("rolling_ball", "chaplygin")
    result = integrate(system, "rk45", preset_state(system), 0.01, 2000, 100, **TIGHT)
    momentum = system.momentum(result.state)[0]
    assert momentum.shape == (21, 3)
    assert np.max(np.abs(momentum - momentum[0])) <= 1e-9 * np.linalg.norm(momentum[0])


def test_jellett_integral_is_conserved_by_a_routh_sphere_and_not_by_an_asymmetric_ball():
    """routh_sphere, 20 s: Jellett's integral constant to 1e-9 relative; with I = (0.8, 1.0, 1.2) it moves by
    more than 1e-4 (and the system offers no momentum map)."""
    system = get_system("rolling_ball", "routh_sphere")
    result = integrate(system, "rk45", preset_state(system), 0.01, 2000, 100, **TIGHT)
    jellett = system.momentum(result.state)[0, :, 0]
    assert relative_change(jellett, abs(jellett[0])) <= 1e-9
    asymmetric = get_system("rolling_ball", "routh_sphere", inertia=[0.8, 1.0, 1.2])
    assert asymmetric.momentum(preset_state(asymmetric)) is None
    result = integrate(asymmetric, "rk45", preset_state(asymmetric), 0.01, 2000, 100, **TIGHT)
    params = asymmetric.broadcast(1, 0)
    moved = jellett_integral({name: value for name, value in result.state.items()}, params)[0, :, 0]
    assert relative_change(moved, abs(moved[0])) > 1e-4


def planar_ball_and_disk(angle=0.3, rate=0.5):
    """A ball whose data lie in the x–z plane (𝕀₁₃ ≠ 0 allowed) and the disk with the same data: a mass on a
    circular rail in the plane swinging as sin(2t), the shell's centre of mass off the centre."""
    rails = [{"shape": "circle", "center": [0.1, 0.0, 0.0], "normal": [0.0, 1.0, 0.0], "radius": 0.5}]
    shared = dict(radius=1.0, mass=1.0, center_of_mass=[0.1, 0.0, -0.2], rails=rails, masses=[0.5],
                  amplitude=[1.0], frequency=[2.0])
    ball = get_system("rolling_ball", **shared, inertia=[[0.4, 0.0, 0.05], [0.0, 0.5, 0.0], [0.05, 0.0, 0.6]])
    disk = get_system("rolling_disk", **shared, inertia=0.5)
    c, s = np.cos(angle), np.sin(angle)
    ball_state = {"R": np.array([[[c, 0.0, s], [0.0, 1.0, 0.0], [-s, 0.0, c]]]), "Omega": np.array([[0.0, rate, 0.0]]),
                  "contact": np.array([[angle, 0.0]]), "theta": np.zeros((1, 0)), "theta_dot": np.zeros((1, 0))}
    disk_state = {"angle": np.array([angle]), "angle_rate": np.array([rate]), "x": np.array([angle])}
    return ball, ball_state, disk, disk_state


def test_a_ball_started_in_the_plane_stays_in_it_and_agrees_with_the_rolling_disk():
    """10 s of rk45 (rtol 1e-12): the ball keeps Ω₁ = Ω₃ = 0 to 1e-12 and y = 0; its angle, rate, contact point and
    energy agree with rolling_disk's to 1e-9, and the disk's x = r θ."""
    ball, ball_state, disk, disk_state = planar_ball_and_disk()
    options = {"rtol": 1e-12, "atol": 1e-14}
    rolled = integrate(ball, "rk45", ball_state, 0.01, 1000, 10, **options)
    planar = integrate(disk, "rk45", disk_state, 0.01, 1000, 10, **options)
    omega = rolled.state["Omega"][0]
    assert np.max(np.abs(omega[:, [0, 2]])) <= 1e-12
    assert np.max(np.abs(rolled.state["contact"][0, :, 1])) <= 1e-12
    gamma = rolled.state["R"][0, :, 2, :]
    angle = np.unwrap(np.arctan2(-gamma[:, 0], gamma[:, 2]))
    assert np.ptp(planar.state["angle"][0]) > 1.0  # it rolls, not only rocks
    assert np.max(np.abs(angle - planar.state["angle"][0])) <= 1e-9
    assert np.max(np.abs(omega[:, 1] - planar.state["angle_rate"][0])) <= 1e-9
    assert np.max(np.abs(rolled.state["contact"][0, :, 0] - planar.state["x"][0])) <= 1e-9
    assert np.max(np.abs(planar.state["x"][0] - planar.state["angle"][0])) <= 1e-9  # x = r θ, r = 1
    assert np.max(np.abs(rolled.energy[0] - planar.energy[0])) <= 1e-9 * np.max(np.abs(planar.energy[0]))


def test_the_linearised_disk_with_one_fixed_mass_oscillates_at_the_closed_form_frequency():
    """One fixed mass m = 0.7 kg at (0, 0, −l), l = 0.4 m, in a disk of r = 1 m, I₂₂ = 0.3 kg·m² and a shell of
    1e-9 kg: small swings (1e-4 rad) have ω = √(m g l / (I₂₂ + m (r − l)²)) within 0.1 % (measured from 10
    periods' zero crossings)."""
    m, l, r, inertia, g = 0.7, 0.4, 1.0, 0.3, 9.81
    disk = get_system("rolling_disk", radius=r, mass=1e-9, inertia=inertia, masses=[m], g=g,
                      rails=[{"shape": "line", "point": [0.0, 0.0, -l], "direction": [1.0, 0.0, 0.0], "length": 0.01}])
    expected = np.sqrt(m * g * l / (inertia + m * (r - l) ** 2))
    period = 2 * np.pi / expected
    steps = int(10.5 * period / 1e-3)
    result = integrate(disk, "rk45", {"angle": np.array([1e-4]), "angle_rate": np.array([0.0]),
                                      "x": np.array([1e-4])}, 1e-3, steps, 1, rtol=1e-12, atol=1e-16)
    angle = result.state["angle"][0]
    crossings = np.flatnonzero(np.sign(angle[1:]) != np.sign(angle[:-1]))
    times = result.time[crossings] - angle[crossings] * 1e-3 / (angle[crossings + 1] - angle[crossings])
    measured = np.pi * (len(times) - 1) / (times[-1] - times[0])
    assert len(times) >= 20
    assert abs(measured / expected - 1) <= 1e-3


def test_the_contact_material_point_is_at_rest_at_every_sample():
    """v_centre + ω × (−r e₃) = 0 to 1e-12 at every sample of free_masses and pendulum_drive, with v_centre
    the kernel's (ẋ, ẏ, 0) and ω = R Ω computed here."""
    for preset in ("free_masses", "pendulum_drive"):
        system = get_system("rolling_ball", preset)
        result = integrate(system, "rk4", preset_state(system), 0.01, 500, 10)
        space, n = system.space, system.n_bodies
        states = {name: value[0] for name, value in result.state.items()}
        x = np.ascontiguousarray(space.flatten(states).T)
        params = system.broadcast(x.shape[1], n)
        coef = np.ascontiguousarray(system.definition.coefficients(params, n).T)
        topology = system.definition.topology(params, n)
        rates = np.empty_like(x)
        ball_vector_field(x, n, coef, topology, 0.0, rates, ball_field_work(x.shape[0], n, x.shape[1]))
        omega = np.einsum("sij,sj->si", states["R"], states["Omega"])
        contact = np.stack([rates[12], rates[13], np.zeros(x.shape[1])], axis=1) + np.cross(omega, [0.0, 0.0, -1.0])
        assert np.max(np.abs(contact)) <= 1e-12, preset
        assert np.max(np.abs(omega)) > 0.1


@pytest.mark.parametrize("preset", ["chaplygin", "routh_sphere"])
def test_nhvi_keeps_the_energy_bounded_over_a_million_steps_while_rk4_drifts(preset):
    """10⁶ steps of h = 0.02: nhvi's mean |E − E₀| over the last tenth is within 2× the first tenth's (measured
    0.98× chaplygin, 0.99× routh_sphere) while rk4's grows more than 5× (measured 18.8×, 18.7×)."""
    system = get_system("rolling_ball", preset)
    ratios = {}
    for method in ("nhvi", "rk4"):
        result = integrate(system, method, preset_state(system), 0.02, 10**6, 1000)
        assert result.status[0] == 0
        error = np.abs(result.energy[0, 1:] - result.energy[0, 0])
        tenth = error.size // 10
        ratios[method] = error[-tenth:].mean() / error[:tenth].mean()
    assert ratios["nhvi"] <= 2.0
    assert ratios["rk4"] > 5.0


@pytest.mark.parametrize("system_name, preset", [("rolling_ball", "chaplygin"), ("rolling_ball", "free_masses"),
                                                 ("rolling_ball", "pendulum_drive"), ("rolling_disk", "pendulum")])
def test_nhvi_is_second_order_and_keeps_the_attitude_on_so3(system_name, preset):
    """Error at t = 2 s against rk45 (rtol 1e-12) falls 4× (3.86–4.00 measured) when h halves from 0.01; R stays
    orthogonal to 1e-13."""
    system = get_system(system_name, preset)
    state = preset_state(system)
    reference = integrate(system, "rk45", state, 0.01, 200, 200, rtol=1e-12, atol=1e-14)
    velocity = "Omega" if system_name == "rolling_ball" else "angle_rate"
    errors = []
    for h in (0.01, 0.005):
        result = integrate(system, "nhvi", state, h, int(round(2 / h)), int(round(2 / h)))
        errors.append(np.max(np.abs(result.state[velocity][0, -1] - reference.state[velocity][0, -1])))
        if system_name == "rolling_ball":
            rotation = result.state["R"][0, -1]
            assert np.max(np.abs(rotation.T @ rotation - np.eye(3))) <= 1e-13
    assert 3.5 <= errors[0] / errors[1] <= 4.5


def test_a_ball_driven_too_hard_lifts_off_at_the_step_its_normal_force_crosses_zero():
    """pendulum_drive at ν = 10 rad/s lifts off; rk4 (h = 1 ms) gives the member LIFT_OFF at the step where the
    normal force of an rk45 run (sampled every 1 ms) crosses 0; a gently driven member in the same call is
    untouched: its bits equal a run of it alone."""
    hard = get_system("rolling_ball", "pendulum_drive", frequency=[10.0, 10.0])
    reference = integrate(hard, "rk45", preset_state(hard), 1e-3, 2000, 1, rtol=1e-12, atol=1e-14)
    normal = reference.diagnostics["normal_force"][0]
    last = np.flatnonzero(np.isfinite(normal))[-1]
    assert reference.status[0] == LIFT_OFF and normal[last] > 0
    crossing = reference.time[last] + normal[last] * 1e-3 / (normal[last - 1] - normal[last])
    mixed = get_system("rolling_ball", "pendulum_drive", frequency=[[10.0, 10.0], [4.0, 4.0]])
    result = integrate(mixed, "rk4", preset_state(mixed, 2), 1e-3, 2000, 10)
    assert list(result.status) == [LIFT_OFF, 0]
    step = result.failed_step[0]
    assert (step - 1) * 1e-3 - 1e-6 <= crossing <= step * 1e-3 + 1e-6
    gentle = get_system("rolling_ball", "pendulum_drive", frequency=[4.0, 4.0])
    alone = integrate(gentle, "rk4", preset_state(gentle), 1e-3, 2000, 10)
    for name in ("R", "Omega", "contact", "work"):
        assert np.array_equal(result.state[name][1], alone.state[name][0]), name


@pytest.mark.parametrize("change, field", [
    ({"rails": [{"shape": "circle", "center": [0.0, 0.0, 0.6], "normal": [0.0, 1.0, 0.0], "radius": 0.5}],
      "masses": [0.5]}, "rails[0]"),
    ({"rails": [{"shape": "circle", "center": [0.0, 0.0, 0.0], "normal": [0.0, 1.0, 0.0], "radius": 0.9}],
      "masses": [0.5], "clearance": 0.2}, "rails[0]"),
    ({"rails": [{"shape": "circle", "center": [0.0, 0.0, 0.0], "normal": [0.0, 1.0, 0.0], "radius": 0.0}],
      "masses": [0.5]}, "rails[0].radius"),
    ({"rails": [{"shape": "line", "point": [0.0, 0.0, 0.0], "direction": [1.0, 0.0, 0.0], "length": 0.0}],
      "masses": [0.5]}, "rails[0].length"),
    ({"rails": [{"shape": "ellipse", "center": [0.0, 0.0, 0.0], "axes": [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]}],
      "masses": [0.5]}, "rails[0].axes"),
    ({"inertia": [1.0, 1.0, -0.5]}, "inertia"),
    ({"inertia": [[1.0, 0.2, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]}, "inertia"),
    ({"rails": [{"shape": "ellipse", "center": [0.0, 0.0, 0.0], "axes": [[0.3, 0.0, 0.0], [0.0, 0.2, 0.0]],
                 "motion": "free"}], "masses": [0.5], "amplitude": [0.3]}, "amplitude"),
    ({"rails": [{"shape": "ellipse", "center": [0.0, 0.0, 0.0], "axes": [[0.3, 0.0, 0.0], [0.0, 0.2, 0.0]]}],
      "masses": [0.5], "rail_force": [1.0]}, "rail_force"),
    ({"rails": [{"shape": "spiral"}], "masses": [0.5]}, "rails[0].shape"),
    ({"rails": [{"shape": "circle", "center": [0.0, 0.0, 0.0], "normal": [0.0, 1.0, 0.0], "radius": 0.3}],
      "masses": [0.5, 0.5]}, "masses"),
])
def test_bad_rolling_ball_input_is_refused_naming_the_field(change, field):
    """A rail that leaves the ball (|χ| + clearance > r), a rail of zero length, a non-positive-definite or
    non-symmetric 𝕀, prescribed and free motion for one mass, an unknown rail shape, a mass count that is not the
    rail count."""
    with pytest.raises(InvalidInput) as error:
        get_system("rolling_ball", "chaplygin", **change)
    assert error.value.field == field


def test_the_disk_refuses_free_masses_and_rails_out_of_its_plane():
    with pytest.raises(InvalidInput) as error:
        get_system("rolling_disk", "pendulum", rails=[{"shape": "ellipse", "center": [0.0, 0.0, 0.0], "motion": "free",
                                                       "axes": [[0.3, 0.0, 0.0], [0.0, 0.0, 0.2]]}])
    assert error.value.field == "rails[0].motion"
    with pytest.raises(InvalidInput) as error:
        get_system("rolling_disk", "pendulum", rails=[{"shape": "circle", "center": [0.0, 0.0, 0.0],
                                                       "normal": [1.0, 0.0, 0.0], "radius": 0.3}])
    assert error.value.field == "rails[0]"


def test_rail_coefficients_place_each_mass_where_its_law_says():
    """The coefficient block of a prescribed mass: θ₀, A, ν, φ, rate, Q after m and the curve (FIRST_RAIL)."""
    system = get_system("rolling_ball", "pendulum_drive")
    coef = system.definition.coefficients(system.broadcast(1, 0), 0)[0]
    assert coef[FIRST_RAIL] == 0.5 and np.allclose(coef[FIRST_RAIL + 16:FIRST_RAIL + 22], [0, 1, 2, 0, 0, 0])


BALL = 'name = "rolling_ball"\npreset = "free_masses"'
BALL_VARIABLES = ["R", "Omega", "contact", "theta", "theta_dot", "work", "energy", "normal_force"]


@pytest.mark.parametrize("method", ["nhvi", "rk4"])
def test_rolling_ball_runs_give_the_same_bits_across_chunks_workers_and_segments(tmp_path, method):
    """free_masses (two free masses, perturbed along SO(3) and the rails) through the store in the layouts
    (chunk, workers, segment) = (1, 1, 20), (6, 1, 100), (3, 2, 50): identical bits, equal to one kernel call."""
    from armillary import ensemble
    from armillary.ensemble.plan import Plan

    from ensemble_cases import run_across_layouts

    names = tuple(BALL_VARIABLES) + ("R0", "theta0", "status")
    specs, reference = run_across_layouts(str(tmp_path), BALL, BALL_VARIABLES, names, method=method, scale=1e-2)
    plan = Plan(ensemble.load_spec(specs[0]))
    direct = integrate(plan.chunk_system(0, 6), method, plan.initial_state(0, 6), 0.01, 100, 10)
    for name in ("R", "Omega", "contact", "theta", "work"):
        assert np.array_equal(reference[name], direct.state[name]), name
    assert np.all(reference["status"] == 0) and np.ptp(reference["theta0"], axis=0).min() > 0


def test_kill_9_and_resume_of_a_rolling_ball_run_is_bitwise(tmp_path):
    """pendulum_drive by nhvi, 400 members over 2 workers, 40 segment records: kill -9 of `armillary run` after
    8 of them and a resume give the uninterrupted run's bits (the clock and work carry on in the state)."""
    from ensemble_cases import kill_9_and_resume_match, runner_spec

    spec = runner_spec(str(tmp_path), "ball.toml", 'name = "rolling_ball"\npreset = "pendulum_drive"',
                       ["R", "contact", "work", "energy"], method="nhvi", segment=50, chunk=40, workers=2, t_end=2.0,
                       members=400, scale=1e-2)
    kill_9_and_resume_match(spec, str(tmp_path), ("R", "contact", "work", "energy", "R0", "status"))


def test_the_ball_design_example_maps_lyapunov_exponents_with_the_fixed_mass_row_regular(tmp_path):
    """examples/ball-design.toml with 2 members per grid point instead of 4, over 100 s instead of 200: every
    A = 0 point (masses fixed) has median λ < 10/T, most strongly driven points (A ≥ 0.8) are above it (full size
    in the README: A = 0 gives 0.020–0.025 1/s, A ≥ 0.4 0.03–0.24 1/s), and the report draws the λ map over
    (amplitude, phase[1]) and the contact-point paths."""
    import io
    import pathlib

    import xarray as xr

    from armillary import ensemble
    from armillary.ensemble.report import write_report

    text = pathlib.Path(__file__).parent.parent.joinpath("examples", "ball-design.toml").read_text()
    spec = tmp_path / "design.toml"
    spec.write_text(text.replace("t_end = 200.0", "t_end = 100.0").replace("members = 100", "members = 50")
                    .replace("chunk = 20", "chunk = 25"))
    store = str(tmp_path / "design.zarr")
    ensemble.run(str(spec), store=store, stream=io.StringIO())
    ds = xr.open_zarr(store)
    threshold = 10 / 100.0
    # members fill the grid in spec order (amplitude outer, phase[1] inner), 2 per point
    median = np.nanmedian(ds.lyapunov.values.reshape(25, 2), axis=1).reshape(5, 5)
    assert np.all(ds.amplitude.values.reshape(5, 10)[0] == 0.0)
    assert np.all(median[0] < threshold)
    driven = median[2:]
    assert np.mean(driven[np.isfinite(driven)] > threshold) >= 0.5
    write_report([store], str(tmp_path / "report"))
    assert (tmp_path / "report" / "design.zarr_lyapunov_map.png").exists()
    assert (tmp_path / "report" / "design.zarr_contact_paths.png").exists()


def test_nhvi_is_reversible_and_rk4_is_not():
    """chaplygin: 2000 steps of h = 0.02, Ω reversed, 2000 more: nhvi returns to the start to 1.3e-12 in R and Ω
    (round-off and the fixed-point tolerance; asserted 1e-11), rk4 only to its truncation error (3.3e-7)."""
    system = get_system("rolling_ball", "chaplygin")
    start = preset_state(system)
    returned = {}
    for method in ("nhvi", "rk4"):
        there = integrate(system, method, start, 0.02, 2000, 2000)
        back = {name: value[:, -1] for name, value in there.state.items()}
        back["Omega"] = -back["Omega"]
        home = integrate(system, method, back, 0.02, 2000, 2000, restart=True)
        returned[method] = max(np.max(np.abs(home.state["R"][:, -1] - start["R"])),
                               np.max(np.abs(home.state["Omega"][:, -1] + start["Omega"])))
    assert returned["nhvi"] <= 1e-11
    assert returned["rk4"] > 1e-9


def test_a_ball_needing_more_friction_than_mu_s_slips_at_the_step_it_needs_it():
    """pendulum_drive with μ_s halfway between the friction ratio it starts with and the largest it needs within
    1 s: rk4 stops the member with SLIP at the first step whose ratio, in a run without a limit, exceeds μ_s (same
    steps, same bits up to there)."""
    from armillary.kernels.status import SLIP

    free = get_system("rolling_ball", "pendulum_drive")
    unlimited = integrate(free, "rk4", preset_state(free), 1e-3, 1000, 1)
    ratio = unlimited.diagnostics["friction_ratio"][0]
    limit = 0.5 * (ratio[0] + ratio.max())
    first = int(np.argmax(ratio > limit))
    assert first > 0 and unlimited.status[0] == 0
    limited = get_system("rolling_ball", "pendulum_drive", friction_coefficient=limit)
    result = integrate(limited, "rk4", preset_state(limited), 1e-3, 1000, 1)
    assert result.status[0] == SLIP and result.failed_step[0] == first
    assert np.array_equal(result.state["Omega"][0, :first], unlimited.state["Omega"][0, :first])


def test_rolling_disk_runs_give_the_same_bits_across_layouts_and_store_scalar_variables(tmp_path):
    """The disk's state variables have no axes of their own: stored as (member, time) and bitwise across the
    layouts, equal to one kernel call."""
    from armillary import ensemble
    import xarray as xr
    from armillary.ensemble.plan import Plan

    from ensemble_cases import run_across_layouts

    variables = ["angle", "angle_rate", "x", "work", "energy", "normal_force"]
    specs, reference = run_across_layouts(str(tmp_path), 'name = "rolling_disk"\npreset = "pendulum"', variables,
                                          tuple(variables) + ("angle0", "status"), method="nhvi", scale=1e-2)
    plan = Plan(ensemble.load_spec(specs[0]))
    direct = integrate(plan.chunk_system(0, 6), "nhvi", plan.initial_state(0, 6), 0.01, 100, 10)
    assert np.array_equal(reference["angle"], direct.state["angle"])
    assert xr.open_zarr(tmp_path / "c1w1s20.zarr").angle.dims == ("member", "time")
