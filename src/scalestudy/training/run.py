"""What every training run does around its loop, task run or pretraining:
the one start-up path and the one way a run ends in its record.

- `start`: the run's directory, torch's threads, Lightning's noise, its GPUs
  on a workstation, Fabric (the hardware from the spec's trainer section) and
  the seed;
- `step_flops`: count the FLOPs of one step, on the training device, once;
- `train_and_record`: seed each rank, make the record's provenance, run the
  loop (from the run's own last.ckpt if a killed attempt left one), evaluate,
  and write the record atomically: ok, diverged (non-finite loss) or failed (an
  exception of the model or the data, recorded with it). Stopped by SIGTERM or
  USR1: checkpoint saved, no record, exit 143 (loop.Preempted).
- `job_errors`: what the machine did wrong (out of memory, no or a failing
  accelerator) is no result: the job fails with no record, so that the
  scheduler retries it (with more memory: profiles/slurm) and a study never
  "finishes" with every cell failed on a node without its GPU.
  Under DDP rank 0 ends the ranks it started before it exits
  (`stop_other_ranks`).

training/task.py and training/pretrain.py build their model and data,
decide the run's final train config (its steps) and call these.
"""

from __future__ import annotations

import contextlib
import functools
import math
import subprocess
import time
import traceback
import warnings
from collections.abc import Callable
from pathlib import Path

import torch
from lightning.fabric import Fabric, seed_everything

from .. import trackers
from ..atomic import no_space
from ..records import error_line, package_version, write_record
from ..study.specs import Spec, TrainConfig, batch_shares
from . import branches, devices, resume
from .data import shard
from .flops import count_params, flops_per_step
from .loop import Diverged, TrainingLoop, make_fabric, to_device
from .modules import StudyModule

METRICS = ("train_loss", "val_loss", "val_acc", "test_acc", "upstream_loss")

# What the machine did wrong, not the model: the job fails (no record) and the
# scheduler retries it. By type where torch has one; Lightning's and torch's
# CUDA paths raise plain RuntimeErrors (an AssertionError without CUDA), known
# by their messages.
JOB_ERRORS = (MemoryError, torch.OutOfMemoryError, torch.AcceleratorError,
              torch.distributed.DistBackendError, devices.NoFreeGPU)
JOB_ERROR_MESSAGES = (
    "No supported gpu backend found",  # Lightning: accelerator gpu, and none here
    "can not run on your system since the accelerator is not available",  # Lightning
    "Torch not compiled with CUDA enabled",  # a CPU build of torch
    "CUDA error", "CUDA out of memory", "CUDA driver", "cuDNN error", "CUDNN_STATUS_",
    "cuDNN Frontend error", "CUBLAS_STATUS_", "NCCL error",
    # A CPU run's collective that timed out or lost a rank (gloo's transport);
    # NCCL's watchdog ends the process itself.
    "gloo/transport",
    "DefaultCPUAllocator: can't allocate memory", "DefaultCPUAllocator: not enough memory",
    # Deterministic cuBLAS without CUBLAS_WORKSPACE_CONFIG when the process first
    # used cuBLAS: every run of the process fails the same way (training/__init__.py).
    "not deterministic because it uses CuBLAS",
)


# How long rank 0, its run finished, waits for the ranks it started to exit.
RANKS_EXIT_SECONDS = 60
# The ranks this process started for its run (Lightning's launcher's list,
# which its watcher polls), until they are stopped.
_other_ranks: list[subprocess.Popen] | None = None


class JobFailed(SystemExit):
    """The machine failed the run (`job_errors`): exit 1, no record."""

    def __init__(self) -> None:
        super().__init__(1)


def fails_the_job(error: BaseException) -> bool:
    """Whether `error` is the machine's (memory, the accelerator), not the run's."""
    return isinstance(error, JOB_ERRORS) or any(
        marker in str(error) for marker in JOB_ERROR_MESSAGES)


def job_errors(run: Callable) -> Callable:
    """A training or pretraining run whose machine errors (`fails_the_job`,
    anywhere: Fabric's start, the model's placement, a step) fail the job with
    no record (JobFailed); any other error goes on to the caller, which records
    it as a failed run. Under DDP, rank 0 ends with its other ranks
    (`stop_other_ranks`)."""

    @functools.wraps(run)
    def guarded(*args, **kwargs):
        finished = False  # and its ranks with it: a failed run's may wait in a collective
        try:
            record = run(*args, **kwargs)
            finished = record["status"] != "failed"
            return record
        except Exception as err:
            if not fails_the_job(err):
                raise
            traceback.print_exc()
            print(f"the machine failed the run ({error_line(err)}): no record; the job fails "
                  "so that the scheduler retries it", flush=True)
            raise JobFailed from err
        finally:
            stop_other_ranks(wait=finished)

    return guarded


def stop_other_ranks(wait: bool) -> None:
    """Rank 0 ends with the ranks it started, before its exit releases the
    run's locks (its GPUs on a workstation, its directory). A finished run's
    ranks are given RANKS_EXIT_SECONDS to exit; otherwise (an error, a
    failed record, a stop) they are killed at once, since a rank waiting in
    a collective for rank 0 would wait until loop.COLLECTIVE_TIMEOUT holding
    its GPU. SIGKILL: a rank in a collective runs no SIGTERM handler.
    Lightning's watcher stops watching first (it kills rank 0 when a rank's
    exit code is not 0)."""
    global _other_ranks
    watched, _other_ranks = _other_ranks, None
    if not watched:
        return
    ranks = list(watched)
    watched.clear()
    deadline = time.monotonic() + (RANKS_EXIT_SECONDS if wait else 0)
    for rank in ranks:
        with contextlib.suppress(subprocess.TimeoutExpired):
            rank.wait(timeout=max(0.0, deadline - time.monotonic()))
        if rank.poll() is None:
            rank.kill()
            rank.wait()


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
    threads, warnings, its GPUs on a workstation (training.devices), Fabric
    (launched: under DDP the other ranks' processes run the same command) and
    the seed."""
    Path(run_dir).mkdir(parents=True, exist_ok=True)
    if spec.trainer.threads:
        torch.set_num_threads(spec.trainer.threads)
    quiet_lightning()
    devices.claim(spec.trainer)
    fabric = make_fabric(spec.trainer, run_dir, loggers=trackers.open_trackers(
        spec, run_dir, checkpoint_step=resume.checkpoint_step))
    global _other_ranks
    _other_ranks = getattr(fabric.strategy.launcher, "procs", None)
    seed_everything(spec.seed, verbose=False)
    return fabric


def rank_seed(seed: int, rank: int) -> int:
    """The seed of a run's rank: the run's own on rank 0 (a one-device run is
    unchanged), a distinct one on every other rank, so that each draws its own
    dropout (and pretraining) masks."""
    return (seed + rank * 0x9E3779B1) % 2**32


def step_flops(fabric: Fabric, model: StudyModule, train: tuple, batch_size: int,
               micro_batch: int) -> int:
    """Counted FLOPs of one optimiser step of the whole run: every device's
    share of `batch_size`, micro-batch by micro-batch. Counted once, by rank 0
    on its training device (the model placed there first, under the run's
    autocast), on one micro-batch of the split's first examples, and
    broadcast: no rank runs more than one micro-batch's forward and backward
    for it, and a GPU run none on the host. Exact where every micro-batch of
    the run costs the same, which holds for every backbone but Switch, whose
    experts run on the tokens routed to them: its count is the first
    micro-batch's routing, a sample (docs/cluster.md)."""
    _, micro, accumulation = batch_shares(batch_size, fabric.world_size, micro_batch)
    model.to(fabric.device)
    flops = None
    if fabric.is_global_zero:
        batch = model.prepare(tuple(t[:micro].long() for t in train), training=True)
        with fabric.autocast():
            flops = fabric.world_size * accumulation * flops_per_step(
                model, to_device(fabric, batch))
    return int(fabric.broadcast(flops, src=0))


def provenance(spec: Spec, cfg: TrainConfig, fabric: Fabric, module: StudyModule,
               flops: int) -> dict:
    """The record fields known before training starts."""
    bcfg = module.backbone.cfg
    n_params, n_nonembed = count_params(module)
    per_device, micro, _ = batch_shares(cfg.batch_size, fabric.world_size,
                                        spec.trainer.micro_batch)
    return {
        "study": spec.study, "arch": spec.arch, "size": spec.size, "seed": spec.seed,
        "n_params": n_params, "n_params_nonembed": n_nonembed,
        "flops_per_step": float(flops), "pretrain_flops": 0.0,
        "batch_size": cfg.batch_size, "world_size": fabric.world_size,
        "batch_per_device": per_device, "micro_batch": micro,
        "depth": bcfg.depth, "width": bcfg.width,
        "heads": bcfg.heads, "d_ff": bcfg.d_ff, "lr": cfg.lr, "warmup_steps": cfg.warmup_steps,
        "norm": bcfg.norm, "protocol": cfg.protocol, "causal": bool(bcfg.causal),
        "upstream_loss": math.nan, "budget": cfg.budget,
        "precision": fabric.strategy.precision.precision,
        "deterministic": torch.are_deterministic_algorithms_enabled(),
        "matmul_precision": torch.get_float32_matmul_precision(),
        "torch_version": torch.__version__,
        "package_version": package_version(), "git_rev": git_rev(),
        "config_hash": spec.config_hash(),
    }


def train_and_record(
    fabric: Fabric, spec: Spec, model: StudyModule, cfg: TrainConfig, splits: dict,
    run_dir: Path, record: dict, after_training: Callable[[TrainingLoop], dict], *,
    flops: int, keep_best: bool = False, trunk: Path | None = None,
) -> dict:
    """Train `model` under `cfg`, the run's final train config (the steps it
    trains decided: branches.budgeted, the prior's match_compute), on `splits`
    (split -> tensors), evaluate with `after_training(loop)` (logged to
    metrics.csv too) and write run_dir/record.parquet: `record` (the run's
    own fields) over the provenance. A wsd branch starts from its `trunk`
    directory's fork checkpoint (training/branches.py). Returns the record."""
    fork = branches.fork_point(cfg, trunk)
    seed = rank_seed(spec.seed, fabric.global_rank)
    seed_everything(seed, verbose=False)
    model.reseed(seed)
    record = {**provenance(spec, cfg, fabric, model, flops), **record}
    loop = TrainingLoop(fabric, model, cfg, run_dir, spec.config_hash(),
                        shard(fabric, splits["train"], cfg.batch_size, spec.seed, True),
                        shard(fabric, splits["val"], cfg.batch_size, spec.seed, False),
                        keep_best=keep_best, micro_batch=spec.trainer.micro_batch,
                        forks=branches.trunk_forks(cfg, flops, record["seq_len"]),
                        fork_step=fork[1] if fork else None)
    path = Path(run_dir) / "record.parquet"
    metrics: dict[str, float] = {}
    status, error = "ok", ""
    resume_from = resume.resume_point(run_dir, record["config_hash"])
    try:
        if resume_from:
            print(f"resuming from {resume_from}", flush=True)
            if fabric.is_global_zero:  # the one rank that logs metrics.csv
                resume.keep_history(run_dir)
            loop.resume(resume_from)
        elif fork:
            print(f"branching from {fork[0]} at step {fork[1]}", flush=True)
            loop.fork(*fork)
        loop.run()
        metrics["train_loss"] = loop.train_loss
        evaluated = after_training(loop)
        fabric.log_dict(evaluated, step=loop.step)
        metrics.update(evaluated)
    except Diverged:
        status = "diverged"  # at loop.diverged_step; the last finite loss logged stays
        metrics["train_loss"] = loop.train_loss
    except Exception as err:  # a run that crashes is data too: record it ...
        full = no_space(err, run_dir)
        if full:  # a full disk is no result of the run: no record, one message
            trackers.stop(fabric.loggers, "failed", quiet=True)
            raise full from None
        if fails_the_job(err):  # ... unless the machine failed it (job_errors)
            trackers.stop(fabric.loggers, "failed", quiet=True)
            raise
        status, error = "failed", error_line(err)
        traceback.print_exc()
    except BaseException:  # stopped for a resume (loop.Preempted), interrupted
        trackers.stop(fabric.loggers, "killed")
        raise
    wall = loop.elapsed()
    # Every device's tokens (DDP: each rank counted its own shard's). A failed
    # run reduces nothing: its ranks need not have failed together, and a
    # rank waiting in another collective would hold them all until the
    # timeout; its record counts this rank's tokens for every rank.
    if status == "failed":
        tokens = loop.tokens_seen * fabric.world_size
    else:
        tokens = int(fabric.all_reduce(torch.tensor(loop.tokens_seen, device=fabric.device),
                                        reduce_op="sum"))
    record.update(
        status=status, error=error, diverged_step=loop.diverged_step,
        stopped_by=loop.stopped_by, plateau_step=loop.plateau_step, final_lr=loop.final_lr,
        steps=loop.step, tokens_seen=tokens, train_flops=record["flops_per_step"] * loop.step,
        wall_seconds=wall, tokens_per_second=tokens / wall if wall else math.nan,
        device=str(fabric.device), fork_step=loop.fork_step, fork_seconds=loop.fork_seconds,
        **{k: float(metrics.get(k, record.get(k, math.nan))) for k in METRICS},
    )
    trackers.finish(fabric.loggers, record)
    if fabric.is_global_zero:
        write_record(record, path)
    return record
