"""Forward dynamics of a tree of revolute and prismatic joints in O(n) per member: the articulated-body
algorithm (Featherstone, "Rigid Body Dynamics Algorithms", 2008, ch. 7, Table 7.1), as Pinocchio's ``aba``,
and the ``multibody`` vector field built on it.

Every spatial quantity is taken in base-frame coordinates about the base origin (the algorithm's equations
hold in any one frame; in the base frame no transform between a body and its parent is needed, which is
also Pinocchio's choice).  A motion vector is (ω; v_O), the angular velocity and the
velocity of the body point at the base origin; a force (n_O; f), the moment about the base origin and the
force.  Joint j (parent λ) with axis z through its point o has the motion subspace S_j = (z; o × z)
(revolute) or (0; z) (prismatic), both fixed in the parent, so (§7.3, Table 7.1, with Ṡ_j = v_j × S_j)

    pass 1 (root to leaves):  v_j = v_λ + S_j θ̇_j,  c_j = v_λ × S_j θ̇_j,  I^A_j = I_j,  p^A_j = v_j ×* I_j v_j,
    pass 2 (leaves to root):  U_j = I^A_j S_j,  D_j = S_jᵀ U_j,  u_j = τ_j − S_jᵀ p^A_j,
                              I^A_λ += I^A_j − U_j U_jᵀ / D_j,  p^A_λ += p^A_j + I^A_j c_j + U_j (u_j − U_jᵀ c_j) / D_j,
    pass 3 (root to leaves):  a'_j = a_λ + c_j,  θ̈_j = (u_j − U_jᵀ a'_j) / D_j,  a_j = a'_j + S_j θ̈_j,

with gravity g as a fictitious base acceleration a_0 = (0; −g) (as in Featherstone's ch. 5), I_j the body's spatial inertia
about the base origin (mass m, centre of mass c, inertia I_c about it: I (ω; v) = (I_c ω + c × p; p), p =
m (v + ω × c)), and τ_j the joint's generalised force (the loads of :mod:`kernels.systems.kane`).  A joint
measured from coordinate r turns by θ_j = q_j − q_r, so u̇_j = θ̈_j + u̇_r.  Cost per evaluation O(n) per
member, some 600 flops a joint, against Kane's O(n³) M(q) and its Cholesky factorisation, which the vector
field keeps for trees of fewer than ARTICULATED_JOINTS joints (there its SIMD lanes win).

Each member's arithmetic runs alone, in scalars and one small array of joint rows, lane after lane, so its
bits do not depend on the lanes beside it.  Trees with spherical or free joints, or closed into loops, keep
Kane's equations (:func:`kernels.systems.kane.kane_terms`).
"""

from __future__ import annotations

import numpy as np

from ..lanes import cholesky_solve_in_lanes, cross3, lane_function
from .kane import ACCELERATING_FORCE, joint_load, kane_terms, kane_work
from .loop_closures import closed_loop_accelerations, closure_header, closure_scratch
from .tree_kinematics import (AXIS, COM, INERTIA, MASS, ORIGIN, PRISMATIC, REVOLUTE, coordinate_rates_into,
                              joint_entries, joint_row, rotation_about, tree_header)

#: the fewest joints for which the vector field takes the articulated-body algorithm: Kane's sums run with
#: lanes innermost, as SIMD, and on smaller trees beat its scalar passes (rk4 on the cart chains, 2 cores:
#: issue 34 found Kane's 1.5× faster with 3 joints, the articulated-body algorithm 1.2× faster with 11 and 2× with
#: 21; issue 50 measured 6 joints (5 links) at 2.78×10⁵ member-steps/s by it against 2.32–2.51×10⁵ by Kane's sums,
#: and 5 joints even, 3.83 against 3.99×10⁵).  One value on every machine: a choice per machine would make a
#: store's bits depend on where it ran.
ARTICULATED_JOINTS = 6
#: lanes whose coefficients and state are copied together (one cache line of float64)
CHUNK = 8
#: rows of one joint in a member's local array: rotation R (9, body → base), frame origin (3), velocity v
#: (6), motion subspace S (6), velocity-product acceleration c (6), articulated inertia I^A (36, row-major,
#: symmetric), bias force p^A (6), U = I^A S (6), 1/D, τ and then u, acceleration a (6)
R, ORIGIN_ROW, VELOCITY, SUBSPACE, PRODUCT, ARTICULATED, BIAS, U_ROW, INVERSE_D, U_SCALAR, ACCELERATION = (
    0, 9, 12, 18, 24, 30, 66, 72, 78, 79, 80)
JOINT_STATE_ROWS = 86


@lane_function
def one_degree_tree(topology):
    """Whether every joint is revolute or prismatic and no loop is closed: the articulated-body path applies."""
    h, joints = tree_header(topology)
    for j in range(joints):
        if joint_entries(topology, h, j)[0] > PRISMATIC:
            return False
    return closure_header(topology)[1] == 0


@lane_function
def articulated_kinematics(x, n, coef, topology, t, b, local):
    """Pass 1 for lane b: each joint's rotation, frame origin, velocity, S, c, its load τ at time t (s; in the
    u row, which pass 2 turns into u), and its body's spatial inertia and bias force v ×* I v as the
    articulated ones to start from (base frame, about the base origin)."""
    h, joints = tree_header(topology)
    for j in range(joints):
        kind, parent, reference, first = joint_entries(topology, h, j)
        k = joint_row(j)
        row = local[j]
        theta, theta_dot = x[first, b], x[n + first, b]
        if reference >= 0:
            theta -= x[reference, b]
            theta_dot -= x[n + reference, b]
        row[U_SCALAR] = joint_load(coef, k, theta, theta_dot, t, b)
        e0, e1, e2 = coef[k + ORIGIN, b], coef[k + ORIGIN + 1, b], coef[k + ORIGIN + 2, b]
        a0, a1, a2 = coef[k + AXIS, b], coef[k + AXIS + 1, b], coef[k + AXIS + 2, b]
        if parent < 0:
            p = (1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0)
            o0, o1, o2 = e0, e1, e2
            pw0 = pw1 = pw2 = pv0 = pv1 = pv2 = 0.0
        else:
            up = local[parent]
            p = (up[R], up[R + 1], up[R + 2], up[R + 3], up[R + 4], up[R + 5], up[R + 6], up[R + 7], up[R + 8])
            o0 = up[ORIGIN_ROW] + p[0] * e0 + p[1] * e1 + p[2] * e2
            o1 = up[ORIGIN_ROW + 1] + p[3] * e0 + p[4] * e1 + p[5] * e2
            o2 = up[ORIGIN_ROW + 2] + p[6] * e0 + p[7] * e1 + p[8] * e2
            pw0, pw1, pw2 = up[VELOCITY], up[VELOCITY + 1], up[VELOCITY + 2]
            pv0, pv1, pv2 = up[VELOCITY + 3], up[VELOCITY + 4], up[VELOCITY + 5]
        z0 = p[0] * a0 + p[1] * a1 + p[2] * a2
        z1 = p[3] * a0 + p[4] * a1 + p[5] * a2
        z2 = p[6] * a0 + p[7] * a1 + p[8] * a2
        if kind == REVOLUTE:
            r = rotation_about(a0, a1, a2, np.cos(theta), np.sin(theta))
            for i in range(3):
                for c in range(3):
                    row[R + 3 * i + c] = p[3 * i] * r[c] + p[3 * i + 1] * r[3 + c] + p[3 * i + 2] * r[6 + c]
            s0, s1, s2 = z0, z1, z2
            s3, s4, s5 = cross3(o0, o1, o2, z0, z1, z2)
        else:
            for i in range(9):
                row[R + i] = p[i]
            o0, o1, o2 = o0 + z0 * theta, o1 + z1 * theta, o2 + z2 * theta
            s0 = s1 = s2 = 0.0
            s3, s4, s5 = z0, z1, z2
        row[ORIGIN_ROW], row[ORIGIN_ROW + 1], row[ORIGIN_ROW + 2] = o0, o1, o2
        row[SUBSPACE], row[SUBSPACE + 1], row[SUBSPACE + 2] = s0, s1, s2
        row[SUBSPACE + 3], row[SUBSPACE + 4], row[SUBSPACE + 5] = s3, s4, s5
        # joint velocity S θ̇, and c = v_λ × S θ̇ (the spatial cross product of motion vectors)
        j0, j1, j2, j3, j4, j5 = (s0 * theta_dot, s1 * theta_dot, s2 * theta_dot, s3 * theta_dot, s4 * theta_dot,
                                  s5 * theta_dot)
        row[PRODUCT], row[PRODUCT + 1], row[PRODUCT + 2] = cross3(pw0, pw1, pw2, j0, j1, j2)
        c3, c4, c5 = cross3(pw0, pw1, pw2, j3, j4, j5)
        d3, d4, d5 = cross3(pv0, pv1, pv2, j0, j1, j2)
        row[PRODUCT + 3], row[PRODUCT + 4], row[PRODUCT + 5] = c3 + d3, c4 + d4, c5 + d5
        w0, w1, w2, v0, v1, v2 = pw0 + j0, pw1 + j1, pw2 + j2, pv0 + j3, pv1 + j4, pv2 + j5
        row[VELOCITY], row[VELOCITY + 1], row[VELOCITY + 2] = w0, w1, w2
        row[VELOCITY + 3], row[VELOCITY + 4], row[VELOCITY + 5] = v0, v1, v2
        body_inertia(coef, k, row, o0, o1, o2, w0, w1, w2, v0, v1, v2, b)


@lane_function
def body_inertia(coef, k, row, o0, o1, o2, w0, w1, w2, v0, v1, v2, b):
    """row's I^A ← the body's spatial inertia about the base origin [[I_c + m [c]×[c]×ᵀ, m [c]×], [m [c]×ᵀ,
    m 1]] (c: its centre of mass, I_c = R I_body Rᵀ) and p^A ← v ×* I v (its velocity-product force), for the
    body of joint rows k with frame origin o moving at v = (ω; v_O)."""
    m = coef[k + MASS, b]
    g0, g1, g2 = coef[k + COM, b], coef[k + COM + 1, b], coef[k + COM + 2, b]
    c0 = o0 + row[R] * g0 + row[R + 1] * g1 + row[R + 2] * g2
    c1 = o1 + row[R + 3] * g0 + row[R + 4] * g1 + row[R + 5] * g2
    c2 = o2 + row[R + 6] * g0 + row[R + 7] * g1 + row[R + 8] * g2
    inertia = row[ARTICULATED:ARTICULATED + 36]
    # R I_body Rᵀ into the top-left block: R I_body first (into the top-right block, filled with m [c]×
    # below), then the upper triangle of its product with Rᵀ, mirrored
    for i in range(3):
        for c in range(3):
            total = 0.0
            for s in range(3):
                total += row[R + 3 * i + s] * coef[k + INERTIA + 3 * s + c, b]
            inertia[6 * i + 3 + c] = total
    for i in range(3):
        for c in range(i, 3):
            total = 0.0
            for s in range(3):
                total += inertia[6 * i + 3 + s] * row[R + 3 * c + s]
            inertia[6 * i + c] = total
            inertia[6 * c + i] = total
    # I v = (I_c ω + c × p; p) with p = m (v_O + ω × c), then v ×* I v = (ω × n + v_O × p; ω × p)
    t0, t1, t2 = cross3(w0, w1, w2, c0, c1, c2)
    p0, p1, p2 = m * (v0 + t0), m * (v1 + t1), m * (v2 + t2)
    l0, l1, l2 = cross3(c0, c1, c2, p0, p1, p2)
    n0 = inertia[0] * w0 + inertia[1] * w1 + inertia[2] * w2 + l0
    n1 = inertia[6] * w0 + inertia[7] * w1 + inertia[8] * w2 + l1
    n2 = inertia[12] * w0 + inertia[13] * w1 + inertia[14] * w2 + l2
    a0, a1, a2 = cross3(w0, w1, w2, n0, n1, n2)
    b0, b1, b2 = cross3(v0, v1, v2, p0, p1, p2)
    row[BIAS], row[BIAS + 1], row[BIAS + 2] = a0 + b0, a1 + b1, a2 + b2
    row[BIAS + 3], row[BIAS + 4], row[BIAS + 5] = cross3(w0, w1, w2, p0, p1, p2)
    # the parallel-axis term m [c]×[c]×ᵀ = m (|c|² 1 − c cᵀ), m [c]× and m 1 complete the inertia
    square = c0 * c0 + c1 * c1 + c2 * c2
    centre = (c0, c1, c2)
    for i in range(3):
        for c in range(3):
            inertia[6 * i + c] += m * ((square if i == c else 0.0) - centre[i] * centre[c])
            inertia[6 * (3 + i) + 3 + c] = m if i == c else 0.0
    mc0, mc1, mc2 = m * c0, m * c1, m * c2
    cross = (0.0, -mc2, mc1, mc2, 0.0, -mc0, -mc1, mc0, 0.0)  # m [c]×
    for i in range(3):
        for c in range(3):
            inertia[6 * i + 3 + c] = cross[3 * i + c]
            inertia[6 * (3 + i) + c] = cross[3 * c + i]


@lane_function
def articulated_inertias(topology, local):
    """Pass 2 of one lane, leaves to root: each joint's U, 1/D and u = τ − Sᵀ p^A, and its
    articulated inertia and bias force, less what the joint passes, added to its parent's."""
    h, joints = tree_header(topology)
    for j in range(joints - 1, -1, -1):
        kind, parent, reference, first = joint_entries(topology, h, j)
        row = local[j]
        inertia = row[ARTICULATED:ARTICULATED + 36]
        d = 0.0
        u = row[U_SCALAR]
        for i in range(6):
            total = 0.0
            for c in range(6):
                total += inertia[6 * i + c] * row[SUBSPACE + c]
            row[U_ROW + i] = total
            d += row[SUBSPACE + i] * total
            u -= row[SUBSPACE + i] * row[BIAS + i]
        inverse = 1.0 / d
        row[INVERSE_D], row[U_SCALAR] = inverse, u
        if parent < 0:
            continue
        up = local[parent]
        # U_j (u_j − U_jᵀ c_j) / D_j + I^A_j c_j: the bias the parent feels besides p^A_j
        along = u
        for i in range(6):
            along -= row[U_ROW + i] * row[PRODUCT + i]
        along *= inverse
        for i in range(6):
            total = row[BIAS + i] + row[U_ROW + i] * along
            for c in range(6):
                total += inertia[6 * i + c] * row[PRODUCT + c]
            up[BIAS + i] += total
        for i in range(6):  # I^A − U Uᵀ / D is symmetric: its upper triangle, mirrored
            scaled = row[U_ROW + i] * inverse
            for c in range(i, 6):
                passed = inertia[6 * i + c] - scaled * row[U_ROW + c]
                up[ARTICULATED + 6 * i + c] += passed
                if c != i:
                    up[ARTICULATED + 6 * c + i] += passed


@lane_function
def articulated_accelerations(n, coef, topology, b, local, out):
    """Pass 3 for lane b, root to leaves: θ̈_j and the bodies' accelerations (gravity as the base's
    acceleration −g), then out[first, b] ← u̇ = θ̈ + u̇ of the coordinate it is measured from."""
    h, joints = tree_header(topology)
    for j in range(joints):
        kind, parent, reference, first = joint_entries(topology, h, j)
        row = local[j]
        if parent < 0:
            base = (0.0, 0.0, 0.0, -coef[0, b], -coef[1, b], -coef[2, b])
        else:
            up = local[parent]
            base = (up[ACCELERATION], up[ACCELERATION + 1], up[ACCELERATION + 2], up[ACCELERATION + 3],
                    up[ACCELERATION + 4], up[ACCELERATION + 5])
        theta_ddot = row[U_SCALAR]
        for i in range(6):
            row[ACCELERATION + i] = base[i] + row[PRODUCT + i]
            theta_ddot -= row[U_ROW + i] * row[ACCELERATION + i]
        theta_ddot *= row[INVERSE_D]
        for i in range(6):
            row[ACCELERATION + i] += row[SUBSPACE + i] * theta_ddot
        out[first, b] = theta_ddot + (out[reference, b] if reference >= 0 else 0.0)


@lane_function
def articulated_body_into(x, n, coef, topology, t, work, dx):
    """dx[n …] ← u̇ of a tree of revolute and prismatic joints at time t (s) by the articulated-body
    algorithm, one lane after another (``work``: articulated_work's).  Each CHUNK of lanes' coefficients and
    state are first copied lane by lane into small (CHUNK, rows) arrays, and the passes see one lane of them
    as a (rows, 1) view: read a lane at a time from the block's (rows, lanes) arrays, whose rows lie 256
    lanes apart and so fall into the same few cache sets, every coefficient would come from L2."""
    local, coefficients, state, accelerations = work
    lanes = x.shape[1]
    rows = joint_row(tree_header(topology)[1])
    for start in range(0, lanes, CHUNK):
        width = min(CHUNK, lanes - start)
        for r in range(rows):
            for b in range(width):
                coefficients[b, r] = coef[r, start + b]
        for r in range(2 * n):
            for b in range(width):
                state[b, r] = x[r, start + b]
        for b in range(width):
            lane_coef, lane_state, lane_out = coefficients[b:b + 1].T, state[b:b + 1].T, accelerations[b:b + 1].T
            articulated_kinematics(lane_state, n, lane_coef, topology, t, 0, local)
            articulated_inertias(topology, local)
            articulated_accelerations(n, lane_coef, topology, 0, local, lane_out)
        for r in range(n):
            for b in range(width):
                dx[n + r, start + b] = accelerations[b, r]


@lane_function
def articulated_work(n, lanes):
    """The articulated-body algorithm's work for n coordinates and ``lanes`` lanes: one member's joint rows (n,
    JOINT_STATE_ROWS), and a CHUNK of lanes' (all of them if fewer) coefficients (of a tree without loops), state
    and u̇ (CHUNK, rows).  Shared by the lanes, one after another: a GPU gives each thread its own."""
    chunk = min(CHUNK, lanes)
    return (np.empty((n, JOINT_STATE_ROWS)), np.empty((chunk, joint_row(n))), np.empty((chunk, 2 * n)),
            np.empty((chunk, n)))


@lane_function
def tree_field_work(rows, n, lanes):
    """A tree's work (the system's ``vector_field_work``), allocated once per block by the drivers and methods:
    articulated_work, Kane's work (float64) and the closures' scratch, for trees that need them."""
    return articulated_work(n, lanes), kane_work(n, lanes, 0.0), closure_scratch(n, lanes)


# ------------------------------------------------------------------------ lane template (bound per system)

def tree_vector_field(x, n, coef, topology, t, dx, work):
    """dx = (B(q) u, u̇) at time t (s): u̇ by the articulated-body algorithm on trees of at least
    ARTICULATED_JOINTS revolute and prismatic joints, else by Kane's equations (34), M u̇ = f − h,
    Cholesky-factorised (with loop closures:
    the index-1 system of :func:`kernels.systems.loop_closures.closed_loop_accelerations`); ``work``:
    tree_field_work's."""
    coordinate_rates_into(x, n, topology, dx)
    if one_degree_tree(topology) and tree_header(topology)[1] >= ARTICULATED_JOINTS:
        articulated_body_into(x, n, coef, topology, t, work[0], dx)
        return
    kane = work[1]
    kane_terms(x, n, coef, topology, t, kane, ACCELERATING_FORCE)
    rhs = kane[6]
    start, closures, rows = closure_header(topology)
    if closures == 0:
        cholesky_solve_in_lanes(kane[5], rhs)
    else:
        closed_loop_accelerations(x, n, coef, topology, work, rows)
    for a in range(n):
        for b in range(x.shape[1]):
            dx[n + a, b] = rhs[a, b]
