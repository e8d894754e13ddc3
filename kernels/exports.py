"""A package's public names imported on first use (PEP 562), so that importing a package costs only what its
caller uses: the ``armillary`` command imports every package on its way to the CLI, and ``armillary --help``
loads neither Numba nor Dask nor xarray."""

from __future__ import annotations

import importlib
import sys


def lazy_exports(package: str, exports: dict[str, str]):
    """The module ``__getattr__`` of ``package``: each name of ``exports`` maps to the module that defines it
    (relative to the package, or absolute), as ``"module"`` or, where the package names it differently,
    ``"module:attribute"``; that module is imported when the name is first asked for."""

    def __getattr__(name: str):
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, _, attribute = exports[name].partition(":")
        value = getattr(importlib.import_module(module, package), attribute or name)
        setattr(sys.modules[package], name, value)  # asked once: later lookups find it directly
        return value

    return __getattr__
