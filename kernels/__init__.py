"""Armillary's numerics: systems on (S²)ⁿ, structure-preserving and classical integrators, in-kernel
diagnostics.  No I/O, no Dask.  The way in: :func:`get_system` and :func:`integrate`."""

from .errors import InvalidInput
from .integrate import Trajectory, integrate
from .integrators import METHODS
from .systems import SYSTEMS, get_system

__all__ = ["get_system", "integrate", "Trajectory", "InvalidInput", "SYSTEMS", "METHODS"]
