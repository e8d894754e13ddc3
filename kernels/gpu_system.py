"""One large system on a CUDA GPU: the system-parallel mode (:mod:`kernels.system_parallel`) with the state, the
neighbour list and every step on the device between samples.

The CPU's system mode splits one member's particles over its threads inside each step; here a thread steps one
particle.  A step is a few launches of a thread per particle:

- **Advance** (:func:`advance_template`): the method's own per-particle stages (its ``system_stages``: vi's half
  kick and drift of Lee–Leok–McClamroch eqs. (29)–(30) and its second half kick; langevin's B, A, O, A and B;
  brownian's geodesic Euler–Maruyama step, ``active`` included), the lane functions the CPU calls, compiled for the
  device, with their noise from the CPU's Philox stream and counters (:mod:`kernels.noise`: the run's seed, the
  member, the global step, the particle's id).  As on the CPU, the last stage of step k and the first of step
  k + 1 run in one launch unless a sample falls between them.  Each particle writes its step's heat, its
  displacement² since the last build and its outcome into its rows of ``terms``.
- **Summary** (:func:`fold_template`, launched a few times): the heat summed, the displacement and the outcome
  maximised, in a tree whose shape n alone fixes (chunks of FOLD_ROWS rows, then chunks of their results); the
  heat in the order of the particles' ids, not their storage positions.  Four numbers cross to the
  host: whether a particle moved more than skin/2 (the CPU's rule, the skin "auto" included) and whether the step
  failed.
- **Rebuild**, when one did: :func:`kernels.gpu_neighbours.build_full_rows` from the positions on the device, then
  every per-particle array gathered into the new storage order (:func:`permute_rows_template`).
- **Gradient** (:func:`kernels.gpu_neighbours.gather_gradient_template`): each particle's ∂V/∂q gathered by its own
  thread from its row, in the order of its partners' ids.
- **All pairs** (a pair potential without a cutoff: no list, no rebuild): each particle's ∂V/∂q summed by its own
  thread over every other particle in increasing id, tiles of positions in shared memory
  (:func:`kernels.all_pairs.device_terms_template`), the CPU's terms in the CPU's order.

So every number a particle computes depends on its own state and noise and on its partners' states in id order,
and every sum runs by id: a run gives the same bits whatever its storage order, rebuild times, skin and restart
points (tested: a run split at a step and restarted equals the uninterrupted one bit for bit), and the CPU's
system mode to round-off (:mod:`kernels.domain`: its terms in the same partner-id order since revision 3 of its
sums, its fused multiply-adds and its sums over particles, a binary tree over ids, its own).

A sample sums the particles' kinetic and pair energies by id (the CPU's order of terms; the tree's grouping) and
takes the constraint errors' maxima by the same folds; the state crosses, by id, when it is kept.
Not here yet: float32 forces (float64 throughout) and a rebuild decided on the device (one four-number copy a
step).
"""

from __future__ import annotations

import functools

import numpy as np

from . import neighbours as nb
from . import system_parallel as sp
from .all_pairs import DEVICE_TEMPLATES
from .gpu import _register_numpy_math, cuda_module, launch, nvvm_options
from .gpu_neighbours import build_full_rows, pair_kernel_functions
from .integrators import KERNEL_METHODS
from .lanes import bind_template, body_constraint_errors, body_kinetic_energy
from .systems import system_definition
from .status import NON_FINITE, OK, VI_STEP_INFEASIBLE

#: columns of ``terms``: two summed (by id), two maximised (by storage position)
SUMMED, MAXIMISED = (0, 1), (2, 3)
#: rows one thread of :func:`fold_template` folds (10⁶ particles: four launches)
FOLD_ROWS = 64
#: a particle's outcome in a step (column 3 of ``terms``; the largest wins, the ensemble driver's precedence)
OUTCOMES = {0.0: OK, 1.0: NON_FINITE, 2.0: VI_STEP_INFEASIBLE}


def setup_template(h, mass_diag, coef, half_h_over_mass, factors):
    """h/(2M_ii) and the method's per-call factors (``particle_factors``) of particle i, once per call."""
    i = cuda.grid(1)  # noqa: F821
    if i < mass_diag.shape[0]:
        half_h_over_mass[i, 0] = 0.5 * h / mass_diag[i, 0]
        particle_factors(coef, h, mass_diag, i, i, factors)  # noqa: F821 (bound: the method's stage; rows in id order)


def advance_template(kick, drift, step, h, q, q_next, omega, grad, half_h_over_mass, margin, coef, mass_diag,
                     factors, ids, heat, reference, terms):
    """Particle i's stages between two gradients (:func:`kernels.system_parallel.advance_range_template`'s, one
    particle): with ``kick``, the last stage of step k (q ← q_{k+1}) and its outcome, 2 if the step's margin
    1 − ‖a_i‖² < 0, 1 if q_i or ω_i holds a NaN or inf, else 0; with ``drift``, the first stage of step k + 1
    (global index ``step``), its margin, its heat (J) and the displacement² since the last build (m²).  Into
    ``terms``: heat at row ids[i] (summed by id), displacement² and outcome at row i."""
    i = cuda.grid(1)  # noqa: F821
    if i < q.shape[0]:
        outcome = 0.0
        if kick:
            integrator_kick(q_next, omega, grad, half_h_over_mass, q, i, coef, mass_diag, ids, heat)  # noqa: F821
            poison = 0.0
            for k in range(3):
                poison += q[i, k, 0] * 0.0 + omega[i, k, 0] * 0.0  # NaN iff some entry is NaN or inf
            if margin[i] < 0.0:
                outcome = 2.0
            elif poison != poison:
                outcome = 1.0
        moved = 0.0
        exchanged = 0.0
        if drift:
            margin[i] = integrator_drift(q, omega, grad, half_h_over_mass, h, q_next, i, step, coef,  # noqa: F821
                                         mass_diag, factors, ids, heat)
            moved = nb.displacement_squared(q_next, reference, i)
            exchanged = heat[i]
        terms[ids[i], 0] = exchanged
        terms[i, 1] = 0.0
        terms[i, 2] = moved
        terms[i, 3] = outcome


def sample_terms_template(q, omega, mass_diag, ids, energies, terms):
    """Particle s's kinetic energy ½ M ‖ω × q‖² and pair energy (J) at rows ids[s] (summed by id), its
    constraint errors |‖q‖ − 1| and |q·ω| at row s (maximised)."""
    s = cuda.grid(1)  # noqa: F821
    if s < q.shape[0]:
        terms[ids[s], 0] = body_kinetic_energy(q, omega, mass_diag, s, 0)
        terms[ids[s], 1] = energies[s]
        terms[s, 2], terms[s, 3] = body_constraint_errors(q, omega, s, 0)


def fold_template(terms, out):
    """Chunk c of FOLD_ROWS rows of ``terms`` (rows, 4) folded by thread c into out[c]: columns 0 and 1 summed in
    row order, 2 and 3 maximised.  :meth:`_March.summary` folds again until one row is left: a tree whose shape the
    number of rows alone fixes, so the sums are the same bits on every launch.  (A block-wide fold in shared memory
    would take fewer launches at 10⁶ particles; numba-cuda's simulator, which the suite runs, takes about a second
    a launch for its barriers.)"""
    c = cuda.grid(1)  # noqa: F821
    if c < out.shape[0]:
        summed0 = summed1 = largest2 = largest3 = 0.0
        for i in range(c * FOLD_ROWS, min((c + 1) * FOLD_ROWS, terms.shape[0])):
            summed0 += terms[i, 0]
            summed1 += terms[i, 1]
            largest2 = max(largest2, terms[i, 2])
            largest3 = max(largest3, terms[i, 3])
        out[c, 0], out[c, 1], out[c, 2], out[c, 3] = summed0, summed1, largest2, largest3


def permute_rows_template(order, source, target):
    """target[s] = source[order[s]] (rows of a per-particle array): into a new storage order."""
    s = cuda.grid(1)  # noqa: F821
    if s < order.shape[0]:
        for c in range(source.shape[1]):
            target[s, c] = source[order[s], c]


def rows_by_id_template(ids, source, target):
    """target[ids[s]] = source[s]: a per-particle array in the caller's order."""
    s = cuda.grid(1)  # noqa: F821
    if s < ids.shape[0]:
        for c in range(source.shape[1]):
            target[ids[s], c] = source[s, c]


def storage_slots_template(ids, slot):
    """slot[ids[s]] = s: each original id's storage index (what the bonded terms read their partners' rows by)."""
    s = cuda.grid(1)  # noqa: F821
    if s < ids.shape[0]:
        slot[ids[s]] = s


def bonded_gradients_template(q, coef, ids, slot, out):
    """Add stored particle s's bonded terms (its bonds and angles, ``bonded_gradient``, all at one configuration q)
    to its row of ∂V/∂q by its own thread, after its pair terms: the CPU's bonded pass
    (:func:`kernels.system_parallel.bonded_gradients_template`)."""
    s = cuda.grid(1)  # noqa: F821
    if s < q.shape[0]:
        g0, g1, g2 = bonded_gradient(q, coef, slot, ids[s], s, 0)  # noqa: F821 (bound: the system's)
        out[s, 0, 0] += g0
        out[s, 1, 0] += g1
        out[s, 2, 0] += g2


def bonded_energies_template(q, coef, ids, slot, out):
    """Add stored particle s's share of its bonds' and angles' energy (J) to out[s], by its own thread."""
    s = cuda.grid(1)  # noqa: F821
    if s < q.shape[0]:
        out[s] += bonded_energy(q, coef, slot, ids[s], s, 0)  # noqa: F821 (bound: the system's)


#: the templates, each a kernel of its name without ``_template``
TEMPLATES = (setup_template, advance_template, sample_terms_template, fold_template, permute_rows_template,
             rows_by_id_template, storage_slots_template, bonded_gradients_template, bonded_energies_template)


@functools.cache
def kernel_functions(method: str, system: str) -> dict:
    """The kernels of ``method`` (a kernel-level name with ``system_stages``) for ``system`` (a pair system) as
    Python functions for numba-cuda, by name: :data:`TEMPLATES` with the method's stages and numba-cuda's module
    bound, the system's pair passes over neighbour rows (:func:`kernels.gpu_neighbours.pair_kernel_functions`) and
    over every pair (:data:`kernels.all_pairs.DEVICE_TEMPLATES`: ``device_terms``)."""
    _register_numpy_math()  # the stages call np.sqrt, np.exp, np.log on scalars
    drift, kick, factors = KERNEL_METHODS[method].system_stages
    pair = system_definition(system).pair
    bindings = {"cuda": cuda_module(), "integrator_drift": drift, "integrator_kick": kick, "particle_factors": factors,
                "pair_energy": pair.energy, "pair_gradient_factor": pair.gradient_factor,
                "bonded_gradient": pair.bonded_gradient, "bonded_energy": pair.bonded_energy}
    tag = f"{method}__{system}"
    return {**{template.__name__.removesuffix("_template"):
               bind_template(template, f"{template.__name__}__{tag}", bindings)
               for template in TEMPLATES + DEVICE_TEMPLATES},
            **pair_kernel_functions(system)}


@functools.cache
def _launchable(method: str, system: str, fma: bool) -> dict:
    """:func:`kernel_functions` as CUDA kernels, compiled at their first launch (inside :func:`nvvm_options` of
    ``fma``: one set of dispatchers per ``fma``)."""
    return {name: cuda_module().jit(function) for name, function in kernel_functions(method, system).items()}


def _rows(array):
    """A per-particle device array (n, …) as (n, columns): the view the row kernels take."""
    return array.reshape(array.shape[0], array.size // array.shape[0])


class _March:
    """One call's arrays on the device and its launches (:func:`run` drives them as the CPU's driver does)."""

    def __init__(self, kernels: dict, q, omega, mass_diag, coef, h: float, list_range: float | None,
                 bonded: bool = False):
        """``list_range`` (m): r_c + skin of the neighbour lists, or None for the all-pairs term (no list);
        ``bonded``: whether the system has bonded terms, gathered after the pair terms."""
        cuda = cuda_module()
        n = q.shape[0]
        self.kernels, self.n, self.h, self.bonded = kernels, n, h, bonded
        self.slot = cuda.to_device(np.arange(n, dtype=np.int64))  # each id's storage index
        # the per-particle arrays, in storage order (ids maps them back); a rebuild gathers them into the spares
        # (n, 3, 1) copies: a new axis of a view has stride 0, which the simulator's copies take for a broadcast
        self.particles = {"q_next": cuda.to_device(q.reshape(n, 3, 1).copy()),
                          "omega": cuda.to_device(omega.reshape(n, 3, 1).copy()),
                          "mass_diag": cuda.to_device(np.ascontiguousarray(mass_diag[:, np.newaxis])),
                          "half_h_over_mass": cuda.device_array((n, 1)), "margin": cuda.to_device(np.ones(n)),
                          "factors": cuda.to_device(np.zeros((n, sp.PARTICLE_FACTORS))),
                          "ids": cuda.to_device(np.arange(n, dtype=np.int64))}
        self.spare = {name: cuda.device_array_like(array) for name, array in self.particles.items()}
        self.coef = cuda.to_device(np.ascontiguousarray(coef.T))
        self.q, self.grad = cuda.device_array((n, 3, 1)), cuda.device_array((n, 3, 1))
        self.heat, self.energies = cuda.to_device(np.zeros(n)), cuda.device_array(n)
        self.terms = cuda.device_array((n, 4))
        self.folds = []  # fold_template's results, each of a FOLD_ROWS-th of the rows before, down to one row
        rows = n
        while rows > 1:
            rows = -(-rows // FOLD_ROWS)
            self.folds.append(cuda.device_array((rows, 4)))
        self.by_id = cuda.device_array((n, 3))
        self.lists = None
        # the positions displacements are measured from: the list's build, or (all pairs) the origin, unused
        self.reference = cuda.to_device(np.zeros((n, 3)))
        launch(kernels["setup"], n, h, self.particles["mass_diag"], self.coef, self.particles["half_h_over_mass"],
               self.particles["factors"])
        if list_range is not None:
            self.rebuild(list_range)
        self.q.copy_to_device(self.particles["q_next"])
        self.gradient()

    def rebuild(self, list_range: float) -> None:
        """A new list from the positions q_next, and the particles gathered into its storage order."""
        capacity = None if self.lists is None else self.lists.neighbours.shape[1]
        self.lists = build_full_rows(_rows(self.particles["q_next"]), list_range, capacity, self.particles["ids"])
        self.reference = self.lists.stored
        for name, array in self.particles.items():
            launch(self.kernels["permute_rows"], self.n, self.lists.order, _rows(array), _rows(self.spare[name]))
            self.particles[name], self.spare[name] = self.spare[name], array
        launch(self.kernels["storage_slots"], self.n, self.particles["ids"], self.slot)

    def gradient(self) -> None:
        """∂V/∂q at q_next, each particle's own row (or all of its partners, without a list)."""
        if self.lists is None:
            launch(self.kernels["device_terms"], self.n, _rows(self.particles["q_next"]), self.coef, False,
                   _rows(self.grad))
        else:
            launch(self.kernels["gather_gradient"], self.n, _rows(self.particles["q_next"]), self.coef,
                   self.particles["ids"], self.lists.neighbours, self.lists.counts, _rows(self.grad))
        if self.bonded:
            launch(self.kernels["bonded_gradients"], self.n, self.particles["q_next"], self.coef, self.particles["ids"],
                   self.slot, self.grad)

    def summary(self) -> np.ndarray:
        """The folded ``terms`` (:func:`fold_template`): (sum, sum, max, max) on the host."""
        rows = self.terms
        for out in self.folds:
            launch(self.kernels["fold"], out.shape[0], rows, out)
            rows = out
        return rows.copy_to_host()[0]

    def advance(self, kick: bool, drift: bool, step: int) -> tuple[int, float, float]:
        """:func:`advance_template` on every particle: (the step's status, the largest displacement² since the
        last build (m²), the drifts' heat (J))."""
        p = self.particles
        launch(self.kernels["advance"], self.n, kick, drift, step, self.h, self.q, p["q_next"], p["omega"], self.grad,
               p["half_h_over_mass"], p["margin"], self.coef, p["mass_diag"], p["factors"], p["ids"], self.heat,
               self.reference, self.terms)
        heat, _, moved, outcome = self.summary()
        return OUTCOMES[float(outcome)], float(moved), float(heat)

    def in_callers_order(self, array, into: np.ndarray) -> None:
        """A per-particle (n, 3, 1) array of the device, by id, into the host's ``into`` (n, 3)."""
        launch(self.kernels["rows_by_id"], self.n, self.particles["ids"], _rows(array), self.by_id)
        self.by_id.copy_to_host(into)

    def record(self, sample: int, out: dict, exchanged: float, save_state: bool) -> None:
        """Sample ``sample`` of ``out`` (:func:`kernels.system_parallel.empty_outputs`) at q: E = T + V, T/n, the
        constraint errors, the heat so far; q and ω by id with ``save_state``."""
        p = self.particles
        if self.lists is None:
            launch(self.kernels["device_terms"], self.n, _rows(self.q), self.coef, True, _rows(self.energies))
        else:
            launch(self.kernels["gather_energies"], self.n, _rows(self.q), self.coef, p["ids"], self.lists.neighbours,
                   self.lists.counts, self.energies)
        if self.bonded:
            launch(self.kernels["bonded_energies"], self.n, self.q, self.coef, p["ids"], self.slot, self.energies)
        launch(self.kernels["sample_terms"], self.n, self.q, p["omega"], p["mass_diag"], p["ids"], self.energies,
               self.terms)
        kinetic, potential, unit_error, tangency_error = self.summary()
        out["energy"][0, sample] = kinetic + potential
        out["temperature"][0, sample] = kinetic / self.n
        out["unit_error"][0, sample], out["tangency_error"][0, sample] = unit_error, tangency_error
        out["exchanged"][0, sample] = exchanged
        if save_state:
            self.in_callers_order(self.q, out["q"][0, sample])
            self.in_callers_order(p["omega"], out["omega"][0, sample])


def run(system, method: str, q, omega, mass_diag, coef, dt: float, n_steps: int, save_every: int,
        skin: float | str | None, keep_state: bool, threads: int, start_step: int, carried: np.ndarray,
        fma: bool = True) -> dict:
    """:func:`kernels.system_parallel.run` on the GPU (the same arguments and results; ``threads`` unused, ``fma``:
    :func:`kernels.gpu.nvvm_options`): the CPU's list driver (:func:`kernels.domain.run_decomposed` on one rank), step
    for step, with the launches of the module's text.  ``info``'s capacity is the full rows'.  A pair potential
    without a cutoff takes :func:`kernels.system_parallel.drive_all_pairs`'s course: every gradient over all pairs
    (:func:`kernels.all_pairs.device_terms_template`), no list (0 builds, capacity 0)."""
    n = q.shape[1]
    all_pairs, cutoff, skin, adaptive = sp.pair_term_ranges(system, n, skin)
    out = sp.empty_outputs(n, n_steps, save_every, keep_state)
    heat_end = carried[0, -1:].copy()
    exchanged = float(heat_end[0])
    heat = KERNEL_METHODS[method].heat
    q_final, omega_final = np.empty((1, n, 3)), np.empty((1, n, 3))
    with nvvm_options(fma):
        march = _March(_launchable(method, system.name, fma), q[0], omega[0], mass_diag[0], coef, float(dt),
                       None if all_pairs else cutoff + skin, system.definition.pair.bonded_present(system.params))
        rebuilds, built_at, failed = 0 if all_pairs else 1, 0, -1
        march.record(0, out, exchanged, keep_state)
        # the drift of step k (1-based in the call) is the run's step start_step + k − 1
        status, moved, step_heat = march.advance(False, n_steps > 0, start_step)
        for k in range(1, n_steps + 1):
            if heat:
                exchanged += step_heat
            if not all_pairs and nb.beyond_half_skin(moved, skin):
                if adaptive:
                    skin = nb.automatic_skin(skin, k - built_at, cutoff)
                march.rebuild(cutoff + skin)
                rebuilds += 1
                built_at = k
            march.gradient()
            saved = k % save_every == 0
            # the next step's drift joins this kick unless a sample (the state between them) is recorded first
            status, moved, step_heat = march.advance(True, k < n_steps and not saved, start_step + k)
            if status != OK:
                failed = k
                break
            if saved:
                march.record(k // save_every, out, exchanged, keep_state)
                if k < n_steps:
                    status, moved, step_heat = march.advance(False, True, start_step + k)
        march.in_callers_order(march.q, q_final[0])
        march.in_callers_order(march.particles["omega"], omega_final[0])
    heat_end[0] = exchanged
    if not all_pairs:
        out["neighbour_skin"][0] = skin
    info = np.array([status, failed, rebuilds, 0 if all_pairs else march.lists.neighbours.shape[1]], np.int64)
    return sp.finished(out, method, info, q_final, omega_final, heat_end, carried)
