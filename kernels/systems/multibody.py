"""System ``multibody``: a tree of rigid bodies joined by revolute and prismatic joints, stepped through
Kane's equations in joint coordinates (:mod:`kernels.systems.kane`; Parsa, digest_003) on the
``generalised`` space.

Two models describe the tree (``model``):

- ``"tree"``: ``joints``, a list with one table per joint (and body) ``{type = "revolute" | "prismatic",
  parent = <index of the parent joint, -1 for the ground>, measured_from = <coordinate index, optional>,
  name = <the coordinate's label in stores, optional>}``
  in an order where parents come first; and per joint its ``axis`` (in the parent's frame), ``origin``
  (the joint point in the parent's frame at q = 0; for a prismatic joint the body's frame origin slides
  from there along the axis), the body's ``mass``, ``com`` (its centre of mass from the joint point, body
  frame) and ``inertia`` (about the centre of mass, body frame).  A joint ``measured_from`` coordinate r
  turns by θ = q − q_r: absolute angles of a planar chain.
- ``"n_link_pendulum_on_cart"``: the geometry and coordinates of
  ``sympy.physics.mechanics.models.n_link_pendulum_on_cart``: a cart of mass ``cart_mass`` sliding along
  x, n massless links of lengths ``l`` with point masses ``m`` at their ends, link i at the absolute angle
  q_i about z from the y axis (q = 0: upright), gravity ``g`` along −y; q = (cart position, the angles),
  u = their rates; n = len(m); the coordinates are labelled cart_x, link_1_angle, ….

Both take joint loads per joint (``joint_force``, and a spring ``stiffness`` about ``rest`` and a damper
``damping``; generalised forces on θ) and, for ``"tree"``, uniform gravity (``g`` along
``gravity_direction``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ..errors import InvalidInput
from ..spaces.generalised import GENERALISED
from ..spaces.base import StateSpace
from .base import (PER_BODY, PER_BODY_TENSOR, PER_BODY_VECTOR3, PER_LINK, SCALAR, VECTOR3, Parameter,
                   ParameterLookup, Preset)
from .kane import (ACCELERATING_FORCE, AXIS, CANONICAL_FORCE, COM, DAMPING, FORCE, GRAVITY_ROWS, INERTIA,
                   JOINT_ROWS, JOINT_TYPES, MASS, ORIGIN, PRISMATIC, REST, REVOLUTE, STIFFNESS, kane_canonical_force_into, kane_energy,
                   kane_mass_into, kane_terms, kane_vector_field, kane_work, tree_potential_into)

MODELS = ("tree", "n_link_pendulum_on_cart")


def _model(value) -> str:
    if value not in MODELS:
        raise InvalidInput("model", f"unknown model {value!r}; allowed: {', '.join(MODELS)}")
    return value


def _joints(value) -> tuple | None:
    """The ``joints`` list as ((type code, parent, measured_from, name), …), refused naming the joint and key."""
    if value is None:
        return None
    if isinstance(value, (str, bytes, dict)) or not hasattr(value, "__iter__"):
        raise InvalidInput("joints", "must be a list of tables {type, parent, measured_from}")
    joints = []
    for j, table in enumerate(value):
        if not hasattr(table, "get"):
            raise InvalidInput(f"joints[{j}]", "must be a table {type, parent, measured_from}")
        unknown = set(table) - {"type", "parent", "measured_from", "name"}
        if unknown:
            raise InvalidInput(f"joints[{j}]", f"unknown keys {sorted(unknown)}; allowed: type, parent, measured_from, "
                               "name")
        kind = table.get("type")
        if kind not in JOINT_TYPES:
            raise InvalidInput(f"joints[{j}].type", f"unknown joint type {kind!r}; allowed: {', '.join(JOINT_TYPES)}")
        parent, reference = table.get("parent", -1), table.get("measured_from", -1)
        for key, index in (("parent", parent), ("measured_from", reference)):
            if isinstance(index, bool) or not isinstance(index, (int, np.integer)) or not -1 <= index < j:
                raise InvalidInput(f"joints[{j}].{key}", f"must be -1 (none) or the index of an earlier joint "
                                   f"(0 … {j - 1}), got {index!r}")
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


def _bodies(params: dict) -> int:
    if params["model"] == "n_link_pendulum_on_cart":
        return int(np.shape(params["m"])[-1]) + 1
    if params["joints"] is None:
        raise InvalidInput("joints", "required for model 'tree': a list of {type, parent, measured_from}")
    return len(params["joints"])


def _chain_joints(n: int) -> tuple:
    """The cart (prismatic, along x) and its links (revolute about z, each measured from the one before)."""
    return ((PRISMATIC, -1, -1, "cart_x"),) + tuple((REVOLUTE, i - 1, i - 1 if i > 1 else -1, f"link_{i}_angle")
                                                    for i in range(1, n))


def _joint_list(params: dict, n: int) -> tuple:
    return _chain_joints(n) if params["model"] == "n_link_pendulum_on_cart" else params["joints"]


def _topology(params: dict, n: int) -> np.ndarray:
    """n, each joint's (type, parent, measured_from), then the offsets and the lists of each body's non-zero
    Jacobian columns: its ancestors' coordinates (itself included) and those they are measured from."""
    joints = _joint_list(params, n)
    columns = []
    for i in range(n):
        found, k = set(), i
        while k >= 0:
            found |= {k} | ({joints[k][2]} if joints[k][2] >= 0 else set())
            k = joints[k][1]
        columns.append(sorted(found))
    offsets = np.cumsum([0] + [len(c) for c in columns])
    return np.array([n] + [entry for joint in joints for entry in joint[:3]] + list(offsets)
                    + [c for body in columns for c in body], np.int64)


def _coefficients(params: dict, n: int) -> np.ndarray:
    """(members, 3 + JOINT_ROWS n): gravity, then each joint's rows (see :mod:`kernels.systems.kane`)."""
    members = params["g"].shape[0]
    coef = np.zeros((members, GRAVITY_ROWS + JOINT_ROWS * n))
    joints = coef[:, GRAVITY_ROWS:].reshape(members, n, JOINT_ROWS)
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
        joints[:, :, AXIS:AXIS + 3] = params["axis"] / np.linalg.norm(params["axis"], axis=-1, keepdims=True)
        joints[:, :, ORIGIN:ORIGIN + 3] = params["origin"]
        joints[:, :, MASS] = params["mass"]
        joints[:, :, COM:COM + 3] = params["com"]
        joints[:, :, INERTIA:INERTIA + 9] = params["inertia"].reshape(members, n, 9)
    for name, row in (("joint_force", FORCE), ("stiffness", STIFFNESS), ("rest", REST), ("damping", DAMPING)):
        joints[:, :, row] = params[name]
    return coef


def _first_joint(bad: np.ndarray) -> int:
    """The first joint (last axis) at fault in any member."""
    return int(np.argmax(bad.reshape(-1, bad.shape[-1]).any(axis=0)))


def _check(params: dict) -> None:
    if params["model"] == "tree":
        lengths = np.linalg.norm(params["axis"], axis=-1)
        if np.any(lengths == 0):
            j = _first_joint(lengths == 0)
            raise InvalidInput(f"axis[{j}]", f"joint {j} ({params['joints'][j][3]}) needs a non-zero axis direction")
        inertia = params["inertia"]
        asymmetric = ~np.isclose(inertia, np.swapaxes(inertia, -1, -2), rtol=1e-12, atol=0).all(axis=(-2, -1))
        indefinite = np.linalg.eigvalsh(0.5 * (inertia + np.swapaxes(inertia, -1, -2)))[..., 0] < 0
        if np.any(asymmetric | indefinite):
            j = _first_joint(asymmetric | indefinite)
            raise InvalidInput(f"inertia[{j}]", f"body {j} ({params['joints'][j][3]}): the inertia about its centre "
                               "of mass must be symmetric positive semi-definite (kg·m²)")
    elif np.shape(params["m"])[-1] != np.shape(params["l"])[-1]:
        raise InvalidInput("l", f"needs one length per link mass m ({np.shape(params['m'])[-1]}), got "
                           f"{np.shape(params['l'])[-1]}")


def _n_link_preset() -> Preset:
    """Two links released from rest at 90° and 180° − 10° off upright, the cart at rest: chaotic."""
    return Preset("sympy's n_link_pendulum_on_cart with n = 2 unit masses and lengths, released from rest with the "
                  "links at 90° and 170° from upright (a chaotic double pendulum on a free cart)",
                  {"model": "n_link_pendulum_on_cart", "cart_mass": 1.0, "m": (1.0, 1.0), "l": (1.0, 1.0), "g": 9.81},
                  {"q": (0.0, 0.5 * np.pi, np.pi - 0.17453292519943295), "u": (0.0, 0.0, 0.0)})


@dataclass(frozen=True)
class MultibodyDefinition(ParameterLookup):
    """The physics of a multibody tree on the generalised space (see the module docstring)."""

    name: str
    summary: str
    parameters: tuple[Parameter, ...]
    presets: dict[str, Callable]
    bodies: Callable[[dict], int | None]
    coefficients: Callable[[dict, int], np.ndarray]
    topology: Callable[[dict, int], np.ndarray]
    check: Callable[[dict], None] | None = None
    space: StateSpace = GENERALISED
    #: Kane's vector field (the Runge–Kutta methods) and M(q) with ṗ = f + ∂T/∂q (the canonical midpoint)
    provides: frozenset = frozenset({"vector_field", "canonical"})
    momentum: Any = None
    momentum_doc: str = ""
    revision: int = 1

    def dimension_labels(self, params: dict, n: int) -> dict:
        """Labels of the state's own dims, for the store's coordinates: each joint coordinate's name."""
        return {"coordinate": [joint[3] for joint in _joint_list(params, n)]}

    @property
    def lane_functions(self) -> dict:
        return {"system_work": kane_work, "system_mass_into": kane_mass_into,
                "system_canonical_force_into": kane_canonical_force_into}

    @property
    def lane_templates(self) -> tuple:
        return (("system_energy", kane_energy), ("vector_field", kane_vector_field))


def _every_joint(name, shape, unit, doc, default, check="finite"):
    return Parameter(name, shape, unit, doc + " (one value for every joint, or one per joint)", default=default,
                     check=check, every_body=True)


DEFINITION = MultibodyDefinition(
    name="multibody",
    summary="a tree of rigid bodies on revolute and prismatic joints, by Kane's equations in joint coordinates",
    parameters=(
        Parameter("model", SCALAR, "1", f"how the tree is described: {', '.join(MODELS)}", default="tree",
                  check="structural", parse=_model),
        Parameter("joints", SCALAR, "1", "model 'tree': one table {type = revolute|prismatic, parent, measured_from, "
                  "name} per joint, parents first", default=None, check="structural", parse=_joints),
        _every_joint("axis", PER_BODY_VECTOR3, "1", "joint axis in the parent's frame (normalised)", (0.0, 0.0, 1.0)),
        _every_joint("origin", PER_BODY_VECTOR3, "m", "joint point in the parent's frame at q = 0", (0.0, 0.0, 0.0)),
        _every_joint("mass", PER_BODY, "kg", "mass of the joint's body", 1.0, check="nonnegative"),
        _every_joint("com", PER_BODY_VECTOR3, "m", "centre of mass from the joint point, body frame", (0.0, 0.0, 0.0)),
        _every_joint("inertia", PER_BODY_TENSOR, "kg m2", "inertia about the centre of mass, body frame (3×3)",
                     np.zeros((3, 3))),
        _every_joint("joint_force", PER_BODY, "N or N m", "constant generalised force on the joint variable", 0.0),
        _every_joint("stiffness", PER_BODY, "N/m or N m/rad", "spring on the joint variable", 0.0, check="nonnegative"),
        _every_joint("rest", PER_BODY, "m or rad", "the spring's rest value", 0.0),
        _every_joint("damping", PER_BODY, "N s/m or N m s/rad", "damper on the joint rate", 0.0, check="nonnegative"),
        Parameter("g", SCALAR, "m/s²", "gravitational acceleration", default=9.81, check="nonnegative"),
        Parameter("gravity_direction", VECTOR3, "1", "model 'tree': direction of gravity (normalised)",
                  default=(0.0, 0.0, -1.0), check="direction"),
        Parameter("cart_mass", SCALAR, "kg", "model 'n_link_pendulum_on_cart': the cart's mass", default=1.0),
        Parameter("m", PER_LINK, "kg", "model 'n_link_pendulum_on_cart': the point mass at each link's end",
                  default=(1.0,)),
        Parameter("l", PER_LINK, "m", "model 'n_link_pendulum_on_cart': each link's length", default=(1.0,)),
    ),
    presets={"n_link_pendulum_on_cart": _n_link_preset},
    bodies=_bodies,
    coefficients=_coefficients,
    topology=_topology,
    check=_check,
)


def tree_terms(system, state: dict, canonical: bool = False) -> dict:
    """Kane's terms of a multibody system at states {"q", "u"} (members, n), each with a leading member axis:
    ``mass`` M(q) (members, n, n; zero with ``canonical``), ``forcing`` f − h (members, n; with ``canonical``
    f + ∂T/∂q), ``potential`` V (J), ``rotation`` R_i (members, n, 3, 3), and in
    the base frame ``omega`` ω_i, ``com`` c_i (members, n, 3) and ``jacobians`` (members, 4, n, 3, n): J_ω, J_v,
    J̇_ω, J̇_v (digest_003 eqs. (14)–(16), (35))."""
    q, u = np.asarray(state["q"], dtype=np.float64), np.asarray(state["u"], dtype=np.float64)
    members, n = q.shape
    x = np.ascontiguousarray(np.concatenate([q, u], axis=1).T)
    params = system.broadcast(members, n)
    coef = np.ascontiguousarray(system.definition.coefficients(params, n).T)
    topology = system.definition.topology(params, n)
    work = kane_work(n, members, 0.0)
    kane_terms(x, n, coef, topology, work, CANONICAL_FORCE if canonical else ACCELERATING_FORCE)
    joint, rotation, frames, jacobians, mass, forcing = work[:6]
    potential = np.empty(members)
    tree_potential_into(x, n, coef, topology, joint, frames, potential)
    return {"mass": np.moveaxis(mass, -1, 0), "forcing": forcing.T.copy(), "potential": potential,
            "rotation": np.moveaxis(rotation, -1, 0).reshape(members, n, 3, 3),
            "omega": np.moveaxis(frames[2], -1, 0), "com": np.moveaxis(frames[5], -1, 0),
            "jacobians": np.moveaxis(jacobians, -1, 0)}
