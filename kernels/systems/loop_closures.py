"""Loop closures of a tree (Pfaffian constraints): a point of one body held on a point of another (or of the
ground) along up to three base-frame directions, numerically, in lanes (members innermost).  Their rows
Φ, A = ∂Φ/∂q, A u and Ȧ u from the tree's kinematics (:mod:`kernels.systems.tree_kinematics`), the
projection back onto them after every step, the index-1 accelerations [M Aᵀ; A 0] [u̇; λ] = [f − h; −Ȧ u]
with Kane's M and f − h (:mod:`kernels.systems.kane`), and the generalised space's diagnostics of a tree.
"""

from __future__ import annotations

import numpy as np

from ..lanes import cross3, lane_function, solve_pivoted_in_lanes
from ..spaces.generalised import quaternion_error_lanes
from .tree_kinematics import (FREE, GRAVITY_ROWS, JOINT_ENTRIES, JOINT_ROWS, PRISMATIC, joint_entries, speed_count,
                              tree_header, tree_kinematics)

#: coefficient rows of a loop closure: its two points (each in its body's frame, m) and up to three
#: base-frame directions along which they coincide
CLOSURE_ROWS = 15
#: a loop closure is kept to within this (m; and its rate, m/s) by at most CLOSURE_ITERATIONS Gauss–Newton
#: steps after every step
CLOSURE_TOLERANCE, CLOSURE_ITERATIONS = 1e-12, 10


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
def closure_scratch(n, lanes):
    """The closures' scratch in a tree's work (:func:`kernels.systems.articulated.tree_field_work`), for at most
    n closure rows (``_check`` of :mod:`kernels.systems.multibody`): closure_work's three arrays, a flag per lane
    (L), and the index-1 system (2n, 2n, L) with its right side (2n, L)."""
    return closure_work(n, lanes, n) + (np.zeros(lanes), np.zeros((2 * n, 2 * n, lanes)), np.zeros((2 * n, lanes)))


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
def closure_state(x, n, coef, topology, rows, work):
    """Kinematics and closure terms at x (see closure_terms) in a tree's ``work`` (tree_field_work's): (jacobian
    (rows, n, L), [Φ, A u, Ȧ u] (3, rows, L), a (rows, rows, L) matrix)."""
    joint, rotation, frames, axes = work[1][:4]
    scratch = work[2]
    jacobian, terms, gram = scratch[0][:rows], scratch[1][:, :rows], scratch[2][:rows, :rows]
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
def kane_constrain(x, n, coef, topology, work, moved):
    """Put each lane's (q, u) back on its loop closures: Gauss–Newton steps q ← q − Aᵀ(A Aᵀ)⁻¹ Φ(q) (the least
    change of q, u = q̇ on trees of revolute and prismatic joints) while max |Φ| > CLOSURE_TOLERANCE (m), at
    most CLOSURE_ITERATIONS (a lane still off then gets NaN: status NON_FINITE), then u ← u − Aᵀ(A Aᵀ)⁻¹ A u
    if max |A u| > CLOSURE_TOLERANCE (m/s).  A lane already on them is left bit for bit (so a resumed segment
    starts where the last one ended); moved[b] = 1 for each lane changed.  ``work``: tree_field_work's."""
    start, closures, rows = closure_header(topology)
    if closures == 0:
        return
    lanes = x.shape[1]
    off = work[2][3]
    for iteration in range(CLOSURE_ITERATIONS + 1):
        jacobian, terms, gram = closure_state(x, n, coef, topology, rows, work)
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
    work[1][5], work[1][6]; index-1 form of the closures, whose drift kane_constrain removes after each step), by
    pivoted elimination per lane (``work``: tree_field_work's)."""
    lanes = x.shape[1]
    kane, scratch = work[1], work[2]
    rotation, frames, axes, mass, rhs = kane[1], kane[2], kane[3], kane[5], kane[6]
    jacobian, terms = scratch[0][:rows], scratch[1][:, :rows]
    closure_terms(x, n, coef, topology, rotation, frames, axes, jacobian, terms[0], terms[1], terms[2])
    size = n + rows
    system, right = scratch[4][:size, :size], scratch[5][:size]
    for r in range(rows):  # the multipliers' block, which the elimination of the last call overwrote
        for s in range(rows):
            for b in range(lanes):
                system[n + r, n + s, b] = 0.0
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
def tree_diagnostics(x, n, coef, topology, work, out):
    """The generalised space's diagnostics of a tree (see :mod:`kernels.spaces.generalised`): quaternion_error,
    and of its loop closures constraint_error = max |Φ| (m) and constraint_rate_error = max |A u| (m/s)."""
    quaternion_error_lanes(x, n, coef, topology, work, out)
    start, closures, rows = closure_header(topology)
    lanes = x.shape[1]
    for b in range(lanes):
        out[1, b] = 0.0
        out[2, b] = 0.0
    if closures == 0:
        return
    terms = closure_state(x, n, coef, topology, rows, work)[1]
    for b in range(lanes):
        out[1, b] = largest_row(terms[0], b)
        out[2, b] = largest_row(terms[1], b)

