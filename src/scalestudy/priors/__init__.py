"""Initialisation priors: what a run starts from before it trains on its task.

Each prior is a row of `PRIORS`: the record's stage, the LayerNorm placement it
forces (the Fixup priors remove LayerNorm), whether it keeps learning-rate
warm-up, and the pretraining stage it needs:

- random: the architecture's own initialisation; pre-LN; warm-up.
- tfixup: LayerNorm removed, T-Fixup init (Huang et al. 2020); no warm-up.
- dtfixup: LayerNorm removed, DT-Fixup init (Xu et al. 2021); no warm-up.
- spt: finetune from self-pretraining on the task's own train split
  (Amos et al. 2023); fresh head, fresh optimiser.
- upstream: finetune from masked-LM pretraining on the upstream corpus
  (Tay et al. 2022).
- scratch_matched: random init trained for as many FLOPs as spt's
  pretraining plus finetuning spent (the compute-matched control of Amos et al.).
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import names


@dataclass(frozen=True)
class Prior:
    name: str
    stage: str  # the record's stage for the task run
    norm: str | None  # forced LayerNorm placement; None = the study's train.norm
    warmup: bool  # keeps the study's learning-rate warm-up
    pretrain: str | None  # the pretraining stage whose checkpoint it loads
    matched_to: str | None = None  # the pretraining stage whose compute it matches


PRIORS: dict[str, Prior] = {
    "random": Prior("random", "scratch", None, True, None),
    "tfixup": Prior("tfixup", "scratch", "none", False, None),
    "dtfixup": Prior("dtfixup", "scratch", "none", False, None),
    "spt": Prior("spt", "finetune", None, True, "spt"),
    "upstream": Prior("upstream", "finetune", None, True, "upstream"),
    "scratch_matched": Prior("scratch_matched", "scratch", None, True, None, "spt"),
}
assert tuple(PRIORS) == names.PRIORS


def get_prior(name: str) -> Prior:
    try:
        return PRIORS[name]
    except KeyError:
        raise ValueError(
            f"prior: unknown {name!r}, accepted values: {', '.join(PRIORS)}"
        ) from None


def needs_pretraining(name: str) -> str | None:
    """The pretraining stage a prior's run depends on (weights or compute)."""
    prior = get_prior(name)
    return prior.pretrain or prior.matched_to
