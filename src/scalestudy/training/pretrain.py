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

The model is training/masked_lm.py's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import torch

from .. import tasks
from ..models import backbone_class, backbone_config
from ..models.layers import fixed_length
from ..records import data_checksum
from ..study.specs import PretrainSpec
from ..tasks import upstream
from ..tasks.contract import BYTES
from .branches import budgeted
from .data import has_padding
from .loop import BEST, evaluate
from .masked_lm import MaskedLM
from .run import job_errors, start, step_flops, train_and_record


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


@job_errors
def run_pretrain(spec: PretrainSpec, data_dir: Path, out_dir: Path,
                 trunk: Path | None = None) -> dict:
    """Pretrain one backbone; writes best.ckpt, last.ckpt, metrics.csv and a
    run record (its stage and prior the stage's name) into out_dir. A
    budgeted run trains its budget's steps; `trunk`: a wsd branch's trunk
    directory (training/branches.py)."""
    out_dir = Path(out_dir)
    stage = spec.stage
    cfg = stage.schedule(spec.train)
    fabric = start(spec, out_dir)
    text = corpus(spec, data_dir)
    bcfg = backbone_config(spec.arch, spec.size, text.vocab_size, text.seq_len, norm=cfg.norm,
                           dropout=cfg.dropout, protocol=cfg.protocol, causal=cfg.causal,
                           token_outputs=True)
    backbone = backbone_class(spec.arch)(bcfg)
    if not has_padding(t for tensors in text.splits.values() for t in tensors):
        fixed_length(backbone)
    model = MaskedLM(backbone, text.vocab_size, text.mask_ratio, spec.span, spec.seed,
                     vocab=text.vocab)
    # The steps it trains, from a step's FLOPs counted on the built model.
    flops = step_flops(fabric, model, text.splits["train"], cfg.batch_size,
                       spec.trainer.micro_batch)
    cfg = budgeted(cfg, flops, text.seq_len,
                   f"{spec.kind} pretraining of {spec.arch} at size {spec.size}")
    record = {"task": spec.corpus, "task_data": text.label, "prior": spec.kind,
              "stage": spec.kind, "seq_len": text.seq_len, "data_checksum": data_checksum(data_dir)}

    def after_training(loop) -> dict:  # the best checkpoint's validation loss
        best = torch.load(out_dir / BEST, map_location="cpu", weights_only=True)
        model.load_state_dict(best["state_dict"])
        held_out = evaluate(fabric, model, loop.val_loader, "val")["val_loss"]
        return {"val_loss": held_out,
                "upstream_loss": held_out if stage.measures_upstream_loss else math.nan}

    return train_and_record(fabric, spec, model, cfg, text.splits, out_dir, record,
                            after_training, flops=flops, keep_best=True, trunk=trunk)
