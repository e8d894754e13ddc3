"""The kinds of a spec's ``[cluster]``: per kind the parser of its keys, the declarations of those keys and the
factory of its Dask client.  "local" and "address" are parsed here (their clients: :mod:`.clusters`); ``jobs``
registers "slurm".  Plain Python, no Dask: registering a kind costs nothing when ``armillary`` is imported.

A parser takes the spec's ``[cluster]`` section (``spec._Section``: typed getters that name the field in their
errors) and returns the cluster dict, ``kind`` included.
"""

from __future__ import annotations

import ipaddress
import os
import stat
from typing import Callable

from armillary.kernels.errors import InvalidInput

from .spec_keys import SpecKey


def _local_cluster(section) -> dict:
    cluster = {"kind": "local",
               "workers": section.positive("workers", "int", len(os.sched_getaffinity(0)), minimum=1, strict=False),
               "dashboard": dashboard_address(section)}
    gpus = section.positive("gpus", "int", minimum=1, strict=False)
    return cluster if gpus is None else cluster | {"gpus": gpus}


def dashboard_address(section) -> str:
    """``dashboard``: the IP address the run's Dask dashboard listens on (default 127.0.0.1, this machine only)."""
    address = section.get("dashboard", "str", "127.0.0.1")
    try:
        ipaddress.ip_address(address)
    except ValueError:
        raise InvalidInput(section.field("dashboard"), f"must be an IP address of this machine: 127.0.0.1 (the "
                           f"default, this machine only), another of its addresses, or 0.0.0.0 (every interface); "
                           f"got {address!r}") from None
    return address


def _address_cluster(section) -> dict:
    """A running scheduler, reached over TLS with the user's own certificate files (the spec's keys, else Dask's
    configuration), each checked now: readable, and the private key readable by its owner alone."""
    scheduler = section.get("scheduler", "str", required=True)
    if not scheduler.startswith("tls://"):
        raise InvalidInput("cluster.scheduler", f"must be a tls:// address (a scheduler started with --tls-ca-file, "
                           f"--tls-cert and --tls-key; Armillary sends work only over authenticated, encrypted "
                           f"connections), got {scheduler!r}")
    cluster = {"kind": "address", "scheduler": scheduler}
    for key, config in (("tls_ca_file", "distributed.comm.tls.ca-file"), ("tls_cert", "distributed.comm.tls.client.cert"),
                        ("tls_key", "distributed.comm.tls.client.key")):
        path = section.get(key, "str") or _dask_config(config)
        if path is None:
            if key != "tls_key":
                raise InvalidInput(section.field(key), f"is required with a tls:// scheduler (or set {config} in "
                                   "Dask's configuration)")
            continue
        path = os.path.abspath(os.path.expanduser(path))
        try:
            info = os.stat(path)
            with open(path, "rb"):
                pass
        except OSError as error:
            raise InvalidInput(section.field(key), f"cannot read {path!r}: {error.strerror}") from None
        if key == "tls_key" and info.st_mode & 0o077:
            raise InvalidInput(section.field(key), f"{path} is readable by other users (mode "
                               f"{stat.S_IMODE(info.st_mode):04o}); chmod 600 it")
        cluster[key] = path
    return cluster


def _dask_config(key: str) -> str | None:
    import dask

    return dask.config.get(key, None)


#: cluster kind -> parser of its ``[cluster]`` keys (a spec section → the cluster dict, ``kind`` included)
CLUSTER_PARSERS: dict[str, Callable] = {"local": _local_cluster, "address": _address_cluster}
#: cluster kind -> the declarations of its own keys (local and address: in SPEC_KEYS)
CLUSTER_KEYS: dict[str, dict[str, SpecKey]] = {"local": {}, "address": {}}


#: cluster kind -> context manager factory (cluster dict, shared directory → a connected Client) of a registered
#: kind (local and address: :func:`.clusters.dask_client` itself)
CLUSTER_FACTORIES: dict[str, Callable] = {}


def register_cluster_kind(kind: str, parse: Callable, keys: dict[str, SpecKey], client: Callable) -> None:
    """Add a ``[cluster] kind`` (e.g. ``jobs`` adds "slurm") with the parser and the declarations of its keys, and
    the factory of its client (a context manager yielding a connected Client)."""
    CLUSTER_PARSERS[kind] = parse
    CLUSTER_KEYS[kind] = keys
    CLUSTER_FACTORIES[kind] = client


def parse_cluster_section(section) -> dict:
    """The cluster dict of a spec's ``[cluster]`` section (a ``spec._Section``), by the parser of its kind."""
    kind = section.choice("kind", tuple(CLUSTER_PARSERS), "local")
    cluster = CLUSTER_PARSERS[kind](section)
    section.finish()
    return cluster
