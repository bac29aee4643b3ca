"""One executor for every training job: a task run (training/task_run.py) and a
pretraining run (training/pretrain.py) each build a `Recipe` (its model, data,
train config, record fields and what it measures after training) and hand it
to `execute`, which owns the rest:

- the run's identity: its spec placed in its directory (Spec.placed), whose
  `record_identity` names every record it writes, and a wsd branch's trunk
  found beside it;
- one process per run directory (locks.run_lock);
- the start-up (`start`: threads, Lightning's noise, its GPUs on a
  workstation, Fabric and its trackers, the seed);
- the FLOPs of a step, counted once on the built model (`step_flops`), and
  the steps they buy (branches.budgeted, then the recipe's compute matching);
- the loop (from the run's own last.ckpt if a killed attempt left one, or a
  wsd branch's fork), the recipe's evaluation, and the record, written
  atomically by rank 0: ok, diverged (non-finite loss) or failed (the run's
  error, with what it measured). Stopped by SIGTERM or USR1: checkpoint
  saved, no record, exit 143 (loop.Preempted);
- the one sorting of what an exception means (`Execution.settle`): a run
  that raises is data (a failed record, with its identity alone where it
  raised before or after training), unless the machine failed it (out of
  memory, no or a failing accelerator: `fails_the_job`, exit 1 with no
  record, so that the scheduler retries it and a study never "finishes" with
  every cell failed on a node without its GPU) or the disk is full (one
  line, no record: atomic.no_space). Under DDP rank 0 ends the ranks it
  started before it exits (`stop_other_ranks`).
"""

from __future__ import annotations

import contextlib
import math
import subprocess
import sys
import time
import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from lightning.fabric import Fabric, seed_everything

from .. import trackers
from ..atomic import no_space
from ..locks import RunBusy, run_lock
from ..records import error_line, failed_record, package_version, write_record
from ..study import grid
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
    """The machine failed the run (`fails_the_job`): exit 1, no record."""

    def __init__(self) -> None:
        super().__init__(1)


def fails_the_job(error: BaseException) -> bool:
    """Whether `error` is the machine's (memory, the accelerator), not the run's."""
    return isinstance(error, JOB_ERRORS) or any(
        marker in str(error) for marker in JOB_ERROR_MESSAGES)


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
    """The record fields known before training starts, but for the run's
    identity (its spec's `record_identity`)."""
    bcfg = module.backbone.cfg
    n_params, n_nonembed = count_params(module)
    per_device, micro, _ = batch_shares(cfg.batch_size, fabric.world_size,
                                        spec.trainer.micro_batch)
    return {
        "n_params": n_params, "n_params_nonembed": n_nonembed,
        "flops_per_step": float(flops), "pretrain_flops": 0.0,
        "batch_size": cfg.batch_size, "world_size": fabric.world_size,
        "batch_per_device": per_device, "micro_batch": micro,
        "depth": bcfg.depth, "width": bcfg.width,
        "heads": bcfg.heads, "d_ff": bcfg.d_ff, "lr": cfg.lr, "warmup_steps": cfg.warmup_steps,
        "norm": bcfg.norm, "protocol": cfg.protocol, "causal": bool(bcfg.causal),
        "upstream_loss": math.nan,
        "precision": fabric.strategy.precision.precision,
        "deterministic": torch.are_deterministic_algorithms_enabled(),
        "matmul_precision": torch.get_float32_matmul_precision(),
        "torch_version": torch.__version__,
        "package_version": package_version(), "git_rev": git_rev(),
        "config_hash": spec.config_hash(),
    }


@dataclass
class Recipe:
    """What a run trains, as its module builds it once the run has started
    (Fabric launched and the seed set, so that the model's initial weights
    are the seed's); `execute` does everything else."""

    model: StudyModule
    cfg: TrainConfig  # its train config before its budget (the prior's or the stage's)
    splits: dict  # split -> tensors: train and val, and whatever `evaluate` reads
    seq_len: int
    record: dict  # its own record fields: its data, what its pretraining measured
    # After training: the measurements its record keeps (and metrics.csv logs).
    evaluate: Callable[[TrainingLoop], dict]
    name: str  # the run, as an error about its budget names it
    # The steps lengthened after the budget's (a prior's compute matching),
    # from the counted FLOPs of one step; by default the budget's stand.
    match_compute: Callable[[TrainConfig, int], TrainConfig] = lambda cfg, flops: cfg
    keep_best: bool = False  # keep best.ckpt too (pretraining: finetuning loads it)


def execute(spec: Spec, recipe: Callable[[], Recipe], run_dir: Path | str,
            trunk: Path | None = None, check: Callable[[], object] | None = None) -> dict:
    """Run `spec` in `run_dir` and write run_dir/record.parquet; returns the
    record (see the module's docstring for what this owns).

    `recipe()` builds the run's Recipe once the run has started; `check()`,
    before it starts (no Fabric, no tracker run), raises for a run that cannot
    start (a finetuning run's pretraining missing or failed); `trunk`: a wsd
    branch's trunk directory (--trunk), else the one beside `run_dir`
    (study.grid.trunk_beside). A second process in the same directory exits 1
    with no record (locks.RunBusy)."""
    spec = spec.placed(run_dir)
    run = Execution(spec, Path(run_dir))
    if trunk is None:
        trunk = grid.trunk_beside(run_dir, spec.cell, spec.train.branch_of)
    try:
        with run_lock(run.dir):
            try:
                if check is not None:
                    check()
                run.prepare(recipe, trunk)
                run.train()
                return run.end()
            finally:
                stop_other_ranks(wait=run.finished)
    except BaseException as err:  # the job's, before, after or around its training
        return run.settle(err)


class Execution:
    """One run as `execute` runs it, in order: `prepare` (start, recipe, FLOPs,
    steps, loop), `train` (the loop and the evaluation), `end` (the record),
    and `settle` wherever one raises."""

    def __init__(self, spec: Spec, run_dir: Path) -> None:
        self.dir, self.path = run_dir, run_dir / "record.parquet"
        self.spec, self.identity = spec, spec.record_identity()  # every record it writes
        self.fabric: Fabric | None = None
        self.loop: TrainingLoop | None = None
        self.recipe: Recipe | None = None
        self.record: dict = {}  # what is known of it before training
        self.metrics: dict[str, float] = {}  # what its training measured
        self.training = False  # the loop or the evaluation is running
        self.finished = False  # its ok or diverged record written: its ranks may exit
        self.status, self.error = "ok", ""
        self.fork: tuple[Path, int] | None = None

    def prepare(self, recipe: Callable[[], Recipe], trunk: Path | None) -> None:
        """Start the run and build its recipe; count a step's FLOPs on the
        built model, decide the steps they buy, and build the loop (a wsd
        branch's from its `trunk`'s fork checkpoint: training/branches.py)."""
        spec = self.spec
        self.fabric = fabric = start(spec, self.dir)
        self.recipe = made = recipe()
        flops = step_flops(fabric, made.model, made.splits["train"], made.cfg.batch_size,
                           spec.trainer.micro_batch)
        cfg = branches.budgeted(made.cfg, flops, made.seq_len, made.name)
        cfg = made.match_compute(cfg, flops)
        self.fork = branches.fork_point(cfg, trunk)
        seed = rank_seed(spec.seed, fabric.global_rank)
        seed_everything(seed, verbose=False)
        made.model.reseed(seed)
        # The identity last: the spec's, whatever the recipe's fields say.
        self.record = {**provenance(spec, cfg, fabric, made.model, flops),
                       "seq_len": made.seq_len, **made.record, **self.identity}
        self.loop = TrainingLoop(
            fabric, made.model, cfg, self.dir, spec.config_hash(),
            shard(fabric, made.splits["train"], cfg.batch_size, spec.seed, True),
            shard(fabric, made.splits["val"], cfg.batch_size, spec.seed, False),
            keep_best=made.keep_best, micro_batch=spec.trainer.micro_batch,
            forks=branches.trunk_forks(cfg, flops, made.seq_len),
            fork_step=self.fork[1] if self.fork else None)

    def train(self) -> None:
        """Train from the run's own last.ckpt, its fork or step 0, and
        evaluate; a divergence or the run's own error ends the training, not
        the run (`settle`), which goes on to its record."""
        loop, fabric = self.loop, self.fabric
        resume_from = resume.resume_point(self.dir, self.record["config_hash"])
        self.training = True
        try:
            if resume_from:
                print(f"resuming from {resume_from}", flush=True)
                if fabric.is_global_zero:  # the one rank that logs metrics.csv
                    resume.keep_history(self.dir)
                loop.resume(resume_from)
            elif self.fork:
                print(f"branching from {self.fork[0]} at step {self.fork[1]}", flush=True)
                loop.fork(*self.fork)
            loop.run()
            self.metrics["train_loss"] = loop.train_loss
            evaluated = self.recipe.evaluate(loop)
            fabric.log_dict(evaluated, step=loop.step)
            self.metrics.update(evaluated)
        except Exception as err:
            self.settle(err)
        self.training = False

    def end(self) -> dict:
        """The record: what the loop counted over what was known, its tracker
        runs ended with it, written by rank 0."""
        loop, fabric = self.loop, self.fabric
        wall = loop.elapsed()
        # Every device's tokens (DDP: each rank counted its own shard's). A
        # failed run reduces nothing: its ranks need not have failed together,
        # and a rank waiting in another collective would hold them all until
        # the timeout; its record counts this rank's tokens for every rank.
        if self.status == "failed":
            tokens = loop.tokens_seen * fabric.world_size
        else:
            tokens = int(fabric.all_reduce(torch.tensor(loop.tokens_seen, device=fabric.device),
                                            reduce_op="sum"))
        record = self.record
        record.update(
            status=self.status, error=self.error, diverged_step=loop.diverged_step,
            stopped_by=loop.stopped_by, plateau_step=loop.plateau_step, final_lr=loop.final_lr,
            steps=loop.step, tokens_seen=tokens, train_flops=record["flops_per_step"] * loop.step,
            wall_seconds=wall, tokens_per_second=tokens / wall if wall else math.nan,
            device=str(fabric.device), fork_step=loop.fork_step, fork_seconds=loop.fork_seconds,
            **{k: float(self.metrics.get(k, record.get(k, math.nan))) for k in METRICS},
        )
        trackers.finish(fabric.loggers, record)
        if fabric.is_global_zero:
            write_record(record, self.path)
        self.finished = self.status != "failed"
        return record

    def settle(self, err: BaseException) -> dict | None:
        """The one place an exception of a run is sorted, wherever it was raised:

        - another process trains the run (locks.RunBusy): its message, exit 1;
        - a stop (loop.Preempted, checkpoint saved: exit 143), an interrupt, a
          kill, or what `settle` raised already: passed on, the tracker runs
          ended `killed` if it stopped the training;
        - a full disk (atomic.no_space): its one line, no record;
        - the machine's error (`fails_the_job`): no record, exit 1 (JobFailed);
        - during training, a non-finite loss (loop.Diverged) or the run's own
          error: returns None, the run going on to its record, `diverged` or
          `failed` with what it measured;
        - before or after training, the run's own error: a failed record of its
          identity alone, returned.

        The tracker runs a full disk or the machine stops end `failed`.
        Everything but the stops prints the traceback to the job's log."""
        training, self.training = self.training, False  # the tracker runs end once
        if isinstance(err, RunBusy):
            print(err.message, file=sys.stderr, flush=True)
            raise err
        if not isinstance(err, Exception):
            if training:
                trackers.stop(self.fabric.loggers, "killed")
            raise err
        if training and isinstance(err, Diverged):
            self.status = "diverged"  # at loop.diverged_step; the last finite loss logged stays
            self.metrics["train_loss"] = self.loop.train_loss
            return None
        full = no_space(err, self.dir)
        if full or fails_the_job(err):
            if training:  # quiet: nothing more can be written, the one error is raised
                trackers.stop(self.fabric.loggers, "failed", quiet=True)
            if full:
                raise full from None
            traceback.print_exc()
            print(f"the machine failed the run ({error_line(err)}): no record; the job fails "
                  "so that the scheduler retries it", flush=True)
            raise JobFailed from err
        traceback.print_exc()
        if training:
            self.status, self.error = "failed", error_line(err)
            return None
        record = failed_record(self.identity, err)
        write_record(record, self.path)
        return record
