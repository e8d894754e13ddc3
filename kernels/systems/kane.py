"""Kane's equations of a tree of revolute, prismatic, spherical and free joints, numerically, in lanes
(members innermost): the mass matrix, the bias and applied forces, and the tree's energy.  The tree's
layout and kinematics are in :mod:`kernels.systems.tree_kinematics`, its loop closures in
:mod:`kernels.systems.loop_closures`, the articulated-body algorithm in :mod:`kernels.systems.articulated`.

Parsa, "The Lagrangian derivation of Kane's equations" (digest_003): with J_i = [J_ωi; J_vi] the Jacobian
of body i's angular velocity and centre-of-mass velocity with respect to the speeds u (eqs. (14)–(16)) and
M_i = diag(I_i, m_i 1) (eq. (21)), Kane's equations (32) are M(q) u̇ + h(q, u) = f (eq. (34)) with

    M = Σ_i J_iᵀ M_i J_i,    h = Σ_i J_iᵀ (M_i J̇_i u + W_i M_i J_i u)    (eq. (35)),
    f = Σ_i m_i J_viᵀ g + τ    (eqs. (27), (28)).

Here both J_ωi and J_vi are taken in the base frame, where I_i becomes R_i I_i R_iᵀ and the gyroscopic
term W_i M_i J_i u becomes ω_i × (R_i I_i R_iᵀ) ω_i; this is the same M and h (the body-frame J_ωi of
the paper is R_iᵀ times ours, and the tests check Theorem 1 in the body frame).

The loads of a one-degree-of-freedom joint are generalised forces on its variable θ_k
(:mod:`kernels.systems.tree_kinematics`): a constant F_k, a periodic A_k sin(ν_k t + φ_k), a spring
−K_k (θ_k − θ_rest,k) and a damper −D_k θ̇_k.  The same code runs on complex numbers (complex-step
derivatives for the Jacobian of the implicit ``midpoint``: every operation is analytic).  Cost per
evaluation O(n³) per member (n bodies × n² entries of M): the vector field of trees of revolute and
prismatic joints takes the O(n) articulated-body algorithm instead (:mod:`kernels.systems.articulated`);
trees with spherical or free joints or loops solve u̇ = M⁻¹(f − h) there by a Cholesky factorisation in
lanes.
"""

from __future__ import annotations

import numpy as np

from ..lanes import cross3, lane_function
from .tree_kinematics import (AMPLITUDE, DAMPING, FORCE, FREQUENCY, INERTIA, MASS, PHASE, PRISMATIC, REST, STIFFNESS,
                              body_columns, joint_entries, joint_row, tree_header, tree_jacobians, tree_kinematics)

#: what kane_terms computes besides M: nothing, f − h (Kane's right side) or f + ∂T/∂q (ṗ of p = M q̇)
MASS_ONLY, ACCELERATING_FORCE, CANONICAL_FORCE = 0, 1, 2


@lane_function
def kane_work(n, lanes, zero):
    """Work arrays of one evaluation (lanes innermost), of ``zero``'s type (float64, or complex128 for
    complex-step derivatives), sized for n coordinates (at most n bodies): joint variables θ, θ̇ (2, n, L);
    per body R (9), and frame origin, its velocity, ω, centre of mass c and ċ (5, n, 3, L; base frame); per
    speed its axis z and ż (2, n, 3, L); Jacobians J_ω, J_v and their rates (4, n, 3, n, L); M (n, n, L);
    a force vector (n, L); a 3×3 base-frame inertia (9, L); a body's wrench (6, L); its I J_ω (3, n, L)."""
    return (np.full((2, n, lanes), zero), np.full((n, 9, lanes), zero), np.full((5, n, 3, lanes), zero),
            np.full((2, n, 3, lanes), zero), np.full((4, n, 3, n, lanes), zero), np.full((n, n, lanes), zero),
            np.full((n, lanes), zero), np.full((9, lanes), zero), np.full((6, lanes), zero),
            np.full((3, n, lanes), zero))


@lane_function
def world_inertia_into(coef, k, rotation, i, out):
    """R_i I_i R_iᵀ (base frame, row-major) of body i whose joint rows start at k, into out (9, L)."""
    for b in range(out.shape[1]):
        for r in range(3):
            for c in range(3):
                total = 0.0
                for s in range(3):
                    ri = 0.0
                    for t in range(3):
                        ri += coef[k + INERTIA + 3 * s + t, b] * rotation[i, 3 * c + t, b]
                    total += rotation[i, 3 * r + s, b] * ri
                out[3 * r + c, b] = total


@lane_function
def kane_terms(x, n, coef, topology, t, work, forces):
    """M(q) (eq. (35)) into work[5] (not with CANONICAL_FORCE, whose callers already hold M) and into work[6]
    by ``forces``: ACCELERATING_FORCE f − h (eqs. (27), (28), (35)), or CANONICAL_FORCE f + ∂T/∂q, the rate
    of the canonical momentum p = M q̇ (Lagrange's equations (12): ṗ = ∂T/∂q + f; trees without
    quaternions, where u = q̇), with ∂T/∂q = Σ_i J̇_ωiᵀ I_i ω_i + m_i J̇_viᵀ ċ_i from Theorem 1 and eq. (18)
    (base frame: R_i(J̇_ω + [ω×]J_ω)_body = J̇_ω), so M is never differentiated.  Sums run over each body's
    non-zero columns only (a chain's body i has i + 1), lanes innermost.  Each quaternion's norm rate gets
    a unit diagonal entry of M and no force: u̇ = 0 there."""
    joint, rotation, frames, axes, jacobians, mass, rhs, inertia, wrench, spun = work
    lanes = x.shape[1]
    tree_kinematics(x, n, coef, topology, joint, rotation, frames, axes)
    tree_jacobians(n, topology, frames, axes, jacobians)
    jw, jv, jw_dot, jv_dot = jacobians[0], jacobians[1], jacobians[2], jacobians[3]
    omega, com_dot = frames[2], frames[4]
    h, joints = tree_header(topology)
    for a in range(n):
        for c in range(n):
            for b in range(lanes):
                mass[a, c, b] = 0.0
        for b in range(lanes):
            rhs[a, b] = 0.0
    for i in range(joints):
        k = joint_row(i)
        lists, first, last = body_columns(topology, h, joints, i)
        world_inertia_into(coef, k, rotation, i, inertia)
        if forces != CANONICAL_FORCE:  # ṗ needs no M: its callers hold M(q) already
            for ci in range(first, last):  # I_i J_ω once per column, then each pair of columns is two dots
                c = topology[lists + ci]
                for r in range(3):
                    for b in range(lanes):
                        spun[r, c, b] = (inertia[3 * r, b] * jw[i, 0, c, b] + inertia[3 * r + 1, b] * jw[i, 1, c, b]
                                         + inertia[3 * r + 2, b] * jw[i, 2, c, b])
            for ai in range(first, last):
                a = topology[lists + ai]
                for ci in range(ai, last):
                    c = topology[lists + ci]
                    for b in range(lanes):
                        mass[a, c, b] += (coef[k + MASS, b] * (jv[i, 0, a, b] * jv[i, 0, c, b]
                                                               + jv[i, 1, a, b] * jv[i, 1, c, b]
                                                               + jv[i, 2, a, b] * jv[i, 2, c, b])
                                          + jw[i, 0, a, b] * spun[0, c, b] + jw[i, 1, a, b] * spun[1, c, b]
                                          + jw[i, 2, a, b] * spun[2, c, b])
        if forces == MASS_ONLY:
            continue
        # wrench[0 … 2]: what multiplies J_v, wrench[3 … 5]: what multiplies J_ω (CANONICAL: J̇_v and J̇_ω)
        for r in range(6):
            for b in range(lanes):
                wrench[r, b] = 0.0
        if forces == ACCELERATING_FORCE:  # J̇ q̇: the accelerations with q̈ = 0
            for ci in range(first, last):
                c = topology[lists + ci]
                for b in range(lanes):
                    uc = x[n + c, b]
                    for r in range(3):
                        wrench[r, b] += jv_dot[i, r, c, b] * uc
                        wrench[3 + r, b] += jw_dot[i, r, c, b] * uc
        for b in range(lanes):
            m = coef[k + MASS, b]
            w0, w1, w2 = omega[i, 0, b], omega[i, 1, b], omega[i, 2, b]
            h0 = inertia[0, b] * w0 + inertia[1, b] * w1 + inertia[2, b] * w2
            h1 = inertia[3, b] * w0 + inertia[4, b] * w1 + inertia[5, b] * w2
            h2 = inertia[6, b] * w0 + inertia[7, b] * w1 + inertia[8, b] * w2
            if forces == CANONICAL_FORCE:  # m ċ against J̇_v and I ω against J̇_ω
                wrench[0, b], wrench[1, b], wrench[2, b] = m * com_dot[i, 0, b], m * com_dot[i, 1, b], m * com_dot[i, 2, b]
                wrench[3, b], wrench[4, b], wrench[5, b] = h0, h1, h2
            else:  # m (g − J̇_v q̇) against J_v and −(I J̇_ω q̇ + ω × I ω) against J_ω
                aw0, aw1, aw2 = wrench[3, b], wrench[4, b], wrench[5, b]
                g0, g1, g2 = cross3(w0, w1, w2, h0, h1, h2)
                wrench[3, b] = -(inertia[0, b] * aw0 + inertia[1, b] * aw1 + inertia[2, b] * aw2 + g0)
                wrench[4, b] = -(inertia[3, b] * aw0 + inertia[4, b] * aw1 + inertia[5, b] * aw2 + g1)
                wrench[5, b] = -(inertia[6, b] * aw0 + inertia[7, b] * aw1 + inertia[8, b] * aw2 + g2)
                wrench[0, b] = m * (coef[0, b] - wrench[0, b])
                wrench[1, b] = m * (coef[1, b] - wrench[1, b])
                wrench[2, b] = m * (coef[2, b] - wrench[2, b])
        for ai in range(first, last):
            a = topology[lists + ai]
            for b in range(lanes):
                if forces == CANONICAL_FORCE:
                    m = coef[k + MASS, b]
                    rhs[a, b] += (jw_dot[i, 0, a, b] * wrench[3, b] + jw_dot[i, 1, a, b] * wrench[4, b]
                                  + jw_dot[i, 2, a, b] * wrench[5, b]
                                  + jv_dot[i, 0, a, b] * wrench[0, b] + jv_dot[i, 1, a, b] * wrench[1, b]
                                  + jv_dot[i, 2, a, b] * wrench[2, b]
                                  + jv[i, 0, a, b] * (m * coef[0, b]) + jv[i, 1, a, b] * (m * coef[1, b])
                                  + jv[i, 2, a, b] * (m * coef[2, b]))
                else:
                    rhs[a, b] += (jv[i, 0, a, b] * wrench[0, b] + jv[i, 1, a, b] * wrench[1, b]
                                  + jv[i, 2, a, b] * wrench[2, b]
                                  + jw[i, 0, a, b] * wrench[3, b] + jw[i, 1, a, b] * wrench[4, b]
                                  + jw[i, 2, a, b] * wrench[5, b])
    for a in range(n):
        for c in range(a):
            for b in range(lanes):
                mass[a, c, b] = mass[c, a, b]
    if forces != CANONICAL_FORCE:
        for block in range(topology[0]):
            pad = topology[1 + block] + 3
            for b in range(lanes):
                mass[pad, pad, b] = 1.0
    if forces != MASS_ONLY:
        for j in range(joints):
            kind, parent, reference, first = joint_entries(topology, h, j)
            if kind > PRISMATIC:
                continue
            k = joint_row(j)
            for b in range(lanes):
                tau = joint_load(coef, k, joint[0, first, b], joint[1, first, b], t, b)
                rhs[first, b] += tau
                if reference >= 0:
                    rhs[reference, b] -= tau


@lane_function
def joint_load(coef, k, theta, theta_dot, t, b):
    """The generalised force on a one-degree-of-freedom joint's variable θ (N or N·m; rows from k) at θ, θ̇ and
    time t (s): F − K (θ − θ_rest) − D θ̇ + A sin(ν t + φ)."""
    tau = coef[k + FORCE, b] - coef[k + STIFFNESS, b] * (theta - coef[k + REST, b]) - coef[k + DAMPING, b] * theta_dot
    if coef[k + AMPLITUDE, b] != 0.0:
        tau += coef[k + AMPLITUDE, b] * np.sin(coef[k + FREQUENCY, b] * t + coef[k + PHASE, b])
    return tau


@lane_function
def tree_potential_into(x, n, coef, topology, joint, frames, out):
    """V = −Σ_i m_i c_i·g + Σ_k (½ K_k (θ_k − θ_rest,k)² − F_k θ_k) (J) per lane, after tree_kinematics
    (the loads act on one-degree-of-freedom joints)."""
    com = frames[3]
    h, joints = tree_header(topology)
    for b in range(x.shape[1]):
        total = 0.0
        for j in range(joints):
            kind, parent, reference, first = joint_entries(topology, h, j)
            k = joint_row(j)
            total -= coef[k + MASS, b] * (com[j, 0, b] * coef[0, b] + com[j, 1, b] * coef[1, b]
                                          + com[j, 2, b] * coef[2, b])
            if kind <= PRISMATIC:
                stretch = joint[0, first, b] - coef[k + REST, b]
                total += 0.5 * coef[k + STIFFNESS, b] * stretch * stretch - coef[k + FORCE, b] * joint[0, first, b]
        out[b] = total



# ------------------------------------------------------------------------ lane templates (bound per system)

def kane_energy(x, n, coef, topology, work, out):
    """E = ½ uᵀ M(q) u + V(q) (J) per lane (``work``: the tree's, whose second part is Kane's work)."""
    kane = work[1]
    kane_terms(x, n, coef, topology, 0.0, kane, MASS_ONLY)
    tree_potential_into(x, n, coef, topology, kane[0], kane[2], out)
    mass = kane[5]
    for b in range(x.shape[1]):
        kinetic = 0.0
        for a in range(n):
            row = 0.0
            for c in range(n):
                row += mass[a, c, b] * x[n + c, b]
            kinetic += x[n + a, b] * row
        out[b] += 0.5 * kinetic


@lane_function
def kane_mass_into(x, n, coef, topology, work, out):
    """out (n, n, L) ← M(q) at the coordinates of x (its speeds are not used)."""
    kane_terms(x, n, coef, topology, 0.0, work, MASS_ONLY)
    out[:] = work[5]


@lane_function
def kane_canonical_force_into(x, n, coef, topology, work, out):
    """out (n, L) ← ṗ = f + ∂T/∂q at (q, u) of x (see kane_terms; autonomous loads only: the midpoint does not
    step periodically driven trees)."""
    kane_terms(x, n, coef, topology, 0.0, work, CANONICAL_FORCE)
    out[:] = work[6]

