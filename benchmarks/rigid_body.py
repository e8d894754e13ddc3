"""Rigid bodies: member-steps per second of the chaotic heavy top in Armillary (lgvi, rk4) on all cores,
against MuJoCo's multithreaded rollout of the same top (its RK4 and its default Euler integrator) and
scipy's solve_ivp (RK45), and the energy error of each over 10⁵ steps, all measured in the same run.

    .venv/bin/python benchmarks/rigid_body.py [--members 10000] [--steps 1000] [--mujoco-steps 200]
        [--dt 1e-3] [--repeats 3] [--threads N] [--energy-steps 100000] [--no-mujoco]

The top: ``get_system("heavy_top", "chaotic")``: one body turning about a fixed pivot, mass m = 1 kg,
centre of mass c = (0.3, 0.2, 0.4) m (body frame, from the pivot), inertia about the pivot
diag(2, 1.6, 1) kg·m², g = 9.81 m/s² along Armillary's gravity direction e = (0, 0, 1) (+z is "down"),
started tilted 1 rad from upright with Ω = (1, 2, 3) rad/s (body frame).  Members: that state with
Ω + 1e-3·N(0, 1) rad/s each (seed 0).  h = --dt (1e-3 s).
MuJoCo: the same top as MJCF: a body at the origin on a ball joint, ``<inertial pos=c mass=m
fullinertia=I_c>`` with the inertia about the centre of mass I_c = I_pivot − m(|c|²·1 − c cᵀ) (parallel
axes), gravity (0, 0, +9.81) (Armillary's +z), contacts off, no damping or armature; qpos is the
quaternion of R (body → world) and qvel = Ω in the body frame.  The script checks this by stepping both
codes 1000 steps at h = 1e-4 (MuJoCo RK4 against Armillary rk4) and printing the largest differences
of R and Ω, and by printing both energies of the initial state.
Timing: each case is timed ``--repeats`` times and the fastest counts (every rate is printed), because
this kind of VM's speed drifts by up to 2× within minutes; the hypervisor's steal over the run and the
load average (other processes on the machine slow every case) are printed too.
  Armillary: ``integrate(system, method, state, h, --steps, save_every=--steps, outputs=())`` on
    ``--threads`` threads (default: all), after one compiling call of 2 steps.
  MuJoCo: ``mujoco.rollout.rollout(model, [MjData] * threads, initial_state, nstep=--mujoco-steps)``
    (one MjData per thread: its thread pool), into a preallocated state array, after a warm-up call;
    MuJoCo steps far slower, hence fewer steps (its cost per step does not depend on the step count).
  scipy: ``solve_ivp`` RK45, rtol 1e-10, atol 1e-12, on Euler's equations (Ṙ = R Ω̂,
    J Ω̇ = J Ω × Ω + m g c × Rᵀe) of one member over --scipy-span s; its rate is the simulated time per
    wall time in steps of h: (span/h)/(wall time).  Its end state is compared with Armillary's rk4.
Energy: one member (the preset's state), --energy-steps steps of h (10⁵: 100 s), E = ½ Ω·J Ω − m g e·(R c)
evaluated every step (Armillary's own energy output; for MuJoCo the same formula on its qpos, qvel);
printed: max over the run of |E(t) − E(0)|/|E(0)| and the same at the end.

Targets (2 cores): lgvi ≥ 1e7 member-steps/s and ≥ 30× MuJoCo's RK4 rollout.
MuJoCo comes from the ``mujoco`` PyPI package (the ``bench`` extra); without it, or with --no-mujoco,
the MuJoCo rows are skipped and say why.
"""

import argparse
import sys

import numpy as np
from machine import run_conditions, run_start
from scipy.integrate import solve_ivp
from timing import (MuJoCoRollout, add_comparison_arguments, armillary_rates, comparison_header,
                    import_mujoco, lgvi_targets, one_member, perturbed_members, preset_energy_errors,
                    quaternion_matrices, rates_text, relative_errors, wall_seconds)

# This script's folder holds benchmarks/kernels.py, named like the package it measures: keep it off the path.
sys.path = [p for p in sys.path if not p.endswith("benchmarks")]

from armillary.kernels import get_system, integrate  # noqa: E402
from armillary.kernels.integration import default_threads  # noqa: E402

LGVI_TARGET, MUJOCO_FACTOR_TARGET = 1e7, 30.0


# ------------------------------------------------------------------------------------------ the top

def top_parameters(system) -> dict:
    """m (kg), g (m/s²), c (m), e, J about the pivot (kg·m²) of the (single-member) heavy top."""
    params = system.broadcast(1, 1)
    return {"m": float(params["m"][0]), "g": float(params["g"][0]), "c": params["center_of_mass"][0],
            "e": params["gravity_direction"][0], "J": params["inertia"][0, 0]}


def top_energy(R, omega, top) -> np.ndarray:
    """E = ½ Ω·J Ω − m g e·(R c) (J) of attitudes R (..., 3, 3) and body angular velocities Ω (..., 3)."""
    kinetic = 0.5 * np.einsum("...i,ij,...j->...", omega, top["J"], omega)
    return kinetic - top["m"] * top["g"] * np.einsum("i,...ij,j->...", top["e"], R, top["c"])


# ------------------------------------------------------------------------------------------ MuJoCo

def mujoco_xml(top, dt: float, integrator: str) -> str:
    """MJCF of the heavy top: inertia about the centre of mass by parallel axes, gravity m g e."""
    m, c, e, g = top["m"], top["c"], top["e"], top["g"]
    about_com = top["J"] - m * (c @ c * np.eye(3) - np.outer(c, c))
    full = (about_com[0, 0], about_com[1, 1], about_com[2, 2], about_com[0, 1], about_com[0, 2], about_com[1, 2])
    numbers = lambda values: " ".join(f"{float(v):.17g}" for v in values)  # noqa: E731
    return f"""<mujoco model="heavy top">
  <option timestep="{dt:.17g}" integrator="{integrator}" gravity="{numbers(g * e)}">
    <flag contact="disable"/>
  </option>
  <worldbody>
    <body name="top" pos="0 0 0">
      <joint name="pivot" type="ball" pos="0 0 0" damping="0" armature="0"/>
      <inertial pos="{numbers(c)}" mass="{m:.17g}" fullinertia="{numbers(full)}"/>
    </body>
  </worldbody>
</mujoco>"""


class MuJoCoTop(MuJoCoRollout):
    """The heavy top in MuJoCo with one integrator and step (qpos: the quaternion, 4; qvel: Ω, 3)."""

    def __init__(self, mujoco, top, dt: float, integrator: str, threads: int):
        super().__init__(mujoco, mujoco_xml(top, dt, integrator), threads)

    def initial_states(self, state) -> np.ndarray:
        """(members, nstate): qpos = quaternion of R (body → world), qvel = Ω (body frame)."""
        R, omega = state["R"][:, 0], state["Omega"][:, 0]
        states = np.zeros((len(R), self.nstate))
        self.set_rotations(states, R, self.qpos)
        states[:, self.qvel:self.qvel + 3] = omega
        return states

    def attitude(self, states) -> tuple[np.ndarray, np.ndarray]:
        """R (..., 3, 3) and Ω (..., 3) of rollout states."""
        return (quaternion_matrices(states[..., self.qpos:self.qpos + 4]),
                states[..., self.qvel:self.qvel + 3])


# ------------------------------------------------------------------------------------------ scipy

def euler_equations(top):
    """Right-hand side of (R (9), Ω (3)): Ṙ = R Ω̂, J Ω̇ = J Ω × Ω + m g c × (Rᵀ e)."""
    inverse, weight = np.linalg.inv(top["J"]), top["m"] * top["g"] * top["c"]

    def rhs(_, y):
        R, omega = y[:9].reshape(3, 3), y[9:]
        hat = np.array([[0.0, -omega[2], omega[1]], [omega[2], 0.0, -omega[0]], [-omega[1], omega[0], 0.0]])
        torque = np.cross(top["J"] @ omega, omega) + np.cross(weight, R.T @ top["e"])
        return np.concatenate([(R @ hat).ravel(), inverse @ torque])

    return rhs


def scipy_rate(top, state, dt, span, repeats) -> tuple[list[float], np.ndarray, int]:
    """(dt-steps of simulated time per wall second of each repeat, final y, RK45 steps taken)."""
    rhs, y0 = euler_equations(top), np.concatenate([state["R"].ravel(), state["Omega"].ravel()])
    seconds, solution = wall_seconds(lambda: solve_ivp(rhs, (0.0, span), y0, method="RK45", rtol=1e-10, atol=1e-12),
                                     repeats)
    return [span / dt / wall for wall in seconds], solution.y[:, -1], solution.t.size - 1


# ------------------------------------------------------------------------------------------ report

def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_comparison_arguments(parser)
    parser.add_argument("--scipy-span", type=float, default=1.0, help="simulated time of the scipy run (s)")
    parser.add_argument("--no-mujoco", action="store_true")
    args = parser.parse_args()
    threads = args.threads or default_threads()
    start = run_start()

    system = get_system("heavy_top", "chaotic")
    top = top_parameters(system)
    state = perturbed_members(system, args.members)
    preset = system.initial_state()
    mujoco, why_not = import_mujoco(args.no_mujoco)
    print(comparison_header("heavy_top chaotic", threads, args, mujoco))

    # same top in both codes: a short trajectory and the initial energy
    if mujoco:
        check_dt, check_steps = 1e-4, 1000
        checker = MuJoCoTop(mujoco, top, check_dt, "RK4", 1)
        one = one_member(preset)
        theirs = checker.attitude(checker.run(checker.initial_states(one), check_steps)[0])
        ours = integrate(system, "rk4", one, check_dt, check_steps, save_every=1, outputs=("R", "Omega"))
        dR = np.abs(theirs[0] - ours.R[0, 1:, 0]).max()
        dW = np.abs(theirs[1] - ours.Omega[0, 1:, 0]).max()
        print(f"same top: MuJoCo RK4 vs Armillary rk4, {check_steps} steps of h = {check_dt:g} s: "
              f"max |ΔR| = {dR:.1e}, max |ΔΩ| = {dW:.1e} rad/s over the trajectory")
        R0, W0 = checker.attitude(checker.initial_states(one)[0])
        print(f"initial energy: Armillary {ours.energy[0, 0]:.15g} J, formula on MuJoCo's qpos/qvel "
              f"{top_energy(R0, W0, top):.15g} J")

    rows = []  # (case, rates, energy errors)
    for method in ("lgvi", "rk4"):
        rates = armillary_rates(system, method, state, args.dt, args.steps, args.repeats, threads)
        errors = preset_energy_errors(system, method, args.dt, args.energy_steps)
        rows.append((f"Armillary {method}", rates, errors))
        print(f"  Armillary {method}: {rates_text(rates)} member-steps/s", flush=True)
    if mujoco:
        for integrator in ("RK4", "Euler"):
            sim = MuJoCoTop(mujoco, top, args.dt, integrator, threads)
            rates = sim.rates(sim.initial_states(state), args.mujoco_steps, args.repeats)
            single = MuJoCoTop(mujoco, top, args.dt, integrator, 1)
            one = single.initial_states(one_member(preset))
            R, omega = single.attitude(single.run(one, args.energy_steps)[0])
            energy = np.concatenate([[top_energy(*single.attitude(one[0]), top)], top_energy(R, omega, top)])
            rows.append((f"MuJoCo {integrator} rollout", rates, relative_errors(energy)))
            print(f"  MuJoCo {integrator}: {rates_text(rates)} member-steps/s", flush=True)
    else:
        print(f"MuJoCo skipped: {why_not}")
    rates, final, taken = scipy_rate(top, preset, args.dt, args.scipy_span, args.repeats)
    span_steps = int(round(args.scipy_span / args.dt))
    ours = integrate(system, "rk4", one_member(preset), args.dt, span_steps, span_steps, outputs=())
    rows.append(("scipy RK45 (1 member)", rates, None))
    print(f"  scipy RK45: {rates_text(rates)} member-steps/s; {taken} adaptive steps over "
          f"{args.scipy_span:g} s; end state vs Armillary rk4: max |ΔR| = "
          f"{np.abs(final[:9] - ours.final['R'][0, 0].ravel()).max():.1e}, max |ΔΩ| = "
          f"{np.abs(final[9:] - ours.final['Omega'][0, 0]).max():.1e} rad/s")

    reference = next((max(r) for case, r, _ in rows if case == "MuJoCo RK4 rollout"), None)
    print()
    print(f"{'case':<26}{'member-steps/s':>16}{'/ MuJoCo RK4':>14}"
          f"{f'max |dE|/|E0| over {args.energy_steps} steps':>38}{'at the end':>12}")
    for case, rates, errors in rows:
        ratio = f"{max(rates) / reference:.3g}" if reference else "-"
        energy = f"{errors[0]:>38.1e}{errors[1]:>12.1e}" if errors else f"{'-':>38}{'-':>12}"
        print(f"{case:<26}{max(rates):>16.3e}{ratio:>14}{energy}")
    print()
    print(lgvi_targets(max(rows[0][1]), reference, LGVI_TARGET, MUJOCO_FACTOR_TARGET, why_not, 0))
    print(run_conditions(start))


if __name__ == "__main__":
    main()
