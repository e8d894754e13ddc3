"""Rails fixed inside a rolling body, and the point masses that move along them (Putkaradze & Rogers 2018:
"circular rails (mimicking swinging pendula), straight lines, ellipses, figure-eights"; digest_004 §4).

Every rail is one curve of the family, in the body frame, from the geometric centre (m):

    ζ(θ) = c + d θ + a cos θ + b sin θ + f sin 2θ,

so that ζ′ and ζ″ follow in closed form:

- ``circle`` (centre c, normal, radius ρ, optional ``start``): a = ρ u, b = ρ v with u the direction of
  θ = 0 from the centre (``start`` projected onto the rail's plane; by default the plane's direction
  closest to the body's −E₃, so θ = 0 hangs "down" as a pendulum's rest, or E₁ when the normal is E₃) and
  v = normal × u: θ (rad) turns about the normal;
- ``line`` (``point``, ``direction``, ``length``): d = the unit direction, θ (m) the travel from the point,
  within ±length/2;
- ``ellipse`` (``center``, ``axes`` = [a, b], two perpendicular semi-axis vectors);
- ``figure_eight`` (``center``, ``axes`` = [a, f]): the 1:2 Lissajous curve c + a sin θ + f sin 2θ (in the
  family, b = a and the cos θ term 0), whose extents are |a| and |f|.

A mass either follows a **prescribed** law θ(t) = θ₀ + ṙ t + A sin(ν t + φ) (``theta0``, ``rate``,
``amplitude``, ``frequency``, ``phase``; a fixed mass has ṙ = A = 0), moved by an actuator that does
the work the system records, or moves **freely** (frictionless) with θ and θ̇ in the state, pushed along
its rail by a constant generalised force Q (``rail_force``: N·m/rad on a curved rail, N on a line; 0
for a passive mass).

Coefficient layout per mass (``RAIL_ROWS`` rows from the mass's first row): m, c, d, a, b, f (3 each), θ₀, A,
ν, φ, ṙ, Q.  Topology: [number of masses N, number of free masses, then per mass its free-coordinate slot
(−1: prescribed), then per mass whether its rail is curved].
"""

from __future__ import annotations

import numpy as np

from ..errors import InvalidInput
from ..lanes import inline_lane_function, lane_function
from .base import PER_MASS, Parameter

SHAPES = ("circle", "line", "ellipse", "figure_eight")
MOTIONS = ("prescribed", "free")
#: keys of each rail table, beyond ``shape``, ``motion`` and ``name``
_GEOMETRY = {"circle": ("center", "normal", "radius", "start"), "line": ("point", "direction", "length"),
             "ellipse": ("center", "axes"), "figure_eight": ("center", "axes")}
_REQUIRED = {"circle": ("center", "normal", "radius"), "line": ("point", "direction", "length"),
             "ellipse": ("center", "axes"), "figure_eight": ("center", "axes")}

MASS, CENTER, LINEAR, COSINE, SINE, DOUBLE, THETA0, AMPLITUDE, FREQUENCY, PHASE, RATE, FORCE = (
    0, 1, 4, 7, 10, 13, 16, 17, 18, 19, 20, 21)
RAIL_ROWS = 22


def _vector(value, where: str) -> np.ndarray:
    try:
        array = np.array(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise InvalidInput(where, f"must be 3 numbers (m), got {value!r}") from None
    if array.shape != (3,) or not np.all(np.isfinite(array)):
        raise InvalidInput(where, f"must be 3 finite numbers (m), got {value!r}")
    return array


def _length(value, where: str) -> float:
    """A rail's radius or length (m), refused naming ``where`` unless a number > 0."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not np.isfinite(value) or value < 0:
        raise InvalidInput(where, f"must be a number >= 0 (m), got {value!r}")
    if value == 0:
        raise InvalidInput(where, "is 0: a rail of zero length holds no motion (give a length > 0 m)")
    return float(value)


def _unit(value, where: str) -> np.ndarray:
    vector = _vector(value, where)
    norm = np.linalg.norm(vector)
    if norm == 0:
        raise InvalidInput(where, "must be a non-zero direction")
    return vector / norm


def _circle_start(normal: np.ndarray, start) -> np.ndarray | None:
    """The direction of θ = 0: ``start`` (or −E₃, or E₁ if the normal is vertical) in the rail's plane; None
    when ``start`` is parallel to the normal."""
    candidates = [start] if start is not None else [np.array([0.0, 0.0, -1.0]), np.array([1.0, 0.0, 0.0])]
    for candidate in candidates:
        direction = np.asarray(candidate, dtype=np.float64)
        in_plane = direction - np.dot(direction, normal) * normal
        if np.linalg.norm(in_plane) > 1e-9 * max(np.linalg.norm(direction), 1.0):
            return in_plane / np.linalg.norm(in_plane)
    return None


def _curve(table: dict, where: str) -> np.ndarray:
    """(5, 3): c, d, a, b, f of one rail table."""
    shape = table["shape"]
    c = d = a = b = f = np.zeros(3)
    if shape == "circle":
        c = _vector(table["center"], where + ".center")
        normal = _unit(table["normal"], where + ".normal")
        radius = _length(table["radius"], where + ".radius")
        start = None if "start" not in table else _vector(table["start"], where + ".start")
        u = _circle_start(normal, start)
        if u is None:
            raise InvalidInput(where + ".start", "must not be parallel to the circle's normal")
        a, b = radius * u, radius * np.cross(normal, u)
    elif shape == "line":
        c = _vector(table["point"], where + ".point")
        d = _unit(table["direction"], where + ".direction")
        _length(table["length"], where + ".length")
    else:
        axes = table["axes"]
        if not isinstance(axes, (list, tuple)) or len(axes) != 2:
            raise InvalidInput(where + ".axes", f"must be two vectors [a, b] (m), got {axes!r}")
        first, second = (_vector(axis, f"{where}.axes[{k}]") for k, axis in enumerate(axes))
        c = _vector(table["center"], where + ".center")
        if np.linalg.norm(first) == 0 and np.linalg.norm(second) == 0:
            raise InvalidInput(where + ".axes", "are both 0: a rail of zero length holds no motion")
        if shape == "ellipse":
            if abs(np.dot(first, second)) > 1e-12 * np.linalg.norm(first) * np.linalg.norm(second):
                raise InvalidInput(where + ".axes", "an ellipse's semi-axes must be perpendicular")
            a, b = first, second
        else:
            b, f = first, second
    return np.stack([c, d, a, b, f])


def parse_rails(value) -> tuple:
    """The ``rails`` parameter: a list of tables (see the module docstring) → a tuple of (shape, motion,
    name, curve (5 rows c, d, a, b, f of 3 numbers), half length of a line or 0)."""
    if value is None:
        return ()
    if not isinstance(value, (list, tuple)):
        raise InvalidInput("rails", f"must be a list of rail tables {{shape = {' | '.join(SHAPES)}, ...}}, got "
                           f"{value!r}")
    rails = []
    for k, table in enumerate(value):
        where = f"rails[{k}]"
        if isinstance(table, tuple) and len(table) == 5:  # already parsed (a System copied with new values)
            rails.append(table)
            continue
        if not hasattr(table, "keys"):
            raise InvalidInput(where, f"must be a table {{shape = ..., ...}}, got {table!r}")
        shape = table.get("shape")
        if shape not in SHAPES:
            raise InvalidInput(where + ".shape", f"unknown rail shape {shape!r}; allowed: {', '.join(SHAPES)}")
        motion = table.get("motion", "prescribed")
        if motion not in MOTIONS:
            raise InvalidInput(where + ".motion", f"unknown motion {motion!r}; allowed: {', '.join(MOTIONS)}")
        allowed = ("shape", "motion", "name") + _GEOMETRY[shape]
        unknown = sorted(set(table) - set(allowed))
        if unknown:
            raise InvalidInput(f"{where}.{unknown[0]}", f"unknown key of a {shape} rail; allowed: {', '.join(allowed)}")
        missing = [key for key in _REQUIRED[shape] if key not in table]
        if missing:
            raise InvalidInput(f"{where}.{missing[0]}", f"required for a {shape} rail ({', '.join(_REQUIRED[shape])})")
        if motion == "free" and shape == "line":
            raise InvalidInput(where + ".motion", "a free mass needs a closed rail (circle, ellipse or figure_eight): "
                               "a straight rail has ends, which the model does not hold")
        half = 0.5 * float(table["length"]) if shape == "line" else 0.0
        curve = tuple(tuple(row) for row in _curve(table, where).tolist())  # plain numbers: stores keep them as JSON
        rails.append((shape, motion, str(table.get("name", f"mass_{k + 1}")), curve, half))
    return tuple(rails)


def rail_parameters() -> tuple[Parameter, ...]:
    """The rails (structural) and the per-mass values every system with rails takes (sweepable)."""
    return (
        Parameter("rails", "structural", "", "rails fixed in the body, one table per mass: {shape = circle | line | "
                  "ellipse | figure_eight, motion = prescribed | free, and its geometry} (see kernels.systems.rails)",
                  default=(), check="structural", parse=parse_rails),
        Parameter("masses", PER_MASS, "kg", "mass on each rail", default=0.0, check="nonnegative", every_body=True),
        Parameter("theta0", PER_MASS, "rad or m", "prescribed masses: rail coordinate at t = 0", default=0.0,
                  check="finite", every_body=True),
        Parameter("rate", PER_MASS, "rad/s or m/s", "prescribed masses: constant rail rate", default=0.0,
                  check="finite", every_body=True),
        Parameter("amplitude", PER_MASS, "rad or m", "prescribed masses: amplitude A of A sin(nu t + phi)",
                  default=0.0, check="finite", every_body=True),
        Parameter("frequency", PER_MASS, "rad/s", "prescribed masses: angular frequency nu", default=0.0,
                  check="nonnegative", every_body=True),
        Parameter("phase", PER_MASS, "rad", "prescribed masses: phase phi", default=0.0, check="finite",
                  every_body=True),
        Parameter("rail_force", PER_MASS, "N m/rad or N", "free masses: constant generalised force Q along the rail "
                  "(0: passive)", default=0.0, check="finite", every_body=True),
    )


def mass_count(params: dict) -> int:
    return len(params["rails"])


def free_count(params: dict) -> int:
    return sum(motion == "free" for _, motion, _, _, _ in params["rails"])


def rail_points(curve: np.ndarray, theta) -> np.ndarray:
    """ζ(θ) (…, 3) of one rail's curve (5 rows of 3) at θ (…)."""
    theta = np.asarray(theta, dtype=np.float64)[..., np.newaxis]
    c, d, a, b, f = np.asarray(curve, dtype=np.float64)
    return c + d * theta + a * np.cos(theta) + b * np.sin(theta) + f * np.sin(2 * theta)


def check_rails(params: dict, radius, clearance, extra_check=None) -> None:
    """Refuse masses ≤ 0, free masses with prescribed motion (or prescribed ones with a rail force), straight
    rails driven past their ends or at a constant rate, and rails that leave the body: max |ζ(θ)| + clearance
    > radius over the θ a mass can reach."""
    rails = params["rails"]
    masses = np.asarray(params["masses"])
    for k, (shape, motion, name, curve, half) in enumerate(rails):
        if np.any(masses[..., k] <= 0):
            raise InvalidInput("masses", f"mass {k} ({name!r}, on rails[{k}]) must be > 0 kg")
        prescribed = {key: np.asarray(params[key])[..., k] for key in ("rate", "amplitude")}
        if motion == "free":
            for key, value in prescribed.items():
                if np.any(value != 0):
                    raise InvalidInput(key, f"mass {k} ({name!r}) moves freely (rails[{k}].motion = 'free'), so it "
                                       f"takes no prescribed {key}; give one of free or prescribed motion per mass")
            theta = np.linspace(0.0, 2 * np.pi, 4097)
        else:
            if np.any(np.asarray(params["rail_force"])[..., k] != 0):
                raise InvalidInput("rail_force", f"mass {k} ({name!r}) follows a prescribed motion "
                                   f"(rails[{k}].motion = 'prescribed'), so it takes no rail_force; give one of "
                                   "free or prescribed motion per mass")
            theta0 = np.asarray(params["theta0"])[..., k]
            amplitude = np.abs(prescribed["amplitude"])
            if shape == "line":
                if np.any(prescribed["rate"] != 0):
                    raise InvalidInput("rate", f"mass {k} ({name!r}) is on a straight rail, which a constant rate "
                                       "would leave; drive it with amplitude and frequency")
                if np.any(np.abs(theta0) + amplitude > half):
                    raise InvalidInput("amplitude", f"mass {k} ({name!r}) would travel past the ends of rails[{k}] "
                                       f"(|theta0| + |amplitude| > length/2 = {half:g} m)")
                theta = np.array([np.min(theta0 - amplitude), np.max(theta0 + amplitude), -half, half])
            else:
                theta = np.linspace(0.0, 2 * np.pi, 4097)
        reach = np.max(np.linalg.norm(rail_points(curve, theta), axis=-1)) + np.max(clearance)
        if reach > np.min(radius):
            raise InvalidInput(f"rails[{k}]", f"leaves the ball: max |chi| + clearance = {reach:.6g} m > radius "
                               f"{np.min(radius):.6g} m")


def rail_coefficients(params: dict) -> np.ndarray:
    """(members, RAIL_ROWS × masses): each mass's block (see the module docstring)."""
    masses = params["masses"]
    members = masses.shape[0]
    blocks = []
    for k, (_, _, _, curve, _) in enumerate(params["rails"]):
        values = [params[key][:, k] for key in ("theta0", "amplitude", "frequency", "phase", "rate", "rail_force")]
        blocks.append(np.concatenate([masses[:, k:k + 1], np.broadcast_to(np.ravel(curve), (members, 15)),
                                      np.stack(values, axis=1)], axis=1))
    return np.concatenate(blocks, axis=1) if blocks else np.zeros((members, 0))


def rail_topology(params: dict) -> np.ndarray:
    """[masses N, free masses, then per mass its free slot (−1: prescribed), then per mass whether its rail is
    curved (1: ζ has cos θ, sin θ or sin 2θ terms; 0: a straight rail, whose kernels skip the trigonometry)]."""
    slots, curved, free = [], [], 0
    for _, motion, _, curve, _ in params["rails"]:
        slots.append(free if motion == "free" else -1)
        curved.append(int(np.any(np.asarray(curve)[2:] != 0)))
        free += motion == "free"
    return np.array([len(slots), free] + slots + curved, dtype=np.int64)


@inline_lane_function
def rail_axis(coef, j, b, i, theta, s1, c1, s2, c2):
    """Component i of ζ(θ), ζ′(θ), ζ″(θ) of the rail whose block starts at coefficient row j, lane b, given
    sin θ, cos θ, sin 2θ, cos 2θ."""
    c, d = coef[j + CENTER + i, b], coef[j + LINEAR + i, b]
    a, bs, f = coef[j + COSINE + i, b], coef[j + SINE + i, b], coef[j + DOUBLE + i, b]
    return (c + d * theta + a * c1 + bs * s1 + f * s2, d - a * s1 + bs * c1 + 2.0 * f * c2,
            -a * c1 - bs * s1 - 4.0 * f * s2)


@lane_function
def rail_angles(coef, j, b, t, theta, theta_dot, free, curved):
    """θ, θ̇, θ̈ (θ̈ = 0 for a free mass: the system solves for it), sin θ and cos θ of the mass whose block starts at
    coefficient row j, lane b, at time t (s): a free mass is at (θ, θ̇) of the state, a prescribed one where its
    law puts it.  A straight rail (not ``curved``) has no trigonometric terms: its sin θ, cos θ are not evaluated
    (0).  The trigonometry of a mass, apart from its arithmetic (:func:`mass_point`), so that the arithmetic's
    lane loops vectorise."""
    theta_ddot = 0.0
    if not free:
        theta, theta_dot, theta_ddot = prescribed_motion(coef, j, b, t)
    s1 = c1 = 0.0
    if curved:
        s1, c1 = np.sin(theta), np.cos(theta)
    return theta, theta_dot, theta_ddot, s1, c1


@inline_lane_function
def mass_point(coef, j, b, theta, theta_dot, theta_ddot, s1, c1):
    """Body-frame position χ = ζ(θ), velocity χ̇ = ζ′θ̇, acceleration ζ″θ̇² + ζ′θ̈ and the rail tangent ζ′ (twelve
    scalars) of the mass whose block starts at coefficient row j, lane b, from :func:`rail_angles`."""
    s2, c2 = 2.0 * s1 * c1, c1 * c1 - s1 * s1
    p0, t0, k0 = rail_axis(coef, j, b, 0, theta, s1, c1, s2, c2)
    p1, t1, k1 = rail_axis(coef, j, b, 1, theta, s1, c1, s2, c2)
    p2, t2, k2 = rail_axis(coef, j, b, 2, theta, s1, c1, s2, c2)
    square = theta_dot * theta_dot
    return (p0, p1, p2, t0 * theta_dot, t1 * theta_dot, t2 * theta_dot,
            k0 * square + t0 * theta_ddot, k1 * square + t1 * theta_ddot, k2 * square + t2 * theta_ddot, t0, t1, t2)


@lane_function
def mass_kinematics(coef, j, b, t, theta, theta_dot, free, curved):
    """:func:`mass_point` at :func:`rail_angles`: the mass's χ, χ̇, χ̈ (known part) and ζ′ at time t."""
    theta, theta_dot, theta_ddot, s1, c1 = rail_angles(coef, j, b, t, theta, theta_dot, free, curved)
    return mass_point(coef, j, b, theta, theta_dot, theta_ddot, s1, c1)


@lane_function
def prescribed_motion(coef, j, b, t):
    """θ(t), θ̇(t), θ̈(t) of the prescribed mass whose block starts at coefficient row j, lane b (without an
    amplitude the sine's factors are not evaluated)."""
    amplitude, frequency = coef[j + AMPLITUDE, b], coef[j + FREQUENCY, b]
    s = c = 0.0
    if amplitude != 0.0:
        angle = frequency * t + coef[j + PHASE, b]
        s, c = np.sin(angle), np.cos(angle)
    return (coef[j + THETA0, b] + coef[j + RATE, b] * t + amplitude * s,
            coef[j + RATE, b] + amplitude * frequency * c, -amplitude * frequency * frequency * s)
