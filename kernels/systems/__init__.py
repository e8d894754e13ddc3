"""Registry of systems; :func:`get_system` is the way in."""

from ..errors import InvalidInput
from . import (dipole_array, elastic_rod, free_rigid_body, heavy_top, jacobi_chain, kirchhoff_body, multibody,
               rolling_ball, rolling_disk, sphere_lj, sphere_mixture, sphere_nbody, sphere_riesz, spherical_chain,
               spring_pendula)
from .base import Parameter, Preset, System, SystemDefinition, bind_system

SYSTEMS: dict = {
    module.DEFINITION.name: module.DEFINITION
    for module in (spherical_chain, sphere_nbody, spring_pendula, elastic_rod, dipole_array, sphere_lj, sphere_mixture,
                   sphere_riesz, free_rigid_body, heavy_top, jacobi_chain, kirchhoff_body, multibody, rolling_ball,
                   rolling_disk)
}

#: systems derived from users' model files (:mod:`armillary.kernels.models`), registered by name as they are built
MODELS: dict = {}


def system_definition(name: str):
    """The definition of a built-in system or of a model built in this process; InvalidInput otherwise."""
    definition = SYSTEMS.get(name) or MODELS.get(name)
    if definition is None:
        raise InvalidInput("system", f"unknown system {name!r}; allowed: {', '.join(sorted(SYSTEMS))} (or a model "
                           "file: [system] model = \"path.py\")")
    return definition


def get_system(name: str, preset: str | None = None, **params) -> System:
    """The system ``name`` with the given preset and parameter values.

    Any numeric parameter may carry a leading member axis (one value per ensemble member).
    Raises :class:`~kernels.errors.InvalidInput` naming the field for an unknown system, preset or
    parameter, or a value of the wrong shape or sign.
    """
    return bind_system(system_definition(name), preset, params)


__all__ = ["SYSTEMS", "MODELS", "system_definition", "get_system", "System", "SystemDefinition", "Parameter", "Preset"]
