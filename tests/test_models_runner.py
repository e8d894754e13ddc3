"""A user's model through the runner: bitwise across layouts, kill -9 and resume; a λ map over one of its
parameters with its report; every bad model refused before anything is written (one line, exit 2); and an
install of the package outside the repository running a model spec."""

import io
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import zarr

from armillary import ensemble
from armillary.ensemble.accessor import open_store
from armillary.ensemble.analysis import lyapunov_map
from armillary.ensemble.report import write_report
from armillary.jobs.cli import main

from ensemble_cases import arrays, assert_bitwise_equal, kill_9_and_resume_match, run_across_layouts, runner_spec

pytestmark = pytest.mark.xdist_group("models_runner")

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "models" / "coupled_pendula.py"
NAMES = ("q", "omega", "energy", "q0", "omega0", "status", "failed_step")
VARIABLES = ("q", "omega", "energy", "unit_error")


def model_copy(directory, text=None, name="pendula.py") -> Path:
    """The README's coupled pendula (or ``text``) as a model file in ``directory``."""
    path = Path(directory) / name
    path.write_text(EXAMPLE.read_text() if text is None else text)
    return path


def model_line(path) -> str:
    return f'model = "{path}"'


def test_model_run_is_bitwise_across_chunks_workers_and_segments(tmp_path):
    run_across_layouts(str(tmp_path), model_line(model_copy(tmp_path)), VARIABLES, NAMES, method="vi")


def test_model_run_killed_and_resumed_is_bitwise_an_uninterrupted_run(tmp_path):
    spec = runner_spec(str(tmp_path), "spec.toml", model_line(model_copy(tmp_path)), VARIABLES, method="vi",
                       segment=20, t_end=2.0, members=6, chunk=2)
    kill_9_and_resume_match(spec, str(tmp_path), NAMES)


def test_model_store_carries_the_text_and_runs_without_the_file(tmp_path):
    """The store holds the model's text (characters beyond the BMP too); analysis of the store needs no file."""
    text = EXAMPLE.read_text() + "# the added-mass matrix 𝕄 (a character beyond the BMP)\n"
    model = model_copy(tmp_path, text)
    spec = runner_spec(str(tmp_path), "spec.toml", model_line(model), VARIABLES, method="vi")
    ds = ensemble.run(spec, stream=io.StringIO())
    assert ds.attrs["model_source"] == text and ds.attrs["model"] == str(model)
    model.unlink()
    stored = ensemble.parse_spec(ds.attrs["spec"], stored=True)
    assert stored.identity() == ds.attrs["identity"]
    assert open_store(stored.store).energy.shape == (6, 11)


def test_lyapunov_map_over_a_model_parameter_and_its_report(tmp_path):
    model = model_copy(tmp_path)
    text = runner_spec(str(tmp_path), "sweep.toml", model_line(model) + "\nparams = { k = { values = [0.0, 8.0] } }",
                       VARIABLES, method="vi", t_end=5.0, segment=250, members=8, chunk=4)
    spec = Path(text)
    spec.write_text(spec.read_text() + '\n[analysis]\nlyapunov = { d0 = 1e-8, renormalise_every = 10 }\n')
    ds = ensemble.run(str(spec), stream=io.StringIO())
    grid = lyapunov_map(ds)
    np.testing.assert_array_equal(grid.k.values, [0.0, 8.0])
    assert np.all(np.isfinite(grid.median_lyapunov.values)) and np.all(grid.median_lyapunov.values >= 0)
    out = tmp_path / "report"
    write_report([str(tmp_path / "sweep.zarr")], str(out))
    assert (out / "sweep.zarr_lyapunov_map.png").stat().st_size > 10_000
    assert "| sweep.zarr" in (out / "report.md").read_text()


# ---------------------------------------------------------------------------------------------- bad models

def refused(tmp_path, capsys, text, message, params="", method="vi", extra=""):
    """``armillary run`` of a spec of the model ``text``: exit 2, one line naming ``message``, no store."""
    model = model_copy(tmp_path, text, "bad.py")
    spec = Path(runner_spec(str(tmp_path), "bad.toml", model_line(model) + params, VARIABLES, method=method))
    if extra:
        spec.write_text(spec.read_text().replace("[ensemble]", extra + "\n[ensemble]"))
    assert main(["run", str(spec)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err
    assert not (tmp_path / "bad.zarr").exists()
    return err


def edited(replace, by):
    text = EXAMPLE.read_text()
    assert replace in text
    return text.replace(replace, by)


def test_syntax_error_names_file_and_line(tmp_path, capsys):
    err = refused(tmp_path, capsys, edited("bodies = 2", "bodies = = 2"), "syntax error")
    assert f"bad.py:{EXAMPLE.read_text().splitlines().index('bodies = 2') + 1}:" in err


def test_unknown_name_in_an_expression_is_named(tmp_path, capsys):
    err = refused(tmp_path, capsys, edited("p.k / 2 * dot(d, d)", "p.k / 2 * dott(d, d)"),
                  "unknown name 'dott' in potential")
    assert "bad.py:" in err


def test_missing_potential(tmp_path, capsys):
    refused(tmp_path, capsys, edited("def potential(q, p):", "def energy(q, p):"),
            "a sphere_product model must define potential or pair_potential")


def test_potential_returning_a_vector(tmp_path, capsys):
    refused(tmp_path, capsys, edited("return sum(p.m[i]", "return d or sum(p.m[i]"),
            "potential(q, p) must return a scalar")


def test_unsupported_space(tmp_path, capsys):
    refused(tmp_path, capsys, edited('space = "sphere_product"', 'space = "torus"'),
            "space = 'torus' is not supported; allowed: sphere_product, rotation, rigid_motion, generalised")


def test_parameter_the_file_does_not_declare(tmp_path, capsys):
    refused(tmp_path, capsys, None, "system.params.kappa: unknown parameter of the model file",
            params="\nparams = { kappa = 2.0 }")
    # the declared ones are listed
    refused(tmp_path, capsys, None, "allowed: m, l, g, k", params="\nparams = { kappa = 2.0 }")


def test_inertia_not_positive_definite_at_the_initial_state(tmp_path, capsys):
    refused(tmp_path, capsys, None, "inertia is not positive definite at the initial state of member 0",
            params="\nparams = { m = [-1.0, 1.5] }")


def test_expression_not_finite_at_an_initial_state(tmp_path, capsys):
    refused(tmp_path, capsys, edited("+ p.k / 2 * dot(d, d)", "+ p.k / 2 * dot(d, d) + log(q[0][2] + 0.5)"),
            "potential(q, p) is not finite (nan) at the initial state of member 0")


def test_method_variant_the_model_cannot_take(tmp_path, capsys):
    refused(tmp_path, capsys, None, "integrator.adaptive: adaptive vi steps the explicit", extra="adaptive = true")


def test_resuming_with_an_edited_model_is_refused(tmp_path, capsys):
    model = model_copy(tmp_path)
    spec = runner_spec(str(tmp_path), "spec.toml", model_line(model), VARIABLES, method="vi", t_end=0.1)
    ensemble.run(spec, stream=io.StringIO())
    before = arrays(str(tmp_path / "spec.zarr"), NAMES)
    model.write_text(model.read_text().replace('"k": 4.0', '"k": 5.0'))
    assert main(["run", spec]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"system.model: {model} changed since" in err, err
    assert_bitwise_equal(arrays(str(tmp_path / "spec.zarr"), NAMES), before)


# ---------------------------------------------------------------------------------------------- the install

def test_pip_install_has_no_generic_top_level_names_and_runs_a_model_spec(tmp_path):
    """``pip install .`` into a fresh venv: only ``armillary`` at the top of site-packages; its console script
    runs a model spec from a directory outside the repository (dependencies from the test environment)."""
    venv = tmp_path / "venv"
    # the venv without a pip of its own: this environment's pip installs into it (ensurepip took 3 s)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    install = subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install",
                              "--quiet", "--no-deps", str(ROOT)], capture_output=True, text=True)
    assert install.returncode == 0, install.stderr
    site = next((venv / "lib").glob("python3*/site-packages"))
    top = {path.name for path in site.iterdir()}
    assert "armillary" in top and not top & {"kernels", "ensemble", "jobs"}, sorted(top)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    model_copy(outside)
    spec = runner_spec(str(outside), "spec.toml", 'model = "pendula.py"', VARIABLES, method="vi", t_end=0.1)
    dependencies = next(Path(sys.prefix, "lib").glob("python3*/site-packages"))
    environment = {**os.environ, "PYTHONPATH": str(dependencies)}
    result = subprocess.run([str(venv / "bin" / "armillary"), "run", "spec.toml"], cwd=outside, env=environment,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    assert zarr.open_group(str(outside / "spec.zarr"), mode="r").attrs["system"].startswith("pendula_")
    shutil.rmtree(venv)


def test_the_own_models_guide_python_example_gives_what_it_says(monkeypatch):
    """The own-models guide's Python block, as written (from the repository root): it runs (as every docs block
    does, tests/test_docs_code.py), and its result is what vi gives: every member sound, energy kept to 1e-4."""
    guide = (ROOT / "docs" / "how-to" / "own-models.md").read_text()
    block = guide.split("```python\nimport armillary\n", 1)[1].split("```", 1)[0]
    monkeypatch.chdir(ROOT)
    namespace = {}
    exec("import armillary\n" + block, namespace)  # noqa: S102
    result = namespace["result"]
    assert result.status[0] == 0 and abs(result.energy[0, -1] / result.energy[0, 0] - 1) < 1e-4


def test_check_of_a_model_spec_checks_states_and_the_gradient(tmp_path, capsys):
    spec = runner_spec(str(tmp_path), "spec.toml", model_line(model_copy(tmp_path)), VARIABLES, method="vi")
    assert main(["check", spec]) == 0
    out = capsys.readouterr().out
    assert "positive definite at the initial states of members 0–2" in out, out
    error = float(out.split("largest error ")[1].split()[0])
    assert error < 1e-6 and not (tmp_path / "spec.zarr").exists()


def test_systems_lists_a_model_file(capsys):
    assert main(["systems", "--model", str(EXAMPLE)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("coupled_pendula_") and "k scalar   [N/m]" in out and "methods: vi, langevin, brownian, rk2" in out, out


def test_a_plan_unpickled_in_a_fresh_process_builds_the_model_from_its_text(tmp_path):
    """What a spawned Dask worker gets: the plan pickles as its spec, and a process that never saw the model
    (nor its file, deleted here) builds the system from the spec's text."""
    import pickle

    from armillary.ensemble.plan import Plan

    model = model_copy(tmp_path)
    plan = Plan(ensemble.load_spec(runner_spec(str(tmp_path), "spec.toml", model_line(model), VARIABLES, method="vi")))
    name = plan.system.name  # built here, and cached on this plan: not what a worker receives
    model.unlink()
    code = "import pickle, sys; plan = pickle.load(sys.stdin.buffer); print(plan.system.name, plan.n_bodies)"
    result = subprocess.run([sys.executable, "-c", code], input=pickle.dumps(plan), capture_output=True, timeout=300)
    assert result.returncode == 0, result.stderr.decode()
    assert result.stdout.decode().split() == [name, "2"]


NO_PARAMETERS = '''
space = "sphere_product"
bodies = 1


def inertia(p):
    return [[2.0]]


def potential(q, p):
    return 9.81 * q[0][2]


def initial_state(p):
    return {"q": [[0.6, 0.0, -0.8]], "omega": [[0.0, 1.0, 0.0]]}
'''


def test_a_model_without_parameters_runs_many_members(tmp_path):
    """Its one coefficient row and inertia serve every member: member 4 of five equals it run alone, and the
    energies are those of each member's own speed, E = ½ M |ω|² + V (|ω| = 1 … 5 rad/s, V = 9.81 × −0.8 J)."""
    import armillary

    pendulum = armillary.load_model(model_copy(tmp_path, NO_PARAMETERS, "still.py"))
    state = {name: np.repeat(value[np.newaxis], 5, axis=0) for name, value in pendulum.initial_state().items()}
    state["omega"] = state["omega"] * np.arange(1.0, 6.0)[:, np.newaxis, np.newaxis]
    block = armillary.integrate(pendulum, "vi", state, 1e-3, 100)
    alone = armillary.integrate(pendulum, "vi", {name: value[4:] for name, value in state.items()}, 1e-3, 100)
    np.testing.assert_array_equal(block.final["q"][4], alone.final["q"][0])
    np.testing.assert_allclose(block.energy[:, 0], np.arange(1.0, 6.0) ** 2 - 9.81 * 0.8, rtol=1e-15)


#: validates a model spec as `armillary check` does and prints the functions Numba compiled meanwhile
COMPILES = """
import sys
from numba.core import event
compiled = []
class Listener(event.Listener):
    def on_start(self, data):
        pass
    def on_end(self, data):
        compiled.append(data.data["dispatcher"].py_func.__qualname__)
event.register("numba:compile", Listener())
from armillary.ensemble.runs import prepare
from armillary.ensemble.spec import load_spec
prepare(load_spec(sys.argv[1]))
print(" ".join(sorted(set(compiled))))
"""


def test_a_models_lane_functions_come_from_numbas_cache_in_the_next_process(tmp_path):
    """The model checks call a model's inertia, potential and gradient from Python: compiled by the first process
    that builds the model, loaded from Numba's cache by the next (about 1 s of every run and check)."""
    spec = str(ROOT / "examples" / "coupled-pendula.toml")
    environment = {**os.environ, "ARMILLARY_MODEL_CACHE": str(tmp_path / "models")}
    runs = [subprocess.run([sys.executable, "-c", COMPILES, spec], env=environment, capture_output=True, text=True,
                           check=True).stdout.split() for _ in range(2)]
    model_functions = {"inertia_values", "potential", "gradient"}
    assert model_functions <= set(runs[0]), runs[0]  # a fresh model cache: its generated module is new to Numba
    assert not model_functions & set(runs[1]), runs[1]
