"""Models on (S²)ⁿ: a :class:`~armillary.kernels.systems.base.SystemDefinition` derived from a model file.

From ``inertia(p)`` or ``inertia(q, p)`` (the M_ij of T = ½ Σ_ij M_ij q̇_i·q̇_j: Lee–Leok–McClamroch
eq. (1), or its configuration-dependent m_ij(q) of eq. (12)), ``potential(q, p)`` and the optional moments
``force(t, q, omega, p)`` (the g_i of eq. (10)), this derives what every (S²)ⁿ method binds: V and ∂V/∂q
(eqs. (9), (10)), ∂g/∂ω for the implicit methods' Newton matrix, m_ij(q) and ∂m_ij/∂q_k.  A model that
defines ``pair_potential(r, p)`` of the chord r instead is a pair system (the neighbour lists of
:mod:`armillary.kernels.neighbours`): φ(r) − φ(r_c) inside the cutoff r_c (parameter ``cutoff``), 0 beyond,
as ``sphere_lj`` shifts its energy.  One that defines ``pair_potential(r, p, a, b)`` is a typed pair system: a and
b are the two particles' data (``a.sigma`` (m), ``a.epsilon`` (J), ``a.mass`` (kg) of its type, ``a.diameter`` (m)
its own), laid out by sphere_mixture's parameters (``types``, ``composition``, ``polydispersity``, …), each
particle's mass its type's, every pair's φ_ab shifted at the one cutoff r_c.
"""

from __future__ import annotations

import dataclasses
import inspect

import numpy as np
import sympy

from ..errors import InvalidInput
from ..spaces import SPHERE_PRODUCT
from ..systems import sphere_mixture
from ..systems.base import PairPotential, System, SystemDefinition, all_pairs
from .codegen import divisions, hoist_constants, lane_function_source, print_expression, straight_line
from .loader import FIELD, LAYOUT_PARAMETERS, ModelFile, ParticleData, free_of, scalar, square, vectors
from .rotation import model_rows
from .symbolic import Vector

SPACE = SPHERE_PRODUCT
#: Verlet skin of a pair model's neighbour list, as a fraction of its cutoff (LAMMPS' 0.3σ at r_c = 2.5σ)
SKIN_FRACTION = 0.12
#: what a typed pair potential's ``a`` and ``b`` give of their type: σ (m), ε (J) and mass (kg), the columns of the
#: layout rows' type table in this order, by their positions in sphere_mixture's parse_types entries
TYPE_POSITIONS = {"sigma": 1, "epsilon": 2, "mass": 3}
#: what ``a`` and ``b`` give: their type's data and their own diameter (m, chord)
PARTICLE_ATTRIBUTES = (*TYPE_POSITIONS, "diameter")
#: what the store keeps of a typed pair model's particles (sphere_mixture's entries for them)
BODY_PROPERTIES = {name: sphere_mixture.BODY_PROPERTIES[name] for name in ("particle_type", "diameter", "mass")}


def _state_symbols(n: int, letter: str) -> list[list]:
    return [[sympy.Symbol(f"{letter}_{i}_{k}", real=True) for k in range(3)] for i in range(n)]


def derive(model: ModelFile, parameters, rows: dict) -> tuple[str, dict]:
    """The generated lane functions' text and what the builder needs to know of them."""
    coef = {symbol: f"coef[{row}, b]" for symbol, row in rows.items()}
    if model.has("pair_potential"):
        return _derive_pair(model, parameters, coef)
    n, path = model.bodies, model.path
    q = _state_symbols(n, "q")
    q_names = {q[i][k]: f"q[{i}, {k}, b]" for i in range(n) for k in range(3)}
    q_vectors = [Vector(row) for row in q]
    flat_q = [x for row in q for x in row]
    allowed = set(coef) | set(flat_q)
    potential = scalar(model.call("potential", q_vectors, parameters), path, "potential(q, p)")
    free_of([potential], allowed, path, "potential(q, p)")
    functions = [lane_function_source("potential", "q, coef, topology, out", "q.shape[2]", {**coef, **q_names},
                                      [("out[b]", potential)], "V (J) of the model."),
                 lane_function_source("gradient", "q, coef, topology, out", "q.shape[2]", {**coef, **q_names},
                                      [(f"out[{i}, {k}, b]", sympy.diff(potential, q[i][k]))
                                       for i in range(n) for k in range(3)], "∂V/∂q (J) of the model.")]
    configuration = model.arity("inertia") == 2
    arguments = (q_vectors, parameters) if configuration else (parameters,)
    inertia = square(model.call("inertia", *arguments), n, path, "inertia(q, p)" if configuration else "inertia(p)")
    free_of(inertia, allowed if configuration else set(coef), path, "inertia")
    # is_zero: sympy's Float(0.0) == 0 is False, and a user may write 0.0 off the diagonal
    diagonal = not configuration and all(inertia[i, j].is_zero for i in range(n) for j in range(n) if i != j)
    if configuration:
        functions.append(lane_function_source(
            "configuration_inertia", "q, coef, topology, out", "q.shape[2]", {**coef, **q_names},
            [(f"out[{j}, {k}, b]", inertia[j, k]) for j in range(n) for k in range(n)], "m_jk(q) (kg·m²)."))
        functions.append(lane_function_source(
            "configuration_inertia_gradient", "q, coef, topology, out", "q.shape[2]", {**coef, **q_names},
            [(f"out[{j}, {k}, {i}, {a}, b]", sympy.diff(inertia[j, k], q[i][a]))
             for j in range(n) for k in range(n) for i in range(n) for a in range(3)], "∂m_jk/∂q_i (kg·m²)."))
    else:
        functions.append(lane_function_source(
            "inertia_values", "coef, out", "coef.shape[1]", coef,
            [(f"out[{j}, {k}, b]", inertia[j, k]) for j in range(n) for k in range(n)], "M_jk (kg·m²) per lane."))
    forced = model.has("force")
    if forced:
        omega = _state_symbols(n, "w")
        t = sympy.Symbol("t", real=True)
        names = {**coef, **q_names, **{omega[i][k]: f"omega[{i}, {k}, b]" for i in range(n) for k in range(3)},
                 t: "t"}
        moments = vectors(model.call("force", t, q_vectors, [Vector(row) for row in omega], parameters), n, 3, path,
                          "force(t, q, omega, p)")
        flat = [g for row in moments for g in row]
        free_of(flat, set(names), path, "force(t, q, omega, p)")
        damping = [(f"out[{3 * i + r}, {3 * j + c}, b]", sympy.diff(moments[i][r], omega[j][c]))
                   for i in range(n) for r in range(3) for j in range(n) for c in range(3)]
        damping = [(target, value) for target, value in damping if not value.is_zero]
        omega_symbols = {w for row in omega for w in row}
        if any(value.free_symbols & omega_symbols for _, value in damping):
            raise InvalidInput(FIELD, f"{path}: force(t, q, omega, p) must be affine in omega (the implicit "
                               "methods' Newton matrix takes ∂g/∂ω at q alone)")
        functions.append(lane_function_source(
            "force", "t, q, omega, coef, topology, out", "q.shape[2]", names,
            [(f"out[{i}, {k}, b]", moments[i][k]) for i in range(n) for k in range(3)],
            "The moments g_i (N·m) of the model's forces at time t (s)."))
        scale = sympy.Symbol("scale", real=True)
        functions.append(lane_function_source(
            "force_damping", "q, coef, topology, scale, out", "q.shape[2]", {**coef, **q_names, scale: "scale"},
            [(target, scale * value) for target, value in damping], "out += scale · ∂g/∂ω (N·m·s).", assign="+="))
    # what switches the forces on: their expressions and the rows of the parameters they read
    switches = {"expressions": [sympy.srepr(g) for g in flat],
                "rows": {str(symbol): row for symbol, row in rows.items() if any(symbol in g.free_symbols
                                                                                 for g in flat)}} if forced else None
    return "\n\n".join(functions), {"diagonal": diagonal, "configuration": configuration, "forced": forced,
                                    "pair": False, "switches": switches}


def _derive_pair(model: ModelFile, parameters, coef: dict) -> tuple[str, dict]:
    """A pair model's φ(r) − φ(r_c) and φ'(r)/r as functions of the chord² r2, printed for speed per pair: in
    r2 or in its inverse w = 1/r2, whichever divides less (Lennard-Jones: one division, the powers of w
    products), and their parameter-only parts (4ε, σ⁶, σ¹², φ(r_c), r_c²) hoisted into ``pair_constants``,
    coefficient rows after the model's own that a member computes once, as the built-in sphere_lj does.  A typed
    pair model's φ_ab(r) also reads the two particles' type data: each function first loads what it takes of them
    from the layout rows after the constants (:func:`particle_rows`), and a part that reads them is computed per
    pair (never hoisted)."""
    path = model.path
    if "cutoff" not in model.layout.defaults or model.layout.defaults["cutoff"].shape != ():
        raise InvalidInput(FIELD, f"{path}: a pair_potential model needs a number parameter 'cutoff' (m, chord)")
    r2, w = sympy.Symbol("r2", positive=True), sympy.Symbol("w", positive=True)
    r = sympy.Symbol("r", positive=True)
    typed = model.typed_pairs
    particles = {index: {attribute: sympy.Symbol(f"{attribute}_{index}", real=True) for attribute in
                         PARTICLE_ATTRIBUTES} for index in "ij"} if typed else {}  # named as the locals that hold them
    particle_symbols = {symbol for symbols in particles.values() for symbol in symbols.values()}
    labels = list(inspect.signature(model.function("pair_potential")).parameters)[2:]
    particle_data = [ParticleData(symbols, label) for symbols, label in zip(particles.values(), labels)]
    what = "pair_potential(r, p, a, b)" if typed else "pair_potential(r, p)"
    phi = scalar(model.call("pair_potential", r, parameters, *particle_data), path, what)
    free_of([phi], set(coef) | {r} | particle_symbols, path, what)
    if typed:  # the runners take each pair once, in either order
        swapped = phi.xreplace({particles[index][attribute]: particles[other][attribute]
                                for index, other in ("ij", "ji") for attribute in PARTICLE_ATTRIBUTES})
        if swapped != phi and not sympy.expand(phi - swapped).is_zero:
            raise InvalidInput(FIELD, f"{path}: {what} must be symmetric in a and b (φ_ab = φ_ba)")
    cutoff = parameters.cutoff
    energy = (phi - phi.subs(r, cutoff)).subs(r, sympy.sqrt(r2))
    # φ'(r)/r = 2 dφ/d(r²): differentiated in r² itself, so that even powers of r take no square root (the
    # chain rule in r left (…/r¹³ + …/r⁷)/r, i.e. three √r2 and as many divisions per pair for Lennard-Jones)
    factor = 2 * sympy.diff(phi.subs(r, sympy.sqrt(r2)), r2)
    inverted = [expr.subs(r2, 1 / w) for expr in (energy, factor)]
    use_inverse = sum(map(divisions, inverted)) + 1 < divisions(energy) + divisions(factor)
    expressions = inverted if use_inverse else [energy, factor]
    (energy, factor, reach), constants = hoist_constants(expressions + [cutoff * cutoff], {w, r2} | particle_symbols)
    if not typed:
        mass = square(model.call("inertia", parameters), 1, path, "inertia(p)")[0, 0]
        free_of([mass], set(coef), path, "inertia(p)")
    first = len(coef)  # the constants' rows follow the model's
    names = {**coef, **{symbol: f"coef[{first + k}, b]" for k, (symbol, _) in enumerate(constants)}, r2: "r2",
             w: "w", **{symbol: str(symbol) for symbol in particle_symbols}}

    def pair_function(name, expr, doc):
        body = straight_line([("value", expr)], names, " " * 4)
        # computed, then selected: no branch in the neighbour loop (a value beyond the cutoff is discarded)
        return "\n".join(["@lane_function", f"def {name}(r2, coef, b, i, j):", f'    """{doc}"""',
                          *_particle_loads(expr, particles, first + len(constants)),
                          *(["    w = 1.0 / r2"] if use_inverse else []), *body,
                          f"    return value if r2 < {print_expression(reach, names)} else 0.0"]) + "\n"

    pair = "_ab" if typed else ""  # a typed φ is that of the two particles' data a and b
    functions = [
        pair_function("pair_energy", energy,
                      f"φ{pair}(r) − φ{pair}(r_c) (J) of a chord² r2 < r_c², else 0; lane b of coef."),
        pair_function("pair_gradient_factor", factor,
                      f"φ{pair}'(r)/r (J/m²) for r2 < r_c², else 0: ∂V/∂q_i = Σ_j g (q_i − q_j)."),
        lane_function_source("pair_constants", "coef, out", "coef.shape[1]", coef,
                             [(f"out[{k}, b]", value) for k, (_, value) in enumerate(constants)],
                             "The pair functions' parameter-only parts, one row each, per lane."),
    ]
    if not typed:
        functions.append(lane_function_source("inertia_values", "coef, out", "coef.shape[1]", coef,
                                              [("out[0, 0, b]", mass)],
                                              "Each particle's mass (kg; M_ii on the unit sphere, kg·m²)."))
    return "\n\n".join(functions), {"diagonal": True, "configuration": False, "forced": False, "pair": True,
                                     "constants": len(constants), "typed": typed}


def _particle_loads(expr, particles: dict, first: int) -> list[str]:
    """The lines with which a typed pair function reads what ``expr`` takes of particles i and j (ids) from the
    layout rows that begin at row ``first`` (:func:`particle_rows`): each one's row of the type table by its type
    id, then the columns of it and the diameter that ``expr`` uses; none for a plain pair model."""
    used = {index: [attribute for attribute, symbol in symbols.items() if symbol in expr.free_symbols]
            for index, symbols in particles.items()}
    read = {attribute for attributes in used.values() for attribute in attributes}
    lines = [f"first_id = {first + 2} + {len(TYPE_POSITIONS)} * int(coef[{first}, b])"] if read else []
    if "diameter" in read:
        lines.append(f"first_diameter = first_id + int(coef[{first + 1}, b])")
    for index, attributes in used.items():
        if set(attributes) & set(TYPE_POSITIONS):
            lines.append(f"row_{index} = {first + 2} + {len(TYPE_POSITIONS)} * int(coef[first_id + {index}, b])")
        for attribute in attributes:
            column = list(TYPE_POSITIONS).index(attribute) if attribute in TYPE_POSITIONS else None
            lines.append(f"{attribute}_{index} = coef[first_diameter + {index}, b]" if column is None else
                         f"{attribute}_{index} = coef[row_{index}{f' + {column}' if column else ''}, b]")
    return ["    " + line for line in lines]


def particle_rows(types: tuple, ids: np.ndarray, diameters: np.ndarray) -> np.ndarray:
    """A typed pair model's layout rows, (members, 2 + 3K + 2n): [K | n | the type table (K × 3: each type's σ (m),
    ε (J) and mass (kg)) | each particle's type id | its diameter (m)], of ``types`` (sphere_mixture's parse_types
    entries), the type ids (n,) and the diameters (members, n) of the particles by original id."""
    table = [entry[position] for entry in types for position in TYPE_POSITIONS.values()]
    members, n = diameters.shape
    head = np.array([len(types), n, *table, *ids], dtype=np.float64)
    return np.concatenate([np.broadcast_to(head, (members, head.size)), diameters], axis=1)


def _layout_parameters(model: ModelFile) -> tuple:
    """sphere_mixture's parameters that lay a typed pair model's particles out, with the defaults its file gives."""
    return tuple(dataclasses.replace(parameter, default=model.layout_defaults.get(parameter.name, parameter.default))
                 for parameter in map(sphere_mixture.DEFINITION.parameter, LAYOUT_PARAMETERS))


def _body_properties(params: dict, n: int) -> dict:
    """Each particle's type id (with the types' names), diameter (m) and mass (kg) of a typed pair model, for the
    store (:data:`BODY_PROPERTIES`)."""
    ids, diameters = sphere_mixture.particle_layout(params, n)
    values = {"particle_type": ids.astype(np.int32), "diameter": diameters,
              "mass": sphere_mixture.particle_masses(params, n)}
    return sphere_mixture.stored_properties(values, {"particle_type": sphere_mixture.type_names(params)},
                                            BODY_PROPERTIES)


def _check_unshifted_tail(pair_energy, coef: np.ndarray, cutoff: np.ndarray, pairs, path: str) -> None:
    """A pair model summed over every pair (cutoff = inf) is shifted by φ(∞), which must be finite (0 for a
    potential that decays): its energy at a chord of 1 m is evaluated for each such member and each of ``pairs``
    (ids i, j of the particles ``coef`` lays out), and a non-finite one (a logarithm's or a growing φ's) is refused
    naming ``cutoff``."""
    unlimited = ~np.isfinite(np.broadcast_to(np.asarray(cutoff, dtype=np.float64), coef.shape[:1]))
    lanes = np.ascontiguousarray(coef[unlimited].T)
    for b in range(lanes.shape[1]):
        if not all(np.isfinite(pair_energy(1.0, lanes, b, i, j)) for i, j in pairs):
            raise InvalidInput("cutoff", f"{path}: φ(∞) is not finite, so the potential cannot be summed over every "
                               "pair (cutoff = inf: V is shifted by φ(∞)); give a finite cutoff, or a φ that "
                               "vanishes at infinity")


def forces_switch(switches: dict, layout):
    """``forced(params)`` of a model with ``force``: whether its moments are non-zero for any member's parameter
    values, decided symbolically (each distinct row of the parameters the moments read substituted into them:
    a damper of 0 N·m·s or a torque of amplitude 0 vanishes exactly), so that a model whose forces are all off
    runs the unforced kernels, as a built-in does."""
    expressions = [sympy.sympify(text) for text in switches["expressions"]]
    symbols = {symbol.name: symbol for expression in expressions for symbol in expression.free_symbols}
    read = [(symbols[name], row) for name, row in switches["rows"].items()]

    def forced(params: dict) -> bool:
        coef = model_rows(layout, params)
        columns = np.unique(coef[:, [row for _, row in read]], axis=0) if read else np.zeros((1, 0))
        return any(not expression.xreplace({symbol: sympy.Float(value) for (symbol, _), value in zip(read, values)})
                   .is_zero for values in columns for expression in expressions)

    return forced


def assemble(model: ModelFile, module, meta: dict, common: dict) -> SystemDefinition:
    """The system definition of a derived (S²)ⁿ model; ``common`` holds what every space's model shares
    (name, summary, parameters, presets, bodies, coefficients, revision)."""
    layout = model.layout

    def inertia(params, n):
        members = next(iter(params.values())).shape[0] if params else 1
        coef = np.ascontiguousarray(layout.coefficients(params, members).T)
        size = 1 if meta["pair"] else n
        out = np.empty((size, size, members))
        module.inertia_values(coef, out)
        matrix = np.moveaxis(out, -1, 0)
        if meta["pair"]:
            return np.repeat(matrix[:, 0, :], n, axis=1)
        return np.diagonal(matrix, axis1=1, axis2=2).copy() if meta["diagonal"] else matrix

    extra = {}
    potential, gradient = (module.potential, module.gradient) if not meta["pair"] else \
        all_pairs(module.pair_energy, module.pair_gradient_factor, common["name"])
    if meta["pair"]:
        model_coefficients = common["coefficients"]
        typed = meta["typed"]

        def pair_coefficients(params, n):
            """[the model's rows | the pair constants] per member."""
            rows = np.asarray(model_coefficients(params, n), dtype=np.float64)
            constants = np.empty((meta["constants"], rows.shape[0]))
            module.pair_constants(np.ascontiguousarray(rows.T), constants)
            return np.concatenate([rows, constants.T], axis=1)

        def coefficients(params, n):
            """The pair coefficients, and after them a typed model's layout rows (:func:`particle_rows`)."""
            rows = pair_coefficients(params, n)
            if not typed:
                return rows
            ids, diameters = sphere_mixture.particle_layout(params, n)
            diameters = np.broadcast_to(diameters, (rows.shape[0], n))
            return np.concatenate([rows, particle_rows(params["types"], ids, diameters)], axis=1)

        def check(params):
            """Refuse a typed model's layout naming unknown types (sphere_mixture's ``check_layout``), and a φ that
            cannot be summed over every pair (:func:`_check_unshifted_tail`; a typed φ at every pair of types, each
            particle of its type's σ), when it is bound."""
            if typed:
                sphere_mixture.check_layout(params)
            system = System(definition, params, None, None)
            members = system.member_count() or 1
            broadcast = system.broadcast(members, 2)
            rows, pairs = pair_coefficients(broadcast, 2), [(0, 1)]
            if typed:
                kinds = len(params["types"])
                sigmas = np.broadcast_to([entry[TYPE_POSITIONS["sigma"]] for entry in params["types"]],
                                         (members, kinds))
                rows = np.concatenate([rows, particle_rows(params["types"], np.arange(kinds), sigmas)], axis=1)
                pairs = [(a, c) for a in range(kinds) for c in range(a, kinds)]
            _check_unshifted_tail(module.pair_energy, rows, broadcast["cutoff"], pairs, model.path)

        common = {**common, "coefficients": coefficients, "check": check}
        extra = {"pair": PairPotential(module.pair_energy, module.pair_gradient_factor,
                                       cutoff=lambda params: float(params["cutoff"][0]),
                                       default_skin=lambda params: SKIN_FRACTION * float(params["cutoff"][0])),
                 "full_rotation_symmetry": True}
        if typed:  # each particle's type, size and mass by sphere_mixture's parameters and layout
            common["parameters"] += _layout_parameters(model)
            extra.update(body_properties=_body_properties, body_property_docs=BODY_PROPERTIES,
                         body_friction=sphere_mixture.particle_frictions)
    if meta["configuration"]:  # as jacobi_chain: the methods that take m(q) (kernels.integrators)
        extra.update(provides=frozenset({"potential", "gradient", "configuration_inertia"}),
                     configuration_inertia=module.configuration_inertia,
                     configuration_inertia_gradient=module.configuration_inertia_gradient)
    if meta["forced"]:
        extra.update(force=module.force, force_damping=module.force_damping,
                     forced=forces_switch(meta["switches"], layout))
    masses = sphere_mixture.particle_masses if meta.get("typed") else inertia  # a typed model's: each particle its type's
    definition = SystemDefinition(diagonal_inertia=meta["diagonal"], inertia=None if meta["configuration"] else masses,
                                  potential=potential, gradient=gradient, space=SPHERE_PRODUCT, **common, **extra)
    return definition


def expressions(system, state: dict) -> dict:
    """Every derived expression at states ``state`` (q, ω with a leading member axis), by what the file calls it."""
    q = np.asarray(state["q"], dtype=np.float64)
    values = {"potential(q, p)": system.potential(q)[:, np.newaxis], "∂V/∂q": system.gradient(q)}
    if system.definition.force is not None:
        lanes_q, coef, topology, _ = system._lane_inputs(q)
        out = np.empty_like(lanes_q)
        system.definition.force(0.0, lanes_q, np.ascontiguousarray(np.moveaxis(state["omega"], 0, -1)), coef,
                                topology, out)
        values["force(t, q, omega, p) at t = 0"] = np.moveaxis(out, -1, 0)
    return values


def inertias(system, state: dict) -> dict:
    """The inertia M (members, n, n) at the states, under the name the file gives it."""
    q = np.asarray(state["q"], dtype=np.float64)
    if system.definition.diagonal_inertia:  # (members, n): its diagonal
        return {"inertia": system.definition.inertia(system.broadcast(q.shape[0], q.shape[1]), q.shape[1])}
    return {"inertia": system.definition.inertia_at(q, system.broadcast(q.shape[0], q.shape[1]))}


def potential_coordinates(system, state: dict):
    """(coordinates (members, 3n), V of coordinates, ∂V/∂coordinates): V of q taken in R³ⁿ."""
    q = np.asarray(state["q"], dtype=np.float64)
    shape = q.shape
    return (q.reshape(shape[0], -1), lambda x: system.potential(x.reshape(shape)),
            lambda x: system.gradient(x.reshape(shape)).reshape(shape[0], -1))
