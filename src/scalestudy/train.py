"""Training one grid cell with PyTorch Lightning, ending in one run record.

`RunSpec` is everything a run depends on (the workflow passes it as JSON);
`make_trainer` is the one Trainer factory, whose accelerator, devices and
precision come from config, so the same code runs on a CPU, one GPU or many.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import subprocess
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import lightning as L
import torch
import torch.nn.functional as F
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.loggers import CSVLogger
from torch.utils.data import DataLoader, TensorDataset
from torchmetrics.classification import MulticlassAccuracy

from . import __version__, priors, tasks
from .flops import count_flops, count_params
from .models import backbone_class, backbone_config
from .models.heads import ClassifierHead
from .records import write_record


@dataclass(frozen=True)
class TrainConfig:
    max_steps: int = 300
    batch_size: int = 32
    lr: float = 1e-3
    weight_decay: float = 0.01
    warmup_steps: int = 30
    val_every: int = 100
    grad_clip: float = 1.0
    dropout: float = 0.0
    pooling: str = "mean"
    norm: str = "pre"
    protocol: str = "default"  # which dimension grows with size: default, depth, width


@dataclass(frozen=True)
class TrainerConfig:
    accelerator: str = "auto"
    devices: Any = 1
    precision: str = "32-true"
    # Torch intra-op threads per run; 0 keeps torch's default. The workflow
    # sets it to the job's thread count so parallel jobs do not oversubscribe.
    threads: int = 0


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
        for name, kind in (("train", TrainConfig), ("trainer", TrainerConfig)):
            given = spec.get(name, {})
            accepted = {f.name for f in dataclasses.fields(kind)}
            unknown = set(given) - accepted
            if unknown:
                raise ValueError(
                    f"{name}: unknown keys {sorted(unknown)}, accepted: {sorted(accepted)}"
                )
            spec[name] = kind(**given)
        return cls(**spec)

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)

    def config_hash(self) -> str:
        text = json.dumps(self.as_dict(), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def warmup_cosine(warmup: int, total: int):
    """Linear warm-up to the peak rate, then cosine decay to 10% of it."""

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        progress = min(1.0, (step - warmup) / max(1, total - warmup))
        return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress))

    return factor


class Classifier(L.LightningModule):
    """Backbone + pooled classifier head, trained with cross-entropy."""

    def __init__(self, backbone: torch.nn.Module, head: torch.nn.Module, cfg: TrainConfig,
                 n_classes: int, pad_id: int = 0):
        super().__init__()
        self.backbone, self.head, self.cfg, self.pad_id = backbone, head, cfg, pad_id
        self.val_acc = MulticlassAccuracy(n_classes, average="micro")
        self.test_acc = MulticlassAccuracy(n_classes, average="micro")
        self.diverged_step: int | None = None
        self.tokens_seen = 0

    def forward(self, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        out = self.backbone(tokens, tokens != self.pad_id)
        return self.head(out.hidden, out.mask), out.aux_loss

    def loss(self, tokens, labels):
        logits, aux_loss = self(tokens)
        return F.cross_entropy(logits, labels), aux_loss, logits

    def training_step(self, batch, batch_idx):
        tokens, labels = batch
        loss, aux_loss, _ = self.loss(tokens, labels)
        total = loss + aux_loss
        if not torch.isfinite(total):
            # Record the divergence and stop; returning None skips the update.
            self.diverged_step = self.global_step
            self.trainer.should_stop = True
            return None
        self.tokens_seen += int((tokens != self.pad_id).sum())
        self.log("train_loss", loss, prog_bar=True)
        return total

    def validation_step(self, batch, batch_idx):
        tokens, labels = batch
        loss, _, logits = self.loss(tokens, labels)
        self.val_acc(logits, labels)
        self.log("val_loss", loss, prog_bar=True)
        self.log("val_acc", self.val_acc, prog_bar=True)

    def test_step(self, batch, batch_idx):
        tokens, labels = batch
        _, _, logits = self.loss(tokens, labels)
        self.test_acc(logits, labels)
        self.log("test_acc", self.test_acc)

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
        optimizer = torch.optim.AdamW(self.parameter_groups(), lr=cfg.lr,
                                      weight_decay=cfg.weight_decay)
        schedule = torch.optim.lr_scheduler.LambdaLR(
            optimizer, warmup_cosine(cfg.warmup_steps, cfg.max_steps)
        )
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": schedule, "interval": "step"}}


def make_trainer(spec: RunSpec, run_dir: Path) -> L.Trainer:
    """The one Trainer factory: hardware from spec.trainer, history to metrics.csv."""
    cfg, hw = spec.train, spec.trainer
    return L.Trainer(
        accelerator=hw.accelerator,
        devices=hw.devices,
        precision=hw.precision,
        max_steps=cfg.max_steps,
        max_epochs=-1,
        val_check_interval=cfg.val_every,
        check_val_every_n_epoch=None,
        gradient_clip_val=cfg.grad_clip,
        deterministic=True,
        logger=CSVLogger(run_dir, name="", version=""),
        log_every_n_steps=max(1, min(10, cfg.val_every)),
        callbacks=[ModelCheckpoint(dirpath=run_dir, save_last=True, save_top_k=0)],
        enable_model_summary=False,
        num_sanity_val_steps=0,
    )


def git_rev() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=5,
            cwd=Path(__file__).parent,
        )
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def build_model(spec: RunSpec, data: tasks.TaskData) -> Classifier:
    cfg = spec.train
    bcfg = backbone_config(
        spec.arch, spec.size, len(data.vocab), data.seq_len, norm=cfg.norm, dropout=cfg.dropout,
        protocol=cfg.protocol,
    )
    backbone = backbone_class(spec.arch)(bcfg)
    head = ClassifierHead(backbone, data.n_classes, cfg.pooling)
    return Classifier(backbone, head, cfg, data.n_classes, data.pad_id)


def flops_per_step(model: Classifier, batch_size: int, seq_len: int) -> int:
    """Counted forward+backward FLOPs of one step at full length."""
    tokens = torch.ones(batch_size, seq_len, dtype=torch.long)
    labels = torch.zeros(batch_size, dtype=torch.long)

    def step():
        loss, aux_loss, _ = model.loss(tokens, labels)
        (loss + aux_loss).backward()

    flops = count_flops(step)
    model.zero_grad(set_to_none=True)
    return flops


def run(spec: RunSpec, data_dir: Path, run_dir: Path) -> dict:
    """Train one cell and write run_dir/record.parquet; returns the record."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    cfg = spec.train
    stage = priors.stage_of(spec.prior)
    if spec.trainer.threads:
        torch.set_num_threads(spec.trainer.threads)
    L.seed_everything(spec.seed, workers=True, verbose=False)
    data = tasks.load(spec.task, spec.task_config, data_dir)
    model = build_model(spec, data)
    bcfg = model.backbone.cfg
    n_params, n_nonembed = count_params(model)
    step_flops = flops_per_step(model, cfg.batch_size, data.seq_len)
    L.seed_everything(spec.seed, workers=True, verbose=False)

    def loader(split: str, shuffle: bool) -> DataLoader:
        generator = torch.Generator().manual_seed(spec.seed)
        return DataLoader(TensorDataset(*data.splits[split]), batch_size=cfg.batch_size,
                          shuffle=shuffle, generator=generator, drop_last=shuffle)

    record = {
        "study": spec.study, "task": spec.task, "arch": spec.arch, "size": spec.size,
        "prior": spec.prior, "seed": spec.seed, "stage": stage, "status": "ok",
        "diverged_step": None, "error": "", "n_params": n_params,
        "n_params_nonembed": n_nonembed, "flops_per_step": float(step_flops),
        "pretrain_flops": 0.0, "batch_size": cfg.batch_size, "seq_len": data.seq_len,
        "depth": bcfg.depth, "width": bcfg.width, "heads": bcfg.heads, "d_ff": bcfg.d_ff,
        "lr": cfg.lr, "warmup_steps": cfg.warmup_steps, "norm": cfg.norm, "protocol": cfg.protocol,
        "upstream_loss": math.nan, "precision": spec.trainer.precision,
        "torch_version": torch.__version__, "package_version": __version__,
        "git_rev": git_rev(), "config_hash": spec.config_hash(),
    }
    trainer = make_trainer(spec, run_dir)
    start = time.perf_counter()
    metrics: dict[str, float] = {}
    try:
        trainer.fit(model, loader("train", True), loader("val", False))
        wall = time.perf_counter() - start
        metrics["train_loss"] = float(trainer.callback_metrics.get("train_loss", math.nan))
        if model.diverged_step is None:
            metrics.update(trainer.validate(model, loader("val", False), verbose=False)[0])
            metrics.update(trainer.test(model, loader("test", False), verbose=False)[0])
            status = "ok"
        else:
            status = "diverged"
        error = ""
    except Exception as err:  # a run that crashes is data too: record it
        wall = time.perf_counter() - start
        status, error = "failed", "".join(traceback.format_exception_only(err)).strip()
        traceback.print_exc()
    steps = trainer.global_step
    record.update(
        status=status, error=error, diverged_step=model.diverged_step, steps=steps,
        tokens_seen=model.tokens_seen, train_flops=float(step_flops) * steps,
        train_loss=metrics.get("train_loss", math.nan),
        val_loss=float(metrics.get("val_loss", math.nan)),
        val_acc=float(metrics.get("val_acc", math.nan)),
        test_acc=float(metrics.get("test_acc", math.nan)),
        wall_seconds=wall, tokens_per_second=model.tokens_seen / wall if wall else math.nan,
        device=str(trainer.strategy.root_device),
    )
    write_record(record, run_dir / "record.parquet")
    return record
