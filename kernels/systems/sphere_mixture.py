"""Particles of several types and sizes on the unit sphere, with pair coefficients by type pair.

Each particle i has a type a_i (with its mass m_a) and a diameter d_i (m, chord).  Distances are chords r_ij; a pair
of types (a, c) has its coefficients ε_ac, σ_ac and cutoff r_c,ac, by mixing rule or by explicit table entry, and a
pair of particles its size scale s_ij = (d_i + d_j)/(σ_a + σ_c), which is 1 when each particle has its type's σ:
σ_ij = s_ij σ_ac and r_c,ij = s_ij r_c,ac (additive diameters: with Lorentz–Berthelot σ_ac = (σ_a + σ_c)/2, σ_ij
= (d_i + d_j)/2 exactly).  The pair styles, each cut off and shifted so that φ is continuous at r_c,ij:

- ``lj``: φ = 4ε[(σ_ij/r)¹² − (σ_ij/r)⁶] − φ(r_c) (WCA: r_c,ac = 2^{1/6} σ_ac, the default of ``wca``);
- ``yukawa``: φ = ε (σ_ij/r) exp(−(r − σ_ij)/λ) − φ(r_c), the screened Coulomb (Debye–Hückel) repulsion of
  charged colloids, with the Debye length λ (``debye``);
- ``soft``: φ = ½ε (1 − r/σ_ij)² for r < σ_ij (r_c = σ_ij, no shift needed), the harmonic repulsion of
  jamming studies (O'Hern, Silbert, Liu & Nagel, Phys. Rev. E 68, 011306 (2003)).

Mixing rules for a pair without a table entry: ``lorentz_berthelot`` (σ_ac = (σ_a + σ_c)/2, ε_ac = √(ε_a ε_c)),
``geometric`` (both geometric means), ``table`` (none: every pair of types must be listed in ``pairs``).

Which particle has which type, and its size, follow from the parameters alone (so every member, worker and restart
has the same): ``composition`` (counts or fractions of each type, the types randomly mixed by ``layout_seed``) and
``polydispersity`` δ (each diameter σ_a u_i with u_i uniform on [1 − √3 δ, 1 + √3 δ]: mean σ_a, relative standard
deviation δ), or explicit ``particle_types`` and ``diameters`` (a configuration read from a file).

The coefficients of a member (:func:`_coefficients`) hold the table and, after it, each particle's type and
diameter by original id: the pair functions get the two ids (:class:`~kernels.systems.base.PairPotential`) and read
their rows, on every runner alike.  One type of σ with the LJ style and an explicit cutoff gives the arithmetic of
:mod:`kernels.systems.sphere_lj` operation for operation, so the same bits.
"""

from __future__ import annotations

import numpy as np

from ..errors import InvalidInput
from ..geometry import fibonacci_sphere, polymer_positions
from ..lanes import inline_lane_function, lane_function
from ..schedules import checked_knots, knot_rows, piecewise_linear
from . import bonded
from .base import SCALAR, PairPotential, Parameter, Preset, SystemDefinition, all_pairs
from .sphere_lj import lj_coefficients

PAIR_STYLES = ("lj", "wca", "yukawa", "soft")
MIXING_RULES = ("lorentz_berthelot", "geometric", "table")
#: the default cutoff of each style, in units of σ_ac (yukawa's is σ_ac + 6λ, set where λ is known)
DEFAULT_CUTOFF_SIGMAS = {"lj": 2.5, "wca": 2.0 ** (1.0 / 6.0), "soft": 1.0}
#: the style code each style's pair functions branch on (wca is lj with its own cutoff)
STYLE_CODES = {"lj": 0.0, "wca": 0.0, "yukawa": 1.0, "soft": 2.0}
LJ, YUKAWA, SOFT = 0.0, 1.0, 2.0
#: default Verlet skin in units of the largest type σ (as sphere_lj's)
SKIN_SIGMAS = 0.3
#: the header rows of the coefficients: number of types K, number of particles n, whether any particle's diameter
#: differs from its type's σ, the style code; the bonds' ends and the angles' memberships (each bond counted at both
#: ends, each angle at its three particles), the bond and angle types, and the weight of a bonded pair's pair
#: potential (LAMMPS' special_bonds: 0 excluded, 1 kept); the size factor s(t) every σ and cutoff takes now (1
#: without a density schedule), the density schedule's number of knots and its first row
(TYPES, COUNT, SIZED, STYLE, BOND_ENDS, ANGLE_SLOTS, BOND_TYPES, ANGLE_TYPES, SPECIAL, SIZE_FACTOR, DENSITY_KNOTS,
 DENSITY_FIRST) = range(12)
HEADER = 12
#: the columns of a type pair's row of the table: three style coefficients (lj: 4ε, σ⁶, σ¹², as sphere_lj's; yukawa:
#: ε, σ, 1/λ; soft: ε, σ, 0), r_c², the shift φ(r_c) and σ_a + σ_c
COLUMNS = 6
C0, C1, C2, CUTOFF2, SHIFT, SIGMA_SUM = range(COLUMNS)


def _positive_number(value, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not np.isfinite(value) or value <= 0:
        raise InvalidInput(field, f"must be a finite number > 0, got {value!r}")
    return float(value)


def parse_types(value) -> tuple:
    """``types``: a table name → {sigma (m), epsilon (J, default 1), mass (kg, default 1), friction (1/s, optional:
    langevin's and brownian's γ of the type's particles, else the method's ``friction``)}, in declaration order (a
    type's id is its position) → ((name, sigma, epsilon, mass, friction or None), …)."""
    if not isinstance(value, dict) or not value:
        raise InvalidInput("types", "must be a table of particle types, e.g. { A = { sigma = 0.03 }, B = "
                           "{ sigma = 0.042, mass = 2.0 } } (keys of each: sigma, epsilon, mass, friction)")
    out = []
    for name, entry in value.items():
        if not isinstance(entry, dict):
            raise InvalidInput(f"types.{name}", f"must be a table {{ sigma, epsilon, mass, friction }}, got {entry!r}")
        unknown = set(entry) - {"sigma", "epsilon", "mass", "friction"}
        if unknown:
            raise InvalidInput(f"types.{name}.{sorted(unknown)[0]}", "unknown key; allowed: sigma, epsilon, mass, "
                               "friction")
        if "sigma" not in entry:
            raise InvalidInput(f"types.{name}.sigma", "is required (the type's diameter, m, chord)")
        friction = entry.get("friction")
        out.append((str(name), *(_positive_number(entry.get(key, 1.0), f"types.{name}.{key}")
                                 for key in ("sigma", "epsilon", "mass")),
                    None if friction is None else _positive_number(friction, f"types.{name}.friction")))
    return tuple(out)


def parse_pairs(value) -> tuple:
    """``pairs``: a table "A-B" → {epsilon, sigma, cutoff (m)}, each optional (mixing gives the rest) →
    ((a, b, {key: value}), …); the type names are checked against ``types`` when the system is bound."""
    if not isinstance(value, dict):
        raise InvalidInput("pairs", "must be a table of type pairs, e.g. { \"A-B\" = { epsilon = 1.5, sigma = 0.8 } }")
    out = []
    for key, entry in value.items():
        names = str(key).split("-")
        if len(names) != 2 or not all(names):
            raise InvalidInput(f"pairs.{key}", "must name two types as \"A-B\"")
        if not isinstance(entry, dict) or set(entry) - {"epsilon", "sigma", "cutoff"}:
            raise InvalidInput(f"pairs.{key}", f"must be a table with keys among epsilon, sigma, cutoff, got {entry!r}")
        out.append((names[0], names[1], tuple((k, _positive_number(v, f"pairs.{key}.{k}"))
                                                for k, v in sorted(entry.items()))))
    return tuple(out)


def parse_choice(allowed: tuple, field: str):
    """A parser of one of ``allowed`` strings for ``field``."""
    def parse(value):
        if value not in allowed:
            raise InvalidInput(field, f"unknown value {value!r}; allowed: {', '.join(allowed)}")
        return value
    return parse


def parse_composition(value) -> tuple:
    """``composition``: a table type → count (integers) or fraction (numbers summing to 1) → ((name, amount), …)."""
    if not isinstance(value, dict) or not value:
        raise InvalidInput("composition", "must be a table type → count or fraction, e.g. { A = 0.5, B = 0.5 }")
    for name, amount in value.items():
        if isinstance(amount, bool) or not isinstance(amount, (int, float)) or not amount >= 0:
            raise InvalidInput(f"composition.{name}", f"must be a count or a fraction >= 0, got {amount!r}")
    return tuple((str(name), amount) for name, amount in value.items())


def parse_ids(value) -> tuple | None:
    """``particle_types``: one type id per particle (ints), or None."""
    if value is None:
        return None
    array = np.asarray(value)
    if array.ndim != 1 or not np.issubdtype(array.dtype, np.integer) or array.size == 0 or array.min() < 0:
        raise InvalidInput("particle_types", "must be a list of type ids (integers >= 0), one per particle")
    return tuple(int(v) for v in array)


def parse_diameters(value) -> tuple | None:
    """``diameters``: one diameter per particle (m, chord, > 0), or None."""
    if value is None:
        return None
    array = np.asarray(value, dtype=np.float64) if not isinstance(value, (str, dict)) else np.array([])
    if array.ndim != 1 or array.size == 0 or not np.all(np.isfinite(array) & (array > 0)):
        raise InvalidInput("diameters", "must be a list of numbers > 0 (m, chord), one per particle")
    return tuple(float(v) for v in array)


def type_names(params: dict) -> list[str]:
    """The types' names, by id."""
    return [name for name, *_ in params["types"]]


def pair_table(params: dict, member: int = 0) -> dict:
    """{(a, c): (ε, σ, r_c)} for every ordered pair of type ids (J, m, m) of one member's parameters: the explicit
    ``pairs`` entries, the mixing rule for the rest (``table``: a missing pair is refused, naming it)."""
    types = params["types"]
    ids = {name: k for k, (name, *_) in enumerate(types)}
    explicit = {}
    for a, c, entry in params["pairs"]:
        for name in (a, c):
            if name not in ids:
                raise InvalidInput(f"pairs.{a}-{c}", f"unknown type {name!r}; the types are {', '.join(ids)}")
        explicit[(ids[a], ids[c])] = explicit[(ids[c], ids[a])] = dict(entry)
    style = params["pair"]
    debye = _member_value(params, "debye", member)
    scale = _member_value(params, "cutoff_sigmas", member) or DEFAULT_CUTOFF_SIGMAS.get(style, 0.0)
    table = {}
    for a, (name_a, sigma_a, eps_a, *_) in enumerate(types):
        for c, (name_c, sigma_c, eps_c, *_) in enumerate(types):
            entry = explicit.get((a, c), {})
            if params["mixing"] == "table" and (a, c) not in explicit:
                raise InvalidInput("pairs", f"mixing = \"table\" needs every pair of types; \"{name_a}-{name_c}\" is "
                                   "missing")
            geometric = params["mixing"] == "geometric"
            sigma = entry.get("sigma", np.sqrt(sigma_a * sigma_c) if geometric else 0.5 * (sigma_a + sigma_c))
            epsilon = entry.get("epsilon", np.sqrt(eps_a * eps_c))
            default_cutoff = sigma + 6.0 * debye if style == "yukawa" and not scale else scale * sigma
            table[(a, c)] = (epsilon, sigma, entry.get("cutoff", default_cutoff))
    return table


def _style_row(style: str, epsilon: float, sigma: float, cutoff: float, debye: float) -> np.ndarray:
    """A type pair's columns C0 … SHIFT (:data:`COLUMNS`): LJ's by sphere_lj's own coefficients."""
    if style in ("lj", "wca"):
        return lj_coefficients({"epsilon": np.array([epsilon]), "sigma": np.array([sigma]),
                                "cutoff": np.array([cutoff])}, 0)[0]
    if style == "yukawa":
        shift = epsilon * sigma / cutoff * np.exp(-(cutoff - sigma) / debye)
        return np.array([epsilon, sigma, 1.0 / debye, cutoff * cutoff, shift])
    return np.array([epsilon, sigma, 0.0, cutoff * cutoff, 0.0])


def _member_value(params: dict, name: str, member: int) -> float:
    """Member ``member``'s value of the scalar parameter ``name`` (one value, or one per member)."""
    values = np.ravel(params[name])
    return float(values[min(member, values.size - 1)])


def particle_layout(params: dict, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(type id (n,) int64, diameter (members, n) m) of each particle by original id: the explicit
    ``particle_types`` and ``diameters``, else drawn from ``composition`` and ``polydispersity`` by ``layout_seed``
    (the types' counts fixed, the order a random permutation; the size factors uniform, mean 1, relative standard
    deviation δ), the same for every member but for the polydispersity each may have."""
    names = type_names(params)
    if params["particle_types"] is not None:
        ids = np.asarray(params["particle_types"], dtype=np.int64)
        if ids.size != n:
            raise InvalidInput("particle_types", f"needs one type id per particle ({n}), got {ids.size}")
    else:
        ids = _mixed_types(params, names, n)
    sigma = np.array([entry[1] for entry in params["types"]])[ids]
    delta = np.asarray(params["polydispersity"], dtype=np.float64).reshape(-1, 1)
    if params["diameters"] is not None:
        diameters = np.asarray(params["diameters"])
        if diameters.size != n:
            raise InvalidInput("diameters", f"needs one diameter per particle ({n}), got {diameters.size}")
        return ids, np.broadcast_to(diameters, (delta.shape[0], n)).copy()
    uniform = np.random.Generator(np.random.PCG64([int(params["layout_seed"]), 1])).random(n)
    return ids, np.where(delta > 0, sigma * (1.0 + np.sqrt(3.0) * delta * (2.0 * uniform - 1.0)), sigma)


def _mixed_types(params: dict, names: list[str], n: int) -> np.ndarray:
    """Each particle's type id: the composition's counts (fractions rounded by largest remainder), randomly
    permuted by ``layout_seed``."""
    composition = params["composition"] or ((names[0], n),)
    amounts = np.array([float(amount) for _, amount in composition])
    integral = all(isinstance(amount, int) for _, amount in composition)
    if integral and amounts.sum() == n:
        counts = amounts.astype(np.int64)
    elif not integral and abs(amounts.sum() - 1.0) < 1e-9:
        exact = amounts * n
        counts = np.floor(exact).astype(np.int64)
        counts[np.argsort(-(exact - counts), kind="stable")[: n - counts.sum()]] += 1
    else:
        raise InvalidInput("composition", f"must give counts summing to the number of particles ({n}) or fractions "
                           f"summing to 1, got {dict(composition)}")
    ids = np.repeat([names.index(name) for name, _ in composition], counts)
    return np.random.Generator(np.random.PCG64([int(params["layout_seed"]), 0])).permutation(ids)


def _coefficients(params, n):
    """[the header | the table (K², COLUMNS) by (a, c) | type ids (n) | diameters (n) | the bonds and angles
    (:func:`kernels.systems.bonded.bonded_rows`) | the density schedule's knots (:mod:`kernels.schedules`)] per
    member."""
    members = np.shape(params["polydispersity"])[0]
    ids, diameters = particle_layout(params, n)
    diameters = np.broadcast_to(diameters, (members, n))
    sigma_of_type = np.array([entry[1] for entry in params["types"]])
    k = len(params["types"])
    counts, block = bonded.bonded_rows(params, n)
    schedule = params["density_schedule"]
    knots = np.zeros((0, 2)) if schedule is None else schedule
    first_knot = HEADER + k * k * COLUMNS + 2 * n + block.size
    rows = np.empty((members, first_knot + 2 * len(knots)))
    for member in range(members):
        table = pair_table(params, member)
        debye = _member_value(params, "debye", member)
        sized = float(np.any(diameters[member] != sigma_of_type[ids]))
        pairs = [[*_style_row(params["pair"], *table[(a, c)], debye), sigma_of_type[a] + sigma_of_type[c]]
                 for a in range(k) for c in range(k)]
        rows[member] = np.concatenate([[k, n, sized, STYLE_CODES[params["pair"]], *counts,
                                        _member_value(params, "special_bonds", member),
                                        np.sqrt(knots[0, 1]) if len(knots) else 1.0, len(knots), first_knot],
                                       np.ravel(pairs), ids, diameters[member], block, knot_rows(knots)])
    return rows


@inline_lane_function
def pair_row(coef, b, i, j):
    """(the first row of the type pair of particles i and j (ids) in lane b's table, their size scale: the density
    schedule's s(t) (1 without one) times s_ij, 1 unless some particle's diameter differs from its type's σ)."""
    k = int(coef[TYPES, b])
    first_type = HEADER + k * k * COLUMNS
    row = HEADER + (int(coef[first_type + i, b]) * k + int(coef[first_type + j, b])) * COLUMNS
    scale = coef[SIZE_FACTOR, b]
    if coef[SIZED, b] != 0.0:
        first_diameter = first_type + int(coef[COUNT, b])
        scale = scale * (coef[first_diameter + i, b] + coef[first_diameter + j, b]) / coef[row + SIGMA_SUM, b]
    return row, scale


@inline_lane_function
def pair_terms_start(r2, coef, b, i, j):
    """(the table row and size scale of particles i and j (:func:`pair_row`), the style code, the scale², 1.0 if the
    chord² r2 is inside their cutoff r_c,ij² else 0.0): what the energy and the gradient factor begin with."""
    row, scale = pair_row(coef, b, i, j)
    scale2 = scale * scale
    return row, scale, coef[STYLE, b], scale2, 1.0 if r2 < coef[row + CUTOFF2, b] * scale2 else 0.0


@inline_lane_function
def pair_energy(r2, coef, b, i, j):
    """φ(r²) − φ(r_c) of particles i and j (ids) for the chord² r2 < r_c,ij², else 0 (J), lane b."""
    row, scale, style, scale2, inside = pair_terms_start(r2, coef, b, i, j)
    if style == LJ:
        scale6 = scale2 * scale2 * scale2
        inv6 = 1.0 / (r2 * r2 * r2)
        return inside * (coef[row + C0, b] * (coef[row + C2, b] * (scale6 * scale6) * inv6 * inv6
                                              - coef[row + C1, b] * scale6 * inv6) - coef[row + SHIFT, b])
    r = np.sqrt(r2)
    sigma = coef[row + C1, b] * scale
    if style == YUKAWA:
        shift = coef[row + SHIFT, b]
        if scale != 1.0:
            cutoff = np.sqrt(coef[row + CUTOFF2, b]) * scale
            shift = coef[row + C0, b] * sigma / cutoff * np.exp(-(cutoff - sigma) * coef[row + C2, b])
        return inside * (coef[row + C0, b] * sigma / r * np.exp(-(r - sigma) * coef[row + C2, b]) - shift)
    overlap = 1.0 - r / sigma
    return inside * 0.5 * coef[row + C0, b] * overlap * overlap


@inline_lane_function
def pair_gradient_factor(r2, coef, b, i, j):
    """g = φ'(r)/r of particles i and j (ids) for r2 < r_c,ij², else 0 (J/m²): ∂V/∂q_i = Σ_j g(r_ij²)(q_i − q_j)."""
    row, scale, style, scale2, inside = pair_terms_start(r2, coef, b, i, j)
    if style == LJ:
        scale6 = scale2 * scale2 * scale2
        inv2 = 1.0 / r2
        inv6 = inv2 * inv2 * inv2
        return inside * coef[row + C0, b] * inv2 * inv6 * (6.0 * (coef[row + C1, b] * scale6)
                                                           - 12.0 * (coef[row + C2, b] * (scale6 * scale6)) * inv6)
    r = np.sqrt(r2)
    sigma = coef[row + C1, b] * scale
    if style == YUKAWA:
        inverse_debye = coef[row + C2, b]
        phi = coef[row + C0, b] * sigma / r * np.exp(-(r - sigma) * inverse_debye)
        return -inside * phi * (1.0 / r + inverse_debye) / r
    return -inside * coef[row + C0, b] * (1.0 - r / sigma) / (sigma * r)


@inline_lane_function
def bonded_layout(coef, b):
    """The first rows of lane b's bond offsets, bond entries, angle offsets, angle entries, bond types and angle
    types (:func:`kernels.systems.bonded.bonded_rows`)."""
    n = int(coef[COUNT, b])
    bond_offsets = HEADER + int(coef[TYPES, b]) ** 2 * COLUMNS + 2 * n
    bond_entries = bond_offsets + n + 1
    angle_offsets = bond_entries + 2 * int(coef[BOND_ENDS, b])
    angle_entries = angle_offsets + n + 1
    bond_types = angle_entries + 4 * int(coef[ANGLE_SLOTS, b])
    return (bond_offsets, bond_entries, angle_offsets, angle_entries, bond_types,
            bond_types + bonded.BOND_COLUMNS * int(coef[BOND_TYPES, b]))


@inline_lane_function
def angle_geometry(q, slot, a, v, c, b):
    """(u = q_a − q_v, w = q_c − q_v (m), |u|², |w|², 1/(|u||w|), cos θ) of the angle (a, v, c) (ids; ``slot``: each
    id's row of q)."""
    sa, sv, sc = slot[a], slot[v], slot[c]
    u0, u1, u2 = q[sa, 0, b] - q[sv, 0, b], q[sa, 1, b] - q[sv, 1, b], q[sa, 2, b] - q[sv, 2, b]
    w0, w1, w2 = q[sc, 0, b] - q[sv, 0, b], q[sc, 1, b] - q[sv, 1, b], q[sc, 2, b] - q[sv, 2, b]
    uu = u0 * u0 + u1 * u1 + u2 * u2
    ww = w0 * w0 + w1 * w1 + w2 * w2
    inverse = 1.0 / np.sqrt(uu * ww)
    return u0, u1, u2, w0, w1, w2, uu, ww, inverse, (u0 * w0 + u1 * w1 + u2 * w2) * inverse


@inline_lane_function
def bonded_gradient(q, coef, slot, p, s, b):
    """∂/∂q_p (J) of the bonds and angles particle p (id; row s of q) is in, lane b, gathered by p alone: its bonds
    in their order (a bonded pair's pair term taken out when ``special_bonds`` = 0), then its angles.  ``slot``:
    each id's row of q (the runner's storage order)."""
    g0 = g1 = g2 = 0.0
    if coef[BOND_ENDS, b] == 0.0 and coef[ANGLE_SLOTS, b] == 0.0:
        return g0, g1, g2
    bond_offsets, bond_entries, angle_offsets, angle_entries, bond_types, angle_types = bonded_layout(coef, b)
    excluded = coef[SPECIAL, b] == 0.0
    x0, x1, x2 = q[s, 0, b], q[s, 1, b], q[s, 2, b]
    for e in range(int(coef[bond_offsets + p, b]), int(coef[bond_offsets + p + 1, b])):
        partner = int(coef[bond_entries + 2 * e, b])
        j = slot[partner]
        d0, d1, d2 = x0 - q[j, 0, b], x1 - q[j, 1, b], x2 - q[j, 2, b]
        r2 = d0 * d0 + d1 * d1 + d2 * d2
        f = bonded.bond_gradient_factor(r2, coef, b, bond_types + bonded.BOND_COLUMNS * int(
            coef[bond_entries + 2 * e + 1, b]))
        if excluded:
            f -= pair_gradient_factor(r2, coef, b, p, partner)
        g0 += f * d0
        g1 += f * d1
        g2 += f * d2
    for e in range(int(coef[angle_offsets + p, b]), int(coef[angle_offsets + p + 1, b])):
        first = angle_entries + 4 * e
        a, v, c = int(coef[first, b]), int(coef[first + 1, b]), int(coef[first + 2, b])
        u0, u1, u2, w0, w1, w2, uu, ww, inverse, cosine = angle_geometry(q, slot, a, v, c, b)
        slope = bonded.angle_derivative(cosine, coef, b, angle_types + bonded.ANGLE_COLUMNS * int(coef[first + 3, b]))
        # ∂cos θ/∂q_a = w/(|u||w|) − cos θ u/|u|², ∂cos θ/∂q_c likewise, ∂cos θ/∂q_v = −(their sum)
        a0, a1, a2 = w0 * inverse - cosine * u0 / uu, w1 * inverse - cosine * u1 / uu, w2 * inverse - cosine * u2 / uu
        c0, c1, c2 = u0 * inverse - cosine * w0 / ww, u1 * inverse - cosine * w1 / ww, u2 * inverse - cosine * w2 / ww
        if p == a:
            g0, g1, g2 = g0 + slope * a0, g1 + slope * a1, g2 + slope * a2
        elif p == c:
            g0, g1, g2 = g0 + slope * c0, g1 + slope * c1, g2 + slope * c2
        else:
            g0, g1, g2 = g0 - slope * (a0 + c0), g1 - slope * (a1 + c1), g2 - slope * (a2 + c2)
    return g0, g1, g2


@inline_lane_function
def bonded_energy(q, coef, slot, p, s, b):
    """Particle p's share (J) of its bonds' and angles' energy, lane b: half of each bond's (less half its pair term
    when ``special_bonds`` = 0), a third of each angle's; the shares of all particles add up to the whole."""
    energy = 0.0
    if coef[BOND_ENDS, b] == 0.0 and coef[ANGLE_SLOTS, b] == 0.0:
        return energy
    bond_offsets, bond_entries, angle_offsets, angle_entries, bond_types, angle_types = bonded_layout(coef, b)
    excluded = coef[SPECIAL, b] == 0.0
    for e in range(int(coef[bond_offsets + p, b]), int(coef[bond_offsets + p + 1, b])):
        partner = int(coef[bond_entries + 2 * e, b])
        j = slot[partner]
        d0, d1, d2 = q[s, 0, b] - q[j, 0, b], q[s, 1, b] - q[j, 1, b], q[s, 2, b] - q[j, 2, b]
        r2 = d0 * d0 + d1 * d1 + d2 * d2
        u = bonded.bond_energy(r2, coef, b, bond_types + bonded.BOND_COLUMNS * int(coef[bond_entries + 2 * e + 1, b]))
        if excluded:
            u -= pair_energy(r2, coef, b, p, partner)
        energy += 0.5 * u
    for e in range(int(coef[angle_offsets + p, b]), int(coef[angle_offsets + p + 1, b])):
        first = angle_entries + 4 * e
        geometry = angle_geometry(q, slot, int(coef[first, b]), int(coef[first + 1, b]), int(coef[first + 2, b]), b)
        energy += bonded.angle_energy(geometry[9], coef, b, angle_types + bonded.ANGLE_COLUMNS * int(
            coef[first + 3, b])) / 3.0
    return energy


#: V = Σ_{i<j} φ and ∂V/∂q over every pair
pair_potential, pair_gradient = all_pairs(pair_energy, pair_gradient_factor, "sphere_mixture")


@lane_function
def potential(q, coef, topology, out):
    """V (J) of every pair and every bond and angle (the ensemble mode's lane function; ``topology``: the ids
    0 … n − 1, each particle's row)."""
    pair_potential(q, coef, topology, out)
    for b in range(q.shape[2]):
        if coef[BOND_ENDS, b] != 0.0 or coef[ANGLE_SLOTS, b] != 0.0:
            for p in range(q.shape[0]):
                out[b] += bonded_energy(q, coef, topology, p, p, b)


@lane_function
def gradient(q, coef, topology, out):
    """∂V/∂q (J) of every pair, then of each particle's bonds and angles (:func:`bonded_gradient`)."""
    pair_gradient(q, coef, topology, out)
    for b in range(q.shape[2]):
        if coef[BOND_ENDS, b] != 0.0 or coef[ANGLE_SLOTS, b] != 0.0:  # no pass over the particles without bonds
            for p in range(q.shape[0]):
                g0, g1, g2 = bonded_gradient(q, coef, topology, p, p, b)
                out[p, 0, b] += g0
                out[p, 1, b] += g1
                out[p, 2, b] += g2


@lane_function
def density_at(coef, t):
    """Every σ and cutoff scaled to the density schedule's ρ(t)/ρ₀ at time t (s): s(t) = √(ρ(t)/ρ₀) (the areal
    density of discs of diameter sσ goes as s²); nothing without a schedule.  A runner calls it before it evaluates
    the forces of the configuration at time t (``SystemDefinition.coefficients_at``)."""
    for b in range(coef.shape[1]):
        knots = int(coef[DENSITY_KNOTS, b])
        if knots > 0:
            coef[SIZE_FACTOR, b] = np.sqrt(piecewise_linear(coef, int(coef[DENSITY_FIRST, b]), knots, t, b))


def parse_density_schedule(value):
    """``density_schedule``: [[t (s), ρ/ρ₀], …] knots (:func:`kernels.schedules.checked_knots`), ρ/ρ₀ > 0."""
    if value is None:
        return None
    knots = checked_knots(value, "density_schedule", "ρ/ρ₀", "[[0.0, 1.0], [5.0, 1.2]]", 0.0)
    if np.any(knots[:, 1] <= 0):
        raise InvalidInput("density_schedule", f"needs densities ρ/ρ₀ > 0, got {knots[:, 1].tolist()!r}")
    return knots


def largest_size_factor(params: dict) -> float:
    """The largest s(t) of the density schedule (1 without one): at one of its knots, as it is piecewise linear."""
    schedule = params["density_schedule"]
    return 1.0 if schedule is None else float(np.sqrt(np.max(schedule[:, 1])))


def largest_cutoff(params: dict) -> float:
    """The largest r_c,ij (m) of any pair of particles at any time: the table's largest r_c,ac times the largest
    size factor and the density schedule's largest s(t) (what one neighbour list for every type needs)."""
    table = pair_table(params)
    sigma_of_type = np.array([entry[1] for entry in params["types"]])
    if params["diameters"] is not None:
        ids = params["particle_types"]
        factor = (np.max(np.asarray(params["diameters"]) / sigma_of_type[np.asarray(ids)]) if ids is not None
                  else np.max(params["diameters"]) / sigma_of_type.min())
    else:
        factor = 1.0 + np.sqrt(3.0) * float(np.max(params["polydispersity"]))
    return max(cutoff for _, _, cutoff in table.values()) * max(factor, 1.0) * largest_size_factor(params)


def particle_masses(params, n):
    """Each particle's mass by its type (kg), per member."""
    ids, diameters = particle_layout(params, n)
    masses = np.array([entry[3] for entry in params["types"]])[ids]
    return np.broadcast_to(masses, (diameters.shape[0], n)).copy()


def particle_frictions(params, n):
    """Each particle's friction γ (1/s) by its type, NaN for a type without one (the method's applies), per member;
    None where no type gives one."""
    frictions = [entry[4] for entry in params["types"]]
    if all(friction is None for friction in frictions):
        return None
    ids, diameters = particle_layout(params, n)
    by_type = np.array([np.nan if friction is None else friction for friction in frictions])
    return np.broadcast_to(by_type[ids], (diameters.shape[0], n)).copy()


#: what the store keeps of the particles (:func:`_body_properties`): name → (dims, unit, meaning); a diameter or mass
#: that differs member by member is on (member, body); bonds and angles only where there are some
BODY_PROPERTIES = {
    "particle_type": (("body",), "1", "particle type id (the attribute type_names: each id's name)"),
    "diameter": (("body",), "m", "particle diameter (chord)"),
    "mass": (("body",), "kg", "particle mass"),
    "bonds": (("bond", "end"), "1", "the two particles (ids) of each bond"),
    "bond_type": (("bond",), "1", "bond type id (the attribute type_names: each id's name)"),
    "angles": (("angle", "vertex"), "1", "the end, vertex and end particles (ids) of each angle"),
    "angle_type": (("angle",), "1", "angle type id (the attribute type_names: each id's name)"),
}


def _body_properties(params, n):
    """Each particle's type id (with the types' names), diameter (m) and mass (kg), and the bonds and angles with
    their types (on their own dims), for the store (:data:`BODY_PROPERTIES`)."""
    ids, diameters = particle_layout(params, n)
    bonds, bond_ids, angles, angle_ids = bonded.topology(params, n)
    values = {"particle_type": ids.astype(np.int32), "diameter": diameters, "mass": particle_masses(params, n),
              "bonds": bonds, "bond_type": bond_ids.astype(np.int32), "angles": angles,
              "angle_type": angle_ids.astype(np.int32)}
    names = {"particle_type": type_names(params), "bond_type": [entry[0] for entry in params["bond_types"]],
             "angle_type": [entry[0] for entry in params["angle_types"]]}
    return stored_properties(values, names, BODY_PROPERTIES)


def stored_properties(values: dict, names: dict, declared: dict) -> dict:
    """``body_properties`` of the ``declared`` entries (name → (dims, unit, meaning)) with ``values`` (name → array),
    those of no size left out; ``names``: the type names of the type-id properties."""
    properties = {}
    for name, (dims, unit, meaning) in declared.items():
        if values[name].size:
            attrs = {"long_name": meaning, **({"units": unit} if unit != "1" else {}),
                     **({"type_names": names[name]} if name in names else {})}
            properties[name] = (values[name], attrs) + ((dims,) if dims != ("body",) else ())
    return properties


def _file_layout(params: dict, configuration: dict) -> dict:
    """``particle_types``, ``bond_type_ids`` and ``angle_type_ids`` (a file's types matched to ``types``,
    ``bond_types`` and ``angle_types`` by name), ``diameters``, ``bonds`` and ``angles`` of a configuration read from a
    file (:class:`ensemble.particle_files.Configuration` as a dict)."""
    layout = {}
    for ids, names, declared, key, target in (
            ("type_ids", "type_names", "types", "types", "particle_types"),
            ("bond_type_ids", "bond_type_names", "bond_types", "bond_types", "bond_type_ids"),
            ("angle_type_ids", "angle_type_names", "angle_types", "angle_types", "angle_type_ids")):
        if configuration[ids] is None:
            continue
        known = [entry[0] for entry in DEFINITION.parameter(declared).parse(params.get(key, {}))]
        missing = [name for name in configuration[names] if name not in known]
        if missing:
            raise InvalidInput("ensemble.path", f"the file's {key.replace('_', ' ')} {', '.join(missing)} are not "
                               f"among system.params.{key} ({', '.join(known) or 'none'})")
        layout[target] = np.array([known.index(name) for name in configuration[names]])[configuration[ids]].tolist()
    for field, target in (("diameters", "diameters"), ("bonds", "bonds"), ("angles", "angles")):
        if configuration[field] is not None and len(configuration[field]):
            layout[target] = np.asarray(configuration[field]).tolist()
    return layout


def _place_particles(params: dict, n: int, min_separation: float, seed) -> np.ndarray:
    """The particles of one member's ``params``: each polymer (and explicit bond chain) as a random walk or ring whose
    steps are its bond's rest chord (harmonic r₀; fene 0.97 σ, the Kremer–Grest bond), the rest at random, none
    closer than ``min_separation`` (0: 0.8 × the largest type σ, where no pair's repulsion is steep) but for bonded
    neighbours."""
    chains, first = [], 0
    rest = {name: (r0 if style == "harmonic" else 0.97 * sigma) for name, style, _, r0, _, sigma in params["bond_types"]}
    for count, length, bond, _, ring in params["polymers"]:
        for _ in range(count):
            chains.append((first, length, ring, rest[bond]))
            first += length
    separation = min_separation or 0.8 * max(entry[1] for entry in params["types"])
    return polymer_positions(n, chains, separation, seed)


def _check(params):
    """The table, composition, bonds and explicit layout refused where inconsistent (each naming its key)."""
    pair_table(params)
    bonded.check_polymer_types(params)
    if not np.all(np.isin(params["special_bonds"], (0.0, 1.0))):
        raise InvalidInput("special_bonds", "must be 0 (bonded pairs excluded from the pair potential) or 1 (kept), "
                           f"got {params['special_bonds']}")
    if params["density_schedule"] is not None and bonded_present(params):
        raise InvalidInput("density_schedule", "scales the pair potential's σ and cutoffs; bond and angle lengths do "
                           "not follow it, so it is refused with bonds or angles")
    check_layout(params)


def check_layout(params: dict) -> None:
    """The composition and explicit type ids refused where they name a type ``types`` lacks (each naming its key)."""
    names = type_names(params)
    for name, _ in params["composition"]:
        if name not in names:
            raise InvalidInput(f"composition.{name}", f"unknown type; the types are {', '.join(names)}")
    if params["particle_types"] is not None and max(params["particle_types"]) >= len(names):
        raise InvalidInput("particle_types", f"type id {max(params['particle_types'])} unknown; the types are 0 … "
                           f"{len(names) - 1}")


def bonded_present(params: dict) -> bool:
    """Whether the particles have bonds or angles."""
    return bool(params["polymers"] or params["bonds"] or params["angles"])


def _binary_64():
    """64 particles on the Fibonacci lattice, 32 of type A (σ = 0.25) and 32 of B (σ = 0.35, twice the mass),
    randomly mixed, diameters 10 % polydisperse, LJ with Lorentz–Berthelot mixing, stirred by a slow rotation about
    a tilted axis."""
    q0 = fibonacci_sphere(64)
    axis = np.array([0.3, -0.2, 1.0]) / np.linalg.norm([0.3, -0.2, 1.0])
    omega0 = 0.3 * (axis - (q0 @ axis)[:, np.newaxis] * q0)
    return Preset(doc="64 LJ particles, 32 A (σ = 0.25 m) and 32 B (σ = 0.35 m, m = 2 kg), ε = 1, 10 % "
                  "polydisperse, Lorentz–Berthelot, on the Fibonacci lattice with a slow tilted rotation",
                  params={"types": {"A": {"sigma": 0.25}, "B": {"sigma": 0.35, "mass": 2.0}},
                          "composition": {"A": 32, "B": 32}, "polydispersity": 0.1},
                  state={"q": q0, "omega": omega0})


DEFINITION = SystemDefinition(
    name="sphere_mixture",
    summary="particles of several types and sizes on the unit sphere: LJ, WCA, Yukawa or soft pairs by type pair",
    parameters=(
        Parameter("types", SCALAR, "", "particle types: a table name → { sigma (m), epsilon (J, default 1), mass (kg, "
                  "default 1), friction (1/s: langevin's and brownian's γ; default the method's friction) }; a type's "
                  "id is its position", check="structural", parse=parse_types),
        Parameter("pair", SCALAR, "", f"pair style: {' | '.join(PAIR_STYLES)}", default="lj", check="structural",
                  parse=parse_choice(PAIR_STYLES, "pair")),
        Parameter("mixing", SCALAR, "", f"mixing rule of pairs not in `pairs`: {' | '.join(MIXING_RULES)}",
                  default="lorentz_berthelot", check="structural", parse=parse_choice(MIXING_RULES, "mixing")),
        Parameter("pairs", SCALAR, "", "explicit pair entries: a table \"A-B\" → { epsilon (J), sigma (m), cutoff (m) }",
                  default={}, check="structural", parse=parse_pairs),
        Parameter("cutoff_sigmas", SCALAR, "1", "cutoff r_c,ac in units of σ_ac (0: the style's, lj 2.5, wca 2^(1/6), "
                  "soft 1, yukawa σ_ac + 6λ)", default=0.0, check="nonnegative"),
        Parameter("debye", SCALAR, "m", "Debye length λ of the yukawa style", default=1.0),
        Parameter("composition", SCALAR, "", "counts or fractions of each type, e.g. { A = 0.5, B = 0.5 } (default: "
                  "all of the first type)", default={}, check="structural", parse=lambda v: parse_composition(v) if v else ()),
        Parameter("polydispersity", SCALAR, "1", "relative standard deviation δ of the diameters about their type's σ "
                  "(uniform, 0: every particle its type's σ)", default=0.0, check="nonnegative"),
        Parameter("layout_seed", SCALAR, "1", "seed of the types' random mixing and of the sizes", default=0,
                  check="structural", parse=int),
        Parameter("bond_types", SCALAR, "", "bond types: a table name → { style = harmonic | fene, k (J/m²), r0 (m; "
                  "fene: R₀), epsilon (J) and sigma (m) of fene's WCA part }", default={}, check="structural",
                  parse=bonded.parse_bond_types),
        Parameter("angle_types", SCALAR, "", "angle types: a table name → { style = harmonic | cosine, k (J/rad² or J), "
                  "theta0 (degrees, default 180) }", default={}, check="structural", parse=bonded.parse_angle_types),
        Parameter("polymers", SCALAR, "", "chains and rings of consecutive particle ids from 0: a table or a list of "
                  "tables { count, length, bond, angle (optional), ring (default false) }", default=(),
                  check="structural", parse=lambda value: bonded.parse_polymers(value) if value else ()),
        Parameter("special_bonds", SCALAR, "1", "weight of a bonded pair's pair potential: 0 excluded (LAMMPS' default), "
                  "1 kept", default=0.0, check="nonnegative"),
        Parameter("bonds", SCALAR, "1", "explicit bonds [[i, j], …] (from a file)", default=None, check="structural"),
        Parameter("bond_type_ids", SCALAR, "1", "the type id of each explicit bond", default=None, check="structural"),
        Parameter("angles", SCALAR, "1", "explicit angles [[end, vertex, end], …] (from a file)", default=None,
                  check="structural"),
        Parameter("angle_type_ids", SCALAR, "1", "the type id of each explicit angle", default=None,
                  check="structural"),
        Parameter("density_schedule", SCALAR, "", "a protocol [[t (s), ρ/ρ₀], …]: every σ and cutoff scaled by "
                  "√(ρ(t)/ρ₀), piecewise linear in ρ between the knots (the sphere shrinking at fixed σ); without "
                  "bonds", default=None, check="structural", parse=parse_density_schedule),
        Parameter("particle_types", SCALAR, "1", "explicit type id of each particle (from a file)", default=None,
                  check="structural", parse=parse_ids),
        Parameter("diameters", SCALAR, "m", "explicit diameter of each particle (m, chord; from a file)", default=None,
                  check="structural", parse=parse_diameters),
    ),
    presets={"binary_64": _binary_64},
    diagonal_inertia=True,
    bodies=lambda params: None,
    inertia=particle_masses,
    body_friction=particle_frictions,
    coefficients=_coefficients,
    potential=potential,
    gradient=gradient,
    full_rotation_symmetry=True,
    topology=lambda params, n: np.arange(n, dtype=np.int64),
    check=_check,
    body_properties=_body_properties,
    body_property_docs=BODY_PROPERTIES,
    file_layout=_file_layout,
    place_particles=_place_particles,
    coefficients_at=density_at,
    scheduled=lambda params: params["density_schedule"] is not None,
    pair=PairPotential(pair_energy, pair_gradient_factor, bonded_gradient=bonded_gradient, bonded_energy=bonded_energy,
                       bonded_present=bonded_present,
                       cutoff=largest_cutoff,
                       default_skin=lambda params: SKIN_SIGMAS * max(entry[1] for entry in params["types"])),
)
