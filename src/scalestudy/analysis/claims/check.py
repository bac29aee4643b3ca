"""A claim's verdicts: the result it yields per scope (a `Verdict`, which knows
the tests that could refute it), how the scopes' verdicts make the claim's own,
the study a claim reads, and the text helpers that turn measurements into
claims.md's cells (each size's value beside a mean over sizes).
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


class Verdict(str):
    """A scope's verdict (one of VERDICTS, compared as the string) that knows the
    tests whose failure alone would refute it (`tests`: each statistical
    condition judged by `above` or `below`, combined by `all_of`) and how it
    reads when each of them must be on the wrong side at a stricter one-sided
    level (`at(level)`). A claim that combines its scopes by EVERY makes
    `refuting_tests` tests in all: where they are several, "does not hold"
    asks that one of them be on the wrong side at the study's one-sided level
    divided by their number (Bonferroni, `Claim.checks`), so that a true claim
    is refuted at most about as often as one test would wrongly refute it."""

    tests: int
    _at: Any

    def __new__(cls, value: str, tests: int = 0, at=None):
        verdict = super().__new__(cls, value)
        verdict.tests, verdict._at = tests, at
        return verdict

    def at(self, level: float) -> str:
        """This verdict with every test judged at one-sided `level` for a refutation
        (holding needs the study's level as before)."""
        return self if self._at is None or self != FAILS else self._at(level)


def refuting_tests(verdict: str) -> int:
    return verdict.tests if isinstance(verdict, Verdict) else 0


def refuted_at(verdict: str, level: float) -> str:
    return verdict.at(level) if isinstance(verdict, Verdict) else verdict


@dataclass(frozen=True)
class Scope:
    """One claim measured and decided on one scope (a task, an architecture...)."""

    scope: str
    measurement: str  # our number(s) with interval(s), per size where they combine sizes
    verdict: str  # one of VERDICTS (a Verdict where a test could refute it)


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
    premise: str = ""  # the paper's premise the rule checks first, or "none"
    refutation: str = ""  # the level a refutation is judged at (Claim.checks)

    def as_dict(self) -> dict:
        return {k: str(v) if isinstance(v, Verdict) else v for k, v in asdict(self).items()}


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


def per_size_text(d: dict) -> str:
    """' (per size: xxs 0.158 [0.047, 0.269], xs ...)' of a statistic that
    combines sizes (`per_size`: size -> its own statistic), '' otherwise."""
    per = d.get("per_size") or {}
    if len(per) < 2:
        return ""
    return " (per size: " + ", ".join(
        f"{size} {fmt(v['estimate'], v['low'], v['high'])}" for size, v in per.items()) + ")"


def stat_text(d: dict, what: str) -> str:
    """`what = estimate [low, high]` of a statistic dict (estimate, low, high,
    status, optionally sizes and per_size), with its status when it is not ok:
    a statistic averaged over sizes gives each size's own value, a fit the
    sizes it was fitted over."""
    if np.isnan(d["estimate"]):
        return f"{what}: n/a ({d['status']})"
    text = f"{what} = {fmt(d['estimate'], d['low'], d['high'])}"
    if d.get("sizes"):
        text += " over sizes " + ", ".join(d["sizes"])
    text += per_size_text(d)
    return text if d["status"] == "ok" else f"{text}; {d['status']}"


def stats_text(items: list[tuple[dict, str]]) -> str:
    """Several statistics' texts, joined, each status that is not ok said once at
    the end (a comparison with every other architecture repeats them)."""
    parts, notes = [], []
    for d, what in items:
        if np.isnan(d["estimate"]):
            parts.append(f"{what}: n/a")
        else:
            parts.append(f"{what} = {fmt(d['estimate'], d['low'], d['high'])}"
                         + per_size_text(d))
        if d["status"] != "ok" and d["status"] not in notes:
            notes.append(d["status"])
    spans = {tuple(d["sizes"]) for d, _ in items if d.get("sizes")}
    if len(spans) == 1 and not any(d.get("per_size") for d, _ in items):
        notes.insert(0, "fitted over sizes " + ", ".join(spans.pop()))
    return "; ".join(parts + notes)


def ok(d: dict) -> bool:
    """A statistic with an interval."""
    return d["status"] == "ok" and np.isfinite(d["low"]) and np.isfinite(d["high"])


def interval_at(d: dict, level: float) -> tuple[float, float]:
    """The statistic's interval with `level` in each tail (its own: (1 - ci) / 2),
    from its t interval (estimate +- t_df se: `df`, and the se its interval
    implies at `ci`); its own interval where it has no df."""
    from scipy.stats import t

    df = d.get("df", np.nan)
    if not (np.isfinite(df) and df > 0 and "ci" in d):
        return d["low"], d["high"]
    half = (d["high"] - d["low"]) / 2
    se = half / float(t.ppf((1 + d["ci"]) / 2, df))
    wide = float(t.ppf(1 - level, df)) * se
    mid = (d["high"] + d["low"]) / 2
    return mid - wide, mid + wide


def _side(d: dict, bound: float, sign: int, level: float | None) -> str:
    if not ok(d):
        return NO_DATA
    low, high = (d["low"], d["high"]) if level is None else interval_at(d, level)
    lo_h, hi_h = d["low"], d["high"]  # holding is judged at the study's level
    if sign > 0:
        return HOLDS if lo_h > bound else FAILS if high < bound else UNDECIDED
    return HOLDS if hi_h < bound else FAILS if low > bound else UNDECIDED


def above(d: dict, bound: float = 0.0) -> Verdict:
    """HOLDS when the statistic's interval lies above `bound`, FAILS when it lies
    below, UNDECIDED when it straddles it, NO_DATA without an interval: one test
    that can refute (Verdict)."""
    verdict = _side(d, bound, 1, None)
    return Verdict(verdict, 1 if ok(d) else 0, lambda level: _side(d, bound, 1, level))


def below(d: dict, bound: float = 0.0) -> Verdict:
    """`above` mirrored: HOLDS when the interval lies below `bound`."""
    verdict = _side(d, bound, -1, None)
    return Verdict(verdict, 1 if ok(d) else 0, lambda level: _side(d, bound, -1, level))


def shown(verdict: str) -> str:
    """A premise's verdict: HOLDS where shown, NO_DATA without data, else
    UNDECIDED (a premise never refutes, so it is no test that refutes)."""
    return verdict if verdict in (HOLDS, NO_DATA) else UNDECIDED


def _all_of(verdicts) -> str:
    for verdict in (FAILS, NO_DATA, UNDECIDED):
        if verdict in verdicts:
            return verdict
    return HOLDS


def all_of(*verdicts: str) -> Verdict:
    """Conditions that must all hold: any failing gives FAILS; else any without
    data NO_DATA; else any undecided UNDECIDED. Its tests are theirs."""
    return Verdict(_all_of(verdicts), sum(refuting_tests(v) for v in verdicts),
                   lambda level: _all_of([refuted_at(v, level) for v in verdicts]))


PREMISE_NOT_SHOWN = "premise not shown"


def given(premise: str, verdict: str) -> str:
    """A claim's verdict when it is judged only where its premise holds: a
    premise without data leaves not enough data, a premise not shown (or shown
    false) leaves the claim undecided, never refuted by it (and none of its
    tests counts as a test that refutes)."""
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
