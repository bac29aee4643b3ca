"""The claims of Amos, Berant & Gupta 2023, "Never Train from Scratch: Fair
Comparison of Long-Sequence Models Requires Data-Driven Priors" (ICLR 2024,
arXiv:2310.02980): each function measures one claim on a study and decides each
scope; the architectures and priors it is about are its parameters (the claim
registry's entry, claims/__init__.py).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...priors import PRIORS
from ...stages import STAGES
from ..fits import size_order, task_runs
from .check import (
    HOLDS,
    NO_DATA,
    PREMISE_NOT_SHOWN,
    Evidence,
    Scope,
    above,
    all_of,
    by_task_arch,
    finished,
    given,
    stat_text,
    stats_text,
)
from .contrasts import contrast, mean_difference


def _cells(weights: dict[tuple[str, str], float]) -> dict:
    return {f"{a}/{p}": ({"arch": a, "prior": p}, w) for (a, p), w in weights.items()}


def _missing(runs: pd.DataFrame, cells: list[tuple[str, str]]) -> list[str]:
    """The (arch, prior) cells without a finished run in `runs`, as 'arch/prior'."""
    have = set(zip(*(finished(runs)[c] for c in ("arch", "prior")), strict=True))
    return [f"{a}/{p}" for a, p in cells if (a, p) not in have]


def gap_closes(study: Evidence, *, first: str, second: str, treatment: str,
               control: str) -> list[Scope]:
    """Per task: gap = `first` minus `second` accuracy (mean over shared sizes)
    under the control prior and under the treatment. Needs runs of all four
    cells (else not enough data, naming them); the premise is a gap to close
    (the control's gap above 0: where it is not shown the claim is undecided,
    not refuted); then it holds when the treatment closes most of it:
    gap(treatment) below half of gap(control), i.e. the interval of
    gap(control) / 2 - gap(treatment) above 0."""
    runs_t = task_runs(study.runs)
    out = []
    for task in sorted(runs_t["task"].unique()):
        r = runs_t[runs_t["task"] == task]
        missing = _missing(r, [(first, control), (second, control), (first, treatment),
                               (second, treatment)])
        if missing:
            out.append(Scope(task, f"no finished runs of {', '.join(missing)}", NO_DATA))
            continue
        gap_c = contrast(r, _cells({(first, control): 1, (second, control): -1}), **study.boot)
        gap_t = contrast(r, _cells({(first, treatment): 1, (second, treatment): -1}),
                         **study.boot)
        most = contrast(r, _cells({(first, control): 0.5, (second, control): -0.5,
                                   (first, treatment): -1, (second, treatment): 1}),
                        **study.boot)
        parts = [stat_text(gap_c, f"gap under {control}"),
                 stat_text(gap_t, f"gap under {treatment}")]
        if np.isfinite(gap_c["estimate"]) and np.isfinite(gap_t["estimate"]):
            closed = gap_c["estimate"] - gap_t["estimate"]
            share = (f" ({closed / gap_c['estimate']:.0%} of the {control} gap)"
                     if gap_c["estimate"] > 0 else "")
            parts.append(f"closed by {closed:.3f}{share}")
        parts.append(stat_text(most, f"half the {control} gap minus the {treatment} gap"))
        premise = above(gap_c)
        if premise not in (HOLDS, NO_DATA):
            parts.append(f"{PREMISE_NOT_SHOWN}: the gap under {control} is not shown above 0")
        out.append(Scope(task, "; ".join(parts), given(premise, above(most))))
    return out or [Scope("all", "no task runs", NO_DATA)]


def beats_control(study: Evidence, *, treatment: str, control: str) -> list[Scope]:
    """Per task and architecture: treatment minus control accuracy, mean over
    shared sizes, above 0."""
    out = []
    for (task, arch), r in by_task_arch(task_runs(study.runs)):
        if not {treatment, control} & set(r["prior"]):
            continue
        c = contrast(r, {treatment: ({"prior": treatment}, 1),
                         control: ({"prior": control}, -1)}, **study.boot)
        out.append(Scope(f"{task} / {arch}", stat_text(c, f"{treatment} - {control}"),
                         above(c)))
    return out or [Scope("all", f"no {treatment} or {control} runs", NO_DATA)]


def beats_control_every_size(study: Evidence, *, treatment: str, control: str) -> list[Scope]:
    """Per task and architecture, at each size: treatment minus control above 0."""
    out = []
    for (task, arch), r in by_task_arch(task_runs(study.runs)):
        if treatment not in set(r["prior"]):
            continue
        ok = finished(r)
        items, verdicts = [], []
        for size in size_order(r):
            at = ok[ok["size"] == size]
            d = mean_difference(at.loc[at["prior"] == treatment, "test_acc"],
                                at.loc[at["prior"] == control, "test_acc"], ci=study.ci)
            items.append((d, size))
            verdicts.append(above(d))
        out.append(Scope(f"{task} / {arch}", f"{treatment} - {control} at {stats_text(items)}",
                         all_of(*verdicts) if verdicts else NO_DATA))
    return out or [Scope("all", f"no {treatment} runs", NO_DATA)]


STUDY_CAUSALITY = "train.causal"  # a prior that forces none: the study's, shared by all such


def _finetune_causal(runs: pd.DataFrame, prior: str):
    """Whether the prior's runs finetuned a causal backbone: the records' `causal`,
    or for records written before it the prior's forced causality (the study's
    train.causal, the same for every prior that forces none)."""
    known = runs.loc[runs["prior"] == prior, "causal"].dropna().unique()
    if len(known) == 1:
        return bool(known[0])
    forced = PRIORS[prior].causal
    return STUDY_CAUSALITY if forced is None else forced


def _objective(runs: pd.DataFrame, prior: str) -> str:
    """The prior's denoising objective: next-token prediction when its pretraining
    was causal (the records' `pretrain_causal`; without it, as for a prior not in
    the grid, the stage's forced causality), masked tokens otherwise."""
    known = runs.loc[runs["prior"] == prior, "pretrain_causal"].dropna().unique()
    if len(known) == 1:
        causal = bool(known[0])
    else:
        causal = STAGES[PRIORS[prior].pretrain].causal
        if causal is None:
            return "masked (next token if train.causal)"
    return "next token" if causal else "masked"


def both_objectives(study: Evidence, *, treatments: tuple[str, ...],
                    controls: tuple[str, ...]) -> list[Scope]:
    """Per task, architecture and objective: each treatment against the control
    that finetunes at its causality (the records' `causal`); every objective of
    `treatments` must hold. A treatment not in the grid has not enough data."""
    out = []
    for (task, arch), r in by_task_arch(task_runs(study.runs)):
        present = [p for p in treatments if p in set(r["prior"])]
        if not present:
            continue
        for prior in treatments:
            scope = f"{task} / {arch} / {_objective(r, prior)}"
            if prior not in present:
                out.append(Scope(scope, f"no runs of {prior}", NO_DATA))
                continue
            causal = _finetune_causal(r, prior)
            matching = [c for c in controls if c in set(r["prior"])
                        and _finetune_causal(r, c) == causal]
            if not matching:
                out.append(Scope(scope, f"no control among {', '.join(controls)} finetuned at "
                                        f"{prior}'s causality ({causal})", NO_DATA))
                continue
            c = contrast(r, {prior: ({"prior": prior}, 1), matching[0]: ({"prior": matching[0]},
                                                                         -1)}, **study.boot)
            out.append(Scope(scope, stat_text(c, f"{prior} - {matching[0]}"), above(c)))
    return out or [Scope("all", f"no runs of {', '.join(treatments)}", NO_DATA)]
