"""A claim's verdicts: the result it yields per scope, how the scopes' verdicts
make the claim's own, the study a claim reads, and the text helpers that turn
measurements into claims.md's cells.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pandas as pd

from ...architectures import ARCHITECTURES
from .. import X_AXES
from ..frontier.result import FrontierResult
from ..options import ClaimsOptions, FitOptions, chosen

HOLDS, FAILS, UNDECIDED, NO_DATA = "holds", "does not hold", "undecided", "not enough data"
# holds: the evidence for it clears its bound; does not hold: evidence against it
# (its interval on the wrong side of the bound); undecided: the interval straddles
# the bound, or the claim's premise is not shown; not enough data: runs it needs
# are missing (named).
VERDICTS = (HOLDS, FAILS, UNDECIDED, NO_DATA)

TAY = "Tay et al. 2022 (arXiv:2207.10551)"
AMOS = "Amos et al. 2023 (ICLR 2024, arXiv:2310.02980)"
XU = "Xu et al. 2021 (ACL 2021, arXiv:2012.15355)"

# How a claim's scopes make its verdict (Claim.combine).
EVERY, ANY = "every", "any"
COMBINE_RULES = {
    EVERY: "the claim holds when every scope holds, does not hold when some scope does "
           "not, is undecided when some scope is, and otherwise has not enough data (an "
           "intersection-union test: with no effect anywhere it holds at most as often as "
           "one scope would)",
    ANY: "the claim holds when some scope holds, each judged at the Bonferroni level (the "
         "study's level divided by the number of scopes judged); otherwise it is undecided "
         "when some scope is, does not hold when some scope does not, and otherwise has not "
         "enough data",
}


@dataclass(frozen=True)
class Scope:
    """One claim measured and decided on one scope (a task, an architecture...)."""

    scope: str
    measurement: str  # our number(s) with interval(s)
    verdict: str  # one of VERDICTS


@dataclass(frozen=True)
class Check:
    """A scope's row of claims.md: the claim, where the paper states it, the rule,
    the scope's measurement and verdict, the claim's overall verdict and how its
    scopes make it (a COMBINE_RULES key)."""

    claim: str
    source: str
    rule: str
    scope: str
    measurement: str
    verdict: str
    claim_verdict: str
    combine: str

    def as_dict(self) -> dict:
        return asdict(self)


def combine(verdicts: list[str], how: str) -> str:
    """The claim's verdict from its scopes' (COMBINE_RULES)."""
    if how == EVERY:
        if FAILS in verdicts:
            return FAILS
        if verdicts and all(v == HOLDS for v in verdicts):
            return HOLDS
        return UNDECIDED if UNDECIDED in verdicts else NO_DATA
    if how == ANY:
        for verdict in (HOLDS, UNDECIDED, FAILS):
            if verdict in verdicts:
                return verdict
        return NO_DATA
    raise ValueError(f"combine: got {how!r}, accepted values: {', '.join(COMBINE_RULES)}")


@dataclass(frozen=True)
class Evidence:
    """What a claim reads: the runs, the fits' x axis, the bootstrap settings,
    and the frontier the frontier's stage fitted on the runs' budgets (None: the
    runs have none, and a claim that needs it lacks data; a claim never fits
    one: stages.Analysis runs the frontier's stage for the claims stage)."""

    runs: pd.DataFrame
    x_axis: str = FitOptions.x_axis
    n_boot: int = ClaimsOptions.n_boot
    ci: float = ClaimsOptions.ci
    seed: int = ClaimsOptions.seed
    frontier: FrontierResult | None = None
    analysis: Any = None  # the stages.Analysis it is checked in, if any

    def result(self, stage: str) -> Any:
        """Stage `stage`'s result (analysis/stages.py) that a claim reads, never
        fits: the analysis's (its stage run there on first read); None outside
        an analysis."""
        return None if self.analysis is None else self.analysis[stage]

    @classmethod
    def of(cls, runs: pd.DataFrame, fits: pd.DataFrame, frontier=None,
           options: ClaimsOptions | None = None, analysis=None, **changes) -> Evidence:
        """The study of `runs`, on the x axis its `fits` were fitted on, with
        `options` (options.ClaimsOptions; `changes`: some of them, by name). Text
        columns become Python objects: with pandas' Arrow strings the claims'
        many small selections cost several times their arithmetic."""
        options = chosen(ClaimsOptions, options, changes)
        axes = set(fits["x_axis"]) & set(X_AXES) if "x_axis" in fits else set()
        runs = runs.astype({c: object for c in runs.columns
                            if pd.api.types.is_string_dtype(runs[c])})
        return cls(runs, axes.pop() if len(axes) == 1 else FitOptions.x_axis,
                   frontier=frontier, n_boot=options.n_boot, ci=options.ci, seed=options.seed,
                   analysis=analysis)

    @property
    def boot(self) -> dict:
        return {"n_boot": self.n_boot, "ci": self.ci, "seed": self.seed}


def fmt(est: float, low: float, high: float) -> str:
    if np.isnan(low) or np.isnan(high):
        return f"{est:.3f} (no interval)"
    return f"{est:.3f} [{low:.3f}, {high:.3f}]"


def stat_text(d: dict, what: str) -> str:
    """`what = estimate [low, high]` of a statistic dict (estimate, low, high,
    status, optionally sizes), with its status when it is not ok."""
    if np.isnan(d["estimate"]):
        return f"{what}: n/a ({d['status']})"
    text = f"{what} = {fmt(d['estimate'], d['low'], d['high'])}"
    if d.get("sizes"):
        text += " over sizes " + ", ".join(d["sizes"])
    return text if d["status"] == "ok" else f"{text}; {d['status']}"


def stats_text(items: list[tuple[dict, str]]) -> str:
    """Several statistics' texts, joined, each status that is not ok said once at
    the end (a comparison with every other architecture repeats them)."""
    parts, notes = [], []
    for d, what in items:
        if np.isnan(d["estimate"]):
            parts.append(f"{what}: n/a")
        else:
            parts.append(f"{what} = {fmt(d['estimate'], d['low'], d['high'])}")
        if d["status"] != "ok" and d["status"] not in notes:
            notes.append(d["status"])
    return "; ".join(parts + notes)


def ok(d: dict) -> bool:
    """A statistic with an interval."""
    return d["status"] == "ok" and np.isfinite(d["low"]) and np.isfinite(d["high"])


def above(d: dict, bound: float = 0.0) -> str:
    """HOLDS when the statistic's interval lies above `bound`, FAILS when it lies
    below, UNDECIDED when it straddles it, NO_DATA without an interval."""
    if not ok(d):
        return NO_DATA
    return HOLDS if d["low"] > bound else FAILS if d["high"] < bound else UNDECIDED


def below(d: dict, bound: float = 0.0) -> str:
    """`above` mirrored: HOLDS when the interval lies below `bound`."""
    if not ok(d):
        return NO_DATA
    return HOLDS if d["high"] < bound else FAILS if d["low"] > bound else UNDECIDED


def all_of(*verdicts: str) -> str:
    """Conditions that must all hold: any failing gives FAILS; else any without
    data NO_DATA; else any undecided UNDECIDED."""
    for verdict in (FAILS, NO_DATA, UNDECIDED):
        if verdict in verdicts:
            return verdict
    return HOLDS


PREMISE_NOT_SHOWN = "premise not shown"


def given(premise: str, verdict: str) -> str:
    """A claim's verdict when it is judged only where its premise holds: a
    premise without data leaves not enough data, a premise not shown (or shown
    false) leaves the claim undecided, never refuted by it."""
    if premise == NO_DATA:
        return NO_DATA
    return verdict if premise == HOLDS else UNDECIDED


def by_task_arch(runs: pd.DataFrame):
    """(task, arch) groups of `runs`, tasks sorted, architectures in registry order."""
    groups = runs.groupby(["task", "arch"], sort=False)
    return sorted(groups, key=lambda kv: (kv[0][0], ARCHITECTURES.rank(kv[0][1])))


def finished(runs: pd.DataFrame) -> pd.DataFrame:
    return runs[(runs["status"] == "ok") & np.isfinite(runs["test_acc"])]


def reference_arch() -> str:
    """The architecture the others are compared with (the registry's reference)."""
    return next(name for name, arch in ARCHITECTURES.items() if arch.reference)
