"""Multibody trees by Kane's equations (kernels.systems.kane, kernels.systems.multibody; Parsa, digest_003)
against references nobody here wrote: sympy's KanesMethod (n_link_pendulum_on_cart), Pinocchio's
articulated-body algorithm and composite-rigid-body mass matrix, and the paper's identities."""

import functools
from pathlib import Path

import numpy as np
import pinocchio
import pytest
import sympy
from scipy.integrate import solve_ivp

from armillary.kernels import InvalidInput, get_system, integrate
from armillary.kernels.systems.multibody import tree_accelerations, tree_terms

from multibody_cases import MULTIBODY_KERNELS, random_tree

pytestmark = MULTIBODY_KERNELS


@functools.cache
def sympy_chain(n):
    """sympy's n_link_pendulum_on_cart(n) without the cart force: its mass matrix and forcing (M u̇ = F) as
    numpy functions of (q, u, m_0 … m_n, l_0 … l_{n−1}, g)."""
    from sympy.physics.mechanics.models import n_link_pendulum_on_cart
    kane = n_link_pendulum_on_cart(n, cart_force=False)
    coordinates = sympy.symbols(f"q:{n + 1}") + sympy.symbols(f"u:{n + 1}")
    plain = dict(zip(list(kane.q) + list(kane.u), coordinates))
    args = list(coordinates) + list(sympy.symbols(f"m:{n + 1}")) + list(sympy.symbols(f"l:{n}")) + [sympy.Symbol("g")]
    return (sympy.lambdify([args], kane.mass_matrix.xreplace(plain), "numpy"),
            sympy.lambdify([args], kane.forcing.xreplace(plain), "numpy"))


def random_cart_chain(rng, n):
    masses, lengths = rng.uniform(0.5, 2.0, n + 1), rng.uniform(0.5, 2.0, n)
    system = get_system("multibody", "n_link_pendulum_on_cart", cart_mass=masses[0], m=masses[1:], l=lengths, g=9.81)
    return system, list(masses) + list(lengths) + [9.81]


@pytest.mark.parametrize("n", [1, 2, 3])
def test_mass_matrix_and_forcing_equal_sympys_kanes_method(n):
    """20 random states of a chain with random masses and lengths: M(q) and f − h equal sympy's
    KanesMethod mass matrix and forcing to 1e-12 of their largest entry (measured ≤ 6e-16 and ≤ 3.1e-15)."""
    rng = np.random.default_rng(n)
    system, constants = random_cart_chain(rng, n)
    mass_matrix, forcing = sympy_chain(n)
    q, u = rng.uniform(-np.pi, np.pi, (20, n + 1)), rng.normal(size=(20, n + 1))
    terms = tree_terms(system, {"q": q, "u": u})
    for k in range(20):
        args = list(q[k]) + list(u[k]) + constants
        reference_mass, reference_forcing = np.array(mass_matrix(args), float), np.array(forcing(args), float).ravel()
        assert np.abs(terms["mass"][k] - reference_mass).max() <= 1e-12 * np.abs(reference_mass).max()
        assert np.abs(terms["forcing"][k] - reference_forcing).max() <= 1e-12 * np.abs(reference_forcing).max()


def test_trajectories_equal_sympys_over_two_seconds():
    """rk45 at rtol 1e-12 here and scipy's DOP853 at rtol 1e-12 on sympy's equations: q and u agree to 1e-9
    at every 0.2 s over 2 s, for 1, 2 and 3 links released from random states."""
    rng = np.random.default_rng(11)
    for n in (1, 2, 3):
        system, constants = random_cart_chain(rng, n)
        mass_matrix, forcing = sympy_chain(n)
        q0, u0 = rng.uniform(-1.0, 1.0, n + 1), rng.normal(size=n + 1)

        def rates(t, y):
            args = list(y) + constants
            return np.concatenate([y[n + 1:], np.linalg.solve(np.array(mass_matrix(args), float),
                                                              np.array(forcing(args), float).ravel())])
        times = np.linspace(0.0, 2.0, 11)
        reference = solve_ivp(rates, (0.0, 2.0), np.concatenate([q0, u0]), method="DOP853", rtol=1e-12, atol=1e-12,
                              t_eval=times).y.T
        ours = integrate(system, "rk45", {"q": q0[np.newaxis], "u": u0[np.newaxis]}, 0.01, 200, 20, rtol=1e-12,
                         atol=1e-12)
        assert ours.status[0] == 0
        assert np.abs(ours.q[0] - reference[:, :n + 1]).max() <= 1e-9
        assert np.abs(ours.u[0] - reference[:, n + 1:]).max() <= 1e-9


@pytest.mark.parametrize("kinds, parents", [
    (["revolute"] * 7, list(range(-1, 6))),
    (["revolute", "prismatic", "revolute", "revolute", "prismatic", "revolute", "revolute"], [-1, 0, 1, 1, 0, 4, 2]),
], ids=["7-link revolute chain", "7-joint branching tree with prismatic joints"])
def test_forward_dynamics_and_mass_matrix_equal_pinocchios(kinds, parents):
    """20 random states and joint forces: M⁻¹(f − h) equals pinocchio.aba, and M the columns of Pinocchio's
    recursive Newton–Euler inverse dynamics (rnea(q, 0, e_j) − rnea(q, 0, 0)), to 1e-10 of their largest
    entry (measured ≤ 3.1e-15 and ≤ 1.3e-15), and the articulated-body algorithm's u̇ equals pinocchio.aba
    to 1e-13 (measured ≤ 8.2e-15); Pinocchio's gravity is ours, 9.81 along −z.  (pinocchio.crba
    assumes joints numbered depth first, which the branching tree is not: it drops entries there.)"""
    rng = np.random.default_rng(len(set(parents)))
    system, model = random_tree(rng, kinds, parents)
    data = model.createData()
    q, u, tau = rng.uniform(-np.pi, np.pi, (20, 7)), rng.normal(size=(20, 7)), rng.normal(size=(20, 7))
    terms = tree_terms(system.with_params(joint_force=tau), {"q": q, "u": u})
    articulated = tree_accelerations(system.with_params(joint_force=tau), {"q": q, "u": u})
    for k in range(20):
        reference = pinocchio.aba(model, data, q[k], u[k], tau[k])
        ours = np.linalg.solve(terms["mass"][k], terms["forcing"][k])
        assert np.abs(ours - reference).max() <= 1e-10 * np.abs(reference).max()
        assert np.abs(articulated[k] - reference).max() <= 1e-13 * np.abs(reference).max()
        zero = np.zeros(7)
        reference_mass = np.array([pinocchio.rnea(model, data, q[k], zero, unit) - pinocchio.rnea(model, data, q[k], zero, zero)
                                   for unit in np.eye(7)]).T
        assert np.abs(terms["mass"][k] - reference_mass).max() <= 1e-10 * np.abs(reference_mass).max()


@pytest.mark.parametrize("n", [2, 20])
def test_articulated_body_accelerations_of_the_cart_chain_equal_pinocchios(n):
    """20 random states of a cart with n links of random masses and lengths: the articulated-body algorithm's
    u̇ (the vector field's from 8 joints on) equals pinocchio.aba on the same chain (a prismatic joint along x,
    then revolute joints about z at relative angles θ_i = q_i − q_{i−1}, so u̇_i = Σ_{k ≤ i} θ̈_k) to 1e-13 of
    its largest entry (measured ≤ 1.8e-14 with 2 links, 4.6e-14 with 20), and so does Kane's M⁻¹(f − h) to
    1e-12 (measured ≤ 2.1e-15 and 4.1e-14)."""
    rng = np.random.default_rng(n)
    system, constants = random_cart_chain(rng, n)
    masses, lengths = constants[:n + 1], constants[n + 1:2 * n + 1]
    model = pinocchio.Model()
    parent = model.addJoint(0, pinocchio.JointModelPrismaticUnaligned(np.array([1.0, 0.0, 0.0])),
                            pinocchio.SE3.Identity(), "cart")
    model.appendBodyToJoint(parent, pinocchio.Inertia(masses[0], np.zeros(3), np.zeros((3, 3))), pinocchio.SE3.Identity())
    for i in range(n):
        origin = np.array([0.0, lengths[i - 1] if i > 0 else 0.0, 0.0])
        parent = model.addJoint(parent, pinocchio.JointModelRevoluteUnaligned(np.array([0.0, 0.0, 1.0])),
                                pinocchio.SE3(np.eye(3), origin), f"link{i + 1}")
        model.appendBodyToJoint(parent, pinocchio.Inertia(masses[i + 1], np.array([0.0, lengths[i], 0.0]),
                                                          np.zeros((3, 3))), pinocchio.SE3.Identity())
    model.gravity.linear = np.array([0.0, -9.81, 0.0])
    data = model.createData()
    q, u = rng.uniform(-np.pi, np.pi, (20, n + 1)), rng.normal(size=(20, n + 1))
    relative = np.eye(n + 1) - np.eye(n + 1, k=-1)
    relative[1, 0] = 0.0  # the first link's angle is absolute
    ours = tree_accelerations(system, {"q": q, "u": u})
    terms = tree_terms(system, {"q": q, "u": u})
    for k in range(20):
        reference = np.linalg.solve(relative, pinocchio.aba(model, data, relative @ q[k], relative @ u[k], np.zeros(n + 1)))
        assert np.abs(ours[k] - reference).max() <= 1e-13 * np.abs(reference).max()
        kane = np.linalg.solve(terms["mass"][k], terms["forcing"][k])
        assert np.abs(kane - reference).max() <= 1e-12 * np.abs(reference).max()


def test_rk4_steps_trees_of_six_or_more_joints_by_the_articulated_body_algorithm_bitwise_across_layouts():
    """A cart with 10 links (11 joints: the articulated-body path), 130 random members, 20 rk4 steps of 1 ms:
    member 77 ends bit for bit where it ends stepped alone (64-lane blocks against one lane), and member 0
    within 1e-13 of classical RK4 written out here on the articulated-body u̇ (measured 5.2e-16)."""
    rng = np.random.default_rng(10)
    system = random_cart_chain(rng, 10)[0]
    state = {"q": rng.uniform(-1.0, 1.0, (130, 11)), "u": rng.normal(size=(130, 11))}
    result = integrate(system, "rk4", state, 1e-3, 20, 20).final
    alone = integrate(system, "rk4", {name: value[77:78] for name, value in state.items()}, 1e-3, 20, 20).final
    for name in ("q", "u"):
        np.testing.assert_array_equal(alone[name][0], result[name][77])

    def rates(y):
        return np.concatenate([y[11:], tree_accelerations(system, {"q": y[np.newaxis, :11], "u": y[np.newaxis, 11:]})[0]])
    y = np.concatenate([state["q"][0], state["u"][0]])
    for _ in range(20):
        k1 = rates(y)
        k2 = rates(y + 0.5e-3 * k1)
        k3 = rates(y + 0.5e-3 * k2)
        k4 = rates(y + 1e-3 * k3)
        y = y + 1e-3 / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    ours = np.concatenate([result["q"][0], result["u"][0]])
    assert np.abs(ours - y).max() <= 1e-13 * np.abs(y).max()


def branching_tree(rng):
    return random_tree(rng, ["revolute", "prismatic", "revolute", "revolute", "revolute"], [-1, 0, 1, 0, 3])[0]


def body_frame(terms):
    """The paper's body-frame J_ω and J̇_ω (digest §5: J_ω,body = Rᵀ J_ω; J̇_ω,body = Rᵀ J̇_ω − [ω_b×] J_ω,body)
    and ω_b, from the base-frame terms of one member."""
    rotation_t = np.swapaxes(terms["rotation"][0], -1, -2)  # (body, 3, 3)
    jw = np.einsum("bij,bjc->bic", rotation_t, terms["jacobians"][0, 0])
    omega = np.einsum("bij,bj->bi", rotation_t, terms["omega"][0])
    jw_dot = np.einsum("bij,bjc->bic", rotation_t, terms["jacobians"][0, 2]) - np.cross(omega[:, :, None], jw, axis=1)
    return jw, jw_dot, omega


def test_theorem_1_and_the_centre_of_mass_jacobian_rate_by_finite_differences():
    """Parsa's Theorem 1 (eq. (17)): ∂ω_i/∂q = J̇_ωi + [ω_i×] J_ωi in the body frame, and eq. (18):
    ∂ċ_i/∂q = J̇_vi, with our analytic J̇ against central differences of the kinematics (1e-7)."""
    rng = np.random.default_rng(2)
    system = branching_tree(rng)
    q, u = rng.uniform(-np.pi, np.pi, 5), rng.normal(size=5)
    terms = tree_terms(system, {"q": q[np.newaxis], "u": u[np.newaxis]})
    jw, jw_dot, omega = body_frame(terms)
    step = 1e-6
    shifted = np.concatenate([q + step * np.eye(5), q - step * np.eye(5)])
    moved = tree_terms(system, {"q": shifted, "u": np.tile(u, (10, 1))})
    body_omega = np.einsum("mbji,mbj->mbi", moved["rotation"], moved["omega"])
    com_velocity = np.einsum("mirc,c->mir", moved["jacobians"][:, 1], u)
    d_omega = (body_omega[:5] - body_omega[5:]) / (2 * step)  # (coordinate, body, xyz)
    d_velocity = (com_velocity[:5] - com_velocity[5:]) / (2 * step)
    theorem = jw_dot + np.cross(omega[:, :, None], jw, axis=1)
    assert np.abs(np.moveaxis(d_omega, 0, -1) - theorem).max() <= 1e-7
    assert np.abs(np.moveaxis(d_velocity, 0, -1) - terms["jacobians"][0, 3]).max() <= 1e-7
    assert np.abs(theorem).max() > 0.1  # not a comparison of zeros


def test_mass_matrix_is_spd_and_mdot_minus_2c_is_skew_and_c_qdot_is_h():
    """Eqs. (34)–(38) at random states of a branching tree: M symmetric positive definite; C of eq. (36)
    (body frame) gives C q̇ = h (1e-12) and Ṁ − 2C skew with a central-difference Ṁ (1e-7)."""
    rng = np.random.default_rng(3)
    system = branching_tree(rng)
    params = system.broadcast(1, 5)
    for _ in range(5):
        q, u = rng.uniform(-np.pi, np.pi, 5), rng.normal(size=5)
        terms = tree_terms(system, {"q": q[np.newaxis], "u": u[np.newaxis]})
        mass = terms["mass"][0]
        assert np.allclose(mass, mass.T, rtol=0, atol=1e-15 * np.abs(mass).max())
        assert np.linalg.eigvalsh(mass).min() > 0
        jw, jw_dot, omega = body_frame(terms)
        c_matrix = np.zeros((5, 5))
        for i in range(5):
            body = np.diag(np.concatenate([np.zeros(3), np.full(3, params["mass"][0, i])]))
            body[:3, :3] = params["inertia"][0, i]
            spin = np.zeros((6, 6))
            spin[:3, :3] = np.cross(np.eye(3), omega[i])  # [ω×]
            jacobian = np.concatenate([jw[i], terms["jacobians"][0, 1, i]])
            rate = np.concatenate([jw_dot[i], terms["jacobians"][0, 3, i]])
            c_matrix += jacobian.T @ (body @ rate + spin @ body @ jacobian + body @ spin @ jacobian)
        gravity = 9.81 * np.array([0.0, 0.0, -1.0])
        gravity_force = np.einsum("i,irc,r->c", params["mass"][0], terms["jacobians"][0, 1], gravity)
        assert np.allclose(c_matrix @ u, gravity_force - terms["forcing"][0], rtol=0, atol=1e-12 * np.abs(mass).max())
        step = 1e-6
        ahead = tree_terms(system, {"q": np.array([q + step * u, q - step * u]), "u": np.tile(u, (2, 1))})["mass"]
        skew = (ahead[0] - ahead[1]) / (2 * step) - 2 * c_matrix
        assert np.abs(skew + skew.T).max() <= 1e-7 * np.abs(mass).max()


def test_inverse_and_forward_dynamics_round_trip():
    """τ = M q̈ + h − f_c for a random q̈, then forward dynamics with joint forces τ returns q̈ (1e-12)."""
    rng = np.random.default_rng(4)
    system = branching_tree(rng)
    q, u, accelerations = rng.uniform(-np.pi, np.pi, (10, 5)), rng.normal(size=(10, 5)), rng.normal(size=(10, 5))
    free = tree_terms(system, {"q": q, "u": u})
    tau = np.einsum("mij,mj->mi", free["mass"], accelerations) - free["forcing"]
    driven = tree_terms(system.with_params(joint_force=tau), {"q": q, "u": u})
    back = np.linalg.solve(driven["mass"], driven["forcing"][..., np.newaxis])[..., 0]
    assert np.abs(back - accelerations).max() <= 1e-12 * np.abs(accelerations).max() * 10


def test_energy_rate_is_the_power_of_the_dampers():
    """dE/dt along the vector field = q̇ᵀ f_nc = −Σ D_k θ̇_k² with springs, constant joint forces (both in the
    potential) and dampers (not), by a central difference of E = ½ uᵀMu + V along (u, M⁻¹(f − h)) (1e-7)."""
    rng = np.random.default_rng(6)
    system = branching_tree(rng).with_params(stiffness=rng.uniform(0, 3, 5), rest=rng.normal(size=5),
                                             joint_force=rng.normal(size=5), damping=rng.uniform(0.1, 1, 5))
    q, u = rng.uniform(-np.pi, np.pi, 5), rng.normal(size=5)
    terms = tree_terms(system, {"q": q[np.newaxis], "u": u[np.newaxis]})
    rates = np.concatenate([u, np.linalg.solve(terms["mass"][0], terms["forcing"][0])])
    step = 1e-6
    states = np.array([np.concatenate([q, u]) + step * rates, np.concatenate([q, u]) - step * rates])
    moved = tree_terms(system, {"q": states[:, :5], "u": states[:, 5:]})
    energy = 0.5 * np.einsum("mi,mij,mj->m", states[:, 5:], moved["mass"], states[:, 5:]) + moved["potential"]
    power = -np.sum(system.params["damping"] * u ** 2)
    assert abs((energy[0] - energy[1]) / (2 * step) - power) <= 1e-7 * max(1.0, abs(power))


def test_bad_descriptions_are_refused_naming_the_field():
    """An unknown joint type, a parent that is not an earlier joint (so no cycle), a joint other than the root
    without a parent, an unknown key, no joints, two joints of one name, an indefinite inertia or a zero axis
    (naming the joint), a spherical joint measured from another or loaded, links and lengths of different
    counts, an unknown model."""
    for params, field in (({"joints": [{"type": "ball", "parent": -1}]}, "joints[0].type"),
                          ({"joints": [{"type": "revolute", "parent": 0}]}, "joints[0].parent"),
                          ({"joints": [{"type": "revolute", "parent": -1, "axis": 1}]}, "joints[0]"),
                          ({}, "joints"),
                          ({"joints": [{"type": "revolute", "name": "a"}, {"type": "revolute", "name": "a", "parent": 0}]},
                           "joints"),
                          ({"joints": [{"type": "revolute"}, {"type": "revolute"}]}, "joints[1].parent"),
                          ({"joints": [{"type": "revolute"}, {"type": "spherical", "parent": 0, "measured_from": 0}]},
                           "joints[1].measured_from"),
                          ({"joints": [{"type": "spherical"}], "joint_force": 1.0}, "joint_force[0]"),
                          ({"joints": [{"type": "revolute", "name": "a"}, {"type": "revolute", "name": "b", "parent": 0}],
                            "inertia": [np.eye(3), -np.eye(3)]}, "inertia[1]"),
                          ({"joints": [{"type": "revolute", "name": "a"}, {"type": "revolute", "name": "b", "parent": 0}],
                            "axis": [[0.0, 0.0, 1.0], [0.0, 0.0, 0.0]]}, "axis[1]"),
                          ({"model": "n_link_pendulum_on_cart", "m": [1.0, 1.0], "l": [1.0]}, "l"),
                          ({"model": "scara"}, "model")):
        with pytest.raises(InvalidInput) as error:
            get_system("multibody", **params)
        assert error.value.field == field, (params, error.value)


def test_canonical_force_is_the_rate_of_the_momentum():
    """The midpoint's ṗ = f + ∂T/∂q (Theorem 1 and eq. (18), no derivative of M) equals d(M q̇)/dt = (f − h) + Ṁ q̇
    with a central-difference Ṁ (1e-7), on a branching tree with springs and dampers."""
    rng = np.random.default_rng(8)
    system = branching_tree(rng).with_params(stiffness=rng.uniform(0, 3, 5), damping=rng.uniform(0.1, 1, 5))
    q, u = rng.uniform(-np.pi, np.pi, 5), rng.normal(size=5)
    canonical = tree_terms(system, {"q": q[np.newaxis], "u": u[np.newaxis]}, canonical=True)["forcing"][0]
    accelerating = tree_terms(system, {"q": q[np.newaxis], "u": u[np.newaxis]})["forcing"][0]
    step = 1e-6
    mass = tree_terms(system, {"q": np.array([q + step * u, q - step * u]), "u": np.tile(u, (2, 1))})["mass"]
    assert np.abs(canonical - accelerating - (mass[0] - mass[1]) / (2 * step) @ u).max() <= 1e-7 * np.abs(canonical).max()


FIVE_LINKS = dict(m=(1.0,) * 5, l=(1.0,) * 5)
#: the five-link chain hanging from its cart, links swung by up to 0.5 rad and released, and 7 more members with
#: each link's swing moved by up to ±0.2 rad (seed 0)
SWUNG_LINKS = np.array([0.0, np.pi + 0.5, np.pi - 0.3, np.pi + 0.4, np.pi - 0.2, np.pi + 0.1])
SWUNG_Q = SWUNG_LINKS + np.vstack([np.zeros(6), np.c_[np.zeros(7), np.random.default_rng(0).uniform(-0.2, 0.2, (7, 5))]])
SWUNG = {"q": SWUNG_Q, "u": np.zeros_like(SWUNG_Q)}


def test_midpoint_keeps_the_energy_of_the_five_link_chain_where_rk4_drifts():
    """n_link_pendulum_on_cart with 5 links, 8 chaotic members, 2×10⁴ steps of h = 0.02 s (400 s;
    benchmarks/midpoint_energy.py runs 10⁶): the members' mean largest energy error in the last tenth over their
    mean in the first, within 2 for the midpoint (measured 0.93: bounded) and over 5 for rk4 (measured 6.96, and
    7.93 by Kane's sums before the articulated-body algorithm took 6 joints).  One member's ratio hangs on its
    trajectory: 0.18–2.05 for the midpoint, 4.4–14 for rk4.  Newton takes at most 10 iterations on the first member
    (the swing of the original test) and 8–11 on the others."""
    system = get_system("multibody", "n_link_pendulum_on_cart", **FIVE_LINKS)
    ratios = {}
    for method in ("midpoint", "rk4"):
        result = integrate(system, method, SWUNG, 0.02, 20_000, 10)
        assert np.all(result.status == 0)
        error = np.abs(result.energy - result.energy[:, :1])[:, 1:].reshape(len(SWUNG_Q), 10, -1).max(axis=2)
        ratios[method] = error[:, -1].mean() / error[:, 0].mean()
        if method == "midpoint":
            assert result.solver_iterations[0] <= 10 and result.solver_iterations.max() <= 12
    assert ratios["midpoint"] <= 2.0 and ratios["rk4"] > 5.0, ratios


def test_midpoint_is_second_order_and_continues_bit_for_bit():
    """Two links on the cart over 1 s: the error against rk45 (rtol 1e-12) falls 4× (± 10 %) from h = 0.01 to
    0.005; 100 steps in one call equal 40 + 60 steps in two (restart), bit for bit."""
    system = get_system("multibody", "n_link_pendulum_on_cart", m=(1.0, 0.7), l=(1.0, 0.8))
    state = {"q": np.array([[0.1, 2.0, 2.5]]), "u": np.array([[0.3, -0.5, 1.0]])}
    reference = integrate(system, "rk45", state, 0.01, 100, 100, rtol=1e-12, atol=1e-12).final["q"]
    errors = [np.abs(integrate(system, "midpoint", state, h, steps, steps).final["q"] - reference).max()
              for h, steps in ((0.01, 100), (0.005, 200))]
    assert 3.6 <= errors[0] / errors[1] <= 4.4, errors
    whole = integrate(system, "midpoint", state, 0.01, 100, 100).final
    first = integrate(system, "midpoint", state, 0.01, 40, 40).final
    second = integrate(system, "midpoint", first, 0.01, 60, 60, restart=True).final
    assert all(np.array_equal(whole[name], second[name]) for name in ("q", "u"))


CART_CHAIN = 'name = "multibody"\npreset = "n_link_pendulum_on_cart"\nparams = { cart_mass = { values = [0.5, 2.0] } }'


@pytest.mark.parametrize("method", ["midpoint", "rk4"])
def test_stores_are_bitwise_equal_across_chunks_workers_and_segments(tmp_path, method):
    """The cart chain through the store with cart_mass swept: (chunk, workers, segment) = (1, 1, 20),
    (6, 1, 100), (3, 2, 50) give the same bits, equal to one kernel call; q and u carry a ``coordinate``
    dimension labelled with each joint coordinate's name."""
    import xarray as xr

    from armillary import ensemble
    from armillary.ensemble.plan import Plan

    from ensemble_cases import run_across_layouts

    names = ("q", "u", "energy", "q0", "u0", "status")
    specs, reference = run_across_layouts(str(tmp_path), CART_CHAIN, ["q", "u", "energy"], names, method=method,
                                          scale=1e-2)
    plan = Plan(ensemble.load_spec(specs[0]))
    direct = integrate(plan.chunk_system(0, 6), method, plan.initial_state(0, 6), 0.01, 100, 10)
    assert np.array_equal(reference["q"], direct.q) and np.array_equal(reference["u"], direct.u)
    ds = xr.open_zarr(tmp_path / "c1w1s20.zarr")
    assert ds.q.dims == ("member", "time", "coordinate")
    assert list(ds.coordinate.values) == ["cart_x", "link_1_angle", "link_2_angle"]
    assert sorted(ds.cart_mass.values) == [0.5] * 3 + [2.0] * 3


def median_lyapunov(system, q0, duration, members=4):
    """Median finite-time λ (1/s) of ``members`` states around q0 (1e-2 perturbations, at rest ± 1e-2) by rk4
    (h = 0.005) with Benettin shadows (d0 = 1e-8, renormalised every 10 steps)."""
    from armillary.kernels.lyapunov import displaced_shadow
    rng = np.random.default_rng(0)
    n = len(q0)
    state = {"q": np.asarray(q0) + 1e-2 * rng.normal(size=(members, n)), "u": 1e-2 * rng.normal(size=(members, n))}
    shadow = displaced_shadow(system.space, state, rng.normal(size=(members, 2 * n)), 1e-8, 10)
    result = integrate(system, "rk4", state, 0.005, int(round(duration / 0.005)), 400, shadow=shadow)
    return np.median(result.log_growth[:, -1] / duration)


def test_the_pendulum_on_a_cart_is_regular_with_one_link_or_small_swings_and_chaotic_beyond(tmp_path):
    """examples/cart-chain.toml with 6 members instead of 48 (40 s): with two links every cart mass gives median
    λ > 10/T (measured with 48 members: 0.79, 0.67, 0.38 1/s for cart masses 0.2, 1, 5), and the report draws
    λ over the cart mass.  Three links released at 90°, 170° and 150° from upright: λ > 10/T = 0.25 (measured
    0.99 1/s); three links swinging by 0.01 rad about the hanging equilibrium (0.043) and one link from 90°
    (integrable: the horizontal momentum is conserved; 0.096): λ < 1.5 ln T / T = 0.138."""
    from armillary import ensemble
    from armillary.ensemble.analysis import lyapunov_map
    from armillary.jobs.cli import main

    duration = 40.0
    text = (Path(__file__).parent.parent / "examples" / "cart-chain.toml").read_text().replace("members = 48",
                                                                                              "members = 6")
    spec = tmp_path / "chain.toml"
    spec.write_text(text.replace("runs/cart-chain.zarr", str(tmp_path / "chain.zarr")))
    ds = ensemble.run(str(spec))
    assert (lyapunov_map(ds).median_lyapunov.values > 10 / duration).all()
    assert main(["report", str(tmp_path / "chain.zarr"), "--out", str(tmp_path / "report")]) == 0
    assert (tmp_path / "report" / "chain.zarr_lyapunov_map.png").exists()
    three = get_system("multibody", "n_link_pendulum_on_cart", m=(1.0,) * 3, l=(1.0,) * 3)
    assert median_lyapunov(three, np.radians([0.0, 90.0, 170.0, 150.0]), duration) > 10 / duration
    regular = 1.5 * np.log(duration) / duration
    assert median_lyapunov(three, [0.0, np.pi, np.pi, np.pi], duration) < regular
    one = get_system("multibody", "n_link_pendulum_on_cart", m=(1.0,), l=(1.0,))
    assert median_lyapunov(one, [0.0, 0.5 * np.pi], duration) < regular


def test_kill_9_and_resume_of_a_cart_chain_run_is_bitwise(tmp_path):
    """The cart chain by midpoint, 400 members over 2 workers, 40 segment records: kill -9 of `armillary run`
    after 8 of them and a resume give the uninterrupted run's bits."""
    from ensemble_cases import kill_9_and_resume_match, runner_spec

    spec = runner_spec(str(tmp_path), "chain.toml", CART_CHAIN, ["q", "energy"], method="midpoint", segment=50,
                       chunk=40, workers=2, t_end=2.0, members=400, scale=1e-2)
    kill_9_and_resume_match(spec, str(tmp_path), ("q", "energy", "q0", "u0", "status"))


@MULTIBODY_KERNELS
def test_section_seed_puts_a_planar_double_pendulum_on_its_energy_surface_crossing_the_section_upwards():
    """``initial = "section"`` (the generalised space's sampler) on a planar double pendulum (two revolute joints
    about z, point masses 1 kg at the ends of 1 m links, gravity −y): every member has q₀ = 0 (the first link
    along x, on the section q₀ = 0), its grid's q₁ and a fraction of u₁'s accessible range, u₀ > 0, and the
    energy E = 12 J by the closed form T + V of the two point masses (not the system's own energy, which found
    it) within 1e-12 J, the same through a spec's [ensemble] keys; a grid point whose potential exceeds E, a
    system of three coordinates and sweeps are refused naming the key."""
    from armillary.kernels.spaces.generalised import GENERALISED

    planar = dict(joints=[{"type": "revolute", "parent": -1}, {"type": "revolute", "parent": 0}],
                  axis=[[0.0, 0.0, 1.0]] * 2, origin=[[0.0, 0.0, 0.0], [1.0, 0.0, 0.0]], mass=[1.0, 1.0],
                  com=[[1.0, 0.0, 0.0]] * 2, inertia=[np.zeros((3, 3))] * 2, g=9.81,
                  gravity_direction=[0.0, -1.0, 0.0])
    system = get_system("multibody", **planar)
    sampler = GENERALISED.samplers["section"]
    options = {"section_energy": 12.0, "section_coordinate": 0, "section_value": 0.0, "q_min": -2.0, "q_max": 2.0,
               "grid_q": 6, "grid_u": 5}
    sampler.check(options)
    state = sampler.draw(system, 2, np.arange(30), 0, options, None, integrate)
    theta1, theta2 = state["q"][:, 0], state["q"][:, 0] + state["q"][:, 1]
    rate1, rate2 = state["u"][:, 0], state["u"][:, 0] + state["u"][:, 1]
    kinetic = 0.5 * (rate1 ** 2 + (rate1 ** 2 + rate2 ** 2 + 2 * rate1 * rate2 * np.cos(theta2 - theta1)))
    potential = 9.81 * (np.sin(theta1) + np.sin(theta1) + np.sin(theta2))
    assert np.abs(kinetic + potential - 12.0).max() < 1e-12
    assert np.all(state["q"][:, 0] == 0.0) and np.all(state["u"][:, 0] > 0.0)
    assert np.allclose(state["q"][::5, 1], np.linspace(-2.0, 2.0, 6), rtol=0, atol=1e-15)
    coordinates = sampler.coordinates(np.arange(30), options)
    assert np.allclose(coordinates["section_u1_fraction"][0][:5], [-0.8, -0.4, 0.0, 0.4, 0.8])
    with pytest.raises(InvalidInput, match="ensemble.section_energy: -30.0 J is below the potential"):
        sampler.draw(system, 2, np.arange(30), 0, {**options, "section_energy": -30.0}, None, integrate)
    with pytest.raises(InvalidInput, match='ensemble.initial: "section" seeds systems with two coordinates'):
        sampler.draw(system, 3, np.arange(2), 0, options, None, integrate)
    with pytest.raises(InvalidInput, match="ensemble.section_coordinate: must be 0 or 1"):
        sampler.check({**options, "section_coordinate": 2})
    from armillary.ensemble.plan import Plan
    from armillary.ensemble.spec import parse_spec

    spec = ('[system]\nname = "multibody"\nparams = { joints = [{ type = "revolute", parent = -1 }, { type = '
            '"revolute", parent = 0 }], axis = [[0.0, 0.0, 1.0], [0.0, 0.0, 1.0]], origin = [[0.0, 0.0, 0.0], '
            '[1.0, 0.0, 0.0]], mass = [1.0, 1.0], com = [[1.0, 0.0, 0.0], [1.0, 0.0, 0.0]], inertia = [[[0.0, 0.0, '
            '0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]], [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]], g = 9.81, '
            'gravity_direction = [0.0, -1.0, 0.0]SWEEP }\n[integrator]\nmethod = "rk4"\ndt = 0.01\nt_end = 1.0\n'
            '[ensemble]\nmembers = 30\ninitial = "section"\nsection_energy = 12.0\nq_min = -2.0\nq_max = 2.0\n'
            'grid_q = 6\ngrid_u = 5\n[output]\nstore = "s.zarr"\n')
    plan = Plan(parse_spec(spec.replace("SWEEP", "")))
    plan.validate()
    assert np.array_equal(plan.initial_state(0, 30)["u"], state["u"])
    with pytest.raises(InvalidInput, match="ensemble.initial: \"section\" seeds every member at one energy"):
        Plan(parse_spec(spec.replace("SWEEP", "").replace("members = 30", "members = 60")
                        .replace("g = 9.81", "g = { values = [9.0, 9.81] }"))).validate()
