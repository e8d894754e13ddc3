"""Kane's equations of a tree of one-degree-of-freedom joints, numerically, in lanes (members innermost).

Parsa, "The Lagrangian derivation of Kane's equations" (digest_003): with J_i = [J_ωi; J_vi] the Jacobian
of body i's angular velocity and centre-of-mass velocity with respect to q̇ (eqs. (14)–(16)) and M_i =
diag(I_i, m_i 1) (eq. (21)), Kane's equations (32) are M(q) q̈ + h(q, q̇) = f (eq. (34)) with

    M = Σ_i J_iᵀ M_i J_i,    h = Σ_i J_iᵀ (M_i J̇_i q̇ + W_i M_i J_i q̇)    (eq. (35)),
    f = Σ_i m_i J_viᵀ g + τ    (eqs. (27), (28)).

Here both J_ωi and J_vi are taken in the base frame, where I_i becomes R_i I_i R_iᵀ and the gyroscopic
term W_i M_i J_i q̇ becomes ω_i × (R_i I_i R_iᵀ) ω_i; this is the same M and h (the body-frame J_ωi of
the paper is R_iᵀ times ours, and the tests check Theorem 1 in the body frame).  Jacobian columns, for the
joints k on the path from body i to the ground (axis z_k, joint point o_k, both in the base frame;
digest §5): revolute ∂ω_i/∂θ̇_k = z_k, ∂v_i/∂θ̇_k = z_k × (c_i − o_k); prismatic 0 and z_k.  Their rates are
analytic: ż_k = ω_{parent(k)} × z_k, and d/dt (z_k × (c_i − o_k)) = ż_k × (c_i − o_k) + z_k × (ċ_i − ȯ_k).

A joint's variable is θ_k = q_k − q_{r(k)} for a joint "measured from" coordinate r(k) (absolute angles
of a planar chain, as in sympy's ``n_link_pendulum_on_cart``), else θ_k = q_k; its columns then go to
q_k with +1 and to q_{r(k)} with −1.  Joint loads are generalised forces on θ_k: a constant F_k, a spring
−K_k (θ_k − θ_rest,k) and a damper −D_k θ̇_k.  u̇ = M⁻¹(f − h) by a Cholesky factorisation in lanes.  The same code runs on complex numbers (complex-step
derivatives for the Jacobian of the implicit ``midpoint``: every operation is analytic).
Cost per evaluation O(n³) per member (n bodies × n² entries of M), fine for n ≤ 20.

Coefficient rows (per member): g times the direction of gravity (3, m/s², base frame), then JOINT_ROWS per
joint j: its axis (unit, in the parent's frame), its origin (the joint point in the parent's frame at
θ = 0, m), the body's mass (kg), its centre of mass (from the joint point, body frame, m), its inertia
about the centre of mass (body frame, row-major, kg·m²), and the joint's F, K, θ_rest, D.  Topology:
n, then (type, parent, measured-from) of each joint (−1: the ground / none; parents precede children), then
n + 1 offsets into the list that follows of each body's non-zero Jacobian columns (ascending).
"""

from __future__ import annotations

import numpy as np

from ..lanes import cholesky_solve_in_lanes, cross3, lane_function

REVOLUTE, PRISMATIC = 0, 1
#: what kane_terms computes besides M: nothing, f − h (Kane's right side) or f + ∂T/∂q (ṗ of p = M q̇)
MASS_ONLY, ACCELERATING_FORCE, CANONICAL_FORCE = 0, 1, 2
JOINT_TYPES = {"revolute": REVOLUTE, "prismatic": PRISMATIC}
GRAVITY_ROWS = 3
AXIS, ORIGIN, MASS, COM, INERTIA, FORCE, STIFFNESS, REST, DAMPING = 0, 3, 6, 7, 10, 19, 20, 21, 22
JOINT_ROWS = 23


@lane_function
def joint_row(j):
    """First coefficient row of joint j."""
    return GRAVITY_ROWS + JOINT_ROWS * j


@lane_function
def rotation_about(a0, a1, a2, c, s):
    """Rodrigues' rotation by the angle with cosine c and sine s about the unit axis a, row-major."""
    t = 1.0 - c
    return (c + t * a0 * a0, t * a0 * a1 - s * a2, t * a0 * a2 + s * a1,
            t * a1 * a0 + s * a2, c + t * a1 * a1, t * a1 * a2 - s * a0,
            t * a2 * a0 - s * a1, t * a2 * a1 + s * a0, c + t * a2 * a2)


@lane_function
def kane_work(n, lanes, zero):
    """Work arrays of one evaluation (lanes innermost), of ``zero``'s type (float64, or complex128 for
    complex-step derivatives): joint variables θ, θ̇ (n, L); per body R (9), frame origin, its velocity, ω,
    joint axis z, ż, centre of mass c and ċ (3 each; base frame); Jacobians J_ω, J_v and their rates
    (n, 3, n, L); M (n, n, L); a force vector (n, L); a 3×3 base-frame inertia (9, L); a body's wrench (6, L)."""
    return (np.full((2, n, lanes), zero), np.full((n, 9, lanes), zero), np.full((7, n, 3, lanes), zero),
            np.full((4, n, 3, n, lanes), zero), np.full((n, n, lanes), zero), np.full((n, lanes), zero),
            np.full((9, lanes), zero), np.full((6, lanes), zero))


@lane_function
def tree_kinematics(x, n, coef, topology, joint, rotation, frames):
    """Forward kinematics at position and velocity level (digest §5 step 1), parents before children:
    joint (θ, θ̇); rotation R_i (body → base); frames[0 … 6] = frame origin p_i, its velocity, ω_i, z_i, ż_i,
    c_i, ċ_i (base frame)."""
    lanes = x.shape[1]
    pos, vel, omega, axis, axis_dot, com, com_dot = (frames[0], frames[1], frames[2], frames[3], frames[4],
                                                     frames[5], frames[6])
    for j in range(n):
        kind, parent, reference = topology[1 + 3 * j], topology[2 + 3 * j], topology[3 + 3 * j]
        k = joint_row(j)
        for b in range(lanes):
            theta, theta_dot = x[j, b], x[n + j, b]
            if reference >= 0:
                theta -= x[reference, b]
                theta_dot -= x[n + reference, b]
            joint[0, j, b], joint[1, j, b] = theta, theta_dot
            a0, a1, a2 = coef[k + AXIS, b], coef[k + AXIS + 1, b], coef[k + AXIS + 2, b]
            e0, e1, e2 = coef[k + ORIGIN, b], coef[k + ORIGIN + 1, b], coef[k + ORIGIN + 2, b]
            if parent < 0:
                p = (1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0)
                pp0 = pp1 = pp2 = pv0 = pv1 = pv2 = pw0 = pw1 = pw2 = 0.0
            else:
                p = (rotation[parent, 0, b], rotation[parent, 1, b], rotation[parent, 2, b], rotation[parent, 3, b],
                     rotation[parent, 4, b], rotation[parent, 5, b], rotation[parent, 6, b], rotation[parent, 7, b],
                     rotation[parent, 8, b])
                pp0, pp1, pp2 = pos[parent, 0, b], pos[parent, 1, b], pos[parent, 2, b]
                pv0, pv1, pv2 = vel[parent, 0, b], vel[parent, 1, b], vel[parent, 2, b]
                pw0, pw1, pw2 = omega[parent, 0, b], omega[parent, 1, b], omega[parent, 2, b]
            z0 = p[0] * a0 + p[1] * a1 + p[2] * a2
            z1 = p[3] * a0 + p[4] * a1 + p[5] * a2
            z2 = p[6] * a0 + p[7] * a1 + p[8] * a2
            o0 = pp0 + p[0] * e0 + p[1] * e1 + p[2] * e2
            o1 = pp1 + p[3] * e0 + p[4] * e1 + p[5] * e2
            o2 = pp2 + p[6] * e0 + p[7] * e1 + p[8] * e2
            if kind == REVOLUTE:
                r = rotation_about(a0, a1, a2, np.cos(theta), np.sin(theta))
                for row in range(3):
                    for col in range(3):
                        rotation[j, 3 * row + col, b] = (p[3 * row] * r[col] + p[3 * row + 1] * r[3 + col]
                                                         + p[3 * row + 2] * r[6 + col])
                w0, w1, w2 = pw0 + z0 * theta_dot, pw1 + z1 * theta_dot, pw2 + z2 * theta_dot
            else:
                for entry in range(9):
                    rotation[j, entry, b] = p[entry]
                w0, w1, w2 = pw0, pw1, pw2
                o0, o1, o2 = o0 + z0 * theta, o1 + z1 * theta, o2 + z2 * theta
            # the frame origin's velocity: the parent's point velocity, plus the slide along z for a prismatic joint
            c0, c1, c2 = cross3(pw0, pw1, pw2, o0 - pp0, o1 - pp1, o2 - pp2)
            v0, v1, v2 = pv0 + c0, pv1 + c1, pv2 + c2
            if kind != REVOLUTE:
                v0, v1, v2 = v0 + z0 * theta_dot, v1 + z1 * theta_dot, v2 + z2 * theta_dot
            zd0, zd1, zd2 = cross3(pw0, pw1, pw2, z0, z1, z2)
            m0, m1, m2 = coef[k + COM, b], coef[k + COM + 1, b], coef[k + COM + 2, b]
            g0 = rotation[j, 0, b] * m0 + rotation[j, 1, b] * m1 + rotation[j, 2, b] * m2
            g1 = rotation[j, 3, b] * m0 + rotation[j, 4, b] * m1 + rotation[j, 5, b] * m2
            g2 = rotation[j, 6, b] * m0 + rotation[j, 7, b] * m1 + rotation[j, 8, b] * m2
            d0, d1, d2 = cross3(w0, w1, w2, g0, g1, g2)
            pos[j, 0, b], pos[j, 1, b], pos[j, 2, b] = o0, o1, o2
            vel[j, 0, b], vel[j, 1, b], vel[j, 2, b] = v0, v1, v2
            omega[j, 0, b], omega[j, 1, b], omega[j, 2, b] = w0, w1, w2
            axis[j, 0, b], axis[j, 1, b], axis[j, 2, b] = z0, z1, z2
            axis_dot[j, 0, b], axis_dot[j, 1, b], axis_dot[j, 2, b] = zd0, zd1, zd2
            com[j, 0, b], com[j, 1, b], com[j, 2, b] = o0 + g0, o1 + g1, o2 + g2
            com_dot[j, 0, b], com_dot[j, 1, b], com_dot[j, 2, b] = v0 + d0, v1 + d1, v2 + d2


@lane_function
def tree_jacobians(n, topology, frames, jacobians):
    """J_ωi, J_vi (base frame) and their analytic rates (digest §5 steps 2–3): jacobians[0 … 3][i, :, c] =
    ∂ω_i/∂q̇_c, ∂ċ_i/∂q̇_c, d/dt of each."""
    lanes = frames.shape[3]
    pos, vel, axis, axis_dot, com, com_dot = frames[0], frames[1], frames[3], frames[4], frames[5], frames[6]
    jw, jv, jw_dot, jv_dot = jacobians[0], jacobians[1], jacobians[2], jacobians[3]
    for i in range(n):
        for r in range(3):
            for c in range(n):
                for b in range(lanes):
                    jw[i, r, c, b] = 0.0
                    jv[i, r, c, b] = 0.0
                    jw_dot[i, r, c, b] = 0.0
                    jv_dot[i, r, c, b] = 0.0
        k = i
        while k >= 0:
            kind, reference = topology[1 + 3 * k], topology[3 + 3 * k]
            for b in range(lanes):
                z0, z1, z2 = axis[k, 0, b], axis[k, 1, b], axis[k, 2, b]
                y0, y1, y2 = axis_dot[k, 0, b], axis_dot[k, 1, b], axis_dot[k, 2, b]
                if kind == REVOLUTE:
                    l0, l1, l2 = com[i, 0, b] - pos[k, 0, b], com[i, 1, b] - pos[k, 1, b], com[i, 2, b] - pos[k, 2, b]
                    ld0 = com_dot[i, 0, b] - vel[k, 0, b]
                    ld1 = com_dot[i, 1, b] - vel[k, 1, b]
                    ld2 = com_dot[i, 2, b] - vel[k, 2, b]
                    sw = (z0, z1, z2)
                    sv = cross3(z0, z1, z2, l0, l1, l2)
                    swd = (y0, y1, y2)
                    a0, a1, a2 = cross3(y0, y1, y2, l0, l1, l2)
                    c0, c1, c2 = cross3(z0, z1, z2, ld0, ld1, ld2)
                    svd = (a0 + c0, a1 + c1, a2 + c2)
                else:
                    sw = (0.0, 0.0, 0.0)
                    sv = (z0, z1, z2)
                    swd = (0.0, 0.0, 0.0)
                    svd = (y0, y1, y2)
                for r in range(3):
                    jw[i, r, k, b] += sw[r]
                    jv[i, r, k, b] += sv[r]
                    jw_dot[i, r, k, b] += swd[r]
                    jv_dot[i, r, k, b] += svd[r]
                    if reference >= 0:
                        jw[i, r, reference, b] -= sw[r]
                        jv[i, r, reference, b] -= sv[r]
                        jw_dot[i, r, reference, b] -= swd[r]
                        jv_dot[i, r, reference, b] -= svd[r]
            k = topology[2 + 3 * k]


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
def body_columns(n, topology, i):
    """(first, last): body i's Jacobian columns that can be non-zero are topology[COLUMN_LISTS(n) + first …
    last − 1], ascending (its ancestors' coordinates and those they are measured from)."""
    return topology[1 + 3 * n + i], topology[2 + 3 * n + i]


@lane_function
def kane_terms(x, n, coef, topology, work, forces):
    """M(q) (eq. (35)) into work[4] (not with CANONICAL_FORCE, whose callers already hold M) and into work[5]
    by ``forces``: ACCELERATING_FORCE f − h (eqs. (27), (28), (35)), or CANONICAL_FORCE f + ∂T/∂q, the rate of the canonical momentum p = M q̇ (Lagrange's equations
    (12): ṗ = ∂T/∂q + f), with ∂T/∂q = Σ_i J̇_ωiᵀ I_i ω_i + m_i J̇_viᵀ ċ_i from Theorem 1 and eq. (18) (base
    frame: R_i(J̇_ω + [ω×]J_ω)_body = J̇_ω), so M is never differentiated.  Sums run over each body's
    non-zero columns only (a chain's body i has i + 1), lanes innermost."""
    joint, rotation, frames, jacobians, mass, rhs, inertia, wrench = work
    lanes = x.shape[1]
    tree_kinematics(x, n, coef, topology, joint, rotation, frames)
    tree_jacobians(n, topology, frames, jacobians)
    jw, jv, jw_dot, jv_dot = jacobians[0], jacobians[1], jacobians[2], jacobians[3]
    omega, com_dot = frames[2], frames[6]
    lists = 2 + 4 * n
    for a in range(n):
        for c in range(n):
            for b in range(lanes):
                mass[a, c, b] = 0.0
        for b in range(lanes):
            rhs[a, b] = 0.0
    for i in range(n):
        k = joint_row(i)
        first, last = body_columns(n, topology, i)
        world_inertia_into(coef, k, rotation, i, inertia)
        if forces != CANONICAL_FORCE:  # ṗ needs no M: its callers hold M(q) already
            for ai in range(first, last):
                a = topology[lists + ai]
                for ci in range(ai, last):
                    c = topology[lists + ci]
                    for b in range(lanes):
                        total = coef[k + MASS, b] * (jv[i, 0, a, b] * jv[i, 0, c, b] + jv[i, 1, a, b] * jv[i, 1, c, b]
                                                     + jv[i, 2, a, b] * jv[i, 2, c, b])
                        for r in range(3):
                            total += jw[i, r, a, b] * (inertia[3 * r, b] * jw[i, 0, c, b] + inertia[3 * r + 1, b]
                                                       * jw[i, 1, c, b] + inertia[3 * r + 2, b] * jw[i, 2, c, b])
                        mass[a, c, b] += total
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
    if forces != MASS_ONLY:
        for j in range(n):
            k = joint_row(j)
            reference = topology[3 + 3 * j]
            for b in range(lanes):
                tau = (coef[k + FORCE, b] - coef[k + STIFFNESS, b] * (joint[0, j, b] - coef[k + REST, b])
                       - coef[k + DAMPING, b] * joint[1, j, b])
                rhs[j, b] += tau
                if reference >= 0:
                    rhs[reference, b] -= tau


@lane_function
def tree_potential_into(x, n, coef, topology, joint, frames, out):
    """V = −Σ_i m_i c_i·g + Σ_k (½ K_k (θ_k − θ_rest,k)² − F_k θ_k) (J) per lane, after tree_kinematics."""
    com = frames[5]
    for b in range(x.shape[1]):
        total = 0.0
        for j in range(n):
            k = joint_row(j)
            total -= coef[k + MASS, b] * (com[j, 0, b] * coef[0, b] + com[j, 1, b] * coef[1, b]
                                          + com[j, 2, b] * coef[2, b])
            stretch = joint[0, j, b] - coef[k + REST, b]
            total += 0.5 * coef[k + STIFFNESS, b] * stretch * stretch - coef[k + FORCE, b] * joint[0, j, b]
        out[b] = total


# ------------------------------------------------------------------------ lane templates (bound per system)

def kane_energy(x, n, coef, topology, out):
    """E = ½ uᵀ M(q) u + V(q) (J) per lane."""
    work = kane_work(n, x.shape[1], 0.0)
    kane_terms(x, n, coef, topology, work, MASS_ONLY)
    tree_potential_into(x, n, coef, topology, work[0], work[2], out)
    mass = work[4]
    for b in range(x.shape[1]):
        kinetic = 0.0
        for a in range(n):
            row = 0.0
            for c in range(n):
                row += mass[a, c, b] * x[n + c, b]
            kinetic += x[n + a, b] * row
        out[b] += 0.5 * kinetic


def kane_vector_field(x, n, coef, topology, dx, scratch):
    """dx = (u, M⁻¹(f − h)): Kane's equations (34) solved for the accelerations."""
    work = kane_work(n, x.shape[1], 0.0)
    kane_terms(x, n, coef, topology, work, ACCELERATING_FORCE)
    rhs = work[5]
    cholesky_solve_in_lanes(work[4], rhs)
    for a in range(n):
        for b in range(x.shape[1]):
            dx[a, b] = x[n + a, b]
            dx[n + a, b] = rhs[a, b]


@lane_function
def kane_mass_into(x, n, coef, topology, work, out):
    """out (n, n, L) ← M(q) at the coordinates of x (its speeds are not used)."""
    kane_terms(x, n, coef, topology, work, MASS_ONLY)
    out[:] = work[4]


@lane_function
def kane_canonical_force_into(x, n, coef, topology, work, out):
    """out (n, L) ← ṗ = f + ∂T/∂q at (q, u) of x (see kane_terms)."""
    kane_terms(x, n, coef, topology, work, CANONICAL_FORCE)
    out[:] = work[5]
