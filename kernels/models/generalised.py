"""Models in joint coordinates: a flat system on the ``generalised`` space derived from a model file.

A model declares ``coordinates = n``, ``mass_matrix(q, p)`` (M(q) of T = ½ uᵀ M(q) u, u = q̇: kg, kg·m or
kg·m² by the coordinates' units; symmetric positive definite), ``potential(q, p)`` (V, J) and optionally
``generalised_force(t, q, u, p)`` (Q, n values: N on a travel, N·m on an angle; damping, actuation).
``q[a]`` and ``u[a]`` are coordinate a and its rate.

From these it derives Lagrange's equations in the form of Kane's (Parsa, digest_003 eq. (34)),

    M(q) u̇ = f − h,   (f − h)_a = ½ uᵀ ∂M/∂q_a u − Σ_k (∂M/∂q_k u)_a u_k − ∂V/∂q_a + Q_a,

the second and third terms together the Christoffel terms −Σ_bc Γ_abc u_b u_c of the first kind; and Lagrange's
ṗ = ∂T/∂q − ∂V/∂q + Q for p = M(q) u, which the canonical implicit ``midpoint`` steps (Hairer, Lubich & Wanner,
GNI §VI.3).  The generated lane functions have the ABI of :mod:`~armillary.kernels.systems.kane` (M(q) into an
(n, n, L) array, ṗ into (n, L), E = ½ uᵀ M u + V), so every method of the space runs the model: the
Runge–Kutta methods through the vector field (M⁻¹ by Cholesky per lane, as the built-in trees), and the
``midpoint`` when Q does not read t (its canonical force is autonomous).  Its Newton matrix comes from the
same generated code run on complex numbers (complex-step derivatives), so no second derivatives are derived.

Coordinates are flat (an angle or a travel each; no quaternions): the space's retraction is addition.  An
optional ``coordinate_names`` list labels them in stores.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import sympy

from ..errors import InvalidInput
from ..lanes import cholesky_solve_in_lanes, lane_function
from ..spaces import GENERALISED
from ..systems.base import FlatSystemDefinition
from .codegen import lane_function_source
from .loader import FIELD, ModelFile, free_of, scalar, square
from .rotation import coefficient_names, lane_inputs
from .symbolic import Vector

SPACE = GENERALISED
#: the lane functions' arguments (the ABI of kane.py's kane_mass_into and kane_canonical_force_into)
ARGUMENTS = "x, n, coef, topology"


def _coordinate_vectors(model: ModelFile) -> tuple[list, list, dict]:
    """(q, u, names): symbols of the coordinates and their rates, and their rows of the flat state, lane b."""
    n = model.bodies
    q = [sympy.Symbol(f"q_{a}", real=True) for a in range(n)]
    u = [sympy.Symbol(f"u_{a}", real=True) for a in range(n)]
    return q, u, {**{q[a]: f"x[{a}, b]" for a in range(n)}, **{u[a]: f"x[{n + a}, b]" for a in range(n)}}


def _generalised_force(model: ModelFile, t, q, u, parameters, allowed: set) -> list:
    """Q of ``generalised_force(t, q, u, p)``: n expressions (zeros without the function)."""
    n, path, what = model.bodies, model.path, "generalised_force(t, q, u, p)"
    if not model.has("generalised_force"):
        return [sympy.S.Zero] * n
    value = model.call("generalised_force", t, Vector(q), Vector(u), parameters)
    items = list(value) if isinstance(value, (Vector, list, tuple, np.ndarray)) else [value] if n == 1 else None
    if items is None or len(items) != n:
        raise InvalidInput(FIELD, f"{path}: {what} must return {n} values, one per coordinate")
    forces = [scalar(item, path, what) for item in items]
    free_of(forces, allowed, path, what)
    return forces


def derive(model: ModelFile, parameters, rows: dict) -> tuple[str, dict]:
    """The generated lane functions' text and what :func:`assemble` needs to know of them."""
    n, path = model.bodies, model.path
    q, u, state_names = _coordinate_vectors(model)
    t = sympy.Symbol("t", real=True)
    names = {**coefficient_names(rows, 0), **state_names}
    configuration = set(coefficient_names(rows, 0)) | set(q)
    potential = scalar(model.call("potential", Vector(q), parameters), path, "potential(q, p)")
    free_of([potential], configuration, path, "potential(q, p)")
    mass = square(model.call("mass_matrix", Vector(q), parameters), n, path, "mass_matrix(q, p)")
    free_of(mass, configuration, path, "mass_matrix(q, p)")
    mass = sympy.Matrix(n, n, lambda a, c: mass[min(a, c), max(a, c)])  # one expression per pair: M is symmetric
    forces = _generalised_force(model, t, q, u, parameters, set(names) | {t})
    gradient = [sympy.diff(potential, q[a]) for a in range(n)]
    rates = [mass.diff(q[k]) for k in range(n)]  # ∂M/∂q_k
    kinetic_gradient = [sum((rates[a][b, c] * u[b] * u[c] for b in range(n) for c in range(n)), sympy.S.Zero) / 2
                        for a in range(n)]  # ∂T/∂q_a
    canonical = [kinetic_gradient[a] - gradient[a] + forces[a] for a in range(n)]
    accelerating = [canonical[a] - sum((rates[k][a, b] * u[k] * u[b] for k in range(n) for b in range(n)),
                                       sympy.S.Zero) for a in range(n)]  # − Ṁ u
    kinetic = sum((u[a] * mass[a, c] * u[c] for a in range(n) for c in range(n)), sympy.S.Zero) / 2

    def mass_outputs(array: str) -> list:
        return [(f"{array}[{a}, {c}, b]", mass[a, c]) for a in range(n) for c in range(n)]

    autonomous = t not in set().union(*(force.free_symbols for force in forces))
    functions = [
        lane_function_source("potential", ARGUMENTS + ", out", "x.shape[1]", names, [("out[b]", potential)],
                             "V (J) of the model."),
        lane_function_source("potential_gradient", ARGUMENTS + ", out", "x.shape[1]", names,
                             [(f"out[{a}, b]", gradient[a]) for a in range(n)], "∂V/∂q of the model."),
        lane_function_source("energy", ARGUMENTS + ", work, out", "x.shape[1]", names, [("out[b]", kinetic + potential)],
                             "E = ½ uᵀ M(q) u + V(q) (J)."),
        lane_function_source("mass_into", ARGUMENTS + ", work, out", "x.shape[1]", names, mass_outputs("out"),
                             "out (n, n, L) ← M(q) at the coordinates of x (any float or complex dtype)."),
        lane_function_source("dynamics_into", "t, " + ARGUMENTS + ", mass, rhs", "x.shape[1]", {**names, t: "t"},
                             mass_outputs("mass") + [(f"rhs[{a}, b]", accelerating[a]) for a in range(n)],
                             "mass (n, n, L) ← M(q) and rhs (n, L) ← f − h at time t (s): M u̇ = f − h."),
        lane_function_source("generalised_force_into", "t, " + ARGUMENTS + ", out", "x.shape[1]", {**names, t: "t"},
                             [(f"out[{a}, b]", forces[a]) for a in range(n)], "Q (the model's generalised force)."),
    ]
    if autonomous:
        functions.append(lane_function_source(
            "canonical_force_into", ARGUMENTS + ", work, out", "x.shape[1]", names,
            [(f"out[{a}, b]", canonical[a]) for a in range(n)],
            "out (n, L) ← ṗ = ∂T/∂q − ∂V/∂q + Q at (q, u) of x (any float or complex dtype)."))
    labels = model.namespace.get("coordinate_names")
    if labels is not None and (not isinstance(labels, (list, tuple)) or len(labels) != n
                               or not all(isinstance(label, str) and label for label in labels)
                               or len(set(labels)) != n):
        raise InvalidInput(FIELD, f"{path}: coordinate_names must be {n} different non-empty strings, got {labels!r}")
    return "\n\n".join(functions), {"autonomous": autonomous, "labels": list(labels or ())}


# ------------------------------------------------------------------------ the definition

@lane_function
def model_field_work(rows, n, lanes):
    """The vector field's work: M (n, n, L) and f − h (n, L), allocated once per block by the methods."""
    return np.empty((n, n, lanes)), np.empty((n, lanes))


@lane_function
def model_system_work(n, lanes, zero):
    """The midpoint's system work (of ``zero``'s dtype): the generated functions need none."""
    return np.full((1, lanes), zero)


def model_vector_field(x, n, coef, topology, t, dx, work):
    """dx = (u, M(q)⁻¹(f − h)) at time t (s): Lagrange's equations solved for u̇ by Cholesky per lane."""
    mass, rhs = work
    model_dynamics_into(t, x, n, coef, topology, mass, rhs)  # noqa: F821 (bound at specialisation)
    cholesky_solve_in_lanes(mass, rhs)
    for a in range(n):
        for b in range(x.shape[1]):
            dx[a, b] = x[n + a, b]
            dx[n + a, b] = rhs[a, b]


@dataclass(frozen=True, kw_only=True)
class ModelGeneralisedDefinition(FlatSystemDefinition):
    """A system in joint coordinates derived from a model file (see the module docstring); ``module`` is
    its generated lane functions, ``labels`` its coordinates' names (none: numbered)."""

    module: Any
    labels: tuple = ()

    def dimension_labels(self, params: dict, n: int) -> dict:
        return {"coordinate": list(self.labels)} if self.labels else {}

    @property
    def lane_functions(self) -> dict:
        functions = {"system_energy": self.module.energy, "system_mass_into": self.module.mass_into,
                     "system_work": model_system_work, "model_dynamics_into": self.module.dynamics_into,
                     "vector_field_work": model_field_work}
        if "canonical" in self.provides:
            functions["system_canonical_force_into"] = self.module.canonical_force_into
        return functions

    @property
    def lane_templates(self) -> tuple:
        return (("vector_field", model_vector_field),)


def assemble(model: ModelFile, module, meta: dict, common: dict) -> ModelGeneralisedDefinition:
    """The system definition of a derived model in joint coordinates; ``common`` holds what every space's
    model shares.  Without ``canonical`` (a time-dependent Q) the midpoint refuses it by name."""
    provides = frozenset({"vector_field"} | ({"canonical"} if meta["autonomous"] else set()))
    return ModelGeneralisedDefinition(**common, space=GENERALISED, provides=provides, module=module,
                                      labels=tuple(meta["labels"]))


# ------------------------------------------------------------------------ checks at concrete states (.checks)

def _evaluate(system, state: dict, shape: tuple, call) -> np.ndarray:
    """``call(x, n, coef, topology, out)``'s output (members, *shape) at states with a leading member axis."""
    x, n, coef, topology = lane_inputs(system, state)
    out = np.empty(shape + (x.shape[1],))
    call(x, n, coef, topology, out)
    return np.moveaxis(out, -1, 0)


def _mass(system, state: dict) -> np.ndarray:
    """M(q) (members, n, n) at the states."""
    n = np.shape(state["q"])[-1]
    mass_into = system.definition.module.mass_into
    return _evaluate(system, state, (n, n), lambda x, n, coef, topology, out: mass_into(x, n, coef, topology, None,
                                                                                          out))


def expressions(system, state: dict) -> dict:
    """Every derived expression at states {"q", "u"} (members, n): V, M and Q at t = 0."""
    module, n = system.definition.module, np.shape(state["q"])[-1]
    return {"potential(q, p)": _evaluate(system, state, (), module.potential)[:, np.newaxis],
            "mass_matrix(q, p)": _mass(system, state),
            "generalised_force(t, q, u, p) at t = 0": _evaluate(
                system, state, (n,), lambda *arguments: module.generalised_force_into(0.0, *arguments))}


def inertias(system, state: dict) -> dict:
    """M(q) (members, n, n) at the states, under the file's name."""
    return {"mass_matrix(q, p)": _mass(system, state)}


def potential_coordinates(system, state: dict):
    """(q (members, n), V of q, ∂V/∂q of q): the coordinates are the chart (:func:`.checks.gradient_error`)."""
    module, q = system.definition.module, np.asarray(state["q"], dtype=np.float64)

    def at(coordinates):
        return {**state, "q": coordinates}

    return (q, lambda coordinates: _evaluate(system, at(coordinates), (), module.potential),
            lambda coordinates: _evaluate(system, at(coordinates), (q.shape[-1],), module.potential_gradient))
