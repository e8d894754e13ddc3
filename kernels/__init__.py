"""Armillary's numerics: state spaces ((S²)ⁿ, SO(3)ⁿ), systems on them, structure-preserving and
classical integrators, in-kernel diagnostics.  No I/O, no Dask.  The way in: :func:`get_system` and
:func:`integrate`."""

from .caches import create_kernel_cache
from .errors import InvalidInput

create_kernel_cache()  # before the modules below, whose cached functions make Numba create it
from .integrate import Trajectory, carried_names, execution_mode, integrate, resolve_method
from .integrators import METHODS, methods_for
from .spaces import SPACES
from .status import MEANINGS as STATUS_MEANINGS
from .systems import SYSTEMS, get_system

__all__ = ["get_system", "integrate", "carried_names", "Trajectory", "InvalidInput", "SYSTEMS", "METHODS", "SPACES",
           "STATUS_MEANINGS", "methods_for", "execution_mode", "resolve_method"]
