"""Budgeted runs (grid.budgets) and one run for many budgets (train.schedule wsd).

A budgeted run trains the steps its budget buys (`budgeted`): ceil(budget /
the step's counted FLOPs, training/flops.py), or / its batch_size x seq_len
tokens, its schedule planned to end there: a run scheduled for its budget,
not a longer one cut short.

Under the warmup-stable-decay schedule (Hu et al. 2024, MiniCPM; Hägele et
al. 2024) every budget of a run has the same learning rate up to the step its
own cooldown begins (schedules.Schedule.cooldown_begins: warm-up, then the
peak). So one run serves them all, as Hägele et al. propose: the largest
budget's run, the trunk, saves a checkpoint (`fork_name`) at the step each
smaller budget's cooldown begins (`trunk_forks`), and each smaller budget is a
branch that starts from that checkpoint (its weights, optimiser moments, data
position and random streams) and trains its own cooldown to its own last step,
writing its own record. A branch is then the run a separate wsd run of its
budget would be, step for step (tests/training/test_branches.py checks the records
equal), at the cost of its cooldown alone. Its record counts the whole chain:
steps, tokens and train_flops from step 0 (the trunk's part up to the fork
included), `fork_step` where it left the trunk and `fork_seconds` the trunk's
wall time to there (the branch's own time is wall_seconds - fork_seconds).

A branch resumes like any run: from its own last.ckpt once it has one
(training/resume.py), else from the fork again. Simplified against Hägele et
al.: a linear cooldown (they also try 1 - sqrt); the fork is at the step, not
mid-step, so a budget's steps are rounded up to whole steps as any run's.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

from ..study.grid import budget_label
from ..study.specs import TrainConfig
from .schedules import Schedule


def fork_name(budget: float) -> str:
    """The trunk's checkpoint a branch of `budget` starts from (in the trunk's directory)."""
    return f"fork-b{budget_label(budget)}.ckpt"


def budget_steps(cfg: TrainConfig, flops_per_step: float, seq_len: int) -> int:
    """The optimiser steps a budgeted run trains: ceil(budget / what a step
    costs), its counted FLOPs (budget_unit flops) or batch_size x seq_len
    tokens (tokens, padding included: the step's capacity)."""
    per_step = flops_per_step if cfg.budget_unit == "flops" else cfg.batch_size * seq_len
    return max(1, math.ceil(cfg.budget / per_step))


def budgeted(cfg: TrainConfig, flops_per_step: float, seq_len: int, what: str) -> TrainConfig:
    """`cfg` with the steps its budget buys (unchanged without a budget);
    ValueError naming the run (`what`) when they do not pass its warm-up."""
    if cfg.budget is None:
        return cfg
    steps = budget_steps(cfg, flops_per_step, seq_len)
    if steps <= cfg.warmup_steps:
        raise ValueError(
            f"grid.budgets: {budget_label(cfg.budget)} {cfg.budget_unit} buys {what} {steps} "
            f"steps ({flops_per_step:.3g} counted FLOPs a step), not past its "
            f"{cfg.warmup_steps} warm-up steps; accepted: a budget buying more steps than the "
            f"warm-up")
    return dataclasses.replace(cfg, max_steps=steps)


def cooldown_begins(cfg: TrainConfig) -> int:
    """The step a wsd run of cfg.max_steps steps begins its cooldown at."""
    return Schedule("wsd", cfg.warmup_steps, cfg.max_steps, cfg.decay_fraction).cooldown_begins


def trunk_forks(cfg: TrainConfig, flops_per_step: float, seq_len: int) -> dict[int, list[str]]:
    """A trunk's fork checkpoints by the step it saves them at: where each of
    its branches (cfg.forks, budgets) begins its cooldown."""
    forks: dict[int, list[str]] = {}
    for budget in cfg.forks:
        branch = dataclasses.replace(cfg, budget=float(budget), forks=())
        branch = dataclasses.replace(branch, max_steps=budget_steps(branch, flops_per_step,
                                                                    seq_len))
        forks.setdefault(cooldown_begins(branch), []).append(fork_name(budget))
    return forks


def fork_point(cfg: TrainConfig, trunk: Path | None) -> tuple[Path, int] | None:
    """A branch's start: its trunk's fork checkpoint and the step it was saved
    at; None for a run that is no branch. ValueError when a branch has no trunk."""
    if cfg.branch_of is None:
        return None
    if trunk is None:
        raise ValueError(f"a wsd branch (budget {budget_label(cfg.budget)}) needs its trunk's "
                         f"directory (--trunk: the run of budget {budget_label(cfg.branch_of)})")
    return Path(trunk) / fork_name(cfg.budget), cooldown_begins(cfg)
