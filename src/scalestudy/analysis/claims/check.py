"""A claim's verdicts, the check it yields per scope, and the helpers that
turn fits and contrasts into its measurement text.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from ...architectures import ARCHITECTURES
from ..fits import select

HOLDS, FAILS, NO_DATA = "holds", "does not hold", "not enough data"
VERDICTS = (HOLDS, FAILS, NO_DATA)

TAY = "Tay et al. 2022 (arXiv:2207.10551)"
AMOS = "Amos et al. 2023 (ICLR 2024, arXiv:2310.02980)"
XU = "Xu et al. 2021 (ACL 2021, arXiv:2012.15355)"

INTERVAL_RULE = (
    "holds when the intervals separate in the claimed direction; does not hold when "
    "they separate the other way or overlap; not enough data when a fit is missing or "
    "refused (fewer than three sizes) or has no interval"
)
CONTRAST_RULE = (
    "Interval: percentile bootstrap, resampling sizes (with at least three shared sizes) "
    "and runs within each cell; holds when the interval lies above 0; does not hold when it "
    "lies below 0 or contains 0; not enough data without a shared size or an interval"
)


@dataclass(frozen=True)
class Check:
    """One claim judged on one scope (a task, an architecture...)."""

    claim: str
    source: str  # where the paper states it
    rule: str  # the decision rule
    scope: str
    measurement: str  # our number(s) with interval(s)
    verdict: str  # one of VERDICTS

    def as_dict(self) -> dict:
        return asdict(self)



def fmt(est: float, low: float, high: float) -> str:
    if np.isnan(low) or np.isnan(high):
        return f"{est:.3f} (no interval)"
    return f"{est:.3f} [{low:.3f}, {high:.3f}]"


def fit_text(row: pd.Series) -> str:
    if row["status"] != "ok":
        return f"n/a ({row['status']})"
    return fmt(row["alpha"], row["alpha_low"], row["alpha_high"])


def has_interval(row) -> bool:
    return (row is not None and row["status"] == "ok"
            and np.isfinite(row["alpha_low"]) and np.isfinite(row["alpha_high"]))



def by_task_arch(runs: pd.DataFrame):
    """(task, arch) groups of `runs`, tasks sorted, architectures in registry order."""
    rank = {a: i for i, a in enumerate(ARCHITECTURES)}
    groups = runs.groupby(["task", "arch"], sort=False)
    return sorted(groups, key=lambda kv: (kv[0][0], rank.get(kv[0][1], len(rank)), kv[0][1]))


def one_fit(fits: pd.DataFrame, metric: str, **where):
    rows = select(fits, metric, **where)
    return rows.iloc[0] if len(rows) else None



def contrast_verdict(c: dict) -> str:
    if c["status"] != "ok":
        return NO_DATA
    return HOLDS if c["low"] > 0 else FAILS



def contrast_text(c: dict, what: str) -> str:
    if np.isnan(c["estimate"]):
        return f"{what}: n/a ({c['status']})"
    text = f"{what} = {fmt(c['estimate'], c['low'], c['high'])} over sizes " + ", ".join(
        c["sizes"])
    return text if c["status"] == "ok" else f"{text}; {c['status']}"



def diff_text(d: dict, what: str) -> str:
    if np.isnan(d["estimate"]):
        return f"{what}: n/a ({d['status']})"
    text = f"{what} = {fmt(d['estimate'], d['low'], d['high'])}"
    return text if d["status"] == "ok" else f"{text}; {d['status']}"


def finished(runs: pd.DataFrame) -> pd.DataFrame:
    return runs[(runs["status"] == "ok") & np.isfinite(runs["test_acc"])]
