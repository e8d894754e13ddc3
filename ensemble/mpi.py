"""MPI for one system-mode member on many ranks (``mpiexec -n R armillary run``, ``srun armillary run``).

:class:`MpiExchange` moves the buffers that :mod:`armillary.kernels.domain` packs (migrating particles, ghosts'
positions, sample records, the global sums' tree nodes) through mpi4py, which is optional: ``pip install
'armillary[mpi]'`` brings it with the MPICH wheel.  A process started without a launcher (or by one, as one rank)
runs as before and never starts MPI.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import socket
import sys
import time

import numpy as np

from armillary.kernels import InvalidInput

from .errors import StoppedWithWorkLeft
from .launchers import LAUNCHED_PID, launched_size


#: what stops the ranks together after the current segment: Ctrl-C (Hydra passes it on), SLURM's walltime warning
#: (slurm/ranks.sbatch signals every rank) and a preemption's or scancel's SIGTERM
STOP_SIGNALS = (signal.SIGINT, signal.SIGUSR1, signal.SIGTERM)
#: what a spec that asks for ranks without mpi4py is told to install
INSTALL_HINT = "pip install 'armillary[mpi]' (mpi4py with the MPICH wheel), or mpi4py built against the cluster's MPI"


def mpi_available() -> bool:
    """Whether mpi4py can be imported (without importing it: that starts MPI)."""
    return importlib.util.find_spec("mpi4py") is not None


def world():
    """MPI.COMM_WORLD (mpi4py imported: MPI started)."""
    from mpi4py import MPI

    return MPI.COMM_WORLD


def launched_ranks() -> int:
    """The number of ranks this process was started among, from its launcher's environment (mpiexec, srun): 1 for a
    process started alone.  MPI is started (mpi4py imported) only for more than one, so that every other run of
    Armillary (and the Dask workers it forks) never initialises MPI; more than one without mpi4py is refused."""
    launched = launched_size()
    if launched == 1:
        return 1
    require_mpi("ranks")
    size = world().Get_size()
    if size == 1:  # e.g. srun --mpi=none: each task its own world of one, all on one store
        raise InvalidInput("ranks", f"the launcher started {launched} tasks but MPI sees 1 rank: start them as one MPI "
                           "job (srun --mpi=pmi2, or mpiexec -n R)")
    return size


def require_mpi(field: str) -> None:
    """Refuse, in one line naming ``field``, a run on more than one rank when mpi4py is missing."""
    if not mpi_available():
        raise InvalidInput(field, f"runs on more than one rank need mpi4py: {INSTALL_HINT}")


class MpiExchange:
    """The exchange of :func:`armillary.kernels.domain.run_decomposed` over an MPI communicator."""

    def __init__(self, comm, id_grain: int = 1):
        from mpi4py import MPI

        self.comm, self.mpi = comm, MPI
        self.rank, self.size = comm.Get_rank(), comm.Get_size()
        #: the ranks' id ranges start at multiples of this (:func:`armillary.kernels.domain.id_cuts`)
        self.id_grain = id_grain

    def maximum(self, values: np.ndarray) -> np.ndarray:
        """The elementwise maxima of ``values`` (float64) over the ranks: one Allreduce."""
        out = np.empty_like(values)
        self.comm.Allreduce(np.ascontiguousarray(values), out, op=self.mpi.MAX)
        return out

    def sum_counts(self, counts: np.ndarray) -> np.ndarray:
        total = np.empty_like(counts)
        self.comm.Allreduce(np.ascontiguousarray(counts), total, op=self.mpi.SUM)
        return total

    def allgather(self, value) -> list:
        return self.comm.allgather(value)

    def alltoallv(self, blocks: list) -> list:
        """Float64 blocks of equal width, one for each rank; the blocks each rank sent here, in rank order."""
        width = blocks[0].shape[1] if blocks[0].ndim == 2 else 1
        send_counts = np.array([block.shape[0] * width for block in blocks], np.int64)
        receive_counts = np.empty_like(send_counts)
        self.comm.Alltoall(send_counts, receive_counts)
        send = np.ascontiguousarray(np.concatenate([block.reshape(-1) for block in blocks]), dtype=np.float64)
        receive = np.empty(int(receive_counts.sum()), np.float64)
        self.comm.Alltoallv([send, (send_counts, None), self.mpi.DOUBLE],
                            [receive, (receive_counts, None), self.mpi.DOUBLE])
        pieces = np.split(receive, np.cumsum(receive_counts)[:-1])
        return [piece.reshape(-1, width) for piece in pieces]

    def halo(self, sends: dict, receive_counts: dict) -> dict:
        """Rows (k, 3) to each neighbour rank, and those of each neighbour that sends here, by nonblocking pairs."""
        received = {rank: np.empty((count, 3)) for rank, count in receive_counts.items()}
        requests = [self.comm.Irecv(buffer, source=rank, tag=7) for rank, buffer in received.items()]
        requests += [self.comm.Isend(rows, dest=rank, tag=7) for rank, rows in sends.items()]
        self.mpi.Request.Waitall(requests)
        return received

    def barrier(self) -> None:
        self.comm.Barrier()


def check_on_ranks(plan, ranks: int) -> None:
    """Refuse, in one line, a plan that cannot run on ``ranks`` > 1 ranks: one member in the system mode on the CPU."""
    if plan.mode != "system" or plan.spec.members != 1:
        raise InvalidInput("execution.ranks", f"{ranks} MPI ranks run one member in the system mode (a pair potential "
                           f"with a cutoff, at least 1000 particles); this spec runs {plan.spec.members} members in "
                           f"the {plan.mode} mode: launch it without mpiexec or srun")


def execute_on_ranks(plan, exchange: MpiExchange, stream) -> None:
    """Every pending segment of the plan's one member, in order, on all ranks together, each on
    ``threads_per_rank`` threads (default: its CPUs).  An error on one rank aborts them all (MPI_Abort: the
    launcher ends the job non-zero), after a line naming the rank; the finished segments are kept.  A STOP_SIGNALS
    signal to any rank stops them all after the current segment, recorded (a rank inside a collective call cannot
    act on it at once: the others would wait for it): raises StoppedWithWorkLeft on every rank."""
    from armillary.kernels.blocks import default_threads

    from .execute import Progress, noted_signals
    from .segment import run_segment
    from .store import RunStore

    with noted_signals(STOP_SIGNALS) as signalled:
        try:
            store = RunStore(plan.spec.store)
            exchange.id_grain = store.array(plan.space.names[0] + "0").chunks[1]  # each Zarr chunk has one writer
            done = store.done_grid()
            threads = plan.spec.threads_per_rank or default_threads()
            pending = [j for j in range(len(plan.segments)) if not done[0, j]]
            # a rank killed outright (kill -9, the OOM killer) is named by its supervisor
            # (armillary.jobs.rank_supervisor, which sets ARMILLARY_LAUNCHED_PID), and the launcher names a process it
            # started (Hydra: "PID … RUNNING AT host") or a task (srun: "task r"): this line maps both pids to ranks
            launched = os.environ.get(LAUNCHED_PID)
            ranks = exchange.allgather(f"{os.getpid()} on {socket.gethostname()}"
                                       + (f" (launched as {launched})" if launched else ""))
            where = ", ".join(f"{rank} = {host}" for rank, host in enumerate(ranks))
            print(f"armillary: one member of {plan.n_bodies} particles on {exchange.size} MPI ranks × {threads} "
                  f"threads; {len(plan.segments) - len(pending)} segments already done, {len(pending)} to run\n"
                  f"armillary: ranks (pid on host): {where}", file=stream, flush=True)
            progress = Progress(int(plan.work.sum()), int(plan.work[done].sum()), stream)
            for position, segment in enumerate(pending):
                # every rank learns of a signal here, between two segments, and all stop together
                stop_signal = int(exchange.maximum(np.array([signalled[0] if signalled else 0], np.float64))[0])
                if stop_signal:
                    done_now = len(plan.segments) - len(pending) + position
                    raise StoppedWithWorkLeft(f"{signal.Signals(stop_signal).name}: stopped after {done_now} of "
                                              f"{len(plan.segments)} segments; run the same command to resume (a "
                                              "requeued job does)", stop_signal)
                progress.advance(run_segment(plan, 0, segment, threads=threads, exchange=exchange)[0])
        except StoppedWithWorkLeft:
            raise
        except Exception as error:  # the other ranks wait in a collective call: end them all, naming this one
            print(f"armillary: rank {exchange.rank} of {exchange.size} failed: {error}", file=sys.stderr, flush=True)
            time.sleep(0.5)  # the line out before the launcher ends the job
            exchange.comm.Abort(2 if isinstance(error, InvalidInput) else 1)
