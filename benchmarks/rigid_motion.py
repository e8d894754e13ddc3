"""Rigid bodies in an ideal fluid (SE(3)): member-steps per second of `kirchhoff_body` `ellipsoid` in
Armillary (lgvi; rk4 in each of the four formulations) on all cores, against MuJoCo's multithreaded
rollout of the same spheroid with its ellipsoid fluid model, and each one's energy error after 10⁵ steps,
all measured in the same run.

    .venv/bin/python benchmarks/rigid_motion.py [--members 10000] [--steps 1000] [--mujoco-steps 200]
        [--dt 1e-3] [--repeats 3] [--threads N] [--energy-steps 100000] [--no-mujoco]

The body: ``get_system("kirchhoff_body", "ellipsoid")``: a neutrally buoyant solid prolate spheroid, semi-axes
(1, 0.25, 0.25) m, in water (1000 kg/m³), with Lamb's added masses (diagonal: translation (21.35, 225.08,
225.08) kg, rotation (0, 33.82, 33.82) kg·m², see ``ellipsoid_added_mass``), no gravity, translating at 1 m/s
0.1 rad off its long axis and turning at 0.05 rad/s.  Members: that state with Ω + 1e-3·N(0, 1) rad/s (seed 0).
MuJoCo: a free body carrying an ellipsoid geom of the same semi-axes and density (so the same mass and
inertia), ``fluidshape="ellipsoid"`` with ``fluidcoef="0 0 0 0 0"`` (no drag, lift or Magnus force) in a
medium of density 1000 and viscosity 0, gravity off, contacts off.  MuJoCo's ellipsoid model uses the same
(Tuckerman/Lamb) added-mass coefficients but, being stateless, applies only their velocity terms
(m_A∘v) × ω and (m_A∘v) × v + (I_A∘ω) × ω: the added inertia −m_A∘v̇, −I_A∘ω̇ is left out of its mass
matrix, so it integrates a different motion from Kirchhoff's.  The script shows that: it prints both codes'
attitude and position after 1 s from the same state, and Kirchhoff's energy ½ zᵀ𝕄z (kinetic energy of body
plus fluid, which Kirchhoff's equations conserve) evaluated on MuJoCo's states.
Timing: fastest of ``--repeats`` (every rate printed), as in ``benchmarks/rigid_body.py``; Armillary after
a compiling call of 2 steps, MuJoCo after a warm-up rollout.
Energy: one member (the preset's state), --energy-steps steps of h; printed max over the run of
|E(t) − E(0)|/|E(0)| and the same at the end.

Targets (2 cores): lgvi ≥ 5e6 member-steps/s and ≥ 20× MuJoCo's RK4 rollout of the same body.
MuJoCo comes from the ``mujoco`` PyPI package (the ``bench`` extra); without it, or with --no-mujoco,
the MuJoCo rows are skipped and say why.
"""

import argparse
import sys

import numpy as np
from machine import run_conditions, run_start
from timing import (MuJoCoRollout, add_comparison_arguments, armillary_rates, comparison_header,
                    import_mujoco, lgvi_targets, one_member, perturbed_members, preset_energy_errors,
                    quaternion_matrices, rates_text, relative_errors)

# This script's folder holds benchmarks/kernels.py, named like the package it measures: keep it off the path.
sys.path = [p for p in sys.path if not p.endswith("benchmarks")]

from armillary.kernels import get_system, integrate  # noqa: E402
from armillary.kernels.integration import default_threads  # noqa: E402
from armillary.kernels.systems.kirchhoff_body import SPHEROID_AXES, WATER, generalised_inertia  # noqa: E402

LGVI_TARGET, MUJOCO_FACTOR_TARGET = 5e6, 20.0
FORMULATIONS = ("kirchhoff", "newton_euler", "hybrid", "lagrange")


def kirchhoff_energy(matrix, omega, velocity) -> np.ndarray:
    """½ zᵀ𝕄z (J) for z = (Ω, V) (…, 6)."""
    z = np.concatenate([omega, velocity], axis=-1)
    return 0.5 * np.einsum("...i,ij,...j->...", z, matrix, z)


def mujoco_xml(dt: float, integrator: str) -> str:
    a, b, c = SPHEROID_AXES
    return f"""<mujoco model="spheroid in water">
  <option timestep="{dt:.17g}" integrator="{integrator}" gravity="0 0 0" density="{WATER:g}" viscosity="0">
    <flag contact="disable"/>
  </option>
  <worldbody>
    <body name="spheroid">
      <freejoint/>
      <geom type="ellipsoid" size="{a:g} {b:g} {c:g}" density="{WATER:g}" fluidshape="ellipsoid" fluidcoef="0 0 0 0 0"/>
    </body>
  </worldbody>
</mujoco>"""


class MuJoCoBody(MuJoCoRollout):
    """The spheroid in MuJoCo with one integrator and step: rollouts of Armillary states (free joint: qpos =
    position and quaternion of body → world; qvel = world-frame velocity of the origin, body-frame Ω)."""

    def __init__(self, mujoco, dt: float, integrator: str, threads: int):
        super().__init__(mujoco, mujoco_xml(dt, integrator), threads)

    def initial_states(self, state) -> np.ndarray:
        R, x = state["R"][:, 0], state["x"][:, 0]
        states = np.zeros((len(R), self.nstate))
        self.set_rotations(states, R, self.qpos + 3)
        states[:, self.qpos:self.qpos + 3] = x
        states[:, self.qvel:self.qvel + 3] = np.einsum("mij,mj->mi", R, state["V"][:, 0])
        states[:, self.qvel + 3:self.qvel + 6] = state["Omega"][:, 0]
        return states

    def pose_and_velocities(self, states):
        """R (…, 3, 3), x (…, 3), Ω (…, 3), V (…, 3, body frame) of rollout states."""
        R = quaternion_matrices(states[..., self.qpos + 3:self.qpos + 7])
        velocity = np.einsum("...ji,...j->...i", R, states[..., self.qvel:self.qvel + 3])
        return R, states[..., self.qpos:self.qpos + 3], states[..., self.qvel + 3:self.qvel + 6], velocity


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_comparison_arguments(parser)
    parser.add_argument("--no-mujoco", action="store_true")
    args = parser.parse_args()
    if args.repeats < 3:
        parser.error("--repeats must be at least 3: this VM's speed drifts, only the fastest of several counts")
    threads = args.threads or default_threads()
    start = run_start()

    system = get_system("kirchhoff_body", "ellipsoid")
    matrix = generalised_inertia(system.broadcast(1, 1))[0]
    state = perturbed_members(system, args.members)
    one = one_member(system.initial_state())
    mujoco, why_not = import_mujoco(args.no_mujoco)
    print(comparison_header("kirchhoff_body ellipsoid", threads, args, mujoco))

    rows = []  # (case, rates, energy errors)
    for method, formulation in [("lgvi", None)] + [("rk4", form) for form in FORMULATIONS]:
        options = {} if formulation is None else {"formulation": formulation}
        case = f"Armillary {method}" + (f" {formulation}" if formulation else "")
        rates = armillary_rates(system, method, state, args.dt, args.steps, args.repeats, threads, **options)
        rows.append((case, rates, preset_energy_errors(system, method, args.dt, args.energy_steps, **options)))
        print(f"  {case}: {rates_text(rates)} member-steps/s", flush=True)
    if mujoco:
        check_steps = int(round(1.0 / args.dt))
        reference = integrate(system, "rk45", one, args.dt, check_steps, check_steps, rtol=1e-12, atol=1e-14)
        for integrator in ("RK4", "Euler"):
            sim = MuJoCoBody(mujoco, args.dt, integrator, threads)
            rates = sim.rates(sim.initial_states(state), args.mujoco_steps, args.repeats)
            single = MuJoCoBody(mujoco, args.dt, integrator, 1)
            initial = single.initial_states(one)
            states = single.run(initial, args.energy_steps)[0]
            _, _, omega, velocity = single.pose_and_velocities(np.concatenate([initial, states]))
            rows.append((f"MuJoCo {integrator} rollout", rates,
                         relative_errors(kirchhoff_energy(matrix, omega, velocity))))
            R, x, _, _ = single.pose_and_velocities(states[check_steps - 1])
            print(f"  MuJoCo {integrator}: {rates_text(rates)} member-steps/s; after 1 s from "
                  f"the same state it differs from Kirchhoff's motion (rk45, rtol 1e-12) by max |ΔR| = "
                  f"{np.abs(R - reference.final['R'][0, 0]).max():.1e}, |Δx| = "
                  f"{np.abs(x - reference.final['x'][0, 0]).max():.1e} m", flush=True)
    else:
        print(f"MuJoCo skipped: {why_not}")

    reference_rate = next((max(r) for case, r, _ in rows if case == "MuJoCo RK4 rollout"), None)
    print()
    print(f"{'case':<28}{'member-steps/s':>16}{'/ MuJoCo RK4':>14}{'/ rk4 kirchhoff':>17}"
          f"{f'max |dE|/|E0| over {args.energy_steps} steps':>38}{'at the end':>12}")
    kirchhoff_rate = max(next(r for case, r, _ in rows if case == "Armillary rk4 kirchhoff"))
    for case, rates, errors in rows:
        ratio = f"{max(rates) / reference_rate:.3g}" if reference_rate else "-"
        print(f"{case:<28}{max(rates):>16.3e}{ratio:>14}{max(rates) / kirchhoff_rate:>17.3g}"
              f"{errors[0]:>38.1e}{errors[1]:>12.1e}")
    print()
    lgvi_rate = max(rows[0][1])
    mujoco_text = (f"{reference_rate:.3e}: {lgvi_rate / reference_rate:.1f}x" if reference_rate
                   else f"not measured ({why_not})")
    print(f"lgvi {lgvi_rate:.3e} member-steps/s, MuJoCo RK4 rollout {mujoco_text} (each the fastest of "
          f"{args.repeats}, {threads} threads)")
    print(lgvi_targets(lgvi_rate, reference_rate, LGVI_TARGET, MUJOCO_FACTOR_TARGET, why_not, 1))
    print(run_conditions(start))


if __name__ == "__main__":
    main()
