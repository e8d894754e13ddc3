"""The TOML spec, the ``armillary`` command line and SLURM submission (no numerics here)."""
