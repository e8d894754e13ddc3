"""The ensemble's own exceptions, importable without the modules that raise them (the command line catches them
before it has imported any)."""


class StoreError(Exception):
    """The store cannot be used for this run (raised as InvalidInput by the callers that know the field)."""


class DamagedStore(Exception):
    """A chunk of the store fails its checksum (the message names the array and the chunk)."""


class RunFailed(Exception):
    """A task failed for a reason other than bad input (exit code 1)."""


class StoppedWithWorkLeft(Exception):
    """A run on MPI ranks stopped between two segments at signal ``signal_number`` (Ctrl-C: exit code 130; SLURM's
    walltime warning, a preemption: 3) with segments left, which the same command (a requeued job) resumes."""

    def __init__(self, message: str, signal_number: int):
        super().__init__(message)
        self.signal_number = signal_number
