"""What every training run does around its loop, task run or pretraining:
the one start-up path and the one way a run ends in its record.

- `start`: the run's directory, torch's threads, Lightning's noise, Fabric
  (the hardware from the spec's trainer section) and the seed;
- `train_and_record`: count the FLOPs of one step, seed again, make the
  record's provenance, run the loop (from the run's own last.ckpt if a killed
  attempt left one), evaluate, and write the record atomically: ok, diverged
  (non-finite loss) or failed (an exception, recorded with it). Stopped by
  SIGTERM or USR1: checkpoint saved, no record, exit 143 (loop.Preempted).

training/task.py and training/pretrain.py build their model and data and
call these two.
"""

from __future__ import annotations

import math
import subprocess
import traceback
import warnings
from collections.abc import Callable
from pathlib import Path

import torch
from lightning.fabric import Fabric, seed_everything

from .. import __version__
from ..atomic import no_space
from ..records import error_line, write_record
from ..study.specs import Spec, TrainConfig
from . import resume, trackers
from .data import shard
from .flops import count_params, flops_per_step
from .loop import Diverged, TrainingLoop, make_fabric
from .modules import StudyModule

METRICS = ("train_loss", "val_loss", "val_acc", "test_acc", "upstream_loss")


def quiet_lightning() -> None:
    """Drop warnings no user can act on, in every job log. (Idempotent: a
    warning filter is replaced, not added twice.)"""
    # torchdata calls a deprecated torch API; Lightning suggests `srun` to any
    # run on a machine with SLURM installed (a run is one task: loop.make_fabric);
    # the CSV logger warns that it replaces the metrics.csv that
    # resume.keep_history has already moved aside.
    warnings.filterwarnings("ignore", message=r".*'set_vital' is deprecated")
    warnings.filterwarnings("ignore", message=r".*The `srun` command is available")
    warnings.filterwarnings("ignore", message=r".*Experiment logs directory .* exists")


def git_rev() -> str | None:
    """The code's git revision (`-dirty` with uncommitted changes), or None
    outside a git checkout (an installed package) or without git."""
    try:
        out = subprocess.run(
            ["git", "describe", "--always", "--dirty", "--abbrev=12"], capture_output=True,
            text=True, timeout=5, cwd=Path(__file__).parent,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    rev = out.stdout.strip()
    return rev if out.returncode == 0 and rev else None


def start(spec: Spec, run_dir: Path) -> Fabric:
    """Everything a run sets up before it builds its model: its directory,
    threads, warnings, Fabric (launched: under DDP the other ranks' processes
    run the same command) and the seed."""
    Path(run_dir).mkdir(parents=True, exist_ok=True)
    if spec.trainer.threads:
        torch.set_num_threads(spec.trainer.threads)
    quiet_lightning()
    fabric = make_fabric(spec.trainer, run_dir, loggers=trackers.open_trackers(spec, run_dir))
    seed_everything(spec.seed, verbose=False)
    return fabric


def step_flops(fabric: Fabric, model: StudyModule, train: tuple, batch_size: int) -> int:
    """Counted FLOPs of one optimiser step of the whole run: every device's batch."""
    return fabric.world_size * flops_per_step(model, tuple(t[:batch_size] for t in train))


def provenance(spec: Spec, cfg: TrainConfig, module: StudyModule, flops: int) -> dict:
    """The record fields known before training starts."""
    bcfg = module.backbone.cfg
    n_params, n_nonembed = count_params(module)
    return {
        "study": spec.study, "arch": spec.arch, "size": spec.size, "seed": spec.seed,
        "n_params": n_params, "n_params_nonembed": n_nonembed,
        "flops_per_step": float(flops), "pretrain_flops": 0.0,
        "batch_size": cfg.batch_size, "depth": bcfg.depth, "width": bcfg.width,
        "heads": bcfg.heads, "d_ff": bcfg.d_ff, "lr": cfg.lr, "warmup_steps": cfg.warmup_steps,
        "norm": bcfg.norm, "protocol": cfg.protocol, "causal": bool(bcfg.causal),
        "upstream_loss": math.nan,
        "precision": spec.trainer.precision, "torch_version": torch.__version__,
        "package_version": __version__, "git_rev": git_rev(), "config_hash": spec.config_hash(),
    }


def train_and_record(
    fabric: Fabric, spec: Spec, model: StudyModule, splits: dict, run_dir: Path,
    record: dict, after_training: Callable[[TrainingLoop], dict], *,
    flops: int, keep_best: bool = False,
) -> dict:
    """Train `model` (its `cfg` the schedule) on `splits` (split -> tensors),
    evaluate with `after_training(loop)` (logged to metrics.csv too) and write
    run_dir/record.parquet: `record` (the run's own fields) over the
    provenance. Returns the record."""
    cfg = model.cfg
    seed_everything(spec.seed, verbose=False)
    record = {**provenance(spec, cfg, model, flops), **record}
    loop = TrainingLoop(fabric, model, cfg, run_dir, spec.config_hash(),
                        shard(fabric, splits["train"], cfg.batch_size, spec.seed, True),
                        shard(fabric, splits["val"], cfg.batch_size, spec.seed, False),
                        keep_best=keep_best)
    path = Path(run_dir) / "record.parquet"
    metrics: dict[str, float] = {}
    status, error = "ok", ""
    resume_from = resume.resume_point(run_dir, record["config_hash"])
    try:
        if resume_from:
            print(f"resuming from {resume_from}", flush=True)
            resume.keep_history(run_dir)
            loop.resume(resume_from)
        loop.run()
        metrics["train_loss"] = loop.train_loss
        evaluated = after_training(loop)
        fabric.log_dict(evaluated, step=loop.step)
        metrics.update(evaluated)
    except Diverged:
        status = "diverged"  # at loop.diverged_step; the last finite loss logged stays
        metrics["train_loss"] = loop.train_loss
    except Exception as err:  # a run that crashes is data too: record it
        full = no_space(err, run_dir)
        if full:  # a full disk is no result of the run: no record, one message
            trackers.stop(fabric.loggers, "failed", quiet=True)
            raise full from None
        status, error = "failed", error_line(err)
        traceback.print_exc()
    except BaseException:  # stopped for a resume (loop.Preempted), interrupted
        trackers.stop(fabric.loggers, "killed")
        raise
    wall = loop.elapsed()
    # Every device's tokens (DDP: each rank counted its own shard's).
    tokens = int(fabric.all_reduce(torch.tensor(loop.tokens_seen, device=fabric.device),
                                    reduce_op="sum"))
    record.update(
        status=status, error=error, diverged_step=loop.diverged_step,
        stopped_by=loop.stopped_by,
        steps=loop.step, tokens_seen=tokens, train_flops=record["flops_per_step"] * loop.step,
        wall_seconds=wall, tokens_per_second=tokens / wall if wall else math.nan,
        device=str(fabric.device),
        **{k: float(metrics.get(k, record.get(k, math.nan))) for k in METRICS},
    )
    trackers.finish(fabric.loggers, record)
    if fabric.is_global_zero:
        write_record(record, path)
    return record
