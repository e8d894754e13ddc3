"""Models on SE(3)ⁿ: a Kirchhoff-body definition (the ABI of :mod:`~armillary.kernels.systems.kirchhoff_body`)
derived from a model file.

A model declares ``inertia(p)`` (each body's constant, symmetric positive-definite 6×6 generalised inertia 𝕄_i
in the order (Ω, V) about its reference point O, body frame: rigid body plus the fluid's added mass, kg·m²,
kg·m, kg; its 6 diagonal values or the matrix; a model of one body may return its own alone),
``potential(R, x, p)`` (V, J; ``R[i][r, c]`` body i's attitude, ``x[i]`` the position of its O in space, m)
and optionally ``wrench(t, R, x, Omega, V, p)`` (applied loads per body, 6 values (τ, F): the torque about O,
N·m, and the force, N, both body frame, at time t in s and velocities Ω_i (rad/s), V_i (m/s)).

The loads of the potential are the generalised forces of Kirchhoff's equations along the left-invariant
velocities (Massa & Vignolo eq. (17), digest_002 §3.2): for R_i → R_i exp(η̂_i), x_i → x_i + R_i ζ_i,
δV = −Σ_i (τ_i·η_i + F_i·ζ_i), so τ_i = Σ_r ρ_r × γ_r (ρ_r, γ_r the rows of R_i and ∂V/∂R_i, as on SO(3):
:func:`.rotation.potential_moments`) and F_i = −R_iᵀ ∂V/∂x_i.  With 𝕄_i they are what every SE(3)ⁿ method
binds: ``lgvi`` and the formulations of the Runge–Kutta methods read the loads (rows 6i … 6i + 5 of
``system_torque``'s output) and the header of 𝕄_i and 𝕄_i⁻¹ (:func:`~armillary.kernels.systems.rigid.motion_header`),
before the model's parameter rows.  Applied loads may read t and the velocities, which the methods' loads do
not see, so they act through Kirchhoff's vector field, (Ω̇_i, V̇_i) += 𝕄_i⁻¹(τ_i, F_i) (the equations are linear in
the loads); such a model is stepped by the Runge–Kutta methods in Kirchhoff's formulation (``lgvi`` and the other
formulations need the ``torque`` capability, which it then lacks).
"""

from __future__ import annotations

import numpy as np
import sympy

from ..spaces import RIGID_MOTION
from ..spaces.rotation import exp_right
from ..systems.kirchhoff_body import kirchhoff_energy, kirchhoff_vector_field
from ..systems.rigid import INVERSE6, MOTION_HEADER, body_loads, matrix6_times, motion_header
from .codegen import lane_function_source
from .loader import ModelFile, free_of, scalar
from .rotation import (FLAT_ARGUMENTS, ModelRigidBodyDefinition, applied_loads_source, assemble_rigid,
                       attitude_names, attitude_symbols, block_diagonal, coefficient_names, evaluated, inertia_source, potential_moments,
                       tangent_coordinates, vector_names, vector_symbols)
from .symbolic import Matrix, Vector

SPACE = RIGID_MOTION


def derive(model: ModelFile, parameters, rows: dict) -> tuple[str, dict]:
    """The generated lane functions' text and what :func:`assemble` needs to know of them."""
    n, path = model.bodies, model.path
    attitudes, positions = attitude_symbols(n), vector_symbols(n, "x")
    matrices, points = [Matrix(body) for body in attitudes], [Vector(p) for p in positions]
    names = {**coefficient_names(rows, MOTION_HEADER * n), **attitude_names(attitudes),
             **vector_names(positions, 9 * n)}
    potential = scalar(model.call("potential", matrices, points, parameters), path, "potential(R, x, p)")
    free_of([potential], set(names), path, "potential(R, x, p)")
    torques = potential_moments(potential, attitudes)
    forces = [[-sum((attitudes[i][r][k] * sympy.diff(potential, positions[i][r]) for r in range(3)), sympy.S.Zero)
               for k in range(3)] for i in range(n)]
    functions = [
        lane_function_source("potential", FLAT_ARGUMENTS, "x.shape[1]", names, [("out[b]", potential)],
                             "V (J) of the model."),
        lane_function_source("torque", FLAT_ARGUMENTS, "x.shape[1]", names,
                             [(f"out[{6 * i + k}, b]", torques[i][k]) for i in range(n) for k in range(3)]
                             + [(f"out[{6 * i + 3 + k}, b]", forces[i][k]) for i in range(n) for k in range(3)],
                             "The loads of the potential, body frame: τ_i = Σ_r ρ_r × γ_r about O (N·m, rows 6i … "
                             "6i + 2) and F_i = −R_iᵀ ∂V/∂x_i (N, rows 6i + 3 … 6i + 5)."),
        inertia_source(model, parameters, rows, 6),
    ]
    applied = model.has("wrench")
    if applied:
        omega, velocity = vector_symbols(n, "Omega"), vector_symbols(n, "V")
        t = sympy.Symbol("t", real=True)
        inputs = {**names, **vector_names(omega, 12 * n), **vector_names(velocity, 15 * n), t: "t"}
        functions.append(applied_loads_source(
            model, "wrench(t, R, x, Omega, V, p)",
            (t, matrices, points, [Vector(w) for w in omega], [Vector(v) for v in velocity], parameters), inputs, 6,
            "The model's applied torques about O (N·m) and forces (N), body frame, at time t (s)."))
    return "\n\n".join(functions), {"applied": applied}


def applied_kirchhoff_vector_field(x, n, coef, topology, t, dx, work):
    """Kirchhoff's equations (``potential_vector_field``: kirchhoff_body.kirchhoff_vector_field) with the model's
    applied loads (τ_i, F_i)(t, R, x, Ω, V) added, (Ω̇_i, V̇_i) += 𝕄_i⁻¹(τ_i, F_i); ``work``'s first 6n rows take
    the loads."""
    potential_vector_field(x, n, coef, topology, t, dx, work)  # noqa: F821 (bound at specialisation)
    model_applied_loads(t, x, n, coef, topology, work)  # noqa: F821
    for i in range(n):
        w = 12 * n + 3 * i
        v = 15 * n + 3 * i
        k = MOTION_HEADER * i + INVERSE6
        for b in range(x.shape[1]):
            a0, a1, a2, f0, f1, f2 = body_loads(work, i, b)
            d0, d1, d2, d3, d4, d5 = matrix6_times(coef, k, b, a0, a1, a2, f0, f1, f2)
            dx[w, b] += d0
            dx[w + 1, b] += d1
            dx[w + 2, b] += d2
            dx[v, b] += d3
            dx[v + 1, b] += d4
            dx[v + 2, b] += d5


def assemble(model: ModelFile, module, meta: dict, common: dict) -> ModelRigidBodyDefinition:
    """The system definition of a derived SE(3)ⁿ model; ``common`` holds what every space's model shares."""
    energy = ("system_energy", kirchhoff_energy)
    return assemble_rigid(model, module, meta, common, space=RIGID_MOTION, size=6, header=motion_header,
                          capability="inertia6", templates=(energy, ("vector_field", kirchhoff_vector_field)),
                          applied_templates=(energy, ("potential_vector_field", kirchhoff_vector_field),
                                             ("vector_field", applied_kirchhoff_vector_field)))


# ------------------------------------------------------------------------ checks at concrete states (.checks)

def expressions(system, state: dict) -> dict:
    """Every derived expression at states ``state`` (R, x, Ω, V with a leading member axis)."""
    return evaluated(system, state, 6, ("potential(R, x, p)", "the torque and force of potential(R, x, p)",
                                        "wrench(t, R, x, Omega, V, p)"))


def inertias(system, state: dict) -> dict:
    """The bodies' 𝕄_i as one block-diagonal matrix per member (members, 6n, 6n), under the file's name."""
    n = system.space.body_count(state)
    members = np.shape(state["R"])[0]
    header = system.definition.coefficients(system.broadcast(members, n), n)[:, :MOTION_HEADER * n]
    return {"inertia(p)": block_diagonal(header.reshape(members, n, MOTION_HEADER)[:, :, :36]
                                         .reshape(members, n, 6, 6))}


def _moved(state: dict, coordinates: np.ndarray) -> dict:
    """R_i exp(ξ̂_i) and x_i + R_i ζ_i for coordinates (members, n, 6) = (ξ_i (rad), ζ_i (m), body frame)."""
    rotations = state["R"]
    return {**state, "R": exp_right(rotations, coordinates[..., :3]),
            "x": state["x"] + np.einsum("...ij,...j->...i", rotations, coordinates[..., 3:])}


def potential_coordinates(system, state: dict):
    """V in (ξ_i, ζ_i) about the states (R_i exp(ξ̂_i), x_i + R_i ζ_i), whose gradient at 0 is −(τ_i, F_i)
    (:func:`.rotation.tangent_coordinates`)."""
    return tangent_coordinates(system, state, _moved, 6)
