"""claims.md: a summary of the verdicts, the runs by status, then each claim with
its source, decision rule and checks.
"""

from __future__ import annotations

import pandas as pd

from ...records import STATUSES
from ..tables import markdown
from .check import FAILS, HOLDS, NO_DATA, VERDICTS


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
    return out + _plateau_markdown(runs[runs["status"] == "ok"])


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


def claims_markdown(checks: pd.DataFrame, study: str = "", ci: float = 0.95,
                    runs: pd.DataFrame | None = None) -> str:
    """claims.md: a summary, the runs by status, then per claim its source,
    decision rule and checks."""
    title = f"# Claims checked on study {study}" if study else "# Claims checked"
    out = [title, "",
           f"Intervals are {ci:.0%} percentile-bootstrap intervals. Verdicts: "
           f"**{HOLDS}**, **{FAILS}**, **{NO_DATA}**; each claim's decision rule is fixed in "
           "analysis/claims.py and printed below. docs/analysis.md explains each measurement.",
           "", "## Summary", ""]
    summary = (checks.groupby("claim", sort=False)["verdict"].value_counts().unstack()
               .reindex(columns=list(VERDICTS)).fillna(0).astype(int).reset_index())
    out += [markdown(summary), ""]
    out += runs_markdown(runs) if runs is not None else []
    for claim, g in checks.groupby("claim", sort=False):
        out += [f"## {claim}", "", f"- Where the paper states it: {g['source'].iloc[0]}",
                f"- Decision rule: {g['rule'].iloc[0]}", ""]
        table = g[["scope", "measurement", "verdict"]].rename(columns={
            "scope": "scope", "measurement": "our measurement", "verdict": "verdict"})
        out += [markdown(table), ""]
    return "\n".join(out)
