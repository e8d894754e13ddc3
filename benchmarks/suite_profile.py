"""Where the test suite's time goes: ``make test``'s pytest run from a fresh Numba cache (as a fresh clone's),
with every test's duration and every compilation that missed the cache (tests/fixtures/compile_events), split
into categories: compiling kernels, the docs pages' code, the interruption and scheduler scenarios (kill -9,
Ctrl-C, signals, SLURM), and the rest.  A test's compile seconds count as compile, whichever category the test is
in; compilations in the processes a test starts (the CLI, Dask's workers) count too, so the categories are
seconds of work summed over pytest's workers and those processes, and the wall below is pytest's own.

    python benchmarks/suite_profile.py                 # the whole suite, 2 workers as make test
    python benchmarks/suite_profile.py tests/test_md.py --top 10
"""

import argparse
import collections
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: make test's environment for Numba (Makefile's TEST_NUMBA), but for the cache, which is fresh
TEST_NUMBA = {"NUMBA_OPT": "1", "NUMBA_LOOP_VECTORIZE": "0", "NUMBA_THREADING_LAYER": "workqueue"}
#: tests whose time is an interruption or a scheduler: killed, signalled, requeued, Ctrl-C, SLURM
SCENARIO = re.compile(r"kill|ctrl_c|signal|requeue|interrupt|slurm", re.IGNORECASE)
#: tests that compile GPU kernels to PTX and check it (numba-cuda's compilations are not in the events)
PTX = re.compile(r"ptx|fused_multiply_adds")
DURATION = re.compile(r"^([0-9.]+)s (setup|call|teardown)\s+(\S+)")
#: the "@group" that --dist loadgroup appends to the ids of tests marked xdist_group
XDIST_GROUP = re.compile(r"@[\w.-]+$")


def category(test: str) -> str:
    """The category of a test id (its compile seconds are counted apart)."""
    if PTX.search(test):
        return "compile"
    if test.startswith("tests/test_docs_code.py"):
        return "docs"
    if SCENARIO.search(test):
        return "scenarios"
    return "rest"


def run_suite(paths: list[str], workers: str, cache: str, events: str) -> tuple[str, float]:
    """pytest's output and wall seconds for ``paths`` as make test runs them, from the cache folder ``cache``."""
    environment = dict(os.environ, **TEST_NUMBA, NUMBA_CACHE_DIR=cache, ARMILLARY_COMPILE_EVENTS=events,
                       PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT / "tests/fixtures/compile_events"),
                                                                os.environ.get("PYTHONPATH")])))
    command = [sys.executable, "-m", "pytest", "-n", workers, "--dist", "loadgroup", "--durations=0",
               "--durations-min=0", "-q", "-m", "not site", *paths]
    started = time.perf_counter()
    finished = subprocess.run(command, cwd=ROOT, env=environment, capture_output=True, text=True)
    wall = time.perf_counter() - started
    if finished.returncode != 0:
        print(finished.stdout[-4000:], finished.stderr[-2000:], sep="\n", file=sys.stderr)
    return finished.stdout, wall


def test_seconds(output: str) -> dict[str, float]:
    """Each test id's setup + call + teardown seconds from pytest's --durations=0 table."""
    seconds = collections.defaultdict(float)
    for line in output.splitlines():
        match = DURATION.match(line)
        if match:
            seconds[XDIST_GROUP.sub("", match.group(3))] += float(match.group(1))
    return seconds


def compile_seconds(events: str) -> tuple[dict[str, float], dict[str, list]]:
    """Each test id's seconds of outermost compilations, and each function's (count, seconds) of them."""
    per_test, per_function = collections.defaultdict(float), collections.defaultdict(lambda: [0, 0.0])
    if not os.path.exists(events):
        return per_test, per_function
    with open(events) as lines:
        for line in lines:
            event = json.loads(line)
            if event["depth"] == 0:
                per_test[XDIST_GROUP.sub("", event["test"])] += event["seconds"]
                per_function[event["function"]][0] += 1
                per_function[event["function"]][1] += event["seconds"]
    return per_test, per_function


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="*", default=["tests"], help="test paths (default: the whole suite)")
    parser.add_argument("-n", "--workers", default="auto", help="pytest-xdist workers (make test: auto)")
    parser.add_argument("--top", type=int, default=25, help="how many tests and kernels to list")
    parser.add_argument("--keep", metavar="FOLDER", help="keep pytest's output and the compile events there")
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="armillary-suite-") as scratch:
        kept = arguments.keep or scratch
        os.makedirs(kept, exist_ok=True)
        events = os.path.join(kept, "compile-events.jsonl")
        output, wall = run_suite(arguments.paths, arguments.workers, os.path.join(scratch, "cache"), events)
        with open(os.path.join(kept, "pytest.txt"), "w") as log:
            log.write(output)
        per_test, per_function = compile_seconds(events)
    seconds = test_seconds(output)
    summary = next((line for line in reversed(output.splitlines()) if " in " in line and "passed" in line), "")
    print(f"pytest: {summary.strip('= ')}; wall {wall:.0f} s")
    totals = collections.Counter()
    for test, spent in seconds.items():
        compiled = min(per_test.get(test, 0.0), spent)
        totals["compile"] += compiled
        totals[category(test)] += spent - compiled
    unattributed = sum(spent for test, spent in per_test.items() if test not in seconds)
    everything = sum(totals.values())
    print(f"\n{'category':<12}{'seconds':>10}{'share':>8}")
    for name in ("compile", "docs", "scenarios", "rest"):
        print(f"{name:<12}{totals[name]:>10.0f}{totals[name] / everything:>8.0%}")
    print(f"{'all tests':<12}{everything:>10.0f}   (compilations outside any test's own time: {unattributed:.0f} s)")
    print(f"\nslowest {arguments.top} tests (seconds, of which compile):")
    for test, spent in sorted(seconds.items(), key=lambda item: -item[1])[:arguments.top]:
        print(f"{spent:8.1f} {per_test.get(test, 0.0):7.1f}  {test}")
    print(f"\nkernels compiled most expensively (compilations, seconds):")
    for function, (count, spent) in sorted(per_function.items(), key=lambda item: -item[1][1])[:arguments.top]:
        print(f"{count:5d} {spent:8.1f}  {function}")


if __name__ == "__main__":
    main()
