"""A configuration of particles on the unit sphere (:class:`~.particle_files.Configuration`) from a GSD or extended
XYZ file (:mod:`.particle_files`) or from an Armillary store (a Zarr folder: one saved sample of one member), and
what :mod:`.export` reads of a store's particles: their space, angular velocities and per-particle properties.
"""

from __future__ import annotations

import os

import numpy as np

from armillary.kernels.errors import InvalidInput

from .particle_files import (ANGULAR_VELOCITY_LOG, POSITION_LOG, STATE_TOLERANCE, STORE_VARIABLES, TYPE_NAMES,
                             Configuration, angular_velocity, check_frame, checked, read_particle_file,
                             tangent_velocity)

__all__ = ["ANGULAR_VELOCITY_LOG", "POSITION_LOG", "Configuration", "angular_velocity", "particle_properties",
           "particle_space", "read_configuration", "store_configuration", "stored_angular_velocities",
           "tangent_velocity"]


def read_configuration(path, frame: int = -1, tolerance: float = STATE_TOLERANCE, radius: float | None = None,
                       member: int = 0) -> Configuration:
    """The particles of frame ``frame`` (an index: −1 the last) of ``path``, on the unit sphere: a folder is an
    Armillary store (frame ``frame`` of member ``member``: its saved samples with finite positions, in time order,
    as :func:`.export.export_gsd` writes them as frames; the store's unit vectors as they are, ``radius`` and
    ``tolerance`` unused), any other path a GSD or extended XYZ file (:func:`.particle_files.read_particle_file`,
    which says what ``radius`` (m) and ``tolerance`` do).  Raises :class:`InvalidInput` naming ``file``,
    ``file.frame``, ``file.member``, ``file.radius`` or ``file.tolerance``."""
    path = os.fspath(path)
    if os.path.isdir(path):
        check_frame(frame)
        return _read_store(path, int(frame), member)
    return read_particle_file(path, frame, tolerance, radius)


# ---------------------------------------------------------------------------------------------------- Armillary stores


def particle_space(ds, field: str):
    """The state space of the store ``ds``, once it declares particle positions (``points``); else InvalidInput
    naming ``field``."""
    from .analysis import store_space

    space = store_space(ds)
    if not callable(getattr(space, "points", None)):
        raise InvalidInput(field, f"its system {ds.attrs.get('system', '?')} (space {space.name}) has no particles "
                                  "on spheres")
    return space


def stored_angular_velocities(ds, space, member: int, index: int) -> np.ndarray | None:
    """The angular velocities (n, 3) float64 (rad/s) of member ``member`` at sample ``index`` of the store ``ds`` of
    the state space ``space``: its state variable in rad/s on (body, xyz); None when the store did not keep it."""
    name = next((variable.name for variable in space.variables
                 if variable.unit == "rad/s" and variable.dims == ("body", "xyz")), None)
    if name is None or name not in ds:
        return None
    return np.asarray(ds[name].isel(member=member, time=index).values, dtype=np.float64)


def particle_properties(ds, member: int) -> dict:
    """The fields of :class:`Configuration` after ``angular_velocities`` of member ``member`` of the store ``ds``,
    each None where the store keeps no such variable: its optional variables ``particle_type`` (body,) with attribute
    ``type_names``, ``diameter`` (m), ``mass`` (kg), ``charge``, ``bonds`` (bond, end), ``bond_type`` (bond,),
    ``angles`` (angle, vertex) and ``angle_type`` (angle,), each type variable with attribute ``type_names``; a
    variable on (member, body) gives the member's row."""
    fields = dict.fromkeys(Configuration._fields[2:])
    for field, (name, dtype) in STORE_VARIABLES.items():
        if name not in ds:
            continue
        variable = ds[name].isel(member=member) if "member" in ds[name].dims else ds[name]
        fields[field] = np.asarray(variable.values, dtype=dtype)
        if field in TYPE_NAMES:
            if "type_names" not in variable.attrs:
                raise InvalidInput("store", f"its variable {name} has no attribute type_names")
            fields[TYPE_NAMES[field]] = tuple(str(type_name) for type_name in variable.attrs["type_names"])
    return fields


def store_configuration(ds, member: int = 0, frame: int = -1) -> Configuration:
    """The configuration of member ``member`` (its position along ``member``) of the store ``ds`` at its saved sample
    ``frame``: an index into the samples whose positions are all finite (those written: a run not yet finished, or a
    member that failed, leaves NaN), −1 the last; the store's unit vectors as they are, its angular velocities and
    the optional variables of :func:`particle_properties`.  InvalidInput naming ``file``, ``file.member`` or
    ``file.frame``."""
    from .analysis import particle_points

    space = particle_space(ds, "file")
    members = ds.sizes.get("member", 0)
    if isinstance(member, bool) or not isinstance(member, (int, np.integer)) or not 0 <= member < members:
        raise InvalidInput("file.member", f"must be a member position 0 … {members - 1} of the store; got {member!r}")
    samples = ds.sizes.get("time", 0)
    wanted, order = (-frame - 1, range(samples - 1, -1, -1)) if frame < 0 else (frame, range(samples))
    saved = 0
    for index in order:
        try:
            points = np.asarray(particle_points(ds, int(member), index), dtype=np.float64)
        except KeyError as error:
            raise InvalidInput("file", f"the store keeps no samples of {error.args[0]!r}, which the positions come "
                                       "from") from None
        if not np.all(np.isfinite(points)):
            continue
        if saved == wanted:
            return checked(Configuration(points, stored_angular_velocities(ds, space, int(member), index),
                                          **particle_properties(ds, int(member))))
        saved += 1
    raise InvalidInput("file.frame", f"member {member} of the store has {saved} saved samples with finite positions; "
                                     f"got frame {frame}")


def _read_store(path: str, frame: int, member: int) -> Configuration:
    from .accessor import open_store

    try:
        ds = open_store(path)
    except (FileNotFoundError, ValueError, KeyError) as error:
        raise InvalidInput("file", f"{path!r} is a folder but not an Armillary store ({error})") from None
    return store_configuration(ds, member, frame)
