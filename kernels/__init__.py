"""Armillary's numerics: state spaces ((S²)ⁿ, SO(3)ⁿ), systems on them, structure-preserving and
classical integrators, in-kernel diagnostics.  No I/O, no Dask.  The way in: :func:`get_system` and
:func:`integrate`.  The names below are imported on first use (Numba takes a third of a second to import)."""

from .caches import create_kernel_cache
from .errors import InvalidInput
from .exports import lazy_exports

create_kernel_cache()  # before any module whose cached functions make Numba create it

__getattr__ = lazy_exports(__name__, {
    "Trajectory": ".integration", "carried_names": ".integration", "check_stochastic": ".integration", "execution_mode": ".integration",
    "DEVICES": ".integration", "check_device": ".integration", "device_missing": ".integration",
    "integrate": ".integration", "resolve_method": ".integration", "METHODS": ".integrators",
    "methods_for": ".integrators", "SPACES": ".spaces", "STATUS_MEANINGS": ".status:MEANINGS", "SYSTEMS": ".systems",
    "get_system": ".systems"})

__all__ = ["get_system", "integrate", "carried_names", "Trajectory", "InvalidInput", "SYSTEMS", "METHODS", "SPACES",
           "STATUS_MEANINGS", "methods_for", "execution_mode", "resolve_method", "check_stochastic", "DEVICES", "check_device", "device_missing"]
