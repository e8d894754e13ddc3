"""System ``rolling_ball``: a ball rolling without slipping on a horizontal plane, moved by point masses on
rails fixed inside it (Putkaradze & Rogers, Meccanica 53 (2018); equations as reconstructed and checked
in digest_004 §4–§6).

The ball (shell) has radius r, mass m₀, inertia 𝕀 about its own centre of mass, which sits at χ₀ from the
geometric centre (body frame); mass i sits at χ_i = ζ_i(θ_i) on its rail (:mod:`kernels.systems.rails`).
With Γ = Rᵀe₃ (the vertical in the body frame) and s_i = rΓ + χ_i (from the contact point to body i),
Appendix B's eq. (B.8) with Γ̃ = 0 (digest §3: the horizontal plane under gravity alone) reads

    𝕁 Ω̇ = (𝕀Ω) × Ω − Σ_{i=0}^{N} m_i s_i × f_i,   f_i = gΓ + Ω × (Ω × χ_i) + 2 Ω × χ̇_i + χ̈_i,
    𝕁 = 𝕀 + Σ_i m_i (|s_i|² I − s_i s_iᵀ)   (the inertia about the contact point: SPD),

with Ṙ = R Ω̂ and the rolling constraint ẋ = r ω₂, ẏ = −r ω₁ (ω = R Ω; the contact material point is at
rest).  A free mass adds θ̈_i to the unknowns: with B_i = m_i s_i × ζ_i′, D_i = m_i |ζ_i′|² and f_i taking
ζ_i″ θ̇_i² for χ̈_i (digest §4, "rails with given forces"),

    [𝕁  B; Bᵀ  D] [Ω̇; θ̈] = [(𝕀Ω) × Ω − Σ m_i s_i × f_i;  Q_i − m_i ⟨ζ_i′, f_i⟩],

which the kernels solve by eliminating θ̈ (D is diagonal): (𝕁 − B D⁻¹ Bᵀ) Ω̇ = … by a 3 × 3 Cholesky
factorisation, then θ̈_i = (Q_i − m_i⟨ζ_i′, f_i⟩ − B_iᵀ Ω̇)/D_i.

Energy (digest §5): E = ½ Ω·𝕀Ω + ½ Σ_i m_i |Ω × s_i + χ̇_i|² + g Σ_i m_i ⟨Γ, χ_i⟩ (J; zero at the centre's
height).  It is conserved with fixed or free unforced masses; prescribed masses are moved by actuators
whose power m_i ⟨a_i + gΓ, χ̇_i⟩ (and a free mass's Q_i θ̇_i) the state's ``work`` integrates, so that
E − E₀ − work is the integrator's error.  a_i = Ω̇ × s_i + Ω × (Ω × χ_i) + 2 Ω × χ̇_i + χ̈_i is mass i's
inertial acceleration in body components.  The plane's force on the ball is F = Σ_i m_i (a_i + gΓ): its
normal part N = ⟨F, Γ⟩ must stay > 0 (status LIFT_OFF when it does not) and |F − NΓ| ≤ μ_s N when a
static friction coefficient μ_s is given (status SLIP), both checked after every step.

Momentum maps (digest §5): with every mass fixed and the whole centre of mass at the geometric centre (a
Chaplygin ball), the spatial angular momentum about the contact point R[𝕀Ω + Σ_i m_i s_i × (Ω × s_i)] (3
integrals); with masses fixed and an inertia about the whole centre of mass that is axisymmetric about an
axis through it and the geometric centre (a Routh sphere), Jellett's integral ⟨𝕀_cm Ω, CM → contact⟩.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..errors import InvalidInput
from ..lanes import inline_lane_function, lane_function
from ..spaces.rolling import CLOCK, CONTACT, OMEGA, RAILS, ROLLING, WORK
from ..spaces.rotation import orthogonality_lanes
from ..spaces.base import StateSpace
from ..status import LIFT_OFF, SLIP
from .base import MATRIX3, SCALAR, VECTOR3, FlatSystemDefinition, Parameter, Preset, System
from .rails import (FORCE, RAIL_ROWS, check_rails, free_count, mass_count, mass_kinematics, mass_point,
                    rail_angles, rail_coefficients,
                    rail_parameters, rail_points, rail_topology)
from .rigid import attitude_rate, check_inertia, matrix3_times

#: coefficient rows: 𝕀 (9, row-major), m₀, χ₀ (3), r, g, μ_s, then the rails' blocks
INERTIA, SHELL_MASS, SHELL_OFFSET, RADIUS, GRAVITY, FRICTION, FIRST_RAIL = 0, 9, 10, 13, 14, 15, 16
#: rows of the accelerations' work (lanes innermost): 𝕁's upper triangle, the right side, Σ m s, Σ m f, the
#: actuators' power's Ω̇-linear part Σ m s × χ̇ and the rest; then the results Ω̇ and the plane's force F; a
#: mass's rail angles (θ, θ̇, θ̈, sin θ, cos θ); then FREE_ROWS per free mass: β = B/D (3), γ = (Q − m⟨ζ′, f⟩)/D,
#: then θ̈ (1), m ζ′ (3)
J00, J01, J02, J11, J12, J22, RIGHT, MASS_S, MASS_F, POWER_RATE, POWER = 0, 1, 2, 3, 4, 5, 6, 9, 12, 15, 18
ACCELERATION, FORCE_ON_BALL, ANGLES, FIRST_FREE, FREE_ROWS = 19, 22, 25, 30, 7


def shell_coefficients(params, inertia: np.ndarray) -> np.ndarray:
    """(members, P) of a rolling body: its ``inertia`` columns, then m₀, χ₀, r, g, μ_s and the rails' blocks
    (the ball's and the disk's layouts, which differ only in how many inertia columns they hold)."""
    return np.concatenate([inertia, params["mass"][:, np.newaxis], params["center_of_mass"],
                           params["radius"][:, np.newaxis], params["g"][:, np.newaxis],
                           params["friction_coefficient"][:, np.newaxis], rail_coefficients(params)], axis=1)


def _coefficients(params, n):
    return shell_coefficients(params, params["inertia"].reshape(-1, 9))


@lane_function
def ball_field_work(rows, n, lanes):
    """The ball's work: :func:`ball_accelerations`'s rows, then the two contact-force rows of
    :func:`rolling_admissible`."""
    return np.empty((FIRST_FREE + FREE_ROWS * n + 2, lanes))


@inline_lane_function
def add_body(x, coef, work, b, m, c0, c1, c2, v0, v1, v2, a0, a1, a2):
    """Body i's terms in 𝕁, the right side, Σ m s and Σ m f, lane b, for mass m at χ = c with χ̇ = v and the
    known χ̈ = a; returns s = rΓ + χ and f = gΓ + Ω × (Ω × χ) + 2 Ω × χ̇ + χ̈."""
    g0, g1, g2 = x[6, b], x[7, b], x[8, b]
    w0, w1, w2 = x[OMEGA, b], x[OMEGA + 1, b], x[OMEGA + 2, b]
    r, g = coef[RADIUS, b], coef[GRAVITY, b]
    s0, s1, s2 = r * g0 + c0, r * g1 + c1, r * g2 + c2
    u0, u1, u2 = w1 * c2 - w2 * c1, w2 * c0 - w0 * c2, w0 * c1 - w1 * c0
    f0 = g * g0 + (w1 * u2 - w2 * u1) + 2.0 * (w1 * v2 - w2 * v1) + a0
    f1 = g * g1 + (w2 * u0 - w0 * u2) + 2.0 * (w2 * v0 - w0 * v2) + a1
    f2 = g * g2 + (w0 * u1 - w1 * u0) + 2.0 * (w0 * v1 - w1 * v0) + a2
    square = s0 * s0 + s1 * s1 + s2 * s2
    work[J00, b] += m * (square - s0 * s0)
    work[J11, b] += m * (square - s1 * s1)
    work[J22, b] += m * (square - s2 * s2)
    work[J01, b] -= m * s0 * s1
    work[J02, b] -= m * s0 * s2
    work[J12, b] -= m * s1 * s2
    work[RIGHT, b] -= m * (s1 * f2 - s2 * f1)
    work[RIGHT + 1, b] -= m * (s2 * f0 - s0 * f2)
    work[RIGHT + 2, b] -= m * (s0 * f1 - s1 * f0)
    work[MASS_S, b] += m * s0
    work[MASS_S + 1, b] += m * s1
    work[MASS_S + 2, b] += m * s2
    work[MASS_F, b] += m * f0
    work[MASS_F + 1, b] += m * f1
    work[MASS_F + 2, b] += m * f2
    return s0, s1, s2, f0, f1, f2


@inline_lane_function
def rail_mass_point(coef, work, k, b):
    """χ, χ̇, χ̈ (known part) and ζ′ of the mass at coefficient row k, lane b, from the angles in ``work``."""
    return mass_point(coef, k, b, work[ANGLES, b], work[ANGLES + 1, b], work[ANGLES + 2, b], work[ANGLES + 3, b],
                      work[ANGLES + 4, b])


@lane_function
def ball_accelerations(x, n, coef, topology, work):
    """Every lane's Ω̇ (rad/s², body frame) in work rows ACCELERATION …, the actuators' power (W) in row POWER
    and the plane's force F on the ball (N, body frame) in rows FORCE_ON_BALL …; each free mass's θ̈ in row
    FIRST_FREE + FREE_ROWS · slot + 3.  Lanes run innermost in every loop but the rails' trigonometry, so the
    arithmetic vectorises."""
    lanes = x.shape[1]
    masses = topology[0]
    for b in range(lanes):
        w0, w1, w2 = x[OMEGA, b], x[OMEGA + 1, b], x[OMEGA + 2, b]
        p0, p1, p2 = matrix3_times(coef, INERTIA, b, w0, w1, w2)
        work[J00, b], work[J01, b], work[J02, b] = coef[INERTIA, b], coef[INERTIA + 1, b], coef[INERTIA + 2, b]
        work[J11, b], work[J12, b], work[J22, b] = coef[INERTIA + 4, b], coef[INERTIA + 5, b], coef[INERTIA + 8, b]
        work[RIGHT, b], work[RIGHT + 1, b], work[RIGHT + 2, b] = p1 * w2 - p2 * w1, p2 * w0 - p0 * w2, p0 * w1 - p1 * w0
        for row in range(MASS_S, POWER + 1):
            work[row, b] = 0.0
        add_body(x, coef, work, b, coef[SHELL_MASS, b], coef[SHELL_OFFSET, b], coef[SHELL_OFFSET + 1, b],
                 coef[SHELL_OFFSET + 2, b], 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    for i in range(1, masses + 1):
        k = FIRST_RAIL + RAIL_ROWS * (i - 1)
        slot = topology[1 + i]
        curved = topology[1 + masses + i] != 0
        for b in range(lanes):  # the trigonometry, lane by lane
            theta = x[RAILS + slot, b] if slot >= 0 else 0.0
            theta_dot = x[RAILS + n + slot, b] if slot >= 0 else 0.0
            (work[ANGLES, b], work[ANGLES + 1, b], work[ANGLES + 2, b], work[ANGLES + 3, b],
             work[ANGLES + 4, b]) = rail_angles(coef, k, b, x[CLOCK, b], theta, theta_dot, slot >= 0, curved)
        if slot < 0:
            for b in range(lanes):
                c0, c1, c2, v0, v1, v2, a0, a1, a2, _, _, _ = rail_mass_point(coef, work, k, b)
                m = coef[k, b]
                s0, s1, s2, f0, f1, f2 = add_body(x, coef, work, b, m, c0, c1, c2, v0, v1, v2, a0, a1, a2)
                # the actuator's power m ⟨Ω̇ × s + f, χ̇⟩ = m ⟨f, χ̇⟩ + Ω̇ · m (s × χ̇)
                work[POWER, b] += m * (f0 * v0 + f1 * v1 + f2 * v2)
                work[POWER_RATE, b] += m * (s1 * v2 - s2 * v1)
                work[POWER_RATE + 1, b] += m * (s2 * v0 - s0 * v2)
                work[POWER_RATE + 2, b] += m * (s0 * v1 - s1 * v0)
        else:
            row = FIRST_FREE + FREE_ROWS * slot
            for b in range(lanes):
                c0, c1, c2, v0, v1, v2, a0, a1, a2, z0, z1, z2 = rail_mass_point(coef, work, k, b)
                m = coef[k, b]
                s0, s1, s2, f0, f1, f2 = add_body(x, coef, work, b, m, c0, c1, c2, v0, v1, v2, a0, a1, a2)
                d = m * (z0 * z0 + z1 * z1 + z2 * z2)
                q = coef[k + FORCE, b]
                e0, e1, e2 = m * (s1 * z2 - s2 * z1), m * (s2 * z0 - s0 * z2), m * (s0 * z1 - s1 * z0)
                gamma = (q - m * (z0 * f0 + z1 * f1 + z2 * f2)) / d
                # eliminate θ̈: 𝕁 − B D⁻¹ Bᵀ and the right side − B γ
                work[J00, b] -= e0 * e0 / d
                work[J11, b] -= e1 * e1 / d
                work[J22, b] -= e2 * e2 / d
                work[J01, b] -= e0 * e1 / d
                work[J02, b] -= e0 * e2 / d
                work[J12, b] -= e1 * e2 / d
                work[RIGHT, b] -= e0 * gamma
                work[RIGHT + 1, b] -= e1 * gamma
                work[RIGHT + 2, b] -= e2 * gamma
                work[row, b], work[row + 1, b], work[row + 2, b] = e0 / d, e1 / d, e2 / d
                work[row + 3, b] = gamma
                work[row + 4, b], work[row + 5, b], work[row + 6, b] = m * z0, m * z1, m * z2
                work[POWER, b] += q * work[ANGLES + 1, b]
    for b in range(lanes):
        d0, d1, d2 = solve_symmetric3(work[J00, b], work[J01, b], work[J02, b], work[J11, b], work[J12, b],
                                      work[J22, b], work[RIGHT, b], work[RIGHT + 1, b], work[RIGHT + 2, b])
        work[ACCELERATION, b], work[ACCELERATION + 1, b], work[ACCELERATION + 2, b] = d0, d1, d2
        work[POWER, b] += d0 * work[POWER_RATE, b] + d1 * work[POWER_RATE + 1, b] + d2 * work[POWER_RATE + 2, b]
        # F = Σ m (Ω̇ × s + f) + Σ_free m ζ′ θ̈
        work[FORCE_ON_BALL, b] = d1 * work[MASS_S + 2, b] - d2 * work[MASS_S + 1, b] + work[MASS_F, b]
        work[FORCE_ON_BALL + 1, b] = d2 * work[MASS_S, b] - d0 * work[MASS_S + 2, b] + work[MASS_F + 1, b]
        work[FORCE_ON_BALL + 2, b] = d0 * work[MASS_S + 1, b] - d1 * work[MASS_S, b] + work[MASS_F + 2, b]
    for slot in range(n):
        row = FIRST_FREE + FREE_ROWS * slot
        for b in range(lanes):
            theta_ddot = work[row + 3, b] - (work[row, b] * work[ACCELERATION, b] + work[row + 1, b]
                                             * work[ACCELERATION + 1, b] + work[row + 2, b] * work[ACCELERATION + 2, b])
            work[row + 3, b] = theta_ddot
            for axis in range(3):
                work[FORCE_ON_BALL + axis, b] += work[row + 4 + axis, b] * theta_ddot


@inline_lane_function
def solve_symmetric3(a00, a01, a02, a11, a12, a22, r0, r1, r2):
    """y with A y = r for a symmetric positive-definite 3 × 3 A (upper triangle given): Cholesky."""
    l00 = np.sqrt(a00)
    l10 = a01 / l00
    l20 = a02 / l00
    l11 = np.sqrt(a11 - l10 * l10)
    l21 = (a12 - l20 * l10) / l11
    l22 = np.sqrt(a22 - l20 * l20 - l21 * l21)
    y0 = r0 / l00
    y1 = (r1 - l10 * y0) / l11
    y2 = (r2 - l20 * y0 - l21 * y1) / l22
    z2 = y2 / l22
    z1 = (y1 - l21 * z2) / l11
    z0 = (y0 - l10 * z1 - l20 * z2) / l00
    return z0, z1, z2


@lane_function
def ball_vector_field(x, n, coef, topology, t, dx, work):
    """dx: Ṙ = R Ω̂, Ω̇, the rolling constraint (ẋ, ẏ) = r (ω₂, −ω₁), ċlock = 1, ẇork = power, θ̇, θ̈.  Time is
    the state's clock (the extended phase space), so ``t`` is not read."""
    ball_accelerations(x, n, coef, topology, work)
    for b in range(x.shape[1]):
        w0, w1, w2 = x[OMEGA, b], x[OMEGA + 1, b], x[OMEGA + 2, b]
        attitude_rate(x, dx, 0, b, w0, w1, w2)
        for axis in range(3):
            dx[OMEGA + axis, b] = work[ACCELERATION + axis, b]
        r = coef[RADIUS, b]
        spatial0 = x[0, b] * w0 + x[1, b] * w1 + x[2, b] * w2
        spatial1 = x[3, b] * w0 + x[4, b] * w1 + x[5, b] * w2
        dx[CONTACT, b] = r * spatial1
        dx[CONTACT + 1, b] = -r * spatial0
        dx[CLOCK, b] = 1.0
        dx[WORK, b] = work[POWER, b]
    for slot in range(n):
        for b in range(x.shape[1]):
            dx[RAILS + slot, b] = x[RAILS + n + slot, b]
            dx[RAILS + n + slot, b] = work[FIRST_FREE + FREE_ROWS * slot + 3, b]


@lane_function
def ball_energy(x, n, coef, topology, work, out):
    """E = ½ Ω·𝕀Ω + ½ Σ_i m_i |Ω × s_i + χ̇_i|² + g Σ_i m_i ⟨Γ, χ_i⟩ (J) per lane (digest_004 §5)."""
    for b in range(x.shape[1]):
        g0, g1, g2 = x[6, b], x[7, b], x[8, b]
        w0, w1, w2 = x[OMEGA, b], x[OMEGA + 1, b], x[OMEGA + 2, b]
        t = x[CLOCK, b]
        r, g = coef[RADIUS, b], coef[GRAVITY, b]
        p0, p1, p2 = matrix3_times(coef, INERTIA, b, w0, w1, w2)
        kinetic = 0.5 * (w0 * p0 + w1 * p1 + w2 * p2)
        potential = 0.0
        for i in range(topology[0] + 1):
            if i == 0:
                m = coef[SHELL_MASS, b]
                c0, c1, c2 = coef[SHELL_OFFSET, b], coef[SHELL_OFFSET + 1, b], coef[SHELL_OFFSET + 2, b]
                v0 = v1 = v2 = 0.0
            else:
                k = FIRST_RAIL + RAIL_ROWS * (i - 1)
                m = coef[k, b]
                slot = topology[1 + i]
                theta = x[RAILS + slot, b] if slot >= 0 else 0.0
                theta_dot = x[RAILS + n + slot, b] if slot >= 0 else 0.0
                c0, c1, c2, v0, v1, v2, _, _, _, _, _, _ = mass_kinematics(
                    coef, k, b, t, theta, theta_dot, slot >= 0, topology[1 + topology[0] + i] != 0)
            s0, s1, s2 = r * g0 + c0, r * g1 + c1, r * g2 + c2
            e0, e1, e2 = w1 * s2 - w2 * s1 + v0, w2 * s0 - w0 * s2 + v1, w0 * s1 - w1 * s0 + v2
            kinetic += 0.5 * m * (e0 * e0 + e1 * e1 + e2 * e2)
            potential += g * m * (g0 * c0 + g1 * c1 + g2 * c2)
        out[b] = kinetic + potential


@lane_function
def contact_force_lanes(x, n, coef, topology, work, out):
    """out[0] = the normal force N = ⟨F, Γ⟩ (N) and out[1] = |F − NΓ| / N per lane (``work``:
    :func:`ball_field_work`'s)."""
    ball_accelerations(x, n, coef, topology, work)
    for b in range(x.shape[1]):
        f0, f1, f2 = work[FORCE_ON_BALL, b], work[FORCE_ON_BALL + 1, b], work[FORCE_ON_BALL + 2, b]
        g0, g1, g2 = x[6, b], x[7, b], x[8, b]
        normal = f0 * g0 + f1 * g1 + f2 * g2
        t0, t1, t2 = f0 - normal * g0, f1 - normal * g1, f2 - normal * g2
        out[0, b] = normal
        out[1, b] = np.sqrt(t0 * t0 + t1 * t1 + t2 * t2) / normal


@lane_function
def ball_diagnostics(x, n, coef, topology, work, out):
    """orthogonality_error, normal_force, friction_ratio per lane."""
    orthogonality_lanes(x, 1, coef, topology, work, out)
    contact_force_lanes(x, n, coef, topology, work, out[1:])


@lane_function
def contact_status(forces, coef, friction_row, code):
    """code[b] ← LIFT_OFF where the normal force forces[0, b] is ≤ 0, else SLIP where the friction ratio
    forces[1, b] exceeds μ_s (coefficient row ``friction_row``); other lanes untouched."""
    for b in range(forces.shape[1]):
        if forces[0, b] <= 0.0:  # (a NaN state is the driver's NON_FINITE)
            code[b] = LIFT_OFF
        elif forces[1, b] > coef[friction_row, b]:
            code[b] = SLIP


@lane_function
def rolling_admissible(x, n, coef, topology, work, code):
    """The ball's LIFT_OFF and SLIP (:func:`contact_status`), the forces in ``work``'s last two rows."""
    forces = work[work.shape[0] - 2:]
    contact_force_lanes(x, n, coef, topology, work, forces)
    contact_status(forces, coef, FRICTION, code)


# ------------------------------------------------------------------------------------------ Python side

def rigid_mass_layout(params) -> tuple:
    """Masses (members, N + 1) and their body-frame positions (members, N + 1, 3) with every rail mass at
    its prescribed θ₀ (the shell first): the fixed-mass configuration the momentum maps need."""
    members = params["mass"].shape[0]
    masses = [params["mass"]]
    positions = [params["center_of_mass"]]
    for k, (_, _, _, curve, _) in enumerate(params["rails"]):
        masses.append(params["masses"][:, k])
        positions.append(rail_points(curve, params["theta0"][:, k]))
    return np.stack(masses, axis=1), np.broadcast_to(np.stack(positions, axis=1), (members, len(masses), 3))


def masses_fixed(params) -> bool:
    """Whether every rail mass stays put (prescribed, with no rate or amplitude): the body is rigid."""
    prescribed = all(motion == "prescribed" for _, motion, _, _, _ in params["rails"])
    return prescribed and not np.any(params["rate"]) and not np.any(params["amplitude"])


def _broadcast_like(value, state_array, trailing):
    """A per-member parameter (members, …) reshaped to broadcast against a state array (members, …, trailing)."""
    extra = state_array.ndim - 1 - trailing
    return value.reshape(value.shape[:1] + (1,) * extra + value.shape[1:])


def contact_momentum(state: dict, params: dict) -> np.ndarray:
    """The spatial angular momentum about the contact point R[𝕀Ω + Σ_i m_i s_i × (Ω × s_i)] (kg·m²/s) of
    states with leading (members, …) axes, masses at θ₀: conserved by a Chaplygin ball (digest §5.4)."""
    rotations, omega = state["R"], state["Omega"]
    masses, positions = rigid_mass_layout(params)
    gamma = rotations[..., 2, :]
    radius = _broadcast_like(params["radius"], gamma, 1)[..., np.newaxis]
    s = radius[..., np.newaxis] * gamma[..., np.newaxis, :] + _broadcast_like(positions, gamma, 1)
    spin = np.cross(omega[..., np.newaxis, :], s)
    body = np.einsum("...ij,...j->...i", _broadcast_like(params["inertia"], omega, 1), omega)
    body = body + np.sum(_broadcast_like(masses, gamma, 1)[..., np.newaxis] * np.cross(s, spin), axis=-2)
    return np.einsum("...ij,...j->...i", rotations, body)


def whole_body(params) -> tuple:
    """Total mass M, centre of mass c from the geometric centre (members, 3) and inertia about c (members,
    3, 3) of the shell with its masses at θ₀."""
    masses, positions = rigid_mass_layout(params)
    total = masses.sum(axis=1)
    center = np.einsum("mi,mij->mj", masses, positions) / total[:, np.newaxis]
    offsets = positions - center[:, np.newaxis]
    parallel = (np.einsum("mi,mij,mij->m", masses, offsets, offsets)[:, np.newaxis, np.newaxis] * np.eye(3)
                - np.einsum("mi,mij,mik->mjk", masses, offsets, offsets))
    return total, center, params["inertia"] + parallel


def jellett_integral(state: dict, params: dict) -> np.ndarray:
    """Jellett's ⟨𝕀_cm Ω, CM → contact⟩ (kg·m³/s), (members, …, 1), masses at θ₀: conserved by a Routh
    sphere (digest §5.5)."""
    omega, gamma = state["Omega"], state["R"][..., 2, :]
    _, center, inertia = whole_body(params)
    to_contact = -_broadcast_like(params["radius"], gamma, 1)[..., np.newaxis] * gamma - _broadcast_like(
        center, gamma, 1)
    spin = np.einsum("...ij,...j->...i", _broadcast_like(inertia, omega, 1), omega)
    return np.sum(spin * to_contact, axis=-1, keepdims=True)


def _chaplygin(params) -> bool:
    _, center, _ = whole_body(params)
    return bool(np.all(np.linalg.norm(center, axis=-1) <= 1e-12 * params["radius"]))


def _routh(params) -> bool:
    """Axisymmetric inertia about the whole centre of mass c ≠ 0, about the axis through c and the centre."""
    _, center, inertia = whole_body(params)
    distance = np.linalg.norm(center, axis=-1)
    if np.any(distance <= 1e-12 * params["radius"]):
        return False
    axis = center / distance[:, np.newaxis]
    projector = np.einsum("mi,mj->mij", axis, axis)
    along = np.einsum("mij,mij->m", inertia, projector)[:, np.newaxis, np.newaxis]
    trace = np.trace(inertia, axis1=1, axis2=2)[:, np.newaxis, np.newaxis]
    # the axisymmetric tensor with that axial moment: along · a aᵀ + (trace − along)/2 · (1 − a aᵀ)
    symmetric = along * projector + (trace - along) / 2.0 * (np.eye(3) - projector)
    return bool(np.all(np.abs(inertia - symmetric) <= 1e-12 * trace))


def check_shell(params, body: str) -> None:
    """Refuse a shell's centre of mass outside the rolling ``body`` and rails that leave it
    (:func:`~kernels.systems.rails.check_rails`)."""
    radius = params["radius"]
    if np.any(np.linalg.norm(params["center_of_mass"], axis=-1) >= np.min(radius)):
        raise InvalidInput("center_of_mass", f"the shell's centre of mass must lie inside the {body} (|chi_0| < "
                           "radius)")
    check_rails(params, radius, params["clearance"])


def _check(params):
    check_inertia(params["inertia"])
    check_shell(params, "ball")


def ball_parameters() -> tuple:
    """The shell's parameters (radius, mass, inertia, centre of mass, gravity, friction, clearance)."""
    return (
        Parameter("radius", SCALAR, "m", "radius r of the rolling body"),
        Parameter("mass", SCALAR, "kg", "mass m_0 of the rolling body (the shell, without the rail masses)"),
        Parameter("g", SCALAR, "m/s²", "gravitational acceleration (along -e_3, normal to the plane)", default=9.81),
        Parameter("friction_coefficient", SCALAR, "1", "static friction coefficient mu_s: a member needing more "
                  "(|F_t| > mu_s N) stops with status SLIP (default: no limit)", default=None, check="cutoff"),
        Parameter("clearance", SCALAR, "m", "least distance a rail mass keeps from the shell (its own size)",
                  default=0.0, check="nonnegative"),
    )


@dataclass(frozen=True, kw_only=True)
class RollingBallDefinition(FlatSystemDefinition):
    """The rolling ball (see the module docstring)."""

    space: StateSpace = ROLLING
    provides: frozenset = frozenset({"vector_field", "rolling"})
    mass_count: Callable[[dict], int] = mass_count
    statuses: tuple = (LIFT_OFF, SLIP)

    def topology(self, params: dict, n: int) -> np.ndarray:
        return rail_topology(params)

    def momentum_map(self, params: dict):
        """K_P for a Chaplygin ball, Jellett's integral for a Routh sphere, else None."""
        if not masses_fixed(params):
            return None
        system = System(self, params)
        probe = system.broadcast(system.member_count() or 1, free_count(params))
        return contact_momentum if _chaplygin(probe) else jellett_integral if _routh(probe) else None

    @property
    def lane_functions(self) -> dict:
        return {"space_diagnostics": ball_diagnostics, "system_admissible": rolling_admissible,
                "vector_field_work": ball_field_work, "vector_field": ball_vector_field, "system_energy": ball_energy}

    @property
    def lane_templates(self) -> tuple:
        return ()


def ball_inertia(value) -> np.ndarray:
    """``inertia``: three principal moments (3,) or a body-frame tensor (3, 3), (members, 3, 3) per member."""
    array = np.asarray(value, dtype=np.float64)
    if array.shape == (3,):
        return np.diag(array)
    if array.shape[-2:] != (3, 3):
        raise InvalidInput("inertia", f"3 principal moments or a 3×3 tensor (kg·m²), got shape {array.shape}")
    return array


def inertia_of_shell() -> Parameter:
    return Parameter("inertia", MATRIX3, "kg m2", "inertia tensor of the ball (shell) about its own centre of mass, "
                     "body frame (3 principal moments or a 3×3 tensor)", check="finite", normalise=ball_inertia)


def rolling_state(omega, tilt=0.0, theta=(), theta_dot=()) -> dict:
    """A preset's initial state: R a turn of ``tilt`` rad about E₁, Ω, contact at the origin, the free
    masses' (θ, θ̇), clock and work 0."""
    c, s = np.cos(tilt), np.sin(tilt)
    return {"R": np.array([[1.0, 0.0, 0.0], [0.0, c, -s], [0.0, s, c]]), "Omega": np.array(omega, dtype=np.float64),
            "contact": np.zeros(2), "clock": np.array(0.0), "work": np.array(0.0),
            "theta": np.array(theta, dtype=np.float64), "theta_dot": np.array(theta_dot, dtype=np.float64)}


def _fixed_rail(point) -> dict:
    """A short straight rail through ``point`` holding a fixed mass (θ = 0)."""
    return {"shape": "line", "point": list(point), "direction": [0.0, 0.0, 1.0], "length": 0.02}


def _chaplygin_preset():
    return Preset(
        doc="Chaplygin ball: r = 1 m, shell 2 kg with I = (1, 1.3, 0.8) kg·m² about the centre, two fixed 0.5 kg masses "
            "at ±(0.3, 0.2, 0.1) m (the whole centre of mass at the geometric centre), Ω = (1, 2, 0.5) rad/s: energy "
            "and the 3 components of the angular momentum about the contact point are conserved",
        params={"radius": 1.0, "mass": 2.0, "inertia": [1.0, 1.3, 0.8], "center_of_mass": [0.0, 0.0, 0.0],
                "rails": [_fixed_rail([0.3, 0.2, 0.1]), _fixed_rail([-0.3, -0.2, -0.1])], "masses": [0.5, 0.5]},
        state=rolling_state([1.0, 2.0, 0.5], tilt=0.3),
    )


def _routh_preset():
    return Preset(
        doc="Routh sphere: r = 1 m, shell 2 kg with I = (0.8, 0.8, 1.2) kg·m² about its centre of mass 0.3 m below the "
            "centre on the symmetry axis, tilted 0.5 rad, spinning at Ω = (0.5, 0, 5) rad/s: energy and Jellett's "
            "integral are conserved",
        params={"radius": 1.0, "mass": 2.0, "inertia": [0.8, 0.8, 1.2], "center_of_mass": [0.0, 0.0, -0.3]},
        state=rolling_state([0.5, 0.0, 5.0], tilt=0.5),
    )


def _pendulum_drive_preset():
    return Preset(
        doc="two pendula driving a ball: r = 1 m, shell 1 kg with I = 0.5 kg·m² (each axis), two 0.5 kg masses on "
            "circular rails of radius 0.5 m centred at (0, ±0.3, 0) m, swinging in the x–z and y–z planes as "
            "θ_i = A sin(ν t + φ_i), A = 1 rad, ν = 2 rad/s, φ = (0, π/2): the ball rolls along a looping path",
        params={"radius": 1.0, "mass": 1.0, "inertia": [0.5, 0.5, 0.5], "center_of_mass": [0.0, 0.0, 0.0],
                "rails": [{"shape": "circle", "center": [0.0, 0.3, 0.0], "normal": [0.0, 1.0, 0.0], "radius": 0.5},
                          {"shape": "circle", "center": [0.0, -0.3, 0.0], "normal": [1.0, 0.0, 0.0], "radius": 0.5}],
                "masses": [0.5, 0.5], "amplitude": [1.0, 1.0], "frequency": [2.0, 2.0], "phase": [0.0, np.pi / 2]},
        state=rolling_state([0.0, 0.0, 0.0]),
    )


def _free_masses_preset():
    return Preset(
        doc="free masses: r = 1 m, shell 2 kg with I = (0.5, 0.6, 0.7) kg·m², centre of mass 0.1 m below the centre, a "
            "0.3 kg mass free on an ellipse (semi-axes 0.5 m along E₁, 0.3 m along E₃) and a 0.3 kg mass free on a "
            "figure-eight (0.4 m along E₂, 0.2 m along E₃, centred 0.2 m below the centre), no rail forces, started "
            "at θ = (0.3, 0.5) rad, θ̇ = (0.5, −0.5) rad/s: energy is conserved",
        params={"radius": 1.0, "mass": 2.0, "inertia": [0.5, 0.6, 0.7], "center_of_mass": [0.0, 0.0, -0.1],
                "rails": [{"shape": "ellipse", "center": [0.0, 0.0, 0.0], "axes": [[0.5, 0.0, 0.0], [0.0, 0.0, 0.3]],
                           "motion": "free"},
                          {"shape": "figure_eight", "center": [0.0, 0.0, -0.2],
                           "axes": [[0.0, 0.4, 0.0], [0.0, 0.0, 0.2]], "motion": "free"}],
                "masses": [0.3, 0.3]},
        state=rolling_state([0.5, 0.2, 0.3], theta=[0.3, 0.5], theta_dot=[0.5, -0.5]),
    )


DEFINITION = RollingBallDefinition(
    name="rolling_ball",
    summary="a ball rolling without slipping on a plane, driven by point masses on rails inside it",
    parameters=(*ball_parameters(), inertia_of_shell(),
                Parameter("center_of_mass", VECTOR3, "m", "the shell's centre of mass from the geometric centre "
                          "(body frame)", default=(0.0, 0.0, 0.0), check="finite"),
                *rail_parameters()),
    presets={"chaplygin": _chaplygin_preset, "routh_sphere": _routh_preset, "pendulum_drive": _pendulum_drive_preset,
             "free_masses": _free_masses_preset},
    bodies=free_count,
    coefficients=_coefficients,
    check=_check,
    momentum_doc="Chaplygin ball: angular momentum about the contact point (space frame); Routh sphere: Jellett's "
                 "integral",
)
