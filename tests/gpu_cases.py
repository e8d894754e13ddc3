"""The GPU's test cases, run by tests/test_gpu.py on the CPU and, as a script, in numba-cuda's simulator.

    NUMBA_ENABLE_CUDASIM=1 NUMBA_DISABLE_JIT=1 python tests/gpu_cases.py OUT.npz

runs every case of :data:`CASES` with ``device="cuda"`` (the simulator runs each thread's Python: the stages' own
source, with NumPy's IEEE scalars) and writes the results to OUT.npz, which the test compares with the CPU's.
"""

import os
import sys

import numpy as np

from armillary.kernels import get_system, integrate
from armillary.kernels.lyapunov import displaced_shadow
from armillary.kernels.models import build_model

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: (system, preset or (preset, parameters, state), method, options, shadows): a member of each method, space and kind of
#: kernel the GPU runs — on (S²)ⁿ the explicit vi (diagonal M), the implicit vi (full M), rk4 on both, and the
#: implicit vi with Benettin shadows; lgvi (with and without shadows) and rk4 on SO(3) (the heavy top), rk4 on
#: SE(3) (Kirchhoff's body); a model file (a path: Example 2 restated, its functions generated from sympy); rk45 on
#: (S²)ⁿ (full M) and on SO(3), a step size per member; on the generalised space rk4 on the 5-link cart (the
#: articulated-body algorithm, a scratch per thread) with shadows and rk45 on the four-bar linkage (Kane's
#: equations with a loop closure, projected after every step); rk4 on the rolling ball (its contact forces checked
#: after every step) and rk45 on the rolling disk; and rk45 on both layouts with its members out of attempts
#: (max_steps = 4: STEP_SIZE_UNDERFLOW)
CASES = {
    "explicit_vi": ("sphere_nbody", "paper", "vi", {}, 0),
    "implicit_vi": ("spherical_chain", "paper", "vi", {}, 0),
    "rk4_diagonal": ("sphere_nbody", "paper", "rk4", {}, 0),
    "rk4_full": ("spherical_chain", "paper", "rk4", {}, 0),
    "implicit_vi_shadows": ("spherical_chain", "paper", "vi", {}, 2),
    "lgvi_rotation": ("heavy_top", "chaotic", "lgvi", {}, 0),
    "lgvi_rotation_shadows": ("heavy_top", "chaotic", "lgvi", {}, 2),
    "rk4_rotation": ("heavy_top", "chaotic", "rk4", {}, 0),
    "rk4_rigid_motion": ("kirchhoff_body", "ellipsoid", "rk4", {}, 0),
    "model_explicit_vi": ("examples/models/sphere_nbody.py", "initial", "vi", {}, 0),
    "rk45_full": ("spherical_chain", "paper", "rk45", {}, 0),
    "rk45_rotation": ("heavy_top", "chaotic", "rk45", {}, 0),
    "rk4_multibody_shadows": ("multibody", ("n_link_pendulum_on_cart", {"m": (1.0,) * 5, "l": (1.0,) * 5},
                                            {"q": (0.0, 1.0, 1.2, 1.4, 1.6, 1.8), "u": (0.0,) * 6}), "rk4", {}, 2),
    "rk45_loop_closure": ("multibody", "four_bar", "rk45", {}, 0),
    "rk4_rolling_ball": ("rolling_ball", "pendulum_drive", "rk4", {}, 0),
    "rk45_rolling_disk": ("rolling_disk", "pendulum", "rk45", {}, 0),
    "rk45_full_gives_up": ("spherical_chain", "paper", "rk45", {"max_steps": 4}, 0),
    "rk45_rotation_gives_up": ("heavy_top", "chaotic", "rk45", {"max_steps": 4}, 0),
    "fire": ("sphere_riesz", "fibonacci_32", "fire", {"max_steps": 10}, 0),
}
MEMBERS, STEPS, SAVE_EVERY, DT = 5, 12, 3, 0.01
#: the cases also run in two segments of STEPS / 2 steps, the second restarting from the first's end and carry
#: (rk45: its next step size)
SEGMENTED = ("explicit_vi", "rk45_full", "fire")
#: the segmented case whose two segments equal its run in one (a fixed-step method's)
RESTARTED = "explicit_vi"


def case_state(name: str, members: int = MEMBERS):
    """The system, its members (the preset's state perturbed by 1e-2, seed 0) and their shadows (d0 = 1e-6,
    renormalised every 2 steps)."""
    system_name, preset, method, options, shadows = CASES[name]
    if system_name.endswith(".py"):
        path = os.path.join(ROOT, system_name)
        with open(path) as source:
            system_name = build_model(source.read(), path).name
    preset, params, state = preset if isinstance(preset, tuple) else (preset, {}, None)
    system = get_system(system_name, preset, **params)
    rng = np.random.default_rng(0)
    state = {name: np.array(value) for name, value in state.items()} if state else system.initial_state()
    bodies = system.n_bodies  # a particle system's count is its state's
    normals = system.space.normal_count(bodies if bodies is not None else system.space.body_count(state))
    state = system.space.perturb(state, rng.normal(size=(members, normals)), 1e-2)
    shadow = displaced_shadow(system.space, state, rng.normal(size=(members, shadows, normals)), 1e-6, 2) \
        if shadows else None
    return system, method, options, state, shadow


def results(trajectory, prefix: str) -> dict:
    """The arrays a case compares: samples, energy, final state, status, and the shadows' growth."""
    out = {f"{prefix}_energy": trajectory.energy, f"{prefix}_status": trajectory.status}
    out.update({f"{prefix}_{name}": value for name, value in trajectory.state.items()})
    out.update({f"{prefix}_final_{name}": value for name, value in trajectory.final.items()})
    if trajectory.shadow_final is not None:
        out[f"{prefix}_spectrum"] = trajectory.spectrum_growth
    return out


def run_case(name: str, device: str) -> dict:
    """Case ``name`` on ``device``: its results (and for :data:`SEGMENTED` also in two segments,
    "restarted_{name}")."""
    system, method, options, state, shadow = case_state(name)
    run = integrate(system, method, state, DT, STEPS, SAVE_EVERY, shadow=shadow, device=device, **options)
    out = results(run, name)
    if name in SEGMENTED:
        first = integrate(system, method, state, DT, STEPS // 2, SAVE_EVERY, device=device, **options)
        second = integrate(system, method, first.final, DT, STEPS // 2, SAVE_EVERY, restart=True, carry=first.carry,
                           start_step=STEPS // 2, device=device, **options)
        out.update(results(second, f"restarted_{name}"))
    return out


if __name__ == "__main__":
    np.savez(sys.argv[1], **{key: value for name in CASES for key, value in run_case(name, "cuda").items()})
