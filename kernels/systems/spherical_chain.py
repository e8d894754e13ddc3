"""n-link spherical pendulum chain in a uniform gravity field (Lee–Leok–McClamroch §3.5, Example 1).

q_i points from joint i to joint i+1; link i has length l_i and a point mass m_i at its end.
M_ij = (Σ_{k ≥ max(i,j)} m_k) l_i l_j  and  V = −Σ_i (Σ_{k≥i} m_k) g l_i e·q_i,
where e is the unit direction of gravity (the paper's e3 = [0, 0, 1], "the direction of gravity").

Forces (Lee–Leok–McClamroch §V, with the digest's corrected moments, digest_000 §4), as the moments
g_i = q_i × f_i that enter eq. (40) beside gravity:
- a torque τ(t) = base_torque + base_torque_amplitude · sin(base_torque_frequency · t + base_torque_phase)
  applied by the base to link 1: g_1 += P_1 τ, P_i = I − q_i q_iᵀ (the component along q_1 would spin
  the massless link about itself; it is projected away, not refused);
- a force d = tip_force at the last mass: g_i += l_i q_i × d for every link (δx_n = Σ l_i γ_i × q_i);
- a viscous damper c_i = damping[i] in joint i (between link i − 1, or the base, and link i; one number
  gives every joint the same c), a torque −c_i (ω_i − ω_{i−1}) on link i and its reaction on link i − 1:
  g_i += P_i [−c_i (ω_i − ω_{i−1}) + c_{i+1} (ω_{i+1} − ω_i)], with ω_0 = 0 and c_{n+1} = 0.
Their power Σ g_i·ω_i is the rate of the energy E = T + V.
"""

import numpy as np

from ..geometry import tangent_rows
from ..lanes import lane_function
from .base import PER_BODY, SCALAR, VECTOR3, Parameter, Preset, SystemDefinition, gravity_parameters, unit_rows


def _tail_masses(params):
    """S_i = Σ_{k≥i} m_k, (members, n)."""
    return np.cumsum(params["m"][:, ::-1], axis=1)[:, ::-1]


def chain_inertia(params, n):
    """M_ij = (Σ_{k ≥ max(i,j)} m_k) l_i l_j (kg·m²), (members, n, n)."""
    tail = _tail_masses(params)
    heavier = tail[:, np.maximum.outer(np.arange(n), np.arange(n))]
    lengths = params["l"]
    return heavier * lengths[:, :, np.newaxis] * lengths[:, np.newaxis, :]


#: rows of the force coefficients after the n + 3 of gravity: τ_0 (3), its amplitude (3), frequency,
#: phase, d (3); then the joints' damping c_1..c_n and the lengths l_1..l_n
FORCE_ROWS = 11


def chain_parameters() -> tuple:
    """The chain's masses, lengths and gravity (shared with :mod:`kernels.systems.jacobi_chain`)."""
    return (Parameter("m", PER_BODY, "kg", "point mass at the end of each link"),
            Parameter("l", PER_BODY, "m", "length of each link"),
            *gravity_parameters())


def potential_coefficients(params):
    """c_i = (Σ_{k≥i} m_k) g l_i (N·m), (members, n): V = −Σ_i c_i e·q_i."""
    return _tail_masses(params) * params["g"][:, np.newaxis] * params["l"]


def _coefficients(params, n):
    """[c_1..c_n, e_x, e_y, e_z] with c_i = S_i g l_i (N·m), so ∂V/∂q_i = −c_i e; then the forces'
    [τ_0, τ_amplitude, ν, φ, d, c_1..c_n, l_1..l_n] (see FORCE_ROWS)."""
    return np.concatenate([potential_coefficients(params), params["gravity_direction"], params["base_torque"], params["base_torque_amplitude"],
                           params["base_torque_frequency"][:, np.newaxis], params["base_torque_phase"][:, np.newaxis],
                           params["tip_force"], params["damping"], params["l"]], axis=1)


def _forced(params):
    return any(np.any(params[name] != 0) for name in ("base_torque", "base_torque_amplitude", "tip_force", "damping"))


@lane_function
def potential(q, coef, topology, out):
    """V = −Σ_i c_i e·q_i (J) from coef rows [c_1..c_n, e] (the layout jacobi_chain shares)."""
    n = q.shape[0]
    for b in range(q.shape[2]):
        out[b] = 0.0
    for i in range(n):
        for b in range(q.shape[2]):
            out[b] -= coef[i, b] * (coef[n, b] * q[i, 0, b] + coef[n + 1, b] * q[i, 1, b] + coef[n + 2, b] * q[i, 2, b])


@lane_function
def gradient(q, coef, topology, out):
    n = q.shape[0]
    for i in range(n):
        for k in range(3):
            for b in range(q.shape[2]):
                out[i, k, b] = -coef[i, b] * coef[n + k, b]


@lane_function
def force(t, q, omega, coef, topology, out):
    """The moments g_i (N·m) at time t (s); see the module docstring.  Lanes innermost, so that every
    link's sweep but the first (which calls sin) vectorises across members."""
    n = q.shape[0]
    base = n + 3
    dampers = base + FORCE_ROWS
    lengths = dampers + n
    for i in range(n):
        for b in range(q.shape[2]):
            d0, d1, d2 = coef[base + 8, b], coef[base + 9, b], coef[base + 10, b]
            l = coef[lengths + i, b]
            # tip force: l_i q_i × d; dampers: torque on link i from joints i and i + 1
            c_in = coef[dampers + i, b]
            c_out = coef[dampers + i + 1, b] if i + 1 < n else 0.0
            t0 = -(c_in + c_out) * omega[i, 0, b]
            t1 = -(c_in + c_out) * omega[i, 1, b]
            t2 = -(c_in + c_out) * omega[i, 2, b]
            if i > 0:
                t0 += c_in * omega[i - 1, 0, b]
                t1 += c_in * omega[i - 1, 1, b]
                t2 += c_in * omega[i - 1, 2, b]
            else:
                wave = np.sin(coef[base + 6, b] * t + coef[base + 7, b])
                t0 += coef[base, b] + coef[base + 3, b] * wave
                t1 += coef[base + 1, b] + coef[base + 4, b] * wave
                t2 += coef[base + 2, b] + coef[base + 5, b] * wave
            if i + 1 < n:
                t0 += c_out * omega[i + 1, 0, b]
                t1 += c_out * omega[i + 1, 1, b]
                t2 += c_out * omega[i + 1, 2, b]
            q0, q1, q2 = q[i, 0, b], q[i, 1, b], q[i, 2, b]
            along = q0 * t0 + q1 * t1 + q2 * t2
            out[i, 0, b] = t0 - along * q0 + l * (q1 * d2 - q2 * d1)
            out[i, 1, b] = t1 - along * q1 + l * (q2 * d0 - q0 * d2)
            out[i, 2, b] = t2 - along * q2 + l * (q0 * d1 - q1 * d0)


@lane_function
def force_damping(q, coef, topology, scale, out):
    """out += scale · ∂g/∂ω (N·m·s): blocks −(c_i + c_{i+1}) P_i, c_i P_i (i, i − 1) and c_{i+1} P_i (i, i + 1)."""
    n = q.shape[0]
    dampers = n + 3 + FORCE_ROWS
    for i in range(n):
        for r in range(3):
            for c in range(3):
                identity = 1.0 if r == c else 0.0
                for b in range(q.shape[2]):  # lanes innermost: one SIMD sweep per entry
                    projector = identity - q[i, r, b] * q[i, c, b]
                    inward = scale * coef[dampers + i, b] * projector
                    # the last link has no joint beyond it
                    outward = scale * coef[dampers + i + 1, b] * projector if i + 1 < n else 0.0
                    out[3 * i + r, 3 * i + c, b] -= inward + outward
                    if i > 0:
                        out[3 * i + r, 3 * (i - 1) + c, b] += inward
                    if i + 1 < n:
                        out[3 * i + r, 3 * (i + 1) + c, b] += outward


def _paper():
    """Example 1, double spherical pendulum, with the digest's exact initial condition."""
    q0 = unit_rows([[np.sqrt(3) / 2, 0.0, 0.5], [0.0, 0.0, 1.0]])
    omega0 = tangent_rows(q0, [[-np.sqrt(3) / 4, 0.0, 0.75], [0.0, 1.0, 0.0]])
    return Preset(
        doc="Example 1: double spherical pendulum, m = 1 kg, l = 9.81 m, g = 9.81 m/s² (run h = 0.01 s, T = 100 s)",
        params={"m": [1.0, 1.0], "l": [9.81, 9.81], "g": 9.81},
        state={"q": q0, "omega": omega0},
    )


DEFINITION = SystemDefinition(
    name="spherical_chain",
    summary="n-link spherical pendulum chain under gravity (Example 1)",
    parameters=(
        *chain_parameters(),
        Parameter("base_torque", VECTOR3, "N·m", "constant torque of the base on link 1", default=(0.0, 0.0, 0.0),
                  check="finite"),
        Parameter("base_torque_amplitude", VECTOR3, "N·m", "amplitude of the periodic base torque",
                  default=(0.0, 0.0, 0.0), check="finite"),
        Parameter("base_torque_frequency", SCALAR, "rad/s", "angular frequency of the periodic base torque",
                  default=0.0, check="finite"),
        Parameter("base_torque_phase", SCALAR, "rad", "phase of the periodic base torque", default=0.0,
                  check="finite"),
        Parameter("tip_force", VECTOR3, "N", "constant force on the last mass", default=(0.0, 0.0, 0.0),
                  check="finite"),
        Parameter("damping", PER_BODY, "N·m·s", "viscous damping c_i of each joint i (on the relative angular "
                  "velocity of link i and link i − 1 or the base); one number for every joint",
                  default=0.0, check="nonnegative", every_body=True),
    ),
    presets={"paper": _paper},
    diagonal_inertia=False,
    bodies=lambda params: params["m"].shape[-1],
    inertia=chain_inertia,
    coefficients=_coefficients,
    potential=potential,
    gradient=gradient,
    symmetry_axis=lambda params: params["gravity_direction"],
    force=force,
    force_damping=force_damping,
    forced=_forced,
)
