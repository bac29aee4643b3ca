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
    UNDECIDED,
    Evidence,
    Scope,
    above,
    all_of,
    by_task_arch,
    finished,
    given,
    shown,
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
               control: str, matched: str | None = None) -> list[Scope]:
    """Per task: gap = `first` minus `second` accuracy (mean over shared sizes,
    each size's own printed) under the control prior and under the treatment.
    Needs runs of all four cells (else not enough data, naming them). Premise: a
    gap to close (the control's gap above 0; where not shown the claim is
    undecided, not refuted). The closure, gap(control) - gap(treatment), is
    the weaker one's (`second`'s) gain under the treatment plus the stronger
    one's (`first`'s) loss; the claim, as Amos et al. mean it, is that the
    treatment closes most of the gap by lifting the weaker one: it holds when
    both (a) the gap under the treatment lies below half the control's (half
    gap(control) - gap(treatment) above 0) and (b) the weaker one's gain alone
    closes more than half of it (gain - half gap(control) above 0); it does not
    hold when either lies below 0. With `matched` (a compute-matched control)
    in the grid, the two architectures' changes against it are printed too."""
    runs_t = task_runs(study.runs)
    out = []
    for task in sorted(runs_t["task"].unique()):
        r = runs_t[runs_t["task"] == task]
        missing = _missing(r, [(first, control), (second, control), (first, treatment),
                               (second, treatment)])
        if missing:
            out.append(Scope(task, f"no finished runs of {', '.join(missing)}", NO_DATA))
            continue

        def c(weights, r=r):
            return contrast(r, _cells(weights), **study.boot)

        gap_c = c({(first, control): 1, (second, control): -1})
        gap_t = c({(first, treatment): 1, (second, treatment): -1})
        closed = c({(first, control): 1, (second, control): -1, (first, treatment): -1,
                    (second, treatment): 1})
        gain = c({(second, treatment): 1, (second, control): -1})
        loss = c({(first, control): 1, (first, treatment): -1})
        most = c({(first, control): 0.5, (second, control): -0.5, (first, treatment): -1,
                  (second, treatment): 1})
        by_gain = c({(second, treatment): 1, (second, control): -0.5, (first, control): -0.5})
        parts = [stat_text(gap_c, f"gap under {control}"),
                 stat_text(gap_t, f"gap under {treatment}"),
                 stat_text(closed, "closed") + _share(closed, gap_c, f"of the {control} gap"),
                 stat_text(gain, f"of which {second}'s gain under {treatment}")
                 + _share(gain, closed, "of the closure"),
                 stat_text(loss, f"and {first}'s loss") + _share(loss, closed, "of the closure"),
                 stat_text(most, f"(a) half the {control} gap minus the {treatment} gap"),
                 stat_text(by_gain, f"(b) {second}'s gain minus half the {control} gap")]
        if matched and not _missing(r, [(first, matched), (second, matched)]):
            parts += [stat_text(c({(second, treatment): 1, (second, matched): -1}),
                                f"against {matched}: {second}'s gain"),
                      stat_text(c({(first, treatment): 1, (first, matched): -1}),
                                f"{first}'s change")]
        if len(gap_c.get("per_size") or {}) > 1:
            parts.append(_each_size(most, by_gain, gain, loss, gap_t, first, second,
                                    treatment))
        premise = shown(above(gap_c))
        if premise == UNDECIDED:
            parts.append(f"{PREMISE_NOT_SHOWN}: the gap under {control} is not shown above 0")
        verdict = given(premise, all_of(above(most), above(by_gain)))
        if premise == HOLDS and verdict != HOLDS:
            parts.append(_what_happened(gap_t, gain, loss, closed, first, second, treatment))
        out.append(Scope(task, "; ".join(parts), verdict))
    return out or [Scope("all", "no task runs", NO_DATA)]


def _share(part: dict, whole: dict, of: str) -> str:
    """' (28% of the closure)' where both are estimated and the whole is shown
    positive (its interval above 0: a share of nothing is no share)."""
    if not (np.isfinite(part["estimate"]) and np.isfinite(whole["estimate"])
            and whole["estimate"] > 0 and not whole["low"] <= 0):
        return ""
    return f" ({part['estimate'] / whole['estimate']:.0%} {of})"


def _each_size(most: dict, by_gain: dict, gain: dict, loss: dict, gap_t: dict, first: str,
               second: str, treatment: str) -> str:
    """What each size shows (the verdict is the mean over sizes'): the gap closing
    by the weaker one's gain ((a) and (b) above 0 at that size), closing through
    the stronger one's loss ((a) above 0, the loss above 0 and larger than the
    gain), reversing under the treatment, or nothing shown."""
    said = []
    for size in most["per_size"]:
        a, b = most["per_size"][size], by_gain["per_size"][size]
        g, lost, t = gain["per_size"][size], loss["per_size"][size], gap_t["per_size"][size]
        if a["low"] > 0 and b["low"] > 0:
            what = f"closes most of the gap by {second}'s gain"
        elif a["low"] > 0 and lost["low"] > 0 and lost["estimate"] >= g["estimate"]:
            what = f"closes it through {first}'s loss"
        elif a["low"] > 0:
            what = f"closes most of it, {second}'s share not shown"
        else:
            what = "most of the gap closing not shown"
        if t["high"] < 0:
            what += f", the gap reversed ({first} behind under {treatment})"
        said.append(f"{size}: {what}")
    return "at each size: " + "; ".join(said)


def _what_happened(gap_t: dict, gain: dict, loss: dict, closed: dict, first: str,
                   second: str, treatment: str) -> str:
    """What the treatment did where the claim does not hold: the gap did not close,
    or it closed through the stronger one's loss, or it reversed at some size."""
    said = []
    if not closed["low"] > 0:
        said.append(f"{treatment} is not shown to narrow the gap")
        if gain["high"] < 0:
            said.append(f"{second} does worse under {treatment}")
    elif loss["estimate"] >= gain["estimate"]:
        said.append(f"the gap narrows mostly because {first} does worse under {treatment}, "
                    f"not because {second} does better")
    else:
        said.append(f"{second} gains under {treatment}, but not shown to close most of the gap")
    reversed_ = [size for size, v in (gap_t.get("per_size") or {}).items()
                 if v["high"] < 0]
    if reversed_:
        said.append(f"under {treatment} the gap reverses at {', '.join(reversed_)} "
                    f"({first} behind)")
    return "what happened: " + "; ".join(said)


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
