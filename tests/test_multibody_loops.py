"""Multibody trees closed into loops (Pfaffian constraints from loop closures): the four-bar against Pinocchio's
kinematics and dynamics and against the closed-form position analysis of the four-bar (Freudenstein)."""

import numpy as np
import pinocchio
import pytest

from armillary.kernels import InvalidInput, get_system, integrate
from armillary.kernels.systems.multibody import FOUR_BAR, four_bar_closure, tree_terms

from multibody_cases import MULTIBODY_KERNELS

pytestmark = MULTIBODY_KERNELS

LINKS = (FOUR_BAR["crank"], FOUR_BAR["coupler"], FOUR_BAR["rocker"], FOUR_BAR["ground"])


def freudenstein_angles(crank_angle, branch_signs):
    """The coupler's and rocker's angles (rad) for crank angles θ2 from Freudenstein's equations (Norton,
    Design of Machinery, §4.5): K1 cos θ4 − K2 cos θ2 + K3 = cos(θ2 − θ4) and K1 cos θ3 + K4 cos θ2 + K5 =
    cos(θ2 − θ3), each a quadratic in tan(θ/2) whose root is chosen by ``branch_signs``."""
    a, b, c, d = LINKS
    k1, k2, k3 = d / a, d / c, (a * a - b * b + c * c + d * d) / (2 * a * c)
    k4, k5 = d / b, (c * c - d * d - a * a - b * b) / (2 * a * b)
    cos2, sin2 = np.cos(crank_angle), np.sin(crank_angle)
    angles = []
    for (big_a, big_b, big_c), sign in zip((((cos2 - k1 - k2 * cos2 + k3), -2 * sin2, k1 - (k2 + 1) * cos2 + k3),
                                            ((cos2 - k1 + k4 * cos2 + k5), -2 * sin2, k1 + (k4 - 1) * cos2 + k5)),
                                           branch_signs):
        angles.append(2 * np.arctan((-big_b + sign * np.sqrt(big_b ** 2 - 4 * big_a * big_c)) / (2 * big_a)))
    return angles[1], angles[0]  # coupler, rocker


def wrapped(angle):
    return (angle + np.pi) % (2 * np.pi) - np.pi


def four_bar_pinocchio(system):
    """The four-bar's open tree in Pinocchio (crank and rocker on the ground, coupler on the crank, all about z),
    with a frame at each closure point."""
    params = system.params
    model = pinocchio.Model()
    origins = params["origin"]
    crank = model.addJoint(0, pinocchio.JointModelRZ(), pinocchio.SE3(np.eye(3), origins[0]), "crank")
    coupler = model.addJoint(crank, pinocchio.JointModelRZ(), pinocchio.SE3(np.eye(3), origins[1]), "coupler")
    rocker = model.addJoint(0, pinocchio.JointModelRZ(), pinocchio.SE3(np.eye(3), origins[2]), "rocker")
    for joint, k in ((crank, 0), (coupler, 1), (rocker, 2)):
        model.appendBodyToJoint(joint, pinocchio.Inertia(params["mass"][k], params["com"][k], params["inertia"][k]),
                                pinocchio.SE3.Identity())
    model.gravity.linear = 9.81 * np.array([0.0, -1.0, 0.0])
    frames = [model.addFrame(pinocchio.Frame(name, joint, pinocchio.SE3(np.eye(3), np.array([length, 0.0, 0.0])),
                                             pinocchio.FrameType.OP_FRAME))
              for name, joint, length in (("coupler_end", coupler, LINKS[1]), ("rocker_end", rocker, LINKS[2]))]
    return model, frames


def test_closure_rows_and_constrained_accelerations_equal_pinocchios():
    """20 random assembled states of four_bar (crank angle and rate random): the closure's A and Ȧ u equal
    Pinocchio's frame Jacobians and classical accelerations at q̈ = 0 (coupler end minus rocker end, x and y)
    to 1e-12, and our u̇ from [M Aᵀ; A 0] (M, f − h, A, Ȧu ours) equals the same system built from Pinocchio's
    crba, rnea and frame terms to 1e-10 relative.  Our coordinates are absolute angles (the coupler measured
    from the crank), Pinocchio's relative: q_P = T q with T = [[1,0,0],[−1,1,0],[0,0,1]]."""
    system = get_system("multibody", "four_bar")
    model, frames = four_bar_pinocchio(system)
    data = model.createData()
    relative = np.array([[1.0, 0.0, 0.0], [-1.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    rng = np.random.default_rng(4)
    for _ in range(20):
        angle, rate = rng.uniform(-np.pi, np.pi), rng.normal(scale=5.0)
        coupler, rocker, coupler_rate, rocker_rate = four_bar_closure(*LINKS, angle, rate)
        q, u = np.array([angle, coupler, rocker]), np.array([rate, coupler_rate, rocker_rate])
        terms = tree_terms(system, {"q": q[np.newaxis], "u": u[np.newaxis]})
        q_p, v_p = relative @ q, relative @ u
        pinocchio.computeJointJacobians(model, data, q_p)
        pinocchio.forwardKinematics(model, data, q_p, v_p, np.zeros(3))
        pinocchio.updateFramePlacements(model, data)
        world = pinocchio.ReferenceFrame.LOCAL_WORLD_ALIGNED
        jacobian = (pinocchio.getFrameJacobian(model, data, frames[0], world)
                    - pinocchio.getFrameJacobian(model, data, frames[1], world))[:2] @ relative
        bias = (pinocchio.getFrameClassicalAcceleration(model, data, frames[0], world).linear
                - pinocchio.getFrameClassicalAcceleration(model, data, frames[1], world).linear)[:2]
        assert np.abs(terms["closure_residual"][0]).max() <= 1e-14
        assert np.abs(terms["closure_jacobian"][0] - jacobian).max() <= 1e-12
        assert np.abs(terms["closure_bias"][0] - bias).max() <= 1e-12 * max(1.0, np.abs(bias).max())
        mass = relative.T @ pinocchio.crba(model, data, q_p) @ relative
        mass = np.triu(mass) + np.triu(mass, 1).T
        forcing = -relative.T @ pinocchio.rnea(model, data, q_p, v_p, np.zeros(3))
        reference = np.linalg.solve(np.block([[mass, jacobian.T], [jacobian, np.zeros((2, 2))]]),
                                    np.concatenate([forcing, -bias]))[:3]
        ours = np.linalg.solve(np.block([[terms["mass"][0], terms["closure_jacobian"][0].T],
                                         [terms["closure_jacobian"][0], np.zeros((2, 2))]]),
                               np.concatenate([terms["forcing"][0], -terms["closure_bias"][0]]))[:3]
        assert np.abs(ours - reference).max() <= 1e-10 * np.abs(reference).max()


def test_four_bar_stays_closed_over_1e5_steps_and_follows_the_closed_form_position_analysis():
    """four_bar by rk4, 10⁵ steps of h = 1 ms (the crank turns about 180 times): the closure's position error
    max |Φ| and rate error max |A u| stay ≤ 1e-10 (projection after every step to 1e-12; measured 1.0e-12 and
    9.7e-13), the coupler's and rocker's angles equal Freudenstein's closed form at the crank's angle to 1e-8 at
    every sample (measured 7.3e-13), and the energy moves by less than 1e-6 of itself (measured 3.3e-8)."""
    system = get_system("multibody", "four_bar")
    state = {name: np.array(value)[np.newaxis] for name, value in system.initial_state().items()}
    result = integrate(system, "rk4", state, 1e-3, 100_000, 100,
                       outputs=("q", "energy", "constraint_error", "constraint_rate_error"))
    assert result.status[0] == 0
    assert result.constraint_error.max() <= 1e-10 and result.constraint_rate_error.max() <= 1e-10
    q = result.q[0]
    assert q[-1, 0] - q[0, 0] > 2 * np.pi * 150  # the crank went round and round
    signs = [min((1.0, -1.0), key=lambda sign: abs(wrapped(freudenstein_angles(q[0, 0], (sign, sign))[k] - q[0, 1 + k])))
             for k in (1, 0)]
    coupler, rocker = freudenstein_angles(q[:, 0], signs)
    assert np.abs(wrapped(coupler - q[:, 1])).max() <= 1e-8
    assert np.abs(wrapped(rocker - q[:, 2])).max() <= 1e-8
    assert np.abs(result.energy[0] / result.energy[0, 0] - 1).max() <= 1e-6


def test_loops_are_refused_where_they_cannot_be_kept():
    """A closure naming a body the tree lacks, or directions that are zero or dependent, or on a tree with a
    spherical joint, or closures with more directions than the tree has joints (its three default ones on two),
    are refused naming the field; the canonical midpoint is refused for the four-bar."""
    joints = [{"type": "revolute"}, {"type": "revolute", "parent": 0}]
    for closures, kinds, field in (([{"body": 5, "to": -1}], None, "closures[0].body"),
                                   ([{"body": 1, "to": -1, "directions": [[0, 0, 0]]}], None, "closures[0].directions"),
                                   ([{"body": 1, "to": -1, "directions": [[1, 0, 0], [2, 0, 0]]}], None,
                                    "closures[0].directions"),
                                   ([{"body": 1, "to": 1}], None, "closures[0].to"),
                                   ([{"body": 1, "to": -1}], "spherical", "closures"),
                                   ([{"body": 1, "to": -1}], None, "closures")):
        tree = [dict(joint, type=kinds or joint["type"]) for joint in joints]
        with pytest.raises(InvalidInput) as error:
            get_system("multibody", joints=tree, closures=closures)
        assert error.value.field == field, (closures, error.value)
    system = get_system("multibody", "four_bar")
    state = {name: np.array(value)[np.newaxis] for name, value in system.initial_state().items()}
    with pytest.raises(InvalidInput) as error:
        integrate(system, "midpoint", state, 1e-3, 1, 1)
    assert error.value.field == "method"


def test_four_bar_stores_are_bitwise_across_layouts_with_perturbed_assemblies(tmp_path):
    """four_bar perturbed by 1e-2 (off the closure: each run puts its members back on it first) with g swept, rk4 through the store in the three layouts: the same bits, with every sample on the closure."""
    from ensemble_cases import run_across_layouts

    system = 'name = "multibody"\npreset = "four_bar"\nparams = { g = { values = [9.81, 3.0] } }'
    names = ("q", "u", "energy", "constraint_error", "constraint_rate_error", "status")
    _, reference = run_across_layouts(str(tmp_path), system, ["q", "u", "energy", "constraint_error",
                                                              "constraint_rate_error"], names, method="rk4", scale=1e-2)
    assert not reference["status"].any()
    assert reference["constraint_error"].max() <= 1e-12 and reference["constraint_rate_error"].max() <= 1e-12
