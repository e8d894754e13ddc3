"""Users' models on (S²)ⁿ (issue 33): acceptance.

1. Built-ins restated as model files (examples/models/) run next to the built-in, same method, step,
   parameters (read from the built-in's preset and passed to the model) and initial states:
   sphere_nbody Example 2 (explicit vi, eqs. (29)–(30)), spherical_chain Example 1 (implicit vi,
   eqs. (22)–(25), non-diagonal M), jacobi_chain (configuration-dependent inertia m_jk(q), eq. (12), rk4) and
   sphere_lj as a pair potential (2000 particles, finite cutoff, the system-parallel mode of one large member);
   and spherical_chain's forces (base torque, tip force, dampers) as the model's force(t, q, omega, p).
   The model's expressions are the built-in's up to the order of their operations, so the runs part only by
   round-off grown along the flow: states agree to 1e-10 relative and energies to 1e-12 of E0 over horizons
   where that growth stays far below both (measured numbers in each test).
2. A model no built-in has, examples/models/three_link_chain.py (a 3-link chain, a spring between masses 1 and
   3, a dipole on link 3), against equations assembled here independently: Cartesian coordinates of the links
   with the constraint forces λ_i q_i of ‖q_i‖ = 1 (the explicit-constraint description Lee–Leok–McClamroch
   avoid; projected onto each T_{q_i}S² it is their eq. (8), and (9) in ω), derived by sympy and integrated by
   scipy's DOP853; and vi's energy error bounded over 10⁶ steps and second order.
"""

import re
import time
from pathlib import Path

import numpy as np
import pytest
import sympy
from scipy.integrate import solve_ivp

from armillary.kernels import get_system, integrate
from armillary.kernels.geometry import fibonacci_sphere, thermal_velocities
from armillary.kernels.models import build_model

from conftest import perturbed

pytestmark = pytest.mark.xdist_group("models_sphere")

MODELS = Path(__file__).resolve().parent.parent / "examples" / "models"


def model(file: str):
    """The model file examples/models/``file``, built (derivation timed in ``.model.derive_seconds``)."""
    path = MODELS / file
    return build_model(path.read_text(), str(path))


def relative_difference(a, b) -> float:
    return float(np.abs(a - b).max() / np.abs(b).max())


def mirrors_preset(builtin, definition, differing=()) -> None:
    """The model file's parameter defaults (but ``differing``) and ``initial_state(p)`` are the built-in's
    preset's values."""
    defaults = get_system(definition.name, "initial")
    for parameter in (p.name for p in definition.parameters):
        if parameter not in differing:
            np.testing.assert_allclose(defaults.params[parameter], builtin.params[parameter], rtol=1e-15,
                                       err_msg=parameter)
    for variable, value in builtin.initial_state().items():
        np.testing.assert_allclose(defaults.initial_state()[variable], value, rtol=0, atol=1e-15, err_msg=variable)


def restated(name: str, preset: str, file: str, **params):
    """(built-in, model system): the built-in with its preset (and ``params``), the model file with every
    parameter it declares taken from the built-in's values."""
    builtin = get_system(name, preset, **params)
    definition = model(file)
    declared = [p.name for p in definition.parameters]
    assert set(declared) <= set(builtin.params), f"{file} declares parameters {name} does not have"
    return builtin, get_system(definition.name, "initial", **{p: builtin.params[p] for p in declared})


def preset_members(system, members: int, scale: float) -> dict:
    """The preset's state and members − 1 others moved from it by ``scale`` along their own random tangent
    directions (the (S²)ⁿ retraction, seed 0)."""
    state = system.initial_state()
    q, omega = perturbed(state["q"], state["omega"], members, scale, 0)
    q[0], omega[0] = state["q"], state["omega"]
    return {"q": q, "omega": omega}


# ------------------------------------------------------------------------------ built-ins restated as models

#: built-in → (its preset, the model file, method, dt (s), whether vi takes the implicit path)
RESTATED = {
    "sphere_nbody": ("paper", "sphere_nbody.py", "vi", 1e-3, False),
    "spherical_chain": ("paper", "spherical_chain.py", "vi", 1e-2, True),
    "jacobi_chain": ("double", "jacobi_chain.py", "rk4", 1e-3, None),
}


@pytest.mark.parametrize("name", RESTATED)
def test_restated_builtin_runs_as_the_builtin(name):
    """10⁴ steps of the built-in's conftest step, 4 members (the preset's state and 3 moved by 1e-3):

    * sphere_nbody, Example 2, explicit vi (diagonal M) at h = 1 ms, 10 s: the model's V is the built-in's
      −γ Σ c_ij/‖q_i × q_j‖, but its ∂V/∂q is sympy's derivative of that off the sphere (the built-in uses
      the on-sphere form), equal in the moments q_i × ∂V/∂q_i (all that (29)–(30) use) up to round-off, which
      the three-body motion grows to ≤ 1e-11 at 10 s (measured over these members: q 6.8e-12, ω 5.0e-12,
      energy 7.2e-14 of E0).  Not beyond: the preset's state nearly collides at t ≈ 10.55 s (so does one of
      the moved members), where the fixed step resolves the encounter poorly and the runs part: at 11 s by
      6e-7 and 1e-4 in q.
    * spherical_chain, Example 1, vi at h = 10 ms, 100 s; M not diagonal, so vi takes the implicit path
      (22)–(25) for both.  Measured: bit for bit (the generated V, ∂V/∂q and M round as the built-in's).
    * jacobi_chain, rk4 at h = 1 ms, 10 s, in (q, ω) with m_jk(q) and ∂m/∂q (eq. (19)).  Measured: bit for
      bit.  Not vi, which also steps m(q): at this slow preset (h‖ω‖ ≈ 1e-4) the ω of its (25) carries
      round-off ε/(h‖ω‖) ≈ 1e-12 a step, so the built-in parts from itself started 1e-14 away by 3e-11 in q
      over 10⁴ steps (rk4: 5e-14), and model and built-in by 1.2e-10 in ω and 1.4e-10 of E0 in energy.
    """
    preset, file, method, dt, implicit = RESTATED[name]
    builtin, derived = restated(name, preset, file)
    mirrors_preset(builtin, derived.definition)
    assert derived.definition.diagonal_inertia == builtin.definition.diagonal_inertia
    state = preset_members(builtin, 4, 1e-3)
    expected = integrate(builtin, method, state, dt, 10_000, 1000)
    result = integrate(derived, method, state, dt, 10_000, 1000)
    assert np.all(expected.status == 0) and np.all(result.status == 0)
    if implicit is not None:
        assert result.implicit == expected.implicit == implicit
    for variable in ("q", "omega"):
        assert relative_difference(result.state[variable], expected.state[variable]) <= 1e-10, variable
    assert np.abs(result.energy - expected.energy).max() <= 1e-12 * np.abs(expected.energy[:, :1]).min()
    print(f"\n{name} {method}: q {relative_difference(result.q, expected.q):.2e}, ω "
          f"{relative_difference(result.omega, expected.omega):.2e}, energy "
          f"{(np.abs(result.energy - expected.energy) / np.abs(expected.energy[:, :1])).max():.2e} of E0; derive "
          f"{derived.definition.model.derive_seconds:.2f} s")


#: the built-in spherical_chain's forces, all switched on: a periodic base torque, a tip force, joint dampers
DRIVEN = dict(base_torque=[0.0, 0.5, 0.0], base_torque_amplitude=[3.0, 0.0, 1.0], base_torque_frequency=0.7,
              base_torque_phase=0.3, tip_force=[0.5, -0.2, 1.0], damping=[0.4, 0.25])


def test_spherical_chain_model_forces_are_the_builtins():
    """The model's force(t, q, omega, p) (moments g_i, seed 000 §V) restating the built-in's base torque, tip
    force and dampers: Example 1's state driven, vi (implicit, the discrete Lagrange–d'Alembert principle with
    trapezoidal forces and −(h/2) ∂g/∂ω in (25)) at h = 10 ms for 10 s.  A model with a force always runs the
    forced kernel (the one the restated test above ran with zero forces, bit for bit the built-in's unforced
    run), so this adds no model kernel.  The model sums its moments in another order, and the driven chain
    grows that round-off quickly: for the preset's state measured q 5e-15, energy 8e-14 of E0 at 9 s, 1e-12
    at 12 s, 4e-12 at 20 s (members moved 1e-3 from it pass 1e-12 in energy from 8 s on), so 10 s.  Energy is
    not conserved here, and its difference follows the states' with the factor |∂E/∂x|·|x|/|E0| ≈ 10.
    Energy and the forces' work W (J, the trapezoidal rule over the steps) to 1e-12 of E0."""
    builtin, derived = restated("spherical_chain", "paper", "spherical_chain.py", **DRIVEN)
    assert builtin.forced and derived.forced
    state = {name: value[np.newaxis] for name, value in builtin.initial_state().items()}
    expected = integrate(builtin, "vi", state, 1e-2, 1000, 100)
    result = integrate(derived, "vi", state, 1e-2, 1000, 100)
    assert np.all(expected.status == 0) and np.all(result.status == 0)
    for variable in ("q", "omega"):
        assert relative_difference(result.state[variable], expected.state[variable]) <= 1e-10, variable
    scale = np.abs(expected.energy[:, :1]).min()
    assert np.abs(expected.work).max() > 0.1 * scale  # the forces do work of the order of the energy
    assert np.abs(result.energy - expected.energy).max() <= 1e-12 * scale
    assert np.abs(result.work - expected.work).max() <= 1e-12 * scale
    print(f"\nspherical_chain driven: q {relative_difference(result.q, expected.q):.2e}, ω "
          f"{relative_difference(result.omega, expected.omega):.2e}, energy "
          f"{np.abs(result.energy - expected.energy).max() / scale:.2e}, work "
          f"{np.abs(result.work - expected.work).max() / scale:.2e} of E0 (|W| ≤ {np.abs(expected.work).max():.3g} J)")


def test_lennard_jones_pair_model_runs_system_parallel_as_the_builtin():
    """sphere_lj at N = 2000 particles, reduced density ρ* = nσ²/4π = 0.8, ε = 1 J, m = 1 kg, cutoff 2.5σ
    (the MD tests' setting; the ``paper`` preset sums every pair, which the neighbour lists cannot take), from
    a Fibonacci lattice at temperature 0.5ε: one member, so both run system-parallel (neighbour lists,
    kernels.system_parallel), 400 steps of h = 0.005τ (τ = σ√(m/ε)), 2τ.  The model's φ(r) − φ(r_c) and
    φ'(r)/r are the built-in's up to the order of operations; the liquid's chaos grows that round-off, measured
    q 3.2e-14, ω 8.3e-13 relative, energy 3.0e-15 of E0 at 2τ (34 list builds), so 2τ compares well before the
    runs part.
    The model derives its pair functions only: nothing per particle."""
    n = 2000
    sigma = np.sqrt(0.8 * 4.0 * np.pi / n)
    start = time.perf_counter()
    mirrors_preset(get_system("sphere_lj", "paper"), model("sphere_lj.py"), differing=("cutoff",))
    builtin, derived = restated("sphere_lj", None, "sphere_lj.py", m=1.0, epsilon=1.0, sigma=sigma, cutoff=2.5 * sigma)
    functions = set(re.findall(r"^def (\w+)\(", derived.definition.model.text, re.MULTILINE))
    assert functions == {"pair_energy", "pair_gradient_factor", "pair_constants", "inertia_values"}
    # printed per pair in w = 1/r2 (one division) with 4ε, σ⁶, σ¹², φ(r_c) and r_c² in per-member constant rows
    assert derived.definition.model.text.count("w = 1.0 / r2") == 2 and "/ (" not in \
        derived.definition.model.text.split("def pair_constants")[0].split("def pair_energy")[1]
    built = time.perf_counter() - start
    q = fibonacci_sphere(n)
    state = {"q": q[None], "omega": thermal_velocities(q, 1.0, 0.5, seed=0)[None]}
    expected = integrate(builtin, "vi", state, 0.005 * sigma, 400, 40)
    result = integrate(derived, "vi", state, 0.005 * sigma, 400, 40)
    assert expected.mode == result.mode == "system"
    assert np.all(expected.status == 0) and np.all(result.status == 0)
    assert result.neighbour_rebuilds[0] > 1
    for variable in ("q", "omega"):
        assert relative_difference(result.state[variable], expected.state[variable]) <= 1e-10, variable
    assert np.abs(result.energy - expected.energy).max() <= 1e-12 * abs(expected.energy[0, 0])
    print(f"\nsphere_lj N = {n}: q {relative_difference(result.q, expected.q):.2e}, ω "
          f"{relative_difference(result.omega, expected.omega):.2e}, energy "
          f"{np.abs(result.energy - expected.energy).max() / abs(expected.energy[0, 0]):.2e} of E0, "
          f"{result.neighbour_rebuilds[0]} list builds; model built in {built:.2f} s")


# ------------------------------------------------------------------------------------ a model of its own

CHAIN = "three_link_chain.py"


def cartesian_reference(params: dict):
    """The 3-link chain's equations in Cartesian coordinates, assembled independently of armillary: y = (q, q̇)
    ∈ R¹⁸, q_i ∈ R³ constrained to ‖q_i‖ = 1 by the forces λ_i q_i, x_k = Σ_{i≤k} l_i q_i (m),
    T = ½ Σ_k m_k ‖ẋ_k‖² (sympy's Hessian gives the 9×9 mass matrix 𝕄), V from the file's docstring,

        𝕄 q̈ + ∂V/∂q = Σ_i λ_i ∂(½‖q_i‖²)/∂q,   q_i·q̈_i + ‖q̇_i‖² = 0   (the constraint, differentiated twice),

    one 12×12 linear solve for (q̈, λ) per evaluation.  Returns (vector field f(t, y), energy E(q, q̇) (J))."""
    q = sympy.Matrix(sympy.symbols("q0:9", real=True))
    v = sympy.Matrix(sympy.symbols("v0:9", real=True))
    link = [q[3 * i:3 * i + 3, 0] for i in range(3)]
    rate = [v[3 * i:3 * i + 3, 0] for i in range(3)]
    m, lengths = params["m"], params["l"]
    x = [sum((lengths[i] * link[i] for i in range(k + 1)), sympy.zeros(3, 1)) for k in range(3)]
    xdot = [sum((lengths[i] * rate[i] for i in range(k + 1)), sympy.zeros(3, 1)) for k in range(3)]
    kinetic = sum(m[k] * xdot[k].dot(xdot[k]) for k in range(3)) / 2
    e, field = sympy.Matrix(params["gravity_direction"]), sympy.Matrix(params["B"])
    spring = sympy.sqrt((x[2] - x[0]).dot(x[2] - x[0])) - params["rest_length"]
    potential = (-sum(m[k] * params["g"] * e.dot(x[k]) for k in range(3)) + params["k"] / 2 * spring ** 2
                 - params["mu"] * link[2].dot(field))
    mass = np.array(sympy.hessian(kinetic, v), dtype=np.float64)
    gradient = sympy.lambdify([q], [sympy.diff(potential, c) for c in q], "numpy")
    energy = sympy.lambdify([q, v], kinetic + potential, "numpy")

    def vector_field(t, y):
        position, velocity = y[:9], y[9:]
        system = np.zeros((12, 12))
        system[:9, :9] = mass
        rhs = np.zeros(12)
        rhs[:9] = -np.asarray(gradient(position), dtype=np.float64)
        for i in range(3):
            rows = slice(3 * i, 3 * i + 3)
            system[rows, 9 + i] = -position[rows]
            system[9 + i, rows] = position[rows]
            rhs[9 + i] = -velocity[rows] @ velocity[rows]
        return np.concatenate([velocity, np.linalg.solve(system, rhs)[:9]])

    return vector_field, energy


@pytest.fixture(scope="module")
def chain():
    """The three-link model, built, at its defaults, and its initial state with a member axis."""
    system = get_system(model(CHAIN).name, "initial")
    return system, {name: value[None] for name, value in system.initial_state().items()}


def test_three_link_chain_rk45_agrees_with_an_independent_cartesian_reference(chain):
    """rk45 (Dormand–Prince 5(4), rtol 1e-11, atol 1e-13) of the model against scipy's DOP853 (rtol 1e-12,
    atol 1e-14) of :func:`cartesian_reference`, 5 s sampled every 0.5 s (ω_i = q_i × q̇_i): q and ω (rad/s,
    |ω| ≤ 5.7) agree to 1e-8.  rk45's global error is proportional to its tolerance, grown along this chaotic
    chain: measured max |Δq| 2.0e-10, |Δω| 2.0e-9 (2.4e-8 at rtol 1e-10, 1.3e-10 at 1e-12, so the bound is
    rk45's error, with 5× to spare); DOP853's own error (against rtol 1e-13) ≤ 1e-10.  Energy (J) at t = 0:
    the model's V and M against the reference's T + V to round-off."""
    system, state = chain
    params = {name: np.asarray(value, dtype=np.float64) for name, value in system.params.items()}
    vector_field, energy = cartesian_reference(params)
    q0, omega0 = state["q"][0], state["omega"][0]
    y0 = np.concatenate([q0.ravel(), np.cross(omega0, q0).ravel()])
    times = np.arange(11) * 0.5
    reference = solve_ivp(vector_field, (0.0, 5.0), y0, method="DOP853", rtol=1e-12, atol=1e-14, t_eval=times)
    assert reference.success
    q_ref = reference.y[:9].T.reshape(-1, 3, 3)
    omega_ref = np.cross(q_ref, reference.y[9:].T.reshape(-1, 3, 3))
    result = integrate(system, "rk45", state, 0.01, 500, 50, rtol=1e-11, atol=1e-13)
    assert result.status[0] == 0
    np.testing.assert_allclose(result.time, times, rtol=1e-15)
    q_error = np.abs(result.q[0] - q_ref).max()
    omega_error = np.abs(result.omega[0] - omega_ref).max()
    assert q_error <= 1e-8 and omega_error <= 1e-8
    e0 = energy(y0[:9], y0[9:])
    assert abs(result.energy[0, 0] - e0) <= 1e-13 * abs(e0)
    print(f"\nthree-link chain, rk45 against the Cartesian DOP853 reference over 5 s: q {q_error:.2e}, ω "
          f"{omega_error:.2e} rad/s; E0 {result.energy[0, 0]:.6f} J, derive "
          f"{system.definition.model.derive_seconds:.2f} s")


def test_three_link_chain_vi_energy_error_stays_bounded_over_a_million_steps(chain):
    """vi (implicit, M not diagonal) at h = 1 ms for 10⁶ steps (1000 s, about 4 s): the relative energy error's
    maximum over the last tenth of the run stays within 2× its maximum over the first tenth (a symplectic
    integrator's error oscillates about a modified energy; a drifting one grows 10× from the first tenth to the
    last).  Measured (energy every 10 steps): 1.18e-5 in the first tenth, 1.76e-5 in the last, the tenths
    between 1.18e-5 … 1.98e-5 (the chaotic chain visits states whose O(h²) offset differs); rk4 and rk2 at the
    same h and length (not run here): 14× and 11× from the first tenth to the last."""
    system, state = chain
    result = integrate(system, "vi", state, 1e-3, 1_000_000, 10, outputs=("energy",))
    assert result.status[0] == 0 and result.implicit
    error = np.abs(result.energy[0, 1:] - result.energy[0, 0]) / abs(result.energy[0, 0])
    tenths = error.reshape(10, -1).max(axis=1)
    assert tenths[-1] <= 2.0 * tenths[0]
    print(f"\nthree-link chain, vi 10⁶ steps: max |ΔE|/|E0| per tenth {np.array2string(tenths, precision=2)}")


def test_three_link_chain_vi_energy_error_is_second_order(chain):
    """vi at h = 2 ms and 1 ms over the same 5 s, energy sampled at the same instants (every 10 ms): the ratio
    of the largest energy errors is 4 (second order, error ≈ C h²) within 10 %.  Measured 3.9998."""
    system, state = chain
    errors = []
    for h in (2e-3, 1e-3):
        run = integrate(system, "vi", state, h, int(round(5.0 / h)), int(round(0.01 / h)), outputs=("energy",))
        assert run.status[0] == 0
        errors.append(np.abs(run.energy[0] - run.energy[0, 0]).max())
    ratio = errors[0] / errors[1]
    assert abs(ratio - 4.0) <= 0.4
    print(f"\nthree-link chain, vi energy error ratio h/(h/2): {ratio:.4f}")


def test_forces_switch_on_by_their_parameter_values_and_a_float_zero_is_zero():
    """A model's force is decided off where its moments vanish identically at a member's parameter values (then
    it runs the unforced kernels, as the built-in with its forces off); an inertia written with 0.0 off the
    diagonal is diagonal (sympy's Float(0.0) == 0 is False, so a naive test would pick vi's implicit path)."""
    chain = model("spherical_chain.py")
    assert not get_system(chain.name, "initial").forced
    assert get_system(chain.name, "initial", damping=[[0.0, 0.0], [0.0, 0.3]]).forced  # one member's damper
    assert get_system(chain.name, "initial", tip_force=[0.0, 0.0, 1.0]).forced
    # an amplitude at frequency and phase 0 gives sin(0) = 0: no force
    assert not get_system(chain.name, "initial", base_torque_amplitude=[0.0, 0.0, 1.0]).forced
    assert get_system(chain.name, "initial", base_torque_amplitude=[0.0, 0.0, 1.0], base_torque_frequency=2.0).forced
    source = (MODELS / "coupled_pendula.py").read_text()
    assert "0], [0," in source
    assert build_model(source.replace("0], [0,", "0.0], [0.0,"), "float_zero.py").diagonal_inertia


def test_armillary_check_passes_the_pair_model_at_its_defaults(tmp_path, capsys):
    """`armillary check` differences the Lennard-Jones pair model (642 particles of the paper preset) at states
    moved a hundredth of the cutoff: moved 0.3 rad, neighbours came within 5e-3 of each other and the check
    refused the file (error 3)."""
    from armillary.jobs.cli import main

    spec = tmp_path / "lj.toml"
    spec.write_text(f'[system]\nmodel = "{MODELS / "sphere_lj.py"}"\n[integrator]\nmethod = "vi"\ndt = 0.001\n'
                    f't_end = 0.01\n[ensemble]\nmembers = 1\n[output]\nstore = "{tmp_path / "lj.zarr"}"\n')
    assert main(["check", str(spec)]) == 0
    error = float(capsys.readouterr().out.split("largest error ")[1].split()[0])
    assert error < 1e-6 and not (tmp_path / "lj.zarr").exists()


def test_a_pair_model_without_a_cutoff_is_summed_over_every_pair_as_the_builtin_charges():
    """examples/models/sphere_coulomb.py (φ = k/r, cutoff = inf) gives sphere_riesz's Coulomb energy and gradient
    (the same pairs, the same order: to round-off), and its 12 charges minimise by fire onto the icosahedron's
    49.165253058; a φ that does not vanish at infinity (k ln r) with cutoff = inf is refused naming the cutoff."""
    from armillary.kernels import InvalidInput

    charges = model("sphere_coulomb.py")
    coulomb = get_system(charges.name)
    assert np.isinf(charges.pair.cutoff(coulomb.broadcast(1, 12)))
    q = np.random.default_rng(0).normal(size=(2, 50, 3))
    q /= np.linalg.norm(q, axis=-1, keepdims=True)
    builtin = get_system("sphere_riesz", s=1.0)
    np.testing.assert_allclose(coulomb.potential(q), builtin.potential(q), rtol=1e-15)
    np.testing.assert_allclose(coulomb.gradient(q), builtin.gradient(q), rtol=0, atol=1e-14 * np.abs(
        builtin.gradient(q)).max())
    start = q[:, :12] / np.linalg.norm(q[:, :12], axis=-1, keepdims=True)
    run = integrate(coulomb, "fire", {"q": start, "omega": np.zeros_like(start)}, 0.01, 1000, 1000,
                    force_tolerance=1e-9)
    np.testing.assert_allclose(run.energy[:, -1], 49.165253058, rtol=1e-9)
    source = (MODELS / "sphere_coulomb.py").read_text().replace("return p.k / r", "return -p.k * log(r)")
    logarithmic = build_model("from armillary.model import log\n" + source, "logarithmic.py")
    with pytest.raises(InvalidInput) as refused:
        get_system(logarithmic.name)
    assert refused.value.field == "cutoff"
