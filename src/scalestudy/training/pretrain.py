"""The pretraining stages' runs (stages.py): masked denoising (or next-token
prediction on a causal backbone) on a corpus, keeping the checkpoint with the
best validation loss, which the finetuning runs of the stage's priors load.

- spt, spt_causal (Amos et al. 2023, "Never Train from Scratch"):
  self-pretraining on the task's own training split, masking each real token
  independently at the task's ratio (its data manifest's, from the task
  registry), or in spans of a given mean length;
- upstream (Tay et al. 2022): masked-LM pretraining on the upstream corpus
  (tasks/upstream.py, the stage's 15% masking); its held-out masked-token loss
  (on the validation split, best checkpoint) is the run's `upstream_loss`,
  the y of alpha_U.

The model is training/masked_lm.py's; `run_pretrain` builds the run's recipe
(training/run.py's Recipe) and hands it to `execute`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import torch

from .. import tasks
from ..models import build_backbone
from ..models.layers import fixed_length
from ..records import data_checksum
from ..study.specs import PretrainSpec
from ..tasks import upstream
from ..tasks.contract import BYTES
from .data import has_padding
from .loop import BEST, evaluate
from .masked_lm import MaskedLM
from .run import Recipe, execute


@dataclass
class Corpus:
    splits: dict  # split -> (token ids [N, seq_len],)
    vocab_size: int
    seq_len: int
    mask_ratio: float
    label: str  # what the text is, for the record's task_data
    vocab: str  # what the ids mean (tasks.contract: bytes, pixels, listops)


def corpus(spec: PretrainSpec, data_dir: Path) -> Corpus:
    """The pretraining corpus: the task's data contract for a stage on the
    task's own data (the masking ratio its manifest's; both documents of a
    pair task are sequences), else the upstream corpus."""
    stage = spec.stage
    if stage.on_task:
        data = tasks.load(spec.corpus, spec.corpus_config, data_dir)
        return Corpus({split: (torch.cat(tensors[:-1]),) for split, tensors in data.splits.items()},
                      data.vocab_size, data.seq_len, stage.mask_ratio or data.mask_ratio,
                      data.label, data.vocab)
    cfg = upstream.config_from(spec.corpus_config)
    data = upstream.load(cfg, data_dir)
    return Corpus({split: (tokens,) for split, tokens in data.splits.items()},
                  data.vocab_size, data.seq_len, stage.mask_ratio,
                  f"upstream corpus ({cfg.source})", BYTES)


def run_pretrain(spec: PretrainSpec, data_dir: Path, out_dir: Path,
                 trunk: Path | None = None) -> dict:
    """Pretrain one backbone; writes best.ckpt, last.ckpt, metrics.csv and a
    run record (its stage and prior the stage's name) into out_dir. A
    budgeted run trains its budget's steps; `trunk`: a wsd branch's trunk
    directory (training/branches.py), else the one beside out_dir."""
    return execute(spec, lambda: recipe(spec, data_dir, Path(out_dir)), out_dir, trunk)


def recipe(spec: PretrainSpec, data_dir: Path, out_dir: Path) -> Recipe:
    """The stage's recipe: its corpus, the masked LM on it, and the held-out
    loss of its best checkpoint."""
    stage = spec.stage
    cfg = stage.schedule(spec.train)
    text = corpus(spec, data_dir)
    backbone = build_backbone(spec.arch, spec.size, text.vocab_size, text.seq_len,
                              norm=cfg.norm, dropout=cfg.dropout, protocol=cfg.protocol,
                              causal=cfg.causal, token_outputs=True)
    if not has_padding(t for tensors in text.splits.values() for t in tensors):
        fixed_length(backbone)
    model = MaskedLM(backbone, text.vocab_size, text.mask_ratio, spec.span, spec.seed,
                     vocab=text.vocab)

    def best_held_out_loss(loop) -> dict:  # the best checkpoint's validation loss
        best = torch.load(out_dir / BEST, map_location="cpu", weights_only=True)
        model.load_state_dict(best["state_dict"])
        held_out = evaluate(loop.fabric, model, loop.val_loader, "val")["val_loss"]
        return {"val_loss": held_out,
                "upstream_loss": held_out if stage.measures_upstream_loss else math.nan}

    return Recipe(model, cfg, text.splits, text.seq_len,
                  {"task_data": text.label, "data_checksum": data_checksum(data_dir)},
                  best_held_out_loss,
                  name=f"{spec.kind} pretraining of {spec.arch} at size {spec.size}",
                  keep_best=True)
