"""Typed pair models, ``pair_potential(r, p, a, b)`` with the two particles' type data: examples/models/
sphere_lj_mixture.py (Lennard-Jones, Lorentz–Berthelot, additive diameters) is sphere_mixture's ``lj`` where their
cutoffs agree, and a direct NumPy sum where sizes spread; its system mode is its ensemble mode; the store's particle
properties are sphere_mixture's; bad input is refused naming the key."""

from pathlib import Path

import numpy as np
import pytest

from armillary.kernels import get_system, integrate
from armillary.kernels.errors import InvalidInput
from armillary.kernels.geometry import fibonacci_sphere, thermal_velocities
from armillary.kernels.models import build_model
from armillary.kernels.systems.sphere_mixture import particle_layout

pytestmark = pytest.mark.xdist_group("models_typed")

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "models" / "sphere_lj_mixture.py"
#: 100 particles at areal density 0.5 of type A; B is 1.3 times as large, twice as heavy, ε 1.5 J
N = 100
SIGMA_A = float(np.sqrt(0.5 * 4.0 * np.pi / N))
TYPES = {"A": {"sigma": SIGMA_A}, "B": {"sigma": 1.3 * SIGMA_A, "epsilon": 1.5, "mass": 2.0}}
CUTOFF = 2.5 * SIGMA_A
#: what the energies and gradients are compared to (relative; a gradient to its largest component)
RTOL = 1e-12


def model(text: str | None = None, name: str = "sphere_lj_mixture.py"):
    """The registered name of examples/models/sphere_lj_mixture.py (or of ``text``)."""
    return build_model(EXAMPLE.read_text() if text is None else text, name).name


def typed(**params):
    """The example model: the binary mixture 50:50, its sizes spread 10 % unless ``params`` say otherwise."""
    return get_system(model(), **{"types": TYPES, "composition": {"A": 0.5, "B": 0.5}, "polydispersity": 0.1,
                                  "cutoff": CUTOFF, **params})


def configuration(n=N, members=1, seed=0):
    """The Fibonacci lattice moved at random by 0.15 σ_A (m), (members, n, 3)."""
    q = fibonacci_sphere(n) + 0.15 * SIGMA_A * np.random.default_rng(seed).normal(size=(members, n, 3))
    return q / np.linalg.norm(q, axis=-1, keepdims=True)


def assert_close_gradients(actual, expected):
    np.testing.assert_allclose(actual, expected, rtol=0, atol=RTOL * np.abs(expected).max())


def direct_sum(q, ids, diameters, cutoff):
    """V (J) and ∂V/∂q (J) of the Lennard-Jones mixture by NumPy over every pair of q (n, 3): σ_ij = (d_i + d_j)/2,
    ε_ij = √(ε_a ε_b), φ(r) − φ(r_c) inside the cutoff."""
    epsilon = np.array([TYPES[name].get("epsilon", 1.0) for name in TYPES])[ids]
    sigma = 0.5 * (diameters[:, None] + diameters[None, :])
    eps = np.sqrt(epsilon[:, None] * epsilon[None, :])
    difference = q[:, None, :] - q[None, :, :]
    r = np.linalg.norm(difference, axis=-1)
    np.fill_diagonal(r, np.inf)
    inside = r < cutoff

    def phi(x):
        s6 = (sigma / x) ** 6
        return 4.0 * eps * (s6 * s6 - s6)

    energy = 0.5 * np.sum(np.where(inside, phi(r) - phi(cutoff), 0.0))
    s6 = (sigma / r) ** 6
    factor = np.where(inside, 4.0 * eps * (6.0 * s6 - 12.0 * s6 * s6) / (r * r), 0.0)  # φ'(r)/r
    return energy, np.einsum("ij,ijk->ik", factor, difference)


def test_one_cutoff_and_no_spread_is_sphere_mixture_lj():
    """Without polydispersity and with every pair's cutoff r_c, sphere_mixture's lj (Lorentz–Berthelot) has the same V,
    ∂V/∂q and masses; the pair constants hold the parameter-only parts alone, what reads a particle's type is
    computed per pair."""
    system = typed(polydispersity=0.0)
    mixture = get_system("sphere_mixture", types=TYPES, composition={"A": 0.5, "B": 0.5},
                         pairs={f"{a}-{b}": {"cutoff": CUTOFF} for a in TYPES for b in TYPES})
    q = configuration(members=2)
    np.testing.assert_allclose(system.potential(q), mixture.potential(q), rtol=RTOL)
    assert_close_gradients(system.gradient(q), mixture.gradient(q))
    np.testing.assert_array_equal(system.definition.inertia(system.broadcast(2, N), N),
                                  mixture.definition.inertia(mixture.broadcast(2, N), N))
    text = system.definition.model.text
    constants = text.split("def pair_constants")[1]
    assert constants.count("out[") == 3 and "epsilon" not in constants and "diameter" not in constants
    assert text.count("epsilon_i = ") == 2 and text.count("diameter_j = ") == 2 and "sigma_i" not in text


def test_spread_sizes_are_a_direct_sum_member_by_member():
    """Diameters 10 % polydisperse in member 1 and not in member 0 (a per-member parameter): each member's V and
    ∂V/∂q are the direct sum over its own particles' sizes."""
    system = typed(polydispersity=[0.0, 0.1])
    q = configuration(members=2, seed=1)
    params = system.broadcast(2, N)
    ids, diameters = particle_layout(params, N)
    assert np.bincount(ids).tolist() == [50, 50] and np.any(diameters[1] != diameters[0])
    potential, gradient = system.potential(q), system.gradient(q)
    for member in range(2):
        energy, expected = direct_sum(q[member], ids, diameters[member], CUTOFF)
        np.testing.assert_allclose(potential[member], energy, rtol=RTOL)
        assert_close_gradients(gradient[member], expected)


def test_system_mode_is_the_ensemble_mode_and_the_store_keeps_the_particles():
    """vi on the neighbour lists of the system mode follows the ensemble mode's all-pairs lanes to round-off over
    100 steps (the sums' orders differ); the store's particle properties are sphere_mixture's type, size and mass."""
    system = typed()
    q = configuration(seed=2)[0]
    mass = system.definition.inertia(system.broadcast(1, N), N)[0]
    state = {"q": q[None], "omega": thermal_velocities(q, mass, 0.5, seed=3)[None]}
    runs = {mode: integrate(system, "vi", state, 0.002 * SIGMA_A, 100, 50, mode=mode)
            for mode in ("ensemble", "system")}
    assert runs["system"].mode == "system" and runs["system"].neighbour_rebuilds[0] >= 1
    for name in ("q", "omega"):
        np.testing.assert_allclose(runs["system"].state[name], runs["ensemble"].state[name], rtol=0, atol=1e-11)
    np.testing.assert_allclose(runs["system"].energy, runs["ensemble"].energy, rtol=1e-12)
    properties = system.definition.body_properties(system.broadcast(1, N), N)
    ids, diameters = particle_layout(system.broadcast(1, N), N)
    assert set(properties) == set(system.definition.body_property_docs) == {"particle_type", "diameter", "mass"}
    np.testing.assert_array_equal(properties["particle_type"][0], ids)
    assert properties["particle_type"][1]["type_names"] == ["A", "B"]
    np.testing.assert_array_equal(properties["diameter"][0], diameters)
    np.testing.assert_array_equal(properties["mass"][0][0], np.where(ids == 1, 2.0, 1.0))


def edited(replace: str, by: str) -> str:
    text = EXAMPLE.read_text()
    assert replace in text
    return text.replace(replace, by)


def test_the_files_parameters_give_the_layouts_defaults():
    """The example's parameters give types, composition and polydispersity their defaults (sphere_mixture's
    binary_64 preset's), which a value given replaces; a file that gives none needs types."""
    defaults = get_system(model())
    preset = get_system("sphere_mixture", "binary_64")
    q = preset.initial_state()["q"][None]
    for name in ("types", "composition", "polydispersity"):
        np.testing.assert_equal(defaults.params[name], preset.params[name], err_msg=name)
    np.testing.assert_array_equal(defaults.definition.inertia(defaults.broadcast(1, 64), 64),
                                  preset.definition.inertia(preset.broadcast(1, 64), 64))
    assert get_system(model(), polydispersity=0.0).potential(q) != defaults.potential(q)
    text = EXAMPLE.read_text()
    declared = text[text.index("parameters = {"):text.index("\n", text.index('"polydispersity"'))]
    bare = model(text.replace(declared, 'parameters = {"cutoff": 0.75}'), "bare.py")
    with pytest.raises(InvalidInput) as refused:
        get_system(bare)
    assert refused.value.field == "types"


@pytest.mark.parametrize("params, field", [
    ({"types": {"A": {"epsilon": 1.0}}}, "types.A.sigma"),
    ({"composition": {"A": 0.5, "C": 0.5}}, "composition.C"),
    ({"composition": {"A": 60, "B": 60}}, "composition"),
    ({"particle_types": [0, 2] * 50}, "particle_types"),
    ({"diameters": [0.1] * 10}, "diameters"),
])
def test_bad_layouts_are_refused_naming_the_key(params, field):
    """Refused when bound, or when the particles are laid out (the composition's counts and explicit lists need
    their number)."""
    params = {"types": TYPES, "composition": {"A": 0.5, "B": 0.5}, "cutoff": CUTOFF, **params}
    with pytest.raises(InvalidInput) as refused:
        get_system(model(), **params).potential(configuration())
    assert refused.value.field == field, refused.value


@pytest.mark.parametrize("replace, by, message", [
    ("a.epsilon * b.epsilon", "a.epsilon * b.charge",
     "unknown attribute b.charge of a particle; allowed: sigma, epsilon, mass, diameter in pair_potential"),
    ("def pair_potential(r, p, a, b):", "def pair_potential(r, p, a):", "pair_potential must take (r, p), or (r, p, a, "
     "b)"),
    ('units = {"cutoff": "m"}', 'units = {"cutoff": "m"}\n\n\ndef inertia(p):\n    return 1.0',
     "takes each particle's mass from its type"),
    ("(a.diameter + b.diameter) / 2", "(a.diameter + b.sigma) / 2", "must be symmetric in a and b"),
])
def test_bad_files_are_refused_naming_the_file_and_what(replace, by, message):
    with pytest.raises(InvalidInput) as refused:
        model(edited(replace, by), str(EXAMPLE))
    assert refused.value.field == "system.model" and message in str(refused.value), refused.value
    assert str(EXAMPLE) in str(refused.value)


def test_a_tail_that_does_not_vanish_is_refused_for_every_pair_of_types():
    """Summed over every pair (cutoff = inf), φ(∞) must be finite for each pair of types: a term r^(ε_a ε_b − 1),
    constant for the A particles' ε = 1 J and growing with r for the pairs with B, is taken for A alone and refused
    with B."""
    name = model(edited("return 4 * epsilon * (s6 * s6 - s6)",
                        "return 4 * epsilon * (s6 * s6 - s6) + r ** (a.epsilon * b.epsilon - 1)"), "growing.py")
    get_system(name, types={"A": {"sigma": SIGMA_A}}, composition={}, cutoff=None)
    with pytest.raises(InvalidInput) as refused:
        get_system(name, types=TYPES, cutoff=None)
    assert refused.value.field == "cutoff"
