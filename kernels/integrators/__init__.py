"""Registry of integration methods.  An integrator never names a system: a method is, per state space
it supports, a recipe of templates that :mod:`kernels.compile` binds to any system of that space
providing the capabilities it requires."""

from dataclasses import dataclass, field
from typing import Callable

from .. import status as codes
from ..driver import drive_fixed_step, record_sample_template, trapezoid_work_template
from ..flat_driver import drive_flat_fixed, record_flat_sample
from ..sections import dense_locate_template
from . import adaptive_vi, fire, flat_rk, formulations, langevin, lgvi, lgvi_motion, midpoint, motion_formulations, nhvi
from . import runge_kutta as rk
from . import vi

DIAGONAL, FULL, FLAT = "diagonal", "full", "flat"
SPHERES, ROTATIONS, RIGID_MOTIONS, GENERALISED = "sphere_product", "rotation", "rigid_motion", "generalised"
ROLLING, ROLLING_DISK = "rolling", "rolling_disk"


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
    #: space name -> (system capabilities required, recipe factory: kernel kind -> Recipe); the kind is
    #: DIAGONAL or FULL inertia on (S²)ⁿ, FLAT on flat spaces
    spaces: dict
    status: tuple = (codes.OK, codes.NON_FINITE)  # the status codes it can report (kernels.status)
    carry: tuple = ()  # per-member solver state a later segment continues from (names in Trajectory.carry)
    lanes: int | None = None  # members per SIMD block; None: chosen from the ensemble size
    #: per-body (first, last) stages of one step around a gradient evaluation, and the per-body factors they take,
    #: computed once per call, for the system-parallel driver (kernels.system_parallel); None: the method has no
    #: such split (implicit or multistage)
    system_stages: tuple | None = None
    #: option names that travel to the kernel as a float vector, in kernel order
    option_vector: tuple = ()
    #: option name -> the variant Method (its own kernel, carry and lanes) that a true value selects, or
    #: -> {value: variant} for an option with named values
    variants: dict = field(default_factory=dict)
    #: option name -> its allowed values, for options with named values (``formulation``)
    choices: dict = field(default_factory=dict)
    #: the Lee–Leok–McClamroch formulation a Runge–Kutta kernel steps (see
    #: :mod:`kernels.integrators.formulations`); None for methods with their own
    formulation: str | None = None
    #: whether it draws noise (:mod:`kernels.noise`): its bath rides in the coefficient block
    #: (:func:`kernels.integrators.langevin.with_bath`)
    stochastic: bool = False
    #: whether it stores the heat its bath gives (``heat``, J), so that E(t) − E(0) − Q(t) is its own error
    heat: bool = False
    #: whether it steps (S²)ⁿ systems with a diagonal inertia only (its per-body stages divide by M_ii)
    diagonal_only: bool = False
    #: raised when the method's floating-point results change (a spec then gives other bits), as a system's
    #: ``revision``: stores record it (``method_revision``) and a resume across revisions says so
    revision: int = 1
    #: whether it minimises the potential instead of following the dynamics (fire): its ``energy`` is V alone, it
    #: records the largest tangential force of each sample, and its step limit ``max_steps`` defaults to the run's end
    minimiser: bool = False
    #: dt → the start of each carried quantity it declares (None: the carried quantities start as the runner's)
    carry_start: Callable | None = None

    def resolve(self, options: dict) -> "Method":
        """The method that runs with these options (defaults filled in): a variant an option selects, or itself."""
        merged = {**self.options, **options}
        for name, variant in self.variants.items():
            chosen = variant.get(merged.get(name)) if isinstance(variant, dict) else variant if merged.get(name) else None
            if chosen is not None:
                return chosen
        return self

    @property
    def fixed_step(self) -> bool:
        """Whether it marches every member with the common step dt (the drivers of :mod:`kernels.driver` and
        :mod:`kernels.flat_driver`); rk45 and adaptive vi choose their own steps, carried between calls."""
        return not ({"step_size", "step_density"} & set(self.carry))

    @property
    def samples_off_grid(self) -> bool:
        """Whether its samples are the first steps past their nominal times, lags carried as ``sample_lag``."""
        return "sample_lag" in self.carry

    def supports(self, definition, provides: frozenset | None = None) -> bool:
        """Whether the method steps systems of this definition: its space and required capabilities (the
        definition's, or ``provides``: what a bound system's parameters leave of them)."""
        entry = self.spaces.get(definition.space.name)
        if self.diagonal_only and not getattr(definition, "diagonal_inertia", False):
            return False
        return entry is not None and entry[0] <= (definition.provides if provides is None else provides)

    def recipe(self, space: str, kind: str) -> Recipe:
        return self.spaces[space][1](kind)


#: the equations of motion of each formulation (:mod:`kernels.integrators.formulations`) for full M
_FORMULATION_EQUATIONS = {"q_qdot": formulations.equations_q_qdot, "q_omega": rk.equations_full,
                          "q_mu": formulations.equations_q_mu, "q_pi": formulations.equations_q_pi}
_CONVERSIONS = {"q_qdot": (formulations.qdot_from_stored, formulations.qdot_to_stored),
                "q_omega": (formulations.same_velocity, formulations.same_velocity),
                "q_mu": (formulations.mu_from_stored, formulations.mu_to_stored),
                "q_pi": (formulations.pi_from_stored, formulations.pi_to_stored)}


def _equations(kind, formulation=formulations.DEFAULT_FORMULATION):
    """The Runge–Kutta methods' helpers for one kernel kind and formulation: the formulation's own
    helpers, its equations and its conversions to and from the stored (q, ω) (DIAGONAL: ``q_omega`` only)."""
    to_v, from_v = _CONVERSIONS[formulation]
    shared = (("inertia_now", formulations.inertia_now_template),
              ("momentum_velocity", formulations.momentum_velocity_template),
              ("pi_angular", formulations.pi_angular_template),
              ("velocity_from_stored", to_v), ("velocity_to_stored", from_v))
    if kind == DIAGONAL:
        return shared + (("equations_allocate", rk.equations_allocate_diagonal),
                         ("equations_of_motion", rk.equations_diagonal))
    return shared + (("equations_allocate", formulations.formulation_allocate),
                     ("equations_of_motion", _FORMULATION_EQUATIONS[formulation]))


def _vi_recipe(kind):
    prefix = "explicit_vi" if kind == DIAGONAL else "implicit_vi"
    return Recipe(
        drive_fixed_step,
        (("record_sample", record_sample_template),
         ("integrator_allocate", getattr(vi, prefix + "_allocate")),
         ("integrator_begin", getattr(vi, prefix + "_begin")),
         ("integrator_step", getattr(vi, prefix + "_step")),
         ("integrator_work", trapezoid_work_template)),
    )


def _stochastic_recipe(allocate, begin, step, heat, active=False):
    """A stochastic method on (S²)ⁿ (diagonal M): the fixed-step driver with the method's stages; with ``heat`` the
    driver sums the heat each step reports (``EXCHANGES``); ``active`` binds the constant ``ACTIVE``."""
    def recipe(kind):
        return Recipe(drive_fixed_step,
                      (("record_sample", record_sample_template), ("integrator_allocate", allocate),
                       ("integrator_begin", begin), ("integrator_step", step),
                       ("integrator_work", langevin.bath_heat if heat else trapezoid_work_template)),
                      {"EXCHANGES": heat, "ACTIVE": active})
    return recipe


def _adaptive_vi_recipe(kind):
    return Recipe(
        adaptive_vi.drive_adaptive_vi,
        (("record_sample", record_sample_template),
         ("integrator_allocate", vi.explicit_vi_allocate),
         ("integrator_begin", vi.explicit_vi_begin),
         ("integrator_step", vi.explicit_vi_step)),
    )


def _explicit_rk_recipe_of(tableau_a, tableau_b, project):
    return lambda formulation: _explicit_rk_recipe(tableau_a, tableau_b, project, formulation)


def _explicit_rk_recipe(tableau_a, tableau_b, project, formulation):
    def recipe(kind):
        return Recipe(
            drive_fixed_step,
            (("record_sample", record_sample_template),) + _equations(kind, formulation)
            + (("integrator_allocate", rk.explicit_rk_allocate),
               ("integrator_begin", rk.explicit_rk_begin),
               ("integrator_step", rk.explicit_rk_step),
               ("integrator_work", rk.stage_work)),
            {"tableau_a": tableau_a, "tableau_b": tableau_b, "project_after_step": project,
             "CONVERTS": formulation != formulations.DEFAULT_FORMULATION},
        )
    return recipe


def _rk45_recipe_of(formulation):
    def recipe(kind):
        return Recipe(rk.drive_adaptive, (("record_sample", record_sample_template),) + _equations(kind, formulation)
                      + (("dopri_attempt", rk.dopri_attempt_template),
                         ("dense_power", rk.dense_power_template), ("simpson_power", rk.simpson_power_template),
                         ("dense_values", rk.sphere_dense_values_template),
                         ("locate_dense_crossings", dense_locate_template)),
                      {"CONVERTS": formulation != formulations.DEFAULT_FORMULATION})
    return recipe



def _flat_fixed_recipe(allocate, begin, step, constants=None, helpers=()):
    """A fixed-step method on a flat space: the flat driver with the method's allocate, begin and step
    (after ``helpers``, which they may call)."""
    def recipe(kind):
        return Recipe(drive_flat_fixed, helpers + (("record_flat_sample", record_flat_sample),
                                                   ("integrator_allocate", allocate), ("integrator_begin", begin),
                                                   ("integrator_step", step)), constants or {})
    return recipe


def _nhvi_recipe(attitude):
    """nhvi on a rolling space: with ``attitude`` the rows 0 … 8 hold R (moved by the Cayley map)."""
    return _flat_fixed_recipe(nhvi.nhvi_allocate, nhvi.nhvi_begin, nhvi.nhvi_step, {"ATTITUDE": attitude},
                              (("cayley_step", nhvi.cayley_step), ("nhvi_update", nhvi.nhvi_update)))


def keep_variables(x, n, coef, y, code):
    """The space's own formulation: no conversion (never called: CONVERTS is False)."""


#: (to_formulation, from_formulation, vector_field) of each SE(3) formulation but the space's own
MOTION_FORMULATIONS = {
    "newton_euler": (motion_formulations.newton_euler_in, motion_formulations.newton_euler_out,
                     motion_formulations.newton_euler_field),
    "hybrid": (motion_formulations.hybrid_in, motion_formulations.hybrid_out, motion_formulations.hybrid_field),
    "lagrange": (motion_formulations.lagrange_in, motion_formulations.lagrange_out,
                 motion_formulations.lagrange_field),
}


def _conversions(formulation):
    """Helpers and constants of a flat Runge–Kutta kernel stepping ``formulation`` (None: the space's own)."""
    if formulation is None:
        return (("to_formulation", keep_variables), ("from_formulation", keep_variables)), {"CONVERTS": False}
    to_formulation, from_formulation, field = MOTION_FORMULATIONS[formulation]
    return ((("to_formulation", to_formulation), ("from_formulation", from_formulation), ("vector_field", field)),
            {"CONVERTS": True})


def _flat_rk_recipe(tableau_a, tableau_b, formulation=None):
    helpers, constants = _conversions(formulation)
    return _flat_fixed_recipe(flat_rk.flat_rk_allocate, flat_rk.flat_rk_begin, flat_rk.flat_rk_step,
                              {"tableau_a": tableau_a, "tableau_b": tableau_b, **constants}, helpers)


def _flat_rk45_recipe_of(formulation=None):
    helpers, constants = _conversions(formulation)
    return lambda kind: Recipe(flat_rk.drive_flat_adaptive, helpers + (("record_flat_sample", record_flat_sample),
                                                                  ("flat_dopri_attempt",
                                                                   flat_rk.flat_dopri_attempt_template),
                                                                  ("dense_values", flat_rk.flat_dense_values_template),
                                                                  ("locate_dense_crossings", dense_locate_template)),
                               constants)


def _on_flat_spaces(recipe):
    """A method on a flat space's vector field steps SO(3)ⁿ, SE(3)ⁿ, joint-coordinate and rolling systems alike."""
    return {space: (FIELD, recipe) for space in (ROTATIONS, RIGID_MOTIONS, GENERALISED, ROLLING, ROLLING_DISK)}


#: what the SE(3) formulations other than Kirchhoff's need of a system: its loads and 6×6 inertia
MOTION_FORMULATION_NEEDS = frozenset({"torque", "inertia6"})


ON_SPHERES = frozenset({"potential", "gradient", "inertia"})
#: implicit vi and the Runge–Kutta methods step constant or configuration-dependent inertia alike
ANY_INERTIA_ON_SPHERES = frozenset({"potential", "gradient"})
FIELD = frozenset({"vector_field"})
NEWTON = (codes.OK, codes.NON_FINITE, codes.NEWTON_FAILED)

def _fire_recipe(kind):
    """FIRE on (S²)ⁿ (diagonal M): its own driver, which records V alone as the energy."""
    return Recipe(fire.drive_fire, (("record_sample", record_sample_template),
                                    ("minimise_member", fire.minimise_member_template)),
                  {"kinetic_energy": fire.no_kinetic_energy})


#: ``vi`` with ``adaptive = true``: the explicit step (diagonal M) with reversible adaptive steps,
#: each member its own sequence (see :mod:`kernels.integrators.adaptive_vi`)
ADAPTIVE_VI = Method(
    "vi_adaptive", "explicit vi (29)–(30) with Hairer–Söderlind reversible adaptive steps from the system's "
    "closest encounter", 2, {}, {SPHERES: (ON_SPHERES, _adaptive_vi_recipe)},
    status=(codes.OK, codes.NON_FINITE, codes.VI_STEP_INFEASIBLE, codes.STEP_SIZE_UNDERFLOW),
    carry=("step_density", "sample_lag"), lanes=1,
    option_vector=("newton_tol", "newton_max_iterations", "tolerance", "max_step", "max_steps"))

#: ``brownian`` with ``active``: self-propelled particles, each heading carried in ω_i = v₀ q_i × n_i
#: (:func:`kernels.integrators.langevin.active_move`)
ACTIVE_BROWNIAN = Method(
    "brownian_active", "active Brownian particles: self-propulsion along a heading transported with q, its "
    "rotational diffusion split around the geodesic Euler–Maruyama move", 1, {},
    {SPHERES: (ON_SPHERES, _stochastic_recipe(langevin.brownian_allocate, langevin.brownian_begin,
                                              langevin.brownian_step, False, active=True))},
    stochastic=True, diagonal_only=True, revision=2,  # 2: Ziggurat normals (kernels.noise), not Box–Muller
    system_stages=(langevin.active_brownian_particle_drift, langevin.brownian_particle_kick,
                   langevin.brownian_particle_factors))


def _runge_kutta(name, summary, order, options, spheres_recipe_of, other_spaces, motion_recipe_of=None,
                 **details) -> Method:
    """A Runge–Kutta method with the ``formulation`` option: on (S²)ⁿ ``q_omega`` steps the method itself,
    each other formulation a variant (its own kernels) named ``<name>_<formulation>``; on SE(3) likewise
    ``kirchhoff`` and the variants of ``motion_recipe_of`` (the Lagrange chart's in blocks of one lane:
    its sin, cos and atan2 stay scalar)."""
    default = formulations.DEFAULT_FORMULATION
    variants = {form: Method(f"{name}_{form}", f"{summary}, in ({form.replace('_', ', ')})", order, {},
                             {SPHERES: (ANY_INERTIA_ON_SPHERES, spheres_recipe_of(form))}, formulation=form, **details)
                for form in formulations.FORMULATIONS if form != default}
    choices = formulations.FORMULATIONS
    if motion_recipe_of is not None:
        status = details.get("status", (codes.OK, codes.NON_FINITE)) + (codes.CHART_SINGULAR,)
        variants.update({
            form: Method(f"{name}_{form}", f"{summary}, in the {form.replace('_', '–')} formulation on SE(3)", order, {},
                         {RIGID_MOTIONS: (MOTION_FORMULATION_NEEDS, motion_recipe_of(form))}, formulation=form,
                         **{**details, "status": status, "lanes": 1 if form == "lagrange" else details.get("lanes")})
            for form in MOTION_FORMULATIONS})
        choices = choices + motion_formulations.FORMULATIONS
    return Method(name, summary, order, {**options, "formulation": None},
                  {SPHERES: (ANY_INERTIA_ON_SPHERES, spheres_recipe_of(default)), **other_spaces},
                  variants={"formulation": variants}, choices={"formulation": choices},
                  formulation=default, **details)


#: the formulations each space offers (the first is its own, the default)
FORMULATIONS_OF = {SPHERES: (formulations.DEFAULT_FORMULATION,) + tuple(
    f for f in formulations.FORMULATIONS if f != formulations.DEFAULT_FORMULATION),
    RIGID_MOTIONS: motion_formulations.FORMULATIONS}


METHODS: dict[str, Method] = {
    m.name: m
    for m in (
        Method("vi", "Lee–Leok–McClamroch variational integrator: explicit (29)–(30) for diagonal M, "
               "implicit (22)–(25) with Newton in Cayley coordinates otherwise", 2,
               {"implicit": False, "newton_tol": 1e-14, "newton_max_iterations": 20, "adaptive": False,
                "tolerance": 0.005, "max_step": None, "max_steps": None},
               {SPHERES: (ANY_INERTIA_ON_SPHERES, _vi_recipe)},
               status=NEWTON + (codes.VI_STEP_INFEASIBLE,),
               system_stages=(vi.explicit_vi_particle_drift, vi.explicit_vi_particle_kick,
                              vi.explicit_vi_particle_factors),
               option_vector=("newton_tol", "newton_max_iterations"), variants={"adaptive": ADAPTIVE_VI}),
        Method("lgvi", "Lee–Leok–McClamroch Lie group variational integrator on SO(3)ⁿ, and its extension to SE(3)ⁿ "
               "with a 6×6 inertia; F_k (and t_k) by Newton in Cayley coordinates", 2,
               {"newton_tol": 1e-14, "newton_max_iterations": 20},
               {ROTATIONS: (frozenset({"torque", "inertia"}),
                            _flat_fixed_recipe(lgvi.lgvi_allocate, lgvi.lgvi_begin, lgvi.lgvi_step)),
                RIGID_MOTIONS: (frozenset({"torque", "inertia6"}),
                                _flat_fixed_recipe(lgvi_motion.lgvi_motion_allocate, lgvi_motion.lgvi_motion_begin,
                                                   lgvi_motion.lgvi_motion_step))}, status=NEWTON,
               option_vector=("newton_tol", "newton_max_iterations")),
        Method("midpoint", "implicit midpoint rule on canonical coordinates (q, p = M(q) q̇): symplectic; Newton with a "
               "complex-step Jacobian", 2, {"newton_tol": 1e-14, "newton_max_iterations": 20},
               {GENERALISED: (frozenset({"canonical"}), _flat_fixed_recipe(
                   midpoint.midpoint_allocate, midpoint.midpoint_begin, midpoint.midpoint_step,
                   helpers=(("midpoint_residual", midpoint.midpoint_residual),)))},
               status=NEWTON, lanes=1, option_vector=("newton_tol", "newton_max_iterations")),
        Method("nhvi", "reversible nonholonomic integrator for rolling bodies: implicit midpoint on the velocities, "
               "contact point and rails, Cayley map on the attitude (R on SO(3), |Γ| = 1; energy bounded by "
               "reversibility); fixed-point iteration", 2, {"newton_tol": 1e-14, "newton_max_iterations": 50},
               {ROLLING: (FIELD, _nhvi_recipe(True)), ROLLING_DISK: (FIELD, _nhvi_recipe(False))}, status=NEWTON,
               option_vector=("newton_tol", "newton_max_iterations")),
        Method("langevin", "Langevin dynamics at a temperature by geodesic BAOAB (Leimkuhler–Matthews 2016): half "
               "kicks, exact great-circle drifts and the exact Ornstein–Uhlenbeck step of the tangential velocities; "
               "weak order 2 for configurational averages", 2,
               {"temperature": None, "cooling_rate": 0.0, "temperature_schedule": None, "friction": 1.0},
               {SPHERES: (ON_SPHERES, _stochastic_recipe(langevin.langevin_allocate, langevin.langevin_begin,
                                                         langevin.langevin_step, True))},
               stochastic=True, heat=True, diagonal_only=True, revision=2,  # 2: Ziggurat normals, not Box–Muller
               system_stages=(langevin.langevin_particle_drift, langevin.langevin_particle_kick,
                              langevin.langevin_particle_factors)),
        Method("brownian", "overdamped Langevin (Brownian) dynamics by geodesic Euler–Maruyama steps along the "
               "sphere's exponential map; weak order 1; ω is set to 0", 1,
               {"temperature": None, "cooling_rate": 0.0, "temperature_schedule": None, "friction": 1.0,
                "diffusion": None, "active": None},
               {SPHERES: (ON_SPHERES, _stochastic_recipe(langevin.brownian_allocate, langevin.brownian_begin,
                                                         langevin.brownian_step, False))},
               stochastic=True, diagonal_only=True, revision=2,  # 2: Ziggurat normals, not Box–Muller
               system_stages=(langevin.brownian_particle_drift, langevin.brownian_particle_kick,
                              langevin.brownian_particle_factors),
               variants={"active": ACTIVE_BROWNIAN}),
        _runge_kutta("rk2", "explicit midpoint rule on the equations of motion", 2, {},
                     _explicit_rk_recipe_of(rk.MIDPOINT_A, rk.MIDPOINT_B, False),
                     _on_flat_spaces(_flat_rk_recipe(rk.MIDPOINT_A, rk.MIDPOINT_B)),
                     lambda form: _flat_rk_recipe(rk.MIDPOINT_A, rk.MIDPOINT_B, form)),
        _runge_kutta("rk2_projected", "explicit midpoint rule, each q_i renormalised after every step", 2, {},
                     _explicit_rk_recipe_of(rk.MIDPOINT_A, rk.MIDPOINT_B, True), {}),
        _runge_kutta("rk4", "classical 4th-order Runge–Kutta on the equations of motion", 4, {},
                     _explicit_rk_recipe_of(rk.CLASSICAL_A, rk.CLASSICAL_B, False),
                     _on_flat_spaces(_flat_rk_recipe(rk.CLASSICAL_A, rk.CLASSICAL_B)),
                     lambda form: _flat_rk_recipe(rk.CLASSICAL_A, rk.CLASSICAL_B, form)),
        _runge_kutta("rk45", "adaptive Dormand–Prince 5(4), a step size per member, dense output at save points", 5,
                     {"rtol": 1e-6, "atol": 1e-9, "max_steps": None, "first_step": None}, _rk45_recipe_of,
                     _on_flat_spaces(_flat_rk45_recipe_of()), _flat_rk45_recipe_of,
                     status=(codes.OK, codes.NON_FINITE, codes.STEP_SIZE_UNDERFLOW), carry=("step_size",), lanes=1,
                     option_vector=("rtol", "atol", "max_steps")),
        Method("fire", "FIRE 2.0 minimisation (Bitzek et al. 2006, Guénolé et al. 2020) with velocities and forces in "
               "each tangent plane and every move along a geodesic; stops on the largest tangential force or the "
               "energy change per step", 1,
               {"force_tolerance": 1e-8, "energy_tolerance": None, "max_steps": None, "max_step": None},
               {SPHERES: (ON_SPHERES, _fire_recipe)},
               status=(codes.OK, codes.NON_FINITE, codes.NOT_CONVERGED), carry=fire.CARRY, lanes=1,
               option_vector=("force_tolerance", "energy_tolerance", "max_steps", "max_step"), diagonal_only=True,
               minimiser=True, carry_start=fire.initial_carry),
    )
}


#: every method option: (unit, meaning); the docs' spec reference is made from these and METHODS' defaults
OPTION_DOCS = {
    "implicit": ("", "vi: force the implicit form (22)–(25) even for a diagonal M"),
    "newton_tol": ("1", "implicit methods: Newton stops at a residual this far below the step's scale"),
    "newton_max_iterations": ("", "implicit methods: iterations before a member stops with status NEWTON_FAILED"),
    "adaptive": ("", "vi: reversible adaptive steps for systems with close encounters (sphere_nbody)"),
    "tolerance": ("1", "adaptive vi: the step density's target, the step shrinking where encounters are close"),
    "max_step": ("s", "adaptive vi: the largest step (default dt); fire: FIRE's largest step Δt_max (default 10 dt, "
                 "> dt)"),
    "max_steps": ("steps", "adaptive vi and rk45: steps per member before it stops (default: unlimited); fire: FIRE "
                  "steps per member, over the whole run, before it stops unconverged (status NOT_CONVERGED; default: "
                  "the run's last step)"),
    "force_tolerance": ("J", "fire: a member has converged once its largest tangential force max_i |P_i ∂V/∂q_i| "
                        "is at most this (> 0)"),
    "energy_tolerance": ("1", "fire: or once one step changes V by at most this times (|V_k| + |V_k-1|)/2 "
                         "(LAMMPS' etol; > 0; default: not used)"),
    "formulation": ("", "rk2, rk2_projected, rk4, rk45: the equations stepped; (S²)ⁿ q_omega (default) | q_qdot | "
                    "q_mu | q_pi, SE(3) kirchhoff (default) | newton_euler | hybrid | lagrange"),
    "rtol": ("1", "rk45: relative error tolerance per step"),
    "atol": ("the state's", "rk45: absolute error tolerance per step"),
    "first_step": ("s", "rk45: the first step (default dt)"),
    "temperature": ("J", "langevin, brownian: the bath's temperature k_B T (k_B = 1) at t = 0, >= 0; required; "
                    "a sweep { values = [...] } varies it over members (store coordinate bath_temperature)"),
    "cooling_rate": ("J/s", "langevin, brownian: the bath cools as T(t) = max(temperature − cooling_rate·t, 0), t the "
                     "run's time (anneal a liquid into a crystal)"),
    "temperature_schedule": ("[s, J]", "langevin, brownian: instead of temperature and cooling_rate, a piecewise-linear "
                             "protocol [[t₀ = 0, T₀], [t₁, T₁], …] (times increasing, T >= 0): T(t) interpolated "
                             "between the knots, T of the last after it (quench, anneal, heat and hold)"),
    "friction": ("1/s", "langevin, brownian: the friction rate γ; brownian's diffusion is D_i = T/(M_ii γ) (rad²/s); "
                 "may be swept (bath_friction)"),
    "diffusion": ("rad²/s", "brownian: instead of friction, every body's diffusion D at t = 0 (friction coefficient "
                  "ζ = T/D, so D follows T as the bath cools); needs temperature > 0; may be swept (bath_diffusion)"),
    "active": ("", "brownian: self-propelled particles, { speed = v₀ (rad/s, > 0), rotational_diffusion = D_r "
               "(rad²/s, >= 0) }, either may be swept (active_speed, active_rotational_diffusion); each heading n_i "
               "rides in ω_i = v₀ q_i × n_i (the initial ω gives its direction)"),
}

#: the keys of ``active`` and their lower bounds (speed > 0, rotational_diffusion >= 0)
ACTIVE_KEYS = {"speed": None, "rotational_diffusion": 0.0}

#: options that may be 0 (the others are > 0)
NON_NEGATIVE_OPTIONS = frozenset({"temperature", "cooling_rate"})


#: every kernel-level method by name, variants included (what :mod:`kernels.compile` and the runners look up)
KERNEL_METHODS: dict[str, Method] = {
    **METHODS,
    **{variant.name: variant for method in METHODS.values() for chosen in method.variants.values()
       for variant in (chosen.values() if isinstance(chosen, dict) else (chosen,))},
}


def methods_for(definition) -> list[str]:
    """Names of the methods that support a system definition (its space and capabilities)."""
    return [name for name, method in METHODS.items() if method.supports(definition)]
