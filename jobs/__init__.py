"""The ``armillary`` command line, SLURM submission and the ``slurm`` cluster kind (no numerics here)."""

from . import clusters  # noqa: F401  (registers the slurm cluster kind with ensemble)
