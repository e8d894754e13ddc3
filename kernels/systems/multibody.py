"""System ``multibody``: a tree of rigid bodies joined by revolute, prismatic, spherical and free joints,
stepped through Kane's equations in joint coordinates (:mod:`kernels.systems.kane`; Parsa, digest_003) on
the ``generalised`` space; the explicit methods' vector field of trees of 8 or more revolute and prismatic
joints takes the articulated-body algorithm instead (:mod:`kernels.systems.articulated`, O(n) per member).

Two models describe the tree (``model``):

- ``"tree"``: ``joints``, a list with one table per joint (and body) ``{type = "revolute" | "prismatic" |
  "spherical" | "free", parent = <index of the parent joint, -1 for the ground; required but for the
  first>, measured_from = <index of an earlier revolute or prismatic joint, optional>, name = <its label in
  stores, optional>}`` in an order where parents come first; and per joint its ``axis`` (in the parent's
  frame; revolute and prismatic joints), ``origin`` (the joint point in the parent's frame at q = 0; for a
  prismatic joint the body's frame origin slides from there along the axis, for a free joint it sits at
  the origin plus its position), the body's ``mass``, ``com`` (its centre of mass from the joint point,
  body frame) and ``inertia`` (about the centre of mass, body frame).  A joint ``measured_from`` joint r
  turns by θ = q − q_r: absolute angles of a planar chain.  Coordinates, in joint order: one for a
  revolute (angle, rad) or prismatic joint (travel, m); four for a spherical joint, its unit quaternion
  (x, y, z, w) relative to the parent, with speeds (ω, 0), the body angular velocity relative to the parent
  in the body frame (the ``generalised`` space's layout); seven for a free joint: its position in the
  parent's frame (m, speeds its rates) then a spherical joint's four.
- ``"n_link_pendulum_on_cart"``: the geometry and coordinates of
  ``sympy.physics.mechanics.models.n_link_pendulum_on_cart``: a cart of mass ``cart_mass`` sliding along
  x, n massless links of lengths ``l`` with point masses ``m`` at their ends, link i at the absolute angle
  q_i about z from the y axis (q = 0: upright), gravity ``g`` along −y; q = (cart position, the angles),
  u = their rates; n = len(m); the coordinates are labelled cart_x, link_1_angle, ….

Both take loads per one-degree-of-freedom joint (``joint_force``, and a spring ``stiffness`` about ``rest``
and a damper ``damping``; generalised forces on θ) and, for ``"tree"``, uniform gravity (``g`` along
``gravity_direction``).  The implicit ``midpoint`` needs canonical coordinates, so it steps trees without
spherical and free joints only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..errors import InvalidInput
from ..spaces.generalised import GENERALISED
from ..spaces.base import StateSpace
from .base import (PER_JOINT, PER_JOINT_TENSOR, PER_JOINT_VECTOR3, PER_LINK, SCALAR, VECTOR3, FlatSystemDefinition,
                   Parameter, Preset)
from .kane import (ACCELERATING_FORCE, CANONICAL_FORCE, kane_canonical_force_into, kane_energy, kane_mass_into,
                   kane_terms, kane_work, tree_potential_into)
from .loop_closures import CLOSURE_ROWS, closure_header, closure_terms, closure_work, kane_constrain, tree_diagnostics
from .tree_kinematics import (AMPLITUDE, AXIS, COM, DAMPING, FORCE, FREE, FREQUENCY, GRAVITY_ROWS, INERTIA,
                              JOINT_COORDINATES, JOINT_ROWS, JOINT_SPEEDS, JOINT_TYPES, MASS, ORIGIN, PHASE, PRISMATIC,
                              REST, REVOLUTE, SPHERICAL, STIFFNESS, coordinate_rates_into, tree_kinematics)
from .articulated import articulated_body_into, articulated_work, one_degree_tree, tree_field_work, tree_vector_field

MODELS = ("tree", "n_link_pendulum_on_cart")


def _model(value) -> str:
    if value not in MODELS:
        raise InvalidInput("model", f"unknown model {value!r}; allowed: {', '.join(MODELS)}")
    return value


def _tables(value, field: str, keys: tuple) -> list:
    """A structural list of tables (``joints``, ``closures``), each refused naming its index unless it is a
    table whose keys are among ``keys``."""
    if isinstance(value, (str, bytes, dict)) or not hasattr(value, "__iter__"):
        raise InvalidInput(field, f"must be a list of tables {{{', '.join(keys)}}}")
    tables = list(value)
    for k, table in enumerate(tables):
        if not hasattr(table, "get"):
            raise InvalidInput(f"{field}[{k}]", f"must be a table {{{', '.join(keys)}}}")
        unknown = set(table) - set(keys)
        if unknown:
            raise InvalidInput(f"{field}[{k}]", f"unknown keys {sorted(unknown)}; allowed: {', '.join(keys)}")
    return tables


def _joints(value) -> tuple | None:
    """The ``joints`` list as ((type code, parent, measured_from, name), …), refused naming the joint and key."""
    if value is None:
        return None
    joints = []
    for j, table in enumerate(_tables(value, "joints", ("type", "parent", "measured_from", "name"))):
        kind = table.get("type")
        if kind not in JOINT_TYPES:
            raise InvalidInput(f"joints[{j}].type", f"unknown joint type {kind!r}; allowed: {', '.join(JOINT_TYPES)}")
        if j > 0 and "parent" not in table:
            raise InvalidInput(f"joints[{j}].parent", "is required for every joint but the first (the root): the "
                               "index of an earlier joint, or -1 to attach it to the ground as well")
        parent, reference = table.get("parent", -1), table.get("measured_from", -1)
        for key, index in (("parent", parent), ("measured_from", reference)):
            if isinstance(index, bool) or not isinstance(index, (int, np.integer)) or not -1 <= index < j:
                raise InvalidInput(f"joints[{j}].{key}", f"must be -1 (none) or the index of an earlier joint "
                                   f"(0 … {j - 1}; parents come first, so the tree has no cycle), got {index!r}")
        if reference >= 0 and (JOINT_TYPES[kind] > PRISMATIC or joints[reference][0] > PRISMATIC):
            raise InvalidInput(f"joints[{j}].measured_from", "relates two revolute or prismatic joints only")
        name = table.get("name", f"{kind}_{j}")
        if not isinstance(name, str) or not name:
            raise InvalidInput(f"joints[{j}].name", f"must be a non-empty string, got {name!r}")
        joints.append((JOINT_TYPES[kind], int(parent), int(reference), name))
    names = [joint[3] for joint in joints]
    if len(set(names)) != len(names):
        raise InvalidInput("joints", f"joint names must differ, got {names}")
    if not joints:
        raise InvalidInput("joints", "must name at least one joint")
    return tuple(joints)


def _closures(value) -> tuple:
    """The ``closures`` list as ((body, point, to, to_point, directions), …), refused naming the closure and key."""
    if value is None:
        return ()
    closures = []
    for k, table in enumerate(_tables(value, "closures", ("body", "point", "to", "to_point", "directions"))):
        bodies = []
        for key, default in (("body", None), ("to", -1)):
            index = table.get(key, default)
            if isinstance(index, bool) or not isinstance(index, (int, np.integer)) or index < -1:
                raise InvalidInput(f"closures[{k}].{key}", f"must be a joint (body) index, or -1 for the ground, "
                                   f"got {index!r}")
            bodies.append(int(index))
        points = []
        for key in ("point", "to_point"):
            point = np.array(table.get(key, (0.0, 0.0, 0.0)), dtype=np.float64)
            if point.shape != (3,) or not np.all(np.isfinite(point)):
                raise InvalidInput(f"closures[{k}].{key}", f"must be 3 finite numbers (m), got {table.get(key)!r}")
            points.append(point)
        directions = np.array(table.get("directions", np.eye(3)), dtype=np.float64)
        lengths = np.linalg.norm(directions, axis=-1) if directions.ndim == 2 else np.zeros(1)
        if directions.ndim != 2 or directions.shape[1] != 3 or not 1 <= len(directions) <= 3 or np.any(lengths == 0) \
                or np.linalg.matrix_rank(directions) < len(directions):
            raise InvalidInput(f"closures[{k}].directions", "must be 1 to 3 independent base-frame directions "
                               f"(3 numbers each), got {table.get('directions')!r}")
        if bodies[0] == bodies[1]:
            raise InvalidInput(f"closures[{k}].to", f"must differ from body ({bodies[0]}): a closure joins two bodies")
        unit = directions / lengths[:, np.newaxis]
        closures.append((bodies[0], tuple(map(float, points[0])), bodies[1], tuple(map(float, points[1])),
                         tuple(tuple(map(float, row)) for row in unit)))  # plain numbers: stores keep them as JSON
    return tuple(closures)


def _chain_joints(links: int) -> tuple:
    """The cart (prismatic, along x) and its links (revolute about z, each measured from the one before)."""
    return ((PRISMATIC, -1, -1, "cart_x"),) + tuple((REVOLUTE, i - 1, i - 1 if i > 1 else -1, f"link_{i}_angle")
                                                    for i in range(1, links + 1))


def _joint_list(params: dict) -> tuple:
    """(type, parent, measured_from, name) of each joint, the joints' own coordinates numbered in order."""
    if params["model"] == "n_link_pendulum_on_cart":
        return _chain_joints(int(np.shape(params["m"])[-1]))
    if params["joints"] is None:
        raise InvalidInput("joints", "required for model 'tree': a list of {type, parent, measured_from}")
    joints = params["joints"]
    firsts = _first_coordinates(joints)
    # measured_from names a joint; its coordinate is that joint's first
    return tuple((kind, parent, int(firsts[reference]) if reference >= 0 else -1, name)
                 for kind, parent, reference, name in joints)


def _driven(params: dict) -> bool:
    """Whether a periodic joint force acts in any member (then the energy is not conserved, nor momentum)."""
    return bool(np.any(params["force_amplitude"] != 0))


def _joint_count(params: dict) -> int:
    return len(_joint_list(params))


def _first_coordinates(joints: tuple) -> np.ndarray:
    """Each joint's first coordinate, then the number of coordinates."""
    return np.cumsum([0] + [JOINT_COORDINATES[joint[0]] for joint in joints])


def _bodies(params: dict) -> int:
    """The number of coordinates (the ``generalised`` space's n)."""
    return int(_first_coordinates(_joint_list(params))[-1])


def _quaternions(params: dict) -> tuple:
    """(first row, joint name) of each quaternion in q."""
    joints = _joint_list(params)
    firsts = _first_coordinates(joints)
    return tuple((int(firsts[j]) + (3 if kind == FREE else 0), name)
                 for j, (kind, _, _, name) in enumerate(joints) if kind in (SPHERICAL, FREE))


def _topology(params: dict, n: int) -> np.ndarray:
    """The space's quaternion list, the number of joints, each joint's (type, parent, measured_from, first
    coordinate), then the offsets and the lists of each body's non-zero Jacobian columns: its ancestors'
    speeds (itself included) and the coordinates they are measured from."""
    joints = _joint_list(params)
    firsts = _first_coordinates(joints)
    columns = []
    for i in range(len(joints)):
        found, k = set(), i
        while k >= 0:
            kind, parent, reference, _ = joints[k]
            found |= set(range(firsts[k], firsts[k] + JOINT_SPEEDS[kind])) | ({reference} if reference >= 0 else set())
            k = parent
        columns.append(sorted(found))
    offsets = np.cumsum([0] + [len(c) for c in columns])
    quaternions = [row for row, _ in _quaternions(params)]
    closures = params["closures"]
    return np.array([len(quaternions)] + quaternions + [len(joints)]
                    + [entry for j, joint in enumerate(joints) for entry in joint[:3] + (firsts[j],)] + list(offsets)
                    + [c for body in columns for c in body]
                    + [len(closures), sum(len(closure[4]) for closure in closures)]
                    + [entry for body, _, to, _, directions in closures for entry in (body, to, len(directions))],
                    np.int64)


def _coefficients(params: dict, n: int) -> np.ndarray:
    """(members, 3 + JOINT_ROWS × joints): gravity, then each joint's rows (see
    :mod:`kernels.systems.tree_kinematics`)."""
    members = params["g"].shape[0]
    count = _joint_count(params)
    coef = np.zeros((members, GRAVITY_ROWS + JOINT_ROWS * count + CLOSURE_ROWS * len(params["closures"])))
    for k, (_, point, _, to_point, directions) in enumerate(params["closures"]):
        row = GRAVITY_ROWS + JOINT_ROWS * count + CLOSURE_ROWS * k
        values = np.concatenate([point, to_point, np.ravel(directions)])
        coef[:, row:row + len(values)] = values
    joints = coef[:, GRAVITY_ROWS:GRAVITY_ROWS + JOINT_ROWS * count].reshape(members, count, JOINT_ROWS)
    if params["model"] == "n_link_pendulum_on_cart":
        coef[:, 1] = -params["g"]
        links = params["l"]
        joints[:, 0, AXIS] = 1.0
        joints[:, 0, MASS] = params["cart_mass"]
        joints[:, 1:, AXIS + 2] = 1.0
        joints[:, 2:, ORIGIN + 1] = links[:, :-1]
        joints[:, 1:, MASS] = params["m"]
        joints[:, 1:, COM + 1] = links
    else:
        coef[:, :3] = params["g"][:, np.newaxis] * params["gravity_direction"]
        lengths = np.linalg.norm(params["axis"], axis=-1, keepdims=True)
        joints[:, :, AXIS:AXIS + 3] = params["axis"] / np.where(lengths > 0, lengths, 1.0)
        joints[:, :, ORIGIN:ORIGIN + 3] = params["origin"]
        joints[:, :, MASS] = params["mass"]
        joints[:, :, COM:COM + 3] = params["com"]
        joints[:, :, INERTIA:INERTIA + 9] = params["inertia"].reshape(members, count, 9)
    for name, row in (("joint_force", FORCE), ("stiffness", STIFFNESS), ("rest", REST), ("damping", DAMPING),
                      ("force_amplitude", AMPLITUDE), ("force_frequency", FREQUENCY), ("force_phase", PHASE)):
        joints[:, :, row] = params[name]
    return coef


def _first_joint(bad: np.ndarray) -> int:
    """The first joint (last axis) at fault in any member."""
    return int(np.argmax(bad.reshape(-1, bad.shape[-1]).any(axis=0)))


def _check(params: dict) -> None:
    if params["model"] == "tree":
        joints = params["joints"]
        single = np.array([kind <= PRISMATIC for kind, *_ in joints])
        lengths = np.linalg.norm(params["axis"], axis=-1)
        if np.any((lengths == 0) & single):
            j = _first_joint((lengths == 0) & single)
            raise InvalidInput(f"axis[{j}]", f"joint {j} ({joints[j][3]}) needs a non-zero axis direction")
        inertia = params["inertia"]
        asymmetric = ~np.isclose(inertia, np.swapaxes(inertia, -1, -2), rtol=1e-12, atol=0).all(axis=(-2, -1))
        indefinite = np.linalg.eigvalsh(0.5 * (inertia + np.swapaxes(inertia, -1, -2)))[..., 0] < 0
        if np.any(asymmetric | indefinite):
            j = _first_joint(asymmetric | indefinite)
            raise InvalidInput(f"inertia[{j}]", f"body {j} ({joints[j][3]}): the inertia about its centre "
                               "of mass must be symmetric positive semi-definite (kg·m²)")
        for k, (body, _, to, _, _) in enumerate(params["closures"]):
            for key, index in (("body", body), ("to", to)):
                if index >= len(joints):
                    raise InvalidInput(f"closures[{k}].{key}", f"must be a joint (body) index 0 … {len(joints) - 1}, "
                                       f"or -1 for the ground, got {index}")
        if params["closures"] and not single.all():
            raise InvalidInput("closures", "close loops of revolute and prismatic joints only (the projection onto "
                               "the closures moves q along A(q)ᵀ, which needs u = q̇)")
        closure_rows = sum(len(closure[4]) for closure in params["closures"])
        if closure_rows > len(joints):
            raise InvalidInput("closures", f"their {closure_rows} directions exceed the tree's {len(joints)} joint "
                               "coordinates: the loops would lock the tree (A Aᵀ singular); give at most one each")
        for name in ("joint_force", "stiffness", "damping", "force_amplitude"):
            loaded = (params[name] != 0) & ~single
            if np.any(loaded):
                j = _first_joint(loaded)
                raise InvalidInput(f"{name}[{j}]", f"joint {j} ({joints[j][3]}) is {_TYPE_NAMES[joints[j][0]]}: "
                                   "joint loads act on revolute and prismatic joints only; give 0 there")
    elif np.shape(params["m"])[-1] != np.shape(params["l"])[-1]:
        raise InvalidInput("l", f"needs one length per link mass m ({np.shape(params['m'])[-1]}), got "
                           f"{np.shape(params['l'])[-1]}")


_TYPE_NAMES = {code: name for name, code in JOINT_TYPES.items()}


def _n_link_preset() -> Preset:
    """Two links released from rest at 90° and 180° − 10° off upright, the cart at rest: chaotic."""
    return Preset("sympy's n_link_pendulum_on_cart with n = 2 unit masses and lengths, released from rest with the "
                  "links at 90° and 170° from upright (a chaotic double pendulum on a free cart)",
                  {"model": "n_link_pendulum_on_cart", "cart_mass": 1.0, "m": (1.0, 1.0), "l": (1.0, 1.0), "g": 9.81},
                  {"q": (0.0, 0.5 * np.pi, np.pi - 0.17453292519943295), "u": (0.0, 0.0, 0.0)})


def _axis_quaternion(axis, angle: float) -> tuple:
    """The unit quaternion (x, y, z, w) of a turn by ``angle`` (rad) about ``axis``."""
    axis = np.asarray(axis, dtype=np.float64) / np.linalg.norm(axis)
    return tuple(np.sin(0.5 * angle) * axis) + (np.cos(0.5 * angle),)


def _spherical_chain_preset() -> Preset:
    """Three rods on ball joints hanging from the ground, tilted and spinning."""
    mass, length, radius = 1.0, 1.0, 0.05
    across, along = mass * (3 * radius ** 2 + length ** 2) / 12, 0.5 * mass * radius ** 2
    tilts = (((1.0, 0.0, 0.0), 1.0), ((0.0, 1.0, 0.0), 0.6), ((1.0, 1.0, 0.0), -0.8))
    rates = ((0.0, 0.5, 3.0), (1.0, 0.0, -2.0), (0.0, -1.0, 4.0))
    return Preset("three uniform rods (1 kg, 1 m long, 5 cm radius) hanging from ball joints at their ends, each "
                  "tilted by up to 1 rad and spinning about its own axis at 2 to 4 rad/s; gravity 9.81 m/s² along −z",
                  {"model": "tree", "joints": [{"type": "spherical", "parent": k - 1, "name": f"ball_{k + 1}"}
                                                for k in range(3)],
                   "origin": [(0.0, 0.0, 0.0), (0.0, 0.0, -length), (0.0, 0.0, -length)], "mass": mass,
                   "com": (0.0, 0.0, -0.5 * length), "inertia": np.diag([across, across, along]), "g": 9.81},
                  {"q": sum((_axis_quaternion(axis, angle) for axis, angle in tilts), ()),
                   "u": sum((rate + (0.0,) for rate in rates), ())})


#: the gyroscope preset's rotor: mass (kg), spin-axis and transverse inertia (kg·m²), offset (m), spin (rad/s)
GYROSCOPE = {"mass": 1.0, "spin_inertia": 0.02, "transverse_inertia": 0.01, "offset": 0.1, "spin": 200.0}


def _gyroscope_preset() -> Preset:
    """A rotor spinning in two gimbals, its axis horizontal and its centre of mass off the gimbals' centre."""
    rotor = GYROSCOPE
    light = 1e-4 * np.eye(3)  # the gimbals: 0.1 kg rings centred on the pivot
    return Preset(
        "a rotor (1 kg, spin-axis inertia I₃ = 0.02 and transverse 0.01 kg·m²) spinning at ω_s = 200 rad/s about "
        "a horizontal axis (y) in an inner gimbal (revolute about x) inside an outer gimbal (revolute about the "
        "vertical z), its centre of mass l = 0.1 m out along the spin axis; released with the gimbals at rest it "
        "precesses about z at the mean rate m g l / (I₃ ω_s) = 0.245 rad/s.  That is the steady precession of the "
        "horizontal axis; the nutation started by the release has frequency I₃ ω_s / I_⊥ ≈ 200 rad/s (I_⊥ ≈ "
        "I₁ + m l² = 0.02 kg·m²) and an amplitude m g l I_⊥ / (I₃ ω_s)² ≈ 1.2e-3 rad, so the approximation is "
        "better than 0.2 % here",
        {"model": "tree",
         "joints": [{"type": "revolute", "parent": -1, "name": "outer_gimbal"},
                    {"type": "revolute", "parent": 0, "name": "inner_gimbal"},
                    {"type": "revolute", "parent": 1, "name": "rotor_spin"}],
         "axis": [(0.0, 0.0, 1.0), (1.0, 0.0, 0.0), (0.0, 1.0, 0.0)], "mass": [0.1, 0.1, rotor["mass"]],
         "com": [(0.0, 0.0, 0.0), (0.0, 0.0, 0.0), (0.0, rotor["offset"], 0.0)],
         "inertia": [light, light, np.diag([rotor["transverse_inertia"], rotor["spin_inertia"],
                                            rotor["transverse_inertia"]])], "g": 9.81},
        {"q": (0.0, 0.0, 0.0), "u": (0.0, 0.0, rotor["spin"])})


#: the four_bar preset's links (m): crank a, coupler b, rocker c, ground d (a Grashof crank–rocker), its bars'
#: mass per length (kg/m), and the crank's angle (rad) and rate (rad/s) at release
FOUR_BAR = {"crank": 1.0, "coupler": 3.0, "rocker": 2.5, "ground": 3.0, "density": 1.0, "angle": 1.0, "rate": 12.0}


def four_bar_closure(crank: float, coupler: float, rocker: float, ground: float, angle: float, rate: float) -> tuple:
    """(θ3, θ4, ω3, ω4): the coupler's and rocker's absolute angles (rad, from the ground line) and rates of the
    open assembly of a four-bar with the crank at ``angle`` turning at ``rate`` (triangle B C D by the law of
    cosines; velocities from the loop's two velocity equations)."""
    bx, by = crank * np.cos(angle), crank * np.sin(angle)
    reach = np.hypot(ground - bx, by)
    rocker_angle = np.arctan2(by, bx - ground) - np.arccos((rocker ** 2 + reach ** 2 - coupler ** 2)
                                                           / (2 * rocker * reach))
    cx, cy = ground + rocker * np.cos(rocker_angle), rocker * np.sin(rocker_angle)
    coupler_angle = np.arctan2(cy - by, cx - bx)
    normal = lambda theta: np.array([-np.sin(theta), np.cos(theta)])  # noqa: E731
    rates = np.linalg.solve(np.column_stack([coupler * normal(coupler_angle), -rocker * normal(rocker_angle)]),
                            -crank * rate * normal(angle))
    return coupler_angle, rocker_angle, rates[0], rates[1]


def _four_bar_preset() -> Preset:
    """A crank–rocker four-bar in a vertical plane, the crank thrown round at 12 rad/s."""
    bar = FOUR_BAR
    lengths = np.array([bar["crank"], bar["coupler"], bar["rocker"]])
    masses, radius = bar["density"] * lengths, 0.02
    across = masses * lengths ** 2 / 12
    coupler_angle, rocker_angle, coupler_rate, rocker_rate = four_bar_closure(
        bar["crank"], bar["coupler"], bar["rocker"], bar["ground"], bar["angle"], bar["rate"])
    return Preset(
        "a Grashof crank–rocker four-bar in the vertical x–y plane: ground pivots 3 m apart on x, crank 1 m, "
        "coupler 3 m, rocker 2.5 m, uniform bars of 1 kg/m (2 cm radius), gravity 9.81 m/s² along −y; "
        "q = the crank's, coupler's and rocker's absolute angles from the ground line (the coupler's joint is "
        "measured from the crank), the loop closed by the coupler's end on the rocker's end along x and y; "
        "released at a crank angle of 1 rad turning at 12 rad/s, enough to carry it over the top",
        {"model": "tree",
         "joints": [{"type": "revolute", "parent": -1, "name": "crank"},
                    {"type": "revolute", "parent": 0, "measured_from": 0, "name": "coupler"},
                    {"type": "revolute", "parent": -1, "name": "rocker"}],
         "closures": [{"body": 1, "point": (bar["coupler"], 0.0, 0.0), "to": 2, "to_point": (bar["rocker"], 0.0, 0.0),
                       "directions": [(1.0, 0.0, 0.0), (0.0, 1.0, 0.0)]}],
         "axis": (0.0, 0.0, 1.0), "origin": [(0.0, 0.0, 0.0), (bar["crank"], 0.0, 0.0), (bar["ground"], 0.0, 0.0)],
         "mass": masses, "com": [(length / 2, 0.0, 0.0) for length in lengths],
         "inertia": [np.diag([m * radius ** 2 / 2, a, a]) for m, a in zip(masses, across)],
         "g": 9.81, "gravity_direction": (0.0, -1.0, 0.0)},
        {"q": (bar["angle"], coupler_angle, rocker_angle), "u": (bar["rate"], coupler_rate, rocker_rate)})


@dataclass(frozen=True, kw_only=True)
class MultibodyDefinition(FlatSystemDefinition):
    """The physics of a multibody tree on the generalised space (see the module docstring)."""

    topology: Callable[[dict, int], np.ndarray]
    space: StateSpace = GENERALISED
    #: the vector field (the Runge–Kutta methods; articulated-body or Kane's) and Kane's M(q) with ṗ = f + ∂T/∂q
    #: (the canonical midpoint)
    provides: frozenset = frozenset({"vector_field", "canonical"})
    momentum_doc: str = ("free-floating trees (one root, on a free joint): the linear momentum across gravity and "
                         "the angular momentum about the base origin along it")
    joint_count: Callable[[dict], int] = _joint_count
    forced: Callable[[dict], bool] = _driven

    def momentum_map(self, params: dict):
        """Total momentum of a free-floating tree (see ``momentum_doc``); None for a tree held by the ground."""
        roots = [joint for joint in _joint_list(params) if joint[1] < 0]
        return free_floating_momentum if len(roots) == 1 and roots[0][0] == FREE else None

    def bound_space(self, params: dict) -> StateSpace:
        """The generalised space with this tree's quaternions."""
        return self.space.with_quaternions(_quaternions(params))

    def provided(self, params: dict) -> frozenset:
        """No canonical midpoint for a tree with quaternions (its speeds are not q̇, so p = M u is not canonical),
        closed into loops (its constraint forces and projection are not in the midpoint's equations) or driven
        periodically (the midpoint's canonical force is autonomous)."""
        if _quaternions(params) or params["closures"] or _driven(params):
            return self.provides - {"canonical"}
        return self.provides

    def dimension_labels(self, params: dict, n: int) -> dict:
        """Labels of the state's own dims, for the store's coordinates: each joint coordinate's name; a spherical
        joint's four rows <name>.x … <name>.w (in u: ω_x, ω_y, ω_z and the norm rate), a free joint's seven
        <name>.px, .py, .pz (position and its rates) then the same four."""
        labels = []
        for kind, _, _, name in _joint_list(params):
            turn = [f"{name}.{axis}" for axis in "xyzw"]
            labels += ([name] if kind <= PRISMATIC else turn if kind == SPHERICAL
                       else [f"{name}.p{axis}" for axis in "xyz"] + turn)
        return {"coordinate": labels}

    @property
    def lane_functions(self) -> dict:
        return {"system_work": kane_work, "system_mass_into": kane_mass_into,
                "system_canonical_force_into": kane_canonical_force_into, "space_diagnostics": tree_diagnostics,
                "system_constrain": kane_constrain, "vector_field_work": tree_field_work}

    @property
    def lane_templates(self) -> tuple:
        return (("system_energy", kane_energy), ("vector_field", tree_vector_field))


def _every_joint(name, shape, unit, doc, default, check="finite"):
    return Parameter(name, shape, unit, doc + " (one value for every joint, or one per joint)", default=default,
                     check=check, every_body=True)


DEFINITION = MultibodyDefinition(
    name="multibody",
    revision=3,  # 2: the vector field of trees of ≥ 8 one-degree-of-freedom joints by the articulated-body algorithm;
    # 3: from 6 such joints
    summary="a tree of rigid bodies on revolute, prismatic, spherical and free joints, by Kane's equations in joint "
            "coordinates (the explicit methods: by the articulated-body algorithm from 6 revolute and prismatic joints)",
    parameters=(
        Parameter("model", SCALAR, "1", f"how the tree is described: {', '.join(MODELS)}", default="tree",
                  check="structural", parse=_model),
        Parameter("joints", SCALAR, "1", "model 'tree': one table {type = revolute|prismatic|spherical|free, parent, "
                  "measured_from, name} per joint, parents first", default=None, check="structural", parse=_joints),
        Parameter("closures", SCALAR, "1", "model 'tree': loop closures, one table {body, point (body frame, m), "
                  "to (a body, or -1 the ground), to_point (its frame, m), directions (base frame; default x, y, z)} "
                  "each: the two points coincide along the directions (in all at most one per joint)", default=None,
                  check="structural", parse=_closures),
        _every_joint("axis", PER_JOINT_VECTOR3, "1", "revolute or prismatic joint axis in the parent's frame "
                     "(normalised)", (0.0, 0.0, 1.0)),
        _every_joint("origin", PER_JOINT_VECTOR3, "m", "joint point in the parent's frame at q = 0", (0.0, 0.0, 0.0)),
        _every_joint("mass", PER_JOINT, "kg", "mass of the joint's body", 1.0, check="nonnegative"),
        _every_joint("com", PER_JOINT_VECTOR3, "m", "centre of mass from the joint point, body frame", (0.0, 0.0, 0.0)),
        _every_joint("inertia", PER_JOINT_TENSOR, "kg m2", "inertia about the centre of mass, body frame (3×3)",
                     np.zeros((3, 3))),
        _every_joint("joint_force", PER_JOINT, "N or N m", "constant generalised force on the joint variable", 0.0),
        _every_joint("stiffness", PER_JOINT, "N/m or N m/rad", "spring on the joint variable", 0.0, check="nonnegative"),
        _every_joint("rest", PER_JOINT, "m or rad", "the spring's rest value", 0.0),
        _every_joint("damping", PER_JOINT, "N s/m or N m s/rad", "damper on the joint rate", 0.0, check="nonnegative"),
        _every_joint("force_amplitude", PER_JOINT, "N or N m", "amplitude A of the periodic generalised force "
                     "A sin(ν t + φ) on the joint variable", 0.0),
        _every_joint("force_frequency", PER_JOINT, "rad/s", "its angular frequency ν", 0.0),
        _every_joint("force_phase", PER_JOINT, "rad", "its phase φ", 0.0),
        Parameter("g", SCALAR, "m/s²", "gravitational acceleration", default=9.81, check="nonnegative"),
        Parameter("gravity_direction", VECTOR3, "1", "model 'tree': direction of gravity (normalised)",
                  default=(0.0, 0.0, -1.0), check="direction"),
        Parameter("cart_mass", SCALAR, "kg", "model 'n_link_pendulum_on_cart': the cart's mass", default=1.0),
        Parameter("m", PER_LINK, "kg", "model 'n_link_pendulum_on_cart': the point mass at each link's end",
                  default=(1.0,)),
        Parameter("l", PER_LINK, "m", "model 'n_link_pendulum_on_cart': each link's length", default=(1.0,)),
    ),
    presets={"n_link_pendulum_on_cart": _n_link_preset, "spherical_chain_3d": _spherical_chain_preset,
             "gyroscope": _gyroscope_preset, "four_bar": _four_bar_preset},
    bodies=_bodies,
    coefficients=_coefficients,
    topology=_topology,
    check=_check,
)


def _lane_inputs(state: dict, params: dict, samples: int = 1) -> tuple:
    """(x (2n, lanes), n, coef (P, lanes), topology, bodies) of states {"q", "u"} with leading (members, …)
    axes, ``samples`` states per member, for the lane functions of :mod:`kernels.systems.kane` and
    :mod:`kernels.systems.loop_closures`."""
    q, u = np.asarray(state["q"], dtype=np.float64), np.asarray(state["u"], dtype=np.float64)
    n = q.shape[-1]
    x = np.ascontiguousarray(np.concatenate([q.reshape(-1, n), u.reshape(-1, n)], axis=1).T)
    coef = np.ascontiguousarray(np.repeat(DEFINITION.coefficients(params, n), samples, axis=0).T)
    return x, n, coef, DEFINITION.topology(params, n), DEFINITION.joint_count(params)


def free_floating_momentum(state: dict, params: dict) -> np.ndarray:
    """(members, ..., 4): the total linear momentum P = Σ m_i ċ_i with its component along gravity removed
    (kg·m/s, 3) and the total angular momentum about the base origin, L = Σ m_i c_i × ċ_i + R_i I_i R_iᵀ ω_i,
    along gravity (kg·m²/s, 1), of states {"q", "u"} with leading (members, ...) axes and broadcast
    parameters: what uniform gravity leaves conserved of a free-floating tree (internal joint loads do not
    change it)."""
    q = np.asarray(state["q"], dtype=np.float64)
    samples = int(np.prod(q.shape[1:-1], dtype=np.int64))
    x, n, coef, topology, bodies = _lane_inputs(state, params, samples)
    joint, rotation, frames, axes = kane_work(n, x.shape[1], 0.0)[:4]
    tree_kinematics(x, n, coef, topology, joint, rotation, frames, axes)
    omega, com, com_dot = (np.moveaxis(frames[k, :bodies], -1, 0) for k in (2, 3, 4))
    rotations = np.moveaxis(rotation[:bodies], -1, 0).reshape(-1, bodies, 3, 3)
    inertia = np.repeat(params["inertia"], samples, axis=0)
    mass = np.repeat(params["mass"], samples, axis=0)[..., np.newaxis]
    linear = np.sum(mass * com_dot, axis=1)
    spin = np.einsum("bkij,bkjl,bkml,bkm->bki", rotations, inertia, rotations, omega)
    angular = np.sum(np.cross(com, mass * com_dot) + spin, axis=1)
    down = np.repeat(params["gravity_direction"], samples, axis=0)
    across = linear - np.sum(linear * down, axis=-1, keepdims=True) * down
    along = np.sum(angular * down, axis=-1, keepdims=True)
    return np.concatenate([across, along], axis=-1).reshape(q.shape[:-1] + (4,))


def tree_terms(system, state: dict, canonical: bool = False, t: float = 0.0) -> dict:
    """Kane's terms of a multibody system at states {"q", "u"} (members, n), each with a leading member axis:
    ``mass`` M(q) (members, n, n; zero with ``canonical``), ``forcing`` f − h (members, n; with ``canonical``
    f + ∂T/∂q; the loads at time ``t``, s), ``rates`` q̇ = B(q) u (members, n), the loop closures' ``closure_jacobian`` A (members, rows,
    n), ``closure_residual`` Φ, ``closure_rate`` A u and ``closure_bias`` Ȧ u (members, rows), ``potential``
    V (J), ``rotation`` R_i (members, bodies, 3, 3), and in the base frame ``omega`` ω_i, ``com`` c_i (members, bodies, 3) and ``jacobians`` (members,
    4, bodies, 3, n): J_ω, J_v, J̇_ω, J̇_v (digest_003 eqs. (14)–(16), (35))."""
    members, n = np.shape(state["q"])
    x, n, coef, topology, bodies = _lane_inputs(state, system.broadcast(members, n))
    work = kane_work(n, members, 0.0)
    kane_terms(x, n, coef, topology, t, work, CANONICAL_FORCE if canonical else ACCELERATING_FORCE)
    joint, rotation, frames, _, jacobians, mass, forcing = work[:7]
    potential, rates = np.empty(members), np.empty((2 * n, members))
    tree_potential_into(x, n, coef, topology, joint, frames, potential)
    coordinate_rates_into(x, n, topology, rates)
    rows = closure_header(topology)[2]
    closure, terms, _ = closure_work(n, members, rows)
    closure_terms(x, n, coef, topology, rotation, frames, work[3], closure, terms[0], terms[1], terms[2])
    return {"mass": np.moveaxis(mass, -1, 0), "forcing": forcing.T.copy(), "rates": rates[:n].T.copy(),
            "closure_jacobian": np.moveaxis(closure, -1, 0), "closure_residual": terms[0].T.copy(),
            "closure_rate": terms[1].T.copy(), "closure_bias": terms[2].T.copy(),
            "potential": potential,
            "rotation": np.moveaxis(rotation[:bodies], -1, 0).reshape(members, bodies, 3, 3),
            "omega": np.moveaxis(frames[2, :bodies], -1, 0), "com": np.moveaxis(frames[3, :bodies], -1, 0),
            "jacobians": np.moveaxis(jacobians[:, :bodies], -1, 0)}


def tree_accelerations(system, state: dict, t: float = 0.0) -> np.ndarray:
    """u̇ (members, n) of the explicit methods' vector field at states {"q", "u"} (members, n) and time ``t``
    (s) of a tree of revolute and prismatic joints: the articulated-body algorithm's."""
    members, n = np.shape(state["q"])
    x, n, coef, topology, bodies = _lane_inputs(state, system.broadcast(members, n))
    if not one_degree_tree(topology):
        raise InvalidInput("joints", "the articulated-body algorithm steps trees of revolute and prismatic joints only")
    dx = np.zeros_like(x)
    articulated_body_into(x, n, coef, topology, t, articulated_work(n, members), dx)
    return dx[n:].T.copy()
