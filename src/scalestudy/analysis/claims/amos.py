"""The claims of Amos, Berant & Gupta 2023, "Never Train from Scratch: Fair
Comparison of Long-Sequence Models Requires Data-Driven Priors" (ICLR 2024,
arXiv:2310.02980).
"""

from __future__ import annotations

import pandas as pd

from ..fits import size_order, task_runs
from .check import (
    AMOS,
    CONTRAST_RULE,
    FAILS,
    HOLDS,
    NO_DATA,
    Check,
    by_task_arch,
    contrast_text,
    contrast_verdict,
    diff_text,
    finished,
)
from .stats import contrast, mean_difference


def gap_under_spt(runs: pd.DataFrame, first: str, second: str, boot: dict):
    """The accuracy gap first - second (mean over shared sizes) under random init
    and under spt, and its reduction (gap under random minus gap under spt): the
    three contrasts and their texts for a claim's measurement."""
    cell = {(first, "random"): 1, (second, "random"): -1, (first, "spt"): -1, (second, "spt"): 1}

    def c(weights):
        return contrast(runs, {f"{a}/{p}": ({"arch": a, "prior": p}, w)
                               for (a, p), w in weights.items()}, **boot)

    gap_random = c({k: v for k, v in cell.items() if k[1] == "random"})
    gap_spt = c({k: -v for k, v in cell.items() if k[1] == "spt"})
    reduction = c(cell)
    parts = [contrast_text(gap_random, "gap under random"),
             contrast_text(gap_spt, "gap under SPT"), contrast_text(reduction, "reduction")]
    return gap_random, gap_spt, reduction, parts



def spt_closes_s4_gap(runs: pd.DataFrame, **boot) -> list[Check]:
    """Amos et al. 2023: self-pretraining closes most of the gap between Transformers
    and S4 on LRA; here per task, in mean test accuracy over shared sizes."""
    base = dict(
        claim="SPT closes the Transformer-S4 gap",
        source=f"{AMOS}, abstract and §3 (LRA with and without self-pretraining, Table 1)",
        rule="gap = S4 minus transformer test accuracy, mean over shared sizes. Holds when "
             "the gap under random init is above 0, the reduction (gap under random minus "
             "gap under SPT) is above 0, and the gap under SPT is not above 0 (its interval "
             f"reaches 0 or below). {CONTRAST_RULE}",
    )
    runs_t = task_runs(runs)
    tasks = sorted(runs_t["task"].unique())
    checks = []
    for task in tasks:
        gap_random, gap_spt, reduction, parts = gap_under_spt(
            runs_t[runs_t["task"] == task], "s4", "transformer", boot)
        if any(x["status"] != "ok" for x in (gap_random, gap_spt, reduction)):
            verdict = NO_DATA
        else:
            verdict = HOLDS if (gap_random["low"] > 0 and reduction["low"] > 0
                                and gap_spt["low"] <= 0) else FAILS
        checks.append(Check(**base, scope=task, measurement="; ".join(parts), verdict=verdict))
    if not checks:
        checks.append(Check(**base, scope="all", measurement="no task runs", verdict=NO_DATA))
    return checks


def spt_beats_matched(runs: pd.DataFrame, **boot) -> list[Check]:
    """Amos et al. 2023: SPT's gain is not just its extra compute; the control is
    random init trained for SPT's pretraining plus finetuning FLOPs."""
    base = dict(
        claim="SPT beats the compute-matched control",
        source=f"{AMOS}: the gains of self-pretraining attributed to the data-driven prior, "
               "not to extra compute (the study's scratch_matched prior is that control)",
        rule=f"SPT minus scratch_matched test accuracy, mean over shared sizes. {CONTRAST_RULE}",
    )
    runs_t = task_runs(runs)
    checks = []
    for (task, arch), r in by_task_arch(runs_t):
        if not {"spt", "scratch_matched"} & set(r["prior"]):
            continue
        c = contrast(r, {"spt": ({"prior": "spt"}, 1),
                         "control": ({"prior": "scratch_matched"}, -1)}, **boot)
        checks.append(Check(**base, scope=f"{task} / {arch}",
                            measurement=contrast_text(c, "SPT - control"),
                            verdict=contrast_verdict(c)))
    if not checks:
        checks.append(Check(**base, scope="all", measurement="no spt or scratch_matched runs",
                            verdict=NO_DATA))
    return checks



def _per_size_gain(r: pd.DataFrame, prior: str, control: str, boot: dict) -> tuple[str, str]:
    """(measurement, verdict) of `prior` minus `control` accuracy at every size of `r`:
    holds when every size's interval lies above 0."""
    ok = finished(r)
    parts, verdicts = [], []
    for size in size_order(r):
        at = ok[ok["size"] == size]
        d = mean_difference(at.loc[at["prior"] == prior, "test_acc"],
                            at.loc[at["prior"] == control, "test_acc"], **boot)
        parts.append(diff_text(d, size))
        verdicts.append(NO_DATA if d["status"] != "ok" else HOLDS if d["low"] > 0 else FAILS)
    verdict = (FAILS if FAILS in verdicts else NO_DATA if NO_DATA in verdicts or not verdicts
               else HOLDS)
    return "; ".join(parts) or "no sizes", verdict


def spt_beats_random_every_size(runs: pd.DataFrame, **boot) -> list[Check]:
    """Amos et al. 2023: self-pretraining improves over random initialisation at
    every model size, not only on average."""
    base = dict(
        claim="SPT beats random init at every model size",
        source=f"{AMOS}, §3-4 (SPT against training from scratch across models and sizes; "
               "the model-size study)",
        rule="per task and architecture, at each size of the grid: spt minus random test "
             "accuracy, percentile bootstrap resampling each cell's runs (two runs per cell). "
             "Holds when the interval lies above 0 at every size; does not hold when at some "
             "size it lies below 0 or contains 0; otherwise not enough data (a size without "
             "runs of both priors or a single run)",
    )
    runs_t = task_runs(runs)
    checks = []
    for (task, arch), r in by_task_arch(runs_t):
        if "spt" not in set(r["prior"]):
            continue
        text, verdict = _per_size_gain(r[r["prior"].isin(["spt", "random"])], "spt",
                                       "random", boot)
        checks.append(Check(**base, scope=f"{task} / {arch}", verdict=verdict,
                            measurement="spt - random at " + text))
    if not checks:
        checks.append(Check(**base, scope="all", measurement="no spt runs", verdict=NO_DATA))
    return checks


def structure_redundant_under_spt(runs: pd.DataFrame, **boot) -> list[Check]:
    """Amos et al. 2023: under SPT the structured SSM parameterisation is mostly
    redundant: structured and unstructured S4 are close, from scratch they are not."""
    base = dict(
        claim="SPT makes the structured S4 parameterisation mostly redundant",
        source=f"{AMOS}, §5 (the role of explicitly structured priors: S4 against its "
               "variants without the structured initialisation, with and without SPT)",
        rule="gap = s4 (S4D-Lin) minus s4_unstructured (random A) test accuracy, mean over "
             "shared sizes, under random and under spt. Holds when the reduction (gap under "
             f"random minus gap under spt) lies above 0. {CONTRAST_RULE}",
    )
    runs_t = task_runs(runs)
    checks = []
    for task in sorted(runs_t["task"].unique()):
        _, _, reduction, parts = gap_under_spt(
            runs_t[runs_t["task"] == task], "s4", "s4_unstructured", boot)
        checks.append(Check(**base, scope=task, measurement="; ".join(parts),
                            verdict=contrast_verdict(reduction)))
    if not checks:
        checks.append(Check(**base, scope="all", measurement="no task runs", verdict=NO_DATA))
    return checks


SPT_OBJECTIVES = {  # prior -> (its control, the denoising objective)
    "spt": ("random", "masked (next token if train.causal)"),
    "spt_causal": ("random_causal", "next token (causal backbone)"),
}


def spt_works_with_both_objectives(runs: pd.DataFrame, **boot) -> list[Check]:
    """Amos et al. 2023: SPT helps with either denoising objective, masked
    (bidirectional models) and causal next-token prediction (causal models)."""
    base = dict(
        claim="SPT works with both denoising objectives",
        source=f"{AMOS}, §3 (the self-pretraining objectives: masked denoising for "
               "bidirectional models, causal denoising for causal ones)",
        rule="per task, architecture and objective, SPT against its own control at the "
             "same causality: spt (masked) minus random, spt_causal (next token) minus "
             f"random_causal; test accuracy, mean over shared sizes. {CONTRAST_RULE}. "
             "The claim holds where both objectives' rows hold; an objective whose priors "
             "are not in the grid has not enough data",
    )
    runs_t = task_runs(runs)
    checks = []
    for (task, arch), r in by_task_arch(runs_t):
        if not set(SPT_OBJECTIVES) & set(r["prior"]):
            continue
        for prior, (control, objective) in SPT_OBJECTIVES.items():
            c = contrast(r, {prior: ({"prior": prior}, 1), control: ({"prior": control}, -1)},
                         **boot)
            checks.append(Check(**base, scope=f"{task} / {arch} / {objective}",
                                measurement=contrast_text(c, f"{prior} - {control}"),
                                verdict=contrast_verdict(c)))
    if not checks:
        checks.append(Check(**base, scope="all", measurement="no spt or spt_causal runs",
                            verdict=NO_DATA))
    return checks
