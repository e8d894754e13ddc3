"""A hash of the kernels' source, which the names of compiled kernels and the keys of derived models carry, so
that editing any kernel file never replays a stale kernel or derivation.  A module of its own at the bottom of
the layer: the compiler (:mod:`kernels.compile`), the system-parallel kernels and the models' derivation cache
all key on it, and reading every file here is not a cost for a process that compiles nothing."""

import hashlib
import pathlib


def _source_hash() -> str:
    digest = hashlib.sha256()
    for path in sorted(pathlib.Path(__file__).parent.rglob("*.py")):
        digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


SOURCE_HASH = _source_hash()
