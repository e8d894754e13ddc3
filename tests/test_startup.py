"""``armillary --help`` and every subcommand's ``--help`` start without the heavy libraries: each command imports
what it uses when it runs (issue 47; ``benchmarks/startup.py`` times them)."""

import subprocess
import sys

import pytest

from armillary.jobs.cli import build_parser
from armillary.jobs.reference import subcommands

#: what only running a command may import
HEAVY = ("dask", "distributed", "xarray", "zarr", "matplotlib", "sympy", "numba")
#: runs the command line with the arguments it is given, then writes the heavy libraries it imported to stderr
PROBE = f"""
import sys
from armillary.jobs.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
sys.stderr.write(" ".join(sorted({{name.split(".")[0] for name in sys.modules}} & set({HEAVY!r}))))
"""


@pytest.mark.parametrize("command", [[]] + [[name] for name in subcommands(build_parser())])
def test_help_imports_no_heavy_library(command):
    probe = subprocess.run([sys.executable, "-c", PROBE, *command, "--help"], capture_output=True, text=True,
                           check=True)
    assert "usage: armillary" in probe.stdout
    assert probe.stderr == "", f"armillary {' '.join(command + ['--help'])} imported {probe.stderr}"


def test_import_armillary_leaves_xarray_unloaded_and_registers_the_accessor_when_xarray_comes():
    probe = subprocess.run([sys.executable, "-c", "import sys, armillary; loaded = 'xarray' in sys.modules; "
                            "import xarray; print(loaded, hasattr(xarray.Dataset, 'armillary'))"],
                           capture_output=True, text=True, check=True)
    assert probe.stdout.split() == ["False", "True"], probe.stdout + probe.stderr
