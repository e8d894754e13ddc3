"""Ensembles on a CUDA GPU (kernels/gpu.py) on a machine without one: every GPU kernel compiled to PTX for the
device, numba-cuda's simulator stepping each case equal to the CPU bit for bit (and a restart equal to the run
it continues), and what needs a GPU or does not run there yet refused in one line."""

import functools
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from armillary import ensemble
from armillary.jobs.cli import main
from armillary.kernels import InvalidInput, get_system, gpu, integrate
from armillary.kernels.sections import Section

import gpu_cases
from ensemble_cases import arrays, assert_bitwise_equal, runner_spec

HERE = os.path.dirname(__file__)


#: the kernels compiled to PTX: each (method, space) of the GPU and each kind of its (S²)ⁿ kernels (the rk4 of full
#: M compiles the same driver and stages as the others, and a kernel with shadows the stages of one without)
PTX_CASES = ["explicit_vi", "implicit_vi_shadows", "rk4_diagonal", "lgvi_rotation_shadows", "rk4_rotation",
             "rk4_rigid_motion", "rk45_full", "rk45_rotation", "rk4_multibody_shadows", "rk45_loop_closure",
             "rk4_rolling_ball", "rk45_rolling_disk"]


@functools.cache
def ptx(case: str, fma: bool = True) -> str:
    """The PTX of the kernel case ``case`` would launch (compute capability 8.0), compiled once per test worker."""
    system, method, options, state, shadow = gpu_cases.case_state(case)
    kernels = gpu.ptx_of(lambda: integrate(system, method, state, gpu_cases.DT, 2, 1, shadow=shadow, device="cuda",
                                           fma=fma, **options))
    assert len(kernels) == 1
    return kernels[0]


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


def test_a_store_run_on_the_simulated_gpu_holds_the_cpu_stores_bits_and_verifies(tmp_path, capsys):
    """The same spec run into a store on the CPU and, with --device cuda, through the simulator (a Dask local
    cluster, 2 chunks × 2 segments, each segment a kernel call restarting from the last): the same bits in every
    variable, and `armillary verify` passes on the GPU's store.  The members start from a file: the simulator's
    NUMBA_DISABLE_JIT would also run the CPU's perturbation in Python, whose last bits differ from its kernel's."""
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
    environment = dict(os.environ, NUMBA_ENABLE_CUDASIM="1", NUMBA_DISABLE_JIT="1")
    subprocess.run([sys.executable, "-c", "import sys; from armillary.jobs.cli import main; sys.exit(main())", "run",
                    on_gpu, "--device", "cuda"], env=environment, check=True, capture_output=True, timeout=300)
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
    with pytest.raises(InvalidInput, match="method: 'rk2' does not run on device 'cuda' yet; there: vi, lgvi, rk4, rk45"):
        integrate(system, "rk2", state, 0.01, 2, device="cuda")
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
