"""Surfaces of section (kernels.sections): crossings located inside the step, to the method's order, bitwise
whatever the lanes, threads and segments, on (S²)ⁿ and on SO(3)."""

import os

import numpy as np
import pytest
from scipy.special import ellipk

from armillary.kernels import InvalidInput, get_system, integrate
from armillary.kernels.sections import Section

pytestmark = pytest.mark.xdist_group("sections")

#: swing amplitudes θ₀ (rad) of the planar swings: small to near the top
AMPLITUDES = np.array([0.5, 1.0, 2.0, 2.8])
G, L = 9.81, 1.0
SWING = Section("swing", "q[0][0]", "up", max_crossings=10)
#: the first passage through the bottom, where the swing first reaches q_x = 0: an escape that stops members
BOTTOM = Section("bottom", "q[0][0]", "down", max_crossings=1, stop=True)


def planar_swings(copies: int = 1) -> dict:
    """A spherical pendulum (gravity along +z, so it hangs at q = e_z) released from rest at each amplitude in
    the xz-plane: it swings in that plane, q_x crossing 0 upwards once per period."""
    theta = np.tile(AMPLITUDES, copies)
    q = np.stack([np.sin(theta), 0.0 * theta, np.cos(theta)], axis=-1)[:, np.newaxis, :]
    return {"q": q, "omega": np.zeros_like(q)}


def exact_periods(copies: int = 1) -> np.ndarray:
    """4 √(l/g) K(k), k = sin(θ₀/2): scipy's ellipk takes the parameter m = k²."""
    return np.tile(4.0 * np.sqrt(L / G) * ellipk(np.sin(AMPLITUDES / 2.0) ** 2), copies)


def swing(state: dict, h: float, t_end: float = 8.0, sections=SWING, save_every: int | None = None,
          method: str = "rk4", **options):
    pendulum = get_system("spherical_chain", m=[1.0], l=[L], g=G)
    return integrate(pendulum, method, state, h, int(round(t_end / h)), save_every=save_every or int(round(t_end / h)),
                     outputs=(), sections=sections, **options)


def test_crossings_of_a_planar_swing_are_its_elliptic_period_to_rk4s_order():
    """The spacing of successive upward crossings of q_x = 0 is the exact period within 1e-9 at h = 1e-3, and its
    error falls like h⁴ as h halves (a linear interpolation between steps would leave O(h²) ≈ 1e-7 here)."""
    errors = []
    for h in (2e-3, 1e-3):
        crossings = swing(planar_swings(), h).sections["swing"]
        assert list(crossings["count"]) == [4, 3, 3, 2]  # 8 s over periods of 2.0, 2.2, 2.9 and 4.0 s
        spacing = np.diff(crossings["time"], axis=1)
        errors.append(np.nanmax(np.abs(spacing - exact_periods()[:, np.newaxis])))
        q = crossings["state"]["q"]
        found = np.isfinite(crossings["time"])
        # at the crossing the pendulum passes the bottom: q = e_z, unit to round-off
        assert np.allclose(q[found][:, 0], [0.0, 0.0, 1.0], atol=1e-9)
        assert np.allclose(np.linalg.norm(q[found], axis=-1), 1.0, rtol=0, atol=1e-15)
    assert errors[1] < 1e-9, errors
    assert 2 ** 3.5 < errors[0] / errors[1] < 2 ** 4.5, errors  # fourth order


def test_crossings_are_bitwise_whatever_the_lanes_threads_and_segments():
    """128 members run in blocks of 64 lanes on 2 threads find the same crossing bits as 4 members one lane at a
    time; a run split into two calls exactly after the step that holds a crossing finds it once, with the same
    bits (the condition is half-open, and each step's start time comes from its global index)."""
    h = 1e-3
    alone = swing(planar_swings(), h, threads=1).sections["swing"]
    many = swing(planar_swings(copies=32), h, threads=2).sections["swing"]
    for copy in range(32):
        members = slice(4 * copy, 4 * copy + 4)
        assert np.array_equal(many["time"][members], alone["time"], equal_nan=True)
        assert np.array_equal(many["state"]["q"][members], alone["state"]["q"], equal_nan=True)
    split = int(np.ceil(alone["time"][0, 1] / h))  # the step that holds member 0's second crossing
    first = swing(planar_swings(), h, t_end=split * h)
    rest = swing(first.final, h, t_end=8.0 - split * h, restart=True, start_step=split)
    joined = [np.concatenate([part.sections["swing"]["time"][m, :part.sections["swing"]["count"][m]]
                              for part in (first, rest)]) for m in range(4)]
    assert first.sections["swing"]["count"][0] == 2
    for m in range(4):
        assert np.array_equal(joined[m], alone["time"][m, :alone["count"][m]])


def test_the_lagrange_tops_crossings_keep_its_spin_and_the_chaotic_tops_do_not():
    """On SO(3) with lgvi over 100 s, the section Ω₂ = 0 (upwards): the measure is the spread of the body spin Ω₃ over a
    member's crossings.  The symmetric Lagrange top conserves Ω₃, so its section points lie on a closed curve
    (the reduced flow has one degree of freedom): Ω₃ within 1e-9 of its start at every crossing.  The asymmetric
    chaotic top has no such integral: its points fill an area, Ω₃ spreading over more than 20 % of its mean."""
    spreads = {}
    for preset in ("lagrange", "chaotic"):
        top = get_system("heavy_top", preset)
        state = {name: value[np.newaxis] for name, value in top.initial_state().items()}
        run = integrate(top, "lgvi", state, 0.005, 20_000, save_every=20_000, outputs=(),
                        sections=Section("spin", "Omega[0][1]", "up", record=("Omega", "R"), max_crossings=500))
        crossings = run.sections["spin"]
        count = crossings["count"][0]
        assert 10 <= count < 500, count  # the Lagrange top's 311, the chaotic top's 14
        spin = crossings["state"]["Omega"][0, :count, 0, 2]
        assert np.all(np.abs(crossings["state"]["Omega"][0, :count, 0, 1]) < 1e-9)  # on the section
        rotation = crossings["state"]["R"][0, :count, 0]
        assert np.abs(np.einsum("cki,ckj->cij", rotation, rotation) - np.eye(3)).max() < 1e-13
        spreads[preset] = (spin.max() - spin.min()) / abs(spin.mean())
    assert spreads["lagrange"] < 1e-9 and spreads["chaotic"] > 0.2, spreads


def test_an_escape_section_stops_each_member_at_its_quarter_period():
    """Released from rest, the pendulum first passes the bottom (q_x = 0, downwards) a quarter period √(l/g) K(k)
    later: the section with stop halts each member there, within 1e-9 s by rk4 at h = 1e-3.  The member is
    ESCAPED (not failed), its final state is the one located at the crossing (q = e_z, at rest no more), and its
    samples after the escape are NaN; the other section, which it never reached upwards, counts nothing."""
    from armillary.kernels.status import ESCAPED

    run = swing(planar_swings(), 1e-3, sections=(SWING, BOTTOM), save_every=500)
    escape = run.sections["bottom"]
    assert list(escape["count"]) == [1, 1, 1, 1] and list(run.sections["swing"]["count"]) == [0, 0, 0, 0]
    assert np.abs(escape["time"][:, 0] - exact_periods() / 4).max() < 1e-9
    assert list(run.status) == [ESCAPED] * 4
    assert list(run.failed_step) == list(np.ceil(escape["time"][:, 0] / 1e-3).astype(int))
    assert np.allclose(run.final["q"][:, 0], [0.0, 0.0, 1.0], atol=1e-9)
    # the record is normalised; rk4 leaves |q| off 1 by its truncation error, 8e-13 here
    assert np.abs(run.final["q"] - escape["state"]["q"][:, 0]).max() < 1e-11
    speed = np.sqrt(2 * G / L * (1 - np.cos(AMPLITUDES)))  # energy: ½ l² ω² = g l (1 − cos θ₀)
    assert np.allclose(np.linalg.norm(run.final["omega"][:, 0], axis=-1), speed, rtol=1e-9)
    sample_times = np.arange(run.energy.shape[1]) * 0.5
    assert np.array_equal(np.isnan(run.energy), sample_times >= escape["time"][:, :1])


def test_an_escape_at_a_per_member_parameter_stops_each_member_at_the_elliptic_time():
    """The escape q_z = cos θ_s with θ_s read from each member's own parameter (``p.m[0]``: the point mass, which a
    single pendulum's motion does not depend on, so here a free per-member threshold, θ_s = θ₀/2): released from
    rest at θ₀, the pendulum reaches θ_s at t = √(l/g) (K(k) − F(φ, k)), k = sin(θ₀/2), sin φ = sin(θ_s/2)/k
    (scipy's ellipk and ellipkinc take m = k²); rk4 at h = 1e-3 stops each member there within 1e-9 s."""
    from scipy.special import ellipkinc

    threshold = AMPLITUDES / 2.0
    pendulum = get_system("spherical_chain", m=threshold[:, np.newaxis], l=[L], g=G)
    reach = Section("reach", "q[0][2] - cos(p.m[0])", "up", max_crossings=1, stop=True)
    run = integrate(pendulum, "rk4", planar_swings(), 1e-3, 2000, save_every=2000, outputs=(), sections=reach)
    k = np.sin(AMPLITUDES / 2.0)
    phi = np.arcsin(np.sin(threshold / 2.0) / k)
    exact = np.sqrt(L / G) * (ellipk(k ** 2) - ellipkinc(phi, k ** 2))
    assert np.abs(run.sections["reach"]["time"][:, 0] - exact).max() < 1e-9
    assert np.allclose(run.final["q"][:, 0, 2], np.cos(threshold), rtol=0, atol=1e-12)


def test_a_model_files_section_function_reads_as_its_expression_text(tmp_path):
    """A model file's ``def section(q, omega, p)`` stands for the spec's expression: the same generated lane function
    as the text it returns, its parameter read per member; a section without expression whose model lacks the
    function is refused naming the expression; the function's own failure names the file and line."""
    from armillary.ensemble.plan import Plan
    from armillary.ensemble.spec import parse_spec
    from armillary.kernels.sections import parameter_shapes, plan_sections

    model = open(os.path.join(os.path.dirname(__file__), "..", "examples", "models", "spherical_chain.py")).read()
    (tmp_path / "chain.py").write_text(model + "\n\ndef section(q, omega, p):\n    return q[1][0] - 0.1 * p.l[0]\n"
                                       "\n\ndef fall(q, omega, p):\n    return q[0][3]\n")
    spec = ('[system]\nmodel = "chain.py"\n[integrator]\nmethod = "rk4"\ndt = 0.01\nt_end = 0.1\n[ensemble]\n'
            'members = 2\n[output]\nstore = "s.zarr"\n[analysis]\n')
    plan = Plan(parse_spec(spec + 'section = { direction = "up" }\n', directory=str(tmp_path)))
    plan.validate()
    assert parse_spec(plan.spec.to_toml(), stored=True).identity() == plan.spec.identity()  # as a store keeps it
    system, n = plan.chunk_system(0, 2), plan.n_bodies
    text = Section("section", "q[1][0] - 0.1 * p.l[0]")
    assert plan_sections(plan.sections, plan.space, n, parameter_shapes(system, n)).source == \
        plan_sections((text,), plan.space, n, parameter_shapes(system, n)).source
    with pytest.raises(InvalidInput, match="analysis.escape.expression: is required, unless the model file defines "
                                           "the section as a function escape\\(q, omega, p\\)"):
        Plan(parse_spec(spec + 'escape = { direction = "up" }\n', directory=str(tmp_path))).validate()
    with pytest.raises(InvalidInput, match=r"analysis.sections.fall.expression: .*chain.py:\d+: IndexError in fall"):
        Plan(parse_spec(spec + '[analysis.sections.fall]\ndirection = "up"\n', directory=str(tmp_path))).validate()


@pytest.mark.parametrize("section, field, message", [
    (Section("s", "w[0]"), "section.s.expression", "'w' is not known; allowed: the sphere_product space's variables"),
    (Section("s", "q[0][0] - p.x"), "section.s.expression", "unknown parameter p.x; the system's parameters: m, l, g"),
    (Section("s", "q[0]"), "section.s.expression", "must be a scalar"),
    (Section("s", "q[3][0]"), "section.s.expression", "index 3 is out of bounds"),
    (Section("s", "2.0 * pi"), "section.s.expression", "must depend on the state"),
    (Section("s", "q[0][0]", "sideways"), "section.s.direction", "allowed: up, down, both"),
    (Section("s", "q[0][0]", max_crossings=0), "section.s.max_crossings", "must be an integer >= 1"),
    (Section("s", "q[0][0]", record=("R",)), "section.s.record", "unknown R; the sphere_product space has q, omega"),
])
def test_bad_sections_are_refused_naming_the_field(section, field, message):
    pendulum = get_system("spherical_chain", m=[1.0], l=[L], g=G)
    with pytest.raises(InvalidInput, match=message) as refused:
        integrate(pendulum, "rk4", planar_swings(), 1e-3, 10, sections=section)
    assert refused.value.field == field


def test_rk45_locates_crossings_on_its_dense_output_and_stops_at_an_escape():
    """rk45 (rtol 1e-10) chooses its own steps: its crossings of q_x = 0 are located on each accepted step's
    dense output, their spacing the elliptic period within 1e-8 s (measured 2.2e-9: the tolerance's error, with
    steps of about 10 ms, where interpolating linearly between step ends would be off by about 1e-4 s); with the
    bottom as an escape each member stops there, a quarter period after release within 1e-9 s (1.7e-11),
    ESCAPED, its samples from then on NaN and the ones before kept."""
    from armillary.kernels.status import ESCAPED

    run = swing(planar_swings(), 1e-3, method="rk45", sections=(SWING, BOTTOM), save_every=500, rtol=1e-10,
                atol=1e-12)
    assert list(run.status) == [ESCAPED] * 4
    assert np.abs(run.sections["bottom"]["time"][:, 0] - exact_periods() / 4).max() < 1e-9
    sample_times = np.arange(run.energy.shape[1]) * 0.5
    assert np.array_equal(np.isnan(run.energy), sample_times >= run.sections["bottom"]["time"][:, :1])
    assert np.allclose(run.final["q"][:, 0], [0.0, 0.0, 1.0], atol=1e-9)
    crossings = swing(planar_swings(), 1e-3, method="rk45", rtol=1e-10, atol=1e-12,
                      sections=(SWING, Section("bottom", "q[0][0]", "down", max_crossings=1))).sections["swing"]
    assert list(crossings["count"]) == [4, 3, 3, 2]
    spacing = np.diff(crossings["time"], axis=1)
    assert np.nanmax(np.abs(spacing - exact_periods()[:, np.newaxis])) < 1e-8


def test_adaptive_vi_locates_its_crossings_by_re_stepping_its_own_steps():
    """Example 2 perturbed (4 members, 3 s) by adaptive vi: every upward crossing of q₁ₓ = 0 lies on the section
    to 1e-12; its times converge as the tolerance falls (1e-3, 5e-4, 2.5e-4: steps of 0.44, 0.24 and 0.12 ms),
    within 1e-6 s of the tightest run (measured 5e-8, as against rk45 at rtol 1e-11) and closer at each halving;
    split into two calls, the run finds the same crossings bit for bit."""
    bodies = get_system("sphere_nbody", "paper")
    state = bodies.space.project(bodies.space.perturb(bodies.initial_state(), np.random.default_rng(1)
                                                      .standard_normal((4, bodies.space.normal_count(3))), 1e-3))
    rise = Section("rise", "q[0][0]", "up", max_crossings=20)

    def run(tolerance, n_steps=3000, **options):
        return integrate(bodies, "vi", options.pop("start", state), 1e-3, n_steps, save_every=1000, outputs=(),
                         sections=rise, adaptive=True, tolerance=tolerance, **options)

    found = run(1e-3).sections["rise"]
    times = {tolerance: run(tolerance).sections["rise"]["time"] for tolerance in (5e-4, 2.5e-4)}
    assert found["count"].min() >= 1 and np.nanmax(np.abs(found["state"]["q"][..., 0, 0])) < 1e-12
    errors = [np.nanmax(np.abs(time - times[2.5e-4])) for time in (found["time"], times[5e-4])]
    assert errors[0] < 1e-6 and errors[1] < errors[0] / 2, errors
    first = run(1e-3, 2000)
    rest = run(1e-3, 1000, start=first.final, restart=True, carry=first.carry, start_step=2000)
    for m in range(4):
        joined = np.concatenate([part.sections["rise"]["time"][m, :part.sections["rise"]["count"][m]]
                                 for part in (first, rest)])
        assert np.array_equal(joined, found["time"][m, :found["count"][m]])


def test_rk45_on_so3_locates_the_crossings_lgvis_converge_to():
    """The flat layout's rk45 (SO(3), the Lagrange top, rtol 1e-10, steps of about 1.6 ms) locates its crossings of
    Ω₂ = 0 on its dense output: lgvi's 30 crossings over 10 s approach them at second order (7.1e-4 s at h = 1e-3,
    1.8e-4 s at h = 5e-4: a ratio of 4.0), their Richardson extrapolation (4 t(h/2) − t(h))/3 lies within 1e-7 s
    of them (measured 2.4e-8; interpolating linearly between rk45's step ends would be off by about 1e-6 s), and on
    them Ω₂ is 0 to 1e-15 and the symmetric top's spin Ω₃ unchanged."""
    top = get_system("heavy_top", "lagrange")
    state = {name: value[np.newaxis] for name, value in top.initial_state().items()}
    spin = Section("spin", "Omega[0][1]", "up", record=("Omega", "R"), max_crossings=500)
    reference = integrate(top, "rk45", state, 0.005, 2000, save_every=2000, outputs=(), sections=spin, rtol=1e-10,
                          atol=1e-12).sections["spin"]
    assert reference["count"][0] == 30
    omega = reference["state"]["Omega"][0, :, 0]
    assert np.abs(omega[:, 1]).max() < 1e-15 and omega[:, 2].max() - omega[:, 2].min() < 1e-12
    coarse, fine = (integrate(top, "lgvi", state, h, int(round(10.0 / h)), save_every=int(round(10.0 / h)),
                              outputs=(), sections=spin).sections["spin"]["time"] for h in (1e-3, 5e-4))
    errors = [np.abs(times - reference["time"]).max() for times in (coarse, fine)]
    assert 2 ** 1.8 < errors[0] / errors[1] < 2 ** 2.2, errors
    assert np.abs((4.0 * fine - coarse) / 3.0 - reference["time"]).max() < 1e-7


SECTION_SPEC = """
[system]
name = "spherical_chain"
params = {{ m = [1.0], l = [1.0], g = 9.81 }}

[integrator]
method = "rk4"
dt = 0.001
t_end = 8.0
save_every = {segment}
checkpoint_every = {segment}

[ensemble]
members = 8
initial = "file"
path = "{initial}"
chunk = {chunk}

[output]
store = "{store}"
variables = ["energy"]

[cluster]
workers = {workers}

[analysis]
section = {{ expression = "q[0][0]", direction = "up", record = ["q"], max_crossings = 3 }}
escape = {{ expression = "q[0][0]", direction = "down", stop = {stop} }}
"""


def test_a_runs_store_holds_the_crossings_bitwise_across_chunks_workers_and_segments(tmp_path):
    """The store keeps each member's first max_crossings = 3 crossings (section_time, section_q) and counts them
    all (section_count): the same bits in every layout, and the kernel's own.  Member 0's second crossing (t = 3.566 s) lies in a segment's last step with
    segments of 3567 steps: found once."""
    import xarray
    from ensemble_cases import run_stores_alike

    import armillary  # noqa: F401 (ds.armillary)
    from armillary.ensemble.report import write_report

    state = planar_swings(copies=2)
    np.savez(tmp_path / "initial.npz", q0=state["q"], omega0=state["omega"])
    alone = swing(state, 1e-3).sections["swing"]
    assert np.ceil(alone["time"][0, 1] / 1e-3) == 3567
    specs = []
    for chunk, workers, segment in ((8, 1, 8000), (3, 2, 1000), (5, 1, 3567)):
        path = tmp_path / f"c{chunk}w{workers}s{segment}.toml"
        path.write_text(SECTION_SPEC.format(segment=segment, chunk=chunk, workers=workers, stop="false",
                                            initial=tmp_path / "initial.npz", store=str(path).replace(".toml", ".zarr")))
        specs.append(str(path))
    stored = run_stores_alike(specs, ("section_time", "section_q", "section_count", "escape_time", "status"))
    assert np.array_equal(stored["escape_time"], swing(state, 1e-3, sections=(SWING, BOTTOM)).sections["bottom"]
                          ["time"][:, 0])  # without stop, the escape only times the first passage
    assert not stored["status"].any()
    assert np.array_equal(stored["section_count"], alone["count"])
    assert np.array_equal(stored["section_time"], alone["time"][:, :3], equal_nan=True)
    assert np.array_equal(stored["section_q"], alone["state"]["q"][:, :3], equal_nan=True)
    dataset = xarray.open_zarr(specs[0].replace(".toml", ".zarr"))
    assert dataset["section_q"].dims == ("member", "crossing", "body", "xyz")
    assert "section_omega" not in dataset  # record = ["q"] stores q alone

    # the picture: every stored crossing a point, in two recorded components
    assert dataset.armillary.section_points().sizes["point"] == np.minimum(alone["count"], 3).sum()
    points = dataset.armillary.section_points("q[0][2]", "q[0][1]")
    assert np.array_equal(points["x"], alone["state"]["q"][:, :3, 0, 2][np.isfinite(alone["time"][:, :3])])
    with pytest.raises(InvalidInput, match="'omega\\[0\\]\\[0\\]' is not a component of a recorded variable; "
                                           "recorded: q"):
        dataset.armillary.section_points("omega[0][0]", "q[0][1]")
    write_report([specs[1].replace(".toml", ".zarr")], str(tmp_path / "report"))  # 9 samples, for the drift
    assert "surface of section q[0][0] = 0" in (tmp_path / "report" / "report.md").read_text()
    assert (tmp_path / "report" / "c3w2s1000.zarr_section.png").stat().st_size > 10_000


def test_named_sections_store_their_own_crossings_over_one_crossing_dimension(tmp_path):
    """Two named sections (``[analysis.sections.rise]`` and ``.fall``, the swing's q_x = 0 upwards and downwards)
    store ``section_rise_*`` and ``section_fall_*`` over one ``crossing`` dimension as long as the larger
    max_crossings (3; fall keeps 2, its third column NaN): the kernel's crossings bit for bit, in chunks of 3
    members over segments of 1000 steps (each segment writing only the crossing columns it adds)."""
    import xarray
    from ensemble_cases import run_stores_alike

    import armillary  # noqa: F401 (ds.armillary)

    state = planar_swings(copies=2)
    np.savez(tmp_path / "initial.npz", q0=state["q"], omega0=state["omega"])
    kernel = swing(state, 1e-3, sections=(SWING, Section("fall", "q[0][0]", "down", max_crossings=10))).sections
    path = tmp_path / "named.toml"
    text = SECTION_SPEC.format(segment=1000, chunk=3, workers=1, stop="false", initial=tmp_path / "initial.npz",
                               store=str(path).replace(".toml", ".zarr"))
    named = ('[analysis.sections.rise]\nexpression = "q[0][0]"\nmax_crossings = 3\n\n[analysis.sections.fall]\n'
             'expression = "q[0][0]"\ndirection = "down"\nrecord = ["omega"]\nmax_crossings = 2\n')
    path.write_text(text[:text.index("[analysis]")] + named)
    names = ("section_rise_time", "section_rise_count", "section_rise_q", "section_rise_omega", "section_fall_time",
             "section_fall_count", "section_fall_omega")
    stored = run_stores_alike([str(path)], names)
    for name, section, keep in (("rise", kernel["swing"], 3), ("fall", kernel["fall"], 2)):
        assert np.array_equal(stored[f"section_{name}_count"], section["count"])
        assert np.array_equal(stored[f"section_{name}_time"][:, :keep], section["time"][:, :keep], equal_nan=True)
        assert np.array_equal(stored[f"section_{name}_omega"][:, :keep], section["state"]["omega"][:, :keep],
                              equal_nan=True)
    assert np.isnan(stored["section_fall_time"][:, 2]).all()
    dataset = xarray.open_zarr(str(path).replace(".toml", ".zarr"))
    assert "section_time" not in dataset and "section_fall_q" not in dataset
    assert dataset["section_fall_omega"].dims == ("member", "crossing", "body", "xyz")
    points = dataset.armillary.section_points("omega[0][0]", "omega[0][1]", section="fall")
    assert points.sizes["point"] == np.minimum(kernel["fall"]["count"], 2).sum()
    with pytest.raises(InvalidInput, match="unknown section 'swing'; the store holds fall, rise"):
        dataset.armillary.section_points(section="swing")


def test_members_that_escape_stop_keep_their_state_and_are_not_failures(tmp_path):
    """With ``stop``, every member stops at its first passage through the bottom (segments of 1000 steps, the
    escape in the first or second): escape_time is the kernel's bit for bit, the status is 8 (escaped) and
    not counted as failed, the samples after it are NaN, and the state it stopped in stays the checkpoint's
    through the later segments."""
    from armillary.ensemble.progress import final_state
    from armillary.ensemble.store import summary
    from armillary.kernels.status import ESCAPED
    from ensemble_cases import run_stores_alike

    state = planar_swings(copies=2)
    np.savez(tmp_path / "initial.npz", q0=state["q"], omega0=state["omega"])
    kernel = swing(state, 1e-3, sections=(SWING, BOTTOM))
    path = tmp_path / "stop.toml"  # chunks of 3 members on 2 workers, against the kernel's one block of 8
    path.write_text(SECTION_SPEC.format(segment=1000, chunk=3, workers=2, stop="true",
                                        initial=tmp_path / "initial.npz", store=str(path).replace(".toml", ".zarr")))
    specs = [str(path)]
    stored = run_stores_alike(specs, ("escape_time", "status", "failed_step", "energy", "section_count"))
    assert np.array_equal(stored["escape_time"], kernel.sections["bottom"]["time"][:, 0])
    assert (stored["status"] == ESCAPED).all() and not stored["section_count"].any()
    assert np.array_equal(stored["failed_step"], kernel.failed_step)
    assert np.array_equal(np.isnan(stored["energy"]), np.arange(9) * 1.0 >= stored["escape_time"][:, np.newaxis])
    store = specs[0].replace(".toml", ".zarr")
    assert summary(store)["failed_members"] == 0
    end = final_state(store, ("q", "omega"), 0, 8, 8)
    assert np.array_equal(end["q"], kernel.final["q"]) and np.array_equal(end["omega"], kernel.final["omega"])


def test_escape_map_takes_the_median_over_the_members_that_escaped_and_their_fraction():
    """Per sweep point: the median escape time of the members that escaped (NaN where none did) and the
    fraction that escaped."""
    import xarray

    from armillary.ensemble.analysis import escape_map

    times = np.array([1.0, 3.0, np.nan, np.nan, np.nan, 2.0])
    dataset = xarray.Dataset({"escape_time": ("member", times)},
                             coords={"member": np.arange(6), "a": ("member", [0.0, 0.0, 0.0, 1.0, 1.0, 1.0])})
    table = escape_map(dataset)
    assert np.array_equal(table.median_escape_time.values, [2.0, 2.0])
    assert np.allclose(table.escaped_fraction.values, [2 / 3, 1 / 3])
    with pytest.raises(InvalidInput, match="an escape-time map needs a store with \\[analysis\\] escape"):
        escape_map(dataset.drop_vars("a"))


def test_a_worker_killed_between_its_crossings_and_its_record_redoes_them_bitwise(tmp_path):
    """A worker killed with ``kill -9`` after writing a segment's data (crossings included) and before its
    completion record: the segment is run again from the count its predecessor's checkpoint carries, and the
    finished store holds the kernel's crossings bit for bit, that segment attempted twice.  Then a chunk of
    crossings is deleted: ``verify`` names it (the counts say crossings lie there; chunks past them are never
    written), ``verify --repair`` and ``run`` recompute its member chunk from segment 0, bit for bit again."""
    import signal

    import zarr
    from ensemble_cases import armillary, wait_for_marker

    from armillary.ensemble.segment import PAUSE_BEFORE_RECORD, PAUSE_SEGMENT

    state = planar_swings(copies=2)
    np.savez(tmp_path / "initial.npz", q0=state["q"], omega0=state["omega"])
    kernel = swing(state, 1e-3, sections=(SWING, Section("bottom", "q[0][0]", "down", max_crossings=1))).sections
    path = tmp_path / "killed.toml"
    store = str(tmp_path / "killed.zarr")
    path.write_text(SECTION_SPEC.format(segment=1000, chunk=4, workers=2, stop="false", initial=tmp_path / "initial.npz",
                                        store=store))
    marker = tmp_path / "paused.json"
    # segment 5 (t = 5–6 s) of a chunk whose members crossed before it and cross in it (its first member at 5.60 s, its third)
    process = armillary("run", str(path), env={**os.environ, PAUSE_BEFORE_RECORD: f"{marker}:600", PAUSE_SEGMENT: "5"})
    paused = wait_for_marker(marker)
    assert paused["segment"] == 5
    os.kill(paused["pid"], signal.SIGKILL)
    out, err = process.communicate(timeout=300)
    assert process.returncode == 0, err
    group = zarr.open_group(store, mode="r")
    assert group["_progress/attempts"][paused["chunk"], paused["segment"]] == 2
    assert np.array_equal(group["section_count"][:], kernel["swing"]["count"])
    assert np.array_equal(group["section_time"][:], kernel["swing"]["time"][:, :3], equal_nan=True)
    assert np.array_equal(group["escape_time"][:], kernel["bottom"]["time"][:, 0])

    # a lost chunk of crossings: verify names it, the repair recomputes its member chunk from the start, bitwise
    def cli(*args):
        child = armillary(*args)
        out, err = child.communicate(timeout=300)
        return child.returncode, out + err

    os.remove(os.path.join(store, "section_q", "c", "1", "0", "0", "0"))
    code, out = cli("verify", store)
    assert code == 1 and "section_q chunk (1, 0, 0, 0)" in out and "is missing" in out, out
    assert cli("verify", "--repair", store)[0] == 0
    assert cli("run", str(path))[0] == 0
    code, out = cli("verify", store)
    assert code == 0 and out.rstrip().endswith("sound"), out
    group = zarr.open_group(store, mode="r")
    assert np.array_equal(group["section_q"][:], kernel["swing"]["state"]["q"][:, :3], equal_nan=True)
    assert np.array_equal(group["section_time"][:], kernel["swing"]["time"][:, :3], equal_nan=True)
