"""A heavy top: one rigid body turning about a fixed point in a uniform gravity field.

V(R) = −m g e·(R c), with c the centre of mass in the body frame (m, from the pivot) and e the
direction of gravity (the convention of ``spherical_chain``: the default e = (0, 0, 1) points down),
so the body torque is M = m g c × (Rᵀe) (N·m) (Lee, Leok & McClamroch 2005, the 3D pendulum, with
ρ = c and the direction of gravity e in place of −e₃).  The component of the spatial angular
momentum R J Ω along e is conserved.  Presets: ``lagrange`` (symmetric, c on the axis: integrable),
``kovalevskaya`` (I = (2, 2, 1), c in the equatorial plane: integrable), ``chaotic``.
"""

import numpy as np

from ..errors import InvalidInput
from ..lanes import lane_function
from .base import SCALAR, VECTOR3, Parameter, Preset, gravity_parameters
from .rigid import (HEADER, RigidBodyDefinition, check_inertia, inertia_header, inertia_parameter,
                    spatial_angular_momentum)


def _coefficients(params, n):
    """Header (J, J⁻¹), then m g c (3, N·m) and e (3)."""
    weight = (params["m"] * params["g"])[:, np.newaxis] * params["center_of_mass"]
    return np.concatenate([inertia_header(params["inertia"]), weight, params["gravity_direction"]], axis=1)


@lane_function
def potential(x, n, coef, topology, out):
    """V = −e·(R m g c) (J)."""
    k = HEADER
    for b in range(x.shape[1]):
        total = 0.0
        for r in range(3):
            total += coef[k + 3 + r, b] * (x[3 * r, b] * coef[k, b] + x[3 * r + 1, b] * coef[k + 1, b]
                                           + x[3 * r + 2, b] * coef[k + 2, b])
        out[b] = -total


@lane_function
def torque(x, n, coef, topology, out):
    """M = m g c × (Rᵀe) (N·m, body frame)."""
    k = HEADER
    for b in range(x.shape[1]):
        e0, e1, e2 = coef[k + 3, b], coef[k + 4, b], coef[k + 5, b]
        u0 = x[0, b] * e0 + x[3, b] * e1 + x[6, b] * e2
        u1 = x[1, b] * e0 + x[4, b] * e1 + x[7, b] * e2
        u2 = x[2, b] * e0 + x[5, b] * e1 + x[8, b] * e2
        c0, c1, c2 = coef[k, b], coef[k + 1, b], coef[k + 2, b]
        out[0, b] = c1 * u2 - c2 * u1
        out[1, b] = c2 * u0 - c0 * u2
        out[2, b] = c0 * u1 - c1 * u0


def _vertical_momentum(state, params):
    """e·L, L = R J Ω (kg·m²/s): (members, ..., 1)."""
    momentum = spatial_angular_momentum(state, params)
    e = params["gravity_direction"]
    e = e.reshape(e.shape[:1] + (1,) * (momentum.ndim - 2) + (3,))
    return np.sum(momentum * e, axis=-1, keepdims=True)


def _check(params):
    check_inertia(params["inertia"])
    if params["inertia"].shape[-3] != 1:
        raise InvalidInput("inertia", f"a heavy top is one body; got {params['inertia'].shape[-3]} tensors")


def _upright(tilt):
    """The attitude whose body axis e₃ points up (against gravity e = +z) tilted by ``tilt`` rad."""
    angle = np.pi - tilt
    return np.array([[[1.0, 0.0, 0.0], [0.0, np.cos(angle), -np.sin(angle)], [0.0, np.sin(angle), np.cos(angle)]]])


def _lagrange():
    return Preset(
        doc="Lagrange top: A = B = 1, C = 0.5 kg·m², m = 1 kg, c = (0, 0, 0.5) m, tilted 0.5 rad from upright, "
            "spin 20 rad/s (integrable: steady precession with nutation)",
        params={"inertia": [1.0, 1.0, 0.5], "m": 1.0, "center_of_mass": [0.0, 0.0, 0.5]},
        state={"R": _upright(0.5), "Omega": np.array([[0.0, 0.0, 20.0]])},
    )


def _kovalevskaya():
    return Preset(
        doc="Kovalevskaya top: I = (2, 2, 1) kg·m², m = 1 kg, c = (0.5, 0, 0) m (equatorial plane), "
            "Ω = (1, 0.5, 2) rad/s (integrable)",
        params={"inertia": [2.0, 2.0, 1.0], "m": 1.0, "center_of_mass": [0.5, 0.0, 0.0]},
        state={"R": np.eye(3)[np.newaxis], "Omega": np.array([[1.0, 0.5, 2.0]])},
    )


def _chaotic():
    return Preset(
        doc="asymmetric top: I = (2, 1.6, 1) kg·m², m = 1 kg, c = (0.3, 0.2, 0.4) m, tilted 1 rad from upright, "
            "Ω = (1, 2, 3) rad/s (chaotic: median λ ≈ 0.2 1/s over 100 s, see the README)",
        params={"inertia": [2.0, 1.6, 1.0], "m": 1.0, "center_of_mass": [0.3, 0.2, 0.4]},
        state={"R": _upright(1.0), "Omega": np.array([[1.0, 2.0, 3.0]])},
    )


DEFINITION = RigidBodyDefinition(
    name="heavy_top",
    summary="heavy top: a rigid body turning about a fixed point under gravity",
    parameters=(
        inertia_parameter("inertia tensor about the pivot"),
        Parameter("m", SCALAR, "kg", "mass"),
        Parameter("center_of_mass", VECTOR3, "m", "centre of mass in the body frame, from the pivot", check="finite"),
        *gravity_parameters(),
    ),
    presets={"lagrange": _lagrange, "kovalevskaya": _kovalevskaya, "chaotic": _chaotic},
    bodies=lambda params: 1,
    coefficients=_coefficients,
    potential=potential,
    torque=torque,
    momentum=_vertical_momentum,
    momentum_doc="component of the spatial angular momentum R J Ω along gravity",
    check=_check,
    revision=2,  # 2: lgvi without momentum drift (Π = JΩ exact, Ω = J⁻¹Π refined) and a second-order first guess
)
