"""The pretraining stages: masked denoising on a corpus, keeping the checkpoint
with the best validation loss.

- spt (Amos et al. 2023, "Never Train from Scratch"): self-pretraining on the
  task's own training split, masking each real token independently at the
  task's ratio (its data manifest's: ListOps 10%, Text and Retrieval 15%,
  Image, Pathfinder and Path-X 50%), or in spans of a given mean length.
- upstream (Tay et al. 2022): masked-LM pretraining on the upstream corpus
  (tasks/upstream.py, 15% masking); its held-out masked-token loss (nats per
  masked token, on the validation split, best checkpoint) is the run's
  `upstream_loss`, the y of alpha_U.

A causal backbone (`train.causal`, or the stage `spt_causal`, which makes it
causal as its prior does) pretrains by next-token prediction instead of masked
denoising. Masked positions take the [MASK] id (Amos et al.; no BERT
80/10/10). Pixel tasks (Image, Pathfinder, Path-X) mask their intensity
tokens with the [MASK] id too (Amos et al. zero the pixel and flag it in an
extra input channel).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F
from lightning.fabric import seed_everything

from . import tasks
from .loop import BEST, Fit, evaluate, make_fabric
from .models import backbone_class, backbone_config
from .models.lm_head import MaskedLMHead
from .priors import SELF_PRETRAINING, get_prior
from .priors.masking import IGNORE_INDEX, causal_lm_targets, mask_tokens
from .records import data_checksum
from .tasks import upstream
from .tasks.contract import BYTES
from .train import (
    StudyModule,
    TrainConfig,
    TrainerConfig,
    fit_and_record,
    flops_per_step,
    parse_section,
    provenance,
    quiet_lightning,
    shard,
    spec_hash,
)

KINDS = (*SELF_PRETRAINING, "upstream")
UPSTREAM_MASK_RATIO = 0.15


@dataclass(frozen=True)
class PretrainSpec:
    study: str
    kind: str  # spt | upstream
    corpus: str  # the task (spt) or "upstream"
    arch: str
    size: str
    seed: int
    corpus_config: dict = field(default_factory=dict)
    span: float | None = None  # mean span length; None = independent tokens
    train: TrainConfig = TrainConfig()
    trainer: TrainerConfig = TrainerConfig()

    @classmethod
    def from_dict(cls, spec: dict) -> PretrainSpec:
        spec = dict(spec)
        spec["train"] = parse_section(TrainConfig, "pretrain", spec.get("train", {}))
        spec["trainer"] = parse_section(TrainerConfig, "trainer", spec.get("trainer", {}))
        made = cls(**spec)
        if made.kind not in KINDS:
            raise ValueError(f"kind: got {made.kind!r}, accepted values: {', '.join(KINDS)}")
        if made.train.val_every > made.train.max_steps:
            raise ValueError(
                f"pretrain.val_every = {made.train.val_every} exceeds pretrain.max_steps = "
                f"{made.train.max_steps}: no validation, so no best checkpoint"
            )
        return made

    def config_hash(self) -> str:
        return spec_hash(self)


class MaskedLM(StudyModule):
    """Backbone + tied masked-LM head, trained to restore masked tokens."""

    def __init__(self, backbone, cfg: TrainConfig, vocab_size: int, mask_ratio: float,
                 span: float | None, seed: int, pad_id: int = 0, mask_id: int = 1,
                 vocab: str = ""):
        super().__init__(backbone, cfg, pad_id)
        self.head = MaskedLMHead(backbone, vocab_size)
        self.vocab_size, self.mask_ratio, self.span = vocab_size, mask_ratio, span
        self.mask_id, self.seed = mask_id, seed
        # Masks are drawn on the CPU from seeded generators, the same on any
        # accelerator; validation redraws the same masks every time.
        self.train_masks = torch.Generator().manual_seed(seed)
        self.val_masks = torch.Generator()
        self.vocab = vocab

    def hyperparameters(self) -> dict:
        """What finetuning needs to rebuild a backbone this checkpoint fits.
        `vocab` names what the ids mean (bytes, pixels, listops: tasks.contract)."""
        bcfg = self.backbone.cfg
        return {"arch": bcfg.arch, "max_len": bcfg.max_len, "vocab_size": self.vocab_size,
                "vocab": self.vocab, "norm": bcfg.norm}

    def masked_loss(self, tokens: torch.Tensor, generator: torch.Generator):
        real = tokens != self.pad_id
        if self.backbone.cfg.causal:  # a causal model learns to predict the next token
            inputs, targets = causal_lm_targets(tokens.cpu(), real.cpu())
        else:
            inputs, targets = mask_tokens(tokens.cpu(), real.cpu(), self.mask_ratio,
                                          self.mask_id, self.vocab_size, generator, self.span)
        inputs, targets = inputs.to(tokens.device), targets.to(tokens.device)
        out = self.backbone(inputs, real)
        logits = self.head(out.hidden)
        if not (targets != IGNORE_INDEX).any():  # nothing masked in this batch
            return logits.sum() * 0.0, out.aux_loss
        loss = F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten(),
                               ignore_index=IGNORE_INDEX)
        return loss, out.aux_loss

    def training_loss(self, batch):
        return self.masked_loss(batch[0], self.train_masks)

    def rng_state(self) -> dict:  # a resumed run draws the masks it would have
        return {**super().rng_state(), "train_masks": self.train_masks.get_state()}

    def set_rng_state(self, state: dict) -> None:
        super().set_rng_state(state)
        self.train_masks.set_state(state["train_masks"])

    def start_evaluation(self) -> None:
        self.val_masks.manual_seed(self.seed + 1)

    def evaluation_sums(self, batch):
        loss, _ = self.masked_loss(batch[0], self.val_masks)
        count = torch.tensor(len(batch[0]), device=loss.device)
        return {"loss": loss.float() * count, "count": count}  # batches weighted by size


@dataclass
class Corpus:
    splits: dict  # split -> (token ids [N, seq_len],)
    vocab_size: int
    seq_len: int
    mask_ratio: float
    label: str  # what the text is, for the record's task_data
    vocab: str  # what the ids mean (tasks.contract: bytes, pixels, listops)


def corpus(spec: PretrainSpec, data_dir: Path) -> Corpus:
    """The pretraining corpus. spt reads the task's data contract (the masking
    ratio is its manifest's; both documents of a pair task are sequences)."""
    if spec.kind in SELF_PRETRAINING:
        data = tasks.load(spec.corpus, spec.corpus_config, data_dir)
        return Corpus({split: (torch.cat(tensors[:-1]),) for split, tensors in data.splits.items()},
                      data.vocab_size, data.seq_len, data.mask_ratio, data.label, data.vocab)
    cfg = upstream.config_from(spec.corpus_config)
    data = upstream.load(cfg, data_dir)
    return Corpus({split: (tokens,) for split, tokens in data.splits.items()},
                  data.vocab_size, data.seq_len, UPSTREAM_MASK_RATIO,
                  f"upstream corpus ({cfg.source})", BYTES)


def run_pretrain(spec: PretrainSpec, data_dir: Path, out_dir: Path) -> dict:
    """Pretrain one backbone; writes best.ckpt, last.ckpt, metrics.csv and a
    run record (stage = spt or upstream) into out_dir."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    cfg = get_prior(spec.kind).schedule(spec.train)  # the backbone its prior finetunes
    if spec.trainer.threads:
        torch.set_num_threads(spec.trainer.threads)
    quiet_lightning()
    fabric = make_fabric(spec.trainer, out_dir)
    seed_everything(spec.seed, verbose=False)
    text = corpus(spec, data_dir)
    splits, vocab_size, seq_len = text.splits, text.vocab_size, text.seq_len
    bcfg = backbone_config(spec.arch, spec.size, vocab_size, seq_len, norm=cfg.norm,
                           dropout=cfg.dropout, protocol=cfg.protocol, causal=cfg.causal,
                           token_outputs=True)
    model = MaskedLM(backbone_class(spec.arch)(bcfg), cfg, vocab_size, text.mask_ratio,
                     spec.span, spec.seed, vocab=text.vocab)
    # One optimiser step of the whole run: every device's batch.
    step_flops = fabric.world_size * flops_per_step(
        model, tuple(t[: cfg.batch_size] for t in splits["train"]))
    model.train_masks.manual_seed(spec.seed)  # counting drew masks: start afresh
    seed_everything(spec.seed, verbose=False)
    record = provenance(spec, cfg, spec.trainer, model, step_flops)
    record.update(task=spec.corpus, task_data=text.label, prior=spec.kind, stage=spec.kind,
                  seq_len=seq_len, data_checksum=data_checksum(data_dir))
    val = shard(fabric, splits["val"], cfg.batch_size, spec.seed, False)
    fit = Fit(fabric, model, cfg, out_dir, spec.config_hash(),
              shard(fabric, splits["train"], cfg.batch_size, spec.seed, True), val,
              keep_best=True)

    def after_fit() -> dict:  # the best checkpoint's validation loss
        best = torch.load(out_dir / BEST, map_location="cpu", weights_only=True)
        model.load_state_dict(best["state_dict"])
        held_out = evaluate(fabric, model, val, "val")["val_loss"]
        return {"val_loss": held_out, "upstream_loss": held_out if spec.kind == "upstream"
                else math.nan}

    return fit_and_record(fit, after_fit, record, out_dir / "record.parquet")
