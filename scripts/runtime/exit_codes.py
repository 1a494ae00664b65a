"""The exit codes of the programs in research pods, which Argo's retry rule and the launcher read.

One place, since the job contract (checkpoint.py), the parameter check and the retry expression of every
research step (steps/contract.py) must agree on them.
"""

PREEMPTED_EXIT_CODE = 75
"""Exit code (EX_TEMPFAIL) of a job that stopped on SIGTERM after checkpointing: resumable."""

CHECK_FAILED_EXIT_CODE = 64
"""Exit code (EX_USAGE) of the parameter check when a value is bad: a failure, never a preemption."""
