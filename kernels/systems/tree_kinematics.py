"""The kinematics of a tree of revolute, prismatic, spherical and free joints, numerically, in lanes (members
innermost): its coefficient and topology layout, forward kinematics at position and velocity level, the
Jacobians of the bodies' velocities and their rates (Parsa, "The Lagrangian derivation of Kane's equations",
digest_003, §5), and q̇ = B(q) u.  Kane's equations built on them are in :mod:`kernels.systems.kane`, the loop
closures in :mod:`kernels.systems.loop_closures`.

Each speed u_c of a joint k is either angular, about an axis z_c through the joint's frame origin o_k, or
linear, along z_c (digest §5): ∂ω_i/∂u_c = z_c, ∂v_i/∂u_c = z_c × (c_i − o_k), or 0 and z_c.  A revolute
joint has one angular speed about its axis, a prismatic one a linear speed along it (both axes fixed in the
parent), a spherical joint three angular speeds about its own body's axes (the speeds are its body angular
velocity relative to the parent: z_c = R_k e_c), a free joint three linear speeds along the parent's axes
(its position's rates in the parent frame) then a spherical joint's three.  Their rates are analytic:
ż_c = ω × z_c with the ω of the body z_c is fixed in, and d/dt (z_c × (c_i − o_k)) = ż_c × (c_i − o_k)
+ z_c × (ċ_i − ȯ_k).  Quaternions (x, y, z, w; the ``generalised`` space's layout) enter through their
rotation, normalised; q̇ = B(q) u turns a spherical joint's (ω, 0) into η̇ = ½ η ⊛ (ω, 0), and its fourth
speed (the quaternion's norm rate, 0) gets u̇ = 0 from a unit entry on M's diagonal.

A one-degree-of-freedom joint's variable is θ_k = q_k − q_{r(k)} for a joint "measured from" coordinate
r(k) (absolute angles of a planar chain, as in sympy's ``n_link_pendulum_on_cart``), else θ_k = q_k; its
columns then go to q_k with +1 and to q_{r(k)} with −1.

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

from ..lanes import cross3, lane_function

REVOLUTE, PRISMATIC, SPHERICAL, FREE = 0, 1, 2, 3
#: coordinates (rows of q, and of u) each joint type takes, and of them the speeds that move it (the
#: quaternion's norm rate does not)
JOINT_COORDINATES = {REVOLUTE: 1, PRISMATIC: 1, SPHERICAL: 4, FREE: 7}
JOINT_SPEEDS = {REVOLUTE: 1, PRISMATIC: 1, SPHERICAL: 3, FREE: 6}
JOINT_TYPES = {"revolute": REVOLUTE, "prismatic": PRISMATIC, "spherical": SPHERICAL, "free": FREE}
GRAVITY_ROWS = 3
AXIS, ORIGIN, MASS, COM, INERTIA, FORCE, STIFFNESS, REST, DAMPING = 0, 3, 6, 7, 10, 19, 20, 21, 22
AMPLITUDE, FREQUENCY, PHASE = 23, 24, 25
JOINT_ROWS = 26
#: the topology entries of one joint: type, parent, measured-from, first coordinate
JOINT_ENTRIES = 4


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
def body_columns(topology, h, joints, i):
    """(lists, first, last): body i's Jacobian columns that can be non-zero are topology[lists + first …
    lists + last − 1], ascending (its ancestors' speeds and the coordinates they are measured from)."""
    offsets = h + 1 + JOINT_ENTRIES * joints
    return offsets + joints + 1, topology[offsets + i], topology[offsets + i + 1]


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

