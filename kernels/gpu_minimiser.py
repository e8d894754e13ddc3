"""The system mode of a minimisation (``method = "fire"``) on a CUDA GPU: one large member of a pair potential without
a cutoff, a thread per particle (:mod:`kernels.system_minimiser` on the CPU's threads).

A FIRE step is the CPU's, composed of the same per-particle stages of :mod:`kernels.integrators.fire`, compiled for
the device:

- **Gradient**: each particle's ∂V/∂q summed by its own thread over every other particle in increasing id, tiles of
  positions in shared memory (:func:`kernels.all_pairs.device_terms_template`).
- **Sums** (:func:`sums_template`): each particle's torque and its terms of the power and norms
  (``fire_particle_sums``) into its own row of ``terms``; then folded (:func:`fold_sums_template`, ``combine_sums``)
  in chunks of FOLD_ROWS rows by id, then chunks of their results, a tree whose shape n alone fixes.  The SUMS
  numbers cross to the host.
- **Control**: FIRE's ``fire_control`` and ``fire_verdict`` on the host (the CPU's own jitted functions), on the
  folded sums and the carried state.
- **Move** (:func:`move_template`): each particle's restart, kick, mixing and geodesic move (``fire_particle_move``).

Every sum runs by id in a tree fixed by n, so a run gives the same bits whatever its restart points; the CPU's
system mode to round-off (its chunks group the sums otherwise, and the device fuses multiply–adds unless
``fma = False``).  A sample records V (the particles' energies summed by id), the largest tangential force and the
constraint errors' maxima (:func:`kernels.gpu_system.sample_terms_template`'s folds).
"""

from __future__ import annotations

import functools

import numpy as np

from .all_pairs import DEVICE_TEMPLATES
from .gpu import _register_numpy_math, cuda_module, launch, nvvm_options
from .gpu_system import FOLD_ROWS, _rows, fold_template, rows_by_id_template, sample_terms_template
from .integrators.fire import (CONVERGED, ENERGY_TOLERANCE, FORCE_TOLERANCE, LARGEST_TORQUE, MAX_STEP, MAX_STEPS,
                               POTENTIAL, SUMS, clear_sums, combine_sums, fire_control, fire_particle_move,
                               fire_particle_sums, fire_verdict)
from .lanes import bind_template
from .status import NON_FINITE, OK
from .system_minimiser import minimisation_outcome
from .system_parallel import check_no_skin, empty_outputs
from .systems import system_definition


def sums_template(q, grad, omega, mass_diag, torque, terms):
    """Particle i's torque into torque[i] and its terms of the step's sums into terms[i] (its own row: cleared, then
    ``fire_particle_sums``)."""
    i = cuda.grid(1)  # noqa: F821
    if i < q.shape[0]:
        row = terms[i]
        clear_sums(row)
        fire_particle_sums(q, grad, omega, mass_diag[i, 0], torque, i, row)


def fold_sums_template(terms, out):
    """Chunk c of FOLD_ROWS rows of ``terms`` (rows, SUMS) combined in row order by thread c into out[c]
    (``combine_sums``); folded again until one row is left (:meth:`_Minimisation.sums`)."""
    c = cuda.grid(1)  # noqa: F821
    if c < out.shape[0]:
        folded = out[c]
        clear_sums(folded)
        for i in range(c * FOLD_ROWS, min((c + 1) * FOLD_ROWS, terms.shape[0])):
            combine_sums(folded, terms[i])


def move_template(q, omega, torque, mass_diag, step, alpha, steer, restart):
    """Particle i's restart, kick, mixing and geodesic move (``fire_particle_move``)."""
    i = cuda.grid(1)  # noqa: F821
    if i < q.shape[0]:
        fire_particle_move(q, omega, torque, mass_diag[i, 0], step, alpha, steer, restart, i)


#: the templates, each a kernel of its name without ``_template``: this module's, the system mode's sample terms and
#: folds, and the all-pairs term's
TEMPLATES = (sums_template, fold_sums_template, move_template, sample_terms_template, fold_template,
             rows_by_id_template) + DEVICE_TEMPLATES


@functools.cache
def kernel_functions(system: str) -> dict:
    """:data:`TEMPLATES` with numba-cuda's module and ``system``'s pair functions bound, as Python functions for
    numba-cuda, by name."""
    _register_numpy_math()  # the stages call np.sqrt on scalars
    pair = system_definition(system).pair
    bindings = {"cuda": cuda_module(), "pair_energy": pair.energy, "pair_gradient_factor": pair.gradient_factor}
    return {template.__name__.removesuffix("_template"): bind_template(template, f"{template.__name__}__fire__{system}",
                                                                       bindings)
            for template in TEMPLATES}


@functools.cache
def _launchable(system: str, fma: bool) -> dict:
    """:func:`kernel_functions` as CUDA kernels (one set of dispatchers per ``fma``)."""
    return {name: cuda_module().jit(function) for name, function in kernel_functions(system).items()}


class _Minimisation:
    """One call's arrays on the device and its launches (:func:`run` drives them)."""

    def __init__(self, kernels: dict, q, omega, mass_diag, coef):
        cuda = cuda_module()
        n = q.shape[0]
        self.kernels, self.n = kernels, n
        self.q = cuda.to_device(q.reshape(n, 3, 1).copy())
        self.omega = cuda.to_device(omega.reshape(n, 3, 1).copy())
        self.mass_diag = cuda.to_device(np.ascontiguousarray(mass_diag[:, np.newaxis]))
        self.coef = cuda.to_device(np.ascontiguousarray(coef.T))
        self.ids = cuda.to_device(np.arange(n, dtype=np.int64))
        self.grad, self.torque = cuda.device_array((n, 3, 1)), cuda.device_array((n, 3))
        self.energies = cuda.device_array(n)
        self.terms, self.sample_terms = cuda.device_array((n, SUMS)), cuda.device_array((n, 4))
        self.folds, self.sample_folds = [], []  # each a FOLD_ROWS-th of the rows before, down to one row
        rows = n
        while rows > 1:
            rows = -(-rows // FOLD_ROWS)
            self.folds.append(cuda.device_array((rows, SUMS)))
            self.sample_folds.append(cuda.device_array((rows, 4)))
        self.by_id = cuda.device_array((n, 3))

    def sums(self) -> np.ndarray:
        """The gradient at q, every particle's torque and terms, folded: the step's SUMS numbers on the host."""
        launch(self.kernels["device_terms"], self.n, _rows(self.q), self.coef, False, _rows(self.grad))
        launch(self.kernels["sums"], self.n, self.q, self.grad, self.omega, self.mass_diag, self.torque, self.terms)
        rows = self.terms
        for out in self.folds:
            launch(self.kernels["fold_sums"], out.shape[0], rows, out)
            rows = out
        return rows.copy_to_host()[0]

    def move(self, step: float, alpha: float, steer: float, restart: bool) -> None:
        launch(self.kernels["move"], self.n, self.q, self.omega, self.torque, self.mass_diag, step, alpha, steer,
               restart)

    def sample(self) -> np.ndarray:
        """(kinetic, V, unit error, tangency error) at q: the particles' energies by id, the errors' maxima."""
        launch(self.kernels["device_terms"], self.n, _rows(self.q), self.coef, True, _rows(self.energies))
        launch(self.kernels["sample_terms"], self.n, self.q, self.omega, self.mass_diag, self.ids, self.energies,
               self.sample_terms)
        rows = self.sample_terms
        for out in self.sample_folds:
            launch(self.kernels["fold"], out.shape[0], rows, out)
            rows = out
        return rows.copy_to_host()[0]

    def in_callers_order(self, array, into: np.ndarray) -> None:
        """A per-particle (n, 3, 1) array of the device into the host's ``into`` (n, 3)."""
        launch(self.kernels["rows_by_id"], self.n, self.ids, _rows(array), self.by_id)
        self.by_id.copy_to_host(into)


def run(system, q, omega, mass_diag, coef, dt: float, n_steps: int, save_every: int, skin, keep_state: bool,
        carried: np.ndarray, option_vector: np.ndarray, fma: bool = True) -> dict:
    """:func:`kernels.system_minimiser.run` on the GPU (the same arguments and results; ``fma``:
    :func:`kernels.gpu.nvvm_options`): the CPU driver's course, step for step, with the launches of the module's
    text.  Every pair is summed: a pair potential with a cutoff (neighbour lists,
    :func:`kernels.system_minimiser.drive_fire_lists`) is refused before this by :func:`kernels.gpu.check_supported`."""
    n = q.shape[1]
    check_no_skin(skin)
    out = empty_outputs(n, n_steps, save_every, keep_state)
    del out["temperature"]  # a minimisation's velocities are no motion
    force_tolerance, energy_tolerance = option_vector[FORCE_TOLERANCE], option_vector[ENERGY_TOLERANCE]
    max_steps, max_step = option_vector[MAX_STEPS], option_vector[MAX_STEP]
    row = np.ascontiguousarray(carried[0]).copy()
    q_final, omega_final = np.empty((1, n, 3)), np.empty((1, n, 3))
    with nvvm_options(fma):
        march = _Minimisation(_launchable(system.name, fma), q[0], omega[0], mass_diag[0], coef)

        def record(sample: int, largest: float) -> float:
            _, potential, unit_error, tangency_error = march.sample()
            out["energy"][0, sample], out["exchanged"][0, sample] = potential, largest
            out["unit_error"][0, sample], out["tangency_error"][0, sample] = unit_error, tangency_error
            if keep_state:
                march.in_callers_order(march.q, out["q"][0, sample])
                march.in_callers_order(march.omega, out["omega"][0, sample])
            return potential

        sums = march.sums()
        start = record(0, sums[LARGEST_TORQUE])
        if energy_tolerance > 0.0 and row[POTENTIAL] != row[POTENTIAL]:
            row[POTENTIAL] = start
        code, stopped_at, taken = OK, -1, 0
        for k in range(1, n_steps + 1):
            if code == OK and row[CONVERGED] == 0.0:
                march.move(*fire_control(sums, row, dt, max_step))
                taken += 1
                sums = march.sums()
                potential = march.sample()[1] if energy_tolerance > 0.0 else 0.0
                code = fire_verdict(sums, potential, row, force_tolerance, energy_tolerance, max_steps)
                stopped_at = k if code != OK else -1
            if k % save_every == 0:
                record(k // save_every, sums[LARGEST_TORQUE] if code != NON_FINITE else np.nan)
        march.in_callers_order(march.q, q_final[0])
        march.in_callers_order(march.omega, omega_final[0])
    carried[0] = row
    return minimisation_outcome(out, code, stopped_at, taken, q_final, omega_final)
