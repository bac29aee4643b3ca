"""The pretraining stages: what a prior's checkpoint (or compute) comes from.

A stage is one pretraining run per architecture x size (x task, for a stage
that pretrains on the task's own data), shared by every finetuning run that
needs it (`pretrain.seeds: shared`, seed `pretrain.seed`), or one per
finetuning seed (`pretrain.seeds: per_seed`: each finetuning seed starts from
the pretraining run of the same seed, so the intervals over seeds hold the
pretraining's own variance; its runs' directories end in s{seed}). Each entry
says everything the workflow, the training code and the analysis need to know
about it, so that none of them asks for a stage by name:

- `on_task`: pretrain on the task's own training split (self-pretraining,
  Amos et al. 2023), else on the upstream corpus (Tay et al. 2022);
- `causal`: a forced causal backbone (next-token prediction instead of masked
  denoising), None to keep the study's `train.causal`;
- `mask_ratio`: the masking ratio, or None for the task's own ratio (the task
  registry's, after Amos et al.);
- `measures_upstream_loss`: its held-out masked-token loss is the study's
  upstream loss, the y of alpha_U.

Torch-free.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from .registry import Registry

# The checkpoint a stage's run keeps (its best validation loss), which the
# finetuning runs of its priors load.
BEST_CHECKPOINT = "best.ckpt"
UPSTREAM_CORPUS = "upstream"  # the record's `task` of a run on the upstream corpus
# A stage's runs' directories under the study's results, as wildcard patterns.
TASK_DIRECTORY = "pretrain/{stage}/{task}/{arch}/{size}"
UPSTREAM_DIRECTORY = "pretrain/{stage}/{arch}/{size}"
# pretrain.seeds: one pretraining run per cell shared by its seeds, or one per seed.
PRETRAIN_SEEDS = ("shared", "per_seed")

# The record's stage of a task run: trained from scratch, or finetuned from a
# pretraining stage's checkpoint (a pretraining run's stage is its own name).
SCRATCH, FINETUNE = "scratch", "finetune"
TASK_STAGES = (FINETUNE, SCRATCH)


def seeded(pattern: str, per_seed: bool) -> str:
    """A stage's directory pattern, below which a per-seed run has its seed's."""
    return f"{pattern}/s{{seed}}" if per_seed else pattern


@dataclass(frozen=True)
class Stage:
    name: str
    on_task: bool
    causal: bool | None = None
    mask_ratio: float | None = None
    measures_upstream_loss: bool = False

    @property
    def directory(self) -> str:
        """Its runs' directory under the study's results, as a wildcard pattern."""
        pattern = TASK_DIRECTORY if self.on_task else UPSTREAM_DIRECTORY
        return pattern.replace("{stage}", self.name)

    def corpus(self, task: str) -> str:
        """What a run of this stage for `task` pretrains on (its record's task)."""
        return task if self.on_task else UPSTREAM_CORPUS

    def schedule(self, cfg):
        """The pretraining run's train config (a study.specs.TrainConfig)."""
        return cfg if self.causal is None else dataclasses.replace(cfg, causal=self.causal)


STAGES: Registry[Stage] = Registry("stage", [
    Stage("spt", on_task=True),
    Stage("spt_causal", on_task=True, causal=True),
    Stage("upstream", on_task=False, mask_ratio=0.15, measures_upstream_loss=True),
])
