"""Initialisation priors: what a run starts from before it trains on its task.

`random` is the architecture's own initialisation with the default pre-LN and
learning-rate warm-up; it needs no pretraining stage.
"""

from __future__ import annotations

from ..names import PRIORS


def stage_of(prior: str) -> str:
    """The record's `stage` for the training run of a prior."""
    if prior not in PRIORS:
        raise ValueError(f"prior: unknown {prior!r}, accepted values: {', '.join(PRIORS)}")
    return "scratch"
