"""Kane's equations of a tree of revolute, prismatic, spherical and free joints, numerically, in lanes
(members innermost).

Parsa, "The Lagrangian derivation of Kane's equations" (digest_003): with J_i = [J_ωi; J_vi] the Jacobian
of body i's angular velocity and centre-of-mass velocity with respect to the speeds u (eqs. (14)–(16)) and
M_i = diag(I_i, m_i 1) (eq. (21)), Kane's equations (32) are M(q) u̇ + h(q, u) = f (eq. (34)) with

    M = Σ_i J_iᵀ M_i J_i,    h = Σ_i J_iᵀ (M_i J̇_i u + W_i M_i J_i u)    (eq. (35)),
    f = Σ_i m_i J_viᵀ g + τ    (eqs. (27), (28)).

Here both J_ωi and J_vi are taken in the base frame, where I_i becomes R_i I_i R_iᵀ and the gyroscopic
term W_i M_i J_i u becomes ω_i × (R_i I_i R_iᵀ) ω_i; this is the same M and h (the body-frame J_ωi of
the paper is R_iᵀ times ours, and the tests check Theorem 1 in the body frame).  Each speed u_c of a
joint k is either angular, about an axis z_c through the joint's frame origin o_k, or linear, along z_c
(digest §5): ∂ω_i/∂u_c = z_c, ∂v_i/∂u_c = z_c × (c_i − o_k), or 0 and z_c.  A revolute joint has one
angular speed about its axis, a prismatic one a linear speed along it (both axes fixed in the parent),
a spherical joint three angular speeds about its own body's axes (the speeds are its body angular
velocity relative to the parent: z_c = R_k e_c), a free joint three linear speeds along the parent's axes
(its position's rates in the parent frame) then a spherical joint's three.  Their rates are analytic:
ż_c = ω × z_c with the ω of the body z_c is fixed in, and d/dt (z_c × (c_i − o_k)) = ż_c × (c_i − o_k)
+ z_c × (ċ_i − ȯ_k).  Quaternions (x, y, z, w; the ``generalised`` space's layout) enter through their
rotation, normalised; q̇ = B(q) u turns a spherical joint's (ω, 0) into η̇ = ½ η ⊛ (ω, 0), and its fourth
speed (the quaternion's norm rate, 0) gets u̇ = 0 from a unit entry on M's diagonal.

A one-degree-of-freedom joint's variable is θ_k = q_k − q_{r(k)} for a joint "measured from" coordinate
r(k) (absolute angles of a planar chain, as in sympy's ``n_link_pendulum_on_cart``), else θ_k = q_k; its
columns then go to q_k with +1 and to q_{r(k)} with −1.  Its loads are generalised forces on θ_k: a
constant F_k, a periodic A_k sin(ν_k t + φ_k), a spring −K_k (θ_k − θ_rest,k) and a damper −D_k θ̇_k.  The
same code runs on complex numbers (complex-step derivatives for the Jacobian of the implicit ``midpoint``:
every operation is analytic).  Cost per evaluation O(n³) per member (n bodies × n² entries of M): the
vector field of trees of revolute and prismatic joints takes the O(n) articulated-body algorithm instead
(:mod:`kernels.systems.articulated`); trees with spherical or free joints or loops solve u̇ = M⁻¹(f − h)
there by a Cholesky factorisation in lanes.

Coefficient rows (per member): g times the direction of gravity (3, m/s², base frame), then JOINT_ROWS per
joint j: its axis (unit, in the parent's frame; one-degree-of-freedom joints), its origin (the joint point
in the parent's frame at q = 0, m), the body's mass (kg), its centre of mass (from the joint point, body
frame, m), its inertia about the centre of mass (body frame, row-major, kg·m²), and the joint's F, K,
θ_rest, D, A, ν, φ.  Topology: the space's header (Q, then the first row of each of the Q quaternions), then the
number of joints, each joint's (type, parent, measured-from, first coordinate) (−1: the ground / none;
parents precede children), then offsets into the list that follows of each body's non-zero Jacobian
columns (ascending).
"""

from __future__ import annotations

import numpy as np

from ..lanes import cross3, lane_function, solve_pivoted_in_lanes
from ..spaces.generalised import quaternion_error_lanes

REVOLUTE, PRISMATIC, SPHERICAL, FREE = 0, 1, 2, 3
#: coordinates (rows of q, and of u) each joint type takes, and of them the speeds that move it (the
#: quaternion's norm rate does not)
JOINT_COORDINATES = {REVOLUTE: 1, PRISMATIC: 1, SPHERICAL: 4, FREE: 7}
JOINT_SPEEDS = {REVOLUTE: 1, PRISMATIC: 1, SPHERICAL: 3, FREE: 6}
#: what kane_terms computes besides M: nothing, f − h (Kane's right side) or f + ∂T/∂q (ṗ of p = M q̇)
MASS_ONLY, ACCELERATING_FORCE, CANONICAL_FORCE = 0, 1, 2
JOINT_TYPES = {"revolute": REVOLUTE, "prismatic": PRISMATIC, "spherical": SPHERICAL, "free": FREE}
GRAVITY_ROWS = 3
AXIS, ORIGIN, MASS, COM, INERTIA, FORCE, STIFFNESS, REST, DAMPING = 0, 3, 6, 7, 10, 19, 20, 21, 22
AMPLITUDE, FREQUENCY, PHASE = 23, 24, 25
JOINT_ROWS = 26
#: the topology entries of one joint: type, parent, measured-from, first coordinate
JOINT_ENTRIES = 4
#: coefficient rows of a loop closure: its two points (each in its body's frame, m) and up to three
#: base-frame directions along which they coincide
CLOSURE_ROWS = 15
#: a loop closure is kept to within this (m; and its rate, m/s) by at most CLOSURE_ITERATIONS Gauss–Newton
#: steps after every step
CLOSURE_TOLERANCE, CLOSURE_ITERATIONS = 1e-12, 10


@lane_function
def joint_row(j):
    """First coefficient row of joint j."""
    return GRAVITY_ROWS + JOINT_ROWS * j


@lane_function
def tree_header(topology):
    """(h, joints): where Kane's part of the topology starts (after the space's quaternion list) and the
    number of joints (bodies)."""
    h = 1 + topology[0]
    return h, topology[h]


@lane_function
def joint_entries(topology, h, j):
    """(type, parent, measured-from, first coordinate) of joint j."""
    e = h + 1 + JOINT_ENTRIES * j
    return topology[e], topology[e + 1], topology[e + 2], topology[e + 3]


@lane_function
def speed_count(kind):
    """The speeds that move a joint of this type (see JOINT_SPEEDS)."""
    return 1 if kind <= PRISMATIC else (3 if kind == SPHERICAL else 6)


@lane_function
def rotation_about(a0, a1, a2, c, s):
    """Rodrigues' rotation by the angle with cosine c and sine s about the unit axis a, row-major."""
    t = 1.0 - c
    return (c + t * a0 * a0, t * a0 * a1 - s * a2, t * a0 * a2 + s * a1,
            t * a1 * a0 + s * a2, c + t * a1 * a1, t * a1 * a2 - s * a0,
            t * a2 * a0 - s * a1, t * a2 * a1 + s * a0, c + t * a2 * a2)


@lane_function
def quaternion_rotation(x, y, z, w):
    """The rotation (row-major) of the quaternion (x, y, z, w), scalar last (Hamilton), normalised first."""
    norm = np.sqrt(x * x + y * y + z * z + w * w)
    x, y, z, w = x / norm, y / norm, z / norm, w / norm
    return (1.0 - 2.0 * (y * y + z * z), 2.0 * (x * y - w * z), 2.0 * (x * z + w * y),
            2.0 * (x * y + w * z), 1.0 - 2.0 * (x * x + z * z), 2.0 * (y * z - w * x),
            2.0 * (x * z - w * y), 2.0 * (y * z + w * x), 1.0 - 2.0 * (x * x + y * y))


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
def set_axis(axes, c, b, z0, z1, z2, w0, w1, w2):
    """Speed c's axis z and its rate ω × z (ω: the body z is fixed in)."""
    y0, y1, y2 = cross3(w0, w1, w2, z0, z1, z2)
    axes[0, c, 0, b], axes[0, c, 1, b], axes[0, c, 2, b] = z0, z1, z2
    axes[1, c, 0, b], axes[1, c, 1, b], axes[1, c, 2, b] = y0, y1, y2


@lane_function
def tree_kinematics(x, n, coef, topology, joint, rotation, frames, axes):
    """Forward kinematics at position and velocity level (digest §5 step 1), parents before children:
    joint (θ, θ̇) of one-degree-of-freedom joints at their coordinate; rotation R_i (body → base);
    frames[0 … 4] = frame origin p_i, its velocity, ω_i, c_i, ċ_i (base frame); axes[0, 1] = each speed's
    axis z_c and ż_c (base frame)."""
    lanes = x.shape[1]
    pos, vel, omega, com, com_dot = frames[0], frames[1], frames[2], frames[3], frames[4]
    h, joints = tree_header(topology)
    for j in range(joints):
        kind, parent, reference, first = joint_entries(topology, h, j)
        k = joint_row(j)
        for b in range(lanes):
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
            if kind == FREE:  # the frame origin sits at the joint point plus the position, in the parent's axes
                e0, e1, e2 = e0 + x[first, b], e1 + x[first + 1, b], e2 + x[first + 2, b]
            o0 = pp0 + p[0] * e0 + p[1] * e1 + p[2] * e2
            o1 = pp1 + p[3] * e0 + p[4] * e1 + p[5] * e2
            o2 = pp2 + p[6] * e0 + p[7] * e1 + p[8] * e2
            # the frame origin's velocity: the parent's point velocity, plus the joint's own slide
            c0, c1, c2 = cross3(pw0, pw1, pw2, o0 - pp0, o1 - pp1, o2 - pp2)
            v0, v1, v2 = pv0 + c0, pv1 + c1, pv2 + c2
            r = (1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0)  # the joint's rotation (prismatic: none)
            w0, w1, w2 = pw0, pw1, pw2
            turn = first + 3 if kind == FREE else first  # a spherical motion's quaternion and speeds
            if kind <= PRISMATIC:
                theta, theta_dot = x[first, b], x[n + first, b]
                if reference >= 0:
                    theta -= x[reference, b]
                    theta_dot -= x[n + reference, b]
                joint[0, first, b], joint[1, first, b] = theta, theta_dot
                a0, a1, a2 = coef[k + AXIS, b], coef[k + AXIS + 1, b], coef[k + AXIS + 2, b]
                z0 = p[0] * a0 + p[1] * a1 + p[2] * a2
                z1 = p[3] * a0 + p[4] * a1 + p[5] * a2
                z2 = p[6] * a0 + p[7] * a1 + p[8] * a2
                set_axis(axes, first, b, z0, z1, z2, pw0, pw1, pw2)
                if kind == REVOLUTE:
                    r = rotation_about(a0, a1, a2, np.cos(theta), np.sin(theta))
                    w0, w1, w2 = pw0 + z0 * theta_dot, pw1 + z1 * theta_dot, pw2 + z2 * theta_dot
                else:  # the slid origin is carried by the parent's turning too
                    o0, o1, o2 = o0 + z0 * theta, o1 + z1 * theta, o2 + z2 * theta
                    t0, t1, t2 = cross3(pw0, pw1, pw2, z0, z1, z2)
                    v0, v1, v2 = (v0 + t0 * theta + z0 * theta_dot, v1 + t1 * theta + z1 * theta_dot,
                                  v2 + t2 * theta + z2 * theta_dot)
            else:
                r = quaternion_rotation(x[turn, b], x[turn + 1, b], x[turn + 2, b], x[turn + 3, b])
                if kind == FREE:
                    for s in range(3):
                        rate = x[n + first + s, b]
                        v0, v1, v2 = v0 + p[s] * rate, v1 + p[3 + s] * rate, v2 + p[6 + s] * rate
                        set_axis(axes, first + s, b, p[s], p[3 + s], p[6 + s], pw0, pw1, pw2)
            for row in range(3):
                for col in range(3):
                    rotation[j, 3 * row + col, b] = (p[3 * row] * r[col] + p[3 * row + 1] * r[3 + col]
                                                     + p[3 * row + 2] * r[6 + col])
            if kind > PRISMATIC:
                for s in range(3):
                    rate = x[n + turn + s, b]
                    w0 += rotation[j, s, b] * rate
                    w1 += rotation[j, 3 + s, b] * rate
                    w2 += rotation[j, 6 + s, b] * rate
                for s in range(3):
                    set_axis(axes, turn + s, b, rotation[j, s, b], rotation[j, 3 + s, b], rotation[j, 6 + s, b],
                             w0, w1, w2)
            m0, m1, m2 = coef[k + COM, b], coef[k + COM + 1, b], coef[k + COM + 2, b]
            g0 = rotation[j, 0, b] * m0 + rotation[j, 1, b] * m1 + rotation[j, 2, b] * m2
            g1 = rotation[j, 3, b] * m0 + rotation[j, 4, b] * m1 + rotation[j, 5, b] * m2
            g2 = rotation[j, 6, b] * m0 + rotation[j, 7, b] * m1 + rotation[j, 8, b] * m2
            d0, d1, d2 = cross3(w0, w1, w2, g0, g1, g2)
            pos[j, 0, b], pos[j, 1, b], pos[j, 2, b] = o0, o1, o2
            vel[j, 0, b], vel[j, 1, b], vel[j, 2, b] = v0, v1, v2
            omega[j, 0, b], omega[j, 1, b], omega[j, 2, b] = w0, w1, w2
            com[j, 0, b], com[j, 1, b], com[j, 2, b] = o0 + g0, o1 + g1, o2 + g2
            com_dot[j, 0, b], com_dot[j, 1, b], com_dot[j, 2, b] = v0 + d0, v1 + d1, v2 + d2


@lane_function
def tree_jacobians(n, topology, frames, axes, jacobians):
    """J_ωi, J_vi (base frame) and their analytic rates (digest §5 steps 2–3): jacobians[0 … 3][i, :, c] =
    ∂ω_i/∂u_c, ∂ċ_i/∂u_c, d/dt of each."""
    lanes = frames.shape[3]
    pos, vel, com, com_dot = frames[0], frames[1], frames[3], frames[4]
    jw, jv, jw_dot, jv_dot = jacobians[0], jacobians[1], jacobians[2], jacobians[3]
    h, joints = tree_header(topology)
    for i in range(joints):
        for r in range(3):
            for c in range(n):
                for b in range(lanes):
                    jw[i, r, c, b] = 0.0
                    jv[i, r, c, b] = 0.0
                    jw_dot[i, r, c, b] = 0.0
                    jv_dot[i, r, c, b] = 0.0
        k = i
        while k >= 0:
            kind, parent, reference, first = joint_entries(topology, h, k)
            for s in range(speed_count(kind)):
                c = first + s
                linear = kind == PRISMATIC or (kind == FREE and s < 3)
                for b in range(lanes):
                    z0, z1, z2 = axes[0, c, 0, b], axes[0, c, 1, b], axes[0, c, 2, b]
                    y0, y1, y2 = axes[1, c, 0, b], axes[1, c, 1, b], axes[1, c, 2, b]
                    if linear:
                        sw = (0.0, 0.0, 0.0)
                        sv = (z0, z1, z2)
                        swd = (0.0, 0.0, 0.0)
                        svd = (y0, y1, y2)
                    else:
                        l0, l1, l2 = com[i, 0, b] - pos[k, 0, b], com[i, 1, b] - pos[k, 1, b], com[i, 2, b] - pos[k, 2, b]
                        ld0 = com_dot[i, 0, b] - vel[k, 0, b]
                        ld1 = com_dot[i, 1, b] - vel[k, 1, b]
                        ld2 = com_dot[i, 2, b] - vel[k, 2, b]
                        sw = (z0, z1, z2)
                        sv = cross3(z0, z1, z2, l0, l1, l2)
                        swd = (y0, y1, y2)
                        a0, a1, a2 = cross3(y0, y1, y2, l0, l1, l2)
                        d0, d1, d2 = cross3(z0, z1, z2, ld0, ld1, ld2)
                        svd = (a0 + d0, a1 + d1, a2 + d2)
                    for r in range(3):
                        jw[i, r, c, b] += sw[r]
                        jv[i, r, c, b] += sv[r]
                        jw_dot[i, r, c, b] += swd[r]
                        jv_dot[i, r, c, b] += svd[r]
                        if reference >= 0:
                            jw[i, r, reference, b] -= sw[r]
                            jv[i, r, reference, b] -= sv[r]
                            jw_dot[i, r, reference, b] -= swd[r]
                            jv_dot[i, r, reference, b] -= svd[r]
            k = parent


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
def body_columns(topology, h, joints, i):
    """(lists, first, last): body i's Jacobian columns that can be non-zero are topology[lists + first …
    lists + last − 1], ascending (its ancestors' speeds and the coordinates they are measured from)."""
    offsets = h + 1 + JOINT_ENTRIES * joints
    return offsets + joints + 1, topology[offsets + i], topology[offsets + i + 1]


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


@lane_function
def coordinate_rates_into(x, n, topology, dx):
    """dx[0 … n − 1] ← q̇ = B(q) u: u itself on flat rows, η̇ = ½ η ⊛ (ω, ω₀) on each quaternion (x, y, z, w)
    (Hamilton's product, scalar last: (η_v, w) ⊛ (ω, ω₀) = (w ω + ω₀ η_v + η_v × ω, w ω₀ − η_v·ω))."""
    for a in range(n):
        for b in range(x.shape[1]):
            dx[a, b] = x[n + a, b]
    for block in range(topology[0]):
        row = topology[1 + block]
        for b in range(x.shape[1]):
            e0, e1, e2, w = x[row, b], x[row + 1, b], x[row + 2, b], x[row + 3, b]
            o0, o1, o2, o3 = x[n + row, b], x[n + row + 1, b], x[n + row + 2, b], x[n + row + 3, b]
            c0, c1, c2 = cross3(e0, e1, e2, o0, o1, o2)
            dx[row, b] = 0.5 * (w * o0 + o3 * e0 + c0)
            dx[row + 1, b] = 0.5 * (w * o1 + o3 * e1 + c1)
            dx[row + 2, b] = 0.5 * (w * o2 + o3 * e2 + c2)
            dx[row + 3, b] = 0.5 * (w * o3 - (e0 * o0 + e1 * o1 + e2 * o2))


# ------------------------------------------------------------------- loop closures (Pfaffian constraints)

@lane_function
def closure_header(topology):
    """(start, closures, rows): where the closure list starts in the topology, the number of loop closures
    and their constraint rows in all."""
    h, joints = tree_header(topology)
    offsets = h + 1 + JOINT_ENTRIES * joints
    start = offsets + joints + 1 + topology[offsets + joints]
    return start, topology[start], topology[start + 1]


@lane_function
def closure_row(topology, k):
    """First coefficient row of closure k (after the joints' rows)."""
    h, joints = tree_header(topology)
    return GRAVITY_ROWS + JOINT_ROWS * joints + CLOSURE_ROWS * k


@lane_function
def body_point(rotation, frames, i, r0, r1, r2, b):
    """Position and velocity (base frame) of the point r of body i (its frame, from its frame origin); the
    ground's (i = −1) point r is fixed in the base frame."""
    if i < 0:
        return r0, r1, r2, 0.0, 0.0, 0.0
    g0 = rotation[i, 0, b] * r0 + rotation[i, 1, b] * r1 + rotation[i, 2, b] * r2
    g1 = rotation[i, 3, b] * r0 + rotation[i, 4, b] * r1 + rotation[i, 5, b] * r2
    g2 = rotation[i, 6, b] * r0 + rotation[i, 7, b] * r1 + rotation[i, 8, b] * r2
    w0, w1, w2 = cross3(frames[2, i, 0, b], frames[2, i, 1, b], frames[2, i, 2, b], g0, g1, g2)
    return (frames[0, i, 0, b] + g0, frames[0, i, 1, b] + g1, frames[0, i, 2, b] + g2,
            frames[1, i, 0, b] + w0, frames[1, i, 1, b] + w1, frames[1, i, 2, b] + w2)


@lane_function
def add_point_constraint(x, n, topology, frames, axes, i, b, p, v, d, sign, jacobian, row):
    """jacobian[row, c, b] += sign d·∂ṗ/∂u_c for every speed c that moves the point p (velocity v) of body i
    (the J_v columns of digest §5 with c_i replaced by p); returns sign d·J̇_P u, the point's acceleration
    along d at u̇ = 0."""
    h, joints = tree_header(topology)
    pos, vel = frames[0], frames[1]
    bias = 0.0
    k = i
    while k >= 0:
        kind, parent, reference, first = joint_entries(topology, h, k)
        for s in range(speed_count(kind)):
            c = first + s
            z0, z1, z2 = axes[0, c, 0, b], axes[0, c, 1, b], axes[0, c, 2, b]
            y0, y1, y2 = axes[1, c, 0, b], axes[1, c, 1, b], axes[1, c, 2, b]
            if kind == PRISMATIC or (kind == FREE and s < 3):
                col0, col1, col2, rate0, rate1, rate2 = z0, z1, z2, y0, y1, y2
            else:
                l0, l1, l2 = p[0] - pos[k, 0, b], p[1] - pos[k, 1, b], p[2] - pos[k, 2, b]
                col0, col1, col2 = cross3(z0, z1, z2, l0, l1, l2)
                a0, a1, a2 = cross3(y0, y1, y2, l0, l1, l2)
                e0, e1, e2 = cross3(z0, z1, z2, v[0] - vel[k, 0, b], v[1] - vel[k, 1, b], v[2] - vel[k, 2, b])
                rate0, rate1, rate2 = a0 + e0, a1 + e1, a2 + e2
            value = sign * (d[0] * col0 + d[1] * col1 + d[2] * col2)
            speed = x[n + c, b]
            jacobian[row, c, b] += value
            if reference >= 0:
                jacobian[row, reference, b] -= value
                speed -= x[n + reference, b]
            bias += sign * (d[0] * rate0 + d[1] * rate1 + d[2] * rate2) * speed
        k = parent
    return bias


@lane_function
def closure_terms(x, n, coef, topology, rotation, frames, axes, jacobian, residual, rate, bias):
    """After tree_kinematics: for each loop closure k (point a of body a on point b of body b, along each of
    its base-frame directions d) the constraint rows Φ = d·(p_a − p_b) (``residual``, m), A = ∂Φ/∂q
    = d·(J_Pa − J_Pb) with respect to the speeds (``jacobian`` (rows, n, L)), A u = d·(ṗ_a − ṗ_b) (``rate``,
    m/s) and Ȧ u = d·(J̇_Pa − J̇_Pb) u (``bias``, m/s²): the Pfaffian constraint A(q) q̇ = 0 of a closed loop
    and its derivative A q̈ + Ȧ q̇ = 0."""
    start, closures, rows = closure_header(topology)
    for r in range(rows):
        for c in range(n):
            for b in range(x.shape[1]):
                jacobian[r, c, b] = 0.0
    row = 0
    for k in range(closures):
        body_a, body_b, count = topology[start + 2 + 3 * k], topology[start + 3 + 3 * k], topology[start + 4 + 3 * k]
        e = closure_row(topology, k)
        for b in range(x.shape[1]):
            pa = body_point(rotation, frames, body_a, coef[e, b], coef[e + 1, b], coef[e + 2, b], b)
            pb = body_point(rotation, frames, body_b, coef[e + 3, b], coef[e + 4, b], coef[e + 5, b], b)
            for r in range(count):
                d = (coef[e + 6 + 3 * r, b], coef[e + 7 + 3 * r, b], coef[e + 8 + 3 * r, b])
                residual[row + r, b] = d[0] * (pa[0] - pb[0]) + d[1] * (pa[1] - pb[1]) + d[2] * (pa[2] - pb[2])
                rate[row + r, b] = d[0] * (pa[3] - pb[3]) + d[1] * (pa[4] - pb[4]) + d[2] * (pa[5] - pb[5])
                bias[row + r, b] = add_point_constraint(x, n, topology, frames, axes, body_a, b, pa[:3], pa[3:], d,
                                                        1.0, jacobian, row + r)
                if body_b >= 0:
                    bias[row + r, b] += add_point_constraint(x, n, topology, frames, axes, body_b, b, pb[:3], pb[3:],
                                                             d, -1.0, jacobian, row + r)
        row += count


@lane_function
def closure_work(n, lanes, rows):
    """Work of the closures' terms: A (rows, n, L), Φ, A u, Ȧ u (3, rows, L), and a (rows, rows, L) matrix."""
    return (np.zeros((rows, n, lanes)), np.zeros((3, rows, lanes)), np.zeros((rows, rows, lanes)))


@lane_function
def gram_solve(jacobian, values, gram):
    """values ← (A Aᵀ)⁻¹ values per lane (A: ``jacobian`` (rows, n, L), full row rank), by pivoted elimination."""
    rows, n, lanes = jacobian.shape
    for r in range(rows):
        for s in range(rows):
            for b in range(lanes):
                total = 0.0
                for c in range(n):
                    total += jacobian[r, c, b] * jacobian[s, c, b]
                gram[r, s, b] = total
    solve_pivoted_in_lanes(gram, values)


@lane_function
def closure_state(x, n, coef, topology, rows):
    """Kinematics and closure terms at x (see closure_terms): (jacobian, [Φ, A u, Ȧ u], a (rows, rows, L) matrix)."""
    lanes = x.shape[1]
    joint, rotation, frames, axes = kane_work(n, lanes, 0.0)[:4]
    jacobian, terms, gram = closure_work(n, lanes, rows)
    tree_kinematics(x, n, coef, topology, joint, rotation, frames, axes)
    closure_terms(x, n, coef, topology, rotation, frames, axes, jacobian, terms[0], terms[1], terms[2])
    return jacobian, terms, gram


@lane_function
def largest_row(values, b):
    """max_r |values[r, b]| (NaN if any is NaN)."""
    largest = 0.0
    for r in range(values.shape[0]):
        if not abs(values[r, b]) <= largest:
            largest = abs(values[r, b])
    return largest


@lane_function
def least_change(x, first, jacobian, values, gram, off, moved):
    """x[first + c] −= (Aᵀ (A Aᵀ)⁻¹ values)_c in each lane with off[b] (the least change that removes ``values``
    along A's rows); moved[b] = 1 where it changed x."""
    lanes = x.shape[1]
    for b in range(lanes):
        if off[b] == 0.0:
            for r in range(values.shape[0]):
                values[r, b] = 0.0  # no step for this lane
    gram_solve(jacobian, values, gram)
    for b in range(lanes):
        for c in range(jacobian.shape[1]):
            change = 0.0
            for r in range(values.shape[0]):
                change += jacobian[r, c, b] * values[r, b]
            if change != 0.0:
                x[first + c, b] -= change
                moved[b] = 1.0


@lane_function
def kane_constrain(x, n, coef, topology, moved):
    """Put each lane's (q, u) back on its loop closures: Gauss–Newton steps q ← q − Aᵀ(A Aᵀ)⁻¹ Φ(q) (the least
    change of q, u = q̇ on trees of revolute and prismatic joints) while max |Φ| > CLOSURE_TOLERANCE (m), at
    most CLOSURE_ITERATIONS (a lane still off then gets NaN: status NON_FINITE), then u ← u − Aᵀ(A Aᵀ)⁻¹ A u
    if max |A u| > CLOSURE_TOLERANCE (m/s).  A lane already on them is left bit for bit (so a resumed segment
    starts where the last one ended); moved[b] = 1 for each lane changed."""
    start, closures, rows = closure_header(topology)
    if closures == 0:
        return
    lanes = x.shape[1]
    off = np.zeros(lanes)
    for iteration in range(CLOSURE_ITERATIONS + 1):
        jacobian, terms, gram = closure_state(x, n, coef, topology, rows)
        count = 0
        for b in range(lanes):
            off[b] = 0.0 if largest_row(terms[0], b) <= CLOSURE_TOLERANCE else 1.0
            count += int(off[b])
            if off[b] != 0.0 and iteration == CLOSURE_ITERATIONS:
                for row in range(2 * n):
                    x[row, b] = np.nan
                moved[b] = 1.0
        if count == 0 or iteration == CLOSURE_ITERATIONS:
            break
        least_change(x, 0, jacobian, terms[0], gram, off, moved)
    count = 0
    for b in range(lanes):
        off[b] = 1.0 if largest_row(terms[1], b) > CLOSURE_TOLERANCE else 0.0
        count += int(off[b])
    if count > 0:  # most steps end on the closures' velocity constraint already
        least_change(x, n, jacobian, terms[1], gram, off, moved)


@lane_function
def closed_loop_accelerations(x, n, coef, topology, work, rows):
    """work[6] ← u̇ of a tree with loop closures, from [M Aᵀ; A 0] [u̇; λ] = [f − h; −Ȧ u] (M and f − h in
    work[5], work[6]; index-1 form of the closures, whose drift kane_constrain removes after each step), by
    pivoted elimination per lane."""
    lanes = x.shape[1]
    rotation, frames, axes, mass, rhs = work[1], work[2], work[3], work[5], work[6]
    jacobian, terms, _ = closure_work(n, lanes, rows)
    closure_terms(x, n, coef, topology, rotation, frames, axes, jacobian, terms[0], terms[1], terms[2])
    size = n + rows
    system = np.zeros((size, size, lanes))
    right = np.zeros((size, lanes))
    for b in range(lanes):
        for a in range(n):
            right[a, b] = rhs[a, b]
            for c in range(n):
                system[a, c, b] = mass[a, c, b]
        for r in range(rows):
            right[n + r, b] = -terms[2, r, b]
            for c in range(n):
                system[n + r, c, b] = jacobian[r, c, b]
                system[c, n + r, b] = jacobian[r, c, b]
    solve_pivoted_in_lanes(system, right)
    for a in range(n):
        for b in range(lanes):
            rhs[a, b] = right[a, b]


@lane_function
def tree_diagnostics(x, n, coef, topology, out):
    """The generalised space's diagnostics of a tree (see :mod:`kernels.spaces.generalised`): quaternion_error,
    and of its loop closures constraint_error = max |Φ| (m) and constraint_rate_error = max |A u| (m/s)."""
    quaternion_error_lanes(x, n, coef, topology, out)
    start, closures, rows = closure_header(topology)
    lanes = x.shape[1]
    for b in range(lanes):
        out[1, b] = 0.0
        out[2, b] = 0.0
    if closures == 0:
        return
    terms = closure_state(x, n, coef, topology, rows)[1]
    for b in range(lanes):
        out[1, b] = largest_row(terms[0], b)
        out[2, b] = largest_row(terms[1], b)


# ------------------------------------------------------------------------ lane templates (bound per system)

def kane_energy(x, n, coef, topology, out):
    """E = ½ uᵀ M(q) u + V(q) (J) per lane."""
    work = kane_work(n, x.shape[1], 0.0)
    kane_terms(x, n, coef, topology, 0.0, work, MASS_ONLY)
    tree_potential_into(x, n, coef, topology, work[0], work[2], out)
    mass = work[5]
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
