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
- `TrainingLoop.resume`: the weights, optimiser, schedule, loop counters, data order
  and position, RNG streams and plateau history of a checkpoint, so a resumed
  run ends in the record an uninterrupted one writes;
- `evaluate`: a split's mean loss (and accuracy), each rank summing its
  shard, the sums reduced over ranks.
"""

from __future__ import annotations

import math
import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import torch
from lightning.fabric import Fabric
from lightning.fabric.loggers import CSVLogger
from lightning.fabric.plugins.environments import LightningEnvironment
from torch.utils.data import DataLoader
from tqdm import tqdm

from .. import faults
from ..atomic import replacing
from ..priors import CHECKPOINT as BEST  # the pretraining checkpoint finetuning loads
from . import resume, trackers
from .plateau import plateaued

LAST = resume.CHECKPOINT


class Diverged(Exception):
    """The training loss turned non-finite (NaN or inf): the run stops there."""


class Preempted(SystemExit):
    """SIGTERM or USR1 stopped the run at a step boundary; last.ckpt is saved."""

    def __init__(self) -> None:
        super().__init__(resume.PREEMPTED_EXIT)


def make_fabric(hw, run_dir: Path, loggers: list | None = None) -> Fabric:
    """The one Fabric factory: hardware from `hw` (study.specs.TrainerConfig), the
    history to `loggers` (default: run_dir/metrics.csv; a run's trackers:
    training/trackers.py); launched (under DDP, the other ranks' processes run
    the same command)."""
    # One run is one process (one SLURM task) that starts its devices'
    # processes itself: no SLURM environment detection (see training/resume.py).
    fabric = Fabric(accelerator=hw.accelerator, devices=hw.devices, strategy=hw.strategy,
                    precision=hw.precision, plugins=[LightningEnvironment()],
                    loggers=[CSVLogger(run_dir, name="", version="")] if loggers is None
                    else loggers)
    # Deterministic kernels, as Lightning's Trainer(deterministic=True) sets them.
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(True)
    fabric.launch()
    return fabric


class StopSignal:
    """SIGTERM and USR1 (SLURM's warning before the time limit) ask the loop to
    stop at the end of the step under way; under DDP rank 0's request reaches
    every rank (one tiny broadcast a step)."""

    def __init__(self, fabric: Fabric):
        self.fabric, self.requested, self.previous = fabric, False, {}
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

    def now(self) -> bool:
        if self.fabric.world_size == 1:
            return self.requested
        flag = torch.tensor([int(self.requested)], device=self.fabric.device)
        torch.distributed.broadcast(flag, src=0)
        return bool(flag.item())


def evaluate(fabric: Fabric, module, loader: DataLoader, split: str) -> dict[str, float]:
    """The means of the module's `evaluation_sums` over a split (each rank its
    shard, the sums reduced over ranks): `{split}_loss` (and `{split}_acc`)."""
    was_training = module.training
    module.eval()
    module.start_evaluation()
    sums: dict[str, torch.Tensor] = {}
    with torch.no_grad(), fabric.autocast():
        for batch in loader:
            for name, value in module.evaluation_sums(fabric.to_device(batch)).items():
                sums[name] = sums.get(name, 0) + value.detach().float()
    module.train(was_training)
    names = sorted(sums)
    totals = dict(zip(names, fabric.all_reduce(torch.stack([sums[n] for n in names]),
                                               reduce_op="sum"), strict=True))
    count = totals.pop("count")
    return {f"{split}_{name}": float(total / count) for name, total in totals.items()}


class TrainingLoop:
    """One run's training loop. `module` is a modules.StudyModule; `train` a
    data.loader (shuffled; this rank's shard), `val` this rank's validation
    shard. Counters the record reads after `run`: step, tokens_seen,
    train_loss, diverged_step, stopped_by, elapsed()."""

    def __init__(self, fabric: Fabric, module, cfg, run_dir: Path, config_hash: str,
                 train: DataLoader, val: DataLoader, keep_best: bool = False):
        self.fabric, self.cfg, self.run_dir = fabric, cfg, Path(run_dir)
        self.config_hash, self.train_loader, self.val_loader = config_hash, train, val
        self.module, self.keep_best = module.to(fabric.device), keep_best
        optimizer, self.schedule = module.configure_optimizer()  # its kernel suits the device
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
        self.log_every = max(1, min(10, cfg.val_every))

    # -- what a checkpoint holds ------------------------------------------------

    def state(self) -> dict:
        """Everything a resumed run needs to continue as if never stopped; keys
        `state_dict`, `global_step` and `hyper_parameters` are what finetuning
        and the tests read."""
        return {
            "state_dict": self.module, "optimizer": self.optimizer, "schedule": self.schedule,
            "loader": self.train_loader, "global_step": self.step, "epoch": self.epoch,
            "tokens_seen": self.tokens_seen, "train_loss": self.train_loss, "best": self.best,
            "history": self.history, "seconds": self.elapsed(),
            "hyper_parameters": self.module.hyperparameters(),
            "rng": self.module.rng_state(), resume.SPEC_KEY: self.config_hash,
        }

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
        self.step, self.epoch, self.tokens_seen = (state["global_step"], state["epoch"],
                                                   state["tokens_seen"])
        self.train_loss, self.best, self.seconds_before = (state["train_loss"], state["best"],
                                                           state["seconds"])
        self.history = [tuple(h) for h in state["history"]]
        self.module.set_rng_state(state["rng"])

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

    def training_step(self, batch) -> torch.Tensor:
        cfg, fabric = self.cfg, self.fabric
        # Count the batch's tokens on the host: read on a GPU after the step,
        # the count would stall the device every step.
        tokens = self.module.count_tokens(batch)
        loss, aux_loss = self.model.training_loss(fabric.to_device(batch))
        total = loss + aux_loss
        if not torch.isfinite(total):  # no update from this loss, no further step
            self.diverged_step = self.step
            raise Diverged(f"non-finite loss at step {self.step}")
        fabric.backward(total)
        if cfg.grad_clip:
            fabric.clip_gradients(self.model, self.optimizer, max_norm=cfg.grad_clip)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.schedule.step()
        self.step += 1
        self.tokens_seen += tokens
        return loss

    def validate(self) -> dict[str, float]:
        metrics = evaluate(self.fabric, self.module, self.val_loader, "val")
        self.validated = self.step, metrics
        self.fabric.log_dict(metrics, step=self.step)
        shown = ", ".join(f"{k}={v:.4f}" for k, v in sorted({"train_loss": self.train_loss,
                                                               **metrics}.items()))
        if self.fabric.is_global_zero:  # a line for log files, above a terminal's bar
            tqdm.write(f"step {self.step}/{self.cfg.max_steps}: {shown}")
            sys.stdout.flush()
        if self.cfg.until == "plateau":
            self.history.append((self.step, metrics["val_loss"]))
            if plateaued(self.history, self.cfg.val_every):
                self.stopped_by = "plateau"
        if self.keep_best and metrics["val_loss"] < self.best:
            self.best = metrics["val_loss"]
            self.save(BEST)
        return metrics

    def final_validation(self) -> dict[str, float]:
        """The validation metrics of the weights after the last step: the last
        validation's when it came at that step, else evaluated now."""
        if self.validated and self.validated[0] == self.step:
            return self.validated[1]
        return evaluate(self.fabric, self.module, self.val_loader, "val")

    def after_step(self) -> None:
        """Fault injection (scalestudy.faults): the `fit` kill point halfway."""
        if self.step == max(1, self.cfg.max_steps // 2):
            faults.kill_point("fit", self.run_dir)

    def run(self) -> None:
        """Train to max_steps (or the plateau); raises Diverged or Preempted."""
        cfg, fabric = self.cfg, self.fabric
        self.started = time.perf_counter()
        if cfg.until == "plateau" and self.history and plateaued(self.history, cfg.val_every):
            self.stopped_by = "plateau"  # a checkpoint written at the plateau: done
            return
        self.module.train()
        progress = tqdm(total=cfg.max_steps, initial=self.step, unit="step", dynamic_ncols=True,
                        disable=not (fabric.is_global_zero and sys.stderr.isatty()))
        with StopSignal(fabric) as stop, progress:
            batches = self.batches()
            while self.step < cfg.max_steps and self.stopped_by is None:
                loss = self.training_step(next(batches))
                # The train loss on metrics.csv's steps and those a fit may end
                # on (the record's): reading it is a device sync.
                if (self.step % self.log_every == 0 or self.step == cfg.max_steps
                        or (cfg.until == "plateau" and self.step % cfg.val_every == 0)):
                    self.train_loss = float(fabric.all_reduce(loss.detach(), reduce_op="mean"))
                    fabric.log_dict({"train_loss": self.train_loss}, step=self.step)
                    progress.set_postfix(train_loss=f"{self.train_loss:.4f}", refresh=False)
                if self.step % cfg.val_every == 0:
                    self.validate()
                    self.save(LAST)
                progress.update()
                self.after_step()
                if stop.now():
                    self.save(LAST)
                    print(f"stopped by {stop.received} at step {self.step}: saved "
                          f"{self.run_dir / LAST}", flush=True)
                    raise Preempted
        self.stopped_by = self.stopped_by or "max_steps"
        if self.step % cfg.val_every:  # the last steps followed the last validation
            self.save(LAST)
