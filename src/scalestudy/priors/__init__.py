"""Initialisation priors: what a run starts from before it trains on its task.

Each prior is one object that owns everything it does to a run: the record's
stage, the schedule it forces (`schedule`: the Fixup priors remove LayerNorm
and warm-up), the pretraining stage (stages.py) whose checkpoint it loads or
whose compute it matches, how it initialises the backbone (`initialise`) and
how it lengthens the schedule (`match_compute`). The training run
(scalestudy.training.task_run) calls these hooks and never asks which prior it
has, so a new prior is one entry of `PRIORS` (with a class of its own where it
needs hooks of its own) and its tests.

- random: the architecture's own initialisation; pre-LN; warm-up.
- random_noln: the same initialisation with LayerNorm removed and no warm-up:
  the recipe the Fixup priors repair, their control (Xu et al. 2021).
- tfixup: LayerNorm removed, T-Fixup init (Huang et al. 2020); no warm-up.
- dtfixup: LayerNorm removed, DT-Fixup init (Xu et al. 2021); no warm-up.
- spt: finetune from self-pretraining on the task's own train split
  (Amos et al. 2023); fresh head, fresh optimiser. The denoising objective is
  masked tokens, or next-token prediction when the study's backbones are
  causal (train.causal).
- random_causal: random with the backbone made causal for this prior alone,
  the control of a causal finetuning (spt_causal_causal; spt_causal on S4).
- spt_causal: self-pretraining by next-token prediction on a causal backbone
  (Amos et al.'s causal denoising objective: its stage spt_causal forces the
  causal backbone), then finetuning with the study's own backbone
  (train.causal, bidirectional by default), as the authors' README recipe
  does (IdoAmos/not-from-scratch: pretraining with `model.layer.causal=true`,
  finetuning from that checkpoint with the task's own config). Where the
  causal backbone does not have the bidirectional one's weights
  (architectures.py: the SSMs, whose bidirectional layer holds a second
  kernel), it finetunes causally, as their SSM configs must (a causal
  pretraining config there sets `bidirectional: false`, and a bidirectional
  DSS kernel has twice the channels). A study can hold both objectives side
  by side (spt with train.causal false is the masked one).
- spt_causal_causal: spt_causal's pretraining, finetuned causal too (the
  variant before the paper's recipe was the default; random_causal its control).
- upstream: finetune from masked-LM pretraining on the upstream corpus
  (Tay et al. 2022).
- scratch_matched: random init trained for as many FLOPs as spt's
  pretraining plus finetuning spent (this project's compute-matched control
  of SPT).

The record of a finetuning run says both causal flags (`pretrain_causal`, its
pretraining run's backbone; `causal`, its own) and which pretraining run it
started from (`pretrain_seed`: pretrain.seed, or its own seed with
pretrain.seeds: per_seed).

Each prior also has its line style and marker fill in every figure (the
marker's shape and colour stay the architecture's, but where a panel's lines
are priors: its colour and marker there follow from its place in this
registry, analysis/figures/style.py `prior_mark`). This module imports no
torch (the workflow reads it when it builds the DAG); the hooks that need
torch import it from their own modules beside it, inside the hook: fixup.py
(T-Fixup, DT-Fixup) and transfer.py (a pretraining checkpoint's backbone).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..architectures import ARCHITECTURES
from ..registry import Registry
from ..stages import BEST_CHECKPOINT, FINETUNE, SCRATCH, STAGES


@dataclass(frozen=True)
class Prior:
    """The random prior, and the hooks every prior has (each a no-op here)."""

    name: str
    stage: str = SCRATCH  # the record's stage for the task run
    norm: str | None = None  # forced LayerNorm placement; None = the study's train.norm
    warmup: bool = True  # keeps the study's learning-rate warm-up
    causal: bool | None = None  # forced causal backbone; None = the study's train.causal
    pretrain: str | None = None  # the pretraining stage whose checkpoint it loads
    matched_to: str | None = None  # the pretraining stage whose compute it matches
    linestyle: Any = "-"  # in every figure
    fillstyle: str = "full"

    def __post_init__(self) -> None:
        for stage in (self.pretrain, self.matched_to):
            if stage is not None:
                STAGES[stage]  # noqa: B018 (a stage of the registry, or UnknownName)

    @property
    def needs(self) -> str | None:
        """The pretraining stage the run depends on (weights or compute)."""
        return self.pretrain or self.matched_to

    @property
    def style(self) -> dict:
        return {"linestyle": self.linestyle, "fillstyle": self.fillstyle}

    def schedule(self, cfg, arch: str | None = None):
        """The run's TrainConfig under this prior for architecture `arch`
        (LayerNorm placement, warm-up, causal backbone); its pretraining stage
        trains the same backbone, causal where the stage forces it."""
        if self.norm is not None:
            cfg = dataclasses.replace(cfg, norm=self.norm)
        if self.causal is not None:
            cfg = dataclasses.replace(cfg, causal=self.causal)
        if not self.warmup:
            cfg = dataclasses.replace(cfg, warmup_steps=0)
        return cfg

    def load(self, pretrained: Path | None) -> dict | None:
        """The pretraining checkpoint this prior starts from (None: none)."""
        return None

    def initialise(self, backbone, data, checkpoint: dict | None) -> dict:
        """Initialise `backbone` for `data` (tasks.TaskData); returns a report."""
        return {}

    def match_compute(self, cfg, step_flops: int, pretrain_record: Any):
        """The schedule lengthened to the compute this prior must match."""
        return cfg

    def check_until(self, until: str) -> None:
        """Raises ValueError when this prior cannot follow train.until."""


@dataclass(frozen=True)
class TFixup(Prior):
    def initialise(self, backbone, data, checkpoint):
        from . import fixup

        return fixup.apply_tfixup(backbone).as_dict()


@dataclass(frozen=True)
class DTFixup(Prior):
    def initialise(self, backbone, data, checkpoint):
        from . import fixup

        # mu is measured over the whole training split, in chunks.
        train_tokens = data.splits["train"][0]
        return fixup.dtfixup(backbone, train_tokens.split(256), data.pad_id).as_dict()


@dataclass(frozen=True)
class Pretrained(Prior):
    """Finetune every backbone weight from a pretraining stage's best checkpoint."""

    stage: str = FINETUNE

    def schedule(self, cfg, arch=None):
        cfg = super().schedule(cfg, arch)
        # A causal checkpoint whose backbone lacks weights of the bidirectional one
        # (the SSMs' second kernel) can only finetune causally.
        causal_stage = STAGES[self.pretrain].causal
        if (causal_stage and not cfg.causal and arch is not None
                and not ARCHITECTURES[arch].causal_weights_bidirectional):
            cfg = dataclasses.replace(cfg, causal=True)
        return cfg

    def load(self, pretrained):
        from .transfer import load_checkpoint

        return load_checkpoint(Path(pretrained) / BEST_CHECKPOINT)

    def initialise(self, backbone, data, checkpoint):
        from ..models.lm_head import token_embedding
        from .transfer import transfer_backbone

        # Upstream pretraining reads bytes, a task may read its own symbols or
        # pixels: the token table transfers only between the same vocabulary
        # (tasks.contract), and otherwise stays fresh.
        same_vocab = checkpoint["hyper_parameters"].get("vocab") == data.vocab
        fresh = () if same_vocab else (token_embedding(backbone),)
        transfer_backbone(checkpoint["state_dict"], backbone, fresh=fresh)
        return {"loaded": self.pretrain, "token_table_fresh": not same_vocab}


@dataclass(frozen=True)
class ComputeMatched(Prior):
    def match_compute(self, cfg, step_flops, pretrain_record):
        # As many FLOPs as the matched prior's pretraining plus its finetuning
        # (the same model and schedule as this run's, so the same step cost).
        self.check_until(cfg.until)
        extra = math.ceil(float(pretrain_record["train_flops"]) / step_flops)
        return dataclasses.replace(cfg, max_steps=cfg.max_steps + extra)

    def check_until(self, until):
        # A run stopped at its plateau has no budget fixed in advance to match.
        if until != "max_steps":
            raise ValueError(
                f"train.until: {until!r} cannot be matched by prior {self.name}, which trains "
                f"for the fixed budget of {self.matched_to}'s pretraining plus finetuning; "
                f"accepted with {self.name}: max_steps (or drop {self.name} from the grid)"
            )


PRIORS: Registry[Prior] = Registry("prior", group="scalestudy.priors", entries=[
    Prior("random"),
    Prior("random_noln", norm="none", warmup=False, linestyle=(0, (1, 1)), fillstyle="none"),
    Prior("random_causal", causal=True, linestyle=(0, (5, 1, 1, 1, 1, 1)), fillstyle="none"),
    TFixup("tfixup", norm="none", warmup=False, linestyle=(0, (3, 1.5)), fillstyle="left"),
    DTFixup("dtfixup", norm="none", warmup=False, linestyle=(0, (3, 1.5, 1, 1.5)),
            fillstyle="right"),
    Pretrained("spt", pretrain="spt", linestyle=(0, (7, 2)), fillstyle="bottom"),
    Pretrained("spt_causal", pretrain="spt_causal", linestyle=(0, (7, 2, 1, 2)),
               fillstyle="bottom"),
    Pretrained("spt_causal_causal", pretrain="spt_causal", causal=True,
               linestyle=(0, (7, 2, 1, 2, 1, 2)), fillstyle="bottom"),
    Pretrained("upstream", pretrain="upstream", linestyle=(0, (7, 1.5, 1, 1.5, 1, 1.5)),
               fillstyle="top"),
    ComputeMatched("scratch_matched", matched_to="spt", linestyle=(0, (1, 2.5))),
])
