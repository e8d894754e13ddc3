"""One member's saved frames as a file that particle viewers (OVITO, VMD, HOOMD-blue's tools, ASE) open: GSD
(:func:`export_gsd`) or extended XYZ (:func:`export_xyz`); ``armillary export`` on the command line.

Nothing here knows a system: the particles' positions are the store's state space's ``points`` of the saved
state variables (:func:`.analysis.store_space`), so any store of a space that declares ``points`` (particles on
spheres) exports, and any other is refused naming ``store``.  Each frame holds, per particle, its position,
its Voronoi coordination number z (the vertex count of its spherical Voronoi region: 6 on a perfect
triangular site; :func:`.particles.voronoi_order`) and its
id (its index, the same in every frame); where the store keeps them (:func:`.configuration.particle_properties`),
its type, diameter, mass and charge, and in GSD its velocity and the bonds and angles.  What Armillary writes,
:func:`.configuration.read_configuration` reads back: positions and angular velocities bitwise (GSD keeps float64
copies in each frame's log), types, bonds and angles exactly.

- Radius: the positions are the unit vectors times 1 (m): the systems live on the unit sphere.  A system
  with a radius parameter would not be scaled by it here (none of the built-ins has one).
- Box: particle viewers want a periodic cell; the frames carry a cubic one of side 2.2 × radius centred on
  the sphere's centre (GSD ``configuration.box = [2.2, 2.2, 2.2, 0, 0, 0]``, extended XYZ ``Lattice`` with
  ``Origin`` at its corner (−1.1, −1.1, −1.1), not periodic), so that the sphere sits inside it with a margin
  and no particle meets its periodic image.
- Files are written whole or not at all: into a temporary file in the destination's folder, renamed over
  the destination at the end.
"""

from __future__ import annotations

import os
import re
import uuid
from typing import NamedTuple

import numpy as np

from armillary.kernels.errors import InvalidInput

from .configuration import (ANGULAR_VELOCITY_LOG, POSITION_LOG, particle_properties, particle_space,
                            stored_angular_velocities, tangent_velocity)
from .particles import VORONOI_MIN_PARTICLES

#: the sphere's radius (m) the unit vectors are scaled by
RADIUS = 1.0
#: the side of the cubic box of every frame, in radii
BOX_SIDE = 2.2
#: the particles' type (GSD) and species (XYZ) name
TYPE_NAME = "A"
#: the coordination written where a frame has no tessellation (coincident particles)
NO_COORDINATION = -1
#: the export formats and their file suffixes
FORMATS = {"gsd": ".gsd", "xyz": ".xyz"}
#: GSD's per-particle field of each per-particle property of a store (:func:`.configuration.particle_properties`),
#: with the factor it is written with (a diameter scales with the radius)
GSD_PARTICLE_FIELDS = {"diameter": ("diameters", RADIUS), "mass": ("masses", 1.0), "charge": ("charges", 1.0)}
#: extended XYZ's column of each per-particle property (a diameter d is written as OVITO's radius d/2), with its
#: factor
XYZ_COLUMNS = {"radius": ("diameters", RADIUS / 2), "mass": ("masses", 1.0), "charge": ("charges", 1.0)}
#: what a type name written into extended XYZ text cannot hold (its columns and quoted values)
XYZ_NAME_BREAKERS = re.compile(r'[\s"]')


class Exported(NamedTuple):
    """What :func:`export_gsd` and :func:`export_xyz` wrote."""

    #: the file written
    path: str
    #: frames written (one per chosen sample with finite positions)
    frames: int
    #: particles per frame
    particles: int
    #: chosen samples skipped because their positions are not finite (not yet written, or a failed member's)
    skipped: int


class _Frame(NamedTuple):
    step: int
    time: float
    positions: np.ndarray  # (N, 3) float64 (m)
    coordination: np.ndarray | None  # (N,) int32, or None below VORONOI_MIN_PARTICLES particles
    angular_velocities: np.ndarray | None  # (N, 3) float64 (rad/s), or None when the store did not keep them


def coordination(points: np.ndarray) -> np.ndarray:
    """Voronoi coordination number z_i (int32, (N,)) of unit vectors ``points`` (N ≥ 4, 3): the vertex count of
    each particle's region of the spherical Voronoi tessellation (radius 1, centre 0); Σ(6 − z_i) = 12 by
    Euler's formula.  :data:`NO_COORDINATION` for every particle where there is no tessellation (coincident
    particles)."""
    from .particles import voronoi_order

    try:
        return np.asarray(voronoi_order(points).coordination, dtype=np.int32)
    except ValueError:  # InvalidInput is one: duplicate or degenerate generators
        return np.full(len(points), NO_COORDINATION, dtype=np.int32)


class _Source:
    """The frames of one member of a store, checked before anything is written."""

    def __init__(self, ds, member: int, every: int):
        space = particle_space(ds, "store")
        members = ds.sizes.get("member", 0)
        if isinstance(member, bool) or not isinstance(member, (int, np.integer)) or not 0 <= member < members:
            raise InvalidInput("member", f"must be a member position 0 … {members - 1} of the store; got {member!r}")
        if isinstance(every, bool) or not isinstance(every, (int, np.integer)) or every < 1:
            raise InvalidInput("every", f"must be a whole number of samples ≥ 1; got {every!r}")
        self.ds, self.space, self.member = ds, space, int(member)
        self.indices = range(0, ds.sizes.get("time", 0), int(every))
        if len(self.indices) == 0:
            raise InvalidInput("store", "holds no saved samples (time has length 0)")
        kept = [name for name in space.names if name in ds]
        try:
            first = self.points(self.indices[0])
        except KeyError as error:
            missing = error.args[0] if error.args else "?"
            raise InvalidInput("output.variables", f"the store keeps no samples of {missing!r} (it keeps "
                                                   f"{', '.join(kept) or 'no state variables'}), which the "
                                                   f"positions come from; add \"{missing}\" to [output] variables "
                                                   "and run the spec again") from None
        if first.ndim != 2 or first.shape[1] != 3:
            raise InvalidInput("store", f"its space's points have shape {first.shape}, not (particles, 3)")
        self.particles = first.shape[0]
        self.properties = particle_properties(ds, self.member)

    def points(self, index: int) -> np.ndarray:
        """Unit vectors (N, 3) of the member at sample ``index``: only the variables ``points`` reads are read."""
        state = {name: self.ds[name].isel(member=self.member, time=index) for name in self.space.names
                 if name in self.ds}
        return np.asarray(self.space.points(state), dtype=np.float64)

    def frames(self, skipped: list):
        """The chosen samples as frames; a sample whose positions are not all finite is left out and its index
        appended to ``skipped``."""
        steps = self.ds["step"].values if "step" in self.ds.coords else None
        times = self.ds["time"].values
        for index in self.indices:
            points = self.points(index)
            if not np.all(np.isfinite(points)):
                skipped.append(index)
                continue
            z = coordination(points) if self.particles >= VORONOI_MIN_PARTICLES else None
            step = int(steps[index]) if steps is not None else int(index)
            yield _Frame(step, float(times[index]), RADIUS * points, z,
                         stored_angular_velocities(self.ds, self.space, self.member, index))


def _destination(path) -> str:
    """``path`` as a string, once its folder exists and is not ``path`` itself a folder."""
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise InvalidInput("output", f"{path!r} is a folder; give a file name")
    if not os.path.isdir(folder):
        raise InvalidInput("output", f"folder {folder!r} does not exist")
    return path


def _write_atomically(path: str, write) -> None:
    """``write(temporary path)``, then the temporary file renamed to ``path``; removed if anything fails.  The
    temporary file is a new name beside ``path`` (so the rename stays on one filesystem), created by ``write``
    as any file is (with the process's umask)."""
    folder, name = os.path.split(os.path.abspath(path))
    temporary = os.path.join(folder, f".{name}.{os.getpid()}.{uuid.uuid4().hex[:12]}.part")
    try:
        write(temporary)
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.remove(temporary)
        raise


def _export(ds, path, member: int, every: int, write) -> Exported:
    path = _destination(path)
    source = _Source(ds, member, every)
    skipped: list = []
    counted: list = []

    def run(temporary):
        counted.append(write(temporary, source, source.frames(skipped)))
        if counted[0] == 0:  # raised before the rename: nothing is left behind
            raise InvalidInput("member", f"member {source.member} has no saved sample with finite positions among "
                                         f"the {len(source.indices)} chosen (not yet run, or failed at its start)")

    _write_atomically(path, run)
    return Exported(path, counted[0], source.particles, len(skipped))


def _gsd_types(ids: np.ndarray | None, names: tuple | None, count: int) -> tuple[list[str], np.ndarray]:
    """GSD's type names and type ids (uint32) of ``count`` particles, bonds or angles: ``ids`` and ``names`` as a
    store keeps them, else one type :data:`TYPE_NAME`."""
    if ids is None:
        return [TYPE_NAME], np.zeros(count, dtype=np.uint32)
    return list(names), ids.astype(np.uint32)


def export_gsd(ds, path, member: int = 0, every: int = 1) -> Exported:
    """Write member ``member`` (its position along ``member``) of the store ``ds`` (from
    :func:`armillary.open_store` or ``xarray.open_zarr``) to the GSD file ``path``, one frame per ``every``-th
    saved sample (0, every, 2·every, …), as HOOMD-blue writes them (``gsd.hoomd``), which OVITO and VMD open.

    Each frame: ``configuration.step`` the sample's ``step``, ``configuration.box`` a cube of side 2.2 × the
    radius ``[2.2, 2.2, 2.2, 0, 0, 0]`` centred on the sphere; ``particles.position`` the space's points (unit
    vectors) × radius 1 — the systems live on the unit sphere; no radius parameter is read — as float32, as
    GSD stores them, and ``log["particles/position_float64"]`` the same as float64, which
    :func:`.configuration.read_configuration` reads back bitwise; ``particles.velocity`` the tangent velocity
    v = ω × r (m/s, float32) and ``log["particles/angular_velocity"]`` ω itself (rad/s, float64), where the store
    kept the angular velocities; ``particles.types`` and ``particles.typeid`` the store's ``particle_type`` and
    its ``type_names`` (else one type ``"A"``); ``particles.diameter`` (m), ``particles.mass`` (kg) and
    ``particles.charge`` where the store keeps ``diameter``, ``mass`` and ``charge``; ``bonds`` (N, group,
    typeid, types) and ``angles`` where it keeps ``bonds`` and ``angles`` (their types from ``bond_type`` and
    ``angle_type``, else one type ``"A"``); and ``log["particles/coordination"]`` (int32) the Voronoi coordination
    numbers, which OVITO reads as a particle property (left out below 4 particles; −1 in a frame with coincident
    particles).  Particles keep their order, so the index is the id.  Samples with non-finite positions (not yet
    run, or a failed member's) are skipped.  The file is written to a temporary file beside ``path`` and renamed at
    the end: a failure leaves nothing.  Raises :class:`InvalidInput` (field ``store``, ``output.variables``,
    ``member``, ``every`` or ``output``) before writing anything.  Returns an :class:`Exported`."""
    import gsd.hoomd

    side = np.float32(BOX_SIDE * RADIUS)

    def write(temporary, source, frames):
        properties = source.properties
        types, typeid = _gsd_types(properties["type_ids"], properties["type_names"], source.particles)
        topology = {name: (properties[name].astype(np.uint32),
                           *_gsd_types(properties[f"{kind}_type_ids"], properties[f"{kind}_type_names"],
                                       len(properties[name])))
                    for name, kind in (("bonds", "bond"), ("angles", "angle"))
                    if properties[name] is not None and len(properties[name])}
        count = 0
        with gsd.hoomd.open(temporary, "w") as trajectory:
            for frame in frames:
                out = gsd.hoomd.Frame()
                out.configuration.step = frame.step
                out.configuration.dimensions = 3
                out.configuration.box = [side, side, side, 0, 0, 0]
                out.particles.N = source.particles
                out.particles.types = types
                out.particles.typeid = typeid
                out.particles.position = frame.positions.astype(np.float32)
                out.log[POSITION_LOG] = frame.positions
                for name, (field, factor) in GSD_PARTICLE_FIELDS.items():
                    if properties[field] is not None:
                        setattr(out.particles, name, factor * properties[field])
                if frame.angular_velocities is not None:
                    out.particles.velocity = tangent_velocity(frame.positions, frame.angular_velocities)
                    out.log[ANGULAR_VELOCITY_LOG] = frame.angular_velocities
                for name, (members, names, ids) in topology.items():
                    group = getattr(out, name)
                    group.N, group.group, group.types, group.typeid = len(members), members, names, ids
                if frame.coordination is not None:
                    out.log["particles/coordination"] = frame.coordination
                trajectory.append(out)
                count += 1
        return count

    return _export(ds, path, member, every, write)


def export_xyz(ds, path, member: int = 0, every: int = 1) -> Exported:
    """Write member ``member`` of the store ``ds`` to the extended XYZ file ``path`` (the ASE and OVITO
    convention), one frame per ``every``-th saved sample: a line with the particle count N, a comment line

        Lattice="2.2 0 0 0 2.2 0 0 0 2.2" Origin="-1.1 -1.1 -1.1" pbc="F F F"
        Properties=species:S:1:pos:R:3:id:I:1:coordination:I:1 Time=… Step=…

    (one line; the cube of side 2.2 × radius centred on the sphere, the sample's time (s) and step), then one
    line per particle: ``A x y z id z_i``.  Positions are the space's points × radius 1 (the unit sphere; no
    radius parameter is read), printed as the shortest decimals that read back as the stored float64;
    ``id`` is the particle's index; ``coordination`` its Voronoi coordination number (the column is left out
    below 4 particles; −1 in a frame with coincident particles).  Where the store keeps them, the species is
    the particle's type name (``particle_type`` and its ``type_names``, which the comment line lists as
    ``type_names="A B …"`` so that the type ids read back), and the columns ``radius:R:1`` (half the ``diameter``,
    m: OVITO's display radius), ``mass:R:1`` (kg) and ``charge:R:1`` follow, exact as the positions.  Velocities,
    bonds and angles are GSD's only.  A type name with white space or ``"`` is refused (field ``store``).
    Skipping, atomic writing, errors and the return value as :func:`export_gsd`."""
    side = BOX_SIDE * RADIUS
    lattice = f'Lattice="{side:g} 0 0 0 {side:g} 0 0 0 {side:g}" Origin="{-side / 2:g} {-side / 2:g} {-side / 2:g}" ' \
              'pbc="F F F"'

    def write(temporary, source, frames):
        properties = source.properties
        names = properties["type_names"]
        if names is None:
            species, listed = [TYPE_NAME] * source.particles, ""
        else:
            broken = [name for name in names if not name or XYZ_NAME_BREAKERS.search(name)]
            if broken:
                raise InvalidInput("store", f"type name {broken[0]!r} cannot be written into extended XYZ (empty, or "
                                            "holding white space or a quote); export as GSD")
            species = [names[k] for k in properties["type_ids"].tolist()]
            listed = f' type_names="{" ".join(names)}"'
        kept = [(name, field, factor) for name, (field, factor) in XYZ_COLUMNS.items() if properties[field] is not None]
        extra = "".join(f":{name}:R:1" for name, _, _ in kept)
        extra_cells = [list(map(repr, (factor * properties[field]).tolist())) for _, field, factor in kept]
        ids = list(map(str, range(source.particles)))
        count = 0
        with open(temporary, "w", encoding="ascii") as out:
            for frame in frames:
                columns = "species:S:1:pos:R:3:id:I:1" + (":coordination:I:1" if frame.coordination is not None
                                                           else "") + extra
                out.write(f"{source.particles}\n{lattice} Properties={columns} Time={frame.time!r} "
                          f"Step={frame.step}{listed}\n")
                cells = [species, *(list(map(repr, axis.tolist())) for axis in frame.positions.T), ids]
                if frame.coordination is not None:
                    cells.append(list(map(str, frame.coordination.tolist())))
                out.writelines(" ".join(row) + "\n" for row in zip(*cells, *extra_cells))
                count += 1
        return count

    return _export(ds, path, member, every, write)


#: format name → its writer
WRITERS = {"gsd": export_gsd, "xyz": export_xyz}


def default_output(store: str, format: str) -> str:
    """The file beside ``store`` named after it: ``runs/md.zarr`` → ``runs/md.gsd`` (``.zarr`` replaced, else the
    suffix appended)."""
    base = os.fspath(store).rstrip("/")
    if base.endswith(".zarr"):
        base = base[:-len(".zarr")]
    return base + FORMATS[format]


def format_of(output: str | None) -> str:
    """The format a file name's suffix names (``.gsd`` or ``.xyz``), else gsd."""
    if output is not None:
        for name, suffix in FORMATS.items():
            if os.fspath(output).lower().endswith(suffix):
                return name
    return "gsd"
