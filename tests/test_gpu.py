"""Ensembles on a CUDA GPU (kernels/gpu.py) on a machine without one: every GPU kernel compiled to PTX for the
device, numba-cuda's simulator stepping each case equal to the CPU bit for bit (and a restart equal to the run
it continues), and what needs a GPU or does not run there yet refused in one line."""

import functools
import io
import json
import os
import re
import subprocess
import sys
import types

import numpy as np
import pytest

from armillary import ensemble
from armillary.ensemble.execute import execute
from armillary.ensemble.store import RunStore, write_template
from armillary.jobs.cli import main
from armillary.kernels import (InvalidInput, get_system, gpu, gpu_minimiser, gpu_neighbours, gpu_system, integrate,
                               system_parallel)
from armillary.kernels.integrators import fire
from armillary.kernels import neighbours as nb
from armillary.kernels.models import build_model
from armillary.kernels.sections import Section
from armillary.kernels.system_parallel import pair_terms

import gpu_cases
import gpu_lists
import gpu_system as gpu_system_cases
import ptx_memory
from ensemble_cases import arrays, assert_bitwise_equal, runner_spec

HERE = os.path.dirname(__file__)


#: the kernels compiled to PTX: each (method, space) of the GPU and each kind of its (S²)ⁿ kernels (the rk4 of full
#: M compiles the same driver and stages as the others, and a kernel with shadows the stages of one without)
PTX_CASES = ["explicit_vi", "implicit_vi_shadows", "rk4_diagonal", "lgvi_rotation_shadows", "rk4_rotation",
             "rk4_rigid_motion", "rk45_full", "rk45_rotation", "rk4_multibody", "rk45_loop_closure",
             "rk4_rolling_ball", "rk45_rolling_disk", "fire"]
#: PTX cases that are a simulator case (tests/gpu_cases.py) without its shadows: the 5-link cart's kernel with
#: shadows has Numba's CUDA target type and NVVM optimise the multibody stages twice (124 s of the suite, 49 s
#: without); the flat driver's shadows compile to PTX in lgvi_rotation_shadows, and the cart's run with them in
#: the simulator
UNSHADOWED = {"rk4_multibody": "rk4_multibody_shadows"}


@functools.cache
def ptx_kernel(case: str, fma: bool) -> gpu.KernelPtx:
    """The kernel case ``case`` would launch, compiled to PTX (compute capability 8.0) once per test worker (both
    arguments given, so that every call of one kernel has one cache key)."""
    system, method, options, state, shadow = gpu_cases.case_state(UNSHADOWED.get(case, case))
    shadow = None if case in UNSHADOWED else shadow
    kernels = gpu.ptx_of(lambda: integrate(system, method, state, gpu_cases.DT, 2, 1, shadow=shadow, device="cuda",
                                           fma=fma, **options))
    assert len(kernels) == 1
    return kernels[0]


def ptx(case: str, fma: bool = True) -> str:
    """The PTX text of :func:`ptx_kernel`."""
    return ptx_kernel(case, fma).ptx


#: the PTX tests share a worker, and with it :func:`ptx`'s compiles
PTX_GROUP = pytest.mark.xdist_group("gpu_ptx")


@PTX_GROUP
@pytest.mark.parametrize("case", PTX_CASES)
def test_each_gpu_kernel_compiles_to_ptx_with_ieee_division_and_square_root(case):
    """The kernel the run would launch, compiled for compute capability 8.0 by NVVM from NVIDIA's wheels: one entry
    point, and only correctly rounded division and square root (``div.rn``, ``sqrt.rn``: the CPU's IEEE operations,
    not the approximate ones fast-math would give; libdevice's logarithm, in Benettin's sums, refines an approximate
    reciprocal itself)."""
    assert ptx(case).count(".entry ") == 1 and ".target sm_80" in ptx(case)
    assert set(re.findall(r"\b(?:div|sqrt)\.[\w.]+\.f64", ptx(case))) <= {"div.rn.f64", "sqrt.rn.f64"}


#: what a time loop may touch in global memory besides the samples it saves: the read-only parameters it reads
READ_ONLY = {"topology", "options"}
#: the arrays the saved samples are written to
SAMPLES = {"energy", "unit_error", "tangency_error", "diagnostics"}


@PTX_GROUP
@pytest.mark.parametrize("case", PTX_CASES)
def test_each_gpu_kernel_keeps_its_member_in_its_own_memory_from_the_first_step_to_the_last(case):
    """A thread keeps its member's state, shadows, parameters and the method's work (stage values, scratch) in
    arrays of its own (``cuda.local.array``: registers where NVVM can, else its local memory) from the segment's
    first step to its last: in the PTX, the time loop's global loads and stores, each followed back to the kernel
    argument it addresses (tests/ptx_memory.py), are the saved samples' stores and reads of the read-only
    topology and options.  Fails on the kernels of 04945ae, whose stages read and wrote the state and the
    workspace in global memory every step (explicit vi: 78 loads and 9 stores of q per loop)."""
    accesses = ptx_memory.time_loop_accesses(ptx_kernel(case, True))
    stored = {argument for kind, argument in accesses if kind == "st"}
    loaded = {argument for kind, argument in accesses if kind == "ld"}
    assert "energy" in stored  # the analysis finds the samples' stores
    assert stored <= SAMPLES | {name for name in stored if name.endswith("_out")}, stored
    assert loaded <= READ_ONLY, loaded


@PTX_GROUP
def test_without_fused_multiply_adds_the_kernel_rounds_as_the_cpu():
    """fma=False: NVVM compiles with -fma=0, so the explicit vi's products and sums round one by one as on the CPU:
    of its 100-odd fused multiply-adds only those inside libdevice's logarithm (Benettin's sums) are left."""
    assert ptx("explicit_vi").count("fma.rn.f64") > 80
    assert ptx("explicit_vi", fma=False).count("fma.rn.f64") <= 20
    assert ptx("explicit_vi", fma=False).count(".entry ") == 1
    system, method, options, state, shadow = gpu_cases.case_state("explicit_vi")
    with pytest.raises(InvalidInput, match="fma: false applies to device 'cuda'"):
        integrate(system, method, state, gpu_cases.DT, 2, fma=False)


def test_the_gpu_builds_full_neighbour_rows_in_the_cpus_storage_order(tmp_path):
    """kernels/gpu_neighbours.py in numba-cuda's simulator (tests/gpu_lists.py: 400 LJ particles at ρ* = 0.8,
    r_list = 2.8σ, a liquid and a crystal, and the liquid again from a capacity of 2, so that the rows grow):
    every row holds exactly the other particles closer than r_list (the O(n²) chord matrix), each once, in
    increasing original index, and the storage order is the CPU's (kernels.neighbours.fresh_lists) for the same
    positions.  The LJ gradient and energies each particle's thread gathers from its row equal the CPU's half-list
    passes (system_parallel.pair_terms) to round-off: the same terms in another order.  The running sums the
    cells' starts come from (three levels of chunks for 10⁴ counts) equal NumPy's."""
    out = tmp_path / "lists.npz"
    subprocess.run([sys.executable, os.path.join(HERE, "gpu_lists.py"), str(out)], check=True,
                   env={**os.environ, "NUMBA_ENABLE_CUDASIM": "1", "NUMBA_DISABLE_JIT": "1"})
    built = np.load(out)
    for name in gpu_lists.CASES:
        q, order, rows = built[f"{name}_q"], built[f"{name}_order"], built[f"{name}_rows"]
        n = len(q)
        cpu_order = nb.fresh_lists(np.ascontiguousarray(q[:, :, np.newaxis]), np.arange(n), gpu_lists.LIST_RANGE)[1]
        assert np.array_equal(order, cpu_order)
        chords = np.linalg.norm(q[:, np.newaxis] - q[np.newaxis], axis=-1)
        near = (chords < gpu_lists.LIST_RANGE) & ~np.eye(n, dtype=bool)
        for k in range(n):
            row = rows[k][rows[k] >= 0]
            assert np.array_equal(order[row], np.flatnonzero(near[order[k]]))
    assert built["liquid_grown_rows"].shape[1] < built["liquid_rows"].shape[1]  # grown to the longest row + slack
    assert np.array_equal(built["scan_starts"], np.cumsum(built["scan_values"]) - built["scan_values"])
    for name in gpu_lists.PAIR_CASES:
        order = built[f"{name}_order"]
        gradient, energies = np.empty_like(built[f"{name}_gradient"]), np.empty_like(built[f"{name}_energies"])
        gradient[order], energies[order] = built[f"{name}_gradient"], built[f"{name}_energies"]
        cpu_gradient, cpu_energies, _ = pair_terms(gpu_lists.lj_system(), built[f"{name}_q"])
        assert np.abs(gradient - cpu_gradient).max() <= 1e-12 * np.abs(cpu_gradient).max()
        assert np.abs(energies - cpu_energies).max() <= 1e-12 * np.abs(cpu_energies).max()


@PTX_GROUP
def test_the_gpu_neighbour_list_kernels_compile_to_ptx():
    """Each kernel of the GPU's list build and LJ's pair passes compiled for compute capability 8.0 (one entry
    point each)."""
    n, cells = 8, 27
    ints = {size: np.zeros(size, np.int32) for size in (n, cells, cells + 1)}
    arguments = {"count_cells": (np.zeros((n, 3)), 3, ints[n], ints[cells]),
                 "chunk_totals": (ints[cells + 1], np.zeros(1, np.int32)),
                 "chunk_starts": (ints[cells + 1], np.zeros(1, np.int32), ints[cells + 1]),
                 "scatter": (ints[n], ints[cells], ints[n]),
                 "sort_cells": (ints[cells + 1], np.zeros(n, np.int64), ints[n]),
                 "gather": (np.zeros((n, 3)), ints[n], ints[n], np.zeros((n, 3)), ints[n]),
                 "full_rows": (np.zeros((n, 3)), ints[n], ints[cells + 1], 3, 0.1, np.zeros((n, 4), np.int32),
                               ints[n], np.zeros(1, np.int32)),
                 "sort_rows": (ints[n], np.zeros(n, np.int64), np.zeros((n, 4), np.int32), ints[n])}
    arguments.update({name: (np.zeros((n, 3)), np.zeros((3, 1)), ints[n], np.zeros((n, 4), np.int32), ints[n], out)
                      for name, out in (("gather_gradient", np.zeros((n, 3))), ("gather_energies", np.zeros(n)))})
    functions = {**gpu_neighbours.kernel_functions(), **gpu_neighbours.pair_kernel_functions("sphere_lj")}
    assert set(functions) == set(arguments)
    for name, function in functions.items():
        assert gpu._compile_ptx(function, arguments[name]).count(".entry ") == 1, name


@PTX_GROUP
def test_the_gpu_system_mode_kernels_compile_to_ptx():
    """Each kernel of the GPU's system mode compiled for compute capability 8.0 (one entry point each), with the
    stages of vi and langevin (Philox and the Ziggurat's tables on the device) and brownian with active particles,
    and the pair passes of a model file's pair potential (the tutorial's Yukawa, with its exponential), of a
    mixture's type table and bonded terms (sphere_mixture, each pair's row read by the particles' ids, each
    particle's bonds and angles gathered by its own thread) and of the all-pairs term (Coulomb's, sphere_riesz)."""
    n = 8
    state, column, ids, terms = np.zeros((n, 3, 1)), np.zeros((n, 1)), np.zeros(n, np.int64), np.zeros((n, 4))
    coef = np.zeros((20, 1))
    arguments = {"setup": (0.1, column, coef, column, np.zeros((n, system_parallel.PARTICLE_FACTORS))),
                 "advance": (True, True, 3, 0.1, state, state, state, state, column, np.ones(n), coef, column,
                             np.zeros((n, system_parallel.PARTICLE_FACTORS)), ids, np.zeros(n), np.zeros((n, 3)),
                             terms),
                 "sample_terms": (state, state, column, ids, np.zeros(n), terms),
                 "fold": (terms, np.zeros((1, 4))),
                 "permute_rows": (np.zeros(n, np.int32), np.zeros((n, 3)), np.zeros((n, 3))),
                 "rows_by_id": (ids, np.zeros((n, 3)), np.zeros((n, 3))),
                 **{name: (np.zeros((n, 3)), coef, ids, np.zeros((n, 4), np.int32), np.zeros(n, np.int32), out)
                    for name, out in (("gather_gradient", np.zeros((n, 3))), ("gather_energies", np.zeros(n)))},
                 "device_terms": (np.zeros((n, 3)), coef, True, np.zeros((n, 3))),
                 "storage_slots": (ids, np.zeros(n, np.int64)), "bonded_gradients": (state, coef, ids, ids, state),
                 "bonded_energies": (state, coef, ids, ids, np.zeros(n))}
    with open(os.path.join(HERE, os.pardir, "examples", "models", "sphere_yukawa.py")) as model:
        yukawa = build_model(model.read(), "sphere_yukawa.py").name
    for method, system in (("vi", "sphere_lj"), ("langevin", "sphere_lj"), ("brownian_active", "sphere_lj"),
                           ("vi", yukawa), ("vi", "sphere_riesz"), ("vi", "sphere_mixture")):
        functions = gpu_system.kernel_functions(method, system)
        assert set(functions) == set(arguments)
        names = {"vi": functions, "langevin": ("setup", "advance"), "brownian_active": ("setup", "advance")}[method]
        pair_passes = {yukawa: ("gather_gradient", "gather_energies"),  # the all-pairs passes of Coulomb: tiles in
                       "sphere_riesz": ("device_terms",),  # shared memory, its square root; a mixture's type table
                       "sphere_mixture": ("gather_gradient", "gather_energies", "bonded_gradients", "bonded_energies")}
        for name in names if system == "sphere_lj" else pair_passes[system]:
            assert gpu._compile_ptx(functions[name], arguments[name]).count(".entry ") == 1, (method, system, name)
    # a minimisation's own kernels (kernels/gpu_minimiser.py: fire's stages; its other kernels are the above)
    sums = np.zeros((n, fire.SUMS))
    minimiser = gpu_minimiser.kernel_functions("sphere_riesz")
    for name, argument in (("sums", (state, state, state, column, np.zeros((n, 3)), sums)),
                           ("fold_sums", (sums, np.zeros((1, fire.SUMS)))),
                           ("move", (state, state, np.zeros((n, 3)), column, 0.1, 0.2, 0.3, True))):
        assert gpu._compile_ptx(minimiser[name], argument).count(".entry ") == 1, name


@pytest.mark.xdist_group("md_bath")  # the worker that compiles the CPU's system kernels of vi, langevin and brownian
def test_the_gpu_system_mode_follows_the_cpus_and_restarts_bit_for_bit(tmp_path):
    """kernels/gpu_system.py in numba-cuda's simulator (tests/gpu_system.py: 400 LJ particles at ρ* = 0.8 from a
    lattice at T = 2, the lists rebuilt within the runs): vi for 9 steps, langevin for 12, brownian for 6 and a
    polydisperse binary mixture with bonded chains under a temperature ramp (langevin) for 9 in the system mode
    with device="cuda"
    follow the CPU's system mode to round-off (q and ω within 1e-12, energy within
    1e-12 of its size, heat within 1e-10 J; their sums run in another order), with the same status and as many
    rebuilds; and langevin split at step 6 and restarted equals the uninterrupted run bit for bit, though the
    second call has another skin (1σ against 0.3σ), so that its lists are built at other steps and on another
    cell grid, which stores the particles in another order: each particle's sums run in its partners' id order
    (with the rows in storage order instead, q differs by 5.6e-17)."""
    out = tmp_path / "system.npz"
    subprocess.run([sys.executable, os.path.join(HERE, "gpu_system.py"), str(out)], check=True, timeout=600,
                   env={**os.environ, "NUMBA_ENABLE_CUDASIM": "1", "NUMBA_DISABLE_JIT": "1"})
    simulated = np.load(out)
    for name in gpu_system_cases.RUNS:
        cpu = gpu_system_cases.outcome(gpu_system_cases.run(name, "cpu"))
        for key, value in cpu.items():
            tolerance = {"heat": 1e-10, "energy": 1e-12 * np.abs(value).max()}.get(key, 1e-12)
            np.testing.assert_allclose(simulated[f"{name}_{key}"], value, rtol=0, atol=tolerance, err_msg=key)
        assert np.array_equal(simulated[f"{name}_status"], [0]) and simulated[f"{name}_neighbour_rebuilds"][0] >= 2
    split = {key.removeprefix("split_"): value for key, value in simulated.items() if key.startswith("split_")}
    whole = gpu_system_cases.SPLIT
    samples = gpu_system_cases.SPLIT_AT // gpu_system_cases.SAVE_EVERY
    for key in ("q_final", "omega_final"):
        np.testing.assert_array_equal(split[key], simulated[f"{whole}_{key}"], err_msg=key, strict=True)
    for key in ("q", "omega", "energy", "temperature", "heat"):
        np.testing.assert_array_equal(split[key], simulated[f"{whole}_{key}"][:, samples:], err_msg=key, strict=True)


@pytest.mark.xdist_group("md_bath")
def test_a_system_mode_store_on_the_simulated_gpu_follows_the_cpus_and_verifies(tmp_path, capsys):
    """A langevin run of 1000 LJ particles (the system mode) into a store, on the CPU and with --device cuda through
    the simulator, 2 steps in 2 segments (the second restarting from the first's end; the simulator takes ~8 s a
    step of 1000 particles): the same samples to round-off (q and heat within 1e-12 and 1e-10 J), both in the
    system mode with the bath's heat kept, each recording the revision of its sums (the CPU's 3, the GPU's 1), and
    `armillary verify` passes on the GPU's store."""
    import zarr
    from test_md import md_spec

    sigma = float(np.sqrt(0.8 * 4.0 * np.pi / 1000))
    paths = {}
    for device in ("cpu", "cuda"):
        spec = md_spec(tmp_path, particles=1000, steps=2, name=f"{device}.zarr", method="langevin",
                       integrator_lines=f"temperature = 1.0\nfriction = {1.0 / sigma!r}\n",
                       variables='["q", "energy", "temperature"]')
        paths[device] = tmp_path / f"{device}.toml"
        paths[device].write_text(spec.to_toml().replace("save_every = 5", "save_every = 1")
                                 .replace("checkpoint_every = 20", "checkpoint_every = 1"))
    assert main(["run", str(paths["cpu"])]) == 0
    run = subprocess.run([sys.executable, "-c", "import sys; from armillary.jobs.cli import main; sys.exit(main())",
                          "run", str(paths["cuda"]), "--device", "cuda"], capture_output=True, text=True,
                         timeout=300, env={**os.environ, "NUMBA_ENABLE_CUDASIM": "1", "NUMBA_DISABLE_JIT": "1"})
    assert run.returncode == 0 and "one per CUDA device (0)" in run.stdout + run.stderr, run.stdout + run.stderr
    cpu, on_gpu = (zarr.open_group(str(tmp_path / f"{device}.zarr"), mode="r") for device in ("cpu", "cuda"))
    assert on_gpu["q"].shape == cpu["q"].shape == (1, 3, 1000, 3)  # a sample every step
    for name, tolerance in (("q", 1e-12), ("heat", 1e-10), ("energy", 1e-9), ("temperature", 1e-12)):
        np.testing.assert_allclose(on_gpu[name][:], cpu[name][:], rtol=0, atol=tolerance, err_msg=name)
    assert np.abs(on_gpu["heat"][0, -1]) > 1e-3  # the bath did exchange heat
    # each records the revision of its own sums
    assert (cpu.attrs["system_mode_revision"], on_gpu.attrs["system_mode_revision"]) == (3, 1)
    capsys.readouterr()
    assert main(["verify", str(tmp_path / "cuda.zarr")]) == 0


def test_simulated_gpu_equals_the_cpu_bit_for_bit_and_a_restart_the_run_it_continues(tmp_path):
    """numba-cuda's simulator runs each thread's Python, the stages' own source with IEEE scalars, so every case
    (each method and kernel kind, Benettin shadows included) equals the CPU's lanes bit for bit: samples, energy,
    final state and status, and the shadows' growth to 2 units in the last place (the simulator's logarithm is
    NumPy's, which need not round as glibc's in the CPU's kernels: one ulp apart in one of the 5-link cart's sums);
    and the explicit vi continued in a second segment from the first's end equals the run in one go."""
    out = tmp_path / "simulated.npz"
    environment = dict(os.environ, NUMBA_ENABLE_CUDASIM="1", NUMBA_DISABLE_JIT="1")
    subprocess.run([sys.executable, os.path.join(HERE, "gpu_cases.py"), str(out)], env=environment, check=True,
                   timeout=300)
    simulated = np.load(out)
    for name in gpu_cases.CASES:
        for key, value in gpu_cases.run_case(name, "cpu").items():
            if key.endswith("_spectrum"):
                np.testing.assert_array_max_ulp(simulated[key], value, maxulp=2)
            else:
                np.testing.assert_array_equal(simulated[key], value, err_msg=key, strict=True)
    whole = gpu_cases.RESTARTED
    for variable in ("q", "omega"):  # the second half's samples are the whole run's from its middle on
        np.testing.assert_array_equal(simulated[f"restarted_{whole}_final_{variable}"],
                                      simulated[f"{whole}_final_{variable}"])
        middle = simulated[f"{whole}_{variable}"].shape[1] // 2
        np.testing.assert_array_equal(simulated[f"restarted_{whole}_{variable}"],
                                      simulated[f"{whole}_{variable}"][:, middle:])


#: a folder whose sitecustomize lays the CUDA driver's rule about fork over the simulator (read it)
DRIVER_RULE = os.path.join(HERE, "fixtures", "cuda_driver_rule")


def simulated_node(log, visible: str) -> dict:
    """The environment of a process on a simulated GPU node: numba-cuda's simulator with the driver's rule about
    fork (processes that start the driver recorded in ``log``) and the devices ``visible`` (CUDA_VISIBLE_DEVICES)."""
    path = os.pathsep.join(filter(None, [DRIVER_RULE, os.environ.get("PYTHONPATH")]))
    return dict(os.environ, NUMBA_ENABLE_CUDASIM="1", NUMBA_DISABLE_JIT="1", CUDA_VISIBLE_DEVICES=visible,
                PYTHONPATH=path, ARMILLARY_TEST_DRIVER_LOG=str(log))


def test_a_store_run_on_the_simulated_gpu_holds_the_cpu_stores_bits_and_verifies(tmp_path, capsys):
    """The same spec run into a store on the CPU and, with --device cuda, through the simulator on a node of two
    devices (a Dask local cluster of one worker per device, 2 chunks × 2 segments, each segment a kernel call
    restarting from the last): the same bits in every variable, and `armillary verify` passes on the GPU's store.
    With the driver's rule about fork laid over the simulator (:data:`DRIVER_RULE`), the command's own process,
    which forks the workers, never starts the driver (it did, to compile the kernel before forking, and every
    worker failed: "CUDA initialized before forking", the first time it ran on a GPU node); each worker starts its
    own, pinned to one device.  The members start from a file: the simulator's NUMBA_DISABLE_JIT would also run
    the CPU's perturbation in Python, whose last bits differ from its kernel's."""
    system, method, options, state, shadow = gpu_cases.case_state("explicit_vi", members=6)
    np.savez(tmp_path / "members.npz", q0=state["q"], omega0=state["omega"])
    cpu, on_gpu = (runner_spec(tmp_path, name, 'name = "sphere_nbody"\npreset = "paper"', ["q", "energy"],
                               method="vi", segment=50, chunk=3, members=6) for name in ("cpu.toml", "gpu.toml"))
    for path in (cpu, on_gpu):
        with open(path) as spec:
            text = spec.read().replace('initial = "perturb"', f'initial = "file"\npath = "{tmp_path / "members.npz"}"')
        with open(path, "w") as spec:
            spec.write(text.replace("scale = 0.001\n", ""))
    assert main(["run", cpu]) == 0
    log = tmp_path / "driver.log"
    run = subprocess.Popen([sys.executable, "-c", "import sys; from armillary.jobs.cli import main; sys.exit(main())",
                            "run", on_gpu, "--device", "cuda"], env=simulated_node(log, "0,1"),
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    output = run.communicate(timeout=300)[0]
    assert run.returncode == 0, output
    assert "2 local workers, one per CUDA device (0, 1)" in output
    started = [json.loads(line) for line in log.read_text().splitlines()]
    # the process that forked the workers never started the driver; each worker started its own, on its own device
    assert started and run.pid not in {process["pid"] for process in started}, (run.pid, started)
    assert {process["visible"] for process in started} <= {"0", "1"}, started
    stores = [path.replace(".toml", ".zarr") for path in (cpu, on_gpu)]
    assert_bitwise_equal(arrays(stores[0]), arrays(stores[1]))
    capsys.readouterr()
    assert main(["verify", stores[1]]) == 0


def test_what_the_gpu_does_not_run_is_refused_naming_it():
    """Before anything compiles or a device is looked for: a space, a method and options the GPU does not run yet."""
    body = get_system("kirchhoff_body", "ellipsoid")
    with pytest.raises(InvalidInput, match="device: lgvi runs on device 'cuda' for rotation systems so far; "
                                           "kirchhoff_body is on rigid_motion"):
        integrate(body, "lgvi", {name: value[np.newaxis] for name, value in body.initial_state().items()}, 0.01, 2,
                  device="cuda")
    system, method, options, state, shadow = gpu_cases.case_state("explicit_vi")
    with pytest.raises(InvalidInput, match="sections: device 'cuda' does not run surfaces of section yet"):
        integrate(system, method, state, 0.01, 2, sections=Section("equator", "q[0][2]"), device="cuda")
    with pytest.raises(InvalidInput, match="method: 'rk2' does not run on device 'cuda' in the ensemble mode yet; "
                                           "there: vi, lgvi, rk4, rk45"):
        integrate(system, "rk2", state, 0.01, 2, device="cuda")
    with pytest.raises(InvalidInput, match="'langevin' does not run on device 'cuda' in the ensemble mode yet; .*"
                                           "langevin and brownian run there in the system mode"):
        integrate(system, "langevin", state, 0.01, 2, device="cuda", temperature=1.0, friction=1.0)
    with pytest.raises(InvalidInput, match="outputs: device 'cuda' does not run close-encounter tracking"):
        integrate(system, "vi", state, 0.01, 2, outputs=("q", "min_separation"), device="cuda")
    with pytest.raises(InvalidInput, match="device: unknown device 'gpu'; allowed: cpu, cuda"):
        integrate(system, "vi", state, 0.01, 2, device="gpu")


def test_numba_cuda_compiles_beside_a_numpy_without_row_stack():
    """numba-cuda 0.30 overloads np.row_stack when it first compiles, and NumPy 2.5 removed it: on an H100 node with
    NumPy 2.5.2 every kernel failed to compile (AttributeError) until cuda_module stood np.vstack in for it."""
    script = ("import numpy as np; del np.row_stack; from armillary.kernels.gpu import cuda_module; cuda_module(); "
              "from numba.cuda.np import arrayobj")
    completed = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert completed.returncode == 0, completed.stderr


#: the demo's spec (any spec the GPU runs: the refusal comes first)
DEMO = os.path.join(HERE, os.pardir, "examples", "demo.toml")


def test_device_cuda_without_a_gpu_is_refused_in_one_line_and_writes_nothing(tmp_path, capsys):
    """`armillary run --device cuda` on a machine without a GPU: one line naming what is missing, exit 2, no store
    (`check` says so and passes: a spec is checked where it is written); an unknown device lists the allowed ones,
    and the device is part of the store's identity (a GPU's bits are not the CPU's)."""
    store = tmp_path / "run.zarr"
    assert main(["run", DEMO, "--store", str(store), "--device", "cuda"]) == 2
    error = capsys.readouterr().err.strip()
    assert "\n" not in error
    assert error.startswith("armillary: execution.device: 'cuda' needs a CUDA GPU: ")
    assert "CUDA driver library cannot be found" in error and "--gres=gpu:1" in error
    assert not store.exists()
    # `check` (and `submit`) run where no GPU need be, a login node: valid, with a note that it runs elsewhere
    assert main(["check", DEMO, "--store", str(store), "--device", "cuda"]) == 0
    assert "armillary: execution.device: not here: 'cuda' needs a CUDA GPU: " in capsys.readouterr().out
    assert not store.exists()
    with open(DEMO) as demo:
        text = demo.read()
    spec = tmp_path / "spec.toml"
    spec.write_text(text + '\n[execution]\ndevice = "gpu"\n')
    assert main(["run", str(spec), "--store", str(store)]) == 2
    assert capsys.readouterr().err.strip() == "armillary: execution.device: unknown value 'gpu'; allowed: cpu, cuda"
    cpu = ensemble.parse_spec(text)
    assert cpu.device is None and '"device"' not in cpu.identity()
    assert ensemble.parse_spec(text, device="cpu").identity() == cpu.identity()
    assert ensemble.parse_spec(text, device="cuda").identity() != cpu.identity()
    exact = ensemble.parse_spec(text + '\n[execution]\ndevice = "cuda"\nfma = false\n')
    assert exact.fma is False and exact.identity() != ensemble.parse_spec(text, device="cuda").identity()
    with pytest.raises(InvalidInput, match="execution.fma: false applies to device = \"cuda\""):
        ensemble.parse_spec(text + '\n[execution]\nfma = false\n')
    assert not store.exists()
    # workers elsewhere (a scheduler's, SLURM's): the first to join checks its own device before any segment runs
    remote = ensemble.load_spec(DEMO, device="cuda", store=str(tmp_path / "remote.zarr"), workers=1)
    plan = ensemble.prepare(remote)[0]
    write_template(plan)
    with pytest.raises(InvalidInput, match="execution.device: on the cluster's workers: 'cuda' needs a CUDA GPU: "):
        execute(plan, io.StringIO(), gpus=[])
    assert RunStore(remote.store).done_grid().sum() == 0


def test_each_worker_of_a_gpu_run_takes_its_own_device(tmp_path, capsys):
    """Several GPUs without a GPU: a local cluster for two devices starts two workers, each pinned to one
    (CUDA_VISIBLE_DEVICES set in the worker before its first task); a SLURM worker job of ``gpus = 2`` asks for
    --gres=gpu:2 and runs two worker processes, whose names give each its device; an array task of a GPU spec asks
    for one GPU; and a run asking for more GPUs than the node shows is refused in one line, nothing written."""
    from armillary.ensemble.clusters import dask_client, worker_start_method
    from armillary.ensemble.devices import worker_position
    from armillary.jobs.clusters import slurm_cluster
    from armillary.jobs.slurm import Site, render

    with pytest.MonkeyPatch.context() as patch:  # a process that started CUDA itself spawns its workers
        patch.setitem(sys.modules, "numba.cuda.cudadrv.driver", types.SimpleNamespace(
            driver=types.SimpleNamespace(pid=os.getpid())))
        assert worker_start_method() == "spawn"
    with dask_client({"kind": "local", "workers": 1, "dashboard": "127.0.0.1"}, 1, None, ["3", "GPU-7f"]) as client:
        pinned = client.run(lambda: os.environ.get("CUDA_VISIBLE_DEVICES"))
    assert sorted(pinned.values()) == ["3", "GPU-7f"], pinned
    assert [worker_position(name, 2) for name in ("SLURMCluster-4-0", "SLURMCluster-4-1")] == [0, 1]
    assert worker_position("SLURMCluster-4", 1) == 0 and worker_position(1, 2) == 1
    with slurm_cluster({"kind": "slurm", "minimum_jobs": 0, "gpus": 2}, str(tmp_path), gpus=True) as jobs:
        script = jobs.job_script()
    assert "#SBATCH --gres=gpu:2" in script and "--nworkers 2" in script, script
    spec = ensemble.parse_spec(open(DEMO).read(), device="cuda", store=str(tmp_path / "run.zarr"))
    assert "#SBATCH --gres=gpu:1" in render("spec.toml", spec, Site(), 2)[0]
    assert "--gres" not in render("spec.toml", ensemble.parse_spec(open(DEMO).read()), Site(), 2)[0]
    with open(DEMO) as demo:
        (tmp_path / "three.toml").write_text(demo.read() + "\n[execution]\ndevice = \"cuda\"\n")
    (tmp_path / "three.toml").write_text((tmp_path / "three.toml").read_text().replace("[cluster]\n",
                                                                                         "[cluster]\ngpus = 3\n"))
    store = tmp_path / "three.zarr"
    command = [sys.executable, "-c", "import sys; from armillary.jobs.cli import main; sys.exit(main())"]
    for verb in ("check", "run"):
        completed = subprocess.run(command + [verb, str(tmp_path / "three.toml"), "--store", str(store)],
                                   env=simulated_node(tmp_path / "driver.log", "0,1"), capture_output=True, text=True,
                                   timeout=120)
        assert completed.returncode == 2, completed.stderr
        assert completed.stderr.strip().endswith("cluster.gpus: 3 GPUs asked for, this node has 2 visible (0, 1); "
                                                 "at most 2"), completed.stderr
    assert not store.exists() and not (tmp_path / "driver.log").exists()
