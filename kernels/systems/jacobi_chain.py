"""The spherical chain's paths at a fixed energy as geodesics: the Jacobi–Maupertuis metric on (S²)ⁿ, a
kinetic energy with configuration-dependent inertia (Lee–Leok–McClamroch eq. (12)).

By Jacobi's form of the principle of least action, the motions of the chain pendulum
(:mod:`kernels.systems.spherical_chain`, inertia M_jk = (Σ_{k' ≥ max(j,k)} m_k') l_j l_k, potential
V(q) = −Σ_i c_i e·q_i with c_i = (Σ_{k≥i} m_k) g l_i) with energy E trace the geodesics of the metric
m_jk(q) = 2 (E − V(q)) M_jk (Arnold, "Mathematical methods of classical mechanics", §45D; Lanczos,
"The variational principles of mechanics", V.6).  This system is that geodesic flow: kinetic energy
T = ½ Σ_jk m_jk(q) q̇_j·q̇_k and no potential, so T is its conserved energy, and m is invariant about the
gravity direction e, so is the angular momentum e·Σ_jk m_jk(q) q_j × q̇_k.  Its time τ is not the chain's:
along a geodesic with T = C, dt/dτ = √(C/2) / (E − V(q)) (from ½ q̇ᵀ M q̇ = E − V for the chain).

∂m_jk/∂q_i = −2 M_jk ∂V/∂q_i = 2 M_jk c_i e.  The metric is positive definite where V < E; ``path_energy``
must exceed the potential's maximum Σ_i c_i so that it is everywhere.  (Rigid rods instead of point
masses would not give an example of eq. (12)'s q-dependence: a thin rod's kinetic energy is again a
constant-coefficient form in the q̇_j.)  ``vi`` steps it by its implicit path with the symmetric discrete
Lagrangian of :func:`kernels.integrators.vi.implicit_vi_step`, the Runge–Kutta methods in any formulation.
"""

import numpy as np

from ..errors import InvalidInput
from ..lanes import lane_function
from .base import SCALAR, Parameter, Preset, SystemDefinition, unit_rows
from .spherical_chain import chain_inertia, chain_parameters, potential_coefficients
from .spherical_chain import potential as chain_potential


def _coefficients(params, n):
    """[c_1..c_n, e_x, e_y, e_z, E, M_11, M_12, …, M_nn] (N·m, 1, J, kg·m²)."""
    mass = chain_inertia(params, n)
    return np.concatenate([potential_coefficients(params), params["gravity_direction"],
                           params["path_energy"][:, np.newaxis], mass.reshape(mass.shape[0], n * n)], axis=1)


def _check(params):
    shaped = {"m": np.atleast_2d(params["m"]), "l": np.atleast_2d(params["l"]), "g": np.atleast_1d(params["g"])}
    highest = np.sum(potential_coefficients(shaped), axis=-1)
    if not np.all(params["path_energy"] > highest):
        raise InvalidInput("path_energy", f"must exceed the chain's highest potential Σ_i (Σ_k≥i m_k) g l_i = "
                           f"{np.max(highest):.6g} J (the metric 2(E − V) M degenerates where V = E), got "
                           f"{np.min(params['path_energy'])!r}")


@lane_function
def configuration_inertia(q, coef, topology, out):
    """m_jk(q) = 2 (E − V(q)) M_jk (kg·m²·J)."""
    n = q.shape[0]
    chain_energy = np.empty(q.shape[2])
    chain_potential(q, coef, topology, chain_energy)  # coef starts with the chain's [c, e]
    for b in range(q.shape[2]):
        factor = 2.0 * (coef[n + 3, b] - chain_energy[b])
        for j in range(n):
            for k in range(n):
                out[j, k, b] = factor * coef[n + 4 + n * j + k, b]


@lane_function
def configuration_inertia_gradient(q, coef, topology, out):
    """∂m_jk/∂q_i = 2 M_jk c_i e, at out[j, k, i]."""
    n = q.shape[0]
    for j in range(n):
        for k in range(n):
            for i in range(n):
                for a in range(3):
                    for b in range(q.shape[2]):
                        out[j, k, i, a, b] = 2.0 * coef[n + 4 + n * j + k, b] * coef[i, b] * coef[n + a, b]


@lane_function
def no_potential(q, coef, topology, out):
    for b in range(q.shape[2]):
        out[b] = 0.0


@lane_function
def no_gradient(q, coef, topology, out):
    out[:] = 0.0


def _double():
    """A double chain (m = 1 kg, l = 1 m) at E = 40 J, above its highest potential 29.43 J."""
    q0 = unit_rows([[0.6, 0.0, 0.8], [0.0, 0.6, 0.8]])
    return Preset(
        doc="double chain, m = (1, 1) kg, l = (1, 1) m, g = 9.81 m/s², path energy 40 J",
        params={"m": [1.0, 1.0], "l": [1.0, 1.0], "g": 9.81, "path_energy": 40.0},
        state={"q": q0, "omega": np.cross(q0, [[0.0, 0.1, 0.0], [0.1, 0.0, 0.0]])},
    )


DEFINITION = SystemDefinition(
    name="jacobi_chain",
    summary="geodesics of the spherical chain's Jacobi metric 2(E − V(q)) M: configuration-dependent inertia",
    parameters=(
        *chain_parameters(),
        Parameter("path_energy", SCALAR, "J", "the chain's energy E whose paths are the geodesics"),
    ),
    presets={"double": _double},
    diagonal_inertia=False,
    bodies=lambda params: params["m"].shape[-1],
    inertia=None,
    coefficients=_coefficients,
    potential=no_potential,
    gradient=no_gradient,
    symmetry_axis=lambda params: params["gravity_direction"],
    configuration_inertia=configuration_inertia,
    configuration_inertia_gradient=configuration_inertia_gradient,
    check=_check,
    provides=frozenset({"potential", "gradient", "configuration_inertia"}),
)
