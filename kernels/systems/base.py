"""What a mechanical system is, independent of any integrator.

A system is a definition (its state space, parameters, presets, physics as jitted lane functions:
:class:`SystemDefinition` on (S²)ⁿ with inertia M, potential V and its gradient;
:class:`~kernels.systems.rigid.RigidBodyDefinition` on SO(3)ⁿ) plus, once the user has chosen values,
a :class:`System` holding validated parameters.  Any numeric parameter may carry a leading member axis, giving
each ensemble member its own value (parameter sweeps are built on this).

Lane functions of a system have the signatures
``potential(q, coef, topology, out)`` with ``q`` (n, 3, L) and ``out`` (L,), and
``gradient(q, coef, topology, out)`` with ``out`` (n, 3, L) = ∂V/∂q, where ``coef`` (P, L) holds
per-member coefficients derived from the parameters and ``topology`` is an int64 array shared by
all members (spring lists and the like).  A system with singular close encounters (a pair potential
that diverges at a collision) may add ``encounter(q, omega, mass_diag, coef, topology, out)`` with
``out`` (3, L): its separation from the singularity (the member's ``min_separation`` is the least
reached), the time scale τ (s) of motion at that separation, and d ln τ/dt (1/s); the adaptive
``vi`` chooses its steps from τ.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from ..errors import InvalidInput
from ..lanes import bind_template, chord, lane_function
from ..schedules import constant_coefficients
from ..spaces import SPHERE_PRODUCT, StateSpace

REQUIRED = object()

#: base shapes a parameter can have; a per-member value adds one leading axis
SCALAR, PER_BODY, VECTOR3, PER_BODY_VECTOR3, PER_SPRING = "scalar", "body", "vector3", "body×3", "spring"
PER_BODY_TENSOR, MATRIX3, MATRIX6 = "body×3×3", "3×3", "6×6"
#: one value per link of a chain model, a count the system checks against its other parameters
PER_LINK = "link"
#: one value per joint of a multibody tree, whose joints may hold several state coordinates each (the
#: definition's ``joint_count(params)`` says how many joints there are)
PER_JOINT, PER_JOINT_VECTOR3, PER_JOINT_TENSOR = "joint", "joint×3", "joint×3×3"
#: one value per internal mass of a rolling ball (the definition's ``mass_count(params)``), whether it moves
#: freely (a state coordinate) or along a prescribed path
PER_MASS = "mass"
#: a model file's parameters: a list or a list of lists of any lengths (:mod:`kernels.models`)
LIST, TABLE = "list", "list×list"
_BASE_NDIM = {LIST: 1, TABLE: 2, SCALAR: 0, PER_BODY: 1, VECTOR3: 1, PER_BODY_VECTOR3: 2, PER_SPRING: 1, PER_BODY_TENSOR: 3, MATRIX3: 2, MATRIX6: 2,
              PER_LINK: 1, PER_JOINT: 1, PER_JOINT_VECTOR3: 2, PER_JOINT_TENSOR: 3, PER_MASS: 1}
_PER_BODY_SHAPES = (PER_BODY, PER_BODY_VECTOR3, PER_BODY_TENSOR)
#: shapes with one value per item the definition counts from its parameters: (counter, item, items)
_COUNTED_SHAPES = {**{shape: ("joint_count", "joint", "joints") for shape in (PER_JOINT, PER_JOINT_VECTOR3,
                                                                             PER_JOINT_TENSOR)},
                   PER_MASS: ("mass_count", "mass", "masses")}


@dataclass(frozen=True)
class Parameter:
    """One system parameter: its base shape, allowed values, default, unit and meaning."""

    name: str
    shape: str
    unit: str
    doc: str
    default: Any = REQUIRED
    check: str = "positive"  # positive | nonnegative | finite | direction | cutoff | structural
    parse: Callable[[Any], Any] | None = None  # for structural (non-numeric, never per-member) values
    normalise: Callable[[Any], np.ndarray] | None = None  # numeric values → canonical base shape (inertia forms)
    #: a per-body parameter that also takes one number for every body (expanded to the definition's
    #: ``bodies`` when the system is bound, so sweeps and per-member values see the per-body shape)
    every_body: bool = False

    @property
    def structural(self) -> bool:
        return self.check == "structural"


def gravity_parameters() -> tuple[Parameter, Parameter]:
    """``g`` and ``gravity_direction`` (the paper's e3, "the direction of gravity"), shared by every
    system in a uniform gravity field."""
    return (
        Parameter("g", SCALAR, "m/s²", "gravitational acceleration", default=9.81),
        Parameter("gravity_direction", VECTOR3, "1", "direction of gravity (normalised)",
                  default=(0.0, 0.0, 1.0), check="direction"),
    )


@dataclass(frozen=True)
class Preset:
    """Named parameter values and a single initial state: the system's space's variables by name,
    each of its per-member shape (no member axis)."""

    doc: str
    params: dict
    state: dict


@dataclass(frozen=True)
class PairPotential:
    """A potential V = Σ_{i<j} φ(r_ij²) of chords r_ij = ‖q_i − q_j‖ that vanishes beyond a cutoff, so
    that a neighbour list (:mod:`kernels.neighbours`) can evaluate it in O(n).

    ``energy(r2, coef, b, i, j)`` → φ (J) and ``gradient_factor(r2, coef, b, i, j)`` → g (J/m²) with
    ∂V/∂q_i = Σ_j g(r_ij²)(q_i − q_j), both jitted, lane b of ``coef``, zero for r2 ≥ r_c²; i and j are the two
    particles' original ids (their index in the caller's order, whatever order a runner stores them in), which a
    potential of several particle types or sizes uses to read each particle's rows of ``coef``;
    ``cutoff(params)`` → r_c (m, inf for none) and ``default_skin(params)`` → Verlet skin (m), from
    parameters broadcast to one member.
    """

    energy: Any
    gradient_factor: Any
    cutoff: Callable[[dict], float]
    default_skin: Callable[[dict], float]
    #: the bonded terms (bonds, angles) the runners add to each particle's pair terms, gathered by the particle
    #: alone: ``bonded_gradient(q, coef, slot, p, s, b)`` → ∂/∂q_p (3 floats, J) and ``bonded_energy(q, coef, slot, p,
    #: s, b)`` → its share of their energy (J), for particle id p stored at row s, ``slot`` each id's row
    #: (:mod:`kernels.systems.sphere_mixture`); none by default
    bonded_gradient: Any = None
    bonded_energy: Any = None
    #: whether a system with these parameters (validated, not broadcast) has any bond or angle
    bonded_present: Callable[[dict], bool] = lambda params: False

    def __post_init__(self):
        if self.bonded_gradient is None:
            object.__setattr__(self, "bonded_gradient", no_bonded_gradient)
            object.__setattr__(self, "bonded_energy", no_bonded_energy)


@lane_function
def no_bonded_gradient(q, coef, slot, p, s, b):
    """A system without bonds: no bonded force."""
    return 0.0, 0.0, 0.0


@lane_function
def no_bonded_energy(q, coef, slot, p, s, b):
    """A system without bonds: no bonded energy."""
    return 0.0


def all_pairs_potential_template(q, coef, topology, out):
    """V = Σ_{i<j} φ(r_ij²) (J) over every pair; ``pair_energy`` is bound per system (:func:`all_pairs`)."""
    n = q.shape[0]
    for b in range(q.shape[2]):
        out[b] = 0.0
    for i in range(n):
        for j in range(i + 1, n):
            for b in range(q.shape[2]):
                d0, d1, d2, r2 = chord(q, i, j, b)
                out[b] += pair_energy(r2, coef, b, i, j)  # noqa: F821


def all_pairs_gradient_template(q, coef, topology, out):
    """∂V/∂q_i = Σ_j g(r_ij²)(q_i − q_j) (J) over every pair; ``pair_gradient_factor`` is bound per system."""
    n = q.shape[0]
    out[:] = 0.0
    for i in range(n):
        for j in range(i + 1, n):
            for b in range(q.shape[2]):
                d0, d1, d2, r2 = chord(q, i, j, b)
                f = pair_gradient_factor(r2, coef, b, i, j)  # noqa: F821
                out[i, 0, b] += f * d0
                out[i, 1, b] += f * d1
                out[i, 2, b] += f * d2
                out[j, 0, b] -= f * d0
                out[j, 1, b] -= f * d1
                out[j, 2, b] -= f * d2


def all_pairs(energy, gradient_factor, name: str) -> tuple:
    """The all-pairs ``potential`` and ``gradient`` lane functions of a pair potential (a
    :class:`PairPotential`'s ``energy`` and ``gradient_factor``), named after the system ``name``."""
    bindings = {"pair_energy": energy, "pair_gradient_factor": gradient_factor}
    return (lane_function(bind_template(all_pairs_potential_template, f"all_pairs_potential__{name}", bindings)),
            lane_function(bind_template(all_pairs_gradient_template, f"all_pairs_gradient__{name}", bindings)))


class ParameterLookup:
    """``parameter(name)`` for a definition with ``name`` and ``parameters`` (every system family), and
    what parameter values make of its declarations: the space (its layout, e.g. where a tree's quaternions
    are) and the capabilities the methods need."""

    #: the status codes (:mod:`kernels.status`) its kernels set beyond the method's (a flat system's
    #: ``system_admissible``; a subclass declares them as a field)
    statuses: tuple = ()
    #: the short-range pair potential of a particle system (:class:`PairPotential`, (S²)ⁿ only); None for the rest
    pair = None
    #: where a system derived from a user's model file came from (:class:`~kernels.models.ModelInfo`);
    #: None for the built-ins
    model = None

    def bound_space(self, params: dict) -> StateSpace:
        """The state space of a system with these (validated) parameters."""
        return self.space

    def provided(self, params: dict) -> frozenset:
        """The capabilities (``provides``) a system with these parameters has."""
        return self.provides

    def dimension_labels(self, params: dict, n: int) -> dict:
        """Labels of the state's own dims (dim → one label per index) for the store's coordinates; none by
        default."""
        return {}

    def body_properties(self, params: dict, n: int) -> dict:
        """Constant properties of each body that the store keeps beside its state: name → (values (n,) or (members,
        n) of broadcast ``params``, attrs with ``units`` and ``long_name``[, dims of their own]), e.g. a particle's
        type and diameter, or a system's bonds (on (bond, end)); none by default."""
        return {}

    def momentum_map(self, params: dict):
        """The conserved momentum map (state, broadcast params) → (members, ..., k) of a system with these
        parameters, or None (see ``momentum``)."""
        return self.momentum

    def member_coefficients(self, params: dict, n: int, members: int) -> np.ndarray:
        """The coefficients (members, P) of parameters broadcast to ``members``: a definition may give one row
        for all (a model file without parameters cannot tell how many members there are).  A writable copy of the
        call's own: a system's ``coefficients_at`` sets rows of it as the run goes."""
        coef = np.asarray(self.coefficients(params, n), dtype=np.float64)
        return np.broadcast_to(coef, (members, coef.shape[1])).copy()

    def parameter(self, name: str) -> Parameter:
        for p in self.parameters:
            if p.name == name:
                return p
        allowed = ", ".join(p.name for p in self.parameters)
        raise InvalidInput(name, f"unknown parameter of system {self.name!r}; allowed: {allowed}")


@lane_function
def row_scratch(rows, n, lanes):
    """The work of a vector field that needs one scratch row per state row (rows, L)."""
    return np.empty((rows, lanes))


@lane_function
def no_constraint(x, n, coef, topology, work, moved):
    """Systems without constraints to keep: nothing to project (see FlatSystemDefinition.kernel_bindings)."""


@lane_function
def always_admissible(x, n, coef, topology, work, code):
    """Systems whose model holds in every state: no lane to flag (see FlatSystemDefinition.kernel_bindings)."""


@dataclass(frozen=True, kw_only=True)
class FlatSystemDefinition(ParameterLookup):
    """The physics of a system on a flat-layout space (:mod:`kernels.flat_driver`): per-member coefficients
    and a topology, jitted lane functions and lane templates bound into the kernels by name.  It never
    knows which integrator will step it.

    ``kernel_bindings`` is everything a flat kernel binds from its system: ``lane_functions`` (the
    system's own), ``lane_templates``, and what the system may refine of the protocol's defaults:
    ``space_diagnostics(x, n, coef, topology, work, out)`` (the space's constraint diagnostics; a system whose
    constraints the space cannot see computes them), ``space_pull_back`` (the space's), and
    ``system_constrain(x, n, coef, topology, work, moved)``: the projection back onto the system's own
    constraints that the drivers apply after every step (Hairer, Lubich & Wanner, GNI §IV.4), setting
    moved[b] = 1 for each lane it changed; none by default; ``system_admissible(x, n, coef, topology, work,
    code)``: after every step (each accepted step for rk45), code[b] ← one of the system's ``statuses`` for each
    lane whose state has left the model's validity (a rolling ball that would lift off), other lanes untouched;
    none by default; and ``vector_field_work(rows, n, lanes)``: the system's work, allocated once per block by
    the drivers and methods (default: one scratch row per state row), which its ``vector_field``,
    ``system_energy(x, n, coef, topology, work, out)`` and the three above get as ``work``: scratch, whose
    contents no call leaves for the next, so that no lane function allocates (a GPU thread cannot)."""

    name: str
    summary: str
    parameters: tuple[Parameter, ...]
    presets: dict[str, Callable]
    bodies: Callable[[dict], int | None]
    coefficients: Callable[[dict, int], np.ndarray]  # (members, P)
    space: StateSpace
    provides: frozenset
    check: Callable[[dict], None] | None = None
    #: conserved momentum map (members, ..., k) of a state dict with leading axes and broadcast parameters
    momentum: Callable[[dict, dict], np.ndarray] | None = None
    momentum_doc: str = ""
    #: raised when the system's floating-point evaluation changes (a spec then gives other bits); stores
    #: record it and a resume across revisions says so
    revision: int = 1

    def topology(self, params: dict, n: int) -> np.ndarray:
        return np.zeros(1, np.int64)

    @property
    def lane_functions(self) -> dict:  # pragma: no cover - every flat system overrides it
        raise NotImplementedError

    @property
    def lane_templates(self) -> tuple:  # pragma: no cover - every flat system overrides it
        raise NotImplementedError

    @property
    def kernel_bindings(self) -> dict:
        return {"space_diagnostics": self.space.lane["diagnostics"], "space_pull_back": self.space.lane["pull_back"],
                "system_constrain": no_constraint, "system_admissible": always_admissible,
                "vector_field_work": row_scratch, **self.lane_functions}


@dataclass(frozen=True)
class SystemDefinition(ParameterLookup):
    """The physics of one system.  It never knows which integrator will step it."""

    name: str
    summary: str
    parameters: tuple[Parameter, ...]
    presets: dict[str, Callable[[], Preset]]
    diagonal_inertia: bool
    bodies: Callable[[dict], int | None]  # number of bodies implied by parameter values, if any
    inertia: Callable[[dict, int], np.ndarray]  # (members, n) if diagonal else (members, n, n)
    coefficients: Callable[[dict, int], np.ndarray]  # (members, P)
    potential: Any
    gradient: Any
    topology: Callable[[dict, int], np.ndarray] = lambda params, n: np.zeros(1, np.int64)
    symmetry_axis: Callable[[dict], np.ndarray | None] | None = None  # rotation axis V is invariant about
    full_rotation_symmetry: bool = False  # V invariant under every rotation (total angular momentum)
    pair: PairPotential | None = None  # V is a short-range pair sum (enables the system-parallel mode)
    encounter: Any = None  # close-encounter separation and time scale (see the module docstring)
    #: generalised forces, affine in ω: force(t, q, omega, coef, topology, out (n, 3, L)) writes the moments
    #: g_i = q_i × f_i (N·m) that join −q_i × ∂V/∂q_i (Lee–Leok–McClamroch eq. (10)), and
    #: force_damping(q, coef, topology, scale, out (3n, 3n, L)) adds scale · ∂g/∂ω (N·m·s) to ``out``
    force: Any = None
    force_damping: Any = None
    #: whether parameter values (broadcast, per member) switch any force on; unforced runs use kernels
    #: compiled without the force terms
    forced: Callable[[dict], bool] = lambda params: False
    #: configuration-dependent inertia (Lee–Leok–McClamroch eq. (12)): configuration_inertia(q, coef, topology,
    #: out (n, n, L)) writes the scalars m_jk(q) (kg·m²) and configuration_inertia_gradient(q, coef, topology,
    #: out (n, n, n, 3, L)) writes ∂m_jk/∂q_i at out[j, k, i]; ``inertia`` is then unused (None) and only the
    #: Runge–Kutta methods step the system
    configuration_inertia: Any = None
    configuration_inertia_gradient: Any = None
    check: Callable[[dict], None] | None = None  # refuses inconsistent parameter values (InvalidInput)
    #: see :meth:`ParameterLookup.body_properties`, and what they are (name → (dims, unit, meaning), for the docs)
    body_properties: Callable[[dict, int], dict] = lambda params, n: {}
    body_property_docs: dict = field(default_factory=dict)
    #: coefficients that change with time (a protocol): coefficients_at(coef (P, L), t (s)) sets them to their
    #: values at t, called by every CPU runner before it evaluates the forces of the configuration at time t (the
    #: first at the call's start).  ``scheduled(params)``: whether they change for these parameters (the GPU and fire
    #: refuse such a run)
    coefficients_at: Any = constant_coefficients
    scheduled: Callable[[dict], bool] = lambda params: False
    #: each particle's own friction γ_i (1/s) for langevin and brownian, (broadcast params, n) → (members, n) with NaN
    #: where the method's ``friction`` applies, or None where no particle has its own (every particle the method's)
    body_friction: Callable[[dict, int], np.ndarray | None] = lambda params, n: None
    #: the parameters a configuration read from a file fixes, (spec params, the file's configuration as a dict:
    #: type_ids and type_names, diameters, bonds, bond_type_ids and bond_type_names, angles, …, each None where the
    #: file has none) → params to add; None: a system of one kind of unbonded particle (a file of several types, or
    #: with bonds, is refused)
    file_layout: Callable[[dict, dict], dict] | None = None
    #: the particles sampler's placement = "polymers": (params of one member, n, min_separation (m), seed) → q (n, 3)
    #: with the system's bonded chains as random walks; None: a system without bonds
    place_particles: Callable[[dict, int, float, Any], np.ndarray] | None = None
    space: StateSpace = SPHERE_PRODUCT
    provides: frozenset = frozenset({"potential", "gradient", "inertia"})
    #: raised when the system's floating-point evaluation changes (a spec then gives other bits); stores
    #: record it and a resume across revisions says so
    revision: int = 1

    @property
    def momentum(self) -> Callable[[dict, dict], np.ndarray] | None:
        """The conserved momentum map of a state (q, ω with leading axes) and broadcast parameters:
        the total angular momentum when V is invariant under every rotation, its component along
        ``symmetry_axis`` when V is invariant about one axis; None without a symmetry."""
        if self.full_rotation_symmetry:
            return self.angular_momentum
        if self.symmetry_axis is None:
            return None

        def axial(state, params):
            momentum = self.angular_momentum(state, params)
            axis = np.asarray(self.symmetry_axis(params))
            axis = axis.reshape(axis.shape[:1] + (1,) * (momentum.ndim - 2) + (3,))
            return np.sum(momentum * axis, axis=-1, keepdims=True)
        return axial

    @property
    def momentum_doc(self) -> str:
        return ("total angular momentum" if self.full_rotation_symmetry else
                "angular momentum about the symmetry axis" if self.symmetry_axis is not None else "")

    def angular_momentum(self, state: dict, params: dict) -> np.ndarray:
        """Σ_ij M_ij q_i × q̇_j (kg·m²/s), q̇_j = ω_j × q_j, for q and ω of shape (members, ..., n, 3)
        and broadcast parameters; returns (members, ..., 3)."""
        q = np.asarray(state["q"], dtype=np.float64)
        qdot = np.cross(state["omega"], q)
        members, n = q.shape[0], q.shape[-2]
        if self.configuration_inertia is None and self.diagonal_inertia:
            # M_ii q̇_i alone: a dense (n, n) M of 10⁵ particles would take 75 GiB (the other terms are exact zeros)
            mass = self.inertia(params, n).reshape((members,) + (1,) * (q.ndim - 3) + (n, 1))
            momentum = mass * qdot
        else:
            momentum = np.einsum("m...ij,m...jk->m...ik", self.inertia_at(q, params), qdot)
        return np.cross(q, momentum).sum(axis=-2)

    def inertia_at(self, q: np.ndarray, params: dict) -> np.ndarray:
        """M_ij (kg·m²) at configurations q (members, ..., n, 3), as (members, ..., n, n): the constant M
        broadcast, or m_ij(q) of configuration-dependent inertia evaluated at each q."""
        members, n = q.shape[0], q.shape[-2]
        if self.configuration_inertia is None:
            mass = self.inertia(params, n)
            mass = mass[:, :, np.newaxis] * np.eye(n) if mass.ndim == 2 else mass
            return mass.reshape((members,) + (1,) * (q.ndim - 3) + (n, n))
        flat = q.reshape(members, -1, n, 3)
        coef = np.repeat(self.member_coefficients(params, n, members), flat.shape[1], axis=0)
        lanes_q = np.ascontiguousarray(np.moveaxis(flat.reshape(-1, n, 3), 0, -1))
        out = np.empty((n, n, lanes_q.shape[-1]))
        self.configuration_inertia(lanes_q, np.ascontiguousarray(coef.T),
                                   np.ascontiguousarray(self.topology(params, n), dtype=np.int64), out)
        return np.moveaxis(out, -1, 0).reshape(q.shape[:-2] + (n, n))



def _validate_value(system: str, spec: Parameter, value: Any) -> Any:
    if spec.structural:
        try:
            return spec.parse(value) if spec.parse else value
        except InvalidInput:
            raise
        except (TypeError, ValueError) as exc:
            raise InvalidInput(spec.name, f"invalid value for {system}: {exc}") from None
    if spec.check == "cutoff" and value is None:
        value = np.inf  # no cutoff: every pair interacts
    try:
        array = np.array(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise InvalidInput(spec.name, f"must be numeric ({spec.shape}, {spec.unit}), got {value!r}") from None
    if array.size == 0:
        raise InvalidInput(spec.name, f"must not be empty ({spec.shape}, {spec.unit}), got {value!r}")
    if spec.normalise is not None:
        array = spec.normalise(array)
    base = _BASE_NDIM[spec.shape]
    if spec.every_body and array.ndim == base - 1:
        base -= 1  # one number for every body: expanded by bind_system
    if array.ndim not in (base, base + 1):
        raise InvalidInput(
            spec.name,
            f"must have {base} dimension(s) ({spec.shape}) or {base + 1} with a leading member axis, "
            f"got shape {array.shape}",
        )
    if spec.shape in (VECTOR3, PER_BODY_VECTOR3, PER_JOINT_VECTOR3) and array.shape[-1] != 3:
        raise InvalidInput(spec.name, f"last axis must have length 3, got shape {array.shape}")
    if not np.all(np.isfinite(array) | ((spec.check == "cutoff") & (array == np.inf))):
        raise InvalidInput(spec.name, "must be finite")
    if spec.check in ("positive", "cutoff") and not np.all(array > 0):
        raise InvalidInput(spec.name, f"must be > 0 ({spec.unit}), got {value!r}")
    if spec.check == "nonnegative" and not np.all(array >= 0):
        raise InvalidInput(spec.name, f"must be >= 0 ({spec.unit}), got {value!r}")
    if spec.check == "direction":
        norms = np.linalg.norm(array, axis=-1, keepdims=True)
        if not np.all(norms > 0):
            raise InvalidInput(spec.name, "must be a non-zero direction vector")
        array = array / norms
    return array


@dataclass(frozen=True)
class System:
    """A system definition with validated parameter values (some possibly per member)."""

    definition: SystemDefinition
    params: dict
    preset: str | None = None
    preset_state: dict | None = field(default=None, repr=False)

    @property
    def name(self) -> str:
        return self.definition.name

    @property
    def space(self) -> StateSpace:
        return self.definition.bound_space(self.params)

    @property
    def provides(self) -> frozenset:
        return self.definition.provided(self.params)

    @property
    def n_bodies(self) -> int | None:
        return self.definition.bodies(self.params)

    def initial_state(self) -> dict:
        """The preset's initial state: the space's variables by name, each of its per-member shape
        (e.g. {"q": (n, 3), "omega": (n, 3)} on (S²)ⁿ, {"R": (n, 3, 3), "Omega": (n, 3)} on SO(3)ⁿ)."""
        if self.preset_state is None:
            raise InvalidInput("preset", f"system {self.name!r} was built without a preset, so it has no initial state")
        return {name: np.array(value, dtype=np.float64) for name, value in self.preset_state.items()}

    @property
    def forced(self) -> bool:
        """Whether its parameter values switch on any of the system's forces (in any member)."""
        return getattr(self.definition, "forced", lambda params: False)(self.params)

    @property
    def scheduled(self) -> bool:
        """Whether its coefficients change over a run (a protocol: ``coefficients_at``)."""
        return getattr(self.definition, "scheduled", lambda params: False)(self.params)

    def momentum(self, state: dict) -> np.ndarray | None:
        """The system's conserved momentum map (see the definition's ``momentum_doc``) of a state with a
        leading member axis, (members, ..., k); None when the system has no symmetry or forces act
        (they need not respect it)."""
        function = self.definition.momentum_map(self.params)
        if function is None or self.forced:
            return None
        first = np.asarray(state[self.space.variables[0].name])
        return function(state, self.broadcast(first.shape[0], self.space.body_count(state)))

    def per_member_parameters(self) -> tuple[str, ...]:
        """Names of the parameters given with a leading member axis (one value per member)."""
        return tuple(p.name for p in self.definition.parameters
                     if not p.structural and self.params[p.name].ndim == _BASE_NDIM[p.shape] + 1)

    def member_count(self) -> int | None:
        """Number of members implied by per-member parameters (None if all are shared)."""
        counts = {self.params[name].shape[0] for name in self.per_member_parameters()}
        if len(counts) > 1:
            raise InvalidInput("params", f"per-member parameters disagree on the number of members: {sorted(counts)}")
        return counts.pop() if counts else None

    def broadcast(self, members: int, n: int) -> dict:
        """Parameter values with an explicit leading member axis, checked against n bodies."""
        out = {}
        for p in self.definition.parameters:
            value = self.params[p.name]
            if p.structural:
                out[p.name] = value
                continue
            base = _BASE_NDIM[p.shape]
            if value.ndim == base + 1 and value.shape[0] not in (1, members):
                raise InvalidInput(p.name, f"per-member values for {value.shape[0]} members, but there are {members}")
            per_member = value if value.ndim == base + 1 else value[np.newaxis]
            if p.shape in _PER_BODY_SHAPES and per_member.shape[1] != n:
                raise InvalidInput(p.name, f"needs one value per body ({n} bodies), got shape {value.shape}")
            if p.shape in _COUNTED_SHAPES:
                counter, item, items = _COUNTED_SHAPES[p.shape]
                count = getattr(self.definition, counter)(self.params)
                if per_member.shape[1] != count:
                    raise InvalidInput(p.name, f"needs one value per {item} ({count} {items}), got shape {value.shape}")
            out[p.name] = np.broadcast_to(per_member, (members,) + per_member.shape[1:])
        return out

    def _lane_inputs(self, q):
        q = np.asarray(q, dtype=np.float64)
        members, n = q.shape[:2]
        params = self.broadcast(members, n)
        coef = np.ascontiguousarray(self.definition.member_coefficients(params, n, members).T)
        topology = np.ascontiguousarray(self.definition.topology(params, n), dtype=np.int64)
        return np.ascontiguousarray(np.moveaxis(q, 0, -1)), coef, topology, params

    def potential(self, q) -> np.ndarray:
        """V (J) for q of shape (members, n, 3)."""
        lanes_q, coef, topology, _ = self._lane_inputs(q)
        out = np.empty(lanes_q.shape[-1])
        self.definition.potential(lanes_q, coef, topology, out)
        return out

    def gradient(self, q) -> np.ndarray:
        """∂V/∂q (J) for q of shape (members, n, 3), same shape."""
        lanes_q, coef, topology, _ = self._lane_inputs(q)
        out = np.empty_like(lanes_q)
        self.definition.gradient(lanes_q, coef, topology, out)
        return np.moveaxis(out, -1, 0)

    def inertia_matrix(self, members: int, n: int) -> np.ndarray:
        """M (kg·m²) as (members, n, n)."""
        mass = self.definition.inertia(self.broadcast(members, n), n)
        return mass[:, :, np.newaxis] * np.eye(n) if mass.ndim == 2 else mass

    def angular_momentum(self, q, omega) -> np.ndarray:
        """Total angular momentum Σ_ij M_ij q_i × q̇_j (kg·m²/s), q̇_j = ω_j × q_j, for q and ω of shape
        (members, ..., n, 3); returns (members, ..., 3).  Conserved when V is rotation invariant
        (``full_rotation_symmetry``); its component along ``symmetry_axis`` when V is invariant about it."""
        q = np.asarray(q, dtype=np.float64)
        return self.definition.angular_momentum({"q": q, "omega": omega}, self.broadcast(q.shape[0], q.shape[-2]))

    def body_kinetic_energies(self, state: dict) -> np.ndarray:
        """½ M_ii |q̇_i|² (J) per body, q̇_i = ω_i × q_i, for a state {"q", "omega"} of shape (members, ...,
        n, 3); returns (members, ..., n).  Only for diagonal M, where they sum to the kinetic energy."""
        if not self.definition.diagonal_inertia:
            raise InvalidInput("system", f"{self.name} couples bodies through M; per-body kinetic energy is undefined")
        q, omega = np.asarray(state["q"], dtype=np.float64), state["omega"]
        mass = self.definition.inertia(self.broadcast(q.shape[0], q.shape[-2]), q.shape[-2])
        speed_squared = np.sum(np.cross(omega, q) ** 2, axis=-1)
        return 0.5 * mass.reshape((q.shape[0],) + (1,) * (q.ndim - 3) + (q.shape[-2],)) * speed_squared

    def with_params(self, **params) -> "System":
        """A copy with some parameters replaced (validated like get_system's)."""
        merged = dict(self.params)
        for key, value in params.items():
            merged[key] = _validate_value(self.name, self.definition.parameter(key), value)
        _expand_every_body(self.definition, merged)
        if self.definition.check is not None:
            self.definition.check(merged)
        return System(self.definition, merged, self.preset, self.preset_state)


def bind_system(definition, preset: str | None, params: dict) -> System:
    """Validate preset and parameter values and return the bound :class:`System`."""
    values: dict = {}
    state = None
    if preset is not None:
        if preset not in definition.presets:
            allowed = ", ".join(sorted(definition.presets)) or "none"
            raise InvalidInput("preset", f"unknown preset {preset!r} for system {definition.name!r}; allowed: {allowed}")
        chosen = definition.presets[preset]()
        values.update(chosen.params)
        state = chosen.state
    for key in params:
        definition.parameter(key)  # refuses unknown names
    values.update(params)
    validated = {}
    for spec in definition.parameters:
        if spec.name not in values:
            if spec.default is REQUIRED:
                raise InvalidInput(spec.name, f"required parameter of system {definition.name!r} ({spec.doc})")
            values[spec.name] = spec.default
        validated[spec.name] = _validate_value(definition.name, spec, values[spec.name])
    _expand_every_body(definition, validated)
    if definition.check is not None:
        definition.check(validated)
    if state is not None and definition.model is not None and definition.model.initial_state is not None:
        state = definition.model.initial_state(validated)  # a model's initial_state(p) at these parameters
    return System(definition, validated, preset, state)


def _expand_every_body(definition, validated: dict) -> None:
    """Give ``every_body`` parameters their per-body (or per-joint) axis in place: one value (a number,
    vector or tensor) repeated for each of the definition's bodies (joints); per-body values (per member
    or not) are checked against their number."""
    for spec in definition.parameters:
        if not spec.every_body:
            continue
        value = validated[spec.name]
        if spec.shape in _COUNTED_SHAPES:
            counter, what, many = _COUNTED_SHAPES[spec.shape]
            n = getattr(definition, counter)(validated)
        else:
            n, what, many = definition.bodies(validated), "body", "bodies"
        base = _BASE_NDIM[spec.shape]
        if value.ndim == base - 1:
            if n is None:
                raise InvalidInput(spec.name, f"one value for every body needs the number of bodies, which "
                                   f"{definition.name} takes from the state; give one value per body")
            body_axis = value.ndim - (base - 1)  # the body axis comes before the value's own axes
            validated[spec.name] = np.repeat(np.expand_dims(value, body_axis), n, axis=body_axis)
        elif n is not None and value.shape[value.ndim - base] != n:
            raise InvalidInput(spec.name, f"needs one value per {what} ({n} {many}) or one for all, got shape "
                               f"{value.shape}")


def per_body(values: np.ndarray, n: int) -> np.ndarray:
    """A (members,) or (members, n) parameter as (members, n)."""
    return values if values.ndim == 2 else np.repeat(values[:, np.newaxis], n, axis=1)


def unit_rows(vectors) -> np.ndarray:
    """Rows normalised to unit length (for preset initial conditions given to 4 digits)."""
    vectors = np.asarray(vectors, dtype=np.float64)
    return vectors / np.linalg.norm(vectors, axis=-1, keepdims=True)


