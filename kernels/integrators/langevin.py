"""Stochastic methods on (S²)ⁿ, in lane layout: Langevin dynamics by geodesic BAOAB and overdamped
(Brownian) dynamics by a geodesic Euler–Maruyama step.

The state is (q_i, ω_i) with q̇_i = ω_i × q_i, ω_i·q_i = 0 and kinetic energy ½ Σ M_ii |ω_i|² (diagonal M), as
for ``vi``.  Langevin dynamics at temperature T (J, k_B = 1) with friction γ (1/s):

    dω_i = −(1/M_ii) q_i × ∂V/∂q_i dt − γ ω_i dt + √(2γT/M_ii) P_i dW_i,     P_i = I − q_i q_iᵀ,

whose invariant measure is ∝ exp(−E/T) on the tangent bundle.  Geodesic BAOAB (Leimkuhler & Matthews 2016,
"Efficient molecular dynamics using geodesic integration and solvent–solute splitting", Proc. R. Soc. A 472:
20160138, §2–3) splits one step of size h into

    B: ω_i ← ω_i − (h/2M_ii) q_i × ∂V/∂q_i                      (the tangential force's half kick)
    A: the exact geodesic (great-circle) flow for h/2: q_i turns about ω_i by |ω_i| h/2, ω_i unchanged
    O: ω_i ← e^{−γh} ω_i + √((1 − e^{−2γh}) T/M_ii) P_i ξ_i       (the exact Ornstein–Uhlenbeck step)
    A, B as above,

one gradient per step (kept for the next step's first B, as vi keeps it).  Configurational averages are
second order in h (weak order 2 for the invariant measure, Leimkuhler & Matthews 2016 §3).  The heat the bath
gives, Σ_i ½ M_ii (|ω_i'|² − |ω_i|²) over each O, is summed per member, so E(t) − E(0) − Q(t) is the
splitting's own error.

Overdamped dynamics (``brownian``): with ζ_i = M_ii γ (friction coefficient) and D_i = T/ζ_i (rad²/s),

    dq_i = −(1/ζ_i) P_i ∂V/∂q_i dt + √(2 D_i) P_i ∘ dW_i   on the unit sphere,

stepped by the geodesic (exponential-map) Euler–Maruyama scheme: v_i = −(h/ζ_i) P_i ∂V/∂q_i + √(2 D_i h) P_i ξ_i,
q_i ← cos|v_i| q_i + sin|v_i| v_i/|v_i| (weak order 1; e.g. Leimkuhler & Matthews 2016 §5 on the overdamped
limit).  ω is not a variable of overdamped dynamics and stays 0.

Every q_i is renormalised after it moves, so ‖q_i‖ = 1 to round-off at every step, and ω_i is kept tangent.
The bath rides in the last BATH_ROWS rows of the coefficient block c (per member, so temperature and friction
can vary member by member): T, γ, the two words of the noise key, the global member id (see
:func:`with_bath`); the noise of body i in step j is :func:`kernels.noise.gaussian_quartet` (j, member, i,
stage), j = round(t/h) the global step index (exact below 2·10¹⁵ steps).  Free names bound at
specialisation: ``system_gradient``.
"""

import numpy as np

from ..lanes import lane_function
from ..noise import gaussian_quartet

#: the bath's rows at the end of the coefficient block, in order
BATH_ROWS = ("temperature", "friction", "noise_key0", "noise_key1", "member")
TEMPERATURE, FRICTION, KEY0, KEY1, MEMBER = range(-len(BATH_ROWS), 0)
#: the stages of a step that draw noise (counter word 3)
O_STAGE = 0


def with_bath(coef: np.ndarray, temperature, friction, key: tuple[int, int], member_ids) -> np.ndarray:
    """The coefficients (members, P) with the bath's rows appended (BATH_ROWS): temperature (J) and friction
    (1/s), each a scalar or one per member, the noise key and each member's global id.  Every value is an
    integer below 2³² or a float, exact in float64."""
    members = coef.shape[0]
    columns = [np.broadcast_to(np.asarray(value, dtype=np.float64), (members,))
               for value in (temperature, friction, key[0], key[1])]
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
def ornstein_uhlenbeck(q, omega, mass, decay, spread, step, member, key0, key1, i, b):
    """O: ω_i ← e^{−γh} ω_i + √((1 − e^{−2γh}) T/M_ii) P_i ξ, ξ three of the step's normals for body i; returns
    the kinetic energy the bath gave, ½ M_ii (|ω_i'|² − |ω_i|²) (J)."""
    x0, x1, x2, _ = gaussian_quartet(step, member, i, O_STAGE, key0, key1)
    q0, q1, q2 = q[i, 0, b], q[i, 1, b], q[i, 2, b]
    radial = x0 * q0 + x1 * q1 + x2 * q2
    w0, w1, w2 = omega[i, 0, b], omega[i, 1, b], omega[i, 2, b]
    v0 = decay * w0 + spread * (x0 - radial * q0)
    v1 = decay * w1 + spread * (x1 - radial * q1)
    v2 = decay * w2 + spread * (x2 - radial * q2)
    omega[i, 0, b], omega[i, 1, b], omega[i, 2, b] = v0, v1, v2
    return 0.5 * mass * ((v0 * v0 + v1 * v1 + v2 * v2) - (w0 * w0 + w1 * w1 + w2 * w2))


def langevin_allocate(n, lanes):
    """Work: ∂V/∂q at the current q, h/(2M_ii), √((1 − e^{−2γh}) T/M_ii), e^{−γh}, this step's heat per lane."""
    return np.empty((n, 3, lanes)), np.empty((n, lanes)), np.empty((n, lanes)), np.empty(lanes), np.zeros(lanes)


def langevin_begin(q, omega, mass_diag, mass_full, coef, topology, h, options, work):
    grad, half_h_over_mass, spread, decay, heat = work
    system_gradient(q, coef, topology, grad)  # noqa: F821 (bound at specialisation)
    for b in range(q.shape[2]):
        decay[b] = np.exp(-bath_row(coef, FRICTION, b) * h)
    for i in range(q.shape[0]):
        for b in range(q.shape[2]):
            half_h_over_mass[i, b] = 0.5 * h / mass_diag[i, b]
            spread[i, b] = np.sqrt((1.0 - decay[b] * decay[b]) * bath_row(coef, TEMPERATURE, b) / mass_diag[i, b])


def langevin_step(t, q, omega, mass_diag, mass_full, coef, topology, h, options, work, active, code, iterations):
    """One geodesic BAOAB step (module docstring); the bath's heat of the step goes to work[4]."""
    grad, half_h_over_mass, spread, decay, heat = work
    n = q.shape[0]
    lanes = q.shape[2]
    step = step_index(t, h)
    for b in range(lanes):
        heat[b] = 0.0
        key0, key1, member = noise_counters(coef, b)
        for i in range(n):
            half_kick(q, omega, grad, half_h_over_mass, i, b)
            geodesic_flow(q, omega, 0.5 * h, i, b)
            heat[b] += ornstein_uhlenbeck(q, omega, mass_diag[i, b], decay[b], spread[i, b], step, member, key0, key1,
                                          i, b)
            geodesic_flow(q, omega, 0.5 * h, i, b)
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
    """Work: ∂V/∂q at the current q, h/ζ_i = h/(M_ii γ), √(2 D_i h) = √(2 T h/ζ_i)."""
    return np.empty((n, 3, lanes)), np.empty((n, lanes)), np.empty((n, lanes))


def brownian_begin(q, omega, mass_diag, mass_full, coef, topology, h, options, work):
    grad, mobility, spread = work
    for i in range(q.shape[0]):
        for b in range(q.shape[2]):
            mobility[i, b] = h / (mass_diag[i, b] * bath_row(coef, FRICTION, b))
            spread[i, b] = np.sqrt(2.0 * bath_row(coef, TEMPERATURE, b) * mobility[i, b])
            for k in range(3):
                omega[i, k, b] = 0.0


def brownian_step(t, q, omega, mass_diag, mass_full, coef, topology, h, options, work, active, code, iterations):
    """One geodesic Euler–Maruyama step of overdamped dynamics (module docstring)."""
    grad, mobility, spread = work
    n = q.shape[0]
    lanes = q.shape[2]
    step = step_index(t, h)
    system_gradient(q, coef, topology, grad)  # noqa: F821
    for b in range(lanes):
        key0, key1, member = noise_counters(coef, b)
        for i in range(n):
            x0, x1, x2, _ = gaussian_quartet(step, member, i, O_STAGE, key0, key1)
            geodesic_move(q, grad, mobility[i, b], spread[i, b], x0, x1, x2, i, b)
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

