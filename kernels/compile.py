"""Specialise driver and integrator templates to one system and compile them once per process
(the system-parallel kernels specialise the same way in :mod:`kernels.system_parallel`).

An integrator template calls free names such as ``system_gradient``; specialising copies the
template function with those names bound to a system's jitted functions, under a unique name, and
jits the result.  Why not closures: Numba's on-disk cache replays closures from the wrong factory
call or recompiles them every session (numba#6093, #6264), while a uniquely named function whose
called functions are globals caches reliably (``cache=True``, honouring NUMBA_CACHE_DIR).  The name
carries a hash of the kernels' source, so editing any kernel file never replays a stale kernel.
"""

import dis
import functools
import hashlib

from numba import njit
from numba.core import config

from .caches import kernel_cache_directory
from .driver import (force_power_template, no_configuration_inertia, no_encounter, no_force, no_force_damping,
                     track_separation_template)
from .flat_driver import FLAT_SHADOW_STAGES
from .integrators import FLAT, FULL, KERNEL_METHODS
from .integrators.formulations import kinetic_energy_configuration_template
from .lanes import bind_template, kinetic_energy_diagonal, kinetic_energy_full
from .lyapunov import SHADOW_STAGES
from .sections import NO_SECTION_VALUES, SECTION_STAGES
from .source_hash import SOURCE_HASH
from .systems import system_definition

KERNEL_FLAGS = {"error_model": "numpy", "nogil": True}
#: the templates bound into a kernel: below -O2 (the test suite's -O1, chosen for compile time) inlined into
#: their callers in Numba's IR.  A template jitted as a function of its own is optimised and turned into machine
#: code once on its own, with Python and C wrappers nothing calls, and again inside the driver; inlined, only the
#: driver is (12 kernels of 6 systems: 159 → 129 s to compile at -O1, bit for bit the same results, run times
#: equal or shorter).  Except the method's stages in a shadows kernel, which steps the members and again their
#: shadows: inlined twice, the step would be typed, lowered and optimised twice (Example 1's vi with shadows:
#: 20–24 s to compile as a function, 31–35 s inlined).  At -O2 and above every template stays a function, as
#: the benchmarks measured them.
TEMPLATE_FLAGS = {**KERNEL_FLAGS, "inline": "always" if config.OPT < 2 else "never"}
#: the stages inlined into their drivers at every level: rk45's attempt, the adaptive drivers' inner loop, which
#: as a function of its own at -O3 ran slower than written out in the driver (issue 50's A/B: Example 1 1.1–1.8
#: against 1.8–2.0×10⁶ member-steps/s)
ALWAYS_INLINED = frozenset({"dopri_attempt", "flat_dopri_attempt"})
#: the stages never inlined: a whole member's minimisation (fire), called once per member by the CPU's driver with
#: its arrays in a nested tuple (as a GPU thread calls it), which Numba's IR inliner refuses ("Calling a closure with
#: *args is unsupported"); compiled once on its own, it costs one call per member
NEVER_INLINED = frozenset({"minimise_member"})


def may_track(shadows: bool) -> bool:
    """The drivers' constant ``SHADOWS``: whether a kernel may step shadows (when called with
    ``renormalise_every`` > 0).  Below -O2 only shadows kernels may, and Numba prunes the shadows' bookkeeping
    from the others (Example 1's first kernel in a process compiles in 12–14 s instead of 19 s at -O1, each
    further one ~1 s sooner); at -O2 and above every driver decides at run time, the code the benchmarks
    measured."""
    return shadows or config.OPT >= 2


def global_names(functions) -> set:
    """The global names the code of ``functions`` loads."""
    return {instruction.argval for function in functions for instruction in dis.get_instructions(function)
            if instruction.opname == "LOAD_GLOBAL"}


@functools.cache
def compiled_kernel(method: str, system: str, inertia_kind: str, shadows: bool = False, forced: bool = False,
                    sections: str | None = None):
    """The jitted driver of ``method`` for ``system`` (cached in memory and on disk); with ``shadows``
    it steps Benettin shadows too (:mod:`kernels.lyapunov`), a separate kernel so that the common one
    keeps its size; with ``forced`` the system's forces act (unforced kernels are compiled without them); with
    ``sections`` (the generated module of :func:`kernels.sections.values_source`) it locates their crossings."""
    kernel_cache_directory()  # refused before Numba loads anything from a cache another user could write
    recipe, bindings, tag = specialised_stages(method, system, inertia_kind, shadows, forced, sections)
    driver = bind_template(recipe.driver, f"{recipe.driver.__name__}__{tag}", bindings)
    return njit(cache=True, **KERNEL_FLAGS)(driver)


@functools.cache
def specialised_stages(method: str, system: str, inertia_kind: str, shadows: bool = False, forced: bool = False,
                       sections: str | None = None) -> tuple:
    """(recipe, bindings, tag): the stages a driver of ``method`` for ``system`` calls, jitted with the system's
    functions bound (the names of :mod:`kernels.driver` and :mod:`kernels.flat_driver`), and the kernel's unique
    tag.  Shared by the CPU drivers (:func:`compiled_kernel`) and the GPU's (:mod:`kernels.gpu`), which run the
    same stages."""
    definition = system_definition(system)
    space = definition.space
    recipe = KERNEL_METHODS[method].recipe(space.name, inertia_kind)
    tag = f"{method}__{system}__{inertia_kind}__{'shadows__' if shadows else ''}{'forced__' if forced else ''}" \
          f"{'sections_' + hashlib.sha256(sections.encode()).hexdigest()[:12] + '__' if sections else ''}{SOURCE_HASH}"
    if inertia_kind == FLAT:
        bindings = {**definition.kernel_bindings, **recipe.constants}
        shadow_stages = FLAT_SHADOW_STAGES[shadows]
        templates = definition.lane_templates + recipe.helpers + shadow_stages
    else:
        bindings = {
            "system_gradient": definition.gradient,
            "system_coefficients_at": definition.coefficients_at,
            "system_potential": definition.potential,
            "system_encounter": definition.encounter or no_encounter,
            "system_force": definition.force if forced else no_force,
            "system_force_damping": definition.force_damping if forced else no_force_damping,
            "FORCED": forced,
            "EXCHANGES": forced,  # a stochastic method's recipe sets it: its bath exchanges heat
            "system_inertia": definition.configuration_inertia or no_configuration_inertia,
            "system_inertia_gradient": definition.configuration_inertia_gradient or no_configuration_inertia,
            "VARIABLE_INERTIA": definition.configuration_inertia is not None,
            "kinetic_energy": kinetic_energy_full if inertia_kind == FULL else kinetic_energy_diagonal,
            **recipe.constants,
        }
        shadow_stages = SHADOW_STAGES[shadows]
        # kinetic_energy and force_power first: templates are bound in order, and the others may call them
        templates = ((("kinetic_energy", kinetic_energy_configuration_template),)
                     if definition.configuration_inertia is not None else ())
        templates += ((("force_power", force_power_template),) + recipe.helpers + shadow_stages
                      + (("track_separation", track_separation_template),))
    layout = "flat" if inertia_kind == FLAT else "sphere"
    section_stages = SECTION_STAGES[layout, sections is not None]
    templates += section_stages
    bindings["SHADOWS"] = may_track(shadows)
    bindings["SECTIONS"] = sections is not None
    bindings["section_values"] = NO_SECTION_VALUES[layout]
    if sections is not None:
        from .models.codegen import load_generated  # sympy's printer: only for kernels with sections

        bindings["section_values"] = load_generated(sections).section_values
    # by the members' step, the shadows' and the crossings' search
    called_twice = global_names(stage for _, stage in shadow_stages + section_stages)
    for name, template in templates:
        flags = KERNEL_FLAGS if name in called_twice or name in NEVER_INLINED else TEMPLATE_FLAGS
        flags = {**KERNEL_FLAGS, "inline": "always"} if name in ALWAYS_INLINED else flags
        bindings[name] = njit(**flags)(bind_template(template, f"{template.__name__}__{tag}", bindings))
    return recipe, bindings, tag
