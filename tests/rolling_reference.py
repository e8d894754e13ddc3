"""An independent plain-numpy reference for the system ``rolling_ball``: the equations of a ball rolling
without slipping on a horizontal plane, moved by point masses on rails inside it, taken straight from
digest_004 §4 (Putkaradze & Rogers, Meccanica 53 (2018), App. B (B.8) with Γ̃ = 0, App. D (D.15), (D.21))
and written here, for ``scipy.integrate.solve_ivp``, without importing or copying
kernels/systems/rolling_ball.py.

State y (SI units), for n free masses:

    y = (𝔮 (4: w, x, y, z), Ω (3, rad/s, body frame), contact (x, y) (2, m), work (1, J),
         θ (n, rad or m), θ̇ (n, rad/s or m/s)),

and the time t (s) is the kernels' ``clock``.  With Λ = Λ(𝔮) (D.15) (body → space), Γ = Λᵀe₃ (the vertical
in the body frame), body 0 the shell (mass m₀ at the constant χ₀ from the geometric centre) and bodies
1 … N the rail masses at χ_i = ζ_i(θ_i), s_i = rΓ + χ_i (from the contact point to body i):

    𝔮̇ = ½ 𝔮 ⊗ (0, Ω)                                          (D.21)
    𝕁 Ω̇ + Σ_free B_i θ̈_i = (𝕀Ω) × Ω − Σ_{i=0}^{N} m_i s_i × f_i   (B.8, Γ̃ = 0; digest §4)
    B_iᵀ Ω̇ + D_i θ̈_i = Q_i − m_i ⟨ζ_i′, f_i⟩                    (each free mass; digest §4)
    ẋ = r ω₂,  ẏ = −r ω₁,  ω = Λ Ω                             (rolling constraint; digest §4)

with 𝕁 = 𝕀 + Σ_i m_i (|s_i|² I − s_i s_iᵀ), f_i = gΓ + Ω × (Ω × χ_i) + 2 Ω × χ̇_i + χ̈_i (for a free mass χ̈_i
only its known part ζ_i″ θ̇_i²), B_i = m_i s_i × ζ_i′ and D_i = m_i |ζ_i′|².  The (3 + n) × (3 + n) block
system is solved as it stands by ``numpy.linalg.solve``.  The work rate is the actuators' power (digest
§5.2): Σ_prescribed m_i ⟨a_i + gΓ, χ̇_i⟩ with a_i + gΓ = Ω̇ × s_i + f_i, plus Σ_free Q_i θ̇_i.

A rail is ζ(θ) = c + d θ + a cos θ + b sin θ + f sin 2θ (body frame, m, from the geometric centre); a
prescribed mass follows θ(t) = θ₀ + rate·t + A sin(ν t + φ).  ``params`` is a bound system's ``params``
(one member): 'radius', 'mass', 'inertia' (3 × 3), 'center_of_mass', 'g', 'rails' (tuples of shape,
motion, name, curve (5, 3) = c, d, a, b, f, half length) and per-mass 'masses', 'theta0', 'rate',
'amplitude', 'frequency', 'phase', 'rail_force'.
"""

from typing import NamedTuple

import numpy as np
from scipy.integrate import solve_ivp
from scipy.spatial.transform import Rotation

from armillary.kernels.spaces.rotation import rotations_from_quaternions as rotation_of  # Λ of (w, x, y, z): (D.15)


def _cross(u, v) -> np.ndarray:
    """u × v of two 3-vectors (numpy.cross costs ten times as much on one pair)."""
    return np.array([u[1] * v[2] - u[2] * v[1], u[2] * v[0] - u[0] * v[2], u[0] * v[1] - u[1] * v[0]])


def quaternion_of(rotation) -> np.ndarray:
    """A unit quaternion (..., 4) (w, x, y, z) of each rotation (..., 3, 3) (the nearest one of a matrix
    slightly off SO(3)), the inverse of :func:`rotation_of` (D.15) up to the sign ±𝔮 (D.16)."""
    rotation = np.asarray(rotation, dtype=np.float64)
    xyzw = Rotation.from_matrix(rotation.reshape(-1, 3, 3)).as_quat()
    return np.concatenate([xyzw[:, 3:], xyzw[:, :3]], axis=1).reshape(rotation.shape[:-2] + (4,))


def free_count(params) -> int:
    """n: how many rail masses move freely (their θ, θ̇ are in the state)."""
    return sum(motion == "free" for _, motion, _, _, _ in params["rails"])


def state_to_y(state: dict) -> tuple[np.ndarray, np.ndarray]:
    """(y (..., 10 + 2n), t (...)) of a kernel state dict whose variables share leading axes (...)."""
    theta = np.asarray(state["theta"], dtype=np.float64)
    y = np.concatenate([quaternion_of(state["R"]), state["Omega"], state["contact"],
                        np.asarray(state["work"], dtype=np.float64)[..., np.newaxis], theta, state["theta_dot"]],
                       axis=-1)
    return y, np.asarray(state["clock"], dtype=np.float64)


def y_to_state(y, t) -> dict:
    """The kernel state dict (R, Omega, contact, clock, work, theta, theta_dot) of y (..., 10 + 2n) at
    times t (...)."""
    y = np.asarray(y, dtype=np.float64)
    n = (y.shape[-1] - 10) // 2
    return {"R": rotation_of(y[..., :4]), "Omega": y[..., 4:7], "contact": y[..., 7:9],
            "clock": np.broadcast_to(np.asarray(t, dtype=np.float64), y.shape[:-1]).copy(), "work": y[..., 9],
            "theta": y[..., 10:10 + n], "theta_dot": y[..., 10 + n:]}


def _rail(curve, theta):
    """ζ, ζ′, ζ″ (3 each, m, m/rad, m/rad²) of a rail's curve (5, 3) = c, d, a, b, f at θ."""
    c, d, a, b, f = np.asarray(curve, dtype=np.float64)
    cos, sin, sin2, cos2 = np.cos(theta), np.sin(theta), np.sin(2 * theta), np.cos(2 * theta)
    return (c + d * theta + a * cos + b * sin + f * sin2, d - a * sin + b * cos + 2 * f * cos2,
            -a * cos - b * sin - 4 * f * sin2)


class Body(NamedTuple):
    """One body at time t: mass m (kg), body-frame position χ (m) from the geometric centre, velocity χ̇
    (m/s), the known part of χ̈ (m/s²: all of it for the shell and a prescribed mass, ζ″θ̇² for a free
    one); for a free mass its rail tangent ζ′ (m/rad or 1), generalised force Q and rate θ̇, else None."""

    mass: float
    chi: np.ndarray
    chi_dot: np.ndarray
    chi_ddot: np.ndarray
    tangent: np.ndarray | None = None
    force: float | None = None
    rate: float | None = None


def _bodies(t, y, params) -> list[Body]:
    """The shell (i = 0) and the rail masses (i = 1 … N) at time t (s) in the state y."""
    n = free_count(params)
    theta, theta_dot = y[10:10 + n], y[10 + n:]
    zero = np.zeros(3)
    bodies = [Body(float(params["mass"]), np.asarray(params["center_of_mass"], dtype=np.float64), zero, zero)]
    slot = 0
    for k, (_, motion, _, curve, _) in enumerate(params["rails"]):
        mass = float(params["masses"][k])
        if motion == "free":
            angle, rate, acceleration = theta[slot], theta_dot[slot], 0.0
            slot += 1
        else:
            amplitude, frequency = params["amplitude"][k], params["frequency"][k]
            phase = frequency * t + params["phase"][k]
            angle = params["theta0"][k] + params["rate"][k] * t + amplitude * np.sin(phase)
            rate = params["rate"][k] + amplitude * frequency * np.cos(phase)
            acceleration = -amplitude * frequency ** 2 * np.sin(phase)
        point, tangent, curvature = _rail(curve, angle)
        known = curvature * rate ** 2 + tangent * acceleration
        if motion == "free":
            bodies.append(Body(mass, point, tangent * rate, known, tangent, float(params["rail_force"][k]), rate))
        else:
            bodies.append(Body(mass, point, tangent * rate, known))
    return bodies


def reference_rhs(t, y, params) -> np.ndarray:
    """ẏ at time t (s) of the state y (see the module docstring), ``params`` a bound system's params."""
    n = free_count(params)
    attitude = rotation_of(y[:4])
    gamma, omega = attitude[2], y[4:7]
    r, g = float(params["radius"]), float(params["g"])
    inertia = np.asarray(params["inertia"], dtype=np.float64)
    matrix = np.zeros((3 + n, 3 + n))
    matrix[:3, :3] = inertia
    right = np.zeros(3 + n)
    right[:3] = _cross(inertia @ omega, omega)
    bodies = _bodies(t, y, params)
    arms, loads = [], []
    slot = 0
    for body in bodies:
        s = r * gamma + body.chi
        f = (g * gamma + _cross(omega, _cross(omega, body.chi)) + 2 * _cross(omega, body.chi_dot)
             + body.chi_ddot)
        matrix[:3, :3] += body.mass * (s @ s * np.eye(3) - np.outer(s, s))
        right[:3] -= body.mass * _cross(s, f)
        if body.tangent is not None:
            column = body.mass * _cross(s, body.tangent)
            matrix[:3, 3 + slot] = column
            matrix[3 + slot, :3] = column
            matrix[3 + slot, 3 + slot] = body.mass * body.tangent @ body.tangent
            right[3 + slot] = body.force - body.mass * body.tangent @ f
            slot += 1
        arms.append(s)
        loads.append(f)
    accelerations = np.linalg.solve(matrix, right)
    omega_dot = accelerations[:3]
    # actuator power (digest §5.2): m ⟨a + gΓ, χ̇⟩ = m ⟨Ω̇ × s + f, χ̇⟩ for a prescribed mass, Q θ̇ for a free one
    power = sum(body.force * body.rate if body.tangent is not None
                else body.mass * (_cross(omega_dot, s) + f) @ body.chi_dot
                for body, s, f in zip(bodies, arms, loads))
    quaternion = y[:4]
    q_dot = 0.5 * np.concatenate([[-quaternion[1:] @ omega],
                                  quaternion[0] * omega + _cross(quaternion[1:], omega)])
    spatial = attitude @ omega
    return np.concatenate([q_dot, omega_dot, [r * spatial[1], -r * spatial[0]], [power], y[10 + n:],
                           accelerations[3:]])


def reference_energy(t, y, params) -> float:
    """E = ½ ⟨𝕀Ω, Ω⟩ + ½ Σ_i m_i |Ω × s_i + χ̇_i|² + g Σ_i m_i ⟨Γ, χ_i⟩ (J; digest §5.1) at time t (s)."""
    gamma = rotation_of(y[:4])[2]
    omega = y[4:7]
    r, g = float(params["radius"]), float(params["g"])
    energy = 0.5 * omega @ np.asarray(params["inertia"], dtype=np.float64) @ omega
    for body in _bodies(t, y, params):
        velocity = _cross(omega, r * gamma + body.chi) + body.chi_dot
        energy += 0.5 * body.mass * velocity @ velocity + g * body.mass * gamma @ body.chi
    return float(energy)


def reference_solution(system, state: dict, t_end: float, rtol: float = 1e-12, atol: float = 1e-12,
                       t_eval=None) -> tuple[dict, np.ndarray, object]:
    """Integrate one member's kernel ``state`` (variables without a member axis) of ``system`` from its
    clock to the time ``t_end`` (s) by scipy's DOP853: (the kernel state dict at the output times, each
    variable with a leading samples axis; the energies (samples,) (J); solve_ivp's result)."""
    params = system.params
    y0, t0 = state_to_y(state)
    solution = solve_ivp(reference_rhs, (float(t0), t_end), y0, method="DOP853", rtol=rtol, atol=atol,
                         t_eval=t_eval, args=(params,))
    if not solution.success:
        raise RuntimeError(f"solve_ivp failed: {solution.message}")
    energy = np.array([reference_energy(t, y, params) for t, y in zip(solution.t, solution.y.T)])
    return y_to_state(solution.y.T, solution.t), energy, solution
