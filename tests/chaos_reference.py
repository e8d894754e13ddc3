"""An independent reference for the Lyapunov spectrum of Example 1 (the double spherical pendulum of Lee,
Leok & McClamroch; /work/shared/reference/digest_001_examples.md, §A "Continuous equations" (7), (9),
(10) and §B "Example 1" (31)–(32)), computed with ``scipy.integrate.solve_ivp`` (DOP853) on equations
derived here with sympy from the Lagrangian, without importing or copying armillary's kernels
(kernels/systems/spherical_chain.py is only read for its conventions; armillary is imported only by the
hand-run self-test at the bottom, to read the "paper" preset and to compare with its Benettin λ).

The chain (n links; n = 2 is Example 1).  q_i ∈ S² points from joint i to joint i + 1, link i has length
l_i and a point mass m_i at its end, so with the pivot at the origin the masses sit at
x_i = Σ_{k≤i} l_k q_k; e is the unit direction of gravity (the digest's e_3 = [0, 0, 1] "is the
direction of gravity", q = e hangs down).  In ambient coordinates q ∈ (R³)ⁿ:

    L = T − V,   T = ½ Σ_i m_i |ẋ_i|² = ½ Σ_{ij} M_ij q̇_i·q̇_j,   V = −g Σ_i m_i e·x_i,

and sympy reads off M_ij = (Σ_{k≥max(i,j)} m_k) l_i l_j (the digest's M_11 = (m_1+m_2)l_1²,
M_12 = m_2 l_1 l_2, M_22 = m_2 l_2²) and ∂V/∂q_i = −(Σ_{k≥i} m_k) g l_i e (the digest's ∇V of Example 1).
The constraints |q_i|² = 1 give the constrained Euler–Lagrange equations

    Σ_j M_ij q̈_j + ∂V/∂q_i = μ_i q_i     (μ_i the multipliers),

and with q̇_i = ω_i × q_i, ω_i·q_i = 0 (10), q̈_i = ω̇_i × q_i + ω_i × (ω_i × q_i).  Crossing with q_i
removes μ_i, and the hidden constraint d/dt(q_i·ω_i) = q_i·ω̇_i = 0 fixes the component of ω̇_i along
q_i that the cross product removes too:

    r_i(q, ω, ω̇) ≡ q_i × (Σ_j M_ij q̈_j + ∂V/∂q_i) + M_ii (q_i·ω̇_i) q_i = 0.

On T(S²)ⁿ this is the digest's (9), M_ii ω̇_i = Σ_{j≠i}[M_ij q_i×(q_j×ω̇_j) + M_ij(ω_j·ω_j) q_i×q_j]
− q_i×∂V/∂q_i, i.e. (31)–(32) for n = 2: r is linear in ω̇, r = A(q) ω̇ − b(q, ω), and on T(S²)ⁿ
A = ∂r/∂ω̇ is the block matrix of (32) (blocks M_ii I₃ and −M_ij q̂_i q̂_j) and b its right-hand side
(the self-test checks both against (32) written out by hand).  The vector field F(x) on
x = (q_1..q_n, ω_1..ω_n) ∈ R^{6n} is q̇_i = ω_i × q_i (10) and ω̇ = A⁻¹b.  In this ambient
extension |q_i| and q_i·ω_i are exact first integrals (r_i·q_i = M_ii |q_i|² q_i·ω̇_i), so T(S²)ⁿ is
invariant.  Its Jacobian is DF = [∂(ω×q)/∂x; −A⁻¹ ∂r/∂x |_{ω̇ = ω̇(x)}] (implicit differentiation of
r(x, ω̇(x)) = 0), ∂r/∂x by sympy; everything is lambdified to numpy once per n (cached).

What is computed.  ``scipy_lyapunov_spectrum`` integrates x together with ``count`` tangent vectors
Y' = DF(x) Y (12 + 12·count equations for n = 2) with DOP853 (rtol, atol), from ``count`` orthonormal
vectors of the 4n-dimensional tangent space of T(S²)ⁿ at x_0, i.e. δx = (δq, δω) ∈ R^{6n} with

    q_i·δq_i = 0   and   q_i·δω_i + ω_i·δq_i = 0

(the linearised invariants above; the exact tangent flow keeps them, so the 2n normal directions,
whose exponents are not the system's, do not enter).  Every ``renormalise_dt`` seconds (and at t_end) Y
is projected orthogonally onto that tangent space (it has left it only by the integration error, ~1e-15
per interval, but QR would amplify that leak in the contracting columns: without the projection |C Y|
reached 4e-7 by 200 s with count = 8) and re-orthonormalised by numpy's QR in the Euclidean metric of
the ambient R^{6n} (the metric of armillary's Benettin shadows: ‖(q_s − q, ω_s − ω)‖, one unit of q and
one rad/s weighing the same),
S_j += ln|R_jj|, and λ_j = S_j / t_end (1/s), descending (Benettin, Galgani, Giorgilli & Strelcyn 1980;
the QR variant of Shimada & Nagashima 1979).  These are the finite-time exponents of one member: they
converge like O(1/t), and for a Hamiltonian flow come in pairs λ_i + λ_{4n+1−i} → 0 with Σλ → 0.  At
finite t neither is exact in this metric: it is not compatible with the symplectic form (δp ~ M δω with
M ~ 10² kg m² here), so t·(λ_i + λ_{4n+1−i}) and t·Σλ stay bounded (by logs of condition numbers) rather
than 0.  With the energy and the angular momentum about e conserved (gravity is symmetric about e),
four of the eight exponents of Example 1 vanish as t → ∞: the spectrum is
(λ_1, λ_2, 0, 0, 0, 0, −λ_2, −λ_1).  The exponents do not depend on renormalise_dt (the tangent flow is
linear; 0.1 s gives the same λ to 1e-7 at 200 s, 4–5× faster) as long as Y stays well conditioned.

Self-test (run by hand: ``.venv/bin/python tests/chaos_reference.py``, about 2 minutes; pytest does not
collect this file): M, E_0 and the momentum against the built system, A and b against (32) written out;
conservation of E and of e·Σ m_i x_i × ẋ_i along the orbit, tangency of Y, the sum and the pairing of
the eight exponents, independence of renormalise_dt and rtol, and the largest exponent against
armillary's single-shadow Benettin λ (method "vi", dt = 1e-3) from the same initial state.  Figures of
one run (Example 1's preset, rtol 1e-10, atol 1e-12, renormalise_dt 0.01 s, seed 0):

- E and the momentum about e are conserved to 2e-14 relative over 200 s (max over 20000 samples);
  ||q_i| − 1| and |q_i·ω_i| stay < 5e-15; count = 4, t_end = 200 s takes ~15 s (260000 evaluations).
- λ(200 s) = (0.0894, 0.0379, 0.0135, 0.0064, −0.0181, −0.0197, −0.0254, −0.0822) 1/s; Σλ = +1.7e-3
  (+1.2e-2 at 50 s, +5.0e-3 at 100 s: t·Σλ ≈ 0.3–0.6, bounded); λ_i + λ_{9−i} = (+0.007, +0.012,
  −0.006, −0.012) (≈ 1–2.5/t).  rtol 1e-12 changes λ(200 s) by 1e-9.
- Against armillary's vi (dt = 1e-3, d0 = 1e-8, renormalised every 10 steps) started along the
  reference's first tangent vector: λ_1 agrees to 0.1–0.7 % up to 90 s and to 3 % up to 130 s, while the
  vi orbit stays within 1e-2 of the reference orbit (to 100 s); from ~135 s the two orbits are different
  (chaos amplifies the vi's O(dt²) error) and their finite-time λ differ like any two orbits' (0.089
  against 0.115 at 200 s).  With d0 = 1e-6 the agreement is 2e-4 / 7e-5 at 30 / 60 s; at dt = 1e-4 it
  is 3e-3 / 1e-3 with d0 = 1e-6 but −23 % / −18 % with d0 = 1e-8 (the shadow's λ then depends on the
  vi's newton_tol: +23 % at 30 s with newton_tol = 1e-16).  Over 8 members
  perturbed by 1e-3, λ_1(200 s) has mean 0.090 ± 0.008 (reference) and 0.092 ± 0.011 (vi).
- Longer (not in the self-test; count = 8, renormalise_dt = 0.1, 45 s): λ(2000 s) = (0.0858, 0.0367,
  0.0024, 0.0021, −0.0028, −0.0037, −0.0353, −0.0850), Σλ = 1e-4, pairs within 1.4e-3, E to 3e-10
  relative: two positive exponents (λ_1 ≈ 0.086–0.090, λ_2 ≈ 0.037–0.043 1/s from 500 to 2000 s) and
  four that decay to 0 like 1/t.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np
import sympy as sp
from scipy.integrate import solve_ivp

#: spherical_chain's forces, which this reference does not model (refused unless 0)
FORCE_KEYS = ("base_torque", "base_torque_amplitude", "tip_force", "damping")


class Equations(NamedTuple):
    """The lambdified equations of an n-link chain; x (6n,) = (q_1..q_n, ω_1..ω_n) flat, p the
    parameter vector (m_1..m_n, l_1..l_n, g, e_x, e_y, e_z)."""

    n: int
    first_order: object  # (x, p) -> (A (3n, 3n), b (3n, 1), q̇ (3n, 1)):  A ω̇ = b, q̇_i = ω_i × q_i
    residual_x: object   # (x, ω̇, p) -> ∂r/∂x (3n, 6n)
    kinematic_x: object  # (x) -> ∂(ω_i × q_i)/∂x (3n, 6n)
    energy: object       # (x, p) -> E = T + V (J)
    momentum: object     # (x, p) -> e·Σ m_i x_i × ẋ_i (kg m²/s), the angular momentum about the gravity axis
    inertia: object      # (p) -> M (n, n) (kg m²)


@functools.lru_cache(maxsize=None)
def equations(n: int) -> Equations:
    """Derive the chain's equations with sympy from its Lagrangian (see the module docstring) and
    lambdify them to numpy (once per n)."""
    m = sp.symbols(f"m1:{n + 1}", positive=True)
    l = sp.symbols(f"l1:{n + 1}", positive=True)
    g = sp.Symbol("g", positive=True)
    e = sp.Matrix(sp.symbols("e_x e_y e_z", real=True))

    def vectors(name):
        return [sp.Matrix(sp.symbols(f"{name}{i}_x {name}{i}_y {name}{i}_z", real=True)) for i in range(1, n + 1)]

    q, w, wd, v = vectors("q"), vectors("w"), vectors("wd"), vectors("v")  # v: generic velocities q̇
    positions = [sum((l[k] * q[k] for k in range(i + 1)), sp.zeros(3, 1)) for i in range(n)]
    velocities = [sum((l[k] * v[k] for k in range(i + 1)), sp.zeros(3, 1)) for i in range(n)]
    kinetic = sum(m[i] * velocities[i].dot(velocities[i]) for i in range(n)) / 2
    potential = -g * sum(m[i] * e.dot(positions[i]) for i in range(n))
    # M from the quadratic form T(q̇); T is isotropic in each q̇_i, so ∂²T/∂v_ia∂v_jb = M_ij δ_ab
    M = sp.Matrix(n, n, lambda i, j: sp.factor(sp.diff(kinetic, v[i][0], v[j][0])))
    for i in range(n):
        for j in range(n):
            for a in range(3):
                for b in range(3):
                    assert sp.simplify(sp.diff(kinetic, v[i][a], v[j][b]) - (M[i, j] if a == b else 0)) == 0
    grad_v = [sp.Matrix([sp.diff(potential, c) for c in q[i]]) for i in range(n)]
    qdot = [w[i].cross(q[i]) for i in range(n)]  # (10)
    qddot = [wd[i].cross(q[i]) + w[i].cross(w[i].cross(q[i])) for i in range(n)]
    residual = sp.Matrix.vstack(*[
        q[i].cross(sum((M[i, j] * qddot[j] for j in range(n)), sp.zeros(3, 1)) + grad_v[i])
        + M[i, i] * q[i].dot(wd[i]) * q[i] for i in range(n)])
    x = [c for vec in q + w for c in vec]
    accel = [c for vec in wd for c in vec]
    p = list(m) + list(l) + [g] + list(e)
    A = residual.jacobian(accel)
    assert all(sp.diff(entry, c) == 0 for entry in A for c in accel)  # r is linear in ω̇
    b = -residual.subs({c: 0 for c in accel})
    on_motion = {v[i][a]: qdot[i][a] for i in range(n) for a in range(3)}
    energy = kinetic.subs(on_motion, simultaneous=True) + potential
    momentum = e.dot(sum((m[i] * positions[i].cross(velocities[i]) for i in range(n)), sp.zeros(3, 1))
                     ).subs(on_motion, simultaneous=True)

    def compiled(args, expr):
        return sp.lambdify(args, expr, modules="numpy", cse=True)

    return Equations(
        n=n,
        first_order=compiled([x, p], [A, b, sp.Matrix.vstack(*qdot)]),
        residual_x=compiled([x, accel, p], residual.jacobian(x)),
        kinematic_x=compiled([x], sp.Matrix.vstack(*qdot).jacobian(x)),
        energy=compiled([x, p], energy),
        momentum=compiled([x, p], momentum),
        inertia=compiled([p], M),
    )


def parameter_vector(params: dict) -> np.ndarray:
    """(m_1..m_n, l_1..l_n, g, e) from a dict with 'm' (n,), 'l' (n,), 'g' and optionally
    'gravity_direction' (default [0, 0, 1], normalised here) — e.g. ``get_system(...).params``.  Forces
    (base torque, tip force, damping) are not modelled: nonzero ones are refused."""
    m = np.atleast_1d(np.asarray(params["m"], dtype=np.float64))
    l = np.atleast_1d(np.asarray(params["l"], dtype=np.float64))
    if m.ndim != 1 or m.shape != l.shape:
        raise ValueError(f"params: 'm' and 'l' must be (n,) of one member, got {m.shape} and {l.shape}")
    g = float(np.asarray(params["g"], dtype=np.float64))
    e = np.asarray(params.get("gravity_direction", (0.0, 0.0, 1.0)), dtype=np.float64).reshape(3)
    for key in FORCE_KEYS:
        if key in params and np.any(np.asarray(params[key]) != 0):
            raise ValueError(f"params: the reference models gravity only, '{key}' must be 0")
    return np.concatenate([m, l, [g], e / np.linalg.norm(e)])


def tangent_constraints(x: np.ndarray, n: int) -> np.ndarray:
    """C (2n, 6n) with C δx = 0 on the tangent space of T(S²)ⁿ at x: rows q_i·δq_i and
    q_i·δω_i + ω_i·δq_i."""
    q, w = x[:3 * n].reshape(n, 3), x[3 * n:].reshape(n, 3)
    c = np.zeros((2 * n, 6 * n))
    for i in range(n):
        c[2 * i, 3 * i:3 * i + 3] = q[i]
        c[2 * i + 1, 3 * i:3 * i + 3] = w[i]
        c[2 * i + 1, 3 * n + 3 * i:3 * n + 3 * i + 3] = q[i]
    return c


def tangent_projector(x: np.ndarray, n: int) -> np.ndarray:
    """The Euclidean orthogonal projector (6n, 6n) of R^{6n} onto the tangent space of T(S²)ⁿ at x."""
    c = tangent_constraints(x, n)
    return np.eye(6 * n) - c.T @ np.linalg.solve(c @ c.T, c)


def tangent_frame(x: np.ndarray, n: int, count: int, seed: int = 0) -> np.ndarray:
    """``count`` orthonormal (Euclidean, R^{6n}) vectors (6n, count) of the tangent space of T(S²)ⁿ at
    x: seeded standard normals projected onto the null space of :func:`tangent_constraints`, then QR."""
    if not 1 <= count <= 4 * n:
        raise ValueError(f"count must be in 1..{4 * n} (the dimension of T(S²)^{n}), got {count}")
    _, _, vt = np.linalg.svd(tangent_constraints(x, n))
    basis = vt[2 * n:].T  # (6n, 4n) orthonormal basis of the null space
    # drawn row by row, so the first k of ``count`` vectors are those of count = k
    draws = np.random.default_rng(seed).standard_normal((count, 6 * n)).T
    frame, _ = np.linalg.qr(basis @ (basis.T @ draws))
    return frame


def on_manifold(q0, omega0) -> np.ndarray:
    """x = (q, ω) flat with each q_i normalised and ω_i projected ⟂ q_i (digest §C.4)."""
    q = np.asarray(q0, dtype=np.float64).reshape(-1, 3)
    w = np.asarray(omega0, dtype=np.float64).reshape(q.shape)
    q = q / np.linalg.norm(q, axis=1, keepdims=True)
    w = w - np.sum(q * w, axis=1, keepdims=True) * q
    return np.concatenate([q.ravel(), w.ravel()])


def vector_field(eqs: Equations, p: np.ndarray, count: int):
    """fun(t, y) for solve_ivp: y = (x (6n), Y (6n, count) row-major) -> (F(x), DF(x) Y); count = 0: F."""
    n3 = 3 * eqs.n
    first_order, residual_x, kinematic_x = eqs.first_order, eqs.residual_x, eqs.kinematic_x

    def fun(t, y):
        x = y[:2 * n3]
        A, b, qdot = first_order(x, p)
        accel = np.linalg.solve(A, b[:, 0])
        out = np.empty_like(y)
        out[:n3] = qdot[:, 0]
        out[n3:2 * n3] = accel
        if count:
            jac = np.empty((2 * n3, 2 * n3))
            jac[:n3] = kinematic_x(x)
            jac[n3:] = -np.linalg.solve(A, residual_x(x, accel, p))
            out[2 * n3:] = (jac @ y[2 * n3:].reshape(2 * n3, count)).ravel()
        return out

    return fun


def reference_orbit(q0, omega0, params: dict, times, rtol: float = 1e-10, atol: float = 1e-12) -> np.ndarray:
    """The orbit alone (DOP853) at ``times`` (s, increasing, from 0): x (len(times), 6n) =
    (q_1..q_n, ω_1..ω_n) flat."""
    p = parameter_vector(params)
    eqs = equations((p.size - 4) // 2)
    times = np.asarray(times, dtype=np.float64)
    sol = solve_ivp(vector_field(eqs, p, 0), (0.0, float(times[-1])), on_manifold(q0, omega0), method="DOP853",
                    t_eval=times, rtol=rtol, atol=atol)
    if not sol.success:
        raise RuntimeError(f"solve_ivp failed: {sol.message}")
    return sol.y.T


class LyapunovRun(NamedTuple):
    """One reference run: ``times`` (K,) the renormalisation times (s), ``log_sums`` (K, count) the
    cumulative Σ ln|R_jj| there (λ_j(t) = log_sums / times, unsorted: QR keeps column j the j-th
    direction), the orbit's ``energy`` and ``momentum`` (K + 1,) at t = 0 and each renormalisation,
    ``tangency`` the largest |C Y| of the integrated vectors (before they are projected back onto the
    tangent space, then QR'd), ``x_final``, ``evaluations`` of F and ``frame0`` (6n, count) the initial
    orthonormal tangent vectors."""

    times: np.ndarray
    log_sums: np.ndarray
    energy: np.ndarray
    momentum: np.ndarray
    tangency: float
    x_final: np.ndarray
    evaluations: int
    frame0: np.ndarray

    def exponents(self, at: float | None = None) -> np.ndarray:
        """λ_j (1/s) at the renormalisation time nearest ``at`` (default the last), descending."""
        k = -1 if at is None else int(np.argmin(np.abs(self.times - at)))
        return np.sort(self.log_sums[k] / self.times[k])[::-1]


def lyapunov_run(q0, omega0, params: dict, t_end: float, count: int, renormalise_dt: float = 0.01,
                 rtol: float = 1e-10, atol: float = 1e-12, seed: int = 0) -> LyapunovRun:
    """The run behind :func:`scipy_lyapunov_spectrum`, with its history and diagnostics."""
    p = parameter_vector(params)
    n = (p.size - 4) // 2
    eqs = equations(n)
    x = on_manifold(q0, omega0)
    if x.size != 6 * n:
        raise ValueError(f"q0 and omega0 must be ({n}, 3) for {n} links")
    if not (np.isfinite(t_end) and t_end > 0 and np.isfinite(renormalise_dt) and renormalise_dt > 0):
        raise ValueError("t_end and renormalise_dt must be finite and > 0")
    frame = frame0 = tangent_frame(x, n, count, seed)
    fun = vector_field(eqs, p, count)
    intervals = max(1, int(np.ceil(t_end / renormalise_dt - 1e-9)))
    times = np.arange(1, intervals + 1) * renormalise_dt
    times[-1] = t_end
    spans = np.full(intervals, float(renormalise_dt))  # every span the same float, the last what is left
    spans[-1] = t_end - (intervals - 1) * renormalise_dt
    log_sums = np.empty((intervals, count))
    energy, momentum = np.empty(intervals + 1), np.empty(intervals + 1)
    energy[0], momentum[0] = eqs.energy(x, p), eqs.momentum(x, p)
    total = np.zeros(count)
    tangency, evaluations, step = 0.0, 0, renormalise_dt
    y = np.concatenate([x, frame.ravel()])
    for k, span in enumerate(spans):
        # F is autonomous: each interval runs on its own clock from 0, so that a first step of the
        # whole span lands on its end exactly (from t, t + span can miss t_next by an ulp, and DOP853
        # then spends a second step of 1e-17 s on it)
        sol = solve_ivp(fun, (0.0, span), y, method="DOP853", rtol=rtol, atol=atol, first_step=min(step, span))
        if not sol.success:
            raise RuntimeError(f"solve_ivp failed at t = {times[k] - span}: {sol.message}")
        evaluations += sol.nfev
        # the next interval's first step: all of it if one step sufficed, else twice the largest step but
        # the last (which was cut short at t_next), so that the guess can grow back
        step = span if sol.t.size == 2 else 2.0 * float(np.max(np.diff(sol.t)[:-1]))
        y = sol.y[:, -1].copy()
        x = y[:6 * n]
        vectors = y[6 * n:].reshape(6 * n, count)
        tangency = max(tangency, float(np.max(np.abs(tangent_constraints(x, n) @ vectors))))
        # the exact tangent flow keeps C Y = 0; its integration errors along the 2n normal directions
        # would grow relative to the contracting vectors, so they are projected away before the QR
        frame, r = np.linalg.qr(tangent_projector(x, n) @ vectors)
        total += np.log(np.abs(np.diag(r)))
        log_sums[k] = total
        y[6 * n:] = frame.ravel()
        energy[k + 1], momentum[k + 1] = eqs.energy(x, p), eqs.momentum(x, p)
    return LyapunovRun(times, log_sums, energy, momentum, tangency, x.copy(), evaluations, frame0)


def scipy_lyapunov_spectrum(q0, omega0, params: dict, t_end: float, count: int, renormalise_dt: float = 0.01,
                            rtol=1e-10, atol=1e-12) -> np.ndarray:
    """The ``count`` largest finite-time Lyapunov exponents (1/s, descending) at ``t_end`` (s) of the chain
    (Example 1 for n = 2) from q0, omega0 ((n, 3) each; q normalised and ω projected ⟂ q first),
    ``params`` a dict with 'm', 'l', 'g' and optionally 'gravity_direction' (e.g.
    ``armillary.get_system("spherical_chain", preset="paper").params``).  See the module docstring."""
    return lyapunov_run(q0, omega0, params, t_end, count, renormalise_dt, rtol, atol).exponents()


if __name__ == "__main__":
    import time

    from armillary import get_system, integrate
    from armillary.kernels.lyapunov import displaced_shadow

    np.set_printoptions(precision=5, linewidth=130)
    started = time.perf_counter()
    eqs = equations(2)
    print(f"sympy derivation and lambdify (n = 2): {time.perf_counter() - started:.2f} s")
    system = get_system("spherical_chain", preset="paper")
    state = system.initial_state()
    q0, omega0, params = state["q"], state["omega"], system.params
    p, x0 = parameter_vector(params), on_manifold(q0, omega0)

    print("\n(0) conventions against the built system (armillary only read)")
    print(f"    M from T = ½Σm_i|ẋ_i|²: {eqs.inertia(p).ravel()}; "
          f"spherical_chain's: {system.inertia_matrix(1, 2)[0].ravel()}")
    one = {"q": q0[np.newaxis], "omega": omega0[np.newaxis]}
    first = integrate(system, "vi", one, 1e-3, 1, outputs=("energy",))
    print(f"    E0 = {eqs.energy(x0, p):.12f} J (armillary {first.energy[0, 0]:.12f}); "
          f"e·L0 = {eqs.momentum(x0, p):.12f} kg m²/s (armillary {system.momentum(one)[0, 0]:.12f})")

    def hat(a):
        return np.array([[0.0, -a[2], a[1]], [a[2], 0.0, -a[0]], [-a[1], a[0], 0.0]])

    def digest_32(x):
        """(31)–(32) of the digest, written out by hand for n = 2: the matrix and the right-hand side."""
        (q1, q2), (w1, w2) = x[:6].reshape(2, 3), x[6:].reshape(2, 3)
        m1, m2, l1, l2, g, e = p[0], p[1], p[2], p[3], p[4], p[5:]
        matrix = np.block([[(m1 + m2) * l1 ** 2 * np.eye(3), -m2 * l1 * l2 * hat(q1) @ hat(q2)],
                           [-m2 * l1 * l2 * hat(q2) @ hat(q1), m2 * l2 ** 2 * np.eye(3)]])
        rhs = np.concatenate([m2 * l1 * l2 * (w2 @ w2) * hat(q1) @ q2 + (m1 + m2) * g * l1 * hat(q1) @ e,
                              m2 * l1 * l2 * (w1 @ w1) * hat(q2) @ q1 + m2 * g * l2 * hat(q2) @ e])
        return matrix, rhs

    rng = np.random.default_rng(5)
    points = [x0] + [on_manifold(rng.standard_normal((2, 3)), rng.standard_normal((2, 3))) for _ in range(5)]
    gaps = []
    for x in points:
        (A, b, _), (A32, b32) = eqs.first_order(x, p), digest_32(x)
        gaps.append((np.max(np.abs(A - A32)) / np.max(np.abs(A32)),
                     np.max(np.abs(b[:, 0] - b32)) / np.max(np.abs(b32))))
    print(f"    A and b against (32) by hand, the preset's state and 5 random ones on T(S²)²: relative "
          f"{np.max(gaps, axis=0)[0]:.0e} and {np.max(gaps, axis=0)[1]:.0e}")
    field, tangent = vector_field(eqs, p, 0), vector_field(eqs, p, 1)
    worst = 0.0
    for x in points:  # DF v against central differences of F along tangent v
        v = tangent_frame(x, 2, 1, seed=3)[:, 0]
        exact = tangent(0.0, np.concatenate([x, v]))[12:]
        central = (field(0.0, x + 1e-6 * v) - field(0.0, x - 1e-6 * v)) / 2e-6
        worst = max(worst, np.max(np.abs(exact - central)) / np.max(np.abs(exact)))
    print(f"    DF·v against central differences of F (h = 1e-6) at the same 6 states: relative {worst:.0e}")

    def timed(label, **kw):
        begun = time.perf_counter()
        run = lyapunov_run(kw.pop("q0", q0), kw.pop("omega0", omega0), params, **kw)
        print(f"    {label}: {time.perf_counter() - begun:.1f} s, {run.evaluations} evaluations of F")
        return run

    print("\n(1), (2) count = 8, t_end = 200 s, renormalise_dt = 0.01 s, rtol 1e-10, atol 1e-12")
    full = timed("count = 8", t_end=200.0, count=8)
    de, dl = np.max(np.abs(full.energy - full.energy[0])), np.max(np.abs(full.momentum - full.momentum[0]))
    print(f"    max |E − E0| = {de:.1e} J ({de / abs(full.energy[0]):.1e} of |E0|), "
          f"max |L − L0| = {dl:.1e} kg m²/s ({dl / abs(full.momentum[0]):.1e} of |L0|), over 20000 samples")
    xf = full.x_final.reshape(2, 2, 3)
    print(f"    at 200 s: max ||q_i| − 1| = {np.max(np.abs(np.linalg.norm(xf[0], axis=1) - 1)):.1e}, "
          f"max |q_i·ω_i| = {np.max(np.abs(np.sum(xf[0] * xf[1], axis=1))):.1e}; "
          f"largest |C Y| before a projection = {full.tangency:.1e}")
    for t in (50.0, 100.0, 200.0):
        lam = full.exponents(t)
        print(f"    t = {t:3.0f} s: λ = {lam} 1/s")
        print(f"               Σλ = {lam.sum():+.1e}, λ_i + λ_(9−i) = {lam[:4] + lam[::-1][:4]}, "
              f"1/t = {1 / t:.3f}")

    print("\n    count = 4, t_end = 200 s (the speed asked for), and the reference's own convergence")
    four = timed("count = 4, renormalise_dt = 0.01, rtol 1e-10", t_end=200.0, count=4)
    print(f"    λ(200 s) = {four.exponents()}; count = 8's first four differ by "
          f"{np.max(np.abs(four.exponents() - full.exponents()[:4])):.0e}")
    coarse = timed("count = 4, renormalise_dt = 0.1,  rtol 1e-10", t_end=200.0, count=4, renormalise_dt=0.1)
    tight = timed("count = 4, renormalise_dt = 0.1,  rtol 1e-12, atol 1e-14", t_end=200.0, count=4,
                  renormalise_dt=0.1, rtol=1e-12, atol=1e-14)
    for t in (50.0, 100.0, 200.0):
        print(f"    λ({t:3.0f} s) − the rtol 1e-10 / renormalise_dt 0.01 values: renormalise_dt 0.1 "
              f"{np.max(np.abs(coarse.exponents(t) - four.exponents(t))):.0e}, rtol 1e-12 "
              f"{np.max(np.abs(tight.exponents(t) - four.exponents(t))):.0e}")
    times = np.arange(0.0, 201.0, 25.0)
    orbit = reference_orbit(q0, omega0, params, times)
    tight_orbit = reference_orbit(q0, omega0, params, times, 1e-12, 1e-14)
    print("    |x(rtol 1e-12) − x(rtol 1e-10)|: " + "  ".join(
        f"{t:.0f} s {d:.0e}" for t, d in zip(times[1:], np.linalg.norm(tight_orbit - orbit, axis=1)[1:])))

    print("\n(3) λ_1 against armillary's Benettin shadow: vi, dt = 1e-3, d0 = 1e-8, renormalised every 10 steps")
    dt, steps = 1e-3, 200_000

    def shadows(states, directions, d0=1e-8, every=10, step=dt, count=steps, save=10_000):
        result = integrate(system, "vi", states, step, count, save_every=save, outputs=("q", "omega", "energy"),
                           shadow=displaced_shadow(system.space, states, directions, d0, every))
        assert np.all(result.status == 0)
        return result

    same = shadows(one, four.frame0[:, 0][np.newaxis])  # the reference's first tangent vector
    vi_x = np.concatenate([same.q[0].reshape(len(same.time), -1), same.omega[0].reshape(len(same.time), -1)], axis=1)
    vi_orbit = reference_orbit(q0, omega0, params, same.time)
    print("    the same initial tangent vector (the reference's first, displaced by d0 along it):")
    print("       t (s)   ref λ_1   vi λ      vi/ref − 1   |x_vi − x_ref|")
    for k, t in enumerate(same.time):
        if t > 0:
            reference = four.log_sums[np.argmin(np.abs(four.times - t)), 0] / t  # column 0: that vector's growth
            vi = same.lyapunov()[0, k]
            print(f"      {t:5.0f}   {reference:.5f}   {vi:.5f}   {vi / reference - 1:+9.1e}"
                  f"    {np.linalg.norm(vi_x[k] - vi_orbit[k]):.0e}")
    ensemble = {name: np.repeat(value[np.newaxis], 4, axis=0) for name, value in state.items()}
    spread = shadows(ensemble, np.random.default_rng(7).standard_normal((4, 12)))
    print("    four random initial directions, same member: λ(50 s) = "
          f"{spread.lyapunov()[:, 5]}, λ(200 s) = {spread.lyapunov()[:, -1]}")
    print("    the reference's λ_1 (sorted, seed 0): λ(50 s) = "
          f"{four.exponents(50.0)[0]:.5f}, λ(200 s) = {four.exponents(200.0)[0]:.5f}")
    print("    smaller steps, same direction (t = 30 / 60 s, vi/ref − 1):")
    for step, d0 in ((1e-4, 1e-8), (1e-4, 1e-6), (1e-3, 1e-6)):
        run = shadows(one, four.frame0[:, 0][np.newaxis], d0=d0, every=round(0.01 / step), step=step,
                      count=round(60 / step), save=round(30 / step))
        ratios = [run.lyapunov()[0, k] / (four.log_sums[np.argmin(np.abs(four.times - t)), 0] / t) - 1
                  for k, t in enumerate(run.time) if t > 0]
        print(f"      dt = {step:.0e}, d0 = {d0:.0e}: {ratios[0]:+.1e} / {ratios[1]:+.1e}")

    members = 8
    rng = np.random.default_rng(11)
    starts = [on_manifold(q0 + 1e-3 * rng.standard_normal(q0.shape), omega0 + 1e-3 * rng.standard_normal(q0.shape))
              for _ in range(members)]
    batch = {"q": np.array([s[:6].reshape(2, 3) for s in starts]),
             "omega": np.array([s[6:].reshape(2, 3) for s in starts])}
    begun = time.perf_counter()
    reference = np.array([lyapunov_run(b[:6].reshape(2, 3), b[6:].reshape(2, 3), params, 200.0, 1,
                                       renormalise_dt=0.1).exponents()[0] for b in starts])
    print(f"\n    {members} members perturbed by 1e-3 (q and ω Gaussians, put on T(S²)²), λ_1(200 s) "
          f"(reference count = 1, renormalise_dt = 0.1: {time.perf_counter() - begun:.0f} s):")
    vi = shadows(batch, np.random.default_rng(12).standard_normal((members, 12))).lyapunov()[:, -1]
    print(f"      reference {np.sort(reference)}, median {np.median(reference):.4f}, mean {reference.mean():.4f} ± "
          f"{reference.std(ddof=1) / np.sqrt(members):.4f}")
    print(f"      vi        {np.sort(vi)}, median {np.median(vi):.4f}, mean {vi.mean():.4f} ± "
          f"{vi.std(ddof=1) / np.sqrt(members):.4f}")
    print(f"\ntotal {time.perf_counter() - started:.0f} s")
