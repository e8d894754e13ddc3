"""The docs' reference pages against the code, both ways: every spec key the reader takes is declared and
documented and every documented key is read; every CLI argument, system parameter, store variable and exit
code is in its generated page, and every entry of those pages exists in the code."""

import re
from pathlib import Path

import pytest

from armillary.ensemble import load_spec
from armillary.ensemble.clusters import run_security_files
from armillary.ensemble.store import COMMON_ATTRS, INDICATOR_ATTRS
from armillary.ensemble.spec import READ_FIELDS, _Section, declared_fields
from armillary.jobs.cli import EXIT_CODES, build_parser
from armillary.jobs.clusters import SLURM_KEY_DOCS, parse_slurm_cluster
from armillary.jobs.reference import reference_pages, subcommands
from armillary.kernels import InvalidInput, SPACES, SYSTEMS

ROOT = Path(__file__).resolve().parent.parent
PAGES = reference_pages()
#: specs that read the keys the examples leave out: an address cluster (the slurm cluster's keys are read
#: through its parser, which checks the site against SLURM after reading them)
EXTRA_SPEC = '''
[system]
name = "sphere_nbody"
preset = "paper"
[integrator]
method = "vi"
dt = 0.01
t_end = 0.1
[ensemble]
members = 2
[output]
store = "{store}"
[cluster]
kind = "address"
scheduler = "tls://127.0.0.1:8786"
tls_ca_file = "{tls}/ca.pem"
tls_cert = "{tls}/cert.pem"
tls_key = "{tls}/key.pem"
'''


def table_keys(page: str, heading: str) -> set[str]:
    """The first-column `names` of the table under ``heading`` (up to the next heading of any level)."""
    section = page.split(heading, 1)[1]
    section = re.split(r"\n#+ ", section, maxsplit=1)[0]
    return set(re.findall(r"^\| `([^`]+)`", section, re.MULTILINE))


def test_every_spec_key_is_declared_documented_and_read(tmp_path):
    """Parsing the example specs (and one address-cluster spec, and the slurm cluster's keys) reads every
    declared key, and reads no other (the reader refuses to); every declared key is in the spec page."""
    for path in sorted((ROOT / "examples").glob("*.toml")):
        load_spec(path, store=str(tmp_path / "x.zarr"))
    extra = tmp_path / "extra.toml"
    run_security_files(str(tmp_path))
    extra.write_text(EXTRA_SPEC.format(store=tmp_path / "y.zarr", tls=tmp_path))
    load_spec(extra)
    try:
        parse_slurm_cluster(_Section("cluster", {}))
    except InvalidInput:
        pass  # the site check after the keys are read
    assert declared_fields() - READ_FIELDS == set(), "declared but never read"
    assert READ_FIELDS - declared_fields() == set(), "read but not declared"
    page = PAGES["spec.md"]
    for field in declared_fields():
        section, key = field.rsplit(".", 1)
        assert f"| `{key}` |" in page, f"{field} is not in the spec reference"
    assert set(SLURM_KEY_DOCS) <= table_keys(page, '### `kind = "slurm"`')


def test_undeclared_keys_cannot_be_read():
    with pytest.raises(KeyError, match="spec key integrator.not_a_key is read but not declared"):
        _Section("integrator", {}).get("not_a_key", "int")


def test_every_cli_argument_is_in_the_cli_page_and_the_reverse():
    page = PAGES["cli.md"]
    for name, (parser, _) in subcommands(build_parser()).items():
        documented = table_keys(page, f"## `armillary {name}`")
        actual = {", ".join(action.option_strings) or action.metavar or action.dest for action in parser._actions
                  if action.dest != "help"}
        assert documented == actual, name


def test_every_system_parameter_is_in_the_systems_page_and_the_reverse():
    page = PAGES["systems.md"]
    for name, definition in SYSTEMS.items():
        assert table_keys(page, f"## `{name}`") == {p.name for p in definition.parameters}, name


def test_every_store_variable_and_exit_code_is_in_its_page():
    for space in SPACES.values():
        names = {v.name for v in space.variables} | {d.name for d in space.diagnostics + space.optional_diagnostics}
        assert table_keys(PAGES["store.md"], f"## Space `{space.name}`") == names, space.name
    assert table_keys(PAGES["store.md"], "## Every space") == set(COMMON_ATTRS)
    assert table_keys(PAGES["store.md"], "## Chaos indicators") == set(INDICATOR_ATTRS)
    codes = set(re.findall(r"^\| (\d+) \|", PAGES["exit-codes.md"], re.MULTILINE))
    assert codes == {str(code) for code in EXIT_CODES}


def test_the_docs_reference_pages_are_the_generated_ones():
    """docs/reference lists every generated page in its toctree."""
    index = (ROOT / "docs" / "reference" / "index.md").read_text()
    for name in PAGES:
        assert f"generated/{name[:-3]}\n" in index, name
