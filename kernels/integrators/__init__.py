"""Registry of integration methods.  An integrator never names a system: a method is a recipe of
templates that :mod:`kernels.compile` binds to any system's potential and gradient."""

from dataclasses import dataclass, field
from typing import Callable

from ..driver import drive_fixed_step, record_sample_template
from . import runge_kutta as rk
from . import vi

DIAGONAL, FULL = "diagonal", "full"


@dataclass(frozen=True)
class Recipe:
    driver: Callable
    helpers: tuple  # (bound name, template) in dependency order
    constants: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Method:
    name: str
    summary: str
    order: int
    options: dict  # option name -> default value
    recipe: Callable[[str], Recipe]  # inertia kind -> recipe
    lanes: int | None = None  # members per SIMD block; None: chosen from the ensemble size
    #: per-body (first, last) stages of one step around a gradient evaluation, for the system-parallel
    #: driver (kernels.system_parallel); None: the method has no such split (implicit or multistage)
    system_stages: tuple | None = None


def _equations(kind):
    if kind == DIAGONAL:
        return (("equations_allocate", rk.equations_allocate_diagonal), ("equations_of_motion", rk.equations_diagonal))
    return (("equations_allocate", rk.equations_allocate_full), ("equations_of_motion", rk.equations_full))


def _vi_recipe(kind):
    prefix = "explicit_vi" if kind == DIAGONAL else "implicit_vi"
    return Recipe(
        drive_fixed_step,
        (("record_sample", record_sample_template),
         ("integrator_allocate", getattr(vi, prefix + "_allocate")),
         ("integrator_begin", getattr(vi, prefix + "_begin")),
         ("integrator_step", getattr(vi, prefix + "_step"))),
    )


def _explicit_rk_recipe(tableau_a, tableau_b, project):
    def recipe(kind):
        return Recipe(
            drive_fixed_step,
            (("record_sample", record_sample_template),) + _equations(kind)
            + (("integrator_allocate", rk.explicit_rk_allocate),
               ("integrator_begin", rk.explicit_rk_begin),
               ("integrator_step", rk.explicit_rk_step)),
            {"tableau_a": tableau_a, "tableau_b": tableau_b, "project_after_step": project},
        )
    return recipe


def _rk45_recipe(kind):
    return Recipe(rk.drive_adaptive, (("record_sample", record_sample_template),) + _equations(kind))


#: options that travel to the kernel as a float vector, in kernel order
OPTION_VECTOR_ORDER = {"vi": ("newton_tol", "newton_max_iterations"), "rk45": ("rtol", "atol", "max_steps")}

METHODS: dict[str, Method] = {
    m.name: m
    for m in (
        Method("vi", "Lee–Leok–McClamroch variational integrator: explicit (29)–(30) for diagonal M, "
               "implicit (22)–(25) with Newton in Cayley coordinates otherwise", 2,
               {"implicit": False, "newton_tol": 1e-14, "newton_max_iterations": 20}, _vi_recipe,
               system_stages=(vi.explicit_vi_drift, vi.explicit_vi_kick)),
        Method("rk2", "explicit midpoint rule on (9)–(11)", 2, {}, _explicit_rk_recipe(rk.MIDPOINT_A, rk.MIDPOINT_B, False)),
        Method("rk2_projected", "explicit midpoint rule, each q_i renormalised after every step", 2, {},
               _explicit_rk_recipe(rk.MIDPOINT_A, rk.MIDPOINT_B, True)),
        Method("rk4", "classical 4th-order Runge–Kutta on (9)–(11)", 4, {},
               _explicit_rk_recipe(rk.CLASSICAL_A, rk.CLASSICAL_B, False)),
        Method("rk45", "adaptive Dormand–Prince 5(4), a step size per member, dense output at save points", 5,
               {"rtol": 1e-6, "atol": 1e-9, "max_steps": None, "first_step": None}, _rk45_recipe, lanes=1),
    )
}
