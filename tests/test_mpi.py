"""One system-mode member on MPI ranks (issue 72): kernels/domain.py and ensemble/mpi.py, run for real under the
MPICH wheel's ``mpiexec`` (2 cores: 3 ranks oversubscribe them).

The oracles are bits: a store written on 1, 2 and 3 ranks, and one resumed on 2 ranks after a rank of a 3-rank run
was killed, are equal array for array (NaN where NaN); the decomposed gradient equals the one-rank gradient and the
all-pairs lane function (every pair, each particle's terms in increasing partner id, which the full rows sum in the
same order with exact zeros beyond the cutoff) bit for bit.
"""

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import zarr

pytest.importorskip("mpi4py")
#: one pytest worker runs them all: the module's stores are made once, and its mpiexec runs, which fill both cores,
#: do not meet another worker's
pytestmark = pytest.mark.xdist_group("mpi")

from mpi_cases import PARTICLES, SIGMA, assert_same_bits, spec_text  # noqa: E402

HERE = Path(__file__).resolve().parent
BIN = Path(sys.executable).parent
MPIEXEC = str(BIN / "mpiexec")
ARMILLARY = str(BIN / "armillary")
#: LJ and a two-type mixture with bonded chains (its bonds, angles and types cross the patches' borders), each under
#: vi and langevin
NAMES = ("lj-vi", "lj-langevin", "mixture-vi", "mixture-langevin")


def mpiexec(ranks: int, *command: str, timeout: float = 300, **options) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(HERE), **options.pop("env", {})}
    return subprocess.run([MPIEXEC, "-n", str(ranks), *command], capture_output=True, text=True, timeout=timeout,
                          env=env, **options)


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """The runs of NAMES on 1 rank (the ordinary run: a Dask worker), 2 and 3 ranks (mpiexec)."""
    root = tmp_path_factory.mktemp("ranks")
    for ranks in (1, 2, 3):
        (root / str(ranks)).mkdir()
        done = mpiexec(ranks, sys.executable, str(HERE / "mpi_cases.py"), "run", str(root / str(ranks)), *NAMES)
        assert done.returncode == 0, done.stderr[-3000:]
    return root


@pytest.mark.parametrize("name", NAMES)
def test_a_store_is_the_same_bits_on_1_2_and_3_ranks(stores, name):
    """50 steps of 2000 particles in 2 segments, the lists rebuilt every few steps, each particle's state in the
    chunks of its ids' rank."""
    reference = str(stores / "1" / f"{name}.zarr")
    for ranks in (2, 3):
        assert_same_bits(str(stores / str(ranks) / f"{name}.zarr"), reference)
    group = zarr.open_group(reference, mode="r")
    assert group["q"].chunks[2] == 256 and np.isfinite(group["energy"][...]).all()
    assert group.attrs["system_mode_revision"] == 3


def test_particles_migrate_and_ghosts_cover_every_pair(tmp_path):
    """2000 hot particles, moved about 0.6 of a cell between 30 rebuilds on 3 ranks: every id is held exactly once
    after each, and every particle's gradient is the one-rank gradient's bits (mpi_cases.check_halos)."""
    out = tmp_path / "halos.txt"
    done = mpiexec(3, sys.executable, str(HERE / "mpi_cases.py"), "halos", str(out))
    assert done.returncode == 0, done.stderr[-3000:]
    ranks, fewest, most = (int(word) for word in out.read_text().split()[1:])
    assert ranks == 3 and 0.8 * PARTICLES / 3 < fewest <= most < 1.2 * PARTICLES / 3  # balanced patches


def test_full_rows_sum_as_the_all_pairs_lane_function():
    """On one rank, a configuration's gradient from the full rows is the lane function's to the bit."""
    from armillary.kernels import domain, get_system
    from armillary.kernels import neighbours as nb
    from armillary.kernels.geometry import random_uniform_separated

    system = get_system("sphere_lj", epsilon=1.0, sigma=SIGMA, cutoff=2.5 * SIGMA)
    q = random_uniform_separated(PARTICLES, 0.75 * SIGMA, 4)
    rows = np.zeros((PARTICLES, domain.RECORD_COLUMNS))
    rows[:, 0:3] = rows[:, 3:6] = q
    rows[:, 9] = 1.0
    rows[:, -1] = np.arange(PARTICLES)
    patch = domain.Patch(rows, PARTICLES, domain.SingleRank(), domain.compiled_domain_kernels("vi", "sphere_lj"),
                         False)
    patch.rebuild(nb.grid_cells_per_axis(PARTICLES, 2.8 * SIGMA), 2.8 * SIGMA)
    patch.gradient(np.ascontiguousarray(system.definition.coefficients(system.broadcast(1, PARTICLES), PARTICLES).T))
    gradient = np.empty((PARTICLES, 3))
    gradient[patch.ids[:patch.owned]] = patch.grad[:, :, 0]
    assert np.array_equal(gradient, system.gradient(q[None])[0])


def paused_run(tmp_path: Path, name: str, ranks: int, segment: int, seconds: float):
    """``mpiexec -n ranks armillary run`` of spec ``name`` (tmp_path/spec.toml into tmp_path/run.zarr), once rank 0
    pauses ``seconds`` before the kernel of ``segment`` (the others wait for it in the kernel's collective calls):
    (spec, store, the mpiexec process, its log: a file, not a pipe, so that the pid line is read while it runs)."""
    spec, store, pause, log = tmp_path / "spec.toml", tmp_path / "run.zarr", tmp_path / "pause.json", tmp_path / "run.log"
    spec.write_text(spec_text(name, str(store), ranks=ranks))
    env = {**os.environ, "PYTHONPATH": str(HERE), "ARMILLARY_PAUSE_BEFORE_KERNEL": f"{pause}:{seconds}",
           "ARMILLARY_PAUSE_SEGMENT": str(segment)}
    with log.open("w") as output:
        run = subprocess.Popen([MPIEXEC, "-n", str(ranks), ARMILLARY, "run", str(spec)], stdout=output,
                               stderr=subprocess.STDOUT, env=env, cwd=tmp_path)
    deadline = time.monotonic() + 240
    while not (pause.exists() and pause.read_text().endswith("}")):  # created, then written: wait for its JSON
        assert run.poll() is None and time.monotonic() < deadline, log.read_text()
        time.sleep(0.2)
    assert json.loads(pause.read_text())["segment"] == segment
    return spec, store, run, log


def test_a_killed_rank_ends_the_run_and_another_rank_count_resumes_it_bitwise(stores, tmp_path):
    """A 3-rank langevin run, its first segment recorded; the working process of rank 1 (the run's pid line names it
    and its supervisor, the process mpiexec started) killed by SIGKILL during the second: mpiexec exits non-zero and
    rank 1's supervisor names it and the signal, verify finds the store sound, and the same spec on 2 ranks resumes it
    and the store is the 1-rank run's, bit for bit."""
    spec, store, run, log = paused_run(tmp_path, "lj-langevin", 3, segment=1, seconds=60)
    ranks = re.search(r"ranks \(pid on host\): 0 = (\d+) on \S+ \(launched as \d+\), "
                      r"1 = (\d+) on \S+ \(launched as (\d+)\), 2 = (\d+) on ", log.read_text())
    assert ranks, log.read_text()
    working = [int(ranks[k]) for k in (1, 2, 4)]
    victim = working[1]
    assert process_stat(victim)[1] == ranks[3]  # its parent: the process mpiexec started
    os.kill(victim, signal.SIGKILL)
    run.wait(timeout=60)
    text = log.read_text()
    assert run.returncode != 0, text
    assert (f"armillary: rank 1 of 3 (pid {victim} on " in text and "was killed by signal 9 (SIGKILL); finished "
            "segments are kept: run the same command to resume, on any number of ranks" in text), text
    # mpiexec killed the other ranks' supervisors: their working processes died with them (ended, or zombies that
    # init has yet to reap), none goes on writing into the store
    assert all(process_stat(pid)[:1] in ([], ["Z"]) for pid in working), text
    from armillary.jobs.cli import main

    assert main(["verify", str(store)]) == 0
    resumed = mpiexec(2, ARMILLARY, "run", str(spec), cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "1 segments already done, 1 to run" in resumed.stdout, resumed.stdout
    assert_same_bits(str(store), str(stores / "1" / "lj-langevin.zarr"))


def test_a_signal_to_one_rank_stops_them_all_after_the_segment_with_exit_3(tmp_path):
    """SIGUSR1 (SLURM's walltime warning) to the process mpiexec started for rank 1 of a 2-rank run, while rank 0
    pauses before the first segment's kernel: the supervisor passes it on, both ranks finish and record that segment,
    then stop together with exit 3 (the batch script requeues the job), and the store is sound."""
    spec, store, run, log = paused_run(tmp_path, "lj-vi", 2, segment=0, seconds=3)
    launched = re.search(r"1 = \d+ on \S+ \(launched as (\d+)\)", log.read_text())
    assert launched, log.read_text()
    os.kill(int(launched[1]), signal.SIGUSR1)
    assert run.wait(timeout=120) == 3, log.read_text()
    assert "armillary: SIGUSR1: stopped after 1 of 2 segments; run the same command to resume" in log.read_text()
    assert np.isfinite(zarr.open_group(str(store), mode="r")["_progress"]["done"][...]).tolist() == [[True, False]]
    from armillary.jobs.cli import main

    assert main(["verify", str(store)]) == 0


def test_a_rank_reads_the_state_of_its_ids_alone(stores):
    """On 2 and 3 ranks, every read of a particle state from the store (the initial values at the first segment, the
    checkpoint slot at the second) covers exactly the ids the rank holds, and no rank but 0 makes an initial state
    (rank 0 makes the member's once, before the ranks start)."""
    from armillary.ensemble.store import particles_per_chunk
    from armillary.kernels.domain import id_cuts

    for ranks in (2, 3):
        cuts = id_cuts(PARTICLES, ranks, particles_per_chunk(PARTICLES))
        for rank in range(ranks):
            most = json.loads((stores / str(ranks) / f"reads-{rank}.json").read_text())
            expected = {"read": int(cuts[rank + 1] - cuts[rank]), "made": PARTICLES if rank == 0 else 0}
            assert most == expected, f"rank {rank} of {ranks}"


def process_stat(pid: int) -> list[str]:
    """The fields of /proc/``pid``/stat after the command's name (state, parent's pid, ...); none when it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return []


def test_ranks_without_mpi4py_or_for_an_ensemble_are_refused_in_one_line(tmp_path):
    """A spec asking for ranks where mpi4py is missing names what to install; an ensemble spec launched on 2 ranks
    is told to run without mpiexec; both exit 2 and write nothing."""
    spec = tmp_path / "spec.toml"
    spec.write_text(spec_text("lj-vi", str(tmp_path / "ranks.zarr"), ranks=2))
    hidden = subprocess.run([sys.executable, "-c", "import sys; sys.modules['mpi4py'] = None; "
                             "from armillary.jobs.cli import main; sys.exit(main(['run', sys.argv[1]]))", str(spec)],
                            capture_output=True, text=True, timeout=120)
    assert hidden.returncode == 2
    assert "execution.ranks" in hidden.stderr and "pip install 'armillary[mpi]'" in hidden.stderr
    assert not (tmp_path / "ranks.zarr").exists()
    ensemble_spec = tmp_path / "members.toml"
    text = spec_text("lj-vi", str(tmp_path / "members.zarr"))
    ensemble_spec.write_text(text.replace("members = 1", "members = 2").replace("chunk = 1\n", "")
                             .replace(f"skin = {0.1 * SIGMA!r}\n", "").replace('"temperature", ', ""))
    refused = mpiexec(2, ARMILLARY, "run", str(ensemble_spec), cwd=tmp_path)
    assert refused.returncode == 2 and "launch it without mpiexec or srun" in refused.stderr, refused.stderr
    assert len(refused.stderr.splitlines()) == 1
    assert not (tmp_path / "members.zarr").exists()


def test_forces_without_a_cutoff_and_ensembles_are_refused_on_more_than_one_rank():
    """Every pair of a Riesz energy lies on one rank (no patch has a border they respect), and a ranks' exchange
    carries one member: both refused in one line naming ``ranks``, before any step (the exchange's size is read, and
    the ranks' particle counts gathered: here two ranks that hold as many each)."""
    from types import SimpleNamespace

    from armillary.kernels import InvalidInput, get_system, integrate
    from armillary.kernels.geometry import fibonacci_sphere

    two_ranks = SimpleNamespace(size=2, allgather=lambda held: [held, held])
    charges = get_system("sphere_riesz")
    q = fibonacci_sphere(1000)[None]
    with pytest.raises(InvalidInput, match="ranks.*one member of a pair potential with a cutoff"):
        integrate(charges, "vi", {"q": q, "omega": np.zeros_like(q)}, 1e-3, 2, mode="system", exchange=two_ranks)
    lj = get_system("sphere_lj", epsilon=1.0, sigma=SIGMA, cutoff=2.5 * SIGMA)
    q = np.repeat(fibonacci_sphere(PARTICLES)[None], 2, axis=0)
    with pytest.raises(InvalidInput, match="ranks"):
        integrate(lj, "vi", {"q": q, "omega": np.zeros_like(q)}, 1e-3, 2, exchange=two_ranks)
