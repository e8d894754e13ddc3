"""Every code block of the docs and the README runs (docs/README.md states the rules): a page's Python blocks
in order in one fresh interpreter, its shell blocks by bash (``make <target>`` lines as ``make -n``), its
TOML blocks parsed (a whole spec validated by load_spec, a fragment's keys checked against the declared
ones); a block preceded by ``<!-- test: … -->`` runs that smaller command or statement instead."""

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from armillary.ensemble import load_spec
from armillary.ensemble.spec import declared_fields

from slurm_cases import require_slurm

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted([ROOT / "README.md"] + [path for path in (ROOT / "docs").rglob("*.md")
                                       if "_build" not in path.parts and "generated" not in path.parts
                                       and path != ROOT / "docs" / "README.md"])
#: a fenced block: its language and text, and the ``<!-- test: … -->`` comment right before it, if any
BLOCK = re.compile(r"(?:<!--\s*test:\s*(?P<test>.*?)\s*-->\s*\n)?^```(?P<language>[^\s`]*)[^\n]*\n(?P<text>.*?)^```\s*$",
                   re.MULTILINE | re.DOTALL)
#: seconds a page's blocks may take together (small sizes, kernels from the suite's cache)
PAGE_SECONDS = 300
#: a shell line that needs a SLURM controller: a SLURM client, the local test cluster's script, or a
#: submission that is not a dry run (a dry run works without one)
SLURM_LINE = re.compile(r"\b(sbatch|squeue|scancel|sinfo|scontrol|srun)\b|local-cluster\.sh|armillary submit(?!.*--dry-run)")


def blocks(page: Path) -> list[tuple[str, str]]:
    """(language, code) of every fenced block of a page, the ``test:`` replacement taken where given."""
    return [(match["language"], match["test"] + "\n" if match["test"] else match["text"])
            for match in BLOCK.finditer(page.read_text())]


def scratch(tmp_path: Path) -> Path:
    """A working directory with a copy of examples/ and the slurm/ folder, as a reader's checkout has."""
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    os.symlink(ROOT / "slurm", tmp_path / "slurm")
    return tmp_path


def environment() -> dict:
    return {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
            "MPLBACKEND": "Agg", "PYTHONUNBUFFERED": "1"}


def check_toml(code: str, directory: Path) -> None:
    document = tomllib.loads(code)
    if "system" in document:  # a whole spec: validated as `armillary check` would, beside the examples
        path = directory / "examples" / "docs-block.toml"
        path.write_text(code)
        load_spec(path)
        return
    fields = {f"{section}.{key}" for section, table in document.items() if isinstance(table, dict)
              for key in table if section != "system"}
    unknown = fields - declared_fields()
    assert not unknown, f"undeclared spec keys in a TOML block: {sorted(unknown)}"


def run_shell(code: str, directory: Path) -> None:
    lines = []
    for line in code.splitlines():
        stripped = line.strip()
        if stripped.startswith("make "):  # the suite cannot run itself: the target must exist
            lines.append(f"make -n -C {ROOT} {stripped[len('make '):]} > /dev/null")
        else:
            lines.append(line)
    result = subprocess.run(["bash", "-euo", "pipefail", "-c", "\n".join(lines)], cwd=directory, env=environment(),
                            capture_output=True, text=True, timeout=PAGE_SECONDS)
    assert result.returncode == 0, f"shell block failed ({result.returncode}):\n{code}\n{result.stderr[-3000:]}"


def needs_slurm(page: Path) -> bool:
    return any(language in ("sh", "bash", "console") and SLURM_LINE.search(code) for language, code in blocks(page))


#: pages that submit jobs skip on the condition tests/test_slurm.py skips on, and share its worker: the local
#: test cluster has one node
SLURM_PAGES = {page for page in PAGES if needs_slurm(page)}
PAGE_CASES = [pytest.param(page, marks=[pytest.mark.xdist_group("slurm")] if page in SLURM_PAGES else [],
                           id=str(page.relative_to(ROOT))) for page in PAGES]


@pytest.mark.parametrize("page", PAGE_CASES)
def test_every_code_block_of_the_page_runs(page, tmp_path):
    if page in SLURM_PAGES:
        require_slurm()
    directory = scratch(tmp_path)
    python = []
    for language, code in blocks(page):
        if language == "python":
            python.append(code)
        elif language in ("sh", "bash", "console"):
            run_shell(code, directory)
        elif language == "toml":
            check_toml(code, directory)
        elif not language.startswith("{"):  # a MyST directive ({toctree}, {eval-rst}) is not code
            assert language in ("text", "output"), f"{page}: a ```{language} block: use python, sh, toml or text"
    if python:
        result = subprocess.run([sys.executable, "-c", "\n".join(python)], cwd=directory, env=environment(),
                                capture_output=True, text=True, timeout=PAGE_SECONDS)
        assert result.returncode == 0, f"{page}: Python blocks failed:\n{result.stderr[-3000:]}"
