"""The training loop of every run, on Lightning Fabric.

Fabric does what depends on the hardware: the accelerator, devices and
processes (`launch`), the precision (autocast, the gradient scaler under
16-mixed), DDP's gradient sync (`setup`, `backward`), clipping of scaled
gradients, reductions across ranks and rank-0 file writing (`save`, the CSV
logger). The loop itself is the part a reader of a training run wants to see,
written out: fetch, step, log, validate, checkpoint, stop.

Why not Lightning's Trainer: its loop, hooks and callbacks cost 1.4-2.1 ms a
step on a CPU, 8-10% of a small model's step (xs, T=48), against 0-0.3 ms for
this loop (benchmarks/lightning_overhead.py, docs/benchmarks.md); a scaling
study is mostly small models.

What a run gets, and where it lives:
- `TrainingLoop.run`: max_steps optimiser steps (or fewer: train.until plateau, a
  non-finite loss, SIGTERM/USR1), validation every val_every steps, the train
  loss every log_every steps to metrics.csv;
- `last.ckpt` at every validation, at the end of training and on SIGTERM or
  USR1 (training/resume.py), written atomically; with `keep_best`, `best.ckpt`
  at each validation that improves the validation loss (pretraining);
- a budgeted run (grid.budgets) validates at its last step too (its record's
  loss is its budget's); a wsd trunk saves each branch's fork checkpoint at
  the step its cooldown begins (`forks`), and `fork` starts a branch there
  (training/branches.py);
- `TrainingLoop.resume`: the weights, optimiser, schedule, loop counters, data order
  and position, RNG streams and plateau history of a checkpoint, so a resumed
  run ends in the record an uninterrupted one writes;
- `evaluate`: a split's mean loss (and accuracy), each rank summing its
  shard, the sums reduced over ranks.

On an accelerator the loop waits for the device only where it reads a value:
the steps that log or validate (every `log_every` steps at most) read the
loss's finiteness, agreed by every rank, and under DDP whether any rank was
asked to stop; on a CPU, where reading costs nothing, every step. Batches are
counted and (pretraining) masked on the host before they move to the device.
"""

from __future__ import annotations

import contextlib
import ctypes
import math
import os
import signal
import sys
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import torch
from lightning.fabric import Fabric
from lightning.fabric.loggers import CSVLogger
from lightning.fabric.plugins.environments import LightningEnvironment
from lightning.fabric.strategies import DDPStrategy
from torch.utils.data import DataLoader
from tqdm import tqdm

from .. import faults, trackers
from ..atomic import replacing
from ..stages import BEST_CHECKPOINT as BEST
from ..study.plateau import plateaued
from ..study.resources import device_count
from ..study.specs import batch_shares
from . import resume

LAST = resume.CHECKPOINT
NEVER = 2**62  # the step of a non-finite loss where there was none
# How long a collective of a DDP run (the gradients' all-reduce, a check's
# reduction, the barrier after a checkpoint) waits for a rank that does not
# come, then fails the job: torch's default, 30 minutes, holds every GPU of
# a hung run that long. Longer than what one rank does alone between two
# collectives: a rank's start-up, rank 0 counting a step's FLOPs or writing
# a checkpoint of the largest model.
COLLECTIVE_TIMEOUT = timedelta(minutes=10)
# Rank 0's process id, in the environment of the ranks it starts.
RANK0_ENV = "SCALESTUDY_RANK0_PID"
PR_SET_PDEATHSIG = 1  # linux/prctl.h


class Diverged(Exception):
    """The training loss turned non-finite (NaN or inf): the run stops there."""


class Preempted(SystemExit):
    """SIGTERM or USR1 stopped the run at a step boundary; last.ckpt is saved."""

    def __init__(self) -> None:
        super().__init__(resume.PREEMPTED_EXIT)


def resolved_precision(hw) -> str:
    """The run's precision: `hw.precision`, "auto" being bf16-mixed on a CUDA
    device with bf16 (docs/benchmarks.md) and 32-true elsewhere."""
    if hw.precision != "auto":
        return hw.precision
    cuda = hw.accelerator in ("gpu", "cuda", "auto") and torch.cuda.is_available()
    return "bf16-mixed" if cuda and torch.cuda.is_bf16_supported() else "32-true"


def strategy_of(hw):
    """Lightning's strategy for `hw`: DDP, with COLLECTIVE_TIMEOUT, wherever
    the run may have more than one device (a count of "auto" or -1 is known
    only to Lightning), else `hw.strategy`."""
    many = (device_count(hw.devices) or 2) > 1
    if not (hw.strategy.startswith("ddp") or (hw.strategy == "auto" and many)):
        return hw.strategy
    return DDPStrategy(timeout=COLLECTIVE_TIMEOUT,
                       find_unused_parameters=hw.strategy == "ddp_find_unused_parameters_true")


def die_with_rank0() -> None:
    """In a rank that rank 0 started: be killed when rank 0's process ends,
    however it ends (a failed record, the warm server's child exiting, a
    SIGKILL), instead of waiting for it in a collective on a GPU that rank
    0's end has just handed to the next job (Linux's parent-death signal;
    rank 0 also ends its ranks itself: run.stop_other_ranks)."""
    rank0 = os.environ.get(RANK0_ENV)
    if rank0 is None:  # started by another launcher
        return
    with contextlib.suppress(OSError, AttributeError):  # no prctl: not Linux
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != int(rank0):  # rank 0 ended before the signal was asked for
        os._exit(1)


def make_fabric(hw, run_dir: Path, loggers: list | None = None) -> Fabric:
    """The one Fabric factory: hardware and numerics from `hw`
    (study.specs.TrainerConfig), the history to `loggers` (default:
    run_dir/metrics.csv; a run's trackers: trackers.py); launched
    (under DDP, the other ranks' processes run the same command)."""
    if int(os.environ.get("LOCAL_RANK", "0")) > 0:  # a rank Lightning started
        die_with_rank0()
    else:
        os.environ[RANK0_ENV] = str(os.getpid())
    # One run is one process (one SLURM task) that starts its devices'
    # processes itself: no SLURM environment detection (see training/resume.py).
    fabric = Fabric(accelerator=hw.accelerator, devices=hw.devices, strategy=strategy_of(hw),
                    precision=resolved_precision(hw), plugins=[LightningEnvironment()],
                    loggers=[CSVLogger(run_dir, name="", version="")] if loggers is None
                    else loggers)
    torch.use_deterministic_algorithms(hw.deterministic)
    # One setting for both: cuDNN convolutions use TF32 by default even where
    # matmuls are plain float32.
    torch.set_float32_matmul_precision(hw.matmul_precision)
    torch.backends.cudnn.allow_tf32 = hw.matmul_precision != "highest"
    fabric.launch()
    return fabric


def any_rank(fabric: Fabric, value: torch.Tensor, op) -> int:
    """`value` (a device scalar) reduced over the run's ranks with `op`, read
    on the host: the one device sync of a check. torch.distributed directly:
    Fabric's all_reduce adds a barrier."""
    if fabric.world_size > 1:
        value = value.clone()
        torch.distributed.all_reduce(value, op=op)
    return int(value)


class StopSignal:
    """SIGTERM and USR1 (SLURM's warning before the time limit) ask the loop to
    stop at the end of the step under way; under DDP a request any rank
    received stops every rank (TrainingLoop.stop_requested)."""

    def __init__(self):
        self.requested, self.previous = False, {}
        self.received = "a signal"  # its name, on the rank that received it

    def __enter__(self) -> StopSignal:
        for signum in (signal.SIGTERM, signal.SIGUSR1):
            self.previous[signum] = signal.signal(signum, self.request)
        return self

    def __exit__(self, *exc) -> None:
        for signum, handler in self.previous.items():
            signal.signal(signum, handler)

    def request(self, signum, frame) -> None:
        self.requested, self.received = True, signal.Signals(signum).name


def micro_batches(batch: tuple, size: int) -> list[tuple]:
    """`batch` (host tensors, or a NamedTuple of them) cut into micro-batches
    of `size` examples."""
    if len(batch[0]) <= size:
        return [batch]
    rebuild = getattr(type(batch), "_make", tuple)
    return [rebuild(part) for part in zip(*(t.split(size) for t in batch), strict=True)]


def evaluate(fabric: Fabric, module, loader: DataLoader, split: str) -> dict[str, float]:
    """The means of the module's `evaluation_sums` over a split (each rank its
    shard, the sums reduced over ranks): `{split}_loss` (and `{split}_acc`)."""
    was_training = module.training
    module.eval()
    module.start_evaluation()
    # Every name from the start: a rank whose shard is empty reduces zeros.
    sums: dict[str, torch.Tensor | int] = dict.fromkeys(module.EVALUATION_SUMS, 0)
    with torch.no_grad(), fabric.autocast():
        for batch in loader:
            batch = to_device(fabric, module.prepare(batch, training=False))
            for name, value in module.evaluation_sums(batch).items():
                sums[name] = sums[name] + (value.detach().float() if torch.is_tensor(value)
                                           else value)
    module.train(was_training)
    names = sorted(sums)
    stacked = torch.stack([torch.as_tensor(sums[n], dtype=torch.float32, device=fabric.device)
                           for n in names])
    totals = dict(zip(names, fabric.all_reduce(stacked, reduce_op="sum"), strict=True))
    count = totals.pop("count")
    return {f"{split}_{name}": float(total / count) for name, total in totals.items()}


def to_device(fabric: Fabric, batch):
    """A host batch on the run's device; on a CUDA device from pinned memory,
    so that the copy runs beside the step (Fabric copies non-blocking)."""
    if fabric.device.type == "cuda":
        batch = getattr(type(batch), "_make", tuple)(t.pin_memory() for t in batch)
    return fabric.to_device(batch)


class TrainingLoop:
    """One run's training loop. `module` is a modules.StudyModule; `cfg` the
    run's final train config (study.specs.TrainConfig with the steps it
    trains, a budget's or a compute match's: training/task_run.py, pretrain.py),
    which the optimiser and its schedule are built from; `train` a data.loader
    (shuffled; this rank's shard), `val` this rank's validation shard, each of
    this rank's share of cfg.batch_size; `micro_batch` the examples of one
    forward and backward (0: the whole share). Counters the record reads
    after `run`: step, tokens_seen, train_loss, diverged_step, stopped_by,
    elapsed()."""

    def __init__(self, fabric: Fabric, module, cfg, run_dir: Path, config_hash: str,
                 train: DataLoader, val: DataLoader, keep_best: bool = False,
                 micro_batch: int = 0, forks: dict[int, list[str]] | None = None,
                 fork_step: int | None = None):
        self.fabric, self.cfg, self.run_dir = fabric, cfg, Path(run_dir)
        self.config_hash, self.train_loader, self.val_loader = config_hash, train, val
        self.per_device, self.micro_batch, self.accumulation = batch_shares(
            cfg.batch_size, fabric.world_size, micro_batch)
        self.module, self.keep_best = module.to(fabric.device), keep_best
        # 16-mixed: a gradient scaler, whose overflowing steps it skips itself.
        self.scaled = getattr(fabric.strategy.precision, "scaler", None) is not None
        optimizer, self.scheduler = module.configure_optimizer(cfg, self.scaled)
        self.schedule = self.scheduler.schedule  # the factor per step; it keeps a cooldown begun
        self.model, self.optimizer = fabric.setup(module, optimizer)
        self.model.mark_forward_method("training_loss")  # through DDP's forward
        self.step = self.epoch = self.tokens_seen = 0
        self.train_loss = math.nan  # the last logged
        self.best = math.inf  # the lowest validation loss (keep_best)
        self.history: list[tuple[int, float]] = []  # (step, val_loss) for train.until plateau
        self.validated: tuple[int, dict] | None = None  # (step, metrics) of the last validation
        self.diverged_step: int | None = None
        self.stopped_by: str | None = None
        self.seconds_before, self.started = 0.0, time.perf_counter()
        # A wsd trunk's fork checkpoints by step; a branch's fork step (None:
        # no branch) and the trunk's seconds to it, which its checkpoints keep.
        self.forks = forks or {}
        self.fork_step, self.fork_seconds = fork_step, None
        self.log_every = max(1, min(10, cfg.val_every))
        # The first step with a non-finite loss on this rank (NEVER: none yet),
        # kept on the device and read where the loop checks (check_finite).
        self.first_nonfinite = torch.tensor(NEVER, device=fabric.device)

    # -- what a checkpoint holds ------------------------------------------------

    def state(self) -> dict:
        """Everything a resumed run needs to continue as if never stopped; keys
        `state_dict`, `global_step` and `hyper_parameters` are what finetuning
        and the tests read. `ranks`: what each rank has of its own, its random
        streams (its dropout) and the tokens of its shard; `precision`: the
        precision's state (16-mixed: the gradient scaler's scale and growth)."""
        own = {**self.module.rng_state(), "tokens_seen": torch.tensor([self.tokens_seen])}
        return {
            "state_dict": self.module, "optimizer": self.optimizer, "schedule": self.scheduler,
            "precision": self.fabric.strategy.precision,
            "loader": self.train_loader, "global_step": self.step, "epoch": self.epoch,
            "train_loss": self.train_loss, "best": self.best,
            "history": self.history, "seconds": self.elapsed(),
            "hyper_parameters": self.module.hyperparameters(),
            "ranks": self.every_rank(own), resume.SPEC_KEY: self.config_hash,
            **({"fork_seconds": self.fork_seconds} if self.fork_step is not None else {}),
        }

    def every_rank(self, own: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Each rank's tensors stacked, [rank, ...] (a collective: every rank calls it)."""
        world, device = self.fabric.world_size, self.fabric.device
        if world == 1:
            return {name: value[None] for name, value in own.items()}
        return {name: (self.fabric.all_gather(value.to(device)).cpu() if value.numel()
                       else value.expand(world, 0)) for name, value in own.items()}

    def save(self, name: str) -> None:
        """run_dir/name, written whole or not at all (a temporary file renamed),
        and the history so far flushed to metrics.csv."""
        with replacing(self.run_dir / name, temporary=f".{name}.tmp", kill_at=None,
                       commit=self.fabric.is_global_zero) as temporary:
            self.fabric.save(temporary, self.state())
        self.fabric.barrier()  # every rank reads the same file (pretraining's best.ckpt)
        trackers.save(self.fabric.loggers)

    def resume(self, path: Path) -> None:
        """Continue from a checkpoint this run's spec wrote (resume.resume_point)."""
        state = self.state()
        self.fabric.load(path, state, weights_only=True)
        self.restore(state)
        if self.fork_step is not None:
            self.fork_seconds = state["fork_seconds"]

    def fork(self, path: Path, step: int) -> None:
        """Start a wsd branch from its trunk's checkpoint at `step`
        (training/branches.py): the trunk's state there, with this run's own
        schedule (its length, hence its cooldown) and its own best loss (the
        branch's validations choose its best checkpoint)."""
        if not Path(path).is_file():
            raise ValueError(f"{path}: the trunk left no fork checkpoint (it failed or diverged "
                             f"before step {step}), so the branch has nothing to start from")
        state = self.state()
        del state["fork_seconds"]  # a trunk's checkpoint has none
        del state["schedule"]  # the branch keeps its own, started at the fork below
        self.fabric.load(path, state, weights_only=True)
        if state["global_step"] != step:
            raise ValueError(f"{path}: saved at step {state['global_step']}, the branch forks "
                             f"at step {step}: not this branch's trunk")
        self.restore(state)
        self.scheduler.start_at(self.step)
        self.best, self.fork_seconds = math.inf, float(state["seconds"])

    def restore(self, state: dict) -> None:
        """The loop's own counters from a loaded checkpoint's `state`."""
        self.step, self.epoch = state["global_step"], state["epoch"]
        self.train_loss, self.best, self.seconds_before = (state["train_loss"], state["best"],
                                                           state["seconds"])
        self.history = [tuple(h) for h in state["history"]]
        # This rank's row, copied: torch reads a random state from its storage's start.
        own = {name: every[self.fabric.global_rank].clone()
               for name, every in state["ranks"].items()}
        self.tokens_seen = int(own.pop("tokens_seen"))
        self.module.set_rng_state(own)

    def elapsed(self) -> float:
        """Wall seconds of the run so far, over every attempt."""
        return self.seconds_before + time.perf_counter() - self.started

    # -- the loop ----------------------------------------------------------------

    def batches(self) -> Iterator:
        """Training batches without end, epoch after epoch; each epoch's order a
        function of (seed, epoch) alone, so a resumed loader continues the
        order (and, restored mid-epoch, the place) an unbroken run had."""
        while True:
            if hasattr(self.train_loader.sampler, "set_epoch"):
                self.train_loader.sampler.set_epoch(self.epoch)
            yield from self.train_loader
            self.epoch += 1

    def checks_after(self, step: int) -> bool:
        """Whether the loop reads device values at the end of `step`: every
        step on a CPU (free there), else the steps that log or validate."""
        cfg = self.cfg
        return (self.fabric.device.type == "cpu" or step % self.log_every == 0
                or step % cfg.val_every == 0 or step == self.last_step)

    def check_finite(self) -> None:
        """Raise Diverged if a loss since the last check was non-finite on any
        rank: every rank stops at the same step (none waits in a reduction the
        others left)."""
        first = any_rank(self.fabric, self.first_nonfinite, torch.distributed.ReduceOp.MIN)
        if first != NEVER:
            self.diverged_step = first
            raise Diverged(f"non-finite loss at step {first}")

    def stop_requested(self, stop: StopSignal) -> bool:
        """Whether a rank was asked to stop; under DDP agreed on the checked steps."""
        if self.fabric.world_size == 1:
            return stop.requested
        if not self.checks_after(self.step):
            return False
        flag = torch.tensor(int(stop.requested), device=self.fabric.device)
        return bool(any_rank(self.fabric, flag, torch.distributed.ReduceOp.MAX))

    def training_step(self, batch) -> torch.Tensor:
        """One optimiser step on this rank's share of the batch, micro-batch by
        micro-batch; returns the share's mean loss (on the device)."""
        cfg, fabric = self.cfg, self.fabric
        # Counted and masked on the host: read on a GPU after the step, the
        # count would stall the device every step.
        tokens = self.module.count_tokens(batch)
        parts = micro_batches(self.module.prepare(batch, training=True), self.micro_batch)
        losses = []
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            with fabric.no_backward_sync(self.model, enabled=not last):
                loss, aux_loss = self.model.training_loss(to_device(fabric, part))
                total = loss + aux_loss
                self.first_nonfinite = torch.minimum(
                    self.first_nonfinite, torch.where(torch.isfinite(total), NEVER, self.step))
                if last and self.checks_after(self.step + 1):
                    self.check_finite()  # no update from a non-finite loss
                fabric.backward(total / len(parts))
            losses.append(loss.detach())
        if cfg.grad_clip:
            # Not error_if_nonfinite (Fabric's default): its check reads the norm
            # on the host, a device sync every step. Non-finite gradients make
            # the weights, and so the next loss, non-finite, which the loop's
            # own check catches (under a scaler the step is skipped instead).
            fabric.clip_gradients(self.model, self.optimizer, max_norm=cfg.grad_clip,
                                  error_if_nonfinite=False)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.scheduler.step()
        self.step += 1
        self.tokens_seen += tokens
        return losses[0] if len(losses) == 1 else torch.stack(losses).mean()

    def validate(self) -> dict[str, float]:
        metrics = evaluate(self.fabric, self.module, self.val_loader, "val")
        self.validated = self.step, metrics
        self.fabric.log_dict(metrics, step=self.step)
        shown = ", ".join(f"{k}={v:.4f}" for k, v in sorted({"train_loss": self.train_loss,
                                                               **metrics}.items()))
        if self.fabric.is_global_zero:  # a line for log files, above a terminal's bar
            tqdm.write(f"step {self.step}/{self.cfg.max_steps}: {shown}")
            sys.stdout.flush()
        if self.cfg.until == "plateau" and self.plateau_step is None:
            self.history.append((self.step, metrics["val_loss"]))
            if plateaued(self.history, self.cfg.val_every):
                self.anneal()
        if self.keep_best and metrics["val_loss"] < self.best:
            self.best = metrics["val_loss"]
            self.save(BEST)
        return metrics

    @property
    def plateau_step(self) -> int | None:
        """The step at which the plateau started the cooldown (None: not yet)."""
        return self.schedule.cooldown_start

    @property
    def last_step(self) -> int:
        """The step the run ends at: max_steps, or sooner where its plateau's
        cooldown ends."""
        end = self.schedule.cooldown_end
        return self.cfg.max_steps if end is None else min(end, self.cfg.max_steps)

    @property
    def final_lr(self) -> float:
        """The peak-rate group's learning rate of the last step taken."""
        return self.cfg.lr * self.schedule(self.step - 1) if self.step else math.nan

    def anneal(self) -> None:
        """The plateau ends the run with a linear cooldown to zero over
        decay_fraction x the steps so far (within max_steps), so that a
        converged run is an annealed one: a plateau at a high learning rate
        is not the loss the weights reach once it decays (Hägele et al. 2024)."""
        length = math.ceil(self.cfg.decay_fraction * self.step)
        self.schedule.cooldown(self.step, max(1, min(length, self.cfg.max_steps - self.step)))

    def final_validation(self) -> dict[str, float]:
        """The validation metrics of the weights after the last step: the last
        validation's when it came at that step, else evaluated now."""
        if self.validated and self.validated[0] == self.step:
            return self.validated[1]
        return evaluate(self.fabric, self.module, self.val_loader, "val")

    def after_step(self) -> None:
        """Fault injection (scalestudy.faults): the `fit` kill point halfway
        through the steps this run trains (a branch's: its cooldown's)."""
        first = self.fork_step or 0
        if self.step == max(first + 1, (first + self.cfg.max_steps) // 2):
            faults.kill_point("fit", self.run_dir)

    def save_forks(self) -> None:
        """A trunk's fork checkpoints of this step (training/branches.py)."""
        for name in self.forks.get(self.step, ()):
            self.save(name)

    def run(self) -> None:
        """Train to max_steps (or the plateau); raises Diverged or Preempted."""
        cfg, fabric = self.cfg, self.fabric
        self.started = time.perf_counter()
        self.module.train()
        progress = tqdm(total=cfg.max_steps, initial=self.step, unit="step", dynamic_ncols=True,
                        disable=not (fabric.is_global_zero and sys.stderr.isatty()))
        if self.step == 0:
            self.save_forks()  # a branch forking before any step (no warm-up)
        with StopSignal() as stop, progress:
            batches = self.batches()
            while self.step < self.last_step:
                loss = self.training_step(next(batches))
                # The train loss on metrics.csv's steps and those a fit may end
                # on (the record's): reading it is a device sync.
                if (self.step % self.log_every == 0 or self.step == self.last_step
                        or (cfg.until == "plateau" and self.step % cfg.val_every == 0)):
                    self.train_loss = float(fabric.all_reduce(loss.detach(), reduce_op="mean"))
                    fabric.log_dict({"train_loss": self.train_loss}, step=self.step)
                    progress.set_postfix(train_loss=f"{self.train_loss:.4f}", refresh=False)
                if self.step % cfg.val_every == 0 or (cfg.budget is not None
                                                      and self.step == cfg.max_steps):
                    self.validate()
                    self.save_forks()  # before last.ckpt: a run resumed past a fork has it
                    self.save(LAST)
                else:
                    self.save_forks()
                progress.update()
                self.after_step()
                if self.stop_requested(stop):
                    self.save(LAST)
                    print(f"stopped by {stop.received} at step {self.step}: saved "
                          f"{self.run_dir / LAST}", flush=True)
                    raise Preempted
        self.stopped_by = "max_steps" if self.plateau_step is None else "plateau"
        if self.step % cfg.val_every:  # the last steps followed the last validation
            self.save(LAST)
