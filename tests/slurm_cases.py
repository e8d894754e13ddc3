"""The one condition every SLURM-dependent test (tests/test_slurm.py, the docs pages that submit jobs)
skips on: a SLURM controller that answers.  Under CI=true its absence is a failure, not a skip."""

import functools
import os
import shutil
import subprocess

import pytest


@functools.cache  # once per test process: sinfo takes a while where no controller answers
def slurm_unavailable() -> str | None:
    """None if a SLURM controller answers, else why not."""
    if shutil.which("sinfo") is None:
        return "sinfo not installed (apt-get install slurm-wlm munge; slurm/local-cluster.sh start)"
    try:  # without a configuration sinfo retries for a minute
        result = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True, timeout=20)
    except subprocess.TimeoutExpired:
        return "sinfo did not answer within 20 s (slurm/local-cluster.sh start)"
    if result.returncode != 0 or not result.stdout.strip():
        return f"no SLURM controller answers: {result.stderr.strip()} (slurm/local-cluster.sh start)"
    return None


def require_slurm() -> None:
    """Skip the calling test where no controller answers (fail under CI=true)."""
    reason = slurm_unavailable()
    if reason is None:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true but SLURM is not reachable: {reason}", pytrace=False)
    pytest.skip(reason)
