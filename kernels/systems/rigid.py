"""Rigid bodies on SO(3)ⁿ: what every such system shares, independent of any integrator.

A rigid-body system declares per-member coefficients whose first 28 rows per body are its inertia
tensor J_i about the body's fixed point (or centre of mass, for a free body; kg·m², body frame, rows
28i … 28i+8), J_i⁻¹ (rows 28i+9 … 28i+17), its adjugate adj J_i (rows 28i+18 … 28i+26) and det J_i
(row 28i+27), followed by its own; a potential V(R) (J) and the body
torque M_i(R) = −(∂V/∂R)-dual (N·m, body frame: δV = −Σ_i M_i·η_i for R_i → R_i exp(η̂_i)) as jitted
lane functions on the flat state (see :mod:`kernels.spaces.rotation`).  The motion is Euler's
J_i Ω̇_i = J_i Ω_i × Ω_i + M_i with Ṙ_i = R_i Ω̂_i (Lee, Leok & McClamroch 2007, eqs. (5)–(6);
Massa–Vignolo §3.2 with u = 0).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ..errors import InvalidInput
from ..lanes import compensated_dot6, inline_lane_function, lane_function
from ..spaces import ROTATION, StateSpace
from .base import FlatSystemDefinition, Parameter

#: coefficient rows per body of the shared header: J (9), J⁻¹ (9), adj J (9), det J (1)
HEADER = 28
#: coefficient rows per body on SE(3)ⁿ, the first MOTION_HEADER n rows: 𝕄_i (36, row-major, order (Ω, V)),
#: then 𝕄_i⁻¹ (36, from row INVERSE6)
MOTION_HEADER, INVERSE6 = 72, 36
#: how far the triangle inequalities may fail by round-off (relative to the trace)
TRIANGLE_TOLERANCE = 1e-12


def canonical_inertia(value) -> np.ndarray:
    """An ``inertia`` parameter as (…, n, 3, 3): three principal moments (3,) or a tensor (3, 3) of one
    body, (n, 3, 3) tensors of n bodies, or (members, n, 3, 3) per member."""
    array = np.asarray(value, dtype=np.float64)
    if array.ndim == 1:
        if array.shape != (3,):
            raise InvalidInput("inertia", f"principal moments are 3 numbers (kg·m²), got shape {array.shape}")
        return np.diag(array)[np.newaxis]
    if array.ndim == 2:
        if array.shape != (3, 3):
            raise InvalidInput("inertia", f"a body-frame tensor is 3×3 (kg·m²), got shape {array.shape}")
        return array[np.newaxis]
    if array.shape[-2:] != (3, 3):
        raise InvalidInput("inertia", f"tensors must be 3×3 (…, n, 3, 3), got shape {array.shape}")
    return array


def check_inertia(inertia: np.ndarray) -> None:
    """Refuse tensors that are not symmetric positive definite or whose principal moments violate a
    triangle inequality (A + B ≥ C for every ordering: no physical body has them)."""
    inertia = np.asarray(inertia, dtype=np.float64)
    if not np.allclose(inertia, np.swapaxes(inertia, -1, -2), rtol=1e-12, atol=0):
        raise InvalidInput("inertia", "must be a symmetric tensor (kg·m²)")
    moments = np.linalg.eigvalsh(inertia)
    if not np.all(moments > 0):
        raise InvalidInput("inertia", f"must be positive definite; principal moments {moments.reshape(-1, 3)[0]} "
                           "(kg·m²)")
    largest = moments[..., 2]
    slack = moments[..., 0] + moments[..., 1] - largest
    worst = np.argmin((slack / moments.sum(axis=-1)).reshape(-1))
    if slack.reshape(-1)[worst] < -TRIANGLE_TOLERANCE * moments.sum(axis=-1).reshape(-1)[worst]:
        a, b, c = moments.reshape(-1, 3)[worst]
        raise InvalidInput("inertia", f"principal moments {a:g}, {b:g}, {c:g} violate the triangle inequality "
                           f"{a:g} + {b:g} >= {c:g} (no rigid body has them)")


def inertia_parameter(doc: str) -> Parameter:
    return Parameter("inertia", "body×3×3", "kg m2", doc + " (3 principal moments, a 3×3 body-frame tensor, or "
                     "(n, 3, 3) for n bodies)", check="finite", normalise=canonical_inertia)


def inertia_header(inertia: np.ndarray) -> np.ndarray:
    """(members, 28 n): J_i, J_i⁻¹, adj J_i (row-major) and det J_i of each body.  Euler's equations (the
    Runge–Kutta baselines) multiply by J⁻¹; lgvi multiplies by it too and refines the product with an exact
    residual (:mod:`kernels.integrators.lgvi`: applying J⁻¹ as a product, as adj(J) x / det J, or any other
    way that rounds once from a Π on the double grid drifts its conserved momentum linearly).  No built-in
    method reads adj J and det J any more; the rows stay so that the header's layout does not change."""
    members, n = inertia.shape[:2]
    j = inertia
    adjugate = np.stack([
        j[..., 1, 1] * j[..., 2, 2] - j[..., 1, 2] * j[..., 2, 1], j[..., 0, 2] * j[..., 2, 1] - j[..., 0, 1] * j[..., 2, 2],
        j[..., 0, 1] * j[..., 1, 2] - j[..., 0, 2] * j[..., 1, 1],
        j[..., 1, 2] * j[..., 2, 0] - j[..., 1, 0] * j[..., 2, 2], j[..., 0, 0] * j[..., 2, 2] - j[..., 0, 2] * j[..., 2, 0],
        j[..., 0, 2] * j[..., 1, 0] - j[..., 0, 0] * j[..., 1, 2],
        j[..., 1, 0] * j[..., 2, 1] - j[..., 1, 1] * j[..., 2, 0], j[..., 0, 1] * j[..., 2, 0] - j[..., 0, 0] * j[..., 2, 1],
        j[..., 0, 0] * j[..., 1, 1] - j[..., 0, 1] * j[..., 1, 0]], axis=-1)
    determinant = j[..., 0, 0] * adjugate[..., 0] + j[..., 0, 1] * adjugate[..., 3] + j[..., 0, 2] * adjugate[..., 6]
    inverse = np.linalg.inv(inertia).reshape(members, n, 9)
    return np.concatenate([inertia.reshape(members, n, 9), inverse, adjugate, determinant[..., np.newaxis]],
                          axis=2).reshape(members, -1)


@inline_lane_function
def matrix3_times(rows, j, b, x0, x1, x2):
    """M x for the 3×3 matrix held row-major in rows j … j + 8 of a lane array, lane b (an attitude R in a
    flat state, an inertia J in a coefficient header)."""
    return (rows[j, b] * x0 + rows[j + 1, b] * x1 + rows[j + 2, b] * x2,
            rows[j + 3, b] * x0 + rows[j + 4, b] * x1 + rows[j + 5, b] * x2,
            rows[j + 6, b] * x0 + rows[j + 7, b] * x1 + rows[j + 8, b] * x2)


@lane_function
def inertia_times(coef, j, b, x0, x1, x2):
    """J x for the body whose header starts at row j, lane b (J Ω = Π, kg·m²/s)."""
    return matrix3_times(coef, j, b, x0, x1, x2)


def motion_header(matrices: np.ndarray) -> np.ndarray:
    """(members, 72 n): 𝕄_i and 𝕄_i⁻¹ (row-major) of each body from 𝕄 (members, n, 6, 6)."""
    members = matrices.shape[0]
    return np.concatenate([matrices.reshape(members, -1, 36), np.linalg.inv(matrices).reshape(members, -1, 36)],
                          axis=2).reshape(members, -1)


@inline_lane_function
def matrix6_times(coef, k, b, z0, z1, z2, z3, z4, z5):
    """The 6×6 matrix at coefficient rows k … k + 35 (row-major) times z, lane b (six scalars: no array is
    allocated in the vector field's inner loop)."""
    return (matrix6_row(coef, k, b, z0, z1, z2, z3, z4, z5), matrix6_row(coef, k + 6, b, z0, z1, z2, z3, z4, z5),
            matrix6_row(coef, k + 12, b, z0, z1, z2, z3, z4, z5), matrix6_row(coef, k + 18, b, z0, z1, z2, z3, z4, z5),
            matrix6_row(coef, k + 24, b, z0, z1, z2, z3, z4, z5), matrix6_row(coef, k + 30, b, z0, z1, z2, z3, z4, z5))


@inline_lane_function
def matrix6_row(coef, row, b, z0, z1, z2, z3, z4, z5):
    """One row (coefficient rows row … row + 5) of a 6×6 matrix times z, lane b."""
    return (coef[row, b] * z0 + coef[row + 1, b] * z1 + coef[row + 2, b] * z2 + coef[row + 3, b] * z3
            + coef[row + 4, b] * z4 + coef[row + 5, b] * z5)


@inline_lane_function
def kirchhoff_forces(coef, k, b, w0, w1, w2, v0, v1, v2, t0, t1, t2, f0, f1, f2):
    """(K × Ω + P × V + τ, P × Ω + F), (K, P) = 𝕄(Ω, V): the right side of Kirchhoff's equations 𝕄 ż = … for
    the body whose header starts at coefficient row k, lane b."""
    k0, k1, k2, p0, p1, p2 = matrix6_times(coef, k, b, w0, w1, w2, v0, v1, v2)
    return (k1 * w2 - k2 * w1 + p1 * v2 - p2 * v1 + t0, k2 * w0 - k0 * w2 + p2 * v0 - p0 * v2 + t1,
            k0 * w1 - k1 * w0 + p0 * v1 - p1 * v0 + t2,
            p1 * w2 - p2 * w1 + f0, p2 * w0 - p0 * w2 + f1, p0 * w1 - p1 * w0 + f2)


@inline_lane_function
def kirchhoff_rates(coef, k, b, w0, w1, w2, v0, v1, v2, loads, i):
    """(Ω̇, V̇) = 𝕄⁻¹ of :func:`kirchhoff_forces` for body i (header at coefficient row k), lane b, with the
    loads' rows 6i … 6i + 5 of ``loads``: Kirchhoff's equations solved for the accelerations."""
    t0, t1, t2, f0, f1, f2 = body_loads(loads, i, b)
    g = kirchhoff_forces(coef, k, b, w0, w1, w2, v0, v1, v2, t0, t1, t2, f0, f1, f2)
    return matrix6_times(coef, k + INVERSE6, b, g[0], g[1], g[2], g[3], g[4], g[5])


@inline_lane_function
def body_loads(work, i, b):
    """(τ, F) of body i, lane b, from the loads' rows 6i … 6i + 5."""
    return (work[6 * i, b], work[6 * i + 1, b], work[6 * i + 2, b], work[6 * i + 3, b], work[6 * i + 4, b],
            work[6 * i + 5, b])


@dataclass(frozen=True, kw_only=True)
class RigidBodyDefinition(FlatSystemDefinition):
    """The physics of a rigid-body system on SO(3)ⁿ (see the module docstring)."""

    coefficients: Callable[[dict, int], np.ndarray]  # (members, P), header first
    potential: Any  # potential(x, n, coef, topology, out (L,))
    torque: Any  # torque(x, n, coef, topology, out (3n, L))
    space: StateSpace = ROTATION
    provides: frozenset = frozenset({"potential", "torque", "inertia", "vector_field"})
    #: (bound name, template) of its energy and equations of motion; None: SO(3)ⁿ's, E = ½ Σ Ω·JΩ + V and
    #: Euler's equations (a body on SE(3) brings Kirchhoff's, with ``torque`` writing torque and force)
    templates: tuple | None = None

    @property
    def lane_functions(self) -> dict:
        """Jitted functions a kernel binds by name."""
        return {"system_potential": self.potential, "system_torque": self.torque}

    @property
    def lane_templates(self) -> tuple:
        """(bound name, template) specialised to this system: its energy and equations of motion."""
        if self.templates is not None:
            return self.templates
        return (("system_energy", rigid_energy), ("vector_field", euler_vector_field))


def spatial_angular_momentum(state: dict, params: dict) -> np.ndarray:
    """Σ_i R_i J_i Ω_i (kg·m²/s, space frame) for R (members, ..., n, 3, 3), Ω (members, ..., n, 3);
    returns (members, ..., 3)."""
    rotations, omega = state["R"], state["Omega"]
    inertia = params["inertia"]  # (members, n, 3, 3)
    extra = rotations.ndim - 4
    inertia = inertia.reshape(inertia.shape[:1] + (1,) * extra + inertia.shape[1:])
    body = np.einsum("...ij,...j->...i", inertia, omega)
    return np.einsum("...ij,...j->...i", rotations, body).sum(axis=-2)


# ------------------------------------------------------------------------ lane templates (bound per system)

def rigid_energy(x, n, coef, topology, work, out):
    """E = ½ Σ_i Ω_i·J_i Ω_i + V(R) (J) per lane; ``system_potential`` is bound at specialisation."""
    system_potential(x, n, coef, topology, out)  # noqa: F821
    lanes = x.shape[1]
    for i in range(n):
        w = 9 * n + 3 * i
        j = HEADER * i
        for b in range(lanes):
            w0, w1, w2 = x[w, b], x[w + 1, b], x[w + 2, b]
            p0, p1, p2 = inertia_times(coef, j, b, w0, w1, w2)
            out[b] += 0.5 * (w0 * p0 + w1 * p1 + w2 * p2)


def euler_vector_field(x, n, coef, topology, t, dx, work):
    """dx = (R_i Ω̂_i, J_i⁻¹(J_i Ω_i × Ω_i + M_i)): Euler's equations on SO(3)ⁿ; ``system_torque`` is bound
    at specialisation; ``work`` (3n, L) holds the torques."""
    system_torque(x, n, coef, topology, work)  # noqa: F821
    lanes = x.shape[1]
    for i in range(n):
        base = 9 * i
        w = 9 * n + 3 * i
        j = HEADER * i
        for b in range(lanes):
            w0, w1, w2 = x[w, b], x[w + 1, b], x[w + 2, b]
            attitude_rate(x, dx, base, b, w0, w1, w2)
            p0, p1, p2 = inertia_times(coef, j, b, w0, w1, w2)
            t0 = p1 * w2 - p2 * w1 + work[3 * i, b]
            t1 = p2 * w0 - p0 * w2 + work[3 * i + 1, b]
            t2 = p0 * w1 - p1 * w0 + work[3 * i + 2, b]
            dx[w, b], dx[w + 1, b], dx[w + 2, b] = inertia_times(coef, j + 9, b, t0, t1, t2)  # J⁻¹ t


@lane_function
def attitude_rate(x, dx, base, b, w0, w1, w2):
    """dx ← R Ω̂ (Ṙ = R Ω̂) for the attitude at rows base … base + 8 of lane b, Ω = (w0, w1, w2)."""
    for r in range(3):
        r0, r1, r2 = x[base + 3 * r, b], x[base + 3 * r + 1, b], x[base + 3 * r + 2, b]
        # row r of R Ω̂, Ω̂ = [[0, −w2, w1], [w2, 0, −w0], [−w1, w0, 0]]
        dx[base + 3 * r, b] = r1 * w2 - r2 * w1
        dx[base + 3 * r + 1, b] = r2 * w0 - r0 * w2
        dx[base + 3 * r + 2, b] = r0 * w1 - r1 * w0


@lane_function
def no_potential(x, n, coef, topology, out):
    """V = 0 (a free body)."""
    for b in range(x.shape[1]):
        out[b] = 0.0


@lane_function
def no_torque(x, n, coef, topology, out):
    """M = 0 (a free body)."""
    for r in range(3 * n):
        for b in range(x.shape[1]):
            out[r, b] = 0.0


@inline_lane_function
def compensated_matrix6_row(coef, row, b, start, z0, z1, z2, z3, z4, z5):
    """start + one row (coefficient rows row … row + 5) of a 6×6 matrix times z, lane b, as if computed in
    twice the working precision and rounded once (lanes.compensated_dot6)."""
    return compensated_dot6(start, coef[row, b], coef[row + 1, b], coef[row + 2, b], coef[row + 3, b],
                            coef[row + 4, b], coef[row + 5, b], z0, z1, z2, z3, z4, z5)


@inline_lane_function
def compensated_matrix6_times(coef, k, b, s0, s1, s2, s3, s4, s5, z0, z1, z2, z3, z4, z5):
    """s + 𝕄z for the 6×6 matrix at coefficient rows k … k + 35, lane b, each component rounded once from
    twice the working precision: with s = −𝕄y an exact residual for iterative refinement."""
    return (compensated_matrix6_row(coef, k, b, s0, z0, z1, z2, z3, z4, z5),
            compensated_matrix6_row(coef, k + 6, b, s1, z0, z1, z2, z3, z4, z5),
            compensated_matrix6_row(coef, k + 12, b, s2, z0, z1, z2, z3, z4, z5),
            compensated_matrix6_row(coef, k + 18, b, s3, z0, z1, z2, z3, z4, z5),
            compensated_matrix6_row(coef, k + 24, b, s4, z0, z1, z2, z3, z4, z5),
            compensated_matrix6_row(coef, k + 30, b, s5, z0, z1, z2, z3, z4, z5))
