"""Preemption-safe runs: a killed run continues from its newest checkpoint.

One resume path, Snakemake's: a killed job is run again (the SLURM profile's
`retries`, or the same `snakemake` command after a crash) and the `train` or
`pretrain` command resumes from `last.ckpt` in its own run directory.

- Every run keeps `last.ckpt`: written at each validation and at the end of
  training (ModelCheckpoint `save_last`) and, on SIGTERM or on SLURM's warning
  before the time limit (`sbatch --signal=USR1@<seconds>`, which `stop_on_usr1`
  turns into a SIGTERM), at the end of the step under way: Lightning stops its
  loop with `SIGTERMException` and `Preemption` saves. The command then exits
  with `PREEMPTED_EXIT` and writes no record, so the job fails and is retried.
- SIGKILL (out of memory, a lost node) gives no warning: the run resumes from
  its last validation's checkpoint.
- `resume_point` accepts `last.ckpt` only if it was written for this run's
  spec (its config hash is stored in the checkpoint); otherwise the run starts
  over. `trainer.fit(ckpt_path=...)` then restores the weights, optimiser,
  schedule, loop counters, the data loader's position (torchdata's
  StatefulDataLoader, `train.loader`) and the module's RNG streams
  (`StudyModule.on_save_checkpoint`), so on a CPU the final record equals an
  uninterrupted run's (tests/test_resume.py). A finished run has its record and
  Snakemake never runs it again.
- The killed attempt's `metrics.csv` is kept as `metrics.attempt<n>.csv`
  (`keep_history`; Lightning's CSVLogger would delete it), and the resumed
  attempt writes its own `metrics.csv` from the step it resumed at.

Lightning's own SLURM path (SLURMEnvironment's auto-requeue: USR1 saves
`hpc_ckpt_<n>.ckpt` and calls `scontrol requeue`) is off (`make_trainer` gives
Lightning a plain LightningEnvironment): a requeued job would rerun under a
Snakemake job the executor already tracks, it does nothing for SIGKILL or a
workstation, and an explicit `ckpt_path` overrides its hpc checkpoint anyway.
Loading stays `weights_only=True`: the checkpoint holds tensors and plain
containers only.
"""

from __future__ import annotations

import signal
from pathlib import Path

import torch
from lightning.pytorch.callbacks import Callback
from lightning.pytorch.utilities.exceptions import SIGTERMException

CHECKPOINT = "last.ckpt"
SPEC_KEY = "scalestudy_config_hash"
# The exit status of a run stopped by SIGTERM or USR1 (128 + SIGTERM, as a
# process killed by the signal): the job fails, its retry resumes.
PREEMPTED_EXIT = 143


class Preemption(Callback):
    """Stamps every checkpoint with the run's config hash, and saves
    `last.ckpt` when Lightning stops the loop on SIGTERM and at the end of
    training when the last step was not a validation's."""

    def __init__(self, run_dir: Path, config_hash: str):
        self.path, self.config_hash = Path(run_dir) / CHECKPOINT, config_hash
        self.saved_step = -1

    def on_save_checkpoint(self, trainer, pl_module, checkpoint: dict) -> None:
        checkpoint[SPEC_KEY] = self.config_hash
        self.saved_step = trainer.global_step

    def on_train_end(self, trainer, pl_module) -> None:
        # The last steps may follow the last validation (max_steps not a multiple
        # of val_every): last.ckpt is the model after the last step.
        if self.saved_step != trainer.global_step:
            trainer.save_checkpoint(self.path)

    def on_exception(self, trainer, pl_module, exception: BaseException) -> None:
        # Only a stop at a step boundary leaves a consistent state to save;
        # a crash mid-step is recorded as failed, not resumed.
        if isinstance(exception, SIGTERMException):
            trainer.save_checkpoint(self.path)
            print(f"stopped by SIGTERM at step {trainer.global_step}: saved {self.path}",
                  flush=True)


def stop_on_usr1() -> None:
    """SLURM's warning signal (USR1, `--signal=USR1@<seconds>`) stops the run
    the way SIGTERM does: checkpoint at the end of the step, exit."""
    signal.signal(signal.SIGUSR1, lambda signum, frame: signal.raise_signal(signal.SIGTERM))


def keep_history(run_dir: Path) -> Path | None:
    """Move an earlier attempt's metrics.csv aside (metrics.attempt<n>.csv) before
    the resumed fit starts: Lightning's CSVLogger deletes the file it finds, and
    the killed attempt's history is part of the run."""
    history = Path(run_dir) / "metrics.csv"
    if not history.exists():
        return None
    attempt = len(list(Path(run_dir).glob("metrics.attempt*.csv"))) + 1
    return history.replace(Path(run_dir) / f"metrics.attempt{attempt}.csv")


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
