"""The Zarr v3 store of a run: template, chunk-aligned region writes, checkpoints, completion
records and the lock.

Layout (``xarray.open_zarr(path)`` opens it as is): dims ``member``, ``time``, ``body``, ``xyz``;
coords ``member``, ``time`` (s), ``step`` (on ``time``) and one per swept parameter (on ``member``);
data ``q``, ``omega``, ``energy``, ``unit_error``, ``tangency_error`` (those requested), ``q0``,
``omega0``, ``status``, ``failed_step``.  Zarr chunks are (spec chunk members) × (samples per
segment), so every task writes whole chunks and each chunk has exactly one writer.

The group ``_progress`` (invisible to xarray) holds per (chunk, segment) completion records
(``done``: Unix time, ``seconds``: task time, ``write_seconds``: of which writing), written only after the data they vouch for, and
two checkpoint slots of end-of-segment state per member: segment j reads slot (j−1) mod 2 and
writes slot j mod 2, so a task killed half-way never damages the state it started from.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import time
import warnings
from contextlib import contextmanager
from datetime import datetime, timezone
from importlib.metadata import version

import dask.array as da
import numpy as np
import xarray as xr
import zarr
from zarr.core.sync import sync as zarr_sync

from jobs.spec import parse_spec
from kernels import InvalidInput, METHODS

from .plan import Plan

LOCK_SUFFIX = ".lock"  # the lock sits next to the store (inside, Zarr would take it for a broken node)
PROGRESS = "_progress"
STATE_VARIABLES = ("q", "omega")
VARIABLE_ATTRS = {
    "q": ("1", "unit vector of each body (a point of S²)"),
    "omega": ("rad/s", "angular velocity of each body"),
    "energy": ("J", "total energy"),
    "temperature": ("J", "kinetic temperature: kinetic energy per body (k_B = 1, 2 degrees of freedom)"),
    "unit_error": ("1", "max over bodies of | |q_i| - 1 |"),
    "tangency_error": ("rad/s", "max over bodies of |q_i · omega_i|"),
    "q0": ("1", "initial unit vectors"),
    "omega0": ("rad/s", "initial angular velocities"),
    "status": ("1", "0 ok, 1 non-finite state, 2 vi step infeasible, 3 Newton failed, 4 step size underflow"),
    "failed_step": ("1", "step at which the member failed (-1: never)"),
    "lyapunov": ("1/s", "finite-time maximal Lyapunov exponent at the end of the run (Benettin)"),
    "lyapunov_estimate": ("1/s", "running finite-time maximal Lyapunov exponent (Benettin)"),
}
#: per-member state a segment hands to the next through the checkpoint slots; with ``[analysis]
#: lyapunov`` also the Benettin shadows
CHECKPOINT_STATE = ("q", "omega", "step_size", "status", "failed_step")
SHADOW_STATE = ("shadow_q", "shadow_omega", "log_growth", "reference")
LYAPUNOV_VARIABLES = ("lyapunov", "lyapunov_estimate")


class StoreError(Exception):
    """The store cannot be used for this run (raised as InvalidInput by the callers that know the field)."""


def _is_local(url: str) -> bool:
    return "://" not in url


def _quiet(function, *args, **kwargs):
    """Zarr warns on every consolidated write that consolidation is not in the v3 spec; we know."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Consolidated metadata", category=UserWarning)
        return function(*args, **kwargs)


# ---------------------------------------------------------------------------------------------- lock

def _process_start(pid: int) -> str | None:
    """Start time of ``pid`` in clock ticks since boot (tells a live process from a reused pid)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[19]
    except OSError:
        return None


def _lock_is_stale(holder: dict) -> bool:
    """A lock is stale when its process is gone; only decidable for locks taken on this host."""
    if holder.get("host") != socket.gethostname():
        return False
    return _process_start(holder.get("pid", -1)) != holder.get("process_start")


@contextmanager
def run_lock(url: str):
    """Hold the store's lock (pid, host, time) for the duration of a run.  A lock held by a live
    process is refused; a lock left by a dead process on this host is taken over."""
    if not _is_local(url):  # object stores have no atomic create; remote runs trust the user
        yield
        return
    path = lock_path(url)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    holder = {"pid": os.getpid(), "host": socket.gethostname(), "process_start": _process_start(os.getpid()),
              "since": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    for _ in range(2):
        try:
            descriptor = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            current = read_lock(url) or {}
            if not _lock_is_stale(current):
                raise StoreError(f"is in use by pid {current.get('pid')} on {current.get('host')} since "
                                 f"{current.get('since')} (lock {path}; delete it only if that run is gone)")
            print(f"armillary: taking over the stale lock of pid {current.get('pid')} (no longer running)")
            os.unlink(path)
            continue
        with os.fdopen(descriptor, "w") as handle:
            json.dump(holder, handle)
        break
    try:
        yield
    finally:
        os.unlink(path)


def lock_path(url: str) -> str:
    return os.path.abspath(url).rstrip("/") + LOCK_SUFFIX


def read_lock(url: str) -> dict | None:
    """The lock holder's record, or None when nobody holds the lock."""
    try:
        with open(lock_path(url)) as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return None


# ------------------------------------------------------------------------------------------ template

def existing_identity(url: str) -> str | None:
    """The spec identity recorded in the store at ``url``; None if nothing is there.  Raises
    StoreError for something that is not an armillary store."""
    if _is_local(url):
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


def check_writable(url: str) -> None:
    """Refuse a store location that cannot be created, before anything is written."""
    if not _is_local(url):
        return
    parent = os.path.dirname(os.path.abspath(url))
    probe = parent
    while not os.path.exists(probe):
        probe = os.path.dirname(probe)
    if not os.path.isdir(probe) or not os.access(probe, os.W_OK | os.X_OK):
        raise StoreError(f"cannot create {url!r}: {probe!r} is not a writable directory")


def remove_store(url: str) -> None:
    """Delete a store (for --overwrite, or an interrupted template); the caller holds its lock."""
    if _is_local(url):
        shutil.rmtree(url, ignore_errors=True)
    else:
        zarr.open_group(url, mode="w")


def _versions() -> dict:
    return {f"{name}_version": version(name) for name in ("armillary", "numba", "numpy", "dask", "zarr", "xarray")}


def write_template(plan: Plan) -> None:
    """Create the store (the caller holds its lock and removed any previous one): coordinates, empty (NaN-filled) data arrays with the run's chunking, the
    progress group and the attributes.  Data chunks are never written here."""
    spec, n = plan.spec, plan.n_bodies
    members, samples, chunk = spec.members, plan.samples, spec.chunk
    # a run shorter than one segment has one time chunk of its own length, not a segment's worth of
    # fill that every read and write would decompress
    per_segment = min(plan.samples_per_segment, samples)
    shapes = {"q": (members, samples, n, 3), "omega": (members, samples, n, 3), "energy": (members, samples),
              "temperature": (members, samples),
              "unit_error": (members, samples), "tangency_error": (members, samples),
              "q0": (members, n, 3), "omega0": (members, n, 3), "status": (members,), "failed_step": (members,),
              "lyapunov": (members,), "lyapunov_estimate": (members, samples)}
    dims = {"q": ("member", "time", "body", "xyz"), "omega": ("member", "time", "body", "xyz"),
            "energy": ("member", "time"), "temperature": ("member", "time"), "unit_error": ("member", "time"), "tangency_error": ("member", "time"),
            "q0": ("member", "body", "xyz"), "omega0": ("member", "body", "xyz"), "status": ("member",),
            "failed_step": ("member",), "lyapunov": ("member",), "lyapunov_estimate": ("member", "time")}
    names = list(spec.variables) + ["q0", "omega0", "status", "failed_step"]
    if spec.lyapunov:
        names += LYAPUNOV_VARIABLES
    data, encoding = {}, {}
    for name in names:
        shape = shapes[name]
        over_time = dims[name][1:2] == ("time",)  # (member, time, …): one Zarr chunk per task's region
        chunks = (chunk, per_segment) + shape[2:] if over_time else (chunk,) + shape[1:]
        integer = name in ("status", "failed_step")
        fill = -1 if name == "failed_step" else 0 if integer else np.nan
        data[name] = xr.Variable(dims[name], da.full(shape, fill, chunks=chunks, dtype=np.int64 if integer else np.float64),
                                 {"units": VARIABLE_ATTRS[name][0], "long_name": VARIABLE_ATTRS[name][1]})
        encoding[name] = {"chunks": chunks, "fill_value": fill}
    steps = plan.sample_steps
    coords = {
        "member": ("member", np.arange(members), {"long_name": "global member id"}),
        "time": ("time", steps * spec.dt, {"units": "s", "long_name": "time"}),
        "step": ("time", steps, {"long_name": "step number"}),
    }
    for sweep, values in plan.sweep_values(np.arange(members)).items():
        unit = plan.system.definition.parameter(sweep).unit
        coords[sweep] = ("member", values, {"units": unit, "long_name": f"swept parameter {sweep}"})
    attrs = {
        "system": spec.system, "preset": spec.preset or "", "params": json.dumps(_json_params(plan)),
        "method": spec.method, "method_options": json.dumps(spec.options), "dt": spec.dt, "seed": spec.seed,
        "n_steps": spec.n_steps, "save_every": spec.save_every, "checkpoint_every": spec.checkpoint_every,
        "chunk": spec.chunk, "initial": spec.initial, "spec": spec.to_toml(),
        "method_order": METHODS[spec.method].order, "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        **_versions(),
    }
    dataset = xr.Dataset(data, coords=coords, attrs=attrs)
    _quiet(dataset.to_zarr, spec.store, mode="w-", compute=False, encoding=encoding, consolidated=False)
    group = zarr.open_group(spec.store, mode="r+")
    progress = group.create_group(PROGRESS)
    grid = (len(plan.chunks), len(plan.segments))
    for name in ("done", "seconds", "write_seconds"):
        progress.create_array(name, shape=grid, chunks=(1, 1), dtype="f8", fill_value=np.nan)
    # Checkpoint slots are rewritten by every segment and read once: uncompressed, because
    # compressing full-precision state spends the task's time and saves almost no space.
    slot = {"compressors": None}
    for name in ("q", "omega") + (("shadow_q", "shadow_omega") if spec.lyapunov else ()):
        progress.create_array(f"slot_{name}", shape=(2, members, n, 3), chunks=(1, chunk, n, 3), dtype="f8",
                              fill_value=np.nan, **slot)
    for name in ("step_size",) + (("log_growth", "reference") if spec.lyapunov else ()):
        progress.create_array(f"slot_{name}", shape=(2, members), chunks=(1, chunk), dtype="f8", fill_value=np.nan,
                              **slot)
    progress.create_array("slot_status", shape=(2, members), chunks=(1, chunk), dtype="i8", fill_value=0, **slot)
    progress.create_array("slot_failed_step", shape=(2, members), chunks=(1, chunk), dtype="i8", fill_value=-1,
                          **slot)
    group.attrs["identity"] = spec.identity()  # last: a store with an identity has a complete template
    _quiet(zarr.consolidate_metadata, spec.store)


def _json_params(plan: Plan) -> dict:
    """The system's parameter values (sweeps listed by their grid) as plain JSON."""
    out = {}
    for name, value in plan.system.params.items():
        out[name] = value.tolist() if isinstance(value, np.ndarray) else value
        if isinstance(out[name], float) and not np.isfinite(out[name]):
            out[name] = None
    out.update({s.name: {"sweep": list(s.values)} for s in plan.spec.sweeps})
    return out


# ----------------------------------------------------------------------------------- task-side I/O

async def _concurrently(operations: list) -> list:
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
            self._arrays[name] = self._group[name]
        return self._arrays[name]

    def progress(self, name: str) -> zarr.Array:
        return self.array(f"{PROGRESS}/{name}")

    def is_done(self, chunk: int, segment: int) -> bool:
        return bool(np.isfinite(self.progress("done")[chunk, segment]))

    def done_grid(self) -> np.ndarray:
        return np.isfinite(self.progress("done")[:])

    def read_checkpoint(self, slot: int, first: int, stop: int, names=CHECKPOINT_STATE) -> dict:
        arrays = [self.progress(f"slot_{name}").async_array for name in names]
        values = zarr_sync(_concurrently([array.getitem((slot, slice(first, stop))) for array in arrays]))
        return dict(zip(names, values))

    @staticmethod
    def checkpoint_writes(slot: int, first: int, stop: int, state: dict) -> list:
        """The writes (for :meth:`write_all`) that put ``state`` into checkpoint slot ``slot``."""
        return [(f"{PROGRESS}/slot_{name}", (slot, slice(first, stop)), value) for name, value in state.items()]

    def write_all(self, writes: list) -> None:
        """Each (array name, region, value) of ``writes``, concurrently on Zarr's event loop; returns
        when all are stored.  A task's dozen region writes then cost about one write's latency."""
        targets = [(self.array(name).async_array, region, value) for name, region, value in writes]
        zarr_sync(_concurrently([array.setitem(region, value) for array, region, value in targets]))

    def mark_done(self, chunk: int, segment: int, seconds: float, write_seconds: float) -> None:
        """The completion record: written last, so a record always vouches for data on disk."""
        where = (chunk, segment)
        self.write_all([(f"{PROGRESS}/seconds", where, seconds), (f"{PROGRESS}/write_seconds", where, write_seconds)])
        self.progress("done")[where] = time.time()


def final_state(url: str, first: int, stop: int, members: int) -> tuple[np.ndarray, np.ndarray]:
    """Members [first, stop) of the end state of a finished store (for ``initial = "file"``)."""
    try:
        group = zarr.open_group(url, mode="r")
        done = group[f"{PROGRESS}/done"][:]
    except (FileNotFoundError, KeyError, zarr.errors.GroupNotFoundError):
        raise InvalidInput("ensemble.path", f"{url!r} is not an armillary store") from None
    if not np.all(np.isfinite(done)):
        raise InvalidInput("ensemble.path", f"store {url!r} is not finished ({int(np.isfinite(done).sum())} of "
                           f"{done.size} segments done)")
    if group["member"].shape[0] != members:
        raise InvalidInput("ensemble.path", f"store {url!r} has {group['member'].shape[0]} members, the spec {members}")
    slot = (done.shape[1] - 1) % 2
    return group[f"{PROGRESS}/slot_q"][slot, first:stop], group[f"{PROGRESS}/slot_omega"][slot, first:stop]


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
    work = Plan(parse_spec(attrs["spec"])).work  # the store's own spec says how the work was cut
    finished = np.isfinite(done)
    stamps = done[finished]
    return {
        "system": attrs["system"], "method": attrs["method"], "members": members,
        "segments_done": int(finished.sum()), "segments_total": int(done.size),
        "member_steps_done": int(work[finished].sum()), "member_steps_total": int(work.sum()),
        "failed_members": int(np.count_nonzero(status)),
        "task_seconds": float(np.nansum(seconds)), "write_seconds": float(np.nansum(write_seconds)),
        "first_done": float(stamps.min()) if stamps.size else None,
        "last_done": float(stamps.max()) if stamps.size else None,
        "lock": read_lock(url),
    }
