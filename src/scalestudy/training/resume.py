"""Preemption-safe runs: a killed run continues from its newest checkpoint.

One resume path, Snakemake's: a killed job is run again (the SLURM profile's
`retries`, or the same `snakemake` command after a crash) and the `train` or
`pretrain` command resumes from `last.ckpt` in its own run directory.

- Every run keeps `last.ckpt` (training/loop.py): written at each validation
  and at the end of training and, on SIGTERM or on SLURM's warning before the
  time limit (`sbatch --signal=USR1@<seconds>`), at the end of the step under
  way (`loop.StopSignal`). The command then exits with `PREEMPTED_EXIT` and
  writes no record, so the job fails and is retried.
- SIGKILL (out of memory, a lost node) gives no warning: the run resumes from
  its last validation's checkpoint. A checkpoint is written to a temporary
  name and renamed, so a kill mid-write leaves the previous one whole.
- `resume_point` accepts `last.ckpt` only if it was written for this run's
  spec (its config hash is stored in the checkpoint); otherwise the run starts
  over. `loop.TrainingLoop.resume` then restores the weights, optimiser, schedule, loop
  counters, the data loader's epoch and position (torchdata's
  StatefulDataLoader, `train.loader`) and the module's RNG streams, so on a
  CPU the final record equals an uninterrupted run's (tests/training/test_resume.py).
  A finished run has its record and Snakemake never runs it again.
- The killed attempt's `metrics.csv` is kept as `metrics.attempt<n>.csv`
  (`keep_history`; the CSV logger would replace it), and the resumed attempt
  writes its own `metrics.csv` from the step it resumed at.

Lightning's SLURM auto-requeue (USR1 saves a checkpoint and calls `scontrol
requeue`) is not used (`loop.make_fabric` gives Fabric a plain
LightningEnvironment): a requeued job would rerun under a Snakemake job the
executor already tracks, and it does nothing for SIGKILL or a workstation.
Loading stays `weights_only=True`: the checkpoint holds tensors and plain
containers only.
"""

from __future__ import annotations

from pathlib import Path

import torch

CHECKPOINT = "last.ckpt"
SPEC_KEY = "scalestudy_config_hash"
# The exit status of a run stopped by SIGTERM or USR1 (128 + SIGTERM, as a
# process killed by the signal): the job fails, its retry resumes.
PREEMPTED_EXIT = 143


def keep_history(run_dir: Path) -> Path | None:
    """Move an earlier attempt's metrics.csv aside (metrics.attempt<n>.csv) before
    the resumed fit starts: the CSV logger deletes the file it finds, and
    the killed attempt's history is part of the run."""
    history = Path(run_dir) / "metrics.csv"
    if not history.exists():
        return None
    attempt = len(list(Path(run_dir).glob("metrics.attempt*.csv"))) + 1
    return history.replace(Path(run_dir) / f"metrics.attempt{attempt}.csv")


def checkpoint_step(run_dir: Path, config_hash: str) -> int | None:
    """The step `resume_point`'s checkpoint resumes at, or None (quietly: a
    tracker asks before the run says why it starts over)."""
    path = Path(run_dir) / CHECKPOINT
    try:
        state = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception:  # absent, truncated or not a checkpoint
        return None
    return int(state["global_step"]) if state.get(SPEC_KEY) == config_hash else None


def resume_point(run_dir: Path, config_hash: str) -> Path | None:
    """`run_dir/last.ckpt` if a run of this spec wrote it, else None."""
    path = Path(run_dir) / CHECKPOINT
    if not path.exists():
        return None
    try:
        written_for = torch.load(path, map_location="cpu", weights_only=True,
                                 mmap=True).get(SPEC_KEY)
    except Exception as err:  # truncated or not a checkpoint: train afresh
        print(f"{path} cannot be read ({err}); starting from step 0", flush=True)
        return None
    if written_for != config_hash:
        print(f"{path} belongs to another spec ({written_for}); starting from step 0",
              flush=True)
        return None
    return path
