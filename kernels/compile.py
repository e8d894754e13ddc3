"""Specialise driver and integrator templates to one system and compile them once per process.

An integrator template calls free names such as ``system_gradient``; specialising copies the
template function with those names bound to a system's jitted functions, under a unique name, and
jits the result.  Why not closures: Numba's on-disk cache replays closures from the wrong factory
call or recompiles them every session (numba#6093, #6264), while a uniquely named function whose
called functions are globals caches reliably (``cache=True``, honouring NUMBA_CACHE_DIR).  The name
carries a hash of the kernels' source, so editing any kernel file never replays a stale kernel.
"""

import functools
import hashlib
import pathlib
import types

from numba import njit

from .integrators import FULL, METHODS
from .lanes import kinetic_energy_diagonal, kinetic_energy_full
from .lyapunov import SHADOW_STAGES
from .systems import SYSTEMS

_KERNEL_FLAGS = {"error_model": "numpy", "nogil": True}


def _source_hash() -> str:
    digest = hashlib.sha256()
    for path in sorted(pathlib.Path(__file__).parent.rglob("*.py")):
        digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


SOURCE_HASH = _source_hash()


def _bind(template, name: str, bindings: dict):
    """A copy of ``template`` whose free global names in ``bindings`` are bound, named ``name``."""
    namespace = dict(template.__globals__)
    namespace.update(bindings)
    function = types.FunctionType(template.__code__, namespace, name, template.__defaults__, template.__closure__)
    function.__qualname__ = name
    function.__module__ = template.__module__
    function.__doc__ = template.__doc__
    return function


@functools.cache
def compiled_kernel(method: str, system: str, inertia_kind: str, shadows: bool = False):
    """The jitted driver of ``method`` for ``system`` (cached in memory and on disk); with ``shadows``
    it steps Benettin shadows too (:mod:`kernels.lyapunov`), a separate kernel so that the common one
    keeps its size."""
    recipe = METHODS[method].recipe(inertia_kind)
    definition = SYSTEMS[system]
    tag = f"{method}__{system}__{inertia_kind}__{'shadows__' if shadows else ''}{SOURCE_HASH}"
    bindings = {
        "system_gradient": definition.gradient,
        "system_potential": definition.potential,
        "kinetic_energy": kinetic_energy_full if inertia_kind == FULL else kinetic_energy_diagonal,
        **recipe.constants,
    }
    for name, template in recipe.helpers + SHADOW_STAGES[shadows]:
        bindings[name] = njit(**_KERNEL_FLAGS)(_bind(template, f"{template.__name__}__{tag}", bindings))
    driver = _bind(recipe.driver, f"{recipe.driver.__name__}__{tag}", bindings)
    return njit(cache=True, **_KERNEL_FLAGS)(driver)


@functools.cache
def compiled_pair_kernels(system: str) -> types.SimpleNamespace:
    """The neighbour-list gradient and per-particle energies of ``system``'s pair potential
    (:mod:`kernels.neighbours`), parallel over particles."""
    from .neighbours import PAIR_TEMPLATES

    pair = SYSTEMS[system].pair
    bindings = {"pair_energy": pair.energy, "pair_gradient_factor": pair.gradient_factor}
    tag = f"{system}__{SOURCE_HASH}"
    return types.SimpleNamespace(**{
        name: njit(parallel=True, **_KERNEL_FLAGS)(_bind(template, f"{template.__name__}__{tag}", bindings))
        for name, template in PAIR_TEMPLATES})


@functools.cache
def compiled_system_kernel(method: str, system: str):
    """The jitted system-parallel driver (:mod:`kernels.system_parallel`) of ``method`` for ``system``."""
    from . import system_parallel as sp

    drift, kick = METHODS[method].system_stages
    tag = f"{method}__{system}__system__{SOURCE_HASH}"
    bindings = {**vars(compiled_pair_kernels(system)), "integrator_drift": drift, "integrator_kick": kick,
                **sp.FIXED_BINDINGS}
    for name, template in sp.PARALLEL_HELPERS:
        bindings[name] = njit(parallel=True, **_KERNEL_FLAGS)(_bind(template, f"{template.__name__}__{tag}", bindings))
    for name, template in sp.SERIAL_HELPERS:
        bindings[name] = njit(**_KERNEL_FLAGS)(_bind(template, f"{template.__name__}__{tag}", bindings))
    driver = sp.drive_system_parallel
    return njit(cache=True, **_KERNEL_FLAGS)(_bind(driver, f"{driver.__name__}__{tag}", bindings))
