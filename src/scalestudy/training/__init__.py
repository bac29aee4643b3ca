"""Training runs: the loop, its tasks and pretraining stages, their devices.

Importing the package sets CUBLAS_WORKSPACE_CONFIG (unless the environment
already does), before any of its modules or their callers can run a matmul:
torch reads it once, at the first cuBLAS call of the process, and without it
every later deterministic matmul on a GPU raises. Torch-free: the workflow
imports parts of this package to plan the DAG.
"""

import os

CUBLAS_WORKSPACE = ":4096:8"  # what deterministic cuBLAS needs (torch's docs)
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", CUBLAS_WORKSPACE)
