"""Stochastic methods on (S²)ⁿ: the Philox generator against Random123's answers, Boltzmann sampling by
``langevin`` and ``brownian``, free rotational diffusion, the heat balance, and bitwise runs across chunks,
threads, segments, workers and ``kill -9``.

The statistical tests compare ensemble means with closed forms within 3 standard errors (the members are
independent replicas, so the standard error is the sample deviation over √N) and a histogram with its density
by the Kolmogorov–Smirnov test at p > 1e-3.  Their noise is fixed by the seed, so each test gives the same
answer every run; a correct method would fail one 3σ check on a fresh seed with probability 0.27 %, the KS
check with 0.1 %.  The time steps are chosen so the discretisation bias stays below the standard error
(langevin's falls as h², measured in benchmarks/langevin.py; brownian's as h), so a wrong stationary law (a missing
projection, a wrong Ornstein–Uhlenbeck variance, mass or temperature factor) fails them.
"""

import io
import signal

import numpy as np
import pytest
import zarr
from scipy import stats

from armillary import ensemble
from armillary.ensemble.plan import Plan
from armillary.ensemble.spec import parse_spec
from armillary.ensemble.store import revision_change, write_template
from armillary.kernels import InvalidInput, get_system, integrate
from armillary.kernels.lyapunov import displaced_shadow
from armillary.kernels.noise import philox_words
from armillary.kernels.sections import Section

from ensemble_cases import armillary, arrays, wait_for_records

#: one pytest worker for the file: its tests share kernels (brownian on the spring pendula, compiled by both
#: workers at once before, 8 s)
pytestmark = pytest.mark.xdist_group("stochastic")

#: Random123's known-answer vectors of Philox4×32-10 (its tests/kat_vectors): counter, key, output
PHILOX_ANSWERS = [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
]

#: two independent spherical pendula (unit mass and length, g = 1, the spring between them of stiffness 0) with
#: V = m g l q_z each: gravity along −z, e = (0, 0, −1), so V = −m g l e·q = m g l q_z, M = m l² = 1
PENDULA = dict(m=[1.0, 1.0], l=[1.0, 1.0], g=1.0, gravity_direction=[0.0, 0.0, -1.0],
               pivots=[[0.0, 0.0, 0.0], [5.0, 0.0, 0.0]], springs=[[0, 1]], kappa=[0.0])
TEMPERATURE = 0.5
#: a = m g l / T
SHARPNESS = 2.0


def pendula(**changes):
    return get_system("spring_pendula", **{**PENDULA, **changes})


def uniform_state(members, seed=1, speed=0.0):
    """Members of two bodies at uniformly random q, with tangent ω of normal components × ``speed``."""
    rng = np.random.default_rng(seed)
    q = rng.normal(size=(members, 2, 3))
    q /= np.linalg.norm(q, axis=-1, keepdims=True)
    omega = speed * np.cross(q, rng.normal(size=(members, 2, 3)))
    return {"q": q, "omega": omega}


def langevin_mean(a):
    """⟨q_z⟩ under the density ∝ exp(−a z) on [−1, 1]: −coth(a) + 1/a (the Langevin function of −a)."""
    return -1.0 / np.tanh(a) + 1.0 / a


def boltzmann_cdf(z, a=SHARPNESS):
    """The distribution function of q_z under ∝ exp(−a z): (e^a − e^{−a z})/(e^a − e^{−a})."""
    return (np.exp(a) - np.exp(-a * z)) / (np.exp(a) - np.exp(-a))


def within_standard_errors(values, expected, count=3.0):
    mean = values.mean()
    error = values.std(ddof=1) / np.sqrt(values.size)
    assert abs(mean - expected) < count * error, (mean, expected, error)


@pytest.mark.parametrize("counter, key, expected", PHILOX_ANSWERS)
def test_philox_matches_random123s_known_answers(counter, key, expected):
    words = philox_words(np.array(counter, np.uint64), np.array(key, np.uint64))
    assert [int(w) for w in words] == list(expected)


def test_langevin_samples_the_boltzmann_distribution():
    """10⁴ members (2·10⁴ pendula) from the uniform distribution at rest, 50 s (100 friction times 1/γ) of BAOAB at
    h = 0.02 s (ω₀ h = 0.02; benchmarks/langevin.py measures the bias of ⟨q_z⟩ at 7.4e-4 for h = 0.2 s, falling as
    h²: ~1e-5 here, against a standard error of 3e-3): ⟨q_z⟩ = −coth a + 1/a, ⟨½ M |ω|²⟩ = T (two degrees of
    freedom), q_z ~ exp(−a z)."""
    run = integrate(pendula(), "langevin", uniform_state(10_000), 0.02, 2500, 2500, temperature=TEMPERATURE,
                    friction=2.0, seed=11)
    assert np.all(run.status == 0)
    z = run.q_final[..., 2].ravel()
    within_standard_errors(z, langevin_mean(SHARPNESS))
    within_standard_errors(0.5 * (run.omega_final ** 2).sum(axis=-1).ravel(), TEMPERATURE)
    assert stats.kstest(z, boltzmann_cdf).pvalue > 1e-3
    assert np.max(np.abs(np.linalg.norm(run.q_final, axis=-1) - 1.0)) <= 4.5e-16  # ‖q‖ = 1 to round-off
    assert np.max(np.abs((run.q_final * run.omega_final).sum(axis=-1))) < 1e-15  # ω tangent


def test_brownian_samples_the_boltzmann_distribution():
    """The overdamped step at D = T/(M γ) = 0.5 rad²/s, h = 0.004 s (D h = 2e-3), 10 relaxation times 1/(2D): ⟨q_z⟩
    and the law of q_z as for langevin.  The step's O(h) bias is not resolved at 2·10⁴ samples: at h = 0.005 ⟨q_z⟩
    was −0.5368 ± 0.0029 against −0.5373."""
    run = integrate(pendula(), "brownian", uniform_state(10_000), 0.004, 2500, 2500, temperature=TEMPERATURE,
                    friction=1.0, seed=12)
    z = run.q_final[..., 2].ravel()
    within_standard_errors(z, langevin_mean(SHARPNESS))
    assert stats.kstest(z, boltzmann_cdf).pvalue > 1e-3
    assert np.all(run.omega_final == 0.0)


def test_brownian_free_diffusion_decorrelates_as_exp_minus_2_d_t():
    """Without forces (g = 1e-12: the parameter must be > 0; the drift is 1e-12 of the noise's),
    ⟨q(t)·q(0)⟩ = exp(−2 D t) on the unit sphere (the l = 1 eigenvalue of the Laplace–Beltrami operator is 2), the
    diffusion D = 1 rad²/s given as such (ζ = T/D), over three decades of t: 0.002, 0.02, 0.2 and 2 s, by
    one run continued in four calls (h = 1e-3; the geodesic step's error per step in ⟨cos θ⟩ is (2/3) D²h², 1.3e-3
    relative at t = 2 s, a fifth of the standard error there)."""
    system = pendula(g=1e-12)
    state = uniform_state(4000, seed=2)
    start = state["q"].copy()
    step, dt = 0, 1e-3
    for stop in (2, 20, 200, 2000):
        run = integrate(system, "brownian", state, dt, stop - step, stop - step, temperature=0.5, diffusion=1.0,
                        seed=5, start_step=step, restart=step > 0)
        state, step = run.final, stop
        within_standard_errors((start * run.q_final).sum(axis=-1).ravel(), np.exp(-2.0 * stop * dt))


def test_an_active_particle_decorrelates_as_a_damped_oscillator():
    """One active Brownian particle per body (two per member, 5000 members), no forces, no translational noise
    (T = 0), speed v₀ = 4 rad/s and rotational diffusion D_r = 1 rad²/s on the unit sphere.

    Closed moment equations: with u = q(t)·q(0) and w = n(t)·q(0), the particle moves along its heading,
    q̇ = v₀ n, and the heading, transported along the great circle, turns towards −q, ṅ = −v₀ q, while its
    rotational diffusion about q (n ← cos φ n + sin φ q × n, ⟨cos φ⟩ = e^{−D_r dt}) damps its mean at rate D_r:
        d⟨u⟩/dt = v₀ ⟨w⟩,   d⟨w⟩/dt = −v₀ ⟨u⟩ − D_r ⟨w⟩,   u(0) = 1, w(0) = 0,
    so ⟨u⟩'' + D_r ⟨u⟩' + v₀² ⟨u⟩ = 0 and, for v₀ > D_r/2 (Ω = √(v₀² − D_r²/4)),
        ⟨q(t)·q(0)⟩ = e^{−D_r t/2} (cos Ω t + D_r/(2Ω) sin Ω t),
    the oscillation of Castro-Villarreal & Sevilla (2018, PRE 97 052605) at large speed.  The scheme's Strang
    splitting of the turns around the exact geodesic move makes its mean exactly the product of the two linear maps,
    O(h²) from the flow: at h = 0.002 s the bias is below 1e-4 against standard errors of 2e-3 to 7e-3.  Also:
    the heading stays tangent and |ω| = v₀ to round-off."""
    v0, rotational = 4.0, 1.0
    state = uniform_state(5000, speed=1.0)
    run = integrate(pendula(g=1e-12), "brownian", state, 0.002, 1500, 125, temperature=0.0, seed=4,
                    active={"speed": v0, "rotational_diffusion": rotational})
    frequency = np.sqrt(v0 ** 2 - rotational ** 2 / 4)
    t = run.time
    expected = np.exp(-rotational * t / 2) * (np.cos(frequency * t) + rotational / (2 * frequency) * np.sin(frequency * t))
    overlap = np.einsum("mtbk,mbk->tmb", run.q, state["q"]).reshape(len(t), -1)
    for values, value in zip(overlap[1:], expected[1:]):
        within_standard_errors(values, value)
    assert np.min(expected) < -0.6  # the oscillation is there to be matched
    assert np.max(np.abs(np.linalg.norm(run.omega[:, 1:], axis=-1) - v0)) < 1e-14
    assert np.max(np.abs((run.omega * run.q).sum(axis=-1))) < 1e-14


def test_langevin_heat_balances_the_energy_to_second_order():
    """E(t) − E(0) − Q(t) is BAOAB's own error: it stays bounded over 40 s (its RMS over members at the end is that
    over the whole run within 20 %) and falls 4× when h halves (measured 3.7 and 4.3 at h = 0.04, 0.02, 0.01)."""
    state = uniform_state(200, speed=1.0)
    errors = []
    for dt in (0.04, 0.02):
        n = int(round(40.0 / dt))
        run = integrate(pendula(), "langevin", state, dt, n, n // 40, temperature=TEMPERATURE, friction=1.0, seed=3)
        balance = run.energy - run.energy[:, :1] - run.heat
        overall, last = np.sqrt(np.mean(balance ** 2)), np.sqrt(np.mean(balance[:, -1] ** 2))
        assert last < 1.2 * overall * np.sqrt(2.0)
        errors.append(overall)
    assert 3.0 < errors[0] / errors[1] < 5.3, errors


ACTIVE = {"speed": 2.0, "rotational_diffusion": 1.0}


@pytest.mark.parametrize("method, extra", [("langevin", {}), ("brownian", {}), ("brownian", {"active": ACTIVE})],
                         ids=["langevin", "brownian", "active"])
def test_stochastic_runs_are_bitwise_across_chunks_threads_lane_widths_and_segments(method, extra):
    """37 members in one call equal the same members in chunks of 5 and 32 (narrower lane blocks), on 2 threads,
    continued after step 40: the noise depends on (seed, member id, step, body) only."""
    state = uniform_state(37, speed=1.0)
    options = dict(temperature=TEMPERATURE, friction=1.0, seed=9, **extra)
    whole = integrate(pendula(), method, state, 0.02, 60, 20, threads=1, **options)
    for cut in (5, 32):
        chunks = ((0, cut), (cut, 37))
        parts = [integrate(pendula(), method, {k: v[a:b] for k, v in state.items()}, 0.02, 40, 20, threads=2,
                           member_ids=np.arange(a, b), **options) for a, b in chunks]
        ends = [integrate(pendula(), method, part.final, 0.02, 20, 20, member_ids=np.arange(a, b), restart=True,
                          start_step=40, carry=part.carry, **options) for part, (a, b) in zip(parts, chunks)]
        assert np.array_equal(np.concatenate([p.q for p in parts]), whole.q[:, :3])
        assert np.array_equal(np.concatenate([e.q_final for e in ends]), whole.q_final)
        assert np.array_equal(np.concatenate([e.omega_final for e in ends]), whole.omega_final)
        if whole.heat is not None:
            assert np.array_equal(np.concatenate([e.heat[:, -1] for e in ends]), whole.heat[:, -1])
    other_seed = integrate(pendula(), method, state, 0.02, 60, 20, **{**options, "seed": 10})
    assert not np.array_equal(other_seed.q_final, whole.q_final)


@pytest.mark.parametrize("options, field", [
    (dict(temperature=-1.0), "temperature"),
    (dict(temperature=None), "temperature"),
    (dict(temperature=1.0, friction=0.0), "friction"),
    (dict(temperature=[1.0, 2.0]), "temperature"),
    (dict(temperature=1.0, seed=-1), "seed"),
    (dict(temperature=1.0, member_ids=[0]), "member_ids"),
    (dict(temperature=1.0, rtol=1e-8), "rtol"),
    (dict(temperature=1.0, cooling_rate=-1.0), "cooling_rate"),
    (dict(temperature=1.0, active={"speed": 1.0, "rotational_diffusion": 1.0}), "active"),
])
def test_bad_bath_input_names_the_field(options, field):
    with pytest.raises(InvalidInput) as error:
        integrate(pendula(), "langevin", uniform_state(3), 0.02, 2, 1, **options)
    assert error.value.field == field


@pytest.mark.parametrize("options", [dict(temperature=1.0, friction=2.0, diffusion=1.0),
                                     dict(temperature=0.0, diffusion=1.0), dict(temperature=1.0, diffusion=0.0)])
def test_diffusion_is_refused_with_friction_or_without_a_temperature(options):
    with pytest.raises(InvalidInput) as error:
        integrate(pendula(), "brownian", uniform_state(3), 0.02, 2, 1, **options)
    assert error.value.field == "diffusion"


@pytest.mark.parametrize("active, field", [
    ({"speed": 0.0, "rotational_diffusion": 1.0}, "active.speed"),
    ({"speed": 1.0, "rotational_diffusion": -1.0}, "active.rotational_diffusion"),
    ({"speed": 1.0}, "active"),
    ({"speed": 1.0, "rotational_diffusion": 1.0}, "omega"),
])
def test_bad_active_input_names_the_field(active, field):
    """Bad values, a missing key, and a heading of zero (ω_i = 0 gives no direction)."""
    with pytest.raises(InvalidInput) as error:
        integrate(pendula(), "brownian", uniform_state(3), 0.02, 2, 1, temperature=1.0, active=active)
    assert error.value.field == field


def test_a_heading_off_the_tangent_plane_is_refused():
    state = uniform_state(3, speed=1.0)
    state["omega"] = state["omega"] + 0.5 * state["q"]  # ω_i·q_i = 0.5: the heading leaves the sphere
    with pytest.raises(InvalidInput) as error:
        integrate(pendula(), "brownian", state, 0.02, 2, 1, temperature=1.0, active=ACTIVE)
    assert error.value.field == "omega0" and "tangent" in error.value.message


def test_what_stochastic_methods_cannot_do_is_refused():
    state = uniform_state(3)
    space = pendula().space
    shadow = displaced_shadow(space, state, np.ones((3, space.normal_count(2))), 1e-8, 5)
    chain = get_system("spherical_chain", "paper")
    cases = [(lambda: integrate(pendula(), "langevin", state, 0.02, 2, 1, temperature=1.0, shadow=shadow), "shadow"),
             (lambda: integrate(pendula(), "brownian", state, 0.02, 2, 1, temperature=1.0,
                                sections=Section("rise", "q[0][2]")), "sections"),
             (lambda: integrate(chain, "langevin", {k: v[np.newaxis] for k, v in chain.initial_state().items()}, 0.01,
                                2, 1, temperature=1.0), "method")]
    for call, field in cases:
        with pytest.raises(InvalidInput) as error:
            call()
        assert error.value.field == field, error.value


STORE_SPEC = """
[system]
name = "spring_pendula"
[system.params]
m = [1.0, 1.0]
l = [1.0, 1.0]
g = 1.0
gravity_direction = [0.0, 0.0, -1.0]
pivots = [[0.0, 0.0, 0.0], [5.0, 0.0, 0.0]]
springs = [[0, 1]]
kappa = [0.0]

[integrator]
method = "langevin"
temperature = 0.5
friction = 1.0
dt = 0.02
t_end = 80.0
save_every = 200
checkpoint_every = 400

[ensemble]
members = 4000
seed = 4
initial = "uniform"
chunk = 1000

[output]
store = "{store}"
variables = ["q", "omega", "energy"]

[cluster]
kind = "local"
workers = 2
"""


def test_a_langevin_store_killed_and_resumed_equals_one_call(tmp_path):
    """The store of 4 chunks × 10 segments on 2 workers, its run killed with -9 after 8 segments and resumed,
    holds the bits of one in-process call over all members: states, energy and heat."""
    store = str(tmp_path / "bath.zarr")
    spec = tmp_path / "bath.toml"
    spec.write_text(STORE_SPEC.format(store=store))
    process = armillary("run", str(spec))
    wait_for_records(store, 8)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert 8 <= np.isfinite(wait_for_records(store, 0)).sum() < 40
    ensemble.run(str(spec), stream=io.StringIO())
    saved = arrays(store, ("q", "omega", "energy", "heat", "q0", "omega0", "status"))
    run = integrate(pendula(), "langevin", {"q": saved["q0"], "omega": saved["omega0"]}, 0.02, 4000, 200,
                    temperature=0.5, friction=1.0, seed=4)
    for name, value in (("q", run.q), ("omega", run.omega), ("energy", run.energy), ("heat", run.heat)):
        assert np.array_equal(saved[name], value), name
    assert np.all(saved["status"] == 0)


def test_a_store_of_the_old_noise_is_reported_when_resumed(tmp_path):
    """langevin's revision 2 draws its normals by a Ziggurat (kernels.noise): a store written with revision 1's
    Box–Muller normals (or before methods recorded a revision) says so when it is resumed; its own revision does
    not."""
    store = str(tmp_path / "old.zarr")
    plan = Plan(parse_spec(STORE_SPEC.format(store=store)))
    write_template(plan)
    assert revision_change(plan) is None
    zarr.open_group(store, mode="r+").attrs["method_revision"] = 1
    note = revision_change(plan)
    assert "revision 1 of langevin's numerics, this is revision 2" in note and "other noise" in note


SWEEP_SPEC = STORE_SPEC.replace('temperature = 0.5\nfriction = 1.0', 'temperature = {{ values = [0.25, 1.0] }}\n'
                                'friction = {{ linspace = [1.0, 2.0, 3] }}').replace("members = 4000", "members = 60") \
    .replace("chunk = 1000", "chunk = 7").replace("t_end = 80.0", "t_end = 8.0")


def test_a_sweep_of_the_bath_gives_each_member_its_grid_point(tmp_path):
    """``temperature`` and ``friction`` swept in [integrator]: 2 × 3 grid points of 10 members each, stored as the
    coordinates bath_temperature and bath_friction (the last sweep fastest), and each member's bits are those of
    one call given the members' own temperatures and frictions."""
    store = str(tmp_path / "sweep.zarr")
    spec = tmp_path / "sweep.toml"
    spec.write_text(SWEEP_SPEC.format(store=store))
    saved = ensemble.run(str(spec), stream=io.StringIO()).compute()
    temperature = np.repeat([0.25, 1.0], 30)
    friction = np.tile(np.repeat([1.0, 1.5, 2.0], 10), 2)
    assert np.array_equal(saved.bath_temperature.values, temperature)
    assert np.array_equal(saved.bath_friction.values, friction)
    run = integrate(pendula(), "langevin", {"q": saved.q0.values, "omega": saved.omega0.values}, 0.02, 400, 200,
                    temperature=temperature, friction=friction, seed=4)
    assert np.array_equal(saved.q.values[:, -1], run.q_final) and np.array_equal(saved.heat.values, run.heat)
