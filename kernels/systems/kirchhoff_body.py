"""A rigid body in an ideal fluid at rest: Kirchhoff's equations on SE(3) (Massa & Vignolo §3.2).

With the left-invariant velocities z = (Ω, V) (body angular velocity; body components of the velocity
of the reference point O) and a constant, symmetric positive-definite 6×6 generalised inertia 𝕄 in the
order (Ω, V) (rigid body plus the fluid's added mass), the kinetic energy is T = ½ zᵀ𝕄z and the
momenta (K, P) = 𝕄z (angular about O, linear; body components) obey Kirchhoff's equations

    K̇ = K × Ω + P × V + τ,     Ṗ = P × Ω + F,     Ṙ = R Ω̂,     ẋ = R V

(Massa & Vignolo, "Kirchhoff equations" of §3.2: Γ̇_O + ω × Γ_O + u × Q = M_O, Q̇ + ω × Q = R), with τ and F
the body-frame torque about O and resultant force of the loads.  For a rigid body alone
𝕄 = [[I_O, m ĉ], [−m ĉ, m 1]], I_O = I_G + m(|c|² 1 − c cᵀ) (digest_002 §4, with c = G − O in the body
frame); the fluid adds its added-mass matrix (Lamb, Hydrodynamics ch. VI; for an ellipsoid see
:func:`ellipsoid_added_mass`).

Loads: uniform gravity g along e on the body's mass m at G and buoyancy B (N, the weight of the
displaced fluid) against e at the centre of buoyancy c_B:
V(R, x) = −e·((mg − B) x + R s), s = mg c − B c_B, so F = (mg − B) Rᵀe and τ = s × Rᵀe.

Conserved: the energy T + V; the spatial impulse (Q̂, Γ̂) = (R P, R K + x × R P) (kg·m/s, kg·m²/s about
the space origin) without loads, and with them its horizontal linear and vertical angular parts; without
loads also Kirchhoff's Casimirs |P|² and P·K (:func:`kirchhoff_casimirs`).
"""

from functools import partial

import numpy as np

from ..errors import InvalidInput
from ..lanes import lane_function
from ..spaces import RIGID_MOTION
from .base import MATRIX6, PER_BODY_TENSOR, SCALAR, VECTOR3, Parameter, Preset
from .rigid import (MOTION_HEADER, RigidBodyDefinition, attitude_rate, canonical_inertia, kirchhoff_rates,
                    matrix3_times, matrix6_times, motion_header)

#: coefficient rows of body i after the SE(3) header (rows MOTION_HEADER n + LOAD_ROWS i …):
#: mg − B, s = mg c − B c_B (3), e (3)
NET_WEIGHT, MOMENT, DIRECTION, LOAD_ROWS = 0, 1, 4, 7
#: how far from symmetric (relative to its largest entry) a given 𝕄 may be
SYMMETRY_TOLERANCE = 1e-12


def skew(vectors: np.ndarray) -> np.ndarray:
    """v̂ (…, 3, 3) with v̂ w = v × w for vectors (…, 3)."""
    v0, v1, v2 = np.moveaxis(np.asarray(vectors, dtype=np.float64), -1, 0)
    zero = np.zeros_like(v0)
    return np.stack([np.stack([zero, -v2, v1], -1), np.stack([v2, zero, -v0], -1),
                     np.stack([-v1, v0, zero], -1)], -2)


def rigid_body_inertia(m, inertia_g, center_of_mass) -> np.ndarray:
    """𝕄 of a rigid body (…, 6, 6) in the order (Ω, V) about O: [[I_O, m ĉ], [−m ĉ, m 1]] with
    I_O = I_G + m(|c|² 1 − c cᵀ) (kg·m², kg·m, kg; digest_002 §4) for m (…), I_G (…, 3, 3), c (…, 3)."""
    m = np.asarray(m, dtype=np.float64)[..., np.newaxis, np.newaxis]
    c = np.asarray(center_of_mass, dtype=np.float64)
    inertia_o = inertia_g + m * (np.sum(c * c, axis=-1)[..., np.newaxis, np.newaxis] * np.eye(3)
                                 - c[..., :, np.newaxis] * c[..., np.newaxis, :])
    coupling = m * skew(c)
    top = np.concatenate(np.broadcast_arrays(inertia_o, coupling), axis=-1)
    bottom = np.concatenate(np.broadcast_arrays(-coupling, m * np.eye(3)), axis=-1)
    return np.concatenate([top, bottom], axis=-2)


def carlson_rd(x: float, y: float, z: float) -> float:
    """Carlson's symmetric elliptic integral R_D(x, y, z) = (3/2) ∫₀^∞ dt / ((t + z)^{3/2} √((t + x)(t + y)))
    by the duplication theorem (Carlson, Numer. Math. 33 (1979)): each step quarters the spread δ of
    (x, y, z) about μ = (x + y + 3z)/5, the mean for which R_D(x, y, z) = μ^{−3/2}(1 + O(δ²)); stopped at
    δ ≤ 1e-9 μ, where the remainder is below round-off."""
    total, weight = 0.0, 1.0
    while True:
        mean = (x + y + 3.0 * z) / 5.0
        if max(abs(x - mean), abs(y - mean), abs(z - mean)) <= 1e-9 * mean:
            return 3.0 * total + weight * mean ** -1.5
        sx, sy, sz = np.sqrt(x), np.sqrt(y), np.sqrt(z)
        lam = sx * sy + sx * sz + sy * sz
        total += weight / (sz * (z + lam))
        weight *= 0.25
        x, y, z = 0.25 * (x + lam), 0.25 * (y + lam), 0.25 * (z + lam)


def lamb_constants(semi_axes) -> np.ndarray:
    """Lamb's α₀, β₀, γ₀ of an ellipsoid with semi-axes (a, b, c) (m): α₀ = abc ∫₀^∞ dλ / ((a² + λ) Δ),
    Δ = √((a² + λ)(b² + λ)(c² + λ)), and cyclically; α₀ = (2/3) abc R_D(b², c², a²).  They sum to 2."""
    a, b, c = (float(v) for v in semi_axes)
    scale = 2.0 / 3.0 * a * b * c
    return np.array([scale * carlson_rd(b * b, c * c, a * a), scale * carlson_rd(c * c, a * a, b * b),
                     scale * carlson_rd(a * a, b * b, c * c)])


def ellipsoid_added_mass(semi_axes, density) -> np.ndarray:
    """The added-mass matrix (6, 6) of an ellipsoid with semi-axes (a, b, c) along the body axes (m) in an
    ideal fluid of ``density`` (kg/m³), in the order (Ω, V), about its centre (Lamb, Hydrodynamics ch. V,
    the translating and rotating ellipsoid): with m_f = density · (4/3)π abc the displaced fluid's mass,
    translation along a: m_f α₀/(2 − α₀) (kg); rotation about a:
    (m_f/5) (b² − c²)² (γ₀ − β₀) / (2(b² − c²) + (b² + c²)(β₀ − γ₀)) (kg·m², 0 when b = c), and cyclically.
    A sphere gets m_f/2 along every axis and no rotational added mass."""
    axes = np.asarray(semi_axes, dtype=np.float64)
    alpha = lamb_constants(axes)
    fluid = density * 4.0 / 3.0 * np.pi * np.prod(axes)
    translation = fluid * alpha / (2.0 - alpha)
    rotation = np.zeros(3)
    for k in range(3):
        i, j = (k + 1) % 3, (k + 2) % 3  # rotation about axis k shears the other two
        d = axes[i] ** 2 - axes[j] ** 2
        if d != 0.0:
            rotation[k] = fluid / 5.0 * d * d * (alpha[j] - alpha[i]) / (
                2.0 * d + (axes[i] ** 2 + axes[j] ** 2) * (alpha[i] - alpha[j]))
    return np.diag(np.concatenate([rotation, translation]))


def solid_ellipsoid(semi_axes, density):
    """Mass (kg) and centroidal inertia diag (kg·m²) of a homogeneous solid ellipsoid."""
    a, b, c = (float(v) for v in semi_axes)
    m = density * 4.0 / 3.0 * np.pi * a * b * c
    return m, m / 5.0 * np.array([b * b + c * c, a * a + c * c, a * a + b * b])


def canonical_matrix6(name: str, value) -> np.ndarray:
    """A 6×6 parameter's value as float64, refused (naming ``name``) with any other trailing shape."""
    array = np.asarray(value, dtype=np.float64)
    if array.shape[-2:] != (6, 6):
        raise InvalidInput(name, f"must be a 6×6 matrix in the order (Ω, V) (…, 6, 6), got shape {array.shape}")
    return array


def generalised_inertia(params: dict) -> np.ndarray:
    """𝕄 (…, 6, 6) from parameters with or without a member axis: ``inertia6`` where it is given (non-zero),
    else the rigid body of ``m``, ``inertia``, ``center_of_mass`` plus ``added_mass``."""
    inertia_g = params["inertia"][..., 0, :, :]
    built = rigid_body_inertia(params["m"], inertia_g, params["center_of_mass"]) + params["added_mass"]
    given = params["inertia6"]
    chosen = np.any(given != 0.0, axis=(-2, -1))[..., np.newaxis, np.newaxis]
    return np.where(chosen, given, built)


def _check(params):
    matrix = generalised_inertia(params)
    asymmetry = np.abs(matrix - np.swapaxes(matrix, -1, -2)).max()
    if asymmetry > SYMMETRY_TOLERANCE * np.abs(matrix).max():
        raise InvalidInput("inertia6", f"must be symmetric; max |𝕄 − 𝕄ᵀ| = {asymmetry:.3g}")
    smallest = np.linalg.eigvalsh(matrix).min()
    if not smallest > 0:
        raise InvalidInput("inertia6", f"must be positive definite (rigid body plus added mass); its smallest "
                           f"eigenvalue is {smallest:.3g}")


def _loads(params):
    """(mg − B) (members,) and s = mg c − B c_B (members, 3) (N, N·m)."""
    weight = params["m"] * params["g"]
    moment = weight[:, np.newaxis] * params["center_of_mass"] \
        - params["buoyancy"][:, np.newaxis] * params["center_of_buoyancy"]
    return weight - params["buoyancy"], moment


def _coefficients(params, n):
    net, moment = _loads(params)
    return np.concatenate([motion_header(generalised_inertia(params)[:, np.newaxis]), net[:, np.newaxis], moment,
                           params["gravity_direction"]], axis=1)


@lane_function
def potential(x, n, coef, topology, out):
    """V = −Σ_i e·((mg − B) x_i + R_i s) (J)."""
    for b in range(x.shape[1]):
        out[b] = 0.0
    for i in range(n):
        k = MOTION_HEADER * n + LOAD_ROWS * i
        p = 9 * n + 3 * i
        for b in range(x.shape[1]):
            total = 0.0
            for r in range(3):
                rs = (x[9 * i + 3 * r, b] * coef[k + MOMENT, b] + x[9 * i + 3 * r + 1, b] * coef[k + MOMENT + 1, b]
                      + x[9 * i + 3 * r + 2, b] * coef[k + MOMENT + 2, b])
                total += coef[k + DIRECTION + r, b] * (coef[k + NET_WEIGHT, b] * x[p + r, b] + rs)
            out[b] -= total


@lane_function
def loads(x, n, coef, topology, out):
    """Body-frame torque about O (rows 6i … 6i + 2, N·m) and force (rows 6i + 3 … 6i + 5, N):
    τ = s × Rᵀe, F = (mg − B) Rᵀe."""
    for i in range(n):
        k = MOTION_HEADER * n + LOAD_ROWS * i
        base = 9 * i
        for b in range(x.shape[1]):
            e0, e1, e2 = coef[k + DIRECTION, b], coef[k + DIRECTION + 1, b], coef[k + DIRECTION + 2, b]
            u0 = x[base, b] * e0 + x[base + 3, b] * e1 + x[base + 6, b] * e2
            u1 = x[base + 1, b] * e0 + x[base + 4, b] * e1 + x[base + 7, b] * e2
            u2 = x[base + 2, b] * e0 + x[base + 5, b] * e1 + x[base + 8, b] * e2
            s0, s1, s2 = coef[k + MOMENT, b], coef[k + MOMENT + 1, b], coef[k + MOMENT + 2, b]
            net = coef[k + NET_WEIGHT, b]
            out[6 * i, b] = s1 * u2 - s2 * u1
            out[6 * i + 1, b] = s2 * u0 - s0 * u2
            out[6 * i + 2, b] = s0 * u1 - s1 * u0
            out[6 * i + 3, b] = net * u0
            out[6 * i + 4, b] = net * u1
            out[6 * i + 5, b] = net * u2


# ------------------------------------------------------------------------ lane templates (bound per system)

def kirchhoff_energy(x, n, coef, topology, work, out):
    """E = Σ_i ½ z_iᵀ𝕄 z_i + V (J) per lane, z = (Ω, V); ``system_potential`` is bound at specialisation."""
    system_potential(x, n, coef, topology, out)  # noqa: F821
    for i in range(n):
        w = 12 * n + 3 * i
        v = 15 * n + 3 * i
        for b in range(x.shape[1]):
            z0, z1, z2 = x[w, b], x[w + 1, b], x[w + 2, b]
            z3, z4, z5 = x[v, b], x[v + 1, b], x[v + 2, b]
            k0, k1, k2, p0, p1, p2 = matrix6_times(coef, MOTION_HEADER * i, b, z0, z1, z2, z3, z4, z5)
            out[b] += 0.5 * (z0 * k0 + z1 * k1 + z2 * k2 + z3 * p0 + z4 * p1 + z5 * p2)


def kirchhoff_vector_field(x, n, coef, topology, t, dx, work):
    """dx = (R Ω̂, R V, 𝕄⁻¹(K × Ω + P × V + τ, P × Ω + F)), (K, P) = 𝕄(Ω, V): Kirchhoff's equations;
    ``system_torque`` (the loads) is bound at specialisation and writes into ``work`` (6n rows)."""
    system_torque(x, n, coef, topology, work)  # noqa: F821
    for i in range(n):
        base = 9 * i
        p = 9 * n + 3 * i
        w = 12 * n + 3 * i
        v = 15 * n + 3 * i
        k = MOTION_HEADER * i
        for b in range(x.shape[1]):
            w0, w1, w2 = x[w, b], x[w + 1, b], x[w + 2, b]
            v0, v1, v2 = x[v, b], x[v + 1, b], x[v + 2, b]
            attitude_rate(x, dx, base, b, w0, w1, w2)
            dx[p, b], dx[p + 1, b], dx[p + 2, b] = matrix3_times(x, base, b, v0, v1, v2)
            d0, d1, d2, d3, d4, d5 = kirchhoff_rates(coef, k, b, w0, w1, w2, v0, v1, v2, work, i)
            dx[w, b], dx[w + 1, b], dx[w + 2, b] = d0, d1, d2
            dx[v, b], dx[v + 1, b], dx[v + 2, b] = d3, d4, d5


# ------------------------------------------------------------------------ conserved quantities

def body_momenta(state: dict, params: dict):
    """(K, P) = 𝕄(Ω, V) (kg·m²/s, kg·m/s; body frame) for states with leading (members, …) axes."""
    matrix = generalised_inertia(params)  # (members, 6, 6)
    z = np.concatenate([state["Omega"], state["V"]], axis=-1)
    matrix = matrix.reshape(matrix.shape[:1] + (1,) * (z.ndim - 2) + (6, 6))
    momenta = np.einsum("...ij,...j->...i", matrix, z)
    return momenta[..., :3], momenta[..., 3:]


def kirchhoff_casimirs(state: dict, params: dict) -> np.ndarray:
    """|P|² and P·K summed over bodies ((members, …, 2); kg²m²/s², kg²m³/s²), conserved without loads."""
    angular, linear = body_momenta(state, params)
    return np.stack([np.sum(linear * linear, axis=-1), np.sum(linear * angular, axis=-1)], axis=-1).sum(axis=-2)


def spatial_impulse(state: dict, params: dict) -> np.ndarray:
    """The conserved part of the spatial impulse (members, …, 6): Q̂ = Σ R P (kg·m/s) and Γ̂ = Σ (R K + x × R P)
    (kg·m²/s, about the space origin); for members with loads, Q̂'s component along gravity and Γ̂'s
    components across it are set to zero (they change)."""
    angular, linear = body_momenta(state, params)
    rotations = state["R"]
    linear_space = np.einsum("...ij,...j->...i", rotations, linear)
    angular_space = np.einsum("...ij,...j->...i", rotations, angular) + np.cross(state["x"], linear_space)
    linear_space, angular_space = linear_space.sum(axis=-2), angular_space.sum(axis=-2)
    net, moment = _loads(params)
    loaded = (np.abs(net) + np.abs(moment).sum(axis=-1)) > 0
    shape = loaded.shape + (1,) * (linear_space.ndim - 1)
    loaded = loaded.reshape(shape)
    e = params["gravity_direction"].reshape(shape[:-1] + (3,))
    along_linear = np.sum(linear_space * e, axis=-1, keepdims=True) * e
    along_angular = np.sum(angular_space * e, axis=-1, keepdims=True) * e
    return np.concatenate([np.where(loaded, linear_space - along_linear, linear_space),
                           np.where(loaded, along_angular, angular_space)], axis=-1)


# ------------------------------------------------------------------------ presets

WATER = 1000.0  # kg/m³
SPHEROID_AXES = (1.0, 0.25, 0.25)  # m
PLATE_AXES = (0.3, 0.2, 0.02)  # m
PLATE_DENSITY = 2700.0  # kg/m³ (aluminium)


def _state(tilt=0.0, omega=(0.0, 0.0, 0.0), velocity=(0.0, 0.0, 0.0)):
    c, s = np.cos(tilt), np.sin(tilt)
    return {"R": np.array([[[1.0, 0.0, 0.0], [0.0, c, -s], [0.0, s, c]]]), "x": np.zeros((1, 3)),
            "Omega": np.array([omega], dtype=np.float64), "V": np.array([velocity], dtype=np.float64)}


def _free_body():
    return Preset(
        doc="no fluid: a body of m = 2 kg, I_G = (1, 2, 3) kg·m², G at c = (0.1, −0.2, 0.3) m from O, "
            "Ω = (1, 0.5, −0.3) rad/s, V = (0.2, 0, 0.1) m/s (the Kirchhoff form of a free body with O ≠ G)",
        params={"m": 2.0, "inertia": [1.0, 2.0, 3.0], "center_of_mass": [0.1, -0.2, 0.3]},
        state=_state(omega=(1.0, 0.5, -0.3), velocity=(0.2, 0.0, 0.1)))


def _ellipsoid():
    m, moments = solid_ellipsoid(SPHEROID_AXES, WATER)
    return Preset(
        doc=f"a neutrally buoyant solid prolate spheroid, semi-axes {SPHEROID_AXES} m, in water (1000 kg/m³): "
            f"m = {m:.4g} kg and Lamb's added masses (ellipsoid_added_mass); no gravity; translating at 1 m/s "
            "along a direction 0.1 rad from its long axis, turning slowly",
        params={"m": m, "inertia": list(moments), "added_mass": ellipsoid_added_mass(SPHEROID_AXES, WATER)},
        state=_state(omega=(0.0, 0.0, 0.05), velocity=(np.cos(0.1), np.sin(0.1), 0.0)))


def _plate():
    m, moments = solid_ellipsoid(PLATE_AXES, PLATE_DENSITY)
    fluid = WATER * 4.0 / 3.0 * np.pi * np.prod(PLATE_AXES)
    return Preset(
        doc=f"Kozlov's heavy body in an ideal fluid: a flat aluminium ellipsoid (semi-axes {PLATE_AXES} m, "
            f"2700 kg/m³, m = {m:.4g} kg) falling in water under gravity (g = 9.81 m/s² along +z) and "
            f"buoyancy ({fluid * 9.81:.4g} N at its centre), with Lamb's added masses; released at rest "
            "tilted 0.3 rad about its long axis (not integrable in general)",
        params={"m": m, "inertia": list(moments), "added_mass": ellipsoid_added_mass(PLATE_AXES, WATER),
                "g": 9.81, "buoyancy": fluid * 9.81},
        state=_state(tilt=0.3))


DEFINITION = RigidBodyDefinition(
    name="kirchhoff_body",
    summary="a rigid body in an ideal fluid at rest (Kirchhoff's equations, added mass) on SE(3), optionally "
            "with gravity and buoyancy",
    parameters=(
        Parameter("inertia6", MATRIX6, "kg m2, kg m, kg",
                  "generalised inertia 𝕄 (6×6, symmetric positive definite, order (Ω, V), about O, body frame): "
                  "rigid body plus added mass; 0 (the default): built from m, inertia, center_of_mass and added_mass",
                  default=np.zeros((6, 6)), check="finite", normalise=partial(canonical_matrix6, "inertia6")),
        Parameter("m", SCALAR, "kg", "mass of the body (its weight m g acts at G)", default=1.0),
        Parameter("inertia", PER_BODY_TENSOR, "kg m2", "inertia tensor about the centre of mass G (3 principal moments "
                  "or a 3×3 body-frame tensor)", default=(1.0, 1.0, 1.0), check="finite", normalise=canonical_inertia),
        Parameter("center_of_mass", VECTOR3, "m", "G − O in the body frame", default=(0.0, 0.0, 0.0), check="finite"),
        Parameter("added_mass", MATRIX6, "kg m2, kg m, kg", "the fluid's added-mass matrix (6×6, order (Ω, V), "
                  "about O, body frame)", default=np.zeros((6, 6)), check="finite", normalise=partial(canonical_matrix6, "added_mass")),
        Parameter("g", SCALAR, "m/s²", "gravitational acceleration (0: no gravity)", default=0.0, check="nonnegative"),
        Parameter("gravity_direction", VECTOR3, "1", "direction of gravity (normalised)", default=(0.0, 0.0, 1.0),
                  check="direction"),
        Parameter("buoyancy", SCALAR, "N", "weight of the displaced fluid, acting against gravity",
                  default=0.0, check="nonnegative"),
        Parameter("center_of_buoyancy", VECTOR3, "m", "where buoyancy acts, from O in the body frame",
                  default=(0.0, 0.0, 0.0), check="finite"),
    ),
    presets={"free_body": _free_body, "ellipsoid": _ellipsoid, "plate": _plate},
    bodies=lambda params: 1,
    coefficients=_coefficients,
    potential=potential,
    torque=loads,
    momentum=spatial_impulse,
    momentum_doc="spatial impulse (R P, R K + x × R P); with gravity its horizontal linear and vertical angular parts",
    check=_check,
    space=RIGID_MOTION,
    revision=2,  # 2: lgvi's (f, t) by chord iterations (frozen matrix 𝕄 diag(2, 2, 2, 1, 1, 1)), not Newton's
    provides=frozenset({"potential", "torque", "inertia6", "vector_field"}),
    templates=(("system_energy", kirchhoff_energy), ("vector_field", kirchhoff_vector_field)),
)
