"""Benettin's method for Lyapunov exponents, MEGNO and SALI/GALI: k shadow copies of each member.

Each shadow starts a distance d0 from its member along a tangent direction of its space, is stepped by
the same integrator, and every ``renormalise_every`` steps the k displacements are orthogonalised
together (Gram–Schmidt in a fixed order, Benettin et al. 1980's spectrum), each shadow is pulled back
towards the member to distance d0 along its orthogonalised direction and put back on the manifold
exactly (on T(S²)ⁿ: each q_i normalised, each ω_i projected tangent to it; on SO(3)ⁿ see
:mod:`kernels.spaces.rotation`).  A block's k shadows are k·L extra lanes (shadow j of lane l in lane
j·L + l) that the members' integrator steps as one block.  The shared lane functions and the (S²)ⁿ
stages are here; the flat spaces' stages are in :mod:`kernels.flat_driver`.
The log of the growth factors accumulates; the finite-time maximal exponent at time t is
λ(t) = [Σ_k ln(d_k / d_{k−1}^+) + ln(d(t) / d_last^+)] / t (1/s), with d^+ the distance right
after a renormalisation (Benettin, Galgani, Giorgilli & Strelcyn 1980); exponent j of the spectrum
takes R_jj of the displacements' QR factor for d.  With one shadow the arithmetic is Benettin's single
shadow's, bit for bit.  MEGNO (Cincotta & Simó 2000) is built from the first shadow's increments, SALI
and GALI_k (Skokos 2001; Skokos, Bountis & Antonopoulos 2007) from the deviation vectors followed
through the orthogonalisations (:func:`accumulate_indicators`).

Distance in phase space: the Euclidean norm of the state difference (on (S²)ⁿ (q_s − q, ω_s − ω) in
R^{6n}, q dimensionless and ω in rad/s, so one unit of angle and one rad/s weigh the same).  Every
operation here is a +, −, ×, ÷, sqrt or (scalar, libm) log per member, so shadows stay bitwise
independent of block grouping.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .blocks import to_blocks, to_shadow_blocks
from .errors import InvalidInput
from .lanes import lane_function
from .status import OK


@dataclass(frozen=True)
class Shadow:
    """The shadow copies of an ensemble, carried through :func:`kernels.integrate` and across restarts.

    k shadows per member (k = 1: Benettin's maximal exponent; k > 1: the first k exponents of the
    spectrum, their displacements re-orthonormalised together).
    state: the shadows' states (the space's variables, shaped (members, k, *variable shape));
    log_growth: (members, k) Σ ln(R_jj / R'_jj) over the renormalisations so far (R the QR factor of
    the displacements at a renormalisation, R' that right after the previous one; for k = 1,
    ln(d_k / d_{k−1}^+)); reference: (members, k) the diagonal of R' (the lengths of the displacements
    right after the last renormalisation, which R' has on its diagonal but for O(d0) relative; at the
    start, the initial displacements' Gram–Schmidt factor); indicators: (members, 2 + k²) MEGNO's two
    sums and the alignment matrix of SALI/GALI (see :func:`accumulate_indicators`); d0: the distance each
    renormalisation restores; renormalise_every: steps between renormalisations, counted from
    ``step_offset``'s origin, the global index of the step before the call's first step (so segments
    of a run renormalise at the same steps as one uninterrupted call).
    """

    state: dict
    log_growth: np.ndarray
    reference: np.ndarray
    indicators: np.ndarray
    d0: float
    renormalise_every: int
    step_offset: int = 0

    @property
    def count(self) -> int:
        """Shadows per member."""
        return self.log_growth.shape[1]


def displaced_shadow(space, state: dict, directions, d0: float, renormalise_every: int) -> Shadow:
    """k shadows of members ``state`` (the space's variables, leading member axis), shadow j displaced
    by d0 along tangent ``directions[:, j]`` ((members, k, space.normal_count(n)), e.g. standard normals;
    (members, normal_count) for one) by the space's retraction (:meth:`~kernels.spaces.StateSpace.displace`).
    The references are the diagonal of the QR factor of the initial displacements (Gram–Schmidt in the
    fixed order; for the first, the exact initial distance); MEGNO's sums start at 0 and the alignment
    matrix at the identity (the deviation vectors start as the orthogonalised displacements)."""
    if not (np.isfinite(d0) and 0 < d0 < 1):
        raise InvalidInput("d0", f"must be a number in (0, 1), got {d0!r}")
    if isinstance(renormalise_every, bool) or not isinstance(renormalise_every, (int, np.integer)) \
            or renormalise_every < 1:
        raise InvalidInput("renormalise_every", f"must be an integer >= 1, got {renormalise_every!r}")
    state = {name: np.asarray(value, dtype=np.float64) for name, value in state.items()}
    directions = np.asarray(directions, dtype=np.float64)
    if directions.ndim == 2:
        directions = directions[:, np.newaxis]
    members, count = directions.shape[:2]
    moved = [space.displace(state, directions[:, j], float(d0)) for j in range(count)]
    reference = np.empty((members, count))
    reference[:, 0] = space.distance(state, moved[0])
    base = space.flatten(state) if space.layout == "flat" else np.concatenate(
        [state[name].reshape(members, -1) for name in space.names], axis=1)
    vectors = []
    for j, shadow in enumerate(moved):
        flat = space.flatten(shadow) if space.layout == "flat" else np.concatenate(
            [shadow[name].reshape(members, -1) for name in space.names], axis=1)
        v = flat - base
        for u in vectors:
            v = v - (np.sum(u * v, axis=1) / np.sum(u * u, axis=1))[:, np.newaxis] * u
        vectors.append(v)
        if j > 0:
            reference[:, j] = np.sqrt(np.sum(v * v, axis=1))
    return Shadow({name: np.stack([shadow[name] for shadow in moved], axis=1) for name in state},
                  np.zeros((members, count)), reference, initial_indicators(members, count), float(d0),
                  int(renormalise_every))


def initial_indicators(members: int, count: int) -> np.ndarray:
    """The indicators' state at the start: MEGNO's sums 0, the alignment matrix the identity."""
    indicators = np.zeros((members, indicator_rows(count)))
    indicators[:, MEGNO_ROWS:] = np.eye(count).reshape(-1)
    return indicators


def shadow_arrays(shadow: Shadow | None, state: dict, start_step: int) -> tuple[dict, tuple]:
    """The runners' shadow inputs: per-member arrays by name (each state variable (members, k, ...),
    ``log_growth`` and ``reference`` (members, k), ``indicators``) and the kernel's scalars (d0,
    renormalise_every, step_offset); without a shadow, k = 0 and renormalise_every 0 (never)."""
    if shadow is None:
        members = len(next(iter(state.values())))
        arrays = {name: np.zeros((members, 0) + np.shape(value)[1:]) for name, value in state.items()}
        arrays.update(log_growth=np.zeros((members, 0)), reference=np.ones((members, 0)),
                      indicators=np.zeros((members, MEGNO_ROWS)))
        return arrays, (1.0, 0, int(start_step))
    arrays = {name: np.asarray(value, dtype=np.float64) for name, value in shadow.state.items()}
    arrays.update({name: np.asarray(getattr(shadow, name), dtype=np.float64)
                   for name in ("log_growth", "reference", "indicators")})
    return arrays, (float(shadow.d0), int(shadow.renormalise_every), int(shadow.step_offset))


def shadow_outputs(shadow_in: dict, shadowed: bool, samples: int) -> tuple[np.ndarray, np.ndarray, dict]:
    """What both runners give a kernel for the shadows' results: every shadow's exponent numerators
    (members, samples, k) and the indicators (members, samples, 3) at the samples (none without a shadow),
    and the end records ``log_growth``, ``reference`` and ``indicators`` (the state's end is the layout's)."""
    members, count = shadow_in["log_growth"].shape
    kept = samples if shadowed else 0
    return (np.full((members, kept, count), np.nan), np.full((members, kept, 3), np.nan),
            {"log_growth": np.empty((members, count)), "reference": np.empty((members, count)),
             "indicators": np.empty(shadow_in["indicators"].shape)})


def shadow_record_blocks(shadow_in: dict, lanes: int) -> dict:
    """The shadows' records in lane blocks, the last block arguments of both layouts' kernels: ``log_growth``
    and ``reference`` one lane per shadow (:func:`~kernels.blocks.to_shadow_blocks`), ``indicators`` one lane
    per member."""
    return {"log_growth": to_shadow_blocks(shadow_in["log_growth"], lanes),
            "reference": to_shadow_blocks(shadow_in["reference"], lanes),
            "indicators": to_blocks(shadow_in["indicators"], lanes)}


def shadow_results(shadow: Shadow, end_state: dict, shadow_end: dict, growth: np.ndarray, indicator_out: np.ndarray,
                   n_steps: int) -> dict:
    """The Trajectory fields of a run with shadows: the first shadow's ``log_growth`` (members, samples),
    every shadow's ``spectrum_growth`` (members, samples, k), ``megno``, ``sali`` and ``gali`` (members,
    samples) and ``shadow_final``, the shadows after the last step."""
    return {"log_growth": growth[:, :, 0], "spectrum_growth": growth, "megno": indicator_out[:, :, 0],
            "sali": indicator_out[:, :, 1], "gali": indicator_out[:, :, 2],
            "shadow_final": Shadow(end_state, shadow_end["log_growth"], shadow_end["reference"],
                                   shadow_end["indicators"], shadow.d0, shadow.renormalise_every,
                                   shadow.step_offset + n_steps)}


#: rows of a member's chaos-indicator state (``Shadow.indicators``) before its k×k alignment matrix: MEGNO's
#: two running sums (Σ t_mid Δℓ and ∫ Y dt)
MEGNO_ROWS = 2


def indicator_rows(count: int) -> int:
    """Rows of a member's indicator state with ``count`` shadows: MEGNO's sums, then the alignment matrix."""
    return MEGNO_ROWS + count * count


@lane_function
def shadow_dot(a, b, i, j, lanes, out):
    """out[l] = ⟨d_i, d_j⟩ of lane l: Σ_r (a[r, iL+l] a[r, jL+l] + b[r, iL+l] b[r, jL+l]), the Euclidean
    product of displacements i and j stored in the shadow lanes of ``a`` (and ``b``, which may have no
    rows).  On (S²)ⁿ a, b are the q and ω parts, summed pairwise as the single shadow always was."""
    for l in range(lanes):
        out[l] = 0.0
    if b.shape[0] == 0:
        for r in range(a.shape[0]):
            for l in range(lanes):
                out[l] += a[r, i * lanes + l] * a[r, j * lanes + l]
    else:
        for r in range(a.shape[0]):
            for l in range(lanes):
                out[l] += a[r, i * lanes + l] * a[r, j * lanes + l] + b[r, i * lanes + l] * b[r, j * lanes + l]


@lane_function
def orthogonalise(a, b, lanes, rmat, dot):
    """Modified Gram–Schmidt of the k displacements held in the shadow lanes of ``a`` (and ``b``), in
    place and in the fixed order 0, 1, …, k−1: v_j ← v_j − (⟨v_i, v_j⟩ / ‖v_i‖²) v_i for i < j, the v_j left
    unnormalised (v_0 is d_0 untouched, so one shadow keeps Benettin's arithmetic).  rmat[i, j, l] is
    the QR factor R of D = Q R (R_jj = ‖v_j‖, R_ij = ⟨v_i / ‖v_i‖, v_j⟩ for i < j); entries below the
    diagonal are left as they were."""
    k = a.shape[1] // lanes
    for j in range(k):
        for i in range(j):
            shadow_dot(a, b, i, j, lanes, dot)
            for l in range(lanes):
                rmat[i, j, l] = dot[l] / rmat[i, i, l]
                dot[l] = rmat[i, j, l] / rmat[i, i, l]  # the coefficient of the unnormalised v_i
            for r in range(a.shape[0]):
                for l in range(lanes):
                    a[r, j * lanes + l] -= dot[l] * a[r, i * lanes + l]
            for r in range(b.shape[0]):
                for l in range(lanes):
                    b[r, j * lanes + l] -= dot[l] * b[r, i * lanes + l]
        shadow_dot(a, b, j, j, lanes, dot)
        for l in range(lanes):
            rmat[j, j, l] = np.sqrt(dot[l])


@lane_function
def accumulate_indicators(step, every, h, log_growth, reference, rmat, indicators, column, dot):
    """At a renormalisation at global ``step`` (time t = step·h), with R the QR factor of the k
    displacements and ``reference`` the diagonal of the factor R' of the displacements right after the
    last renormalisation: every shadow's log growth += ln(R_jj / R'_jj) (the finite-time spectrum's sums,
    exact for the volumes of the first j directions); MEGNO's sums from shadow 0's increment Δℓ over the
    interval: S += t_mid Δℓ, Y = 2 S / t, ∫Y += Y · every·h (Cincotta & Simó 2000, the sums of REBOUND's
    ``megno``); and the alignment matrix C of the deviation vectors in the current orthonormal basis,
    C ← R R'⁻¹ C with each column then normalised (SALI and GALI_k follow the deviation vectors, never
    orthogonalised, Skokos 2001), R' taken as its diagonal (its off-diagonal part is O(d0) relative)."""
    lanes = indicators.shape[1]
    k = rmat.shape[0]
    t = step * h
    middle = (step - 0.5 * every) * h
    for l in range(lanes):
        increment = np.log(rmat[0, 0, l] / reference[l])
        indicators[0, l] += middle * increment
        indicators[1, l] += (2.0 * indicators[0, l] / t) * (every * h)
    for j in range(k):
        for l in range(lanes):
            log_growth[j * lanes + l] += np.log(rmat[j, j, l] / reference[j * lanes + l])
    if k < 2:
        return
    for c in range(k):  # column c of C ← R R'⁻¹ C[:, c] (upper triangular times a column), lanes innermost
        for row in range(k):
            for l in range(lanes):
                column[row * lanes + l] = 0.0
            for m in range(row, k):
                for l in range(lanes):
                    column[row * lanes + l] += (rmat[row, m, l] / reference[m * lanes + l]
                                                * indicators[MEGNO_ROWS + m * k + c, l])
        for l in range(lanes):
            dot[l] = 0.0
        for row in range(k):
            for l in range(lanes):
                dot[l] += column[row * lanes + l] * column[row * lanes + l]
        for row in range(k):
            for l in range(lanes):
                indicators[MEGNO_ROWS + row * k + c, l] = column[row * lanes + l] / np.sqrt(dot[l])


@lane_function
def record_indicators(sample, step, every, h, first, members, log_growth, reference, rmat, indicators,
                      growth_out, indicator_out):
    """At a saved sample (global ``step``), with ``rmat`` the QR factor of the current displacements:
    growth_out[m, sample, j] = log growth + ln(R_jj / R'_jj) (the spectrum's numerators now; j = 0 is
    Benettin's λ·t); indicator_out[m, sample] = (⟨Y⟩, SALI, GALI_k) as of the last renormalisation
    (MEGNO NaN before the first; SALI = min ‖ĉ₀ ± ĉ₁‖ and GALI_k = |det C| need two shadows, else NaN)."""
    lanes = indicators.shape[1]
    k = rmat.shape[0]
    renormalised = (step // every) * every * h
    for l in range(lanes):
        m = first + l
        if m >= members:
            break
        for j in range(k):
            growth_out[m, sample, j] = log_growth[j * lanes + l] + np.log(rmat[j, j, l] / reference[j * lanes + l])
        indicator_out[m, sample, 0] = indicators[1, l] / renormalised if renormalised > 0 else np.nan
        if k < 2:
            indicator_out[m, sample, 1] = np.nan
            indicator_out[m, sample, 2] = np.nan
            continue
        plus = 0.0
        minus = 0.0
        volume = 1.0
        for row in range(k):
            a = indicators[MEGNO_ROWS + row * k, l]
            b = indicators[MEGNO_ROWS + row * k + 1, l]
            plus += (a + b) * (a + b)
            minus += (a - b) * (a - b)
            volume *= indicators[MEGNO_ROWS + row * k + row, l]
        indicator_out[m, sample, 1] = np.sqrt(min(plus, minus))
        indicator_out[m, sample, 2] = abs(volume)


@lane_function
def sphere_displacements(q, omega, shadow_q, shadow_omega, dq, dw):
    """dq, dw (3n, k·L) = each shadow's (q_s − q, ω_s − ω) from its member."""
    lanes = q.shape[2]
    k = shadow_q.shape[2] // lanes
    for i in range(q.shape[0]):
        for c in range(3):
            for j in range(k):
                for l in range(lanes):
                    dq[3 * i + c, j * lanes + l] = shadow_q[i, c, j * lanes + l] - q[i, c, l]
                    dw[3 * i + c, j * lanes + l] = shadow_omega[i, c, j * lanes + l] - omega[i, c, l]


@lane_function
def renormalise_sphere_shadows(step, every, h, q, omega, shadow_q, shadow_omega, d0, log_growth, reference,
                               indicators, dq, dw, rmat, dot, column):
    """Orthonormalise the k shadows' displacements together (Gram–Schmidt in R^{6n}, fixed order),
    accumulate the indicators, pull each shadow to distance d0 along its orthogonalised direction and
    put it back on T(S²)ⁿ exactly (q normalised, ω projected tangent); ``reference`` becomes the
    pulled displacements' lengths (:func:`displacement_norms`)."""
    n = q.shape[0]
    lanes = q.shape[2]
    k = shadow_q.shape[2] // lanes
    sphere_displacements(q, omega, shadow_q, shadow_omega, dq, dw)
    orthogonalise(dq, dw, lanes, rmat, dot)
    accumulate_indicators(step, every, h, log_growth, reference, rmat, indicators, column, dot)
    for j in range(k):
        for l in range(lanes):
            column[l] = d0 / rmat[j, j, l]  # the pull factor
        for i in range(n):
            for l in range(lanes):
                s = j * lanes + l
                s0 = q[i, 0, l] + column[l] * dq[3 * i, s]
                s1 = q[i, 1, l] + column[l] * dq[3 * i + 1, s]
                s2 = q[i, 2, l] + column[l] * dq[3 * i + 2, s]
                norm = np.sqrt(s0 * s0 + s1 * s1 + s2 * s2)
                s0, s1, s2 = s0 / norm, s1 / norm, s2 / norm
                w0 = omega[i, 0, l] + column[l] * dw[3 * i, s]
                w1 = omega[i, 1, l] + column[l] * dw[3 * i + 1, s]
                w2 = omega[i, 2, l] + column[l] * dw[3 * i + 2, s]
                along = s0 * w0 + s1 * w1 + s2 * w2
                shadow_q[i, 0, s], shadow_q[i, 1, s], shadow_q[i, 2, s] = s0, s1, s2
                shadow_omega[i, 0, s] = w0 - along * s0
                shadow_omega[i, 1, s] = w1 - along * s1
                shadow_omega[i, 2, s] = w2 - along * s2
    sphere_displacements(q, omega, shadow_q, shadow_omega, dq, dw)
    displacement_norms(dq, dw, lanes, reference, dot)


@lane_function
def displacement_norms(a, b, lanes, reference, dot):
    """reference[j·L + l] = ‖d_j‖ of the displacements in the shadow lanes of ``a`` (and ``b``): right after a
    renormalisation the diagonal of their QR factor R' but for O(d0) relative (they were pulled along
    orthogonal directions; only the retraction bends them, at second order), at a k-th of its cost."""
    for j in range(a.shape[1] // lanes):
        shadow_dot(a, b, j, j, lanes, dot)
        for l in range(lanes):
            reference[j * lanes + l] = np.sqrt(dot[l])


@lane_function
def record_sphere_indicators(sample, step, every, h, q, omega, shadow_q, shadow_omega, first, members, log_growth,
                             reference, indicators, growth_out, indicator_out, dq, dw, rmat, dot):
    """The indicators of one saved sample (see :func:`record_indicators`), from the shadows as they are."""
    sphere_displacements(q, omega, shadow_q, shadow_omega, dq, dw)
    orthogonalise(dq, dw, q.shape[2], rmat, dot)
    record_indicators(sample, step, every, h, first, members, log_growth, reference, rmat, indicators, growth_out,
                      indicator_out)


@lane_function
def forget_failed_shadows(shadow_code, log_growth):
    """A shadow whose step failed has no meaningful exponent: its log_growth becomes NaN for good."""
    for s in range(log_growth.shape[0]):
        if shadow_code[s] != OK:
            log_growth[s] = np.nan


@lane_function
def write_final_shadows(shadow, log_growth, reference, indicators, first, members, shadow_end, log_growth_end,
                        reference_end, indicators_end):
    """Per member after the last step (the restart point of the next segment): its k shadows' states
    ``shadow`` (rows, k·L) into ``shadow_end`` (members, k, rows) (shadow j of lane l from shadow lane
    j·L + l; an (S²)ⁿ kernel passes q and ω one after the other, flattened to 3n rows), each shadow's log
    growth and reference, and the indicators' state.  Called with empty ``log_growth`` and ``indicators``
    rows it writes the state alone."""
    lanes = indicators.shape[1]
    for l in range(min(lanes, members - first)):
        m = first + l
        for r in range(indicators.shape[0]):
            indicators_end[m, r] = indicators[r, l]
        for j in range(shadow.shape[1] // lanes):
            for r in range(shadow.shape[0]):
                shadow_end[m, j, r] = shadow[r, j * lanes + l]
        for j in range(log_growth.shape[0] // lanes):
            log_growth_end[m, j] = log_growth[j * lanes + l]
            reference_end[m, j] = reference[j * lanes + l]


@lane_function
def tile_lanes_2d(a, k):
    """(P, L) → (P, k·L): the members' per-lane coefficients repeated for each of their k shadows."""
    lanes = a.shape[1]
    out = np.empty((a.shape[0], k * lanes))
    for p in range(a.shape[0]):
        for j in range(k):
            for l in range(lanes):
                out[p, j * lanes + l] = a[p, l]
    return out


@lane_function
def tile_lanes_3d(a, k):
    """(P, Q, L) → (P, Q, k·L), as :func:`tile_lanes_2d`."""
    lanes = a.shape[2]
    out = np.empty((a.shape[0], a.shape[1], k * lanes))
    for p in range(a.shape[0]):
        for r in range(a.shape[1]):
            for j in range(k):
                for l in range(lanes):
                    out[p, r, j * lanes + l] = a[p, r, l]
    return out


@lane_function
def tile_active(active, shadow_active):
    """Shadow lanes step while their member does."""
    lanes = active.shape[0]
    for s in range(shadow_active.shape[0]):
        shadow_active[s] = active[s % lanes]


# Templates bound by kernels.compile into the fixed-step driver (``shadow_begin``, ``shadow_step``):
# the real stages for kernels that carry shadows, the empty ones otherwise.  They call the method's
# ``integrator_begin`` / ``integrator_step``, bound at specialisation.

def shadow_begin_template(shadow_q, shadow_omega, mass_diag, mass_full, coef, topology, h, options, work):
    """Start the shadows' integrator (its cached state, e.g. ∂V/∂q, at the shadow's q)."""
    integrator_begin(shadow_q, shadow_omega, mass_diag, mass_full, coef, topology, h, options, work)  # noqa: F821


def shadow_step_template(step, q, omega, shadow_q, shadow_omega, mass_diag, mass_full, coef, topology, h, options,
                         work, active, shadow_active, shadow_code, shadow_iterations, d0, renormalise_every,
                         log_growth, reference, indicators, dq, dw, rmat, dot, column):
    """Step the k shadows (lanes j·L + l of the shadow arrays, ``mass_diag``, ``mass_full`` and ``coef``
    tiled to match) with the members' integrator, forget failed ones, and renormalise them together at
    every global ``step`` divisible by ``renormalise_every``."""
    tile_active(active, shadow_active)
    integrator_step((step - 1) * h, shadow_q, shadow_omega, mass_diag, mass_full, coef, topology, h,  # noqa: F821
                    options, work, shadow_active, shadow_code, shadow_iterations)
    forget_failed_shadows(shadow_code, log_growth)
    if step % renormalise_every == 0:
        renormalise_sphere_shadows(step, renormalise_every, h, q, omega, shadow_q, shadow_omega, d0, log_growth,
                                   reference, indicators, dq, dw, rmat, dot, column)
        # the integrator's cached state must follow the moved shadows
        integrator_begin(shadow_q, shadow_omega, mass_diag, mass_full, coef, topology, h, options,  # noqa: F821
                         work)


def no_shadow_begin(shadow_q, shadow_omega, mass_diag, mass_full, coef, topology, h, options, work):
    """Kernels without shadows: nothing to start."""


def no_shadow_step(step, q, omega, shadow_q, shadow_omega, mass_diag, mass_full, coef, topology, h, options,
                   work, active, shadow_active, shadow_code, shadow_iterations, d0, renormalise_every,
                   log_growth, reference, indicators, dq, dw, rmat, dot, column):
    """Kernels without shadows: nothing to step."""


#: (bound name, template) of the driver's shadow stages, with and without shadows
SHADOW_STAGES = {True: (("shadow_begin", shadow_begin_template), ("shadow_step", shadow_step_template)),
                 False: (("shadow_begin", no_shadow_begin), ("shadow_step", no_shadow_step))}
