"""Spec fuzzing: thousands of generated specs (valid specs with values, types, keys and sections
changed, removed or added, and raw text damage) through ``armillary check`` and, when refused,
``armillary run``: every refusal is one line naming a field, exit 2, nothing created; no input
produces a traceback."""

import contextlib
import io
import os
import tempfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from armillary.ensemble.spec import _toml_value
from armillary.jobs.cli import main
from armillary.kernels import METHODS, SYSTEMS

EXAMPLES = 2000


BASES = [
    {"system": {"name": "sphere_nbody", "preset": "paper"},
     "integrator": {"method": "vi", "dt": 0.001, "t_end": 0.01, "save_every": 2, "checkpoint_every": 4},
     "ensemble": {"members": 4, "seed": 7, "initial": "perturb", "scale": 1e-3, "chunk": 2},
     "output": {"variables": ["energy", "unit_error"]}, "cluster": {"kind": "local", "workers": 1}},
    {"system": {"name": "spherical_chain", "params": {"m": [1.0, 1.0, 1.0], "l": [1.0, 1.0, 1.0], "g": {"values": [9.81, 1.62]}}},
     "integrator": {"method": "rk45", "dt": 0.01, "t_end": 0.1, "rtol": 1e-6},
     "ensemble": {"members": 4, "initial": "uniform", "omega_scale": 0.5},
     "output": {"variables": ["q", "energy"]}},
    {"system": {"name": "heavy_top", "preset": "chaotic", "params": {"m": {"linspace": [0.5, 1.5, 2]}}},
     "integrator": {"method": "lgvi", "dt": 0.01, "t_end": 0.05},
     "ensemble": {"members": 2, "initial": "perturb"},
     "output": {"variables": ["R", "Omega", "energy", "orthogonality_error"]},
     "analysis": {"lyapunov": {"d0": 1e-8, "renormalise_every": 5}}},
    {"system": {"name": "sphere_lj", "params": {"epsilon": 1.0, "sigma": 0.3, "cutoff": 0.75, "m": 1.0}},
     "integrator": {"method": "vi", "dt": 0.001, "t_end": 0.002},
     "ensemble": {"members": 1, "initial": "particles", "particles": 20, "placement": "fibonacci",
                  "temperature": 1.0},
     "output": {"variables": ["energy", "unit_error"]}},
]

#: the keys of each section (so mutations reach every section's checks, not only the first's)
SECTION_KEYS = {
    "system": ["name", "preset", "params"],
    "integrator": ["method", "dt", "t_end", "save_every", "checkpoint_every"]
    + sorted({key for method in METHODS.values() for key in method.options}),
    "ensemble": ["members", "seed", "initial", "scale", "omega_scale", "path", "chunk", "particles", "placement",
                 "temperature", "min_separation"],
    "output": ["store", "variables"],
    "cluster": ["kind", "workers", "scheduler", "partition", "cores", "memory", "walltime"],
    "analysis": ["lyapunov"],
}
KNOWN_KEYS = sorted({key for keys in SECTION_KEYS.values() for key in keys}
                    | {p.name for definition in SYSTEMS.values() for p in definition.parameters})
WORDS = sorted(set(SYSTEMS) | set(METHODS) | {"paper", "chaotic", "uniform", "perturb", "file", "preset", "particles",
                                              "local", "slurm", "address", "tcp://127.0.0.1:1", "q", "omega", "R",
                                              "energy", "fibonacci", "random", ""})
SECTIONS = ["system", "integrator", "ensemble", "output", "cluster", "analysis"]

scalars = st.one_of(
    st.integers(min_value=-2 ** 63, max_value=2 ** 63 - 1), st.floats(), st.booleans(), st.sampled_from(WORDS),
    st.text(max_size=8), st.sampled_from([0, 1, 2, -1, 0.0, 1e-300, 1e300, 0.5, 3]))
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                        st.dictionaries(st.sampled_from(KNOWN_KEYS + ["values",
                                                                        "linspace", "x"]), inner, max_size=3)),
                      max_leaves=6)
mutation = st.one_of(
    st.sampled_from(SECTIONS).flatmap(lambda section: st.tuples(
        st.just("set"), st.just(section), st.sampled_from(SECTION_KEYS[section] + ["unknown_key"]), values)),
    st.tuples(st.just("set_param"), st.sampled_from(KNOWN_KEYS), values),
    st.sampled_from(SECTIONS).flatmap(lambda section: st.tuples(
        st.just("delete"), st.just(section), st.sampled_from(SECTION_KEYS[section]))),
    st.tuples(st.just("drop_section"), st.sampled_from(SECTIONS)),
    st.tuples(st.just("section_value"), st.sampled_from(SECTIONS + ["extra", "Integrator"]), scalars),
)


def toml_text(document: dict) -> str:
    lines = []
    for section, table in document.items():
        if isinstance(table, dict):
            lines.append(f"[{section}]")
            lines += [f"{_key(key)} = {_toml_value(value)}" for key, value in table.items()]
        else:
            lines.insert(0, f"{_key(section)} = {_toml_value(table)}")
    return "\n".join(lines) + "\n"


def _key(key: str) -> str:
    return key if key and key.replace("_", "").isalnum() and key.isascii() else _toml_value(key)


def mutate(base: dict, mutations) -> dict:
    document = {section: dict(table) for section, table in base.items()}
    for operation, *args in mutations:
        if operation == "set":
            section, key, value = args
            if not isinstance(document.get(section, {}), dict):
                document[section] = {}
            document.setdefault(section, {})[key] = value
        elif operation == "set_param":
            key, value = args
            system = document.setdefault("system", {})
            if isinstance(system, dict):
                params = system.get("params")
                system["params"] = dict(params) if isinstance(params, dict) else {}
                system["params"][key] = value
        elif operation == "delete":
            section, key = args
            if isinstance(document.get(section), dict):
                document[section].pop(key, None)
        elif operation == "drop_section":
            document.pop(args[0], None)
        else:
            document[args[0]] = args[1]
    return document


def call(*argv) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def workdir():
    with tempfile.TemporaryDirectory() as directory:
        previous = os.getcwd()
        os.chdir(directory)  # relative stores a mutation writes land here, and must not appear
        try:
            yield directory
        finally:
            os.chdir(previous)


def test_every_generated_spec_is_checked_or_refused_in_one_line(workdir):
    count = {"specs": 0, "refused": 0, "valid": 0}

    @settings(max_examples=EXAMPLES, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(base=st.sampled_from(range(len(BASES))), mutations=st.lists(mutation, min_size=0, max_size=4),
           damage=st.tuples(st.integers(0, 9), st.integers(0, 400), st.text(max_size=6)))
    def fuzz(base, mutations, damage):
        check_one_spec(workdir, BASES[base], mutations, damage, count)

    fuzz()
    assert count["specs"] >= EXAMPLES
    assert count["valid"] >= 20 and count["refused"] >= EXAMPLES // 2, count


def check_one_spec(workdir, base, mutations, damage, count):
    """One generated spec through ``check`` and, when refused, ``run``."""
    document = mutate(base, mutations)
    store = os.path.join(workdir, "never.zarr")
    if isinstance(document.get("output"), dict):
        document["output"].setdefault("store", store)
    try:
        text = toml_text(document)
    except TypeError:  # a value TOML cannot hold (our writer refuses it): write it as a string
        text = toml_text({s: {k: str(v) for k, v in t.items()} if isinstance(t, dict) else str(t)
                          for s, t in document.items()})
    chance, at, insert = damage
    if chance == 0:  # one spec in ten: raw text damage (mostly invalid TOML)
        text = text[:at] + insert + text[at:]
    path = os.path.join(workdir, "spec.toml")
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)
    before = sorted(os.listdir(workdir))
    count["specs"] += 1
    code, out, err = call("check", path)
    assert code in (0, 2), (code, err)
    if code == 0:
        count["valid"] += 1
        assert "valid" in out and not err
        return
    count["refused"] += 1
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("armillary: ") and ": " in lines[0][11:], err
    assert out == ""
    code, out, err_run = call("run", path)
    assert code == 2 and err_run == err, (code, err_run, err)
    after = sorted(os.listdir(workdir))
    assert after == before, f"a refused spec created {sorted(set(after) - set(before))}"

