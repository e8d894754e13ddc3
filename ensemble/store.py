"""The Zarr v3 store of a run: template, chunk-aligned region writes, checkpoints and completion
records (its lock: :mod:`ensemble.lock`).

Layout (``xarray.open_zarr(path)`` opens it as is), all following from the system's space
(:mod:`kernels.spaces`): dims ``member``, ``time`` and the space's own (``body``, ``xyz``; ``row``,
``col``); coords ``member``, ``time`` (s), ``step`` (on ``time``) and one per swept parameter (on
``member``); data: the state variables requested in ``output.variables`` (e.g. ``q``, ``omega`` or
``R``, ``Omega``), ``energy`` and the space's diagnostics, the initial values ``<name>0``,
``status``, ``failed_step``.  Zarr chunks are (spec chunk members) × (samples per segment), so every
task writes whole chunks and each chunk has exactly one writer.

The group ``_progress`` (invisible to xarray) holds per (chunk, segment) completion records
(``done``: Unix time, ``seconds``: task time, ``write_seconds``: of which writing), written only after the data they vouch for,
the number of tasks that started each (``attempts``), and two checkpoint slots of end-of-segment
state per member: segment j reads slot (j−1) mod 2 and writes slot j mod 2, so a task killed
half-way never damages the state it started from.

Every chunk ends in a CRC-32C of its bytes and every chunk a task writes is stored (even one equal
to the fill value): a read of a damaged chunk raises :class:`DamagedStore` naming the array and the
chunk, and :mod:`ensemble.verify` can tell a lost chunk from one never written.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import time
import warnings
from datetime import datetime, timezone
from importlib.metadata import version

import numpy as np
import zarr
from zarr.codecs import Crc32cCodec, ZstdCodec
from zarr.core.sync import sync as zarr_sync

from armillary.kernels import STATUS_MEANINGS, InvalidInput
from armillary.kernels.lyapunov import indicator_rows
from armillary.kernels.system_parallel import sums_all_pairs, system_mode_revision
from armillary.kernels.status import ESCAPED, NOT_FAILED

from .errors import DamagedStore, StoreError
from .lock import is_local, read_lock
from .plan import Plan
from .progress import ATTEMPTS, PROGRESS, RECORDS
from .spec import OPTION_SWEEPS, option_unit, parse_spec
from .spec_keys import section_prefix

#: the codecs after serialisation of every array a store holds: each chunk ends in a CRC-32C of its
#: (compressed) bytes, checked on every read, so a flipped bit or a truncated chunk is refused, not
#: read as other numbers.  Checkpoint slots and records are small and full-precision: checksum only.
COMPRESSED_CHECKSUMMED = (ZstdCodec(level=0), Crc32cCodec())
CHECKSUMMED = (Crc32cCodec(),)
#: the initial states ``<name>0`` are full-precision values that zstd shrinks by 7 % (a perturbed preset,
#: 500 000 members) at 5× the write time (58 against 11 ms for 36 MB; the CRC adds 5 ms): checksum only,
#: like the checkpoint slots.  Time series over (member, time), energy above all, shrink to 2/3: compressed.
INITIAL_STATE_CODECS = CHECKSUMMED
#: every chunk a task writes is stored even when it equals the fill value (an all-OK ``status``
#: chunk is all zeros), so that a missing chunk always means a lost one
WRITE_EVERY_CHUNK = {"write_empty_chunks": True}
#: attributes of the variables every store has, whatever its space
COMMON_ATTRS = {
    "energy": ("J", "total energy"),
    "status": ("1", "per-member status code (meanings in the store attribute status_meanings)"),
    "failed_step": ("1", "step at which the member failed (-1: never)"),
    "lyapunov": ("1/s", "finite-time maximal Lyapunov exponent at the end of the run (Benettin)"),
    "lyapunov_estimate": ("1/s", "running finite-time maximal Lyapunov exponent (Benettin)"),
    "min_separation": ("1", "least close-encounter separation reached over every step so far (the system's "
                       "distance from its singularity)"),
    "sample_lag": ("s", "time of the saved step minus the sample's nominal time (adaptive steps)"),
    "work": ("J", "work done by the forces since t = 0 (E(t) - E(0) - work is the integrator's error)"),
    "heat": ("J", "heat the bath gave since t = 0 (E(t) - E(0) - heat is the integrator's error)"),
    "largest_force": ("J", "largest tangential force max_i |P_i dV/dq_i| (a minimisation: fire; its energy is V)"),
    "minimisation_steps": ("1", "steps the minimisation has taken (fire; they stop once it converged)"),
}
LYAPUNOV_VARIABLES = ("lyapunov", "lyapunov_estimate")
#: the chaos indicators' variables beyond λ: (dims, units, long name); ``exponent`` counts the spectrum's
INDICATOR_ATTRS = {
    "lyapunov_spectrum": (("member", "exponent"), "1/s", "finite-time Lyapunov exponents at the end of the run, "
                          "largest first (Benettin's spectrum)"),
    "lyapunov_spectrum_estimate": (("member", "time", "exponent"), "1/s", "running finite-time Lyapunov "
                                   "exponents, largest first"),
    "megno": (("member", "time"), "1", "MEGNO <Y>(t) as of the last renormalisation (2: quasi-periodic, grows "
              "like λt/2: chaotic)"),
    "megno_final": (("member",), "1", "MEGNO <Y> at the end of the run"),
    "sali": (("member", "time"), "1", "SALI of two deviation vectors (→ 0 exponentially: chaotic)"),
    "gali": (("member", "time"), "1", "GALI_k of the spectrum's k deviation vectors"),
}
#: the variables each [analysis] indicator adds to a store
INDICATOR_VARIABLES = {"lyapunov": LYAPUNOV_VARIABLES,
                       "lyapunov_spectrum": ("lyapunov_spectrum", "lyapunov_spectrum_estimate"),
                       "megno": ("megno", "megno_final"), "sali": ("sali",)}
#: the variables ``[analysis] section`` adds: (dims, units, long name); ``section_<variable>`` stands for each
#: recorded state variable, with that variable's dims after (member, crossing) and its units.  Each of
#: ``[analysis] sections`` adds the same with ``section_<name>_`` for ``section_`` (:func:`.spec_keys.section_prefix`).
SECTION_ATTRS = {
    "section_time": (("member", "crossing"), "s", "time of each crossing of the surface of section, located inside "
                     "its step (NaN past the member's count)"),
    "section_count": (("member",), "1", "crossings found so far, also those past max_crossings (not stored)"),
    "section_<variable>": (("member", "crossing", "…"), "the variable's", "a recorded state variable at each "
                           "crossing, put back on the manifold"),
    "escape_time": (("member",), "s", "time of the member's first crossing of the escape section (NaN: none yet); "
                    "`[analysis] escape`"),
}
#: the status meanings of stores written before they were stored as an attribute (all (S²)ⁿ codes)
#: the data variables and checkpoint slots of integers (the others are float64), besides each section's count
INTEGER_VARIABLES = ("status", "failed_step")
#: at most this many particles per Zarr chunk of a system-mode store's per-particle variables
#: (:func:`particle_variables`, :func:`particles_per_chunk`): the ranks of one member on MPI (:mod:`.mpi`) each write
#: whole chunks of the ids they hold
PARTICLES_PER_CHUNK = 16384
#: crossings per Zarr chunk of the section variables: a segment rewrites only the chunks its new crossings fall in,
#: so few, about a segment's crossings per member (64 made every segment recompress chunks of 64 columns for a
#: few new ones: 5.5 s of writing against 2.9 s for 669k crossings of 20000 members, benchmarks/sections.py)
CROSSINGS_PER_CHUNK = 8
LEGACY_STATUS = {str(code): meaning for code, meaning in STATUS_MEANINGS.items()}


def variable_layout(plan: Plan) -> dict[str, tuple[tuple, tuple[str, ...], str, str]]:
    """name → (shape, dims, units, long name) of every data variable a store of ``plan`` can hold, from
    the space's declarations: its state variables over (member, time), their initial values
    ``<name>0``, the energy and diagnostics over (member, time), status, failed_step, Lyapunov."""
    space, members, samples, n = plan.space, plan.spec.members, plan.samples, plan.n_bodies
    layout = {}
    for v in space.variables:
        shape = tuple(v.shape(n))
        layout[v.name] = ((members, samples) + shape, ("member", "time") + v.dims, v.unit, v.long_name)
        layout[v.name + "0"] = ((members,) + shape, ("member",) + v.dims, v.unit, "initial " + v.long_name)
    for d in space.diagnostics + space.optional_diagnostics:
        layout[d.name] = ((members, samples), ("member", "time"), d.unit, d.long_name)
    for name, (unit, long_name) in COMMON_ATTRS.items():
        over_time = name in ("energy", "lyapunov_estimate", "sample_lag", "work", "heat", "largest_force")
        layout[name] = ((members, samples) if over_time else (members,), ("member", "time") if over_time
                        else ("member",), unit, long_name)
    if plan.spec.escape is not None:
        dims, unit, long_name = SECTION_ATTRS["escape_time"]
        layout["escape_time"] = ((members,), dims, unit, long_name)
    for section in plan.spec.surfaces:
        layout.update(section_layout(plan, section))
    exponents = (plan.spec.lyapunov_spectrum or {}).get("count", 0)
    sizes = {"member": members, "time": samples, "exponent": exponents}
    for name, (dims, unit, long_name) in INDICATOR_ATTRS.items():
        layout[name] = (tuple(sizes[d] for d in dims), dims, unit, long_name)
    return layout


def particles_per_chunk(n: int) -> int:
    """The particle axis's chunk of a system-mode store of n particles: an eighth of them (whole multiples of 256),
    between 256 and PARTICLES_PER_CHUNK, so that up to 8 ranks of a small run each write chunks of their own."""
    return min(PARTICLES_PER_CHUNK, n, max(256, -(-n // 8 // 256) * 256))


def particle_variables(plan: Plan) -> set[str]:
    """The variables with a particle axis that a system-mode run's ranks write by id range (:mod:`.mpi`): the state
    over time, its initial values and its checkpoint slots (the same names), chunked PARTICLES_PER_CHUNK particles to
    a chunk, so that each Zarr chunk has one writer.  None in the ensemble mode."""
    if plan.mode != "system":
        return set()
    return set(plan.space.names) | {name + "0" for name in plan.space.names}


def capacity_of(plan: Plan) -> int:
    """The length of a store's ``crossing`` dimension: the largest max_crossings of its sections."""
    return max(table["max_crossings"] for table in plan.spec.surfaces.values())


def crossing_variables(plan: Plan, section: str) -> list[str]:
    """The store variables over (member, crossing, …) of the named section: its time, then each recorded variable."""
    prefix = section_prefix(section)
    return [prefix + "time"] + [prefix + name for name in plan.recorded(section)]


def section_layout(plan: Plan, section: str) -> dict[str, tuple[tuple, tuple[str, ...], str, str]]:
    """:func:`variable_layout`'s entries of one surface of section, by name: its time, count and recorded state
    variables over one ``crossing`` dimension as long as the largest max_crossings of the spec's sections."""
    prefix, members, n = section_prefix(section), plan.spec.members, plan.n_bodies
    crossings = capacity_of(plan)
    about = "" if section == "section" else f" {section}"
    layout = {}
    for name in ("section_time", "section_count"):
        dims, unit, long_name = SECTION_ATTRS[name]
        layout[prefix + name[len("section_"):]] = ((members, crossings)[:len(dims)], dims, unit,
                                                  long_name.replace("surface of section", f"surface of section{about}"))
    for v in plan.space.variables:
        if v.name in plan.recorded(section):
            layout[prefix + v.name] = ((members, crossings) + tuple(v.shape(n)), ("member", "crossing") + v.dims,
                                       v.unit, f"{v.long_name} at each crossing of the surface of section{about}")
    return layout


def is_integer_variable(name: str) -> bool:
    """Whether a data variable or checkpoint slot holds integers (a status, a step, a section's count)."""
    return name in INTEGER_VARIABLES or (name.startswith("section_") and name.endswith("_count"))


def indicator_variables(spec) -> list[str]:
    """The chaos indicators' variables a store of ``spec`` keeps (GALI_k with SALI and a spectrum of k ≥ 3)."""
    names = [name for indicator, names in INDICATOR_VARIABLES.items() if getattr(spec, indicator) for name in names]
    if spec.sali and (spec.lyapunov_spectrum or {}).get("count", 0) >= 3:
        names.append("gali")
    return names


def shadow_slot_shapes(plan: Plan) -> dict[str, tuple]:
    """Per-member shapes of the shadows' checkpoint slots: each variable's with a leading axis of k
    shadows, log_growth and reference (k,), indicators (2 + k²,).  One shadow keeps the slots of stores
    of before the spectrum (no shadow axis), so that they resume."""
    count = plan.spec.shadows["count"]
    lead = () if count == 1 else (count,)
    shapes = {"shadow_" + name: lead + shape for name, shape in plan.space.shapes(plan.n_bodies).items()}
    shapes.update(log_growth=lead, reference=lead)
    if plan.spec.megno or plan.spec.sali:  # MEGNO's sums and the alignment matrix carry over segments
        shapes["indicators"] = (indicator_rows(count),)
    return shapes


def checkpoint_names(plan: Plan) -> tuple[str, ...]:
    """Per-member state a segment hands to the next through the checkpoint slots: the state variables,
    the method's carried solver state (and a forced run's work or a bath's heat), status, failed_step; with ``[analysis]``
    indicators also the shadows (:func:`shadow_slot_shapes`); for systems with encounters the running
    ``min_separation``."""
    names = plan.space.names + plan.carried + ("status", "failed_step")
    if plan.tracks_encounters:
        names += ("min_separation",)
    if plan.spec.shadows:
        names += tuple(shadow_slot_shapes(plan))
    names += tuple(section_prefix(section) + "count" for section in plan.spec.surfaces)
    if plan.spec.escape is not None:
        names += ("escape_time",)
    return names


def _quiet(function, *args, **kwargs):
    """Zarr warns on every consolidated write that consolidation is not in the v3 spec; we know."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Consolidated metadata", category=UserWarning)
        return function(*args, **kwargs)


# ------------------------------------------------------------------------------------------ template

def existing_identity(url: str) -> str | None:
    """The spec identity recorded in the store at ``url``; None if nothing is there.  Raises
    StoreError for something that is not an armillary store."""
    if is_local(url):
        path = url
        if not os.path.exists(path):
            return None
        if not os.path.isdir(path):
            raise StoreError(f"{path!r} exists and is not a directory")
        if not os.path.exists(os.path.join(path, "zarr.json")):
            if not os.listdir(path):
                return None
            raise StoreError(f"{path!r} exists and is not a Zarr store (refusing to touch it)")
    try:
        group = zarr.open_group(url, mode="r")
    except (FileNotFoundError, zarr.errors.GroupNotFoundError):
        return None
    if "spec" not in group.attrs:
        raise StoreError(f"{url!r} is a Zarr store but not one written by armillary")
    return group.attrs.get("identity")  # None: a template interrupted while being written, to be redone


def _mode_revision(plan) -> int:
    """The revision of the system mode's sums a run of ``plan`` in that mode records: its device's neighbour lists',
    or the all-pairs term's (a pair potential without a cutoff)."""
    return system_mode_revision(plan.spec.device, sums_all_pairs(plan.chunk_system(0, 1), plan.n_bodies))


def revision_change(plan) -> str | None:
    """A one-line note when the store was written by another revision of its system's or its method's numerics, or,
    run in the system-parallel mode, of that mode's sums (stores from before revisions were recorded are revision
    1): segments run now give other bits than the ones already written, so the resumed run is no longer bitwise one
    uninterrupted run."""
    definition, method = plan.system.definition, plan.method
    attrs = zarr.open_group(plan.spec.store, mode="r").attrs
    written, method_written = attrs.get("system_revision", 1), attrs.get("method_revision", 1)
    notes = []
    if written != definition.revision:
        notes.append(f"revision {written} of {definition.name}'s numerics, this is revision {definition.revision}")
    if method_written != method.revision:
        notes.append(f"revision {method_written} of {method.name}'s numerics, this is revision {method.revision}")
    mode_written, mode_revision = attrs.get("system_mode_revision", 1), _mode_revision(plan)
    if plan.mode == "system" and mode_written != mode_revision:
        notes.append(f"revision {mode_written} of the system-parallel mode's sums, this is revision {mode_revision}")
    if not notes:
        return None
    how = "draw other noise than" if method_written != method.revision and method.stochastic else \
        "differ in the last bits from"
    return (f"note: {plan.spec.store!r} was written by {' and '.join(notes)}: the segments run now {how} the ones "
            f"written")


def check_writable(url: str) -> None:
    """Refuse a store location that cannot be created, before anything is written."""
    if not is_local(url):
        return
    parent = os.path.dirname(os.path.abspath(url))
    probe = parent
    while not os.path.exists(probe):
        probe = os.path.dirname(probe)
    if not os.path.isdir(probe) or not os.access(probe, os.W_OK | os.X_OK):
        raise StoreError(f"cannot create {url!r}: {probe!r} is not a writable directory")


def remove_store(url: str) -> None:
    """Delete a store (for --overwrite, or an interrupted template); the caller holds its lock."""
    if is_local(url):
        shutil.rmtree(url, ignore_errors=True)
    else:
        zarr.open_group(url, mode="w")


def _versions() -> dict:
    return {f"{name}_version": version(name) for name in ("armillary", "numba", "numpy", "dask", "zarr", "xarray")}


def coordinates(plan: Plan) -> dict[str, tuple[str, np.ndarray, dict]]:
    """name → (dim, values, attrs) of the store's coordinates: member ids, time (s), step, one per swept
    parameter, labels of the state's own dims that the system declares, and those the initial-condition
    sampler varies over members; all follow from the spec (so ``verify --repair`` can rewrite them)."""
    steps, members = plan.sample_steps, plan.spec.members
    coords = {
        "member": ("member", np.arange(members), {"long_name": "global member id"}),
        "time": ("time", steps * plan.spec.dt, {"units": "s", "long_name": "time"}),
        "step": ("time", steps, {"long_name": "step number"}),
    }
    swept = plan.sweep_values(np.arange(members))
    # what the system's definition adds (units, labels) is left out for a store's model, which is not run to
    # read the store back: only a run writes the template, and verify --repair rewrites values alone
    definition = plan.system.definition if plan.has_system else None
    for sweep in plan.spec.sweeps:  # named by the key as written: "phase", or "phase[1]" for one component
        unit = definition.parameter(sweep.parameter).unit if definition else ""
        coords[sweep.name] = ("member", swept[sweep.name],
                              {"units": unit, "long_name": f"swept parameter {sweep.name}"})
    for sweep in plan.spec.option_sweeps or ():  # the bath's: bath_temperature, active_speed, …
        option = next(path for path, coordinate in OPTION_SWEEPS.items() if coordinate == sweep.name)
        coords[sweep.name] = ("member", swept[sweep.name],
                              {"units": option_unit(option), "long_name": f"swept integrator.{option}"})
    # labels a system gives its state's own dims, e.g. the name of each joint coordinate of a multibody tree
    labels = definition.dimension_labels(plan.system.params, plan.n_bodies) if definition else {}
    for dim, values in labels.items():
        coords[dim] = (dim, np.array(values, dtype=object), {"long_name": f"{dim} label"})  # UTF-8 strings
    # constant properties of the bodies (a particle's type, diameter, mass): on (body,), or (member, body) when
    # some member's differ
    properties = (definition.body_properties(plan.chunk_system(0, members).broadcast(members, plan.n_bodies),
                                             plan.n_bodies) if definition else {})
    for name, (values, attrs, *dims) in properties.items():
        values = np.asarray(values)
        if dims:  # on dims of its own (a bond's two particles)
            coords[name] = (dims[0], values, attrs)
            continue
        shared = values.ndim == 1 or bool(np.all(values == values[:1]))
        coords[name] = (("body",) if shared else ("member", "body"), values if values.ndim == 1 else
                        values[0] if shared else values, attrs)
    sampler = plan.space.samplers.get(plan.spec.initial)
    if sampler is not None and sampler.coordinates is not None:
        for name, (values, unit, long_name) in sampler.coordinates(np.arange(members), plan.spec.sampler).items():
            coords[name] = ("member", values, {"units": unit, "long_name": long_name})
    return coords


def write_template(plan: Plan) -> None:
    """Create the store (the caller holds its lock and removed any previous one): coordinates, empty
    (NaN-filled) data arrays with the run's chunking, the progress group and the attributes.  Data
    chunks are never written here."""
    import dask.array as da  # with xarray, 1 s of start-up that only writing a template needs
    import xarray as xr

    spec, n, space = plan.spec, plan.n_bodies, plan.space
    members, samples, chunk = spec.members, plan.samples, spec.chunk
    # a run shorter than one segment has one time chunk of its own length, not a segment's worth of
    # fill that every read and write would decompress
    per_segment = min(plan.samples_per_segment, samples)
    layout = variable_layout(plan)
    names = list(spec.variables) + [name + "0" for name in space.names] + ["status", "failed_step"]
    names += indicator_variables(spec)
    names += ["sample_lag"] * plan.samples_off_grid + ["work"] * plan.forced + ["heat"] * plan.heat
    names += ["largest_force", "minimisation_steps"] * plan.minimiser
    for section in spec.surfaces:
        names += list(section_layout(plan, section))
    names += ["escape_time"] * (spec.escape is not None)
    data, encoding = {}, {}
    per_particle = particle_variables(plan)
    for name in names:
        shape, dims, unit, long_name = layout[name]
        over_time = dims[1:2] == ("time",)  # (member, time, …): one Zarr chunk per task's region
        crossing = dims[1:2] == ("crossing",)  # (member, crossing, …): a segment writes the chunks of its crossings
        chunks = ((chunk, per_segment) + shape[2:] if over_time else
                  (chunk, min(CROSSINGS_PER_CHUNK, shape[1])) + shape[2:] if crossing else (chunk,) + shape[1:])
        if name in per_particle:  # the particle axis follows (member, time) or (member,)
            axis = 2 if over_time else 1
            chunks = chunks[:axis] + (particles_per_chunk(n),) + chunks[axis + 1:]
        integer = is_integer_variable(name)
        fill = -1 if name == "failed_step" else 0 if integer else np.nan
        data[name] = xr.Variable(dims, da.full(shape, fill, chunks=chunks, dtype=np.int64 if integer else np.float64),
                                 {"units": unit, "long_name": long_name})
        initial = name in {state + "0" for state in space.names}
        encoding[name] = {"chunks": chunks, "fill_value": fill,
                          "compressors": INITIAL_STATE_CODECS if initial else COMPRESSED_CHECKSUMMED}
    coords = coordinates(plan)
    method = plan.method
    attrs = {
        "system": spec.system, "space": space.name, "state_variables": list(space.names),
        "preset": spec.preset or "", "params": json.dumps(_json_params(plan)),
        "method": spec.method, "method_options": json.dumps(spec.options), "dt": spec.dt, "seed": spec.seed,
        "n_steps": spec.n_steps, "save_every": spec.save_every, "checkpoint_every": spec.checkpoint_every,
        "chunk": spec.chunk, "initial": spec.initial, "spec": spec.to_toml(),
        "status_meanings": json.dumps({str(code): STATUS_MEANINGS[code]
                                       for code in method.status + plan.system.definition.statuses
                                       + (ESCAPED,) * bool(spec.escape and spec.escape["stop"])}),
        "method_order": method.order, "system_revision": plan.system.definition.revision,
        "method_revision": method.revision, "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        **({"system_mode_revision": _mode_revision(plan)} if plan.mode == "system" else {}),
        **_versions(),
        # a model's text travels with its run: workers and analysis build the system from it, never from the file
        **({"model": spec.model, "model_source": spec.model_source} if spec.model_source is not None else {}),
    }
    encoding.update({name: {"compressors": COMPRESSED_CHECKSUMMED} for name in coords})
    dataset = xr.Dataset(data, coords=coords, attrs=attrs)
    _quiet(dataset.to_zarr, spec.store, mode="w-", compute=False, encoding=encoding, consolidated=False,
           write_empty_chunks=True)
    group = zarr.open_group(spec.store, mode="r+")
    progress = group.create_group(PROGRESS)
    grid = (len(plan.chunks), len(plan.segments))
    for name in RECORDS:
        progress.create_array(name, shape=grid, chunks=(1, 1), dtype="f8", fill_value=np.nan, compressors=CHECKSUMMED)
    progress.create_array(ATTEMPTS, shape=grid, chunks=(1, 1), dtype="i8", fill_value=0, compressors=CHECKSUMMED)
    # Checkpoint slots are rewritten by every segment and read once: uncompressed (checksummed), because
    # compressing full-precision state spends the task's time and saves almost no space.
    shapes = {**space.shapes(n), **(shadow_slot_shapes(plan) if spec.shadows else {})}
    for name in checkpoint_names(plan):
        shape = shapes.get(name, ())
        integer = is_integer_variable(name)
        particles = (particles_per_chunk(n),) + shape[1:] if name in per_particle else shape
        progress.create_array(f"slot_{name}", shape=(2, members) + shape, chunks=(1, chunk) + particles,
                              dtype="i8" if integer else "f8", fill_value=-1 if name == "failed_step" else
                              0 if integer else np.nan, compressors=CHECKSUMMED)
    group.attrs["identity"] = spec.identity()  # last: a store with an identity has a complete template
    _quiet(zarr.consolidate_metadata, spec.store)


def _json_params(plan: Plan) -> dict:
    """The system's parameter values (sweeps listed by their grid, under their key: a swept component
    beside its parameter's fixed value) as plain JSON."""
    out = {}
    for name, value in plan.system.params.items():
        out[name] = value.tolist() if isinstance(value, np.ndarray) else value
        if isinstance(out[name], float) and not np.isfinite(out[name]):
            out[name] = None
    out.update({s.name: {"sweep": list(s.values)} for s in plan.spec.sweeps})
    return out


# ----------------------------------------------------------------------------------- task-side I/O

def _chunk_index(array: zarr.Array, region) -> tuple[int, ...]:
    """The chunk a chunk-aligned region starts in."""
    region = region if isinstance(region, tuple) else (region,)
    index = []
    for selection, size in zip(region, array.chunks):
        start = selection.start or 0 if isinstance(selection, slice) else int(selection)
        index.append(start // size)
    return tuple(index)


def _damaged(url: str, name: str, array: zarr.Array, region) -> DamagedStore:
    return DamagedStore(f"{name} chunk {_chunk_index(array, region)} of {url} fails its checksum; "
                        f"`armillary verify --repair {url}` then `armillary run` recomputes it")

async def concurrently(operations: list) -> list:
    """Await Zarr's async ``operations`` together (run on Zarr's event loop with ``zarr_sync``)."""
    return await asyncio.gather(*operations)


class RunStore:
    """Region reads and writes of one run's store (opened lazily on the worker that uses it)."""

    def __init__(self, url: str):
        self.url = url
        self._group: zarr.Group | None = None
        self._arrays: dict[str, zarr.Array] = {}

    def array(self, name: str) -> zarr.Array:
        if name not in self._arrays:
            # One read of the consolidated metadata serves every array a task touches (opening each
            # array on its own read its metadata file: ~20 ms a task).
            if self._group is None:
                self._group = zarr.open_group(self.url, mode="r+")
            self._arrays[name] = self._group[name].with_config(WRITE_EVERY_CHUNK)
        return self._arrays[name]

    def progress(self, name: str) -> zarr.Array:
        return self.array(f"{PROGRESS}/{name}")

    def set_attribute(self, name: str, value) -> None:
        """Set a store attribute (by the process that holds the run lock) and re-consolidate the metadata
        that readers open the store by."""
        _quiet(zarr.open_group(self.url, mode="r+").attrs.__setitem__, name, value)
        _quiet(zarr.consolidate_metadata, self.url)

    def read(self, name: str, region) -> np.ndarray:
        """``name``[region], raising DamagedStore (naming the array and chunk) for a damaged chunk."""
        array = self.array(name)
        try:
            return array[region]
        except ValueError as error:
            if "checksum" not in str(error):
                raise
            raise _damaged(self.url, name, array, region) from None

    def is_done(self, chunk: int, segment: int) -> bool:
        return bool(np.isfinite(self.read(f"{PROGRESS}/done", (chunk, segment))))

    def done_grid(self) -> np.ndarray:
        return np.isfinite(self.read(f"{PROGRESS}/done", slice(None)))

    def count_attempt(self, chunk: int, segment: int) -> None:
        """One more task started (chunk, segment) (stores from before this record have none)."""
        name = f"{PROGRESS}/{ATTEMPTS}"
        try:
            array = self.array(name)
        except KeyError:
            return
        array[chunk, segment] = self.read(name, (chunk, segment)) + 1

    def read_checkpoint(self, slot: int, first: int, stop: int, names: tuple[str, ...], particles: slice | None = None,
                        per_particle: set[str] = frozenset()) -> dict:
        """Members [first, stop) of checkpoint slot ``slot``'s ``names``; of those ``per_particle``, the particles
        ``particles`` alone (the ids a rank holds, :func:`.segment.rank_share`) where that is given."""
        regions = [(slot, slice(first, stop)) + ((particles,) if particles is not None and name in per_particle else ())
                   for name in names]
        arrays = [self.progress(f"slot_{name}").async_array for name in names]
        try:
            values = zarr_sync(concurrently([array.getitem(region) for array, region in zip(arrays, regions)]))
        except ValueError:  # which one: read them one by one
            values = [self.read(f"{PROGRESS}/slot_{name}", region) for name, region in zip(names, regions)]
        return dict(zip(names, values))

    @staticmethod
    def checkpoint_writes(slot: int, first: int, stop: int, state: dict) -> list:
        """The writes (for :meth:`write_all`) that put ``state`` into checkpoint slot ``slot``."""
        return [(f"{PROGRESS}/slot_{name}", (slot, slice(first, stop)), value) for name, value in state.items()]

    def write_all(self, writes: list) -> None:
        """Each (array name, region, value) of ``writes``, concurrently on Zarr's event loop; returns
        when all are stored.  A task's dozen region writes then cost about one write's latency."""
        targets = [(self.array(name).async_array, region, value) for name, region, value in writes]
        zarr_sync(concurrently([array.setitem(region, value) for array, region, value in targets]))

    def mark_done(self, chunk: int, segment: int, seconds: float, write_seconds: float) -> None:
        """The completion record: written last, so a record always vouches for data on disk."""
        where = (chunk, segment)
        self.write_all([(f"{PROGRESS}/seconds", where, seconds), (f"{PROGRESS}/write_seconds", where, write_seconds)])
        self.progress("done")[where] = time.time()


def summary(url: str) -> dict:
    """Progress of the run in the store: segments done/total, failed members, throughput."""
    try:
        group = zarr.open_group(url, mode="r")
        done = group[f"{PROGRESS}/done"][:]
        seconds = group[f"{PROGRESS}/seconds"][:]
        write_seconds = group[f"{PROGRESS}/write_seconds"][:]
    except (FileNotFoundError, KeyError, zarr.errors.GroupNotFoundError):
        raise InvalidInput("store", f"{url!r} is not an armillary store") from None
    attrs = dict(group.attrs)
    members = group["member"].shape[0]
    status = group["status"][:]
    work = Plan(parse_spec(attrs["spec"], stored=True)).work  # the store's own spec says how the work was cut
    finished = np.isfinite(done)
    stamps = done[finished]
    return {
        "system": attrs["system"], "method": attrs["method"], "members": members,
        "status_meanings": {int(code): meaning for code, meaning in
                            json.loads(attrs.get("status_meanings", json.dumps(LEGACY_STATUS))).items()},
        "status_counts": {int(code): int(count) for code, count in zip(*np.unique(status, return_counts=True))},
        "segments_done": int(finished.sum()), "segments_total": int(done.size),
        "member_steps_done": int(work[finished].sum()), "member_steps_total": int(work.sum()),
        "failed_members": int(np.count_nonzero(~np.isin(status, NOT_FAILED))),
        "task_seconds": float(np.nansum(seconds)), "write_seconds": float(np.nansum(write_seconds)),
        "first_done": float(stamps.min()) if stamps.size else None,
        "last_done": float(stamps.max()) if stamps.size else None,
        "lock": read_lock(url),
        "until": json.loads(attrs["until"]) if "until" in attrs else None,
    }
