"""Is a store sound?  Every chunk against its checksum, every completion record against the data it
vouches for; and the repair: the segments whose results are damaged are marked not done, so that
``armillary run`` recomputes them, bitwise as before (a segment's inputs are the spec and its
predecessor's checkpoint).

What vouches for a chunk (the layout is :mod:`ensemble.store`'s):

- a data chunk over (member, time): the record of the segment that writes those samples;
- ``<name>0``: segment 0's record; ``lyapunov``, ``lyapunov_spectrum``, ``megno_final``: the last segment's; ``status`` and
  ``failed_step``: the chunk's last done segment (every segment rewrites them);
- checkpoint slot s of a member chunk: its last done segment j with j mod 2 = s;
- ``seconds`` and ``write_seconds`` of (c, j): the ``done`` record of (c, j); a ``done`` record
  vouches for itself, and a missing one is damage only when a later segment of its chunk is done;
- coordinates: the template (always present).

A chunk that no record vouches for belongs to a segment that has not finished (a run stopped while
it was written): it is not checked, and ``armillary run`` rewrites it.  Stores written before
checksums (arrays whose last codec is not crc32c) are checked for what can be checked: records and
their order; their chunks are reported as carrying no checksum.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import google_crc32c
import numpy as np
import zarr
from zarr.codecs import Crc32cCodec
from zarr.core.buffer import default_buffer_prototype
from zarr.core.sync import sync as zarr_sync

from armillary.kernels import InvalidInput

from .errors import StoreError
from .lock import read_lock, run_lock
from .plan import Plan
from .spec import parse_spec
from .progress import PROGRESS, RECORDS
from .spec_keys import section_prefix
from .store import CROSSINGS_PER_CHUNK, RunStore, concurrently, coordinates, crossing_variables

#: variables written once, by a chunk's last segment
FINAL_VARIABLES = ("lyapunov", "lyapunov_spectrum", "megno_final")

#: owner of a chunk that the template wrote (coordinates)
TEMPLATE = (-1, -1)


@dataclass(frozen=True)
class Damage:
    """One chunk that a record vouches for and that is missing or fails its checksum."""

    variable: str
    chunk: tuple[int, ...]
    problem: str
    #: (member chunk, segment) whose task writes it; TEMPLATE for coordinates
    owner: tuple[int, int]
    where: str

    def __str__(self) -> str:
        return f"{self.variable} chunk {_index(self.chunk)} {self.problem} ({self.where})"


@dataclass
class ArrayCheck:
    """What was checked of one array."""

    name: str
    checksummed: bool
    checked: int = 0
    damaged: list[Damage] = field(default_factory=list)


@dataclass
class Verification:
    url: str
    plan: Plan
    arrays: list[ArrayCheck]
    #: (member chunks, segments): True where a completion record is present and sound
    done: np.ndarray
    #: segments of a chunk without a record while a later one of the same chunk has one
    gaps: list[Damage]
    #: (member chunk, segment) with data chunks written but no completion record (stopped mid-write)
    unvouched: list[tuple[int, int]]
    #: who holds the run lock (findings may be transient while a run writes), or None
    lock: dict | None

    @property
    def damaged(self) -> list[Damage]:
        return [d for check in self.arrays for d in check.damaged] + self.gaps

    @property
    def sound(self) -> bool:
        return not self.damaged and not self.unvouched

    def summary(self) -> list[str]:
        """The per-variable report of ``armillary verify``."""
        done, total = int(self.done.sum()), self.done.size
        lines = [f"{self.url}: {done}/{total} segments recorded done"]
        if self.lock and not self.lock["stale"]:
            lines.append(f"  being written by pid {self.lock.get('pid')} on {self.lock.get('host')}: findings may be "
                         "transient")
        for check in self.arrays:
            state = (f"{len(check.damaged)} damaged" if check.damaged else "ok") if check.checksummed else \
                "no checksums (written before checksummed stores): not verifiable"
            lines.append(f"  {check.name:<28} {check.checked:>7} chunks checked  {state}")
            lines += [f"    {damage}" for damage in check.damaged]
        lines += [f"  {gap}" for gap in self.gaps]
        if self.unvouched:
            lines.append(f"  {len(self.unvouched)} segments with data but no completion record (a run stopped "
                         "mid-write, or --repair marked them): `armillary run` recomputes them: " + ", ".join(
                             f"(chunk {c}, segment {j})" for c, j in self.unvouched[:10])
                         + (" …" if len(self.unvouched) > 10 else ""))
        if self.damaged:
            lines.append(f"DAMAGED: {len(self.damaged)} chunks; `armillary verify --repair {self.url}` then "
                         "`armillary run` recomputes the segments that wrote them")
        elif self.unvouched:
            lines.append("INCOMPLETE WRITES: run the spec again to recompute them")
        else:
            lines.append("sound" + ("" if done == total else f" (run unfinished: {total - done} segments to go)"))
        return lines


def _index(chunk: tuple[int, ...]) -> str:
    return str(tuple(int(i) for i in chunk))


def _checksummed(array: zarr.Array) -> bool:
    return isinstance(array.metadata.codecs[-1], Crc32cCodec)


def _fetch(store, keys: list[str]) -> list:
    """The stored bytes of each key (None where absent), fetched concurrently."""
    prototype = default_buffer_prototype()
    return zarr_sync(concurrently([store.get(key, prototype=prototype) for key in keys]))


def _problem(raw) -> str | None:
    """Why a stored chunk (bytes ending in their CRC-32C, or None when absent) is unsound, or None."""
    if raw is None:
        return "is missing"
    data = raw.to_bytes()
    if len(data) < 4 or google_crc32c.value(data[:-4]) != int.from_bytes(data[-4:], "little"):
        return "fails its checksum"
    return None


class _Layout:
    """Which segment's record vouches for each chunk of each array, and what a chunk covers."""

    def __init__(self, plan: Plan, done: np.ndarray):
        self.plan, self.done = plan, done
        self.state_names = plan.space.names
        per_segment = min(plan.samples_per_segment, plan.samples)
        self.per_time_chunk = per_segment
        self.coordinates = set(coordinates(plan))
        self.last_done = [int(np.flatnonzero(row)[-1]) if row.any() else -1 for row in done]
        #: [member chunk][slot]: the last done segment of that slot's parity (-1: none), whose state it holds
        self.slot_owner = [[max((j for j in np.flatnonzero(row) if j % 2 == slot), default=-1) for slot in (0, 1)]
                           for row in done]

    def count_crossings(self, arrays: dict) -> None:
        """Per crossing variable, the most crossings any member of each member chunk has stored (its section's
        count, capped at max_crossings; a count that cannot be read vouches for every chunk)."""
        self.stored_crossings = {}
        for section, table in self.plan.spec.surfaces.items():
            try:
                counts = np.minimum(arrays[section_prefix(section) + "count"][:], table["max_crossings"])
            except Exception:  # noqa: BLE001 - a damaged count is reported as such; every crossing chunk is checked
                counts = np.full(self.plan.spec.members, table["max_crossings"])
            most = np.array([counts[first:stop].max(initial=0) for first, stop in self.plan.chunks])
            self.stored_crossings.update(dict.fromkeys(crossing_variables(self.plan, section), most))

    def segment_of_time_chunk(self, t: int) -> int:
        return min(t * self.per_time_chunk // self.plan.samples_per_segment, len(self.plan.segments) - 1)

    def owner(self, name: str, index: tuple[int, ...], dims: tuple[str, ...]) -> tuple[int, int] | None:
        """(member chunk, segment) that vouches for chunk ``index`` of ``name``; None: nobody yet."""
        if name in self.coordinates:
            return TEMPLATE
        if name.startswith(PROGRESS + "/slot_"):
            slot, c = index[0], index[1]
            j = self.slot_owner[c][slot]
            return (c, int(j)) if j >= 0 else None
        if name.startswith(PROGRESS + "/"):
            c, j = index
            return (c, j) if self.done[c, j] else None
        c = index[0]
        if dims[1:2] == ("time",):
            j = self.segment_of_time_chunk(index[1])
        elif dims[1:2] == ("crossing",):  # appended to from segment 0 on: a lost one is recomputed from the start
            if index[1] * CROSSINGS_PER_CHUNK >= self.stored_crossings[name][c]:
                return None  # past every member's stored crossings: never written, read as NaN
            j = 0
        elif name in tuple(n + "0" for n in self.state_names):
            j = 0
        elif name in FINAL_VARIABLES:
            j = len(self.plan.segments) - 1
        else:  # status, failed_step: rewritten by every segment
            j = self.last_done[c]
        return (c, j) if j >= 0 and self.done[c, j] else None

    def where(self, name: str, index: tuple[int, ...], dims: tuple[str, ...]) -> str:
        """The members and times a chunk holds, for people."""
        if name in self.coordinates:
            return "a coordinate, rewritten from the spec by --repair"
        if name.startswith(PROGRESS + "/"):
            c, j = (index[1], None) if "/slot_" in name else index
            first, stop = self.plan.chunks[c]
            return f"members {first}–{stop - 1}" + ("" if j is None else f", segment {j}")
        first, stop = self.plan.chunks[index[0]]
        text = f"members {first}–{stop - 1}"
        if dims[1:2] == ("time",):
            steps = self.plan.sample_steps[index[1] * self.per_time_chunk:(index[1] + 1) * self.per_time_chunk]
            text += f", t = {steps[0] * self.plan.spec.dt:g}–{steps[-1] * self.plan.spec.dt:g} s"
        return text


def _arrays(group: zarr.Group) -> dict[str, zarr.Array]:
    out = {name: array for name, array in group.arrays()}
    out.update({f"{PROGRESS}/{name}": array for name, array in group[PROGRESS].arrays()})
    return out


def _read_records(store, array: zarr.Array, name: str) -> tuple[np.ndarray, list[Damage]]:
    """The ``done`` records as a boolean grid, with the record chunks that fail their checksum
    (taken as not done)."""
    grid = array.shape
    indices = list(np.ndindex(*grid))
    damaged = []
    if _checksummed(array):
        raws = _fetch(store, [_key(array, index) for index in indices])
        bad = {index for index, raw in zip(indices, raws) if raw is not None and _problem(raw)}
        values = np.full(grid, np.nan)
        for index, raw in zip(indices, raws):
            if raw is not None and index not in bad:
                values[index] = np.frombuffer(raw.to_bytes()[:-4], "<f8")[0]  # serialised by the bytes codec
        damaged = [Damage(name, index, "fails its checksum", index, f"segment {index[1]} of member chunk {index[0]}")
                   for index in sorted(bad)]
    else:
        values = array[:]
    return np.isfinite(values), damaged


def _key(array: zarr.Array, index: tuple[int, ...]) -> str:
    return f"{array.path}/{array.metadata.encode_chunk_key(index)}"


def verify(url: str) -> Verification:
    """Check every chunk of the store at ``url`` that a completion record vouches for (raises
    InvalidInput for something that is not an armillary store)."""
    try:
        group = zarr.open_group(url, mode="r")
        plan = Plan(parse_spec(group.attrs["spec"], stored=True))
    except (FileNotFoundError, KeyError, zarr.errors.GroupNotFoundError, zarr.errors.NodeTypeValidationError):
        raise InvalidInput("store", f"{url!r} is not an armillary store") from None
    store = group.store
    arrays = _arrays(group)
    done, record_damage = _read_records(store, arrays[f"{PROGRESS}/done"], f"{PROGRESS}/done")
    layout = _Layout(plan, done)
    layout.count_crossings(arrays)
    # a dimension's own labels are coordinates too (read from the store: a model store's system is not built)
    layout.coordinates |= {name for name, array in arrays.items()
                           if tuple(array.metadata.dimension_names or ()) == (name,)}
    checks, unvouched = [], set()
    for name, array in arrays.items():
        dims = tuple(array.metadata.dimension_names or ())
        check = ArrayCheck(name, _checksummed(array))
        checks.append(check)
        if name == f"{PROGRESS}/done":
            check.checked = done.size
            check.damaged = record_damage
            continue
        grid = tuple(int(n) for n in array.cdata_shape)
        vouched, loose = [], []
        for index in np.ndindex(*grid):
            owner = layout.owner(name, index, dims)
            if owner is not None:
                vouched.append((index, owner))
            elif dims[1:2] == ("time",):
                loose.append(index)
        check.checked = len(vouched)
        raws = _fetch(store, [_key(array, index) for index, _ in vouched])
        for (index, owner), raw in zip(vouched, raws):
            problem = _problem(raw) if check.checksummed else None
            if problem:
                check.damaged.append(Damage(name, index, problem, owner, layout.where(name, index, dims)))
        present = zarr_sync(concurrently([store.exists(_key(array, index)) for index in loose]))
        unvouched.update((index[0], layout.segment_of_time_chunk(index[1])) for index, there in zip(loose, present)
                         if there)
    gaps = [Damage(f"{PROGRESS}/done", (c, j), "is missing while a later segment of its chunk is done", (c, j),
                   f"segment {j} of member chunk {c}")
            for c, row in enumerate(done) for j in range(layout.last_done[c]) if not row[j]]
    gaps = [gap for gap in gaps if gap.chunk not in {d.chunk for d in record_damage}]
    unvouched -= {gap.owner for gap in gaps}
    return Verification(url, plan, checks, done, gaps, sorted(unvouched), read_lock(url))


def segments_to_redo(verification: Verification) -> dict[int, list[int]]:
    """member chunk → the segments ``run`` must recompute to restore every damaged chunk.

    A damaged chunk's own segment j is recomputed from the state after j − 1.  With two checkpoint
    slots that state survives only while segment j + 1 has not overwritten it, i.e. when j is the
    chunk's last done segment (or the one after it); otherwise the chunk is recomputed from its
    first segment, whose input is the spec itself."""
    needed: dict[int, set[int]] = {}
    for damage in verification.damaged:
        if damage.owner != TEMPLATE:
            needed.setdefault(damage.owner[0], set()).add(damage.owner[1])
    redo = {}
    for c, segments in needed.items():
        done = np.flatnonzero(verification.done[c])
        last = int(done[-1]) if done.size else -1
        start = min(segments)
        if start < last:
            start = 0
        redo[c] = sorted(set(range(start, last + 1)) | segments)
    return redo


def repair(verification: Verification) -> dict[int, list[int]]:
    """Under the store's run lock (InvalidInput while a run holds it), mark the segments of
    :func:`segments_to_redo` not done (their records, damaged ones included, are rewritten as
    absent) and rewrite damaged coordinates from the spec.  Returns the segments marked."""
    try:
        with run_lock(verification.url):
            return _mark_for_recomputation(verification)
    except StoreError as error:
        raise InvalidInput("store", f"{verification.url!r} {error}") from None


def _mark_for_recomputation(verification: Verification) -> dict[int, list[int]]:
    redo = segments_to_redo(verification)
    store = RunStore(verification.url)
    store.write_all([(f"{PROGRESS}/{name}", (c, j), np.nan) for c, segments in redo.items() for j in segments
                     for name in RECORDS])
    # a damaged chunk of crossings goes: the recomputation appends to what it reads, and an absent chunk reads NaN
    group = zarr.open_group(verification.url, mode="r+")
    crossing = [d for d in verification.damaged if d.variable in group
                and tuple(group[d.variable].metadata.dimension_names or ())[1:2] == ("crossing",)]
    zarr_sync(concurrently([group.store.delete(_key(group[d.variable], d.chunk)) for d in crossing]))
    values = coordinates(verification.plan)  # a model store's labels need its model: they stay reported damaged
    rewrite = sorted({d.variable for d in verification.damaged if d.owner == TEMPLATE and d.variable in values})
    store.write_all([(name, slice(None), values[name][1]) for name in rewrite])
    return redo
