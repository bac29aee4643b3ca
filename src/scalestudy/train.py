"""Training one grid cell with PyTorch Lightning, ending in one run record.

`RunSpec` is everything a run depends on (the workflow passes it as JSON);
`make_trainer` is the one Trainer factory, whose accelerator, devices and
precision come from config, so the same code runs on a CPU, one GPU or many.
`StudyModule` holds what every stage shares (optimiser, schedule, divergence
check); `Classifier` is the task stage, `pretrain.MaskedLM` the pretraining one.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import math
import subprocess
import sys
import time
import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import lightning as L
import torch
import torch.nn.functional as F
from lightning.pytorch.callbacks import Callback, ModelCheckpoint
from lightning.pytorch.loggers import CSVLogger
from lightning.pytorch.plugins.environments import LightningEnvironment
from lightning.pytorch.utilities.exceptions import SIGTERMException
from torch.utils.data import DistributedSampler, TensorDataset
from torchdata.stateful_dataloader import StatefulDataLoader
from torchmetrics.classification import MulticlassAccuracy

from . import __version__, faults, resume, tasks
from .flops import count_flops, count_params
from .models import backbone_class, backbone_config
from .models.heads import ClassifierHead
from .plateau import plateaued
from .priors import get_prior
from .records import data_checksum, error_line, read_records, write_record


@dataclass(frozen=True)
class TrainConfig:
    """The `train` section of a study; the defaults are the default study's
    (config/config.yaml, which a test keeps them equal to)."""

    max_steps: int = 90
    batch_size: int = 32
    lr: float = 2e-3
    weight_decay: float = 0.01
    warmup_steps: int = 9
    val_every: int = 45
    grad_clip: float = 1.0
    dropout: float = 0.0
    pooling: str = "mean"
    norm: str = "pre"
    protocol: str = "depth"  # which dimension grows with size: default, depth, width
    causal: bool = False  # causal backbones; spt then pretrains by next-token prediction
    # "max_steps" trains max_steps steps; "plateau" stops earlier at the
    # validation loss's plateau (`Plateau`), max_steps then being the cap.
    until: str = "max_steps"


@dataclass(frozen=True)
class TrainerConfig:
    accelerator: str = "auto"
    devices: Any = 1
    # Lightning's strategy: "ddp" runs one process per device (the record
    # counts every device's steps, tokens and FLOPs: the whole run).
    strategy: str = "auto"
    precision: str = "32-true"
    # Torch intra-op threads per run; 0 keeps torch's default. The workflow
    # sets it to the job's thread count so parallel jobs do not oversubscribe.
    threads: int = 0


def parse_section(kind: type, name: str, given: dict):
    accepted = {f.name for f in dataclasses.fields(kind)}
    unknown = set(given) - accepted
    if unknown:
        raise ValueError(f"{name}: unknown keys {sorted(unknown)}, accepted: {sorted(accepted)}")
    return kind(**given)


def spec_hash(spec) -> str:
    text = json.dumps(dataclasses.asdict(spec), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class RunSpec:
    study: str
    task: str
    arch: str
    size: str
    prior: str
    seed: int
    task_config: dict = field(default_factory=dict)
    train: TrainConfig = TrainConfig()
    trainer: TrainerConfig = TrainerConfig()

    @classmethod
    def from_dict(cls, spec: dict) -> RunSpec:
        spec = dict(spec)
        spec["train"] = parse_section(TrainConfig, "train", spec.get("train", {}))
        spec["trainer"] = parse_section(TrainerConfig, "trainer", spec.get("trainer", {}))
        return cls(**spec)

    def config_hash(self) -> str:
        return spec_hash(self)


def warmup_cosine(warmup: int, total: int):
    """Linear warm-up to the peak rate, then cosine decay to 10% of it."""

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        progress = min(1.0, (step - warmup) / max(1, total - warmup))
        return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress))

    return factor


def fused_adamw(groups: list[dict]) -> bool | None:
    """AdamW's kernel: torch's fused one on a CPU, where torch's default is a
    Python loop over the parameters (clipping + update about 2x faster, the
    whole step 1.15-1.37x at xxs-m: docs/benchmarks.md); torch's own choice elsewhere
    (foreach on a GPU), where Lightning's 16-mixed gradient clipping refuses
    an optimiser that unscales its gradients itself, as a fused one does."""
    on_cpu = all(p.device.type == "cpu" for group in groups for p in group["params"])
    return True if on_cpu else None


class Diverged(Exception):
    """The training loss turned non-finite (NaN or inf): the run stops there."""


class StudyModule(L.LightningModule):
    """What every training stage shares: AdamW with warm-up + cosine decay, the
    S4 parameter group, the divergence check and the token count.

    Subclasses define `training_loss(batch) -> (loss, aux_loss)`.
    """

    def __init__(self, backbone: torch.nn.Module, cfg: TrainConfig, pad_id: int = 0):
        super().__init__()
        self.backbone, self.cfg, self.pad_id = backbone, cfg, pad_id
        self.diverged_step: int | None = None
        self.tokens_seen = 0
        self.batch_tokens = 0  # the current training batch's (on_before_batch_transfer)
        self.seconds_before = 0.0  # wall time of the attempts this run resumed from
        self.train_loss_before = math.nan  # the last logged train_loss of those attempts
        self.started = time.perf_counter()

    def on_fit_start(self) -> None:
        self.started = time.perf_counter()

    def elapsed(self) -> float:
        """Wall seconds of the run so far, over every attempt."""
        return self.seconds_before + time.perf_counter() - self.started

    def training_state(self) -> dict:
        """What a resumed run needs to continue exactly as if never stopped
        (Lightning restores weights, optimiser, schedule and loops itself)."""
        return {
            "tokens_seen": self.tokens_seen, "seconds": self.elapsed(),
            # The record's train_loss when a run resumes after its last logged step.
            "train_loss": float(self.trainer.callback_metrics.get("train_loss", math.nan)),
            "torch_rng": torch.get_rng_state(),
            "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
        }

    def restore_training_state(self, state: dict) -> None:
        self.tokens_seen, self.seconds_before = state["tokens_seen"], state["seconds"]
        self.train_loss_before = state["train_loss"]
        torch.set_rng_state(state["torch_rng"])
        if state["cuda_rng"] and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(state["cuda_rng"])

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        checkpoint["study_state"] = self.training_state()

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        # Only a resumed fit continues the run; `validate(ckpt_path=best)`
        # (pretraining's evaluation) loads the weights and nothing else.
        if self.trainer.state.fn == "fit":
            self.restore_training_state(checkpoint["study_state"])

    def training_loss(self, batch) -> tuple[torch.Tensor, torch.Tensor]:
        raise NotImplementedError

    def on_before_batch_transfer(self, batch, dataloader_idx):
        # Count the batch's tokens on the host, before it moves to the device: read
        # on a GPU after the step, the count would stall the device every step.
        if self.trainer.training:
            self.batch_tokens = int((batch[0] != self.pad_id).sum())
        return batch

    def training_step(self, batch, batch_idx):
        loss, aux_loss = self.training_loss(batch)
        total = loss + aux_loss
        if not torch.isfinite(total):
            # Stop at once: no update from this loss, no further step, no evaluation
            # (Lightning's should_stop would still step and validate).
            self.diverged_step = self.global_step
            raise Diverged(f"non-finite loss at step {self.global_step}")
        self.tokens_seen += self.batch_tokens
        # Log only on the steps Lightning writes to metrics.csv (every
        # log_every_n_steps) and those a fit may end on (the record's
        # train_loss): the last one and, under train.until plateau, every
        # validation's. `self.log` costs ~0.7 ms per call, 3-4% of a small
        # model's CPU step.
        step, trainer, cfg = self.global_step + 1, self.trainer, self.cfg
        if (step % max(1, trainer.log_every_n_steps) == 0 or step == trainer.max_steps
                or (cfg.until == "plateau" and step % cfg.val_every == 0)):
            self.log("train_loss", loss, prog_bar=True, sync_dist=True)
        return total

    def parameter_groups(self) -> list[dict]:
        """One AdamW group, plus the S4 papers' group for state-space A and dt:
        their own (smaller) learning rate and no weight decay."""
        special = getattr(self.backbone, "ssm_parameters", dict)()
        if not special:
            return [{"params": list(self.parameters())}]
        ids = {id(p) for p in special.values()}
        rest = [p for p in self.parameters() if id(p) not in ids]
        lr = min(self.cfg.lr, self.backbone.cfg.extra["ssm_lr"])
        return [{"params": rest}, {"params": list(special.values()), "lr": lr, "weight_decay": 0.0}]

    def configure_optimizers(self):
        cfg = self.cfg
        groups = self.parameter_groups()
        optimizer = torch.optim.AdamW(groups, lr=cfg.lr, weight_decay=cfg.weight_decay,
                                      fused=fused_adamw(groups))
        schedule = torch.optim.lr_scheduler.LambdaLR(
            optimizer, warmup_cosine(cfg.warmup_steps, cfg.max_steps)
        )
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": schedule, "interval": "step"}}


class Classifier(StudyModule):
    """Backbone + pooled classifier head, trained with cross-entropy. A batch
    is (tokens, labels), or (tokens, tokens2, labels) for a pair task: both
    documents go through the backbone in one call (stacked along the batch)
    and the head combines them."""

    def __init__(self, backbone: torch.nn.Module, head: torch.nn.Module, cfg: TrainConfig,
                 n_classes: int, pad_id: int = 0):
        super().__init__(backbone, cfg, pad_id)
        self.head = head
        self.val_acc = MulticlassAccuracy(n_classes, average="micro")
        self.test_acc = MulticlassAccuracy(n_classes, average="micro")

    def forward(self, *docs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        tokens = torch.cat(docs) if len(docs) > 1 else docs[0]
        out = self.backbone(tokens, tokens != self.pad_id)
        return self.head(out.hidden, out.mask), out.aux_loss

    def training_loss(self, batch):
        *docs, labels = batch
        logits, aux_loss = self(*docs)
        return F.cross_entropy(logits, labels), aux_loss

    def validation_step(self, batch, batch_idx):
        *docs, labels = batch
        logits, _ = self(*docs)
        self.val_acc(logits, labels)
        self.log("val_loss", F.cross_entropy(logits, labels), prog_bar=True, sync_dist=True)
        self.log("val_acc", self.val_acc, prog_bar=True)

    def test_step(self, batch, batch_idx):
        *docs, labels = batch
        logits, _ = self(*docs)
        self.test_acc(logits, labels)
        self.log("test_acc", self.test_acc)


class Plateau(Callback):
    """Stops a fit at its validation loss's plateau (scalestudy.plateau),
    checked at every validation; max_steps stays the cap. Its history is saved
    in the checkpoint, so a resumed run judges the same steps as an unbroken
    one (and one killed after its plateau, before its record, ends at once)."""

    def __init__(self, val_every: int):
        self.val_every = val_every
        self.history: list[tuple[int, float]] = []
        self.reached = False

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self.reached:  # restored from a checkpoint written at the plateau
            trainer.should_stop = True

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.sanity_checking or trainer.state.fn != "fit":
            return
        self.history.append((trainer.global_step, float(trainer.callback_metrics["val_loss"])))
        if plateaued(self.history, self.val_every):
            self.reached = trainer.should_stop = True

    def state_dict(self) -> dict:
        return {"history": self.history, "reached": self.reached}

    def load_state_dict(self, state: dict) -> None:
        self.history = [tuple(h) for h in state["history"]]
        self.reached = state["reached"]


def stopped_by(trainer: L.Trainer) -> str:
    """The record's stopped_by of a fit that ended: plateau or max_steps."""
    reached = any(isinstance(c, Plateau) and c.reached for c in trainer.callbacks)
    return "plateau" if reached else "max_steps"


class LogLines(Callback):
    """One line a person reads at each validation of a fit (step, losses,
    accuracy), for logs written to files; the progress bar is for terminals."""

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.sanity_checking or trainer.state.fn != "fit":
            return
        metrics = ", ".join(f"{name}={float(value):.4f}"
                            for name, value in sorted(trainer.callback_metrics.items()))
        print(f"step {trainer.global_step}/{trainer.max_steps}: {metrics}", flush=True)


class _NoTips(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return "Tip:" not in record.getMessage()


_NO_TIPS = _NoTips()


def quiet_lightning() -> None:
    """Drop Lightning's advertising tips and a deprecation warning raised inside
    Lightning itself: lines in every job log that no user can act on. (Both
    calls are idempotent: a filter is added once, a warning filter replaced.)"""
    logging.getLogger("lightning.pytorch.utilities.rank_zero").addFilter(_NO_TIPS)
    warnings.filterwarnings("ignore", message=r".*LeafSpec.*is deprecated")
    # torchdata calls a deprecated torch API; Lightning suggests `srun` to any
    # run on a machine with SLURM installed (a run is one task: make_trainer).
    warnings.filterwarnings("ignore", message=r".*'set_vital' is deprecated")
    warnings.filterwarnings("ignore", message=r".*The `srun` command is available")


def make_trainer(cfg: TrainConfig, hw: TrainerConfig, run_dir: Path,
                 checkpoint: ModelCheckpoint | None = None, config_hash: str = "") -> L.Trainer:
    """The one Trainer factory: hardware from `hw`, history to run_dir/metrics.csv,
    and run_dir/last.ckpt (plus whatever `checkpoint` keeps), stamped with the
    run's `config_hash`: a killed run of the same spec resumes from it
    (scalestudy.resume). last.ckpt has its own callback, unmonitored, so that it
    is rewritten at every validation (one that also keeps a monitored best writes
    its last.ckpt only with a new best), and resume.Preemption writes it at the
    end of training too: it is always the model after the last step."""
    last = ModelCheckpoint(dirpath=run_dir, filename="last", save_top_k=1,
                           enable_version_counter=False)
    quiet_lightning()
    return L.Trainer(
        accelerator=hw.accelerator,
        devices=hw.devices,
        strategy=hw.strategy,
        # One run is one process (one SLURM task) that starts its devices'
        # processes itself; never SLURM's auto-requeue (see scalestudy.resume).
        plugins=[LightningEnvironment()],
        default_root_dir=run_dir,
        precision=hw.precision,
        max_steps=cfg.max_steps,
        max_epochs=-1,
        val_check_interval=cfg.val_every,
        check_val_every_n_epoch=None,
        gradient_clip_val=cfg.grad_clip or None,
        deterministic=True,
        logger=CSVLogger(run_dir, name="", version=""),
        log_every_n_steps=max(1, min(10, cfg.val_every)),
        callbacks=[last, *([checkpoint] if checkpoint else []),
                   resume.Preemption(run_dir, config_hash), LogLines(), *faults.callbacks(),
                   *([Plateau(cfg.val_every)] if cfg.until == "plateau" else [])],
        enable_progress_bar=sys.stderr.isatty(),
        enable_model_summary=False,
        num_sanity_val_steps=0,
    )


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


class ResumableLoader(StatefulDataLoader):
    """A checkpoint keeps the loader's place: its epoch and the batches it has
    given in that epoch (StatefulDataLoader), so a resumed run sees the
    batches it would have seen (scalestudy.resume). The epoch is restored here
    because Lightning creates the resumed iterator before it sets the epoch."""

    def state_dict(self) -> dict:
        return {**super().state_dict(), "epoch": getattr(self.sampler, "epoch", 0)}

    def load_state_dict(self, state: dict) -> None:
        state = dict(state)
        epoch = state.pop("epoch")
        if hasattr(self.sampler, "set_epoch"):
            self.sampler.set_epoch(epoch)
        super().load_state_dict(state)


def loader(tensors: tuple, batch_size: int, seed: int, shuffle: bool) -> ResumableLoader:
    """Batches of `tensors`; shuffled, each epoch's order is a function of
    (seed, epoch) alone: DistributedSampler's, whose epoch Lightning sets (and
    which, under DDP, it swaps for one shard per device)."""
    dataset = TensorDataset(*tensors)
    order = DistributedSampler(dataset, num_replicas=1, rank=0, seed=seed) if shuffle else None
    # Its own generator: creating an iterator draws a seed from it, not from
    # torch's global RNG (dropout's), which a resumed run restores.
    return ResumableLoader(dataset, batch_size=batch_size, sampler=order,
                           generator=torch.Generator().manual_seed(seed),
                           drop_last=shuffle and len(dataset) > batch_size)


def flops_per_step(module: StudyModule, batch: tuple) -> int:
    """Counted forward+backward FLOPs of one training step on `batch`."""

    def step():
        loss, aux_loss = module.training_loss(batch)
        (loss + aux_loss).backward()

    flops = count_flops(step)
    module.zero_grad(set_to_none=True)
    return flops


METRICS = ("train_loss", "val_loss", "val_acc", "test_acc", "upstream_loss")


def last_train_loss(module: StudyModule, trainer: L.Trainer) -> float:
    """The last logged train_loss (of an earlier attempt when the run resumed
    after its last logged step)."""
    return float(trainer.callback_metrics.get("train_loss", module.train_loss_before))


def fit_and_record(module: StudyModule, trainer: L.Trainer, train, val,
                   after_fit: Callable[[], dict], record: dict, path: Path) -> dict:
    """Fit (from the run's own last.ckpt if a killed attempt left one), then
    evaluate with `after_fit`, and write the run record atomically: ok,
    diverged (non-finite loss) or failed (an exception, recorded with it).
    Stopped by SIGTERM or USR1: checkpoint saved, no record, exit 143."""
    metrics: dict[str, float] = {}
    status, error, stop = "ok", "", None
    resume.stop_on_usr1()
    resume_from = resume.resume_point(path.parent, record["config_hash"])
    if resume_from:
        print(f"resuming from {resume_from}", flush=True)
        resume.keep_history(path.parent)
    try:
        trainer.fit(module, train, val, ckpt_path=resume_from, weights_only=True)
        stop = stopped_by(trainer)
        metrics["train_loss"] = last_train_loss(module, trainer)
        metrics.update(after_fit())
    except Diverged:
        status = "diverged"  # at module.diverged_step; the last finite loss logged stays
        metrics["train_loss"] = last_train_loss(module, trainer)
    except SIGTERMException:
        sys.exit(resume.PREEMPTED_EXIT)  # resume.Preemption saved last.ckpt
    except Exception as err:  # a run that crashes is data too: record it
        status, error = "failed", error_line(err)
        traceback.print_exc()
    wall = module.elapsed()
    steps = trainer.global_step
    # Every device's tokens (DDP: each rank counted its own shard's).
    tokens = int(trainer.strategy.reduce(torch.tensor(module.tokens_seen), reduce_op="sum"))
    record.update(
        status=status, error=error, diverged_step=module.diverged_step, stopped_by=stop,
        steps=steps, tokens_seen=tokens, train_flops=record["flops_per_step"] * steps,
        wall_seconds=wall, tokens_per_second=tokens / wall if wall else math.nan,
        device=str(trainer.strategy.root_device),
        **{k: float(metrics.get(k, record.get(k, math.nan))) for k in METRICS},
    )
    if trainer.is_global_zero:
        write_record(record, path)
    return record


def provenance(spec, cfg: TrainConfig, hw: TrainerConfig, module: StudyModule,
               step_flops: int) -> dict:
    """The record fields known before training starts."""
    bcfg = module.backbone.cfg
    n_params, n_nonembed = count_params(module)
    return {
        "study": spec.study, "arch": spec.arch, "size": spec.size, "seed": spec.seed,
        "n_params": n_params, "n_params_nonembed": n_nonembed,
        "flops_per_step": float(step_flops), "pretrain_flops": 0.0,
        "batch_size": cfg.batch_size, "depth": bcfg.depth, "width": bcfg.width,
        "heads": bcfg.heads, "d_ff": bcfg.d_ff, "lr": cfg.lr, "warmup_steps": cfg.warmup_steps,
        "norm": bcfg.norm, "protocol": cfg.protocol, "upstream_loss": math.nan,
        "precision": hw.precision, "torch_version": torch.__version__,
        "package_version": __version__, "git_rev": git_rev(), "config_hash": spec.config_hash(),
    }


def build_classifier(spec: RunSpec, cfg: TrainConfig, data: tasks.TaskData,
                     pretrained: Path | None) -> tuple[Classifier, dict]:
    """The task model under its prior; returns it and the prior's report."""
    prior = get_prior(spec.prior)
    checkpoint = prior.load(pretrained)
    max_len = data.seq_len
    if checkpoint is not None:
        # The pretrained backbone fixes the length (position table, Mixer's
        # token-mixing weights); the task's sequences must fit in it.
        max_len = checkpoint["hyper_parameters"]["max_len"]
        if data.seq_len > max_len:
            raise ValueError(
                f"tasks.{spec.task}: sequence length {data.seq_len} exceeds the pretrained "
                f"backbone's max_len {max_len} (upstream.seq_len)"
            )
    bcfg = backbone_config(spec.arch, spec.size, data.vocab_size, max_len, norm=cfg.norm,
                           dropout=cfg.dropout, protocol=cfg.protocol, causal=cfg.causal)
    backbone = backbone_class(spec.arch)(bcfg)
    report = prior.initialise(backbone, data, checkpoint)
    head = ClassifierHead(backbone, data.n_classes, cfg.pooling, pair=data.pair)
    return Classifier(backbone, head, cfg, data.n_classes, data.pad_id), report


def run(spec: RunSpec, data_dir: Path, run_dir: Path, pretrained: Path | None = None) -> dict:
    """Train one cell and write run_dir/record.parquet; returns the record.

    `pretrained`: the directory of the pretraining stage the prior needs (its
    best.ckpt and record.parquet), for spt, upstream and scratch_matched.
    """
    prior = get_prior(spec.prior)
    if prior.needs and pretrained is None:
        raise ValueError(f"prior {spec.prior!r} needs the {prior.needs} "
                         "pretraining directory (--pretrained)")
    pretrained = Path(pretrained) if pretrained else None
    pretrain_record = read_records(pretrained / "record.parquet").iloc[0] if pretrained else None
    if pretrain_record is not None and pretrain_record["status"] != "ok":
        raise ValueError(f"{pretrained}: its {prior.needs} pretraining run "
                         f"{pretrain_record['status']}, so there is nothing to start from")
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    if spec.trainer.threads:
        torch.set_num_threads(spec.trainer.threads)
    L.seed_everything(spec.seed, workers=True, verbose=False)
    data = tasks.load(spec.task, spec.task_config, data_dir)
    cfg = prior.schedule(spec.train)
    model, report = build_classifier(spec, cfg, data, pretrained)
    if report:
        print(f"prior {spec.prior}: {report}")
    train_tensors = data.splits["train"]
    trainer = make_trainer(cfg, spec.trainer, run_dir, config_hash=spec.config_hash())
    # One optimiser step of the whole run: every device's batch.
    step_flops = trainer.world_size * flops_per_step(
        model, tuple(t[: cfg.batch_size] for t in train_tensors))
    cfg = model.cfg = prior.match_compute(cfg, step_flops, pretrain_record)
    trainer.fit_loop.epoch_loop.max_steps = cfg.max_steps  # the matched schedule
    L.seed_everything(spec.seed, workers=True, verbose=False)
    record = provenance(spec, cfg, spec.trainer, model, step_flops)
    record.update(task=spec.task, task_data=data.label, prior=spec.prior, stage=prior.stage,
                  seq_len=data.seq_len, data_checksum=data_checksum(data_dir))
    if prior.pretrain:
        record.update(pretrain_flops=float(pretrain_record["train_flops"]),
                      upstream_loss=float(pretrain_record["upstream_loss"]))
    val = loader(data.splits["val"], cfg.batch_size, spec.seed, False)

    def evaluate() -> dict:
        metrics = trainer.validate(model, val, verbose=False)[0]
        test = loader(data.splits["test"], cfg.batch_size, spec.seed, False)
        return {**metrics, **trainer.test(model, test, verbose=False)[0]}

    train = loader(train_tensors, cfg.batch_size, spec.seed, True)
    return fit_and_record(model, trainer, train, val, evaluate, record,
                          run_dir / "record.parquet")
