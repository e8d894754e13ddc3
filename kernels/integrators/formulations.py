"""The four global formulations of Lee–Leok–McClamroch ("Global formulations of Lagrangian and
Hamiltonian mechanics on two-spheres", digest_000 §3) for the Runge–Kutta methods, in lane layout.

A Runge–Kutta step integrates the pair (q, v), v the formulation's velocity-like variable:
- ``q_qdot``: v = q̇, Euler–Lagrange eq. (13): the 3n×3n system [m_ii I; m_ij P_i] q̈ = r (not symmetric;
  solved with partial pivoting);
- ``q_omega``: v = ω, eq. (19) (:func:`kernels.integrators.runge_kutta.equations_full`, the default);
- ``q_mu``: v = μ, μ_i = P_i ∂L/∂q̇_i (eq. (20)), Hamilton's eqs. (25)–(27) with m^I = (P B P + I − P)⁻¹,
  B = [m_jk I₃], P = blockdiag(P_i) (digest §3.3);
- ``q_pi``: v = π = A(q) ω (eq. (33)), Hamilton's eqs. (36)–(37) with m^I = A(q)⁻¹.

For a kinetic energy T = ½ Σ m_jk(q) q̇_j·q̇_k (eq. (12)) with constant m (``VARIABLE_INERTIA`` false: the
system's M) or configuration-dependent scalars m_jk(q) (the system's ``configuration_inertia`` and its
gradient ∂m_jk/∂q_i), and forces given by the system as moments g_i = q_i × f_i (the tangential force is
then f_i = g_i × q_i).  Every step starts and ends in the stored (q, ω): ``velocity_from_stored`` and
``velocity_to_stored`` convert at the step's boundary (ω_i = q_i × q̇_i / ‖q_i‖², π = A ω, μ_i = P_i Σ_j m_ij
q̇_j; digest §3.5), so segments, chunks and restarts see the same bits whatever the formulation; the
conversion drops the part of v normal to q_i, which (q, ω) cannot hold and only truncation creates.
Free names bound at specialisation: ``system_gradient``, ``system_force``, ``system_inertia``,
``system_inertia_gradient``, ``FORCED``, ``VARIABLE_INERTIA``.
"""

import numpy as np

from ..lanes import add_cross, add_metric_gradient, add_scaled, kinetic_energy_full, lane_function, solve_in_lanes, solve_pivoted_in_lanes, velocities_into
from .vi import assemble_velocity_matrix

FORMULATIONS = ("q_qdot", "q_omega", "q_mu", "q_pi")
DEFAULT_FORMULATION = "q_omega"


def formulation_allocate(n, lanes):
    """Work: ∂V/∂q, a 3n×3n matrix and a 3n right side, the forces' moments g, m(q) (n, n), ∂m_jk/∂q_i
    (n, n, n, 3; empty for constant m), ω, q̇ and one more (n, 3) vector."""
    variable = n if VARIABLE_INERTIA else 0  # noqa: F821 (bound at specialisation)
    return (np.empty((n, 3, lanes)), np.empty((3 * n, 3 * n, lanes)), np.empty((3 * n, lanes)),
            np.zeros((n if FORCED else 0, 3, lanes)), np.empty((n, n, lanes)),  # noqa: F821
            np.zeros((variable, variable, variable, 3, lanes)), np.empty((n, 3, lanes)), np.empty((n, 3, lanes)),
            np.empty((n, 3, lanes)))


def inertia_now_template(q, mass_full, coef, topology, m, dm):
    """m ← m_jk(q) (kg·m²) and, for configuration-dependent inertia, dm ← ∂m_jk/∂q_i."""
    if VARIABLE_INERTIA:  # noqa: F821
        system_inertia(q, coef, topology, m)  # noqa: F821
        system_inertia_gradient(q, coef, topology, dm)  # noqa: F821
    else:
        m[:] = mass_full


def kinetic_energy_configuration_template(q, omega, mass_diag, mass_full, coef, topology, out):
    """T = ½ Σ_jk m_jk(q) q̇_j·q̇_k (J), eq. (12), for configuration-dependent inertia."""
    m = np.empty((q.shape[0], q.shape[0], q.shape[2]))
    system_inertia(q, coef, topology, m)  # noqa: F821
    kinetic_energy_full(q, omega, mass_diag, m, coef, topology, out)


@lane_function
def add_configuration_force(qdot, dm, out):
    """out_i += F_i(q, q̇) = Σ_j ṁ_ij q̇_j − ½ Σ_jk (q̇_j·q̇_k) ∂m_jk/∂q_i, ṁ_ij = Σ_k ∂m_ij/∂q_k·q̇_k (eq. (13))."""
    n = qdot.shape[0]
    for i in range(n):
        for j in range(n):
            for b in range(qdot.shape[2]):
                rate = 0.0
                for k in range(n):
                    rate += (dm[i, j, k, 0, b] * qdot[k, 0, b] + dm[i, j, k, 1, b] * qdot[k, 1, b]
                             + dm[i, j, k, 2, b] * qdot[k, 2, b])
                for c in range(3):
                    out[i, c, b] += rate * qdot[j, c, b]
    add_metric_gradient(dm, qdot, -0.5, out)


@lane_function
def angular_from_tangent(q, qdot, out):
    """ω_i = q_i × q̇_i / ‖q_i‖² (1/s): the ω with ω_i × q_i = P_i q̇_i."""
    for i in range(q.shape[0]):
        for b in range(q.shape[2]):
            scale = 1.0 / (q[i, 0, b] ** 2 + q[i, 1, b] ** 2 + q[i, 2, b] ** 2)
            w0 = q[i, 1, b] * qdot[i, 2, b] - q[i, 2, b] * qdot[i, 1, b]
            w1 = q[i, 2, b] * qdot[i, 0, b] - q[i, 0, b] * qdot[i, 2, b]
            w2 = q[i, 0, b] * qdot[i, 1, b] - q[i, 1, b] * qdot[i, 0, b]
            out[i, 0, b] = scale * w0
            out[i, 1, b] = scale * w1
            out[i, 2, b] = scale * w2


@lane_function
def tangential_forces(q, moments, out):
    """f_i = g_i × q_i (N·m per unit length of q): the force tangent to S² whose moment q_i × f_i is g_i."""
    for i in range(q.shape[0]):
        for b in range(q.shape[2]):
            out[i, 0, b] = moments[i, 1, b] * q[i, 2, b] - moments[i, 2, b] * q[i, 1, b]
            out[i, 1, b] = moments[i, 2, b] * q[i, 0, b] - moments[i, 0, b] * q[i, 2, b]
            out[i, 2, b] = moments[i, 0, b] * q[i, 1, b] - moments[i, 1, b] * q[i, 0, b]


@lane_function
def project_rows(q, x, i, b):
    """P_i x_i = x_i − (q_i·x_i) q_i for lane b."""
    along = q[i, 0, b] * x[i, 0, b] + q[i, 1, b] * x[i, 1, b] + q[i, 2, b] * x[i, 2, b]
    return x[i, 0, b] - along * q[i, 0, b], x[i, 1, b] - along * q[i, 1, b], x[i, 2, b] - along * q[i, 2, b]


@lane_function
def assemble_momentum_inverse_matrix(q, m, a):
    """K = P B P + I − P with B = [m_jk I₃]: blocks m_ij P_i P_j + δ_ij q_i q_iᵀ (symmetric positive
    definite; K⁻¹ is digest §3.3's m^I)."""
    n = q.shape[0]
    for i in range(n):
        for j in range(n):
            for r in range(3):
                for c in range(3):
                    for b in range(q.shape[2]):
                        dot = q[i, 0, b] * q[j, 0, b] + q[i, 1, b] * q[j, 1, b] + q[i, 2, b] * q[j, 2, b]
                        # (I − q_i q_iᵀ)(I − q_j q_jᵀ) = I − q_i q_iᵀ − q_j q_jᵀ + (q_i·q_j) q_i q_jᵀ
                        pp = ((1.0 if r == c else 0.0) - q[i, r, b] * q[i, c, b] - q[j, r, b] * q[j, c, b]
                              + dot * q[i, r, b] * q[j, c, b])
                        value = m[i, j, b] * pp
                        if i == j:
                            value += q[i, r, b] * q[i, c, b]
                        a[3 * i + r, 3 * j + c, b] = value


@lane_function
def vector_to_rows(x, out):
    """A 3n right side (3n, L) as rows (n, 3, L)."""
    for i in range(out.shape[0]):
        for k in range(3):
            for b in range(out.shape[2]):
                out[i, k, b] = x[3 * i + k, b]


@lane_function
def rows_to_vector(x, out):
    for i in range(x.shape[0]):
        for k in range(3):
            for b in range(x.shape[2]):
                out[3 * i + k, b] = x[i, k, b]


@lane_function
def add_mass_times(m, x, out, scale):
    """out_i += scale · Σ_j m_ij x_j (rows (n, 3, L))."""
    n = x.shape[0]
    for i in range(n):
        for j in range(n):
            for k in range(3):
                for b in range(x.shape[2]):
                    out[i, k, b] += scale * m[i, j, b] * x[j, k, b]


def momentum_velocity_template(q, mu, m, matrix, rhs, y, qdot):
    """y = m^I μ = K⁻¹ μ and q̇_i = P_i y_i (eq. (25))."""
    assemble_momentum_inverse_matrix(q, m, matrix)
    rows_to_vector(mu, rhs)
    solve_in_lanes(matrix, rhs)
    vector_to_rows(rhs, y)
    for i in range(q.shape[0]):
        for b in range(q.shape[2]):
            qdot[i, 0, b], qdot[i, 1, b], qdot[i, 2, b] = project_rows(q, y, i, b)


def pi_angular_template(q, pi, m, matrix, rhs, omega):
    """ω = A(q)⁻¹ π (eq. (34))."""
    assemble_velocity_matrix(q, m, matrix)
    rows_to_vector(pi, rhs)
    solve_in_lanes(matrix, rhs)
    vector_to_rows(rhs, omega)


# ---- conversions at the step's boundary: stored (q, ω) ↔ the formulation's (q, v) ----

def same_velocity(q, x, mass_full, coef, topology, out, work):
    """``q_omega``: v = ω both ways (its kernels step ω itself and never call this)."""
    out[:] = x


def qdot_from_stored(q, omega, mass_full, coef, topology, v, work):
    """q̇_i = ω_i × q_i (eq. (3))."""
    velocities_into(q, omega, v)


def qdot_to_stored(q, v, mass_full, coef, topology, omega, work):
    angular_from_tangent(q, v, omega)


def mu_from_stored(q, omega, mass_full, coef, topology, v, work):
    """μ_i = P_i Σ_j m_ij q̇_j (eq. (20) for the quadratic Lagrangian (12))."""
    _, _, _, _, m, dm, _, qdot, y = work
    inertia_now(q, mass_full, coef, topology, m, dm)  # noqa: F821 (bound at specialisation)
    velocities_into(q, omega, qdot)
    y[:] = 0.0
    add_mass_times(m, qdot, y, 1.0)
    for i in range(q.shape[0]):
        for b in range(q.shape[2]):
            v[i, 0, b], v[i, 1, b], v[i, 2, b] = project_rows(q, y, i, b)


def mu_to_stored(q, v, mass_full, coef, topology, omega, work):
    _, matrix, rhs, _, m, dm, _, qdot, y = work
    inertia_now(q, mass_full, coef, topology, m, dm)  # noqa: F821
    momentum_velocity(q, v, m, matrix, rhs, y, qdot)  # noqa: F821
    angular_from_tangent(q, qdot, omega)


def pi_from_stored(q, omega, mass_full, coef, topology, v, work):
    """π = A(q) ω (eq. (33))."""
    _, matrix, rhs, _, m, dm, _, _, _ = work
    inertia_now(q, mass_full, coef, topology, m, dm)  # noqa: F821
    assemble_velocity_matrix(q, m, matrix)
    n = q.shape[0]
    for r in range(3 * n):
        for b in range(q.shape[2]):
            total = 0.0
            for j in range(n):
                for c in range(3):
                    total += matrix[r, 3 * j + c, b] * omega[j, c, b]
            rhs[r, b] = total
    vector_to_rows(rhs, v)


def pi_to_stored(q, v, mass_full, coef, topology, omega, work):
    _, matrix, rhs, _, m, dm, _, _, _ = work
    inertia_now(q, mass_full, coef, topology, m, dm)  # noqa: F821
    pi_angular(q, v, m, matrix, rhs, omega)  # noqa: F821


# ---- equations of motion of each formulation: (dq, dv) at time t (s) ----

def equations_q_qdot(t, q, qdot, mass_diag, mass_full, coef, topology, dq, dqdot, work):
    """Eq. (13): m_ii q̈_i + P_i Σ_{j≠i} m_ij q̈_j = −m_ii ‖q̇_i‖² q_i − P_i (F_i + ∂V/∂q_i − f_i)."""
    grad, matrix, rhs, moments, m, dm, omega, _, forces = work
    inertia_now(q, mass_full, coef, topology, m, dm)  # noqa: F821
    system_gradient(q, coef, topology, grad)  # noqa: F821
    if VARIABLE_INERTIA:  # noqa: F821
        add_configuration_force(qdot, dm, grad)
    if FORCED:  # noqa: F821
        angular_from_tangent(q, qdot, omega)
        system_force(t, q, omega, coef, topology, moments)  # noqa: F821
        tangential_forces(q, moments, forces)
        add_scaled(grad, forces, -1.0)
    n = q.shape[0]
    for i in range(n):
        for j in range(n):
            for r in range(3):
                for c in range(3):
                    for b in range(q.shape[2]):
                        identity = 1.0 if r == c else 0.0
                        matrix[3 * i + r, 3 * j + c, b] = (m[i, i, b] * identity if i == j
                                                           else m[i, j, b] * (identity - q[i, r, b] * q[i, c, b]))
        for b in range(q.shape[2]):
            speed2 = qdot[i, 0, b] ** 2 + qdot[i, 1, b] ** 2 + qdot[i, 2, b] ** 2
            p0, p1, p2 = project_rows(q, grad, i, b)
            rhs[3 * i, b] = -m[i, i, b] * speed2 * q[i, 0, b] - p0
            rhs[3 * i + 1, b] = -m[i, i, b] * speed2 * q[i, 1, b] - p1
            rhs[3 * i + 2, b] = -m[i, i, b] * speed2 * q[i, 2, b] - p2
    solve_pivoted_in_lanes(matrix, rhs)
    dq[:] = qdot
    vector_to_rows(rhs, dqdot)


def equations_q_mu(t, q, mu, mass_diag, mass_full, coef, topology, dq, dmu, work):
    """Eqs. (25)–(27): q̇_i = P_i y_i, μ̇_i = y_i × (μ_i × q_i) − P_i ½ ∂(μᵀ m^I μ)/∂q_i − P_i (∂V/∂q_i − f_i),
    y = m^I μ.  With K = P B P + I − P, ½ ∂(μᵀ K⁻¹ μ)/∂q_i = −½ yᵀ (∂K/∂q_i) y
    = (q_i·w_i) y_i + (q_i·y_i)(w_i − y_i) − ½ Σ_jk (z_j·z_k) ∂m_jk/∂q_i, z = P y, w = B z."""
    grad, matrix, rhs, moments, m, dm, omega, y, w = work
    inertia_now(q, mass_full, coef, topology, m, dm)  # noqa: F821
    momentum_velocity(q, mu, m, matrix, rhs, y, dq)  # noqa: F821
    system_gradient(q, coef, topology, grad)  # noqa: F821
    if VARIABLE_INERTIA:  # noqa: F821
        add_metric_gradient(dm, dq, -0.5, grad)  # z = P y = q̇
    if FORCED:  # noqa: F821
        angular_from_tangent(q, dq, omega)
        system_force(t, q, omega, coef, topology, moments)  # noqa: F821
        add_cross(q, moments, 1.0, grad)  # −f_i = q_i × g_i; ω stays the stage's, for the forces' power
    w[:] = 0.0
    add_mass_times(m, dq, w, 1.0)
    for i in range(q.shape[0]):
        for b in range(q.shape[2]):
            qw = q[i, 0, b] * w[i, 0, b] + q[i, 1, b] * w[i, 1, b] + q[i, 2, b] * w[i, 2, b]
            qy = q[i, 0, b] * y[i, 0, b] + q[i, 1, b] * y[i, 1, b] + q[i, 2, b] * y[i, 2, b]
            for k in range(3):
                grad[i, k, b] += qw * y[i, k, b] + qy * (w[i, k, b] - y[i, k, b])
            p0, p1, p2 = project_rows(q, grad, i, b)
            # μ_i × q_i, then y_i × (μ_i × q_i)
            c0 = mu[i, 1, b] * q[i, 2, b] - mu[i, 2, b] * q[i, 1, b]
            c1 = mu[i, 2, b] * q[i, 0, b] - mu[i, 0, b] * q[i, 2, b]
            c2 = mu[i, 0, b] * q[i, 1, b] - mu[i, 1, b] * q[i, 0, b]
            dmu[i, 0, b] = y[i, 1, b] * c2 - y[i, 2, b] * c1 - p0
            dmu[i, 1, b] = y[i, 2, b] * c0 - y[i, 0, b] * c2 - p1
            dmu[i, 2, b] = y[i, 0, b] * c1 - y[i, 1, b] * c0 - p2


def equations_q_pi(t, q, pi, mass_diag, mass_full, coef, topology, dq, dpi, work):
    """Eqs. (36)–(37): q̇_i = ω_i × q_i, π̇_i = −q_i × (∂(½πᵀA⁻¹π)/∂q_i + ∂V/∂q_i) + ω_i × π_i + g_i, ω = A⁻¹π,
    with ∂(½πᵀA⁻¹π)/∂q_i = −½ ∂(ωᵀAω)/∂q_i|_ω = −Σ_{k≠i} m_ik ω_i × (q_k × ω_k) − ½ Σ_jk X_jk ∂m_jk/∂q_i,
    X_jj = ‖ω_j‖², X_jk = (q_j × ω_j)·(q_k × ω_k) (digest §3.4); the gravity term is ∂V/∂q_i, the
    digest's correction of the printed (42)."""
    grad, matrix, rhs, moments, m, dm, omega, crossed, _ = work
    inertia_now(q, mass_full, coef, topology, m, dm)  # noqa: F821
    pi_angular(q, pi, m, matrix, rhs, omega)  # noqa: F821
    velocities_into(q, omega, dq)
    system_gradient(q, coef, topology, grad)  # noqa: F821
    if FORCED:  # noqa: F821
        system_force(t, q, omega, coef, topology, moments)  # noqa: F821
    n = q.shape[0]
    for k in range(n):
        for b in range(q.shape[2]):  # q_k × ω_k = −q̇_k
            crossed[k, 0, b] = -dq[k, 0, b]
            crossed[k, 1, b] = -dq[k, 1, b]
            crossed[k, 2, b] = -dq[k, 2, b]
    if VARIABLE_INERTIA:  # noqa: F821
        add_metric_gradient(dm, crossed, -0.5, grad)
        for j in range(n):  # the diagonal X_jj is ‖ω_j‖², not ‖q_j × ω_j‖²
            for b in range(q.shape[2]):
                excess = (omega[j, 0, b] ** 2 + omega[j, 1, b] ** 2 + omega[j, 2, b] ** 2
                          - crossed[j, 0, b] ** 2 - crossed[j, 1, b] ** 2 - crossed[j, 2, b] ** 2)
                for i in range(n):
                    for c in range(3):
                        grad[i, c, b] -= 0.5 * excess * dm[j, j, i, c, b]
    for i in range(n):
        for k in range(n):
            if k != i:
                for b in range(q.shape[2]):
                    s = m[i, k, b]
                    grad[i, 0, b] -= s * (omega[i, 1, b] * crossed[k, 2, b] - omega[i, 2, b] * crossed[k, 1, b])
                    grad[i, 1, b] -= s * (omega[i, 2, b] * crossed[k, 0, b] - omega[i, 0, b] * crossed[k, 2, b])
                    grad[i, 2, b] -= s * (omega[i, 0, b] * crossed[k, 1, b] - omega[i, 1, b] * crossed[k, 0, b])
        for b in range(q.shape[2]):
            g0 = moments[i, 0, b] if FORCED else 0.0  # noqa: F821
            g1 = moments[i, 1, b] if FORCED else 0.0  # noqa: F821
            g2 = moments[i, 2, b] if FORCED else 0.0  # noqa: F821
            dpi[i, 0, b] = (-(q[i, 1, b] * grad[i, 2, b] - q[i, 2, b] * grad[i, 1, b])
                            + omega[i, 1, b] * pi[i, 2, b] - omega[i, 2, b] * pi[i, 1, b] + g0)
            dpi[i, 1, b] = (-(q[i, 2, b] * grad[i, 0, b] - q[i, 0, b] * grad[i, 2, b])
                            + omega[i, 2, b] * pi[i, 0, b] - omega[i, 0, b] * pi[i, 2, b] + g1)
            dpi[i, 2, b] = (-(q[i, 0, b] * grad[i, 1, b] - q[i, 1, b] * grad[i, 0, b])
                            + omega[i, 0, b] * pi[i, 1, b] - omega[i, 1, b] * pi[i, 0, b] + g2)
