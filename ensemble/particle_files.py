"""A configuration of particles on the unit sphere read from a file (:func:`read_particle_file`): a GSD file (written
by HOOMD-blue, the ``gsd`` library or :func:`.export.export_gsd`) or an extended XYZ file (:func:`.export.export_xyz`,
ASE, OVITO); :mod:`.configuration` reads an Armillary store's too.  (A module of its own: what a spec's
``initial = "file"`` reads (:mod:`.plan`) needs nothing of the stores' analysis.)

What is read, for one frame:

- the particles' unit vectors (n, 3) and, where the file holds velocities, their angular velocities ω (rad/s);
- where the file holds them: each particle's type id and the type names, diameter (m on the unit sphere), mass (kg)
  and charge (the file's units); the bonds (pairs of particle ids) and angles (triples), each with its type ids and
  type names.

The sphere of a file.  A file may hold positions r_i on a sphere of radius R ≠ 1 centred on the origin (a HOOMD-blue
run on a sphere manifold, say).  R is the ``radius`` given, else the particles' mean |r_i|, taken as exactly 1 when
it is within :data:`ROUND_OFF` of 1.  The positions are accepted when every particle's relative deviation
| |r_i|/R − 1 | is within ``tolerance`` (default :data:`~armillary.kernels.spaces.base.STATE_TOLERANCE` = 1e-6, the
tolerance the kernels admit an initial state within: GSD stores positions as float32, whose rounding moves |r_i|/R
by up to about 1e-7, and HOOMD-blue's sphere manifold holds its particles to 1e-6 by default); beyond it they are
refused, naming the worst particle and its deviation.  Accepted positions are put on the unit sphere: those on the
sphere to round-off (every deviation within :data:`ROUND_OFF`, as full-precision positions of the unit sphere are)
by r_i/R only, so that the values Armillary wrote read back bitwise; others by r_i/|r_i|.  Lengths scale with the
sphere (a diameter d reads as d/R) and so do velocities; ω = q × v/R, the angular velocity of v's part tangent to
the sphere (from v = ω × q with ω ⟂ q), so a radial part of v is dropped.

Where :func:`.export.export_gsd` wrote them, a GSD frame's log holds the positions at full precision
(:data:`POSITION_LOG`) and ω exactly (:data:`ANGULAR_VELOCITY_LOG`), which are read instead of the float32
``particles.position`` and ``particles.velocity``.  Extended XYZ text holds positions at full precision already.
"""

from __future__ import annotations

import os
import re
from typing import NamedTuple

import numpy as np

from armillary.kernels.errors import InvalidInput
from armillary.kernels.spaces.base import STATE_TOLERANCE

#: the relative deviation | |r_i|/R − 1 | within which positions count as on the sphere to round-off (far above
#: the 1e-14 of the kernels' own unit vectors, far below float32's 6e-8): those are only scaled by 1/R
ROUND_OFF = 1e-12
#: GSD log quantity of the positions as float64 (m; (N, 3)): ``particles.position`` is float32
POSITION_LOG = "particles/position_float64"
#: GSD log quantity of the angular velocities ω as float64 (rad/s; (N, 3)); ``particles.velocity`` holds ω × q
ANGULAR_VELOCITY_LOG = "particles/angular_velocity"
#: the first bytes of every GSD file
GSD_MAGIC = bytes.fromhex("df65df65df65df65")
#: a store's optional variable of each optional field of a configuration, with its dtype
STORE_VARIABLES = {"type_ids": ("particle_type", np.int32), "diameters": ("diameter", np.float64),
                   "masses": ("mass", np.float64), "charges": ("charge", np.float64), "bonds": ("bonds", np.int64),
                   "bond_type_ids": ("bond_type", np.int32), "angles": ("angles", np.int64),
                   "angle_type_ids": ("angle_type", np.int32)}
#: the field of the type names of each field of type ids (a store keeps them as the ids' attribute ``type_names``)
TYPE_NAMES = {"type_ids": "type_names", "bond_type_ids": "bond_type_names", "angle_type_ids": "angle_type_names"}
#: the extended XYZ columns :func:`read_configuration` reads when the comment line names no ``Properties``
XYZ_PLAIN_COLUMNS = "species:S:1:pos:R:3"
#: a key=value pair of an extended XYZ comment line (the value quoted or not)
XYZ_PAIR = re.compile(r'(\w+)=(?:"([^"]*)"|(\S+))')


class Configuration(NamedTuple):
    """Particles on the unit sphere, as :func:`read_configuration` reads them; every field after ``points`` is None
    where the file does not hold it."""

    #: unit vectors (n, 3) float64, one per particle, in the file's order (a particle's index is its id)
    points: np.ndarray
    #: angular velocities ω (n, 3) float64 (rad/s), tangent to the sphere at ``points`` (ω·q = 0 to round-off)
    angular_velocities: np.ndarray | None = None
    #: type id of each particle (n,) int32, 0 … K − 1: an index into ``type_names``
    type_ids: np.ndarray | None = None
    #: the names of the K particle types
    type_names: tuple[str, ...] | None = None
    #: diameter of each particle (n,) float64 (m, on the unit sphere)
    diameters: np.ndarray | None = None
    #: mass of each particle (n,) float64 (kg)
    masses: np.ndarray | None = None
    #: charge of each particle (n,) float64 (the file's units)
    charges: np.ndarray | None = None
    #: bonds (m, 2) int64: the two particle ids of each
    bonds: np.ndarray | None = None
    #: type id of each bond (m,) int32: an index into ``bond_type_names``
    bond_type_ids: np.ndarray | None = None
    #: the names of the bond types
    bond_type_names: tuple[str, ...] | None = None
    #: angles (k, 3) int64: the three particle ids of each, the vertex in the middle
    angles: np.ndarray | None = None
    #: type id of each angle (k,) int32: an index into ``angle_type_names``
    angle_type_ids: np.ndarray | None = None
    #: the names of the angle types
    angle_type_names: tuple[str, ...] | None = None


def tangent_velocity(positions: np.ndarray, angular_velocities: np.ndarray) -> np.ndarray:
    """v = ω × r (m/s, (n, 3)) of positions r (m, (n, 3)) on a sphere centred on the origin and angular velocities ω
    (rad/s) tangent to it."""
    return np.cross(angular_velocities, positions)


def angular_velocity(points: np.ndarray, velocities: np.ndarray) -> np.ndarray:
    """ω = q × v (rad/s, (n, 3)) of unit vectors ``points`` and velocities (m/s on the unit sphere): the ω ⟂ q with
    ω × q = v's tangent part (v = ω × q and ω·q = 0 give q × v = ω (q·q) − q (q·ω) = ω)."""
    return np.cross(points, velocities)


def read_particle_file(path, frame: int = -1, tolerance: float = STATE_TOLERANCE,
                       radius: float | None = None) -> Configuration:
    """The particles of frame ``frame`` (an index: −1 the last) of the GSD or extended XYZ file ``path``, on the unit
    sphere (see the module's docstring for the sphere of a file, ``radius`` (m) and ``tolerance``): a file starting
    with GSD's magic bytes is GSD (HOOMD schema), any other extended or plain XYZ (columns ``species:S:1``,
    ``pos:R:3`` and, where present, ``velo:R:3`` (m/s), ``radius:R:1`` (half the diameter), ``mass:R:1`` and
    ``charge:R:1``; the type ids follow the comment line's ``type_names="A B …"`` where given, else the species'
    order of first appearance).  Raises :class:`InvalidInput` naming ``file`` (missing, unreadable, positions not
    finite or off the sphere, type or particle ids out of range), ``file.frame``, ``file.radius`` or
    ``file.tolerance``."""
    path = os.fspath(path)
    check_frame(frame)
    if isinstance(tolerance, bool) or not isinstance(tolerance, (int, float)) or not 0 <= tolerance < 1:
        raise InvalidInput("file.tolerance", f"must be a relative deviation 0 ≤ tolerance < 1, got {tolerance!r}")
    if radius is not None and (isinstance(radius, bool) or not isinstance(radius, (int, float))
                               or not 0 < radius < np.inf):
        raise InvalidInput("file.radius", f"must be the sphere's radius (m), a finite number > 0, got {radius!r}")
    if not os.path.isfile(path):
        raise InvalidInput("file", f"{path!r} does not exist")
    with open(path, "rb") as stream:
        reader = _read_gsd if stream.read(len(GSD_MAGIC)) == GSD_MAGIC else _read_xyz
    return checked(reader(path, int(frame), tolerance, radius))


def check_frame(frame) -> None:
    """A frame index (an integer, −1 the last); else InvalidInput naming ``file.frame``."""
    if isinstance(frame, bool) or not isinstance(frame, (int, np.integer)):
        raise InvalidInput("file.frame", f"must be a frame index (an integer, -1 the last), got {frame!r}")


def on_unit_sphere(positions: np.ndarray, radius: float | None, tolerance: float) -> tuple[np.ndarray, float]:
    """(unit vectors (n, 3), the sphere's radius R (m)) of finite positions (n, 3) on a sphere centred on the origin,
    as the module's docstring says; InvalidInput naming ``file`` when a particle is off it beyond ``tolerance``."""
    norms = np.linalg.norm(positions, axis=1)
    if radius is None:
        radius = float(np.mean(norms))
        if radius == 0:
            raise InvalidInput("file", "every particle is at the origin: they lie on no sphere")
        if abs(radius - 1.0) <= ROUND_OFF:
            radius = 1.0
    deviation = np.abs(norms / radius - 1.0)
    worst = int(np.argmax(deviation))
    if deviation[worst] > tolerance:
        raise InvalidInput("file", f"particle {worst} is off the sphere of radius {radius:.9g} m centred on the "
                                   f"origin: | |r|/R - 1 | = {deviation[worst]:.3g} > tolerance {tolerance:g}")
    if deviation[worst] <= ROUND_OFF:
        return positions / radius, radius
    return positions / norms[:, np.newaxis], radius


def _frame_index(frame: int, count: int, what: str) -> int:
    """``frame`` as an index 0 … count − 1 of ``count`` frames (negative: from the end)."""
    if not -count <= frame < count:
        raise InvalidInput("file.frame", f"{what} has {count} frames (indices -{count} … {count - 1}); got {frame}")
    return frame % count


def _finite_positions(positions: np.ndarray, index: int) -> np.ndarray:
    """``positions`` (n, 3) as float64, once every one is finite; refused naming ``file`` and the first particle that
    is not, else."""
    positions = np.asarray(positions, dtype=np.float64)
    if positions.shape[0] == 0:
        raise InvalidInput("file.frame", f"frame {index} holds no particles")
    bad = np.flatnonzero(~np.all(np.isfinite(positions), axis=1))
    if bad.size:
        raise InvalidInput("file", f"particle {bad[0]} of frame {index} has a non-finite position "
                                   f"{positions[bad[0]].tolist()} ({bad.size} particles do)")
    return positions


def checked(configuration: Configuration) -> Configuration:
    """``configuration``, once its type ids index its type names and its bonds and angles name its particles."""
    n = len(configuration.points)
    for ids, names in TYPE_NAMES.items():
        values, known = getattr(configuration, ids), getattr(configuration, names)
        if values is not None and values.size and not (0 <= values.min() and values.max() < len(known)):
            raise InvalidInput("file", f"{ids} run {values.min()} … {values.max()}; there are {len(known)} types "
                                       f"{list(known)}")
    for name in ("bonds", "angles"):
        members = getattr(configuration, name)
        if members is not None and members.size and not (0 <= members.min() and members.max() < n):
            raise InvalidInput("file", f"{name} name particles {members.min()} … {members.max()}; there are {n}")
    return configuration


# ------------------------------------------------------------------------------------------------------------ GSD


def _read_gsd(path: str, frame: int, tolerance: float, radius: float | None) -> Configuration:
    import gsd.hoomd

    try:
        trajectory = gsd.hoomd.open(path, "r")
    except (RuntimeError, OSError) as error:
        raise InvalidInput("file", f"{path!r} is not a readable GSD file of the HOOMD schema ({error})") from None
    with trajectory:
        index = _frame_index(frame, len(trajectory), repr(path))
        data = trajectory[index]

        def written(chunk: str) -> bool:  # in this frame, or in frame 0, which gsd reads a frame's missing chunks from
            return any(trajectory.file.chunk_exists(frame=i, name=chunk) for i in (index, 0))

        positions = _finite_positions(data.log.get(POSITION_LOG, data.particles.position), index)
        points, radius = on_unit_sphere(positions, radius, tolerance)
        fields = {"type_ids": data.particles.typeid.astype(np.int32),
                  "type_names": tuple(str(name) for name in data.particles.types)}
        if ANGULAR_VELOCITY_LOG in data.log:
            fields["angular_velocities"] = np.asarray(data.log[ANGULAR_VELOCITY_LOG], dtype=np.float64)
        elif written("particles/velocity"):
            fields["angular_velocities"] = angular_velocity(points, data.particles.velocity / radius)
        scales = {"diameter": ("diameters", radius), "mass": ("masses", 1.0), "charge": ("charges", 1.0)}
        for chunk, (field, scale) in scales.items():
            if written(f"particles/{chunk}"):
                fields[field] = np.asarray(getattr(data.particles, chunk), dtype=np.float64) / scale
        for group, field in ((data.bonds, "bonds"), (data.angles, "angles")):
            if group.N:
                kind = field[:-1]
                fields[field] = group.group.astype(np.int64)
                fields[f"{kind}_type_ids"] = group.typeid.astype(np.int32)
                fields[f"{kind}_type_names"] = tuple(str(name) for name in group.types)
    return Configuration(points, **fields)


# ------------------------------------------------------------------------------------------------------ extended XYZ


def _read_xyz(path: str, frame: int, tolerance: float, radius: float | None) -> Configuration:
    try:
        with open(path, encoding="utf-8") as stream:
            lines = stream.read().splitlines()
    except UnicodeDecodeError:
        raise InvalidInput("file", f"{path!r} is neither a GSD file nor XYZ text") from None
    starts, at = [], 0
    while at < len(lines) and lines[at].strip():
        try:
            count = int(lines[at])
        except ValueError:
            raise InvalidInput("file", f"{path!r} line {at + 1} should hold a frame's particle count, not "
                                       f"{lines[at][:40]!r}: it is neither a GSD file nor XYZ text") from None
        if at + 2 + count > len(lines):
            raise InvalidInput("file", f"{path!r}: the frame at line {at + 1} is cut short ({count} particles)")
        starts.append(at)
        at += count + 2
    index = _frame_index(frame, len(starts), repr(path))
    first = starts[index] + 2
    count = int(lines[starts[index]])
    info = {match[1].lower(): match[2] if match[2] is not None else match[3]
            for match in XYZ_PAIR.finditer(lines[first - 1])}
    parts = info.get("properties", XYZ_PLAIN_COLUMNS).split(":")
    if len(parts) % 3:
        raise InvalidInput("file", f"{path!r} frame {index}: Properties={info['properties']} is not name:type:count "
                                   "triples")
    columns, width = {}, 0
    for name, _, size in zip(parts[::3], parts[1::3], parts[2::3]):
        columns[name.lower()] = slice(width, width + int(size))
        width += int(size)
    if "pos" not in columns:
        raise InvalidInput("file", f"{path!r} frame {index} has no pos:R:3 column (Properties={parts})")
    rows = [line.split() for line in lines[first:first + count]]
    short = next((k for k, row in enumerate(rows) if len(row) != width), None)
    if short is not None:
        raise InvalidInput("file", f"{path!r} line {first + short + 1} has {len(rows[short])} columns, not {width}")
    table = np.array(rows, dtype=str).reshape(count, width)

    def column(name: str) -> np.ndarray:
        try:
            return table[:, columns[name]].astype(np.float64)
        except ValueError as error:
            raise InvalidInput("file", f"{path!r} frame {index}, column {name}: {error}") from None

    points, radius = on_unit_sphere(_finite_positions(column("pos"), index), radius, tolerance)
    fields = {}
    if "species" in columns:
        species = table[:, columns["species"]][:, 0].tolist()
        names = tuple(info["type_names"].split()) if "type_names" in info else tuple(dict.fromkeys(species))
        lookup = {name: k for k, name in enumerate(names)}
        unknown = sorted(set(species) - lookup.keys())
        if unknown:
            raise InvalidInput("file", f"{path!r} frame {index}: species {unknown} are not among type_names {names}")
        fields["type_ids"] = np.array([lookup[name] for name in species], dtype=np.int32)
        fields["type_names"] = names
    if "velo" in columns:
        fields["angular_velocities"] = angular_velocity(points, column("velo") / radius)
    if "radius" in columns:
        fields["diameters"] = 2.0 * column("radius")[:, 0] / radius
    for name, field in (("mass", "masses"), ("charge", "charges")):
        if name in columns:
            fields[field] = column(name)[:, 0]
    return Configuration(points, **fields)
