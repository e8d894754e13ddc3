"""System ``rolling_disk``: a disk (or a ball moving in a vertical plane) rolling without slipping along a
line, driven by point masses moving in its plane: the planar reduction of ``rolling_ball`` (Putkaradze &
Rogers 2018, Appendix C and eq. (3.39); digest_004 §4, "planar reduction", in its sign convention).

The disk turns by θ about its body axis E₂, so Ω = θ̇ E₂ and Γ = (−sin θ, 0, cos θ) (the ball's attitude
R is the turn by θ about E₂), and rolls to x = r θ.  With every χ_i = (x_i, 0, z_i) in the plane and
s_i = (x_i − r sin θ, 0, z_i + r cos θ), the ball's Ω̇ ∥ E₂ exactly and its equations reduce to one ODE:

    (I₂₂ + Σ_i m_i |s_i|²) θ̈ = −Σ_i m_i (s_{i3} f_{i1} − s_{i1} f_{i3}),
    f_i = (−g sin θ − θ̇² x_i + 2 θ̇ ż_i + ẍ_i, 0, g cos θ − θ̇² z_i − 2 θ̇ ẋ_i + z̈_i),

with ẋ = r θ̇.  I₂₂ is the shell's moment about its axis through its own centre of mass (kg·m²).  The
masses follow prescribed laws on rails in the plane (:mod:`kernels.systems.rails`); energy, the actuators'
work and the contact force are the ball's, restricted to the plane.  Linearised about rest with one fixed
mass m at (0, 0, −l) and a massless shell: θ̈ = −m g l θ / (I₂₂ + m (r − l)²).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..errors import InvalidInput
from ..lanes import lane_function
from ..spaces.base import StateSpace
from ..spaces.rolling import DISK_ANGLE, DISK_CLOCK, DISK_RATE, DISK_WORK, DISK_X, ROLLING_DISK
from ..status import LIFT_OFF, SLIP
from .base import SCALAR, VECTOR3, FlatSystemDefinition, Parameter, Preset
from .rails import RAIL_ROWS, mass_count, mass_kinematics, rail_parameters, rail_topology
from .rolling_ball import ball_parameters, check_shell, contact_status, shell_coefficients

#: coefficient rows: I₂₂, m₀, χ₀ (3), r, g, μ_s, then the rails' blocks
INERTIA, SHELL_MASS, SHELL_OFFSET, RADIUS, GRAVITY, FRICTION, FIRST_RAIL = 0, 1, 2, 5, 6, 7, 8


def _coefficients(params, n):
    return shell_coefficients(params, params["inertia"][:, np.newaxis])


@lane_function
def disk_body(coef, topology, b, i, t):
    """Mass m, in-plane position (x, z), velocity and acceleration of body i (0: the shell), lane b."""
    if i == 0:
        return coef[SHELL_MASS, b], coef[SHELL_OFFSET, b], coef[SHELL_OFFSET + 2, b], 0.0, 0.0, 0.0, 0.0
    k = FIRST_RAIL + RAIL_ROWS * (i - 1)
    c0, _, c2, v0, _, v2, a0, _, a2, _, _, _ = mass_kinematics(coef, k, b, t, 0.0, 0.0, False,
                                                               topology[1 + topology[0] + i] != 0)
    return coef[k, b], c0, c2, v0, v2, a0, a2


@lane_function
def disk_acceleration(x, coef, topology, b):
    """θ̈ (rad/s²), the actuators' power (W) and the plane's force (F₁, F₃) on the disk (N, body frame)."""
    theta, rate, t = x[DISK_ANGLE, b], x[DISK_RATE, b], x[DISK_CLOCK, b]
    r, g = coef[RADIUS, b], coef[GRAVITY, b]
    sin, cos = np.sin(theta), np.cos(theta)
    inertia = coef[INERTIA, b]
    torque = ms1 = ms3 = mf1 = mf3 = power = pv = 0.0
    for i in range(topology[0] + 1):
        m, cx, cz, vx, vz, ax, az = disk_body(coef, topology, b, i, t)
        s1, s3 = cx - r * sin, cz + r * cos
        f1 = -g * sin - rate * rate * cx + 2.0 * rate * vz + ax
        f3 = g * cos - rate * rate * cz - 2.0 * rate * vx + az
        inertia += m * (s1 * s1 + s3 * s3)
        torque -= m * (s3 * f1 - s1 * f3)
        ms1 += m * s1
        ms3 += m * s3
        mf1 += m * f1
        mf3 += m * f3
        # m ⟨θ̈ E₂ × s + f, χ̇⟩, E₂ × s = (s₃, 0, −s₁)
        power += m * (f1 * vx + f3 * vz)
        pv += m * (s3 * vx - s1 * vz)
    accel = torque / inertia
    return accel, power + accel * pv, accel * ms3 + mf1, -accel * ms1 + mf3


@lane_function
def disk_vector_field(x, n, coef, topology, t, dx, work):
    """dx: θ̇, θ̈, ẋ = r θ̇, ċlock = 1, ẇork = power (time is the state's clock)."""
    for b in range(x.shape[1]):
        accel, power, _, _ = disk_acceleration(x, coef, topology, b)
        dx[DISK_ANGLE, b] = x[DISK_RATE, b]
        dx[DISK_RATE, b] = accel
        dx[DISK_X, b] = coef[RADIUS, b] * x[DISK_RATE, b]
        dx[DISK_CLOCK, b] = 1.0
        dx[DISK_WORK, b] = power


@lane_function
def disk_energy(x, n, coef, topology, work, out):
    """E = ½ I₂₂ θ̇² + ½ Σ_i m_i |θ̇ E₂ × s_i + χ̇_i|² + g Σ_i m_i ⟨Γ, χ_i⟩ (J)."""
    for b in range(x.shape[1]):
        theta, rate, t = x[DISK_ANGLE, b], x[DISK_RATE, b], x[DISK_CLOCK, b]
        r, g = coef[RADIUS, b], coef[GRAVITY, b]
        sin, cos = np.sin(theta), np.cos(theta)
        total = 0.5 * coef[INERTIA, b] * rate * rate
        for i in range(topology[0] + 1):
            m, cx, cz, vx, vz, _, _ = disk_body(coef, topology, b, i, t)
            s1, s3 = cx - r * sin, cz + r * cos
            e1, e3 = rate * s3 + vx, -rate * s1 + vz
            total += 0.5 * m * (e1 * e1 + e3 * e3) + g * m * (-sin * cx + cos * cz)
        out[b] = total


@lane_function
def disk_contact_lanes(x, n, coef, topology, work, out):
    """out[0] = normal force N = ⟨F, Γ⟩ (N), out[1] = |F − NΓ| / N."""
    for b in range(x.shape[1]):
        _, _, f1, f3 = disk_acceleration(x, coef, topology, b)
        sin, cos = np.sin(x[DISK_ANGLE, b]), np.cos(x[DISK_ANGLE, b])
        normal = -sin * f1 + cos * f3
        out[0, b] = normal
        out[1, b] = abs(cos * f1 + sin * f3) / normal


@lane_function
def disk_admissible(x, n, coef, topology, work, code):
    """The disk's LIFT_OFF and SLIP (:func:`~kernels.systems.rolling_ball.contact_status`); the contact forces
    in work's first two rows (its vector field's scratch, one row per state row)."""
    forces = work[:2]
    disk_contact_lanes(x, n, coef, topology, work, forces)
    contact_status(forces, coef, FRICTION, code)


def _check(params):
    if np.any(params["center_of_mass"][..., 1] != 0):
        raise InvalidInput("center_of_mass", "a disk's centre of mass lies in its plane (y = 0)")
    for k, (_, motion, _, curve, _) in enumerate(params["rails"]):
        if motion != "prescribed":
            raise InvalidInput(f"rails[{k}].motion", "rolling_disk moves its masses along prescribed laws only "
                               "(free masses: rolling_ball)")
        if np.any(np.asarray(curve)[:, 1] != 0):
            raise InvalidInput(f"rails[{k}]", "a disk's rails lie in its plane: every y component must be 0")
    check_shell(params, "disk")


def disk_state(angle=0.0, rate=0.0) -> dict:
    return {"angle": np.array(angle), "angle_rate": np.array(rate), "x": np.array(0.0), "clock": np.array(0.0),
            "work": np.array(0.0)}


def _pendulum_preset():
    return Preset(
        doc="a disk of r = 1 m, 1 kg, I₂₂ = 0.5 kg·m² with a 0.5 kg pendulum on a circular rail of radius 0.5 m about "
            "the centre, swinging as θ₁ = sin(2 t) rad: the disk rocks and rolls",
        params={"radius": 1.0, "mass": 1.0, "inertia": 0.5,
                "rails": [{"shape": "circle", "center": [0.0, 0.0, 0.0], "normal": [0.0, 1.0, 0.0], "radius": 0.5}],
                "masses": [0.5], "amplitude": [1.0], "frequency": [2.0]},
        state=disk_state(),
    )


@dataclass(frozen=True, kw_only=True)
class RollingDiskDefinition(FlatSystemDefinition):
    """The rolling disk (see the module docstring)."""

    space: StateSpace = ROLLING_DISK
    provides: frozenset = frozenset({"vector_field"})
    mass_count: Callable[[dict], int] = mass_count
    statuses: tuple = (LIFT_OFF, SLIP)

    def topology(self, params: dict, n: int) -> np.ndarray:
        return rail_topology(params)

    @property
    def lane_functions(self) -> dict:
        return {"space_diagnostics": disk_contact_lanes, "system_admissible": disk_admissible,
                "vector_field": disk_vector_field, "system_energy": disk_energy}

    @property
    def lane_templates(self) -> tuple:
        return ()


DEFINITION = RollingDiskDefinition(
    name="rolling_disk",
    summary="a disk rolling without slipping along a line, driven by point masses moving in its plane (the planar "
            "reduction of rolling_ball)",
    parameters=(*ball_parameters(),
                Parameter("inertia", SCALAR, "kg m2", "moment of inertia I_22 of the shell about its axis through its "
                          "own centre of mass"),
                Parameter("center_of_mass", VECTOR3, "m", "the shell's centre of mass from the geometric centre "
                          "(x, 0, z)", default=(0.0, 0.0, 0.0), check="finite"),
                *rail_parameters()),
    presets={"pendulum": _pendulum_preset},
    bodies=lambda params: 0,
    coefficients=_coefficients,
    check=_check,
)
