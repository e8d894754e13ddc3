"""Stochastic methods on (S²)ⁿ, in lane layout: Langevin dynamics by geodesic BAOAB and overdamped
(Brownian) dynamics by a geodesic Euler–Maruyama step.

The state is (q_i, ω_i) with q̇_i = ω_i × q_i, ω_i·q_i = 0 and kinetic energy ½ Σ M_ii |ω_i|² (diagonal M), as
for ``vi``.  Langevin dynamics at temperature T (J, k_B = 1) with friction γ (1/s):

    dω_i = −(1/M_ii) q_i × ∂V/∂q_i dt − γ ω_i dt + √(2γT/M_ii) P_i dW_i,     P_i = I − q_i q_iᵀ,

whose invariant measure is ∝ exp(−E/T) on the tangent bundle.  Geodesic BAOAB (Leimkuhler & Matthews 2016,
"Efficient molecular dynamics using geodesic integration and solvent–solute splitting", Proc. R. Soc. A 472:
20160138: BAOAB with the exact geodesic flow of the manifold as its A) splits one step of size h into

    B: ω_i ← ω_i − (h/2M_ii) q_i × ∂V/∂q_i                      (the tangential force's half kick)
    A: the exact geodesic (great-circle) flow for h/2: q_i turns about ω_i by |ω_i| h/2, ω_i unchanged
    O: ω_i ← e^{−γh} ω_i + √((1 − e^{−2γh}) T/M_ii) P_i ξ_i       (the exact Ornstein–Uhlenbeck step)
    A, B as above,

one gradient per step (kept for the next step's first B, as vi keeps it).  Configurational averages are
second order in h (measured: the bias of ⟨q_z⟩ of a pendulum falls 3.4 ± 0.7× when h halves,
benchmarks/langevin.py).  The heat the bath
gives, Σ_i ½ M_ii (|ω_i'|² − |ω_i|²) over each O, is summed per member, so E(t) − E(0) − Q(t) is the
splitting's own error.

Overdamped dynamics (``brownian``): with ζ_i = M_ii γ (friction coefficient) and D_i = T/ζ_i (rad²/s),

    dq_i = −(1/ζ_i) P_i ∂V/∂q_i dt + √(2 D_i) P_i ∘ dW_i   on the unit sphere,

stepped by the geodesic (exponential-map) Euler–Maruyama scheme: v_i = −(h/ζ_i) P_i ∂V/∂q_i + √(2 D_i h) P_i ξ_i,
q_i ← cos|v_i| q_i + sin|v_i| v_i/|v_i|: the geodesic random walk, weak order 1 (without forces its one-step
mean of q·q₀ is 1 − 2Dh + (4/3)D²h² against e^{−2Dh}'s 1 − 2Dh + 2D²h²).  ω is not a variable of overdamped dynamics: every step sets it to 0 (the initial sample keeps the ω
given).

Every q_i is renormalised after it moves, so ‖q_i‖ = 1 to round-off at every step, and ω_i is kept tangent.
A system may give each particle its own friction γ_i (a type's: ``SystemDefinition.body_friction``); γ, M and
so ζ are then per body, and the invariant measure is the same.
The bath rides in the last BATH_ROWS rows of the coefficient block c (per member, so its values can vary
member by member), after the particles' own frictions and a temperature schedule's knots: T at t = 0 and its cooling rate (the bath's temperature in a step that starts at t is
max(T − rate·t, 0)), γ, an active particle's speed and rotational diffusion, the two words of the noise key, the
global member id (see :func:`with_bath`); the noise of body i in step j is
:func:`kernels.noise.gaussian_triple` (j, member, i, stage) (an active particle's heading:
:func:`kernels.noise.gaussian_pair` at the heading's stage), j = round(t/h) the global step index (exact below
2·10¹⁵ steps).  Free names bound at
specialisation: ``system_gradient``.
"""

import numpy as np

from ..lanes import lane_function
from ..noise import gaussian_pair, gaussian_triple
from ..schedules import knot_rows, piecewise_linear
from .vi import half_steps_over_mass

#: the bath's rows at the end of the coefficient block, in order (before them: the particles' own frictions, F of
#: them by original id, then a temperature schedule's K knots: K times, then K temperatures)
BATH_ROWS = ("particle_frictions", "schedule_knots", "temperature", "cooling_rate", "friction", "diffusion", "speed",
             "rotational_diffusion", "noise_key0", "noise_key1", "member")
(PARTICLE_FRICTIONS, KNOTS, TEMPERATURE, COOLING_RATE, FRICTION, DIFFUSION, SPEED, ROTATIONAL_DIFFUSION, KEY0, KEY1,
 MEMBER) = range(-len(BATH_ROWS), 0)
#: the stages of a step that draw noise (counter word 3): the Ornstein–Uhlenbeck or Brownian kick, and an active
#: particle's two half turns of its heading
O_STAGE, HEADING_STAGE = 0, 1


def with_bath(coef: np.ndarray, temperature, cooling_rate, friction, diffusion, speed, rotational_diffusion,
              key: tuple[int, int], member_ids, schedule=None, particle_frictions=None) -> np.ndarray:
    """The coefficients (members, P) with the particles' own frictions, a temperature schedule's knots and the
    bath's rows appended (BATH_ROWS): the number F of particle frictions (0 without them), the schedule's K (0 without
    one), temperature at t = 0 (J), its cooling rate (J/s: T(t) = max(T −
    rate·t, 0) without a schedule), friction (1/s), brownian's diffusion at t = 0 in its place (rad²/s; 0: given by
    the friction), an active particle's speed (rad/s on the unit sphere) and rotational diffusion (rad²/s; both 0
    for passive particles), each a scalar or one per member, the noise key and each member's global id.
    ``schedule``: None or (K, 2) knots (t (s), T (J)), t increasing from 0: T(t) piecewise linear between them and
    the last T after the last.  ``particle_frictions``: None or (members, n) γ_i (1/s) by original id, which then
    replace ``friction`` body by body.  Every value is an integer below 2³² or a float, exact in float64."""
    members = coef.shape[0]
    knots = np.zeros((0, 2)) if schedule is None else np.asarray(schedule, dtype=np.float64)
    frictions = np.zeros((members, 0)) if particle_frictions is None else np.asarray(particle_frictions, np.float64)
    columns = list(frictions.T)
    columns += [np.full(members, value) for value in knot_rows(knots)]
    columns += [np.broadcast_to(np.asarray(value, dtype=np.float64), (members,))
                for value in (frictions.shape[1], len(knots), temperature, cooling_rate, friction, diffusion, speed, rotational_diffusion,
                              key[0], key[1])]
    columns.append(np.asarray(member_ids, dtype=np.float64).reshape(members))
    return np.ascontiguousarray(np.column_stack([coef] + columns))


@lane_function
def bath_row(c, row, b):
    """Row ``row`` (negative: from the end) of lane b's coefficients."""
    return c[c.shape[0] + row, b]


@lane_function
def noise_counters(c, b):
    """Lane b's Philox key words and member id as the uint64 values the counter takes."""
    return (np.uint64(bath_row(c, KEY0, b)), np.uint64(bath_row(c, KEY1, b)),
            np.uint64(bath_row(c, MEMBER, b)))


@lane_function
def step_index(t, h):
    """The global index j of the step that starts at t = j·h: |fl(fl(j·h)/h) − j| ≤ 2.3e-16·j < ½ below 2·10¹⁵."""
    return np.int64(np.rint(t / h))


@lane_function
def geodesic_flow(q, omega, tau, i, b):
    """Body i, lane b: the free particle's exact flow on S² for time tau: q turns about ω by the angle |ω| τ
    (Rodrigues: q ← cos(|ω|τ) q + (sin(|ω|τ)/|ω|) ω × q, since ω ⊥ q), ω unchanged; then q ← q/‖q‖ and
    ω ← ω − (ω·q) q, so round-off neither leaves the sphere nor the tangent plane."""
    w0, w1, w2 = omega[i, 0, b], omega[i, 1, b], omega[i, 2, b]
    q0, q1, q2 = q[i, 0, b], q[i, 1, b], q[i, 2, b]
    speed = np.sqrt(w0 * w0 + w1 * w1 + w2 * w2)
    angle = speed * tau
    along = np.cos(angle)
    across = np.sin(angle) / speed if speed > 0.0 else tau
    p0 = along * q0 + across * (w1 * q2 - w2 * q1)
    p1 = along * q1 + across * (w2 * q0 - w0 * q2)
    p2 = along * q2 + across * (w0 * q1 - w1 * q0)
    put_on_sphere(q, omega, p0, p1, p2, i, b)


@lane_function
def put_on_sphere(q, omega, p0, p1, p2, i, b):
    """q_i ← p/‖p‖ and ω_i ← its component tangent at the new q_i."""
    norm = np.sqrt(p0 * p0 + p1 * p1 + p2 * p2)
    p0, p1, p2 = p0 / norm, p1 / norm, p2 / norm
    q[i, 0, b], q[i, 1, b], q[i, 2, b] = p0, p1, p2
    radial = omega[i, 0, b] * p0 + omega[i, 1, b] * p1 + omega[i, 2, b] * p2
    omega[i, 0, b] -= radial * p0
    omega[i, 1, b] -= radial * p1
    omega[i, 2, b] -= radial * p2


@lane_function
def half_kick(q, omega, grad, half_h_over_mass, i, b):
    """B: ω_i ← ω_i − (h/2M_ii) q_i × ∂V/∂q_i (the half kick of Lee–Leok–McClamroch eq. (30))."""
    c = half_h_over_mass[i, b]
    q0, q1, q2 = q[i, 0, b], q[i, 1, b], q[i, 2, b]
    omega[i, 0, b] -= c * (q1 * grad[i, 2, b] - q2 * grad[i, 1, b])
    omega[i, 1, b] -= c * (q2 * grad[i, 0, b] - q0 * grad[i, 2, b])
    omega[i, 2, b] -= c * (q0 * grad[i, 1, b] - q1 * grad[i, 0, b])


@lane_function
def ornstein_uhlenbeck(q, omega, mass, decay, spread, step, member, key0, key1, body, i, b):
    """O: ω_i ← e^{−γh} ω_i + √((1 − e^{−2γh}) T/M_ii) P_i ξ, ξ three of the step's normals for ``body`` (the
    particle's tag; i is its row); returns the kinetic energy the bath gave, ½ M_ii (|ω_i'|² − |ω_i|²) (J)."""
    x0, x1, x2 = gaussian_triple(step, member, body, O_STAGE, key0, key1)
    q0, q1, q2 = q[i, 0, b], q[i, 1, b], q[i, 2, b]
    radial = x0 * q0 + x1 * q1 + x2 * q2
    w0, w1, w2 = omega[i, 0, b], omega[i, 1, b], omega[i, 2, b]
    v0 = decay * w0 + spread * (x0 - radial * q0)
    v1 = decay * w1 + spread * (x1 - radial * q1)
    v2 = decay * w2 + spread * (x2 - radial * q2)
    omega[i, 0, b], omega[i, 1, b], omega[i, 2, b] = v0, v1, v2
    return 0.5 * mass * ((v0 * v0 + v1 * v1 + v2 * v2) - (w0 * w0 + w1 * w1 + w2 * w2))


@lane_function
def langevin_first_half(q, omega, grad, half_h_over_mass, h, decay, spread, mass, step, member, key0, key1, body, i, b):
    """B, A, O, A of body i in lane b, moving q_i; returns the heat of O (J).  The second B needs ∂V/∂q at every
    body's new q."""
    half_kick(q, omega, grad, half_h_over_mass, i, b)
    geodesic_flow(q, omega, 0.5 * h, i, b)
    heat = ornstein_uhlenbeck(q, omega, mass, decay, spread, step, member, key0, key1, body, i, b)
    geodesic_flow(q, omega, 0.5 * h, i, b)
    return heat


@lane_function
def body_friction(coef, body, b):
    """γ (1/s) of the body whose original id is ``body`` in lane b: its own where the system gives the particles
    frictions (a type's), else the bath's ``friction``."""
    count = int(bath_row(coef, PARTICLE_FRICTIONS, b))
    if count == 0:
        return bath_row(coef, FRICTION, b)
    return coef[coef.shape[0] - len(BATH_ROWS) - 2 * int(bath_row(coef, KNOTS, b)) - count + body, b]


@lane_function
def bath_factors(coef, h, mass, body, b):
    """e^{−γh} and √((1 − e^{−2γh})/M) of lane b's bath for the body of original id ``body`` and inertia ``mass``
    (γ: :func:`body_friction`; the Ornstein–Uhlenbeck step's spread is the latter times √T)."""
    decay = np.exp(-body_friction(coef, body, b) * h)
    return decay, np.sqrt((1.0 - decay * decay) / mass)


@lane_function
def brownian_factors(coef, h, mass, body, b):
    """h/ζ and √(2h/ζ) of lane b's bath for the body of original id ``body`` and inertia ``mass`` (the Brownian
    step's spread √(2 D h) = √(2 T h/ζ) is the latter times √T): ζ = M γ (γ: :func:`body_friction`), or, where a
    diffusion D₀ is given, ζ = T₀/D₀ for every body (T₀ the temperature at t = 0, > 0)."""
    diffusion = bath_row(coef, DIFFUSION, b)
    if diffusion > 0.0:
        mobility = h * diffusion / bath_row(coef, TEMPERATURE, b)
    else:
        mobility = h / (mass * body_friction(coef, body, b))
    return mobility, np.sqrt(2.0 * mobility)


@lane_function
def bath_temperature(coef, step, h, b):
    """T (J) of lane b's bath in the step that starts at t = step·h: its schedule's T(t), piecewise linear between
    the knots (t_k, T_k) and T_K after the last, or without one max(T₀ − rate·t, 0).  A function of the step index
    alone, so a run continued inside a ramp has the bits of one that never stopped."""
    t = step * h
    knots = int(bath_row(coef, KNOTS, b))
    if knots == 0:
        return max(bath_row(coef, TEMPERATURE, b) - bath_row(coef, COOLING_RATE, b) * t, 0.0)
    return piecewise_linear(coef, coef.shape[0] - len(BATH_ROWS) - 2 * knots, knots, t, b)


@lane_function
def thermal_scale(coef, step, h, b):
    """√T of lane b's bath in the step that starts at t = step·h (:func:`bath_temperature`)."""
    return np.sqrt(bath_temperature(coef, step, h, b))


def langevin_allocate(n, lanes):
    """Work: ∂V/∂q at the current q, h/(2M_ii), √((1 − e^{−2γ_i h})/M_ii), e^{−γ_i h}, this step's heat per lane."""
    return np.empty((n, 3, lanes)), np.empty((n, lanes)), np.empty((n, lanes)), np.empty((n, lanes)), np.zeros(lanes)


def langevin_begin(q, omega, mass_diag, mass_full, coef, topology, h, options, work):
    grad, half_h_over_mass, spread, decay, heat = work
    system_gradient(q, coef, topology, grad)  # noqa: F821 (bound at specialisation)
    half_steps_over_mass(mass_diag, h, half_h_over_mass)
    for i in range(q.shape[0]):
        for b in range(q.shape[2]):
            decay[i, b], spread[i, b] = bath_factors(coef, h, mass_diag[i, b], i, b)


def langevin_step(t, q, omega, mass_diag, mass_full, coef, topology, h, options, work, active, code, iterations):
    """One geodesic BAOAB step (module docstring); the bath's heat of the step goes to work[4]."""
    grad, half_h_over_mass, spread, decay, heat = work
    n = q.shape[0]
    lanes = q.shape[2]
    step = step_index(t, h)
    for b in range(lanes):
        heat[b] = 0.0
        key0, key1, member = noise_counters(coef, b)
        thermal = thermal_scale(coef, step, h, b)
        for i in range(n):
            heat[b] += langevin_first_half(q, omega, grad, half_h_over_mass, h, decay[i, b], spread[i, b] * thermal,
                                           mass_diag[i, b], step, member, key0, key1, i, i, b)
    system_gradient(q, coef, topology, grad)  # noqa: F821
    for i in range(n):
        for b in range(lanes):
            half_kick(q, omega, grad, half_h_over_mass, i, b)
    for b in range(lanes):
        code[b] = 0
        iterations[b] = 0


def bath_heat(t_next, q, omega, coef, topology, moments, power, next_power, done, h, work):
    """``integrator_work`` of the stochastic methods: done += the heat the bath gave in the step (J)."""
    heat = work[-1]
    for b in range(done.shape[0]):
        done[b] += heat[b]


def brownian_allocate(n, lanes):
    """Work: ∂V/∂q at the current q, h/ζ_i = h/(M_ii γ), √(2h/ζ_i) (times √T: √(2 D_i h))."""
    return np.empty((n, 3, lanes)), np.empty((n, lanes)), np.empty((n, lanes))


def brownian_begin(q, omega, mass_diag, mass_full, coef, topology, h, options, work):
    grad, mobility, spread = work
    for i in range(q.shape[0]):
        for b in range(q.shape[2]):
            mobility[i, b], spread[i, b] = brownian_factors(coef, h, mass_diag[i, b], i, b)


def brownian_step(t, q, omega, mass_diag, mass_full, coef, topology, h, options, work, active, code, iterations):
    """One geodesic Euler–Maruyama step of overdamped dynamics (module docstring); with ``ACTIVE`` (a constant
    bound at specialisation: ``brownian`` with ``active``) of active Brownian particles (:func:`active_move`)."""
    grad, mobility, spread = work
    n = q.shape[0]
    lanes = q.shape[2]
    step = step_index(t, h)
    system_gradient(q, coef, topology, grad)  # noqa: F821
    for b in range(lanes):
        key0, key1, member = noise_counters(coef, b)
        thermal = thermal_scale(coef, step, h, b)
        speed, half_turn = active_factors(coef, h, b) if ACTIVE else (0.0, 0.0)  # noqa: F821
        for i in range(n):
            if ACTIVE:  # noqa: F821
                active_move(q, omega, grad, h, mobility[i, b], spread[i, b] * thermal, speed, half_turn, step, member,
                            key0, key1, i, i, b)
                continue
            x0, x1, x2 = gaussian_triple(step, member, i, O_STAGE, key0, key1)
            geodesic_move(q, grad, mobility[i, b], spread[i, b] * thermal, x0, x1, x2, i, b)
            for k in range(3):
                omega[i, k, b] = 0.0
    for b in range(lanes):
        code[b] = 0
        iterations[b] = 0


@lane_function
def geodesic_move(q, grad, mobility, spread, x0, x1, x2, i, b):
    """Body i, lane b: v = P(−(h/ζ) ∂V/∂q + √(2Dh) ξ), q ← cos|v| q + sin|v| v/|v|, renormalised."""
    q0, q1, q2 = q[i, 0, b], q[i, 1, b], q[i, 2, b]
    u0 = spread * x0 - mobility * grad[i, 0, b]
    u1 = spread * x1 - mobility * grad[i, 1, b]
    u2 = spread * x2 - mobility * grad[i, 2, b]
    radial = u0 * q0 + u1 * q1 + u2 * q2
    v0, v1, v2 = u0 - radial * q0, u1 - radial * q1, u2 - radial * q2
    length = np.sqrt(v0 * v0 + v1 * v1 + v2 * v2)
    along = np.cos(length)
    across = np.sin(length) / length if length > 0.0 else 1.0
    p0, p1, p2 = along * q0 + across * v0, along * q1 + across * v1, along * q2 + across * v2
    norm = np.sqrt(p0 * p0 + p1 * p1 + p2 * p2)
    q[i, 0, b], q[i, 1, b], q[i, 2, b] = p0 / norm, p1 / norm, p2 / norm



@lane_function
def turn_about(q, omega, angle, i, b):
    """ω_i ← ω_i turned about q_i by ``angle`` (rad): cos φ ω + sin φ q × ω, for ω ⊥ q."""
    c, s = np.cos(angle), np.sin(angle)
    q0, q1, q2 = q[i, 0, b], q[i, 1, b], q[i, 2, b]
    w0, w1, w2 = omega[i, 0, b], omega[i, 1, b], omega[i, 2, b]
    omega[i, 0, b] = c * w0 + s * (q1 * w2 - q2 * w1)
    omega[i, 1, b] = c * w1 + s * (q2 * w0 - q0 * w2)
    omega[i, 2, b] = c * w2 + s * (q0 * w1 - q1 * w0)


@lane_function
def active_move(q, omega, grad, h, mobility, spread, speed, half_turn, step, member, key0, key1, body, i, b):
    """Body i, lane b of an active Brownian particle, its heading n_i carried as ω_i = v₀ q_i × n_i (the
    propulsion's angular velocity: q̇ = ω × q = v₀ n).  A Strang splitting of the heading's rotational diffusion
    around the geodesic move: ω turns about q by √(D_r h) η₁; q moves along the geodesic of
    v = h ω × q + P(−(h/ζ) ∂V/∂q + √(2Dh) ξ) (the exponential map), and ω with it by the same rotation, about
    q × v by |v| (parallel transport along the great circle); ω turns about the new q by √(D_r h) η₂; then
    q ← q/‖q‖ and ω ← its tangent part rescaled to |ω| = v₀, so the heading stays tangent and unit."""
    x0, x1, x2 = gaussian_triple(step, member, body, O_STAGE, key0, key1)
    y0, y1 = gaussian_pair(step, member, body, HEADING_STAGE, key0, key1)
    scale_to(omega, speed, i, b)  # a start's ω gives the heading's direction only
    turn_about(q, omega, half_turn * y0, i, b)
    q0, q1, q2 = q[i, 0, b], q[i, 1, b], q[i, 2, b]
    w0, w1, w2 = omega[i, 0, b], omega[i, 1, b], omega[i, 2, b]
    u0 = spread * x0 - mobility * grad[i, 0, b] + h * (w1 * q2 - w2 * q1)
    u1 = spread * x1 - mobility * grad[i, 1, b] + h * (w2 * q0 - w0 * q2)
    u2 = spread * x2 - mobility * grad[i, 2, b] + h * (w0 * q1 - w1 * q0)
    radial = u0 * q0 + u1 * q1 + u2 * q2
    v0, v1, v2 = u0 - radial * q0, u1 - radial * q1, u2 - radial * q2
    length = np.sqrt(v0 * v0 + v1 * v1 + v2 * v2)
    if length > 0.0:
        # the rotation about a = q × v/|v| by |v| takes q to exp_q(v) and transports ω along the great circle:
        # R x = cos θ x + sin θ a × x + (1 − cos θ)(a·x) a
        c, s = np.cos(length), np.sin(length)
        a0, a1, a2 = (q1 * v2 - q2 * v1) / length, (q2 * v0 - q0 * v2) / length, (q0 * v1 - q1 * v0) / length
        p0, p1, p2 = c * q0 + s * v0 / length, c * q1 + s * v1 / length, c * q2 + s * v2 / length
        along = (1.0 - c) * (a0 * w0 + a1 * w1 + a2 * w2)
        w0, w1, w2 = (c * w0 + s * (a1 * w2 - a2 * w1) + along * a0, c * w1 + s * (a2 * w0 - a0 * w2) + along * a1,
                      c * w2 + s * (a0 * w1 - a1 * w0) + along * a2)
        norm = np.sqrt(p0 * p0 + p1 * p1 + p2 * p2)
        q[i, 0, b], q[i, 1, b], q[i, 2, b] = p0 / norm, p1 / norm, p2 / norm
        omega[i, 0, b], omega[i, 1, b], omega[i, 2, b] = w0, w1, w2
    turn_about(q, omega, half_turn * y1, i, b)
    put_on_sphere(q, omega, q[i, 0, b], q[i, 1, b], q[i, 2, b], i, b)
    scale_to(omega, speed, i, b)


@lane_function
def scale_to(omega, speed, i, b):
    """ω_i ← ω_i · speed/|ω_i|."""
    factor = speed / np.sqrt(omega[i, 0, b] ** 2 + omega[i, 1, b] ** 2 + omega[i, 2, b] ** 2)
    for k in range(3):
        omega[i, k, b] *= factor


@lane_function
def active_factors(coef, h, b):
    """An active particle's speed v₀ (rad/s) and half-step turn scale √(D_r h) (rad) of lane b."""
    return bath_row(coef, SPEED, b), np.sqrt(bath_row(coef, ROTATIONAL_DIFFUSION, b) * h)


# ------------------------------------------------------------------ the system-parallel mode's stages
# (kernels.system_parallel: one member of many particles, a parallel loop over particles per stage; row i holds
# the particle whose original index is ids[i], which keys its noise, so the bits do not depend on the storage order)


@lane_function
def copy_body(source, target, i):
    """Row i of a one-lane block: target ← source."""
    for k in range(3):
        target[i, k, 0] = source[i, k, 0]


@lane_function
def langevin_particle_factors(coef, h, mass_diag, i, body, factors):
    """The Ornstein–Uhlenbeck factors of row i (original id ``body``, whose friction γ it is), once per call:
    e^{−γ h} and √((1 − e^{−2γ h})/M_ii) (:func:`bath_factors`)."""
    factors[i, 0], factors[i, 1] = bath_factors(coef, h, mass_diag[i, 0], body, 0)


@lane_function
def langevin_particle_drift(q, omega, grad, half_h_over_mass, h, q_next, i, step, coef, mass_diag, factors, ids,
                            heat):
    """B, A, O, A of particle i into q_next (q keeps q_k until the kick), its bath's factors from
    :func:`langevin_particle_factors`; the heat of O goes to heat[i].  Returns 1 (a Langevin step is never
    infeasible)."""
    copy_body(q, q_next, i)
    key0, key1, member = noise_counters(coef, 0)
    heat[i] = langevin_first_half(q_next, omega, grad, half_h_over_mass, h, factors[i, 0],
                                  factors[i, 1] * thermal_scale(coef, step, h, 0), mass_diag[i, 0], step, member, key0,
                                  key1, ids[i], i, 0)
    return 1.0


@lane_function
def langevin_particle_kick(q_next, omega, grad, half_h_over_mass, q, i, coef, mass_diag, ids, heat):
    """The second B of particle i with ∂V/∂q at q_{k+1}; then q_i ← q_{k+1,i}."""
    half_kick(q_next, omega, grad, half_h_over_mass, i, 0)
    copy_body(q_next, q, i)


@lane_function
def brownian_particle_factors(coef, h, mass_diag, i, body, factors):
    """The Brownian factors of row i (original id ``body``), once per call: h/ζ and √(2h/ζ)
    (:func:`brownian_factors`)."""
    factors[i, 0], factors[i, 1] = brownian_factors(coef, h, mass_diag[i, 0], body, 0)


@lane_function
def brownian_particle_drift(q, omega, grad, half_h_over_mass, h, q_next, i, step, coef, mass_diag, factors, ids,
                            heat):
    """The geodesic Euler–Maruyama step of particle i from q (∂V/∂q there) into q_next, its factors from
    :func:`brownian_particle_factors`; ω_i = 0.  Returns 1."""
    copy_body(q, q_next, i)
    for k in range(3):
        omega[i, k, 0] = 0.0
    key0, key1, member = noise_counters(coef, 0)
    x0, x1, x2 = gaussian_triple(step, member, ids[i], O_STAGE, key0, key1)
    geodesic_move(q_next, grad, factors[i, 0], factors[i, 1] * thermal_scale(coef, step, h, 0), x0, x1, x2, i, 0)
    return 1.0


@lane_function
def brownian_particle_kick(q_next, omega, grad, half_h_over_mass, q, i, coef, mass_diag, ids, heat):
    """q_i ← q_{k+1,i} (overdamped dynamics has no kick)."""
    copy_body(q_next, q, i)


@lane_function
def active_brownian_particle_drift(q, omega, grad, half_h_over_mass, h, q_next, i, step, coef, mass_diag, factors,
                                   ids, heat):
    """:func:`active_move` of particle i from q into q_next, its factors from :func:`brownian_particle_factors`.
    Returns 1."""
    copy_body(q, q_next, i)
    speed, half_turn = active_factors(coef, h, 0)
    key0, key1, member = noise_counters(coef, 0)
    active_move(q_next, omega, grad, h, factors[i, 0], factors[i, 1] * thermal_scale(coef, step, h, 0), speed,
                half_turn, step, member, key0, key1, ids[i], i, 0)
    return 1.0
