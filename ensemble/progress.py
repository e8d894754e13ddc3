"""The group ``_progress`` of a store (invisible to xarray; :mod:`ensemble.store` writes it): its name, the
names of its completion records, and the final state a finished store's checkpoint slots hold, which a spec
with ``initial = "file"`` reads (planning needs it without the rest of the store's machinery)."""

from __future__ import annotations

import numpy as np
import zarr

from armillary.kernels.errors import InvalidInput

PROGRESS = "_progress"
#: per (member chunk, segment) completion records: ``done`` (Unix time; present = done), task and write seconds
RECORDS = ("done", "seconds", "write_seconds")
#: per (member chunk, segment): how many tasks started it (more than one: interrupted or repaired)
ATTEMPTS = "attempts"


def final_state(url: str, names: tuple[str, ...], first: int, stop: int, members: int) -> dict:
    """Members [first, stop) of the end state (each of ``names``) of a finished store (for
    ``initial = "file"``)."""
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
    missing = [name for name in names if f"slot_{name}" not in group[PROGRESS]]
    if missing:
        raise InvalidInput("ensemble.path", f"store {url!r} holds no final {', '.join(missing)} (a store of another "
                           "state space)")
    slot = (done.shape[1] - 1) % 2
    return {name: group[f"{PROGRESS}/slot_{name}"][slot, first:stop] for name in names}
