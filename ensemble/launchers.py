"""What a launcher (``mpiexec``, ``srun``) tells each process it starts, read from the environment alone.  This
module imports nothing but :mod:`os`, so that a rank's supervisor (:mod:`armillary.jobs.rank_supervisor`) reads it
before it forks: numpy, once imported, has started BLAS threads, and a process with threads must not fork."""

import os

#: the job's size: MPICH's Hydra and PMI (PMI_SIZE), Open MPI, SLURM's srun
LAUNCHER_SIZES = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_STEP_NUM_TASKS")
#: this process's rank, likewise
LAUNCHER_RANKS = ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID")
#: the pid of the process the launcher started, where a supervisor runs this rank in a child process
#: (:mod:`armillary.jobs.rank_supervisor` sets it in the child; the ranks' pid line names both)
LAUNCHED_PID = "ARMILLARY_LAUNCHED_PID"


def launched_size() -> int:
    """The number of processes the launcher started this one among (1: started alone), without starting MPI."""
    for variable in LAUNCHER_SIZES:
        value = os.environ.get(variable, "")
        if value.isdigit() and int(value) > 1:
            return int(value)
    return 1


def launched_rank() -> int:
    """This process's rank from its launcher's environment (0 when started alone), without starting MPI."""
    for variable in LAUNCHER_RANKS:
        value = os.environ.get(variable, "")
        if value.isdigit():
            return int(value)
    return 0
