"""Models on SO(3)ⁿ: a :class:`~armillary.kernels.systems.rigid.RigidBodyDefinition` derived from a model file,
and what the SE(3)ⁿ builder (:mod:`.rigid_motion`) shares with it.

A model declares ``inertia(p)`` (each body's constant inertia tensor J_i, kg·m², body frame, about its fixed
point or centre of mass: three principal moments or a symmetric 3×3 tensor per body; a model of one body may
return its own alone), ``potential(R, p)`` (V, J; ``R[i][r, c]`` the entries of body i's attitude, body →
space) and optionally ``torque(t, R, Omega, p)`` (an applied torque τ_i per body, N·m, body frame, at time t
in s and body angular velocities Ω_i in rad/s: damping, actuation).

From these it derives the functions the built-ins of :mod:`~armillary.kernels.systems.rigid` carry, on the
flat state of :mod:`~armillary.kernels.spaces.rotation`: V, and the body torque of the potential
M_i = Σ_r ρ_r × γ_r (N·m), ρ_r and γ_r the rows r of R_i and of ∂V/∂R_i, which is δV = −Σ_i M_i·η_i for
R_i → R_i exp(η̂_i) (the moment of Lee, Leok & McClamroch's Lie group variational integrator, ``lgvi``, and
the M_i of Euler's J_i Ω̇_i = J_i Ω_i × Ω_i + M_i, Lee–Leok–McClamroch 2007 eqs. (5)–(6)); and J_i, from
which the coefficient header (J, J⁻¹, adj J, det J per body) is built before the model's parameters.

The methods' torque ``system_torque(x, n, coef, topology, out)`` sees the configuration alone (``lgvi``
evaluates it at R_{k+1} before Ω_{k+1} is known), so an applied torque, which may read t and Ω, acts through
the vector field instead: Euler's equations plus Ω̇_i += J_i⁻¹ τ_i (they are linear in the torque).  A model
with an applied torque is therefore stepped by the Runge–Kutta methods (its ``provides`` lacks ``torque``,
so ``lgvi`` refuses it by name); without one every SO(3)ⁿ method steps it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import sympy

from ..errors import InvalidInput
from ..spaces import ROTATION
from ..spaces.rotation import exp_right
from ..systems.rigid import HEADER, RigidBodyDefinition, euler_vector_field, inertia_header, inertia_times, rigid_energy
from .codegen import lane_function_source
from .loader import FIELD, ModelFile, free_of, scalar, square, vectors
from .symbolic import Matrix, Vector

SPACE = ROTATION
#: the lane functions' arguments on a flat space (the ABI of rigid.RigidBodyDefinition)
FLAT_ARGUMENTS = "x, n, coef, topology, out"


# ------------------------------------------------------------------------ symbols and their rows

def attitude_symbols(n: int) -> list:
    """The entries of each body's attitude as symbols, [i][r][c] = (R_i)_rc."""
    return [[[sympy.Symbol(f"R_{i}_{r}{c}", real=True) for c in range(3)] for r in range(3)] for i in range(n)]


def vector_symbols(n: int, letter: str) -> list:
    """One 3-vector of symbols per body, [i][k]."""
    return [[sympy.Symbol(f"{letter}_{i}_{k}", real=True) for k in range(3)] for i in range(n)]


def attitude_names(attitudes: list) -> dict:
    """Symbol → the flat state's row of it, lane b: (R_i)_rc in row 9i + 3r + c (both spaces)."""
    return {attitudes[i][r][c]: f"x[{9 * i + 3 * r + c}, b]" for i in range(len(attitudes))
            for r in range(3) for c in range(3)}


def vector_names(symbols: list, first: int) -> dict:
    """Symbol [i][k] → row first + 3i + k of the flat state, lane b."""
    return {symbols[i][k]: f"x[{first + 3 * i + k}, b]" for i in range(len(symbols)) for k in range(3)}


def coefficient_names(rows: dict, offset: int) -> dict:
    """Parameter symbol → its coefficient row after a header of ``offset`` rows, lane b."""
    return {symbol: f"coef[{offset + row}, b]" for symbol, row in rows.items()}


# ------------------------------------------------------------------------ derivation

def potential_moments(potential, attitudes: list) -> list:
    """M_i = Σ_r ρ_r × γ_r (N·m) for each body, ρ_r the rows of R_i and γ_r those of ∂V/∂R_i: the body torque
    of the potential, δV = −Σ_i M_i·η_i for R_i → R_i exp(η̂_i) (see the module docstring)."""
    moments = []
    for body in attitudes:
        gradient = [[sympy.diff(potential, body[r][c]) for c in range(3)] for r in range(3)]
        moments.append([sum((body[r][(k + 1) % 3] * gradient[r][(k + 2) % 3]
                             - body[r][(k + 2) % 3] * gradient[r][(k + 1) % 3] for r in range(3)), sympy.S.Zero)
                        for k in range(3)])
    return moments


def body_inertias(value, n: int, size: int, path: str) -> list:
    """inertia(p)'s value as n symmetric size × size sympy matrices: a list of one per body (each its diagonal
    or its matrix), or for one body that one alone."""
    items = list(value.rows) if isinstance(value, Matrix) else \
        list(value) if isinstance(value, (Vector, list, tuple, np.ndarray)) else None
    if items is not None and n == 1 and len(items) == size:
        items = [value]  # one body's own
    if items is None or len(items) != n:
        raise InvalidInput(FIELD, f"{path}: inertia(p) must return one inertia per body ({n}), each {size} principal "
                           f"values or a {size}×{size} matrix")
    return [square(item, size, path, "inertia(p)") for item in items]


def inertia_source(model: ModelFile, parameters, rows: dict, size: int) -> str:
    """The lane function ``inertia_values(coef, out)``: out[i, r, c, b] = (body i's inertia)_rc from the model's
    own coefficient rows (no header), lane b."""
    names = coefficient_names(rows, 0)
    inertias = body_inertias(model.call("inertia", parameters), model.bodies, size, model.path)
    free_of([entry for matrix in inertias for entry in matrix], set(names), model.path, "inertia(p)")
    return lane_function_source(
        "inertia_values", "coef, out", "coef.shape[1]", names,
        [(f"out[{i}, {r}, {c}, b]", matrix[r, c]) for i, matrix in enumerate(inertias)
         for r in range(size) for c in range(size)],
        "Each body's inertia (kg·m²; on SE(3) the 6×6 𝕄 in kg·m², kg·m, kg) from the model's parameter rows.")


def applied_loads_source(model: ModelFile, what: str, arguments: tuple, inputs: dict, width: int, doc: str) -> str:
    """The lane function ``applied_loads(t, x, n, coef, topology, out)`` of the model's function ``what`` called
    with ``arguments``: ``width`` loads per body into rows width·i … of ``out``, from ``inputs``."""
    n, path = model.bodies, model.path
    loads = vectors(model.call(what.split("(")[0], *arguments), n, width, path, what)
    free_of([value for body in loads for value in body], set(inputs), path, what)
    return lane_function_source("applied_loads", "t, " + FLAT_ARGUMENTS, "x.shape[1]", inputs,
                                [(f"out[{width * i + k}, b]", loads[i][k]) for i in range(n) for k in range(width)],
                                doc)


def derive(model: ModelFile, parameters, rows: dict) -> tuple[str, dict]:
    """The generated lane functions' text and what :func:`assemble` needs to know of them."""
    n, path = model.bodies, model.path
    attitudes = attitude_symbols(n)
    matrices = [Matrix(body) for body in attitudes]
    names = {**coefficient_names(rows, HEADER * n), **attitude_names(attitudes)}
    potential = scalar(model.call("potential", matrices, parameters), path, "potential(R, p)")
    free_of([potential], set(names), path, "potential(R, p)")
    moments = potential_moments(potential, attitudes)
    functions = [
        lane_function_source("potential", FLAT_ARGUMENTS, "x.shape[1]", names, [("out[b]", potential)],
                             "V (J) of the model."),
        lane_function_source("torque", FLAT_ARGUMENTS, "x.shape[1]", names,
                             [(f"out[{3 * i + k}, b]", moments[i][k]) for i in range(n) for k in range(3)],
                             "M_i = Σ_r ρ_r × γ_r (N·m, body frame): the torque of the potential."),
        inertia_source(model, parameters, rows, 3),
    ]
    applied = model.has("torque")
    if applied:
        omega = vector_symbols(n, "Omega")
        t = sympy.Symbol("t", real=True)
        inputs = {**names, **vector_names(omega, 9 * n), t: "t"}
        functions.append(applied_loads_source(model, "torque(t, R, Omega, p)",
                                              (t, matrices, [Vector(w) for w in omega], parameters), inputs, 3,
                                              "The model's applied torques τ_i (N·m, body frame) at time t (s)."))
    return "\n\n".join(functions), {"applied": applied}


# ------------------------------------------------------------------------ numbers of a bound system

def model_rows(layout, params: dict) -> np.ndarray:
    """(members, P): the model's parameter rows of values with or without a leading member axis."""
    members = max([np.shape(params[name])[0] for name, default in layout.defaults.items()
                   if np.ndim(params[name]) > default.ndim] or [1])
    return layout.coefficients({name: np.broadcast_to(np.asarray(params[name], dtype=np.float64),
                                                      (members,) + default.shape)
                                for name, default in layout.defaults.items()}, members)


def inertia_of_rows(module, rows: np.ndarray, n: int, size: int) -> np.ndarray:
    """(members, n, size, size): each body's inertia from the model's parameter rows (members, P)."""
    out = np.empty((n, size, size, rows.shape[0]))
    module.inertia_values(np.ascontiguousarray(rows.T), out)
    return np.moveaxis(out, -1, 0)


def refuse_indefinite(matrices: np.ndarray, path: str, where: str) -> None:
    """InvalidInput (one line, naming the body and, for several, the member) unless every inertia
    (members, n, size, size) is finite and positive definite (symmetric it is by its derivation)."""
    finite = np.all(np.isfinite(matrices), axis=(-2, -1))
    usable = np.where(finite[..., np.newaxis, np.newaxis], matrices, np.eye(matrices.shape[-1]))
    least = np.where(finite, np.linalg.eigvalsh(usable)[..., 0], np.nan)
    if np.all(least > 0):
        return
    member, body = np.unravel_index(np.argmin(np.where(least > 0, np.inf, np.nan_to_num(least, nan=-np.inf))),
                                    least.shape)
    whose = f"member {member}, " if matrices.shape[0] > 1 else ""
    raise InvalidInput(FIELD, f"{path}: inertia(p) of body {body} is not symmetric positive definite at {where} "
                       f"({whose}least eigenvalue {least[member, body]:.3g})")


@dataclass(frozen=True, kw_only=True)
class ModelRigidBodyDefinition(RigidBodyDefinition):
    """A rigid-body system (SO(3)ⁿ or SE(3)ⁿ) derived from a model file: the built-ins' lane functions, and
    the model's applied loads ``applied(t, x, n, coef, topology, out)`` (None without), which its vector field
    adds (bound as ``model_applied_loads``)."""

    applied: Any = None

    @property
    def lane_functions(self) -> dict:
        functions = super().lane_functions
        return functions if self.applied is None else {**functions, "model_applied_loads": self.applied}


def assemble_rigid(model: ModelFile, module, meta: dict, common: dict, *, space, size: int, header, capability: str,
                   templates: tuple, applied_templates: tuple) -> ModelRigidBodyDefinition:
    """The definition of a derived model on SO(3)ⁿ or SE(3)ⁿ: the coefficient header ``header`` of each body's
    inertia (members, n, size, size) before the model's rows, the inertia refused unless positive definite (at
    the defaults now, at a system's own values when it is bound), and with applied loads the
    ``applied_templates`` and no ``torque`` capability (see the module docstring)."""
    n, path, layout = model.bodies, model.path, model.layout
    refuse_indefinite(inertia_of_rows(module, model_rows(layout, layout.defaults), n, size), path,
                      "the default parameters")

    def coefficients(params, bodies):
        rows = model_rows(layout, params)
        return np.concatenate([header(inertia_of_rows(module, rows, n, size)), rows], axis=1)

    def check(params):
        refuse_indefinite(inertia_of_rows(module, model_rows(layout, params), n, size), path, "the given parameters")

    applied = meta["applied"]
    provides = frozenset({"potential", capability, "vector_field"} | (set() if applied else {"torque"}))
    return ModelRigidBodyDefinition(**{**common, "coefficients": coefficients}, potential=module.potential,
                                    torque=module.torque, space=space, provides=provides, check=check,
                                    templates=applied_templates if applied else templates,
                                    applied=module.applied_loads if applied else None)


def applied_euler_vector_field(x, n, coef, topology, t, dx, work):
    """Euler's equations (``potential_vector_field``: rigid.euler_vector_field) with the model's applied torques
    τ_i(t, R, Ω) added, Ω̇_i += J_i⁻¹ τ_i; ``work``'s first 3n rows take the torques."""
    potential_vector_field(x, n, coef, topology, t, dx, work)  # noqa: F821 (bound at specialisation)
    model_applied_loads(t, x, n, coef, topology, work)  # noqa: F821
    for i in range(n):
        w = 9 * n + 3 * i
        j = HEADER * i
        for b in range(x.shape[1]):
            a0, a1, a2 = inertia_times(coef, j + 9, b, work[3 * i, b], work[3 * i + 1, b], work[3 * i + 2, b])
            dx[w, b] += a0
            dx[w + 1, b] += a1
            dx[w + 2, b] += a2


def assemble(model: ModelFile, module, meta: dict, common: dict) -> ModelRigidBodyDefinition:
    """The system definition of a derived SO(3)ⁿ model; ``common`` holds what every space's model shares."""
    return assemble_rigid(model, module, meta, common, space=ROTATION, size=3, header=inertia_header,
                          capability="inertia", templates=None,
                          applied_templates=(("system_energy", rigid_energy),
                                             ("potential_vector_field", euler_vector_field),
                                             ("vector_field", applied_euler_vector_field)))


# ------------------------------------------------------------------------ checks at concrete states (.checks)

def lane_inputs(system, state: dict) -> tuple:
    """(x (rows, L), n, coef (P, L), topology) of states with a leading member axis, for the lane functions."""
    space = system.space
    n = space.body_count(state)
    x = space.flatten(state)
    coef = system.definition.coefficients(system.broadcast(x.shape[0], n), n)
    return np.ascontiguousarray(x.T), n, np.ascontiguousarray(coef.T), np.zeros(1, np.int64)


def evaluated(system, state: dict, loads: int, names: tuple) -> dict:
    """V, the loads of the potential (members, loads·n) and the applied loads at t = 0 (a model with them) at
    the states, under ``names`` (what the file calls the three)."""
    definition = system.definition
    x, n, coef, topology = lane_inputs(system, state)
    potential = np.empty(x.shape[1])
    definition.potential(x, n, coef, topology, potential)
    of_potential = np.empty((loads * n, x.shape[1]))
    definition.torque(x, n, coef, topology, of_potential)
    values = {names[0]: potential[:, np.newaxis], names[1]: of_potential.T}
    if definition.applied is not None:
        applied = np.empty((loads * n, x.shape[1]))
        definition.applied(0.0, x, n, coef, topology, applied)
        values[f"{names[2]} at t = 0"] = applied.T
    return values


def expressions(system, state: dict) -> dict:
    """Every derived expression at states ``state`` (R, Ω with a leading member axis)."""
    return evaluated(system, state, 3, ("potential(R, p)", "the torque of potential(R, p)", "torque(t, R, Omega, p)"))


def block_diagonal(matrices: np.ndarray) -> np.ndarray:
    """(members, n·s, n·s) with the bodies' (members, n, s, s) on its diagonal."""
    members, n, size = matrices.shape[:3]
    out = np.zeros((members, n * size, n * size))
    for i in range(n):
        out[:, i * size:(i + 1) * size, i * size:(i + 1) * size] = matrices[:, i]
    return out


def inertias(system, state: dict) -> dict:
    """The bodies' inertias as one block-diagonal matrix per member (members, 3n, 3n), under the file's name."""
    n = system.space.body_count(state)
    members = np.shape(state["R"])[0]
    header = system.definition.coefficients(system.broadcast(members, n), n)[:, :HEADER * n]
    return {"inertia(p)": block_diagonal(header.reshape(members, n, HEADER)[:, :, :9].reshape(members, n, 3, 3))}


def tangent_coordinates(system, state: dict, move, width: int):
    """(coordinates (members, width·n), V of coordinates, ∂V/∂coordinates) in a chart of the configuration at
    the states: coordinates c_i (width per body) move it to ``move(state, c)`` (members, n, width), which is the
    state at c = 0 with first derivative −(the loads of the potential), so ∂V/∂c at c = 0 is −torque (and −force).
    The gradient is that at c = 0, the coordinates returned (where :func:`.checks.gradient_error` takes it)."""
    state = {name: np.asarray(value, dtype=np.float64) for name, value in state.items()}
    members, n = np.shape(state["R"])[:2]
    definition = system.definition

    def potential(coordinates):
        x, _, coef, topology = lane_inputs(system, move(state, coordinates.reshape(members, n, width)))
        out = np.empty(members)
        definition.potential(x, n, coef, topology, out)
        return out

    x, _, coef, topology = lane_inputs(system, state)
    loads = np.empty((width * n, members))
    definition.torque(x, n, coef, topology, loads)
    return np.zeros((members, width * n)), potential, lambda coordinates: -loads.T


def potential_coordinates(system, state: dict):
    """V in rotation vectors ξ_i (rad, body frame) about the states, R_i exp(ξ̂_i), whose gradient at ξ = 0 is
    −M_i (:func:`tangent_coordinates`)."""
    return tangent_coordinates(system, state, lambda s, xi: {**s, "R": exp_right(s["R"], xi)}, 3)
