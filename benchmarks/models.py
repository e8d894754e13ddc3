"""Own models against the built-ins they restate: member-steps per second of the generated kernel next to
the hand-written one in the same run, and what deriving, compiling and loading a model costs.

    .venv/bin/python benchmarks/models.py [--members 10000] [--steps 1000] [--repeats 3] [--particles 20000]
        [--skip-cold]

Pairs (each model file in examples/models/ restates the built-in's preset; both get the same members, the
preset's state perturbed by the space's retraction, 1e-3, seed 0, and the same method and step):
sphere_nbody `paper` (vi), spherical_chain `paper` (vi, implicit), jacobi_chain (rk4), heavy_top `chaotic`
(lgvi), kirchhoff_body `ellipsoid` (lgvi), the 2-link pendulum on a cart of `multibody` (rk4, midpoint);
and sphere_lj as a pair potential (examples/models/sphere_lj.py): one member of --particles particles at ρ* = 0.8,
cutoff 2.5σ, from a Fibonacci lattice at temperature 0.5ε, stepped system-parallel by vi (particle-steps/s).
Rates: ``integrate(system, method, state, dt, --steps, outputs=())`` on all cores after a compiling call,
fastest of --repeats (this VM's speed drifts within minutes; every rate is printed).

Cost of a model (each in a fresh process, so nothing is cached in memory): derive + compile on an empty
cache (fresh ``ARMILLARY_MODEL_CACHE`` and ``NUMBA_CACHE_DIR``: sympy derivation, code generation, Numba
compiling the vi kernel), then load + kernel from the warm caches, for the 3-link chain
(examples/models/three_link_chain.py, rk45) and for 10 charges on the sphere with a Coulomb potential
written as an explicit sum over their 45 pairs (vi).

Targets: generated ≥ 0.9× hand-written for every pair; derive + compile ≤ 30 s for the 3-link model on an
empty cache and ≤ 1 s to load it from a warm cache; derive + compile of the 45-pair model ≤ 60 s; what the
shared-cluster checks add to a warm load (the caches' ownership, the derivation entry's signature, the module
file compared with the derived text) ≤ 50 ms.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from machine import run_conditions, run_start
from timing import armillary_rates, rates_text

sys.path = [p for p in sys.path if not p.endswith("benchmarks")]

from armillary import load_model  # noqa: E402
from armillary.ensemble.initial import member_normals  # noqa: E402
from armillary.kernels import get_system  # noqa: E402
from armillary.kernels.geometry import fibonacci_sphere, thermal_velocities  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "examples" / "models"
#: (label, built-in system, its preset, model file, method, dt (s), method options)
PAIRS = [
    ("sphere_nbody Example 2", "sphere_nbody", "paper", "sphere_nbody.py", "vi", 1e-3, {}),
    ("spherical_chain Example 1", "spherical_chain", "paper", "spherical_chain.py", "vi", 1e-2, {"implicit": True}),
    ("jacobi_chain", "jacobi_chain", "double", "jacobi_chain.py", "rk4", 1e-3, {}),
    ("heavy_top chaotic", "heavy_top", "chaotic", "heavy_top.py", "lgvi", 1e-3, {}),
    ("kirchhoff_body ellipsoid", "kirchhoff_body", "ellipsoid", "kirchhoff_ellipsoid.py", "lgvi", 1e-3, {}),
    ("cart, 2 links (rk4)", "multibody", "n_link_pendulum_on_cart", "cart_pendulum.py", "rk4", 1e-3, {}),
    ("cart, 2 links (midpoint)", "multibody", "n_link_pendulum_on_cart", "cart_pendulum.py", "midpoint", 1e-3, {}),
]
SPEED_TARGET, THREE_LINK_SECONDS, WARM_SECONDS, PAIRS_SECONDS = 0.9, 30.0, 1.0, 60.0

#: 10 unit charges on the sphere, the Coulomb energy as an explicit sum over 45 pairs (not a pair potential)
CHARGES = '''
"""Ten charges on the unit sphere: V = Σ_{i<j} k / |q_i − q_j| over the 45 pairs."""
from armillary.model import norm

space = "sphere_product"
bodies = 10
parameters = {"m": 1.0, "k": 1.0}


def inertia(p):
    return [p.m] * 10


def potential(q, p):
    return sum(p.k / norm(q[i] - q[j]) for i in range(10) for j in range(i + 1, 10))


def initial_state(p):
    import numpy as np
    golden = np.pi * (3 - np.sqrt(5))
    z = 1 - (np.arange(10) + 0.5) / 5
    ring = np.sqrt(1 - z * z)
    q = np.stack([ring * np.cos(golden * np.arange(10)), ring * np.sin(golden * np.arange(10)), z], 1)
    return {"q": q, "omega": np.zeros((10, 3))}
'''

#: what one fresh process measures: load (derive or read the cache), then the first integrate (compile or
#: load the kernel), as JSON
PROBE = '''
import json, sys, time
start = time.perf_counter()
import armillary
imported = time.perf_counter()
system = armillary.load_model(sys.argv[1])
loaded = time.perf_counter()
state = {name: value[None] for name, value in system.initial_state().items()}
armillary.integrate(system, sys.argv[2], state, 1e-3, 2)
done = time.perf_counter()
# what the shared-cluster checks add to a load: the caches' ownership checks, the derivation entry's signature
# and the generated module's comparison with the text derived now
from armillary.kernels.caches import kernel_cache_directory, model_cache_directory, read_file, signature
from armillary.kernels.models.codegen import source_hash
text = system.definition.model.text
checks = time.perf_counter()
kernel_cache_directory()
directory = model_cache_directory()
signature(directory, text)
assert read_file(f"{directory}/armillary_model_{source_hash(text)}.py") == text
checked = time.perf_counter()
print(json.dumps({"import": imported - start, "load": loaded - imported, "kernel": done - loaded,
                  "derive": system.definition.model.derive_seconds, "checks": checked - checks}))
'''


def members_of(system, members: int) -> dict:
    """The preset's state for ``members`` members, each moved by the space's retraction by 1e-3 along its
    own normals (seed 0)."""
    space = system.space
    state = system.initial_state()
    normals = member_normals(0, np.arange(members), space.normal_count(space.body_count(state)))
    return space.perturb(state, normals, 1e-3)


def speed_pairs(args) -> None:
    print(f"member-steps per second, {args.members} members × {args.steps} steps, fastest of {args.repeats}")
    print(f"{'pair':<28} {'method':<9} {'hand-written':>12} {'generated':>12} {'ratio':>6}  rates")
    for label, name, preset, file, method, dt, options in PAIRS:
        path = MODELS / file
        if not path.exists():
            print(f"{label:<28} {method:<9} (no {path.relative_to(ROOT)})")
            continue
        builtin = get_system(name, preset)
        model = load_model(path)
        state = members_of(builtin, args.members)
        hand = armillary_rates(builtin, method, state, dt, args.steps, args.repeats, **options)
        generated = armillary_rates(model, method, state, dt, args.steps, args.repeats, **options)
        ratio = max(generated) / max(hand)
        flag = "" if ratio >= SPEED_TARGET else f"  (target {SPEED_TARGET}×: not met)"
        print(f"{label:<28} {method:<9} {max(hand):>12.3e} {max(generated):>12.3e} {ratio:>5.2f}×  "
              f"hand {rates_text(hand)}; generated {rates_text(generated)}{flag}")


def pair_speed(args) -> None:
    """The Lennard-Jones pair model next to sphere_lj, system-parallel (see the module docstring)."""
    n = args.particles
    sigma = float(np.sqrt(0.8 * 4.0 * np.pi / n))
    params = dict(m=1.0, epsilon=1.0, sigma=sigma, cutoff=2.5 * sigma)
    builtin, model = get_system("sphere_lj", **params), load_model(MODELS / "sphere_lj.py", **params)
    q = fibonacci_sphere(n)
    state = {"q": q[None], "omega": thermal_velocities(q, 1.0, 0.5, seed=0)[None]}
    steps = max(1, args.steps // 5)
    hand, generated = (armillary_rates(system, "vi", state, 0.005 * sigma, steps, args.repeats)
                       for system in (builtin, model))
    hand, generated = [rate * n for rate in hand], [rate * n for rate in generated]
    ratio = max(generated) / max(hand)
    flag = "" if ratio >= SPEED_TARGET else f"  (target {SPEED_TARGET}×: not met)"
    print(f"{f'sphere_lj pair, N = {n}':<28} {'vi':<9} {max(hand):>12.3e} {max(generated):>12.3e} {ratio:>5.2f}×  "
          f"particle-steps/s, {steps} steps; hand {rates_text(hand)}; generated {rates_text(generated)}{flag}")


def probe(path: Path, method: str, caches: str) -> dict:
    environment = {**os.environ, "ARMILLARY_MODEL_CACHE": os.path.join(caches, "models"),
                   "NUMBA_CACHE_DIR": os.path.join(caches, "numba")}
    result = subprocess.run([sys.executable, "-c", PROBE, str(path), method], env=environment, capture_output=True,
                            text=True, check=True)
    return json.loads(result.stdout.splitlines()[-1])


def model_costs() -> None:
    print("\ncost of a model, each in a fresh process (s): derive = sympy derivation and code generation, "
          "load = reading the model (derivation included when the cache is empty), kernel = first integrate")
    with tempfile.TemporaryDirectory() as scratch:
        charges = Path(scratch) / "charges.py"
        charges.write_text(CHARGES)
        for label, path, method, limit in (("3-link chain", MODELS / "three_link_chain.py", "rk45", THREE_LINK_SECONDS),
                                           ("10 charges, 45 pairs", charges, "vi", PAIRS_SECONDS)):
            if not path.exists():
                print(f"{label}: no {path}")
                continue
            caches = tempfile.mkdtemp(dir=scratch)
            cold, warm = probe(path, method, caches), probe(path, method, caches)
            total = cold["load"] + cold["kernel"]
            print(f"{label:<22} empty cache: derive {cold['derive']:.2f}, load {cold['load']:.2f}, kernel "
                  f"{cold['kernel']:.2f}, derive + compile {total:.1f} (target ≤ {limit:.0f}: "
                  f"{'met' if total <= limit else 'not met'}); warm cache: load {warm['load']:.3f}, kernel "
                  f"{warm['kernel']:.2f}, load + kernel {warm['load'] + warm['kernel']:.2f} (target load ≤ "
                  f"{WARM_SECONDS:.0f}: {'met' if warm['load'] <= WARM_SECONDS else 'not met'}); ownership checks, "
                  f"signature and text comparison {warm['checks'] * 1e3:.1f} ms (target ≤ 50 ms: "
                  f"{'met' if warm['checks'] <= 0.05 else 'not met'})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", type=int, default=10_000)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--particles", type=int, default=20_000, help="particles of the pair-potential comparison")
    parser.add_argument("--skip-cold", action="store_true", help="skip the derive/compile cost in fresh processes")
    args = parser.parse_args()
    start = run_start()
    speed_pairs(args)
    pair_speed(args)
    if not args.skip_cold:
        model_costs()
    print(run_conditions(start))


if __name__ == "__main__":
    main()
