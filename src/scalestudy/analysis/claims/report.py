"""claims.md: a summary of the claims' verdicts, the runs by status and what
their intervals hold, then each claim with its source, decision rule, verdict and
its scopes' checks.
"""

from __future__ import annotations

import pandas as pd

from ...records import STATUSES
from ..options import ClaimsOptions
from ..tables import markdown
from .check import COMBINE_RULES, VERDICTS

TITLE = "# Claims checked"


def is_claims_report(path) -> bool:
    """Whether the file at `path` is a claims.md this module wrote (one
    `scalestudy claims` may replace)."""
    from pathlib import Path

    try:
        with open(Path(path), errors="replace") as f:
            return f.readline().startswith(TITLE)
    except OSError:
        return False


def runs_markdown(runs: pd.DataFrame) -> list[str]:
    """claims.md's count of the runs by status, and every run that diverged or
    failed (left out of every fit and claim), so none is a silent gap."""
    counts = runs["status"].value_counts()
    out = ["## Runs", "", ", ".join(f"{int(counts.get(s, 0))} {s}" for s in STATUSES)
           + "; only `ok` runs enter the fits and claims.", ""]
    bad = runs[runs["status"] != "ok"]
    if len(bad):
        detail = bad["diverged_step"].map(lambda v: "" if pd.isna(v) else f"at step {int(v)}")
        detail = detail.where(bad["status"] == "diverged", bad["error"].fillna(""))
        table = bad[["stage", "task", "arch", "size", "prior", "seed", "status"]].assign(
            detail=detail.str.slice(0, 120))
        out += [markdown(table), ""]
    return out + _plateau_markdown(runs[runs["status"] == "ok"]) + pretraining_markdown(runs)


def pretraining_markdown(runs: pd.DataFrame) -> list[str]:
    """Whether the finetuning runs' intervals hold the pretraining's variance: each
    finetuning seed with its own pretraining run (pretrain.seeds: per_seed), or
    every seed of a cell sharing one (shared), per the records' pretrain_seed."""
    tuned = runs[(runs["stage"] == "finetune") & (runs["status"] == "ok")]
    if tuned.empty:
        return []
    if "pretrain_seed" not in tuned or tuned["pretrain_seed"].isna().all():
        return ["The finetuning runs' records do not say which pretraining run each started "
                "from (written before the pretrain_seed field): their intervals over seeds "
                "may leave out the pretraining's own variance.", ""]
    cells = tuned.groupby(["task", "arch", "size", "prior"])["pretrain_seed"].nunique()
    per_seed = tuned["pretrain_seed"].eq(tuned["seed"]).all() and (cells > 1).any()
    if per_seed:
        return ["Every finetuning seed started from its own pretraining run (pretrain.seeds: "
                "per_seed): the intervals over seeds include the pretraining's variance.", ""]
    return [f"The finetuning seeds of a cell share one pretraining run ({int((cells == 1).sum())}"
            f" of {len(cells)} cells; pretrain.seeds: shared): their intervals leave out the "
            "pretraining's own variance.", ""]


def _plateau_markdown(ok: pd.DataFrame) -> list[str]:
    """Under train.until: plateau, how many runs reached their plateau, and
    each one that stopped at its max_steps cap instead (it may not have
    converged). Nothing for a study whose runs all trained max_steps."""
    stopped = ok["stopped_by"] if "stopped_by" in ok else pd.Series(dtype=object)
    at_plateau = int((stopped == "plateau").sum())
    if not at_plateau:
        return []
    capped = ok[stopped == "max_steps"]
    out = [f"{at_plateau} of {len(ok)} ok runs stopped at their "
           f"validation loss's plateau (`until: plateau`); {len(capped)} reached their "
           "max_steps cap first and may not have converged" + (":" if len(capped) else "."), ""]
    if len(capped):
        out += [markdown(capped[["stage", "task", "arch", "size", "prior", "seed", "steps"]]), ""]
    return out


def claims_markdown(checks: pd.DataFrame, study: str = "", ci: float = ClaimsOptions.ci,
                    runs: pd.DataFrame | None = None) -> str:
    """claims.md: a summary, the runs by status, then per claim its source,
    decision rule, verdict and scopes."""
    title = f"{TITLE} on study {study}" if study else TITLE
    out = [title, "",
           f"Intervals are at the {ci:.0%} level. Each claim is judged per scope by the "
           "decision rule printed with it (fixed in src/scalestudy/analysis/claims/ before "
           "any study is read): **holds** (the evidence for it clears its bound), **does not "
           "hold** (evidence against it: its interval on the wrong side), **undecided** (the "
           "interval straddles the bound, or the claim's premise is not shown), **not enough "
           "data** (runs the rule needs are missing, named). Its scopes make its own verdict "
           "by the rule given with it. Each claim prints its premise, its rule and the "
           "quantities it was decided on, each size's own beside a mean over sizes. "
           "docs/analysis.md explains each measurement and the rules' error rates.", "",
           "## Summary", ""]
    counts = (checks.groupby("claim", sort=False)["verdict"].value_counts().unstack()
              .reindex(columns=list(VERDICTS)).fillna(0).astype(int))
    first = checks.groupby("claim", sort=False).first()
    summary = pd.DataFrame({
        "claim": counts.index, "verdict": first.loc[counts.index, "claim_verdict"].to_numpy(),
        "scopes": [" / ".join(str(c) for c in row) for row in counts.to_numpy()]})
    out += [markdown(summary.rename(columns={
        "scopes": "scopes: " + " / ".join(VERDICTS)})), ""]
    out += runs_markdown(runs) if runs is not None else []
    for claim, g in checks.groupby("claim", sort=False):
        how = g["combine"].iloc[0]
        premise = g["premise"].iloc[0] if "premise" in g else ""
        refutation = g["refutation"].iloc[0] if "refutation" in g else ""
        out += [f"## {claim}", "", f"- Where the paper states it: {g['source'].iloc[0]}",
                f"- Premise: {premise or 'none'}",
                f"- Decision rule: {g['rule'].iloc[0]}",
                f"- Verdict: **{g['claim_verdict'].iloc[0]}**; {COMBINE_RULES[how]}"
                + (f"; {refutation}" if refutation else ""), ""]
        table = g[["scope", "measurement", "verdict"]].rename(columns={
            "measurement": "our measurement"})
        out += [markdown(table), ""]
    return "\n".join(out)
