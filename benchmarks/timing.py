"""How the benchmark scripts time and check what they compare: member-steps per second of Armillary's
``integrate`` and of MuJoCo's ``rollout`` (fastest-of-N timing), the ensembles the rigid-body cases start
from and the relative energy error of a run, and the command line and report lines that the rigid-body
comparisons against MuJoCo (rigid_body.py, rigid_motion.py) share.

Every case is timed several times and the fastest counts (every rate is printed), because this kind of VM's
speed drifts by up to 2× within minutes.

Imported, like :mod:`machine`, by the benchmark scripts before they take their own folder off the import
path; it imports ``kernels`` only inside its functions, once that folder (whose kernels.py would shadow the
package) is off the path.
"""

import time

import numpy as np

# MuJoCo and Armillary warm up (compile, start thread pools) on this many members at most: the member count
# changes only array shapes, not what is compiled
WARM_UP_MEMBERS = 64


# ------------------------------------------------------------------------------------------ timing

def wall_seconds(call, repeats: int) -> tuple[list[float], object]:
    """Wall-clock seconds (``time.perf_counter``) of each of ``repeats`` calls of ``call()``, and what the
    last call returned."""
    seconds, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = call()
        seconds.append(time.perf_counter() - start)
    return seconds, result


def member_step_rates(call, members: int, steps: int, repeats: int) -> list[float]:
    """Member-steps per second (members × steps / wall seconds) of each of ``repeats`` calls of ``call()``,
    each of which steps ``members`` members ``steps`` steps."""
    seconds, _ = wall_seconds(call, repeats)
    return [members * steps / wall for wall in seconds]


def rates_text(rates) -> str:
    """Each repeat's rate (member-steps per second), three digits each, as the scripts print them."""
    return " ".join(f"{rate:.2e}" for rate in rates)


def armillary_rates(system, method: str, state: dict, dt: float, steps: int, repeats: int,
                    threads: int | None = None, save_every: int | None = None, **options) -> list[float]:
    """Member-steps per second of ``repeats`` timed ``kernels.integrate`` calls: every member of ``state``
    ``steps`` steps of ``dt`` by ``method`` (with method ``options``) on ``threads`` threads (None: all),
    sampling every ``save_every`` steps (None: the end only) and keeping no state samples (the energy is
    always computed); after one compiling call of 2 steps."""
    from armillary.kernels import integrate  # here, not at the top: see the module docstring

    warm_up = {name: value[:WARM_UP_MEMBERS] for name, value in state.items()}
    integrate(system, method, warm_up, dt, 2, save_every=2, outputs=(), threads=threads, **options)
    members = len(next(iter(state.values())))
    return member_step_rates(lambda: integrate(system, method, state, dt, steps, save_every=save_every or steps,
                                               outputs=(), threads=threads, **options), members, steps, repeats)


# ------------------------------------------------------------------------------------------ ensembles, energy

def one_member(state: dict) -> dict:
    """One member's state variables as an ensemble of one (a leading member axis of length 1)."""
    return {name: value[np.newaxis] for name, value in state.items()}


def perturbed_members(system, members: int, seed: int = 0) -> dict:
    """The system's preset state repeated over ``members``, its body angular velocities Ω perturbed by
    1e-3 rad/s times standard normals (``numpy.random.default_rng(seed)``)."""
    state = {name: np.repeat(value[np.newaxis], members, axis=0) for name, value in system.initial_state().items()}
    state["Omega"] = state["Omega"] + 1e-3 * np.random.default_rng(seed).standard_normal(state["Omega"].shape)
    return state


def relative_errors(energy) -> tuple[float, float]:
    """max over the run and at the end of |E(t) − E(0)|/|E(0)| (dimensionless), of one run's energies E(t)."""
    error = np.abs(energy - energy[0]) / abs(energy[0])
    return float(error.max()), float(error[-1])


def preset_energy_errors(system, method: str, dt: float, steps: int, **options) -> tuple[float, float]:
    """:func:`relative_errors` of Armillary's energy, every step, of the preset state (one member) over
    ``steps`` steps of ``dt`` by ``method`` (with method ``options``)."""
    from armillary.kernels import integrate  # here, not at the top: see the module docstring

    run = integrate(system, method, one_member(system.initial_state()), dt, steps, save_every=1, outputs=(),
                    **options)
    return relative_errors(run.energy[0])


# ------------------------------------------------------------------------------------------ MuJoCo

def import_mujoco(skip: bool):
    """(the ``mujoco`` module, "") or, with ``skip`` (--no-mujoco) or without MuJoCo, (None, why not)."""
    if skip:
        return None, "--no-mujoco"
    try:
        import mujoco
    except ImportError:
        return None, "MuJoCo not installed (pip install mujoco, the 'bench' extra)"
    return mujoco, ""


def quaternion_matrices(quat) -> np.ndarray:
    """Rotation matrices (..., 3, 3) of unit quaternions (..., 4) (w, x, y, z), as MuJoCo's mju_quat2Mat."""
    q = quat / np.linalg.norm(quat, axis=-1, keepdims=True)
    w, x, y, z = np.moveaxis(q, -1, 0)
    return np.stack([np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)], -1),
                     np.stack([2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)], -1),
                     np.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], -1)], -2)


class MuJoCoRollout:
    """An MJCF model stepped by ``mujoco.rollout.rollout`` on ``threads`` threads (one MjData per thread: its
    thread pool).  States are MuJoCo's full-physics vectors (``nstate`` numbers): the time, then qpos from
    index ``qpos``, then qvel from index ``qvel``, then the rest."""

    def __init__(self, mujoco, xml: str, threads: int):
        from mujoco import rollout
        self.mujoco, self.rollout = mujoco, rollout
        self.model = mujoco.MjModel.from_xml_string(xml)
        self.datas = [mujoco.MjData(self.model) for _ in range(threads)]
        self.nstate = mujoco.mj_stateSize(self.model, mujoco.mjtState.mjSTATE_FULLPHYSICS)
        self.qpos = mujoco.mj_stateSize(self.model, mujoco.mjtState.mjSTATE_TIME)
        self.qvel = self.qpos + self.model.nq

    def set_rotations(self, states: np.ndarray, rotations, at: int) -> None:
        """Write the unit quaternions (w, x, y, z) of ``rotations`` (members, 3, 3) into ``states[:, at:at + 4]``."""
        for numbers, rotation in zip(states, rotations):
            self.mujoco.mju_mat2Quat(numbers[at:at + 4], np.ascontiguousarray(rotation).ravel())

    def run(self, initial: np.ndarray, steps: int, out: np.ndarray | None = None) -> np.ndarray:
        """States after each step, (members, steps, nstate), of rollouts from ``initial`` (members, nstate)."""
        out, _ = self.rollout.rollout(self.model, self.datas, initial, nstep=steps, state=out)
        return out

    def rates(self, initial: np.ndarray, steps: int, repeats: int) -> list[float]:
        """Member-steps per second of ``repeats`` timed rollouts of ``steps`` steps from ``initial`` into one
        preallocated state array, after a warm-up rollout (thread pool, caches)."""
        out = np.empty((len(initial), steps, self.nstate))
        self.run(initial[:WARM_UP_MEMBERS], 2, out[:WARM_UP_MEMBERS, :2])
        rates = member_step_rates(lambda: self.run(initial, steps, out), len(initial), steps, repeats)
        if not np.all(np.isfinite(out[:, -1])):
            raise RuntimeError("MuJoCo rollout produced non-finite states")
        return rates


# ------------------------------------------------------------------------------------------ command line, report

def add_comparison_arguments(parser) -> None:
    """The sizes, step, repeats and threads of the rigid-body comparisons of Armillary against MuJoCo."""
    parser.add_argument("--members", type=int, default=10_000)
    parser.add_argument("--steps", type=int, default=1_000, help="Armillary steps per timed call")
    parser.add_argument("--mujoco-steps", type=int, default=200, help="MuJoCo steps per timed rollout")
    parser.add_argument("--dt", type=float, default=1e-3, help="step h (s)")
    parser.add_argument("--repeats", type=int, default=3, help="timed calls per case (the fastest counts)")
    parser.add_argument("--threads", type=int, default=None, help="threads of Armillary and MuJoCo (default: all)")
    parser.add_argument("--energy-steps", type=int, default=100_000, help="steps of the energy runs")


def comparison_header(case: str, threads: int, args, mujoco) -> str:
    """The first line of a comparison: the case, threads, step, sizes, repeats and MuJoCo's version."""
    return (f"{case}, {threads} threads, h = {args.dt:g} s, {args.members} members; Armillary {args.steps} steps, "
            f"MuJoCo {args.mujoco_steps} steps per call; fastest of {args.repeats}; "
            f"MuJoCo {mujoco.__version__ if mujoco else '-'}")


def lgvi_targets(lgvi: float, mujoco_rk4: float | None, rate_target: float, factor_target: float,
                 why_not: str, factor_decimals: int) -> str:
    """The two target lines of a rigid-body comparison: lgvi's member-steps per second against
    ``rate_target``, and lgvi's rate over MuJoCo's RK4 rollout's (``mujoco_rk4``; None: not measured, for the
    reason ``why_not``) against ``factor_target``, that factor printed with ``factor_decimals`` decimals."""
    rate = (f"target: lgvi >= {rate_target:.0e} member-steps/s: {lgvi:.2e} "
            f"({'met' if lgvi >= rate_target else 'NOT met'})")
    against = f"target: lgvi >= {factor_target:.0f}x MuJoCo RK4 rollout: "
    if not mujoco_rk4:
        return f"{rate}\n{against}not measured ({why_not})"
    factor = lgvi / mujoco_rk4
    return f"{rate}\n{against}{factor:.{factor_decimals}f}x ({'met' if factor >= factor_target else 'NOT met'})"
