"""Bonds and angles of particles on the unit sphere: a fixed topology, and each bond's and angle's energy as a function
of the chord (bonds) or of the angle at the vertex between the two chords (angles), written once as lane functions
that every runner composes (:mod:`kernels.systems.sphere_mixture` gathers each particle's terms by itself).

Bond styles, of the chord r between the two particles (m):

- ``harmonic``: U = ½ k (r − r₀)², k in J/m²;
- ``fene``: the finitely extensible bond of Kremer & Grest (J. Chem. Phys. 92, 5057 (1990)),
  U = −½ k R₀² ln(1 − (r/R₀)²) plus the WCA repulsion 4ε[(σ/r)¹² − (σ/r)⁶] + ε for r < 2^{1/6} σ; a bond stretched to
  r ≥ R₀ has no energy (the logarithm's argument is ≤ 0): its force is NaN, and the step that meets it stops the
  member (status NON_FINITE).

Angle styles, of the angle θ at the vertex v between the chords to the two ends a and c (cos θ = u·w/(|u||w|),
u = q_a − q_v, w = q_c − q_v):

- ``harmonic``: U = ½ k (θ − θ₀)², k in J/rad², θ₀ in degrees in the spec;
- ``cosine``: U = k (1 + cos θ), LAMMPS' ``angle_style cosine`` (straight, θ = 180°, is the minimum).

The topology rides in the coefficient block as floats (integers below 2⁵³ are exact): for each particle id the
bonds it is in (CSR: offsets, then (partner id, bond type) per bond end) and the angles it is in (offsets, then (a,
v, c, angle type) per membership), then a row per bond type and per angle type (:func:`bonded_rows`).
"""

from __future__ import annotations

import numpy as np

from ..errors import InvalidInput
from ..lanes import inline_lane_function

BOND_STYLES = {"harmonic": 0.0, "fene": 1.0}
ANGLE_STYLES = {"harmonic": 0.0, "cosine": 1.0}
HARMONIC, FENE = 0.0, 1.0
COSINE = 1.0
#: a bond type's row: style, k, r₀ (R₀ for fene), r₀², 4ε, σ⁶, σ¹² and the WCA part's cut² (0 for harmonic)
BOND_COLUMNS = 8
B_STYLE, B_K, B_R0, B_R02, B_EPS4, B_S6, B_S12, B_CUT2 = range(BOND_COLUMNS)
#: an angle type's row: style, k, θ₀ (rad)
ANGLE_COLUMNS = 3
A_STYLE, A_K, A_THETA0 = range(ANGLE_COLUMNS)
#: the least sin θ a harmonic angle's derivative divides by (a straight or folded angle: θ = θ₀ there, 0/0)
SMALLEST_SINE = 1e-12


def _number(value, field: str, least: float = 0.0, strict: bool = True) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not np.isfinite(value) or not (
            value > least if strict else value >= least):
        raise InvalidInput(field, f"must be a finite number {'>' if strict else '>='} {least:g}, got {value!r}")
    return float(value)


def styled_entries(value, field: str, styles: dict, allowed):
    """(name, its spec key, its table) of each entry of the table ``field`` (name → { style, … }), each checked: a
    table whose style is one of ``styles`` and whose keys are among ``allowed(style)``; else InvalidInput naming
    the key."""
    if not isinstance(value, dict):
        raise InvalidInput(field, f"must be a table name → {{ style = {' | '.join(styles)}, … }}")
    for name, entry in value.items():
        where = f"{field}.{name}"
        if not isinstance(entry, dict) or entry.get("style") not in styles:
            raise InvalidInput(f"{where}.style", f"must be one of {', '.join(styles)}")
        unknown = sorted(set(entry) - allowed(entry["style"]))
        if unknown:
            keys = ", ".join(sorted(allowed(entry["style"])))
            raise InvalidInput(f"{where}.{unknown[0]}", f"unknown key; allowed: {keys}")
        yield name, where, entry


def parse_bond_types(value) -> tuple:
    """``bond_types``: a table name → {style = harmonic | fene, k, r0 (m) and, for fene, epsilon (J, default 1) and
    sigma (m)} → ((name, style, k, r0, epsilon, sigma), …) in declaration order (a type's id is its position)."""
    out = []
    for name, where, entry in styled_entries(value, "bond_types", BOND_STYLES, lambda style: {"style", "k", "r0"} | (
            {"epsilon", "sigma"} if style == "fene" else set())):
        fene = entry["style"] == "fene"
        out.append((str(name), entry["style"], _number(entry.get("k"), f"{where}.k"),
                    _number(entry.get("r0"), f"{where}.r0", strict=fene),
                    _number(entry.get("epsilon", 1.0), f"{where}.epsilon", strict=False) if fene else 0.0,
                    _number(entry.get("sigma"), f"{where}.sigma") if fene else 0.0))
    return tuple(out)


def parse_angle_types(value) -> tuple:
    """``angle_types``: a table name → {style = harmonic | cosine, k, theta0 (degrees, harmonic; default 180)} →
    ((name, style, k, θ₀ (rad)), …)."""
    out = []
    for name, where, entry in styled_entries(value, "angle_types", ANGLE_STYLES,
                                             lambda style: {"style", "k", "theta0"}):
        theta0 = _number(entry.get("theta0", 180.0), f"{where}.theta0", strict=False)
        if theta0 > 180.0:
            raise InvalidInput(f"{where}.theta0", f"must be an angle in [0, 180] degrees, got {theta0!r}")
        out.append((str(name), entry["style"], _number(entry.get("k"), f"{where}.k", strict=False),
                    np.radians(theta0)))
    return tuple(out)


def parse_polymers(value) -> tuple:
    """``polymers``: a table or a list of tables {count, length, bond (a bond type), angle (an angle type, optional),
    ring (default false)} → ((count, length, bond, angle or None, ring), …): chains or rings of consecutive particle
    ids, from id 0 on, in order."""
    tables = [value] if isinstance(value, dict) else value
    if not isinstance(tables, list) or not all(isinstance(table, dict) for table in tables):
        raise InvalidInput("polymers", "must be a table { count, length, bond, angle, ring } or a list of them")
    out = []
    for k, table in enumerate(tables):
        where = f"polymers[{k}]"
        unknown = sorted(set(table) - {"count", "length", "bond", "angle", "ring"})
        if unknown:
            raise InvalidInput(f"{where}.{unknown[0]}", "unknown key; allowed: angle, bond, count, length, ring")
        ring = table.get("ring", False)
        for key, least in (("count", 1), ("length", 3 if ring else 2)):
            if isinstance(table.get(key), bool) or not isinstance(table.get(key), int) or table[key] < least:
                raise InvalidInput(f"{where}.{key}", f"must be an integer >= {least}, got {table.get(key)!r}")
        if not isinstance(table.get("bond"), str) or not isinstance(ring, bool):
            raise InvalidInput(f"{where}.bond", "must name a bond type (and ring be true or false)")
        out.append((table["count"], table["length"], table["bond"], table.get("angle"), ring))
    return tuple(out)


def check_polymer_types(params: dict) -> tuple[list[str], list[str]]:
    """(the bond types' names, the angle types') once every polymer names declared ones; else InvalidInput."""
    bond_names = [entry[0] for entry in params["bond_types"]]
    angle_names = [entry[0] for entry in params["angle_types"]]
    for k, (_, _, bond, angle, _) in enumerate(params["polymers"]):
        if bond not in bond_names:
            raise InvalidInput(f"polymers[{k}].bond", f"unknown bond type {bond!r}; bond_types: {bond_names}")
        if angle is not None and angle not in angle_names:
            raise InvalidInput(f"polymers[{k}].angle", f"unknown angle type {angle!r}; angle_types: {angle_names}")
    return bond_names, angle_names


def topology(params: dict, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(bonds (m, 2), their type ids (m,), angles (k, 3) as (end, vertex, end), their type ids (k,)) of particle ids
    below n: the ``polymers``' chains and rings of consecutive ids (each with its bond and, where named, its angle
    between consecutive bonds), then the explicit ``bonds`` and ``angles`` (a file's)."""
    bond_names, angle_names = check_polymer_types(params)
    bonds, bond_ids, angles, angle_ids = [], [], [], []
    first = 0
    for count, length, bond, angle, ring in params["polymers"]:
        for _ in range(count):
            ids = list(range(first, first + length))
            links = list(zip(ids, ids[1:] + ids[:1] if ring else ids[1:]))
            bonds += links
            bond_ids += [bond_names.index(bond)] * len(links)
            if angle is not None:
                corners = [(ids[j - 1], ids[j], ids[(j + 1) % length]) for j in range(0 if ring else 1,
                                                                                     length if ring else length - 1)]
                angles += corners
                angle_ids += [angle_names.index(angle)] * len(corners)
            first += length
    if first > n:
        raise InvalidInput("polymers", f"need {first} particles, there are {n}")
    for name, given, kinds, width in (("bonds", params["bonds"], params["bond_type_ids"], 2),
                                      ("angles", params["angles"], params["angle_type_ids"], 3)):
        if given is None:
            continue
        given = np.asarray(given, dtype=np.int64).reshape(-1, width)
        kinds = np.zeros(len(given), np.int64) if kinds is None else np.asarray(kinds, dtype=np.int64)
        count = len(params["bond_types" if name == "bonds" else "angle_types"])
        if given.size and (given.min() < 0 or given.max() >= n) or kinds.shape != (len(given),) or (
                kinds.size and (kinds.min() < 0 or kinds.max() >= count)):
            raise InvalidInput(name, f"must name particles 0 … {n - 1} and types 0 … {count - 1}, one type each")
        (bonds if name == "bonds" else angles).extend(map(tuple, given))
        (bond_ids if name == "bonds" else angle_ids).extend(kinds.tolist())
    return (np.array(bonds, np.int64).reshape(-1, 2), np.array(bond_ids, np.int64),
            np.array(angles, np.int64).reshape(-1, 3), np.array(angle_ids, np.int64))


def _by_particle(groups: np.ndarray, kinds: np.ndarray, n: int, others) -> tuple[np.ndarray, np.ndarray]:
    """CSR of each particle's memberships: offsets (n + 1) and, per membership in particle order (then group order),
    ``others(group, kind, member)`` (a row of entries)."""
    members = [[] for _ in range(n)]
    for group, kind in zip(groups, kinds):
        for member in group:
            members[member].append(others(group, kind, member))
    offsets = np.cumsum([0] + [len(rows) for rows in members])
    entries = [value for rows in members for row in rows for value in row]
    return offsets, np.array(entries, dtype=np.float64)


def bonded_rows(params: dict, n: int) -> tuple[list[float], np.ndarray]:
    """(the header values [bond ends, angle memberships, bond types, angle types], the block: bond offsets (n + 1),
    bond entries (partner, type) per end, angle offsets (n + 1), angle entries (a, v, c, type) per membership, a
    BOND_COLUMNS row per bond type, an ANGLE_COLUMNS row per angle type)."""
    bonds, bond_ids, angles, angle_ids = topology(params, n)
    bond_offsets, bond_entries = _by_particle(bonds, bond_ids, n, lambda pair, kind, p: (pair[1] if pair[0] == p
                                                                                          else pair[0], kind))
    angle_offsets, angle_entries = _by_particle(angles, angle_ids, n, lambda corner, kind, p: (*corner, kind))
    bond_table = []
    for _, style, k, r0, epsilon, sigma in params["bond_types"]:
        s6 = sigma**6
        bond_table += [BOND_STYLES[style], k, r0, r0 * r0, 4.0 * epsilon, s6, s6 * s6, 2.0 ** (1.0 / 3.0) * sigma**2]
    angle_table = [value for _, style, k, theta0 in params["angle_types"] for value in (ANGLE_STYLES[style], k,
                                                                                          theta0)]
    header = [2 * len(bonds), 3 * len(angles), len(params["bond_types"]), len(params["angle_types"])]
    return header, np.concatenate([bond_offsets, bond_entries, angle_offsets, angle_entries, bond_table,
                                   angle_table]).astype(np.float64)


@inline_lane_function
def bond_energy(r2, coef, b, row):
    """U (J) of a bond of chord² r2 (m²) whose type's row starts at ``row`` of lane b's coefficients."""
    if coef[row + B_STYLE, b] == HARMONIC:
        stretch = np.sqrt(r2) - coef[row + B_R0, b]
        return 0.5 * coef[row + B_K, b] * stretch * stretch
    energy = -0.5 * coef[row + B_K, b] * coef[row + B_R02, b] * np.log(1.0 - r2 / coef[row + B_R02, b])
    if r2 < coef[row + B_CUT2, b]:
        inv6 = 1.0 / (r2 * r2 * r2)
        energy += coef[row + B_EPS4, b] * (coef[row + B_S12, b] * inv6 * inv6 - coef[row + B_S6, b] * inv6 + 0.25)
    return energy


@inline_lane_function
def bond_gradient_factor(r2, coef, b, row):
    """g = U'(r)/r (J/m²) of the bond (:func:`bond_energy`): its end i's ∂U/∂q_i = g (q_i − q_j); NaN for a fene bond
    stretched to R₀ or beyond."""
    if coef[row + B_STYLE, b] == HARMONIC:
        r = np.sqrt(r2)
        return coef[row + B_K, b] * (r - coef[row + B_R0, b]) / r
    slack = 1.0 - r2 / coef[row + B_R02, b]
    factor = coef[row + B_K, b] / slack if slack > 0.0 else np.nan
    if r2 < coef[row + B_CUT2, b]:
        inv2 = 1.0 / r2
        inv6 = inv2 * inv2 * inv2
        factor += coef[row + B_EPS4, b] * inv2 * inv6 * (6.0 * coef[row + B_S6, b] - 12.0 * coef[row + B_S12, b] * inv6)
    return factor


@inline_lane_function
def angle_energy(cosine, coef, b, row):
    """U (J) of an angle of cos θ = ``cosine`` whose type's row starts at ``row`` of lane b's coefficients."""
    if coef[row + A_STYLE, b] == COSINE:
        return coef[row + A_K, b] * (1.0 + cosine)
    bend = np.arccos(min(max(cosine, -1.0), 1.0)) - coef[row + A_THETA0, b]
    return 0.5 * coef[row + A_K, b] * bend * bend


@inline_lane_function
def angle_derivative(cosine, coef, b, row):
    """dU/d(cos θ) (J) of the angle (:func:`angle_energy`): harmonic −k (θ − θ₀)/sin θ (sin θ at least
    SMALLEST_SINE), cosine k."""
    if coef[row + A_STYLE, b] == COSINE:
        return coef[row + A_K, b]
    clipped = min(max(cosine, -1.0), 1.0)
    sine = max(np.sqrt(1.0 - clipped * clipped), SMALLEST_SINE)
    return -coef[row + A_K, b] * (np.arccos(clipped) - coef[row + A_THETA0, b]) / sine
