"""Training one grid cell, ending in one run record.

`RunSpec` is everything a run depends on (the workflow passes it as JSON);
its `trainer` section gives Lightning Fabric (scalestudy.loop) the accelerator,
devices, strategy and precision, so the same code runs on a CPU, one GPU or
many. `StudyModule` holds what every stage's model shares (optimiser,
schedule, token count); `Classifier` is the task stage, `pretrain.MaskedLM`
the pretraining one; `fit_and_record` runs the loop and writes the record.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import subprocess
import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from lightning.fabric import Fabric, seed_everything
from torch.optim.lr_scheduler import LambdaLR
from torch.utils.data import DistributedSampler, TensorDataset
from torchdata.stateful_dataloader import StatefulDataLoader

from . import __version__, resume, tasks
from .flops import count_flops, count_params
from .loop import Diverged, Fit, evaluate, make_fabric
from .models import backbone_class, backbone_config
from .models.heads import ClassifierHead
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
    # validation loss's plateau (`loop.Fit.validate`), max_steps then being the cap.
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


class StudyModule(torch.nn.Module):
    """What every training stage's model shares: AdamW with warm-up + cosine
    decay, the S4 parameter group, the token count and the RNG streams a
    checkpoint keeps. The loop (scalestudy.loop) calls:

    - `training_loss(batch) -> (loss, aux_loss)`, defined by subclasses;
    - `evaluation_sums(batch) -> {name: sum over the batch, "count": examples}`;
    - `start_evaluation()` before each pass over a split.
    """

    def __init__(self, backbone: torch.nn.Module, cfg: TrainConfig, pad_id: int = 0):
        super().__init__()
        self.backbone, self.cfg, self.pad_id = backbone, cfg, pad_id

    def training_loss(self, batch) -> tuple[torch.Tensor, torch.Tensor]:
        raise NotImplementedError

    def evaluation_sums(self, batch) -> dict[str, torch.Tensor]:
        raise NotImplementedError

    def start_evaluation(self) -> None:
        """Called before each evaluation pass (pretraining redraws its masks)."""

    def count_tokens(self, batch) -> int:
        """The real (non-padding) tokens of a training batch."""
        return int((batch[0] != self.pad_id).sum())

    def hyperparameters(self) -> dict:
        """What a checkpoint needs to rebuild this model elsewhere (finetuning)."""
        return {}

    def rng_state(self) -> dict:
        """The random streams a resumed run restores (dropout's: torch's global)."""
        return {"torch": torch.get_rng_state(),
                "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else []}

    def set_rng_state(self, state: dict) -> None:
        torch.set_rng_state(state["torch"])
        if state["cuda"] and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(state["cuda"])

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

    def configure_optimizer(self) -> tuple[torch.optim.Optimizer, LambdaLR]:
        """AdamW and its per-step schedule (warm-up, then cosine decay)."""
        cfg = self.cfg
        groups = self.parameter_groups()
        optimizer = torch.optim.AdamW(groups, lr=cfg.lr, weight_decay=cfg.weight_decay,
                                      fused=fused_adamw(groups))
        return optimizer, LambdaLR(optimizer, warmup_cosine(cfg.warmup_steps, cfg.max_steps))


class Classifier(StudyModule):
    """Backbone + pooled classifier head, trained with cross-entropy. A batch
    is (tokens, labels), or (tokens, tokens2, labels) for a pair task: both
    documents go through the backbone in one call (stacked along the batch)
    and the head combines them."""

    def __init__(self, backbone: torch.nn.Module, head: torch.nn.Module, cfg: TrainConfig,
                 n_classes: int, pad_id: int = 0):
        super().__init__(backbone, cfg, pad_id)
        self.head, self.n_classes = head, n_classes

    def forward(self, *docs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        tokens = torch.cat(docs) if len(docs) > 1 else docs[0]
        out = self.backbone(tokens, tokens != self.pad_id)
        return self.head(out.hidden, out.mask), out.aux_loss

    def training_loss(self, batch):
        *docs, labels = batch
        logits, aux_loss = self(*docs)
        return F.cross_entropy(logits, labels), aux_loss

    def evaluation_sums(self, batch):
        *docs, labels = batch
        logits, _ = self(*docs)
        return {"loss": F.cross_entropy(logits.float(), labels, reduction="sum"),
                "acc": (logits.argmax(-1) == labels).sum(),
                "count": torch.tensor(len(labels), device=labels.device)}


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


def loader(tensors: tuple, batch_size: int, seed: int, shuffle: bool, rank: int = 0,
           replicas: int = 1) -> StatefulDataLoader:
    """Batches of `tensors`, this rank's shard of them. Shuffled, each epoch's
    order is a function of (seed, epoch) alone (DistributedSampler's; the loop
    sets the epoch) and a checkpoint keeps the loader's place in its epoch
    (torchdata's StatefulDataLoader), so a resumed run sees the batches it would
    have seen. Not shuffled, the split in order (under DDP each rank a strided
    shard, the last padded by repeats, as Lightning's Trainer shards it)."""
    dataset = TensorDataset(*tensors)
    order = None
    if shuffle or replicas > 1:
        order = DistributedSampler(dataset, num_replicas=replicas, rank=rank, seed=seed,
                                   shuffle=shuffle)
    # Its own generator: creating an iterator draws a seed from it, not from
    # torch's global RNG (dropout's), which a resumed run restores.
    return StatefulDataLoader(dataset, batch_size=batch_size, sampler=order,
                              generator=torch.Generator().manual_seed(seed),
                              drop_last=shuffle and len(dataset) > batch_size * replicas)


def shard(fabric: Fabric, tensors: tuple, batch_size: int, seed: int,
          shuffle: bool) -> StatefulDataLoader:
    """`loader` for this rank of the run's Fabric."""
    return loader(tensors, batch_size, seed, shuffle, fabric.global_rank, fabric.world_size)


def flops_per_step(module: StudyModule, batch: tuple) -> int:
    """Counted forward+backward FLOPs of one training step on `batch`."""

    def step():
        loss, aux_loss = module.training_loss(batch)
        (loss + aux_loss).backward()

    flops = count_flops(step)
    module.zero_grad(set_to_none=True)
    return flops


METRICS = ("train_loss", "val_loss", "val_acc", "test_acc", "upstream_loss")


def fit_and_record(fit: Fit, after_fit: Callable[[], dict], record: dict, path: Path) -> dict:
    """Fit (from the run's own last.ckpt if a killed attempt left one), then
    evaluate with `after_fit` (logged to metrics.csv too), and write the run
    record atomically: ok, diverged (non-finite loss) or failed (an exception,
    recorded with it). Stopped by SIGTERM or USR1: checkpoint saved, no
    record, exit 143 (loop.Preempted)."""
    fabric = fit.fabric
    metrics: dict[str, float] = {}
    status, error = "ok", ""
    resume_from = resume.resume_point(path.parent, record["config_hash"])
    try:
        if resume_from:
            print(f"resuming from {resume_from}", flush=True)
            resume.keep_history(path.parent)
            fit.resume(resume_from)
        fit.run()
        metrics["train_loss"] = fit.train_loss
        evaluated = after_fit()
        fabric.log_dict(evaluated, step=fit.step)
        metrics.update(evaluated)
    except Diverged:
        status = "diverged"  # at fit.diverged_step; the last finite loss logged stays
        metrics["train_loss"] = fit.train_loss
    except Exception as err:  # a run that crashes is data too: record it
        status, error = "failed", error_line(err)
        traceback.print_exc()
    finally:
        for logger in fabric.loggers:
            logger.finalize("success")
    wall = fit.elapsed()
    # Every device's tokens (DDP: each rank counted its own shard's).
    tokens = int(fabric.all_reduce(torch.tensor(fit.tokens_seen, device=fabric.device),
                                    reduce_op="sum"))
    record.update(
        status=status, error=error, diverged_step=fit.diverged_step,
        stopped_by=fit.stopped_by,
        steps=fit.step, tokens_seen=tokens, train_flops=record["flops_per_step"] * fit.step,
        wall_seconds=wall, tokens_per_second=tokens / wall if wall else math.nan,
        device=str(fabric.device),
        **{k: float(metrics.get(k, record.get(k, math.nan))) for k in METRICS},
    )
    if fabric.is_global_zero:
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
    quiet_lightning()
    fabric = make_fabric(spec.trainer, run_dir)
    seed_everything(spec.seed, verbose=False)
    data = tasks.load(spec.task, spec.task_config, data_dir)
    cfg = prior.schedule(spec.train)
    model, report = build_classifier(spec, cfg, data, pretrained)
    if report:
        print(f"prior {spec.prior}: {report}")
    train_tensors = data.splits["train"]
    # One optimiser step of the whole run: every device's batch.
    step_flops = fabric.world_size * flops_per_step(
        model, tuple(t[: cfg.batch_size] for t in train_tensors))
    cfg = model.cfg = prior.match_compute(cfg, step_flops, pretrain_record)
    seed_everything(spec.seed, verbose=False)
    record = provenance(spec, cfg, spec.trainer, model, step_flops)
    record.update(task=spec.task, task_data=data.label, prior=spec.prior, stage=prior.stage,
                  seq_len=data.seq_len, data_checksum=data_checksum(data_dir))
    if prior.pretrain:
        record.update(pretrain_flops=float(pretrain_record["train_flops"]),
                      upstream_loss=float(pretrain_record["upstream_loss"]))
    val = shard(fabric, data.splits["val"], cfg.batch_size, spec.seed, False)
    fit = Fit(fabric, model, cfg, run_dir, spec.config_hash(),
              shard(fabric, train_tensors, cfg.batch_size, spec.seed, True), val)

    def after_fit() -> dict:
        test = shard(fabric, data.splits["test"], cfg.batch_size, spec.seed, False)
        return {**fit.final_validation(), **evaluate(fabric, model, test, "test")}

    return fit_and_record(fit, after_fit, record, run_dir / "record.parquet")
