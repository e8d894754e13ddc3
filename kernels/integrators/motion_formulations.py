"""The four formulations of a rigid body's motion on SE(3) (Massa & Vignolo §3, digest_002 §3–§4), for the
Runge–Kutta methods on flat lanes: each integrates its own variables, converting from and to the stored
(R, x, Ω, V) around every step (so runs resume bitwise in every formulation).  For a body with a constant
6×6 generalised inertia 𝕄 in the order (Ω, V) (the SE(3) coefficient header of :mod:`kernels.systems.rigid`)
and loads (τ, F) (torque about O and resultant force, body frame; ``system_torque``):

- ``kirchhoff`` (left-invariant (Ω, V), body components; the system's own vector field, no conversion):
  K̇ = K × Ω + P × V + τ, Ṗ = P × Ω + F with (K, P) = 𝕄(Ω, V), Ṙ = R Ω̂, ẋ = R V.
- ``newton_euler`` (right-invariant: the observer's momenta, the spatial impulse Q̂ = R P and
  Γ̂ = R K + x × Q̂ about the fixed origin): dQ̂/dt = R F, dΓ̂/dt = R τ + x × R F (§3.3: with no loads
  both are constants of the step, so every Runge–Kutta method keeps them to round-off); the velocities
  (Ω, V) = 𝕄⁻¹(K, P) with P = RᵀQ̂, K = Rᵀ(Γ̂ − x × Q̂) drive Ṙ = R Ω̂, ẋ = R V.
- ``hybrid`` (ḃ, the observer components of O's velocity, and Ω; §3.4): Gauss's equations in these
  velocities are dQ̂/dt = R F and Kirchhoff's angular equation; with a = Rᵀb̈ they read
  𝕄 (Ω̇, a) = (K × Ω + P × V + τ + 𝕄₁₂(Ω × V), P × Ω + F + 𝕄₂₂(Ω × V)), V = Rᵀḃ, and ẋ = ḃ, b̈ = R a.
- ``lagrange`` (a chart: x and the Z–Y–X Euler angles η = (φ, θ, ψ), R = R_z(ψ) R_y(θ) R_x(φ), with their
  rates; §3.1): Ω = E(η) η̇, V = Rᵀẋ.  Lagrange's equations in the chart are Jᵀ times Gauss's, J = ∂z/∂q̇
  (digest_002 §2, footnote 2), so away from the chart's singularity (J invertible) they give
  η̈ = E⁻¹(Ω̇ − Ė η̇), ẍ = R(V̇ + Ω × V) with (Ω̇, V̇) from Kirchhoff's equations.  E is singular at
  cos θ = 0 (gimbal lock): a member whose |cos θ| falls below CHART_LIMIT stops with status
  CHART_SINGULAR instead of running into a NaN.  The chart needs sin, cos, asin and atan2 (scalar libm
  calls per lane, so the kernels run blocks of one lane: bits never depend on SIMD width).

Flat rows of a body in each formulation (``y``): R's rows hold R (newton_euler, hybrid) or (η, η̇, 0, 0, 0)
(lagrange); x's rows hold x; the two velocity slots hold (Q̂, Γ̂), (ḃ, Ω) or (ẋ, 0).
Free names bound at specialisation: ``system_torque`` (the loads; it reads R's and x's rows, so the
formulations evaluate it on the stored layout).
"""

import numpy as np

from ..lanes import cross3 as cross
from ..lanes import lane_function
from ..status import CHART_SINGULAR
from ..systems.rigid import (INVERSE6, MOTION_HEADER, attitude_rate, body_loads, kirchhoff_forces, kirchhoff_rates,
                             matrix3_times, matrix6_times)

FORMULATIONS = ("kirchhoff", "newton_euler", "hybrid", "lagrange")
DEFAULT_FORMULATION = "kirchhoff"
#: |cos θ| below which the Euler-angle chart counts as singular (θ within 0.06° of ±90°: E⁻¹ ~ 1/cos θ
#: amplifies the step's errors a thousandfold)
CHART_LIMIT = 1e-3


@lane_function
def rows_of(n, i):
    """(R, x, first velocity, second velocity) row offsets of body i on SE(3)ⁿ's flat layout."""
    return 9 * i, 9 * n + 3 * i, 12 * n + 3 * i, 15 * n + 3 * i


@lane_function
def rotate_rows_back(x, base, b, v0, v1, v2):
    """Rᵀ v for the R at rows base … base + 8, lane b."""
    return (x[base, b] * v0 + x[base + 3, b] * v1 + x[base + 6, b] * v2,
            x[base + 1, b] * v0 + x[base + 4, b] * v1 + x[base + 7, b] * v2,
            x[base + 2, b] * v0 + x[base + 5, b] * v1 + x[base + 8, b] * v2)


@lane_function
def copy_pose(source, target, n):
    """R and x rows of every body from source to target."""
    for r in range(12 * n):
        for b in range(source.shape[1]):
            target[r, b] = source[r, b]


# ------------------------------------------------------------------------ Newton–Euler (observer momenta)

def newton_euler_in(x, n, coef, y, code):
    copy_pose(x, y, n)
    for i in range(n):
        base, p, first, second = rows_of(n, i)
        k = MOTION_HEADER * i
        for b in range(x.shape[1]):
            k0, k1, k2, p0, p1, p2 = matrix6_times(coef, k, b, x[first, b], x[first + 1, b], x[first + 2, b],
                                                   x[second, b], x[second + 1, b], x[second + 2, b])
            q0, q1, q2 = matrix3_times(x, base, b, p0, p1, p2)
            a0, a1, a2 = matrix3_times(x, base, b, k0, k1, k2)
            c0, c1, c2 = cross(x[p, b], x[p + 1, b], x[p + 2, b], q0, q1, q2)
            y[first, b], y[first + 1, b], y[first + 2, b] = q0, q1, q2
            y[second, b], y[second + 1, b], y[second + 2, b] = a0 + c0, a1 + c1, a2 + c2


@lane_function
def newton_euler_velocities(y, n, coef, i, b):
    """(Ω, V) = 𝕄⁻¹(K, P) with P = RᵀQ̂, K = Rᵀ(Γ̂ − x × Q̂) for body i, lane b."""
    base, p, first, second = rows_of(n, i)
    q0, q1, q2 = y[first, b], y[first + 1, b], y[first + 2, b]
    c0, c1, c2 = cross(y[p, b], y[p + 1, b], y[p + 2, b], q0, q1, q2)
    k0, k1, k2 = rotate_rows_back(y, base, b, y[second, b] - c0, y[second + 1, b] - c1, y[second + 2, b] - c2)
    p0, p1, p2 = rotate_rows_back(y, base, b, q0, q1, q2)
    return matrix6_times(coef, MOTION_HEADER * i + INVERSE6, b, k0, k1, k2, p0, p1, p2)


def newton_euler_out(y, n, coef, x, code):
    copy_pose(y, x, n)
    for i in range(n):
        base, p, first, second = rows_of(n, i)
        for b in range(y.shape[1]):
            w0, w1, w2, v0, v1, v2 = newton_euler_velocities(y, n, coef, i, b)
            x[first, b], x[first + 1, b], x[first + 2, b] = w0, w1, w2
            x[second, b], x[second + 1, b], x[second + 2, b] = v0, v1, v2


def newton_euler_field(y, n, coef, topology, t, dy, work):
    """Ṙ = R Ω̂, ẋ = R V, dQ̂/dt = R F, dΓ̂/dt = R τ + x × R F."""
    system_torque(y, n, coef, topology, work)  # noqa: F821 (bound at specialisation)
    for i in range(n):
        base, p, first, second = rows_of(n, i)
        for b in range(y.shape[1]):
            w0, w1, w2, v0, v1, v2 = newton_euler_velocities(y, n, coef, i, b)
            attitude_rate(y, dy, base, b, w0, w1, w2)
            dy[p, b], dy[p + 1, b], dy[p + 2, b] = matrix3_times(y, base, b, v0, v1, v2)
            t0, t1, t2, g0, g1, g2 = body_loads(work, i, b)
            f0, f1, f2 = matrix3_times(y, base, b, g0, g1, g2)
            t0, t1, t2 = matrix3_times(y, base, b, t0, t1, t2)
            c0, c1, c2 = cross(y[p, b], y[p + 1, b], y[p + 2, b], f0, f1, f2)
            dy[first, b], dy[first + 1, b], dy[first + 2, b] = f0, f1, f2
            dy[second, b], dy[second + 1, b], dy[second + 2, b] = t0 + c0, t1 + c1, t2 + c2


# ------------------------------------------------------------------------ hybrid (ḃ, Ω)

def hybrid_in(x, n, coef, y, code):
    copy_pose(x, y, n)
    for i in range(n):
        base, p, first, second = rows_of(n, i)
        for b in range(x.shape[1]):
            d0, d1, d2 = matrix3_times(x, base, b, x[second, b], x[second + 1, b], x[second + 2, b])
            w0, w1, w2 = x[first, b], x[first + 1, b], x[first + 2, b]
            y[first, b], y[first + 1, b], y[first + 2, b] = d0, d1, d2
            y[second, b], y[second + 1, b], y[second + 2, b] = w0, w1, w2


def hybrid_out(y, n, coef, x, code):
    copy_pose(y, x, n)
    for i in range(n):
        base, p, first, second = rows_of(n, i)
        for b in range(y.shape[1]):
            v0, v1, v2 = rotate_rows_back(y, base, b, y[first, b], y[first + 1, b], y[first + 2, b])
            w0, w1, w2 = y[second, b], y[second + 1, b], y[second + 2, b]
            x[first, b], x[first + 1, b], x[first + 2, b] = w0, w1, w2
            x[second, b], x[second + 1, b], x[second + 2, b] = v0, v1, v2


def hybrid_field(y, n, coef, topology, t, dy, work):
    """Ṙ = R Ω̂, ẋ = ḃ, 𝕄 (Ω̇, a) = (K × Ω + P × V + τ + 𝕄₁₂(Ω × V), P × Ω + F + 𝕄₂₂(Ω × V)), b̈ = R a."""
    system_torque(y, n, coef, topology, work)  # noqa: F821
    for i in range(n):
        base, p, first, second = rows_of(n, i)
        k = MOTION_HEADER * i
        for b in range(y.shape[1]):
            w0, w1, w2 = y[second, b], y[second + 1, b], y[second + 2, b]
            v0, v1, v2 = rotate_rows_back(y, base, b, y[first, b], y[first + 1, b], y[first + 2, b])
            c0, c1, c2 = cross(w0, w1, w2, v0, v1, v2)
            m0, m1, m2, n0, n1, n2 = matrix6_times(coef, k, b, 0.0, 0.0, 0.0, c0, c1, c2)  # (𝕄₁₂, 𝕄₂₂)(Ω × V)
            t0, t1, t2, f0, f1, f2 = body_loads(work, i, b)
            g0, g1, g2, h0, h1, h2 = kirchhoff_forces(coef, k, b, w0, w1, w2, v0, v1, v2, t0, t1, t2, f0, f1, f2)
            e0, e1, e2, a0, a1, a2 = matrix6_times(coef, k + INVERSE6, b, g0 + m0, g1 + m1, g2 + m2, h0 + n0, h1 + n1,
                                                   h2 + n2)
            attitude_rate(y, dy, base, b, w0, w1, w2)
            dy[p, b], dy[p + 1, b], dy[p + 2, b] = y[first, b], y[first + 1, b], y[first + 2, b]
            dy[first, b], dy[first + 1, b], dy[first + 2, b] = matrix3_times(y, base, b, a0, a1, a2)
            dy[second, b], dy[second + 1, b], dy[second + 2, b] = e0, e1, e2


# ------------------------------------------------------------------------ Lagrange (x and Z–Y–X Euler angles)

@lane_function
def euler_matrix_into(x, base, b, phi, theta, psi):
    """R = R_z(ψ) R_y(θ) R_x(φ) into rows base … base + 8, lane b."""
    cf, sf, ct, st, cp, sp = np.cos(phi), np.sin(phi), np.cos(theta), np.sin(theta), np.cos(psi), np.sin(psi)
    x[base, b], x[base + 1, b], x[base + 2, b] = cp * ct, cp * st * sf - sp * cf, cp * st * cf + sp * sf
    x[base + 3, b], x[base + 4, b], x[base + 5, b] = sp * ct, sp * st * sf + cp * cf, sp * st * cf - cp * sf
    x[base + 6, b], x[base + 7, b], x[base + 8, b] = -st, ct * sf, ct * cf


@lane_function
def euler_rates(phi, theta, w0, w1, w2):
    """η̇ = E(η)⁻¹ Ω for Ω = (φ̇ − ψ̇ sin θ, θ̇ cos φ + ψ̇ sin φ cos θ, −θ̇ sin φ + ψ̇ cos φ cos θ)."""
    cf, sf, ct, st = np.cos(phi), np.sin(phi), np.cos(theta), np.sin(theta)
    psi_rate = (w1 * sf + w2 * cf) / ct
    return w0 + psi_rate * st, w1 * cf - w2 * sf, psi_rate


@lane_function
def euler_body_rates(phi, theta, phi_rate, theta_rate, psi_rate):
    """Ω = E(η) η̇ (Z–Y–X)."""
    cf, sf, ct, st = np.cos(phi), np.sin(phi), np.cos(theta), np.sin(theta)
    return (phi_rate - psi_rate * st, theta_rate * cf + psi_rate * sf * ct, -theta_rate * sf + psi_rate * cf * ct)


@lane_function
def chart_check(theta, code, b):
    """Status CHART_SINGULAR where cos θ < CHART_LIMIT (E is singular at cos θ = 0).  A step starts from
    θ = −asin(R₂₀) ∈ [−π/2, π/2], so cos θ < 0 at its end means it stepped across the singularity."""
    if not np.cos(theta) >= CHART_LIMIT and code[b] == 0:
        code[b] = CHART_SINGULAR


def lagrange_in(x, n, coef, y, code):
    for i in range(n):
        base, p, first, second = rows_of(n, i)
        for b in range(x.shape[1]):
            theta = -np.arcsin(min(1.0, max(-1.0, x[base + 6, b])))
            phi = np.arctan2(x[base + 7, b], x[base + 8, b])
            psi = np.arctan2(x[base + 3, b], x[base, b])
            chart_check(theta, code, b)
            rates = euler_rates(phi, theta, x[first, b], x[first + 1, b], x[first + 2, b])
            y[base, b], y[base + 1, b], y[base + 2, b] = phi, theta, psi
            y[base + 3, b], y[base + 4, b], y[base + 5, b] = rates
            for r in range(3):
                y[base + 6 + r, b] = 0.0
                y[p + r, b] = x[p + r, b]
                y[second + r, b] = 0.0
            y[first, b], y[first + 1, b], y[first + 2, b] = matrix3_times(x, base, b, x[second, b], x[second + 1, b],
                                                                        x[second + 2, b])


def lagrange_out(y, n, coef, x, code):
    for i in range(n):
        base, p, first, second = rows_of(n, i)
        for b in range(y.shape[1]):
            phi, theta, psi = y[base, b], y[base + 1, b], y[base + 2, b]
            chart_check(theta, code, b)
            euler_matrix_into(x, base, b, phi, theta, psi)
            w = euler_body_rates(phi, theta, y[base + 3, b], y[base + 4, b], y[base + 5, b])
            x[first, b], x[first + 1, b], x[first + 2, b] = w
            for r in range(3):
                x[p + r, b] = y[p + r, b]
            x[second, b], x[second + 1, b], x[second + 2, b] = rotate_rows_back(x, base, b, y[first, b],
                                                                               y[first + 1, b], y[first + 2, b])


def lagrange_field(y, n, coef, topology, t, dy, work):
    """η̈ = E⁻¹(Ω̇ − Ė η̇), ẍ = R(V̇ + Ω × V), (Ω̇, V̇) from Kirchhoff's equations at Ω = E η̇, V = Rᵀẋ.  The loads
    read the attitude from the stored layout, so R(η) is built into ``work``'s pose rows first."""
    for i in range(n):
        base, p, first, second = rows_of(n, i)
        for b in range(y.shape[1]):
            euler_matrix_into(work, 6 * n + base, b, y[base, b], y[base + 1, b], y[base + 2, b])
            for r in range(3):
                work[6 * n + p + r, b] = y[p + r, b]
    system_torque(work[6 * n:], n, coef, topology, work)  # noqa: F821
    for i in range(n):
        base, p, first, second = rows_of(n, i)
        k = MOTION_HEADER * i
        pose = 6 * n + base
        for b in range(y.shape[1]):
            phi, theta = y[base, b], y[base + 1, b]
            phi_rate, theta_rate, psi_rate = y[base + 3, b], y[base + 4, b], y[base + 5, b]
            w0, w1, w2 = euler_body_rates(phi, theta, phi_rate, theta_rate, psi_rate)
            v0, v1, v2 = rotate_rows_back(work, pose, b, y[first, b], y[first + 1, b], y[first + 2, b])
            e0, e1, e2, a0, a1, a2 = kirchhoff_rates(coef, k, b, w0, w1, w2, v0, v1, v2, work, i)
            cf, sf, ct, st = np.cos(phi), np.sin(phi), np.cos(theta), np.sin(theta)
            # Ė η̇: the derivative of E(η) η̇ at fixed η̇
            d0 = -psi_rate * theta_rate * ct
            d1 = -theta_rate * phi_rate * sf + psi_rate * (phi_rate * cf * ct - theta_rate * sf * st)
            d2 = -theta_rate * phi_rate * cf - psi_rate * (phi_rate * sf * ct + theta_rate * cf * st)
            dy[base, b], dy[base + 1, b], dy[base + 2, b] = phi_rate, theta_rate, psi_rate
            dy[base + 3, b], dy[base + 4, b], dy[base + 5, b] = euler_rates(phi, theta, e0 - d0, e1 - d1, e2 - d2)
            c0, c1, c2 = cross(w0, w1, w2, v0, v1, v2)
            dy[first, b], dy[first + 1, b], dy[first + 2, b] = matrix3_times(work, pose, b, a0 + c0, a1 + c1, a2 + c2)
            for r in range(3):
                dy[base + 6 + r, b] = 0.0
                dy[p + r, b] = y[first + r, b]
                dy[second + r, b] = 0.0
