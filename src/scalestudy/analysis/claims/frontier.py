"""Claims beyond the three papers, on the compute-optimal frontier.

`ranking_changes`: trained compute-optimally, the architectures rank
differently than at a fixed training length.

Tay et al. 2022 compare architectures at one schedule per size; Hoffmann et
al. 2022 show that the loss-minimising size grows with compute. Here, at each
budget (grid.budgets) that every architecture of a group reached, two
comparisons of each pair of architectures on the frontier's loss
(analysis/frontier/study.py):

- at a fixed length: the largest size both ran, at that budget (the budget's
  steps at that size: equal steps across architectures under budget_unit
  tokens, equal FLOPs under flops);
- compute-optimally: each architecture at its own loss-minimising size at that
  budget (the size of lowest mean loss over seeds: Hoffmann et al.'s
  approach 1 on final points).

Each a difference of mean losses with Welch's interval over seeds (two runs
per cell needed), at the Bonferroni level over every pair and budget (one
flip anywhere suffices). Simplified: the optimal size is chosen on the means, and
its selection is not part of the interval.

`exponent_differs`: an architecture's compute-optimal size grows with compute
at a different rate than the reference's: a of N_opt ∝ C^a by Hoffmann et
al.'s approach 2 (IsoFLOP parabolas), per prior, each architecture's a minus
the reference's with a percentile interval (t-expanded by the fewer budgets -
2) from the two fits' bootstrap replicates (runs resampled within each budget;
the two fits resample independently, so replicate i of one is paired with
replicate i of the other), at the Bonferroni level over the architectures
compared. The fits and their replicates are the study's frontier, the one its
frontier stage wrote (frontier/frontier_fits.csv, frontier_replicates.csv, or the result it
computed in the same process), so that each a and its interval read as in
frontier_fits.csv; the claim never fits one of its own.
Simplified: with one run per size and budget the replicates resample sizes,
not seeds, so the interval holds the fit's noise across sizes, not the seed
noise.
"""

from __future__ import annotations

import itertools

import pandas as pd

from ...architectures import ARCHITECTURES
from ..frontier.study import study_table
from ..stats import expanded_ci
from .check import FAILS, HOLDS, NO_DATA, UNDECIDED, Evidence, Scope, fmt, ok, stat_text
from .contrasts import mean_difference


def _order(d: dict) -> int:
    """+1: the first architecture's loss is higher (it ranks below), -1 lower, 0 undecided."""
    if not ok(d):
        return 0
    return 1 if d["low"] > 0 else -1 if d["high"] < 0 else 0


def ranking_changes(study: Evidence) -> list[Scope]:
    """Per prior (and task) and budget: holds when some pair of architectures
    is ordered one way at a fixed length and the other way compute-optimally,
    both with intervals excluding 0; does not hold when every pair is ordered
    (both intervals exclude 0) the same way in both; otherwise not enough data."""
    table = study_table(study.runs)
    if table.empty:
        return [Scope("all", "no budgeted runs (grid.budgets) with a frontier loss", NO_DATA)]
    out, judged = [], []
    for (prior, task, on_task), group in table.groupby(["prior", "task", "on_task"], sort=True):
        name = f"{prior} ({task if on_task else 'upstream loss'})"
        archs = sorted(group["arch"].unique(), key=ARCHITECTURES.rank)
        if len(archs) < 2:
            out.append(Scope(name, "fewer than two architectures", NO_DATA))
            continue
        shared = set.intersection(*(set(group.loc[group["arch"] == a, "budget"])
                                    for a in archs))
        judged += [(group[group["budget"] == b], archs, f"{name}, budget {b:g}")
                   for b in sorted(shared)]
    # Some scope and some pair suffice: each comparison at the Bonferroni level.
    tests = sum(len(archs) * (len(archs) - 1) // 2 for _, archs, _ in judged)
    ci = 1 - (1 - study.ci) / max(1, tests)
    out += [_scope(at, archs, scope, ci) for at, archs, scope in judged]
    return out or [Scope("all", "no budget that every architecture reached", NO_DATA)]


def _scope(at: pd.DataFrame, archs: list[str], scope: str, ci: float) -> Scope:
    by_size = {a: at[at["arch"] == a] for a in archs}
    common = set.intersection(*(set(r["size"]) for r in by_size.values()))
    if not common:
        return Scope(scope, "no size that every architecture ran", NO_DATA)
    fixed_size = max(common, key=lambda s: by_size[archs[0]].loc[
        by_size[archs[0]]["size"] == s, "params"].iloc[0])
    optimal = {a: r.groupby("size")["loss"].mean().idxmin() for a, r in by_size.items()}
    texts, flips, same, judged = [], [], [], []
    for a, b in itertools.combinations(archs, 2):
        ra, rb = by_size[a], by_size[b]
        fixed = mean_difference(ra.loc[ra["size"] == fixed_size, "loss"],
                                rb.loc[rb["size"] == fixed_size, "loss"], ci=ci)
        best = mean_difference(ra.loc[ra["size"] == optimal[a], "loss"],
                               rb.loc[rb["size"] == optimal[b], "loss"], ci=ci)
        texts.append(f"{stat_text(fixed, f'{a} - {b} at size {fixed_size}')}; "
                     f"{stat_text(best, f'{a} ({optimal[a]}) - {b} ({optimal[b]}) optimal')}")
        judged.append(ok(fixed) and ok(best))
        f, o = _order(fixed), _order(best)
        flips.append(f * o == -1)
        same.append(f * o == 1)
    verdict = (HOLDS if any(flips) else FAILS if all(same)
               else UNDECIDED if all(judged) else NO_DATA)
    return Scope(scope, " | ".join(texts), verdict)


def exponent_differs(study: Evidence, reference: str, method: str = "approach2") -> list[Scope]:
    """Per prior (and task) and architecture other than `reference`: holds when
    a minus the reference's a has an interval excluding 0 (at the Bonferroni
    level over the architectures compared), undecided when it includes 0 (no
    equivalence margin is stated, so nothing here shows the rates equal), not
    enough data when either fit is missing."""
    fitted = study.frontier
    if fitted is None:
        return [Scope("all", "no budgeted runs (grid.budgets) with a frontier loss", NO_DATA)]
    fits = fitted.fits[fitted.fits["method"] == method]
    fits = fits.drop_duplicates(["arch", "prior"]).set_index(["arch", "prior"])
    out, pairs = [], []
    for prior in sorted(fits.index.unique("prior")):
        archs = sorted(fits.xs(prior, level="prior").index.unique(), key=ARCHITECTURES.rank)
        if reference not in archs:
            out.append(Scope(prior, f"no {reference} runs to compare with", NO_DATA))
            continue
        pairs += [(prior, arch) for arch in archs if arch != reference]
    ci = 1 - (1 - study.ci) / max(1, len(pairs))
    for prior, arch in pairs:
        rows = [fits.loc[(name, prior)] for name in (arch, reference)]
        texts = [f"a({name}) = {fmt(r['a'], r['a_low'], r['a_high'])}"
                 if r["status"] == "ok" else f"a({name}): n/a ({r['status']})"
                 for name, r in zip((arch, reference), rows, strict=True)]
        boots = [fitted.exponent_replicates.get((method, name, prior))
                 for name in (arch, reference)]
        scope = f"{arch} vs {reference}, {prior}"
        if any(b is None or len(b) < 2 for b in boots):
            out.append(Scope(scope, "; ".join(texts), NO_DATA))
            continue
        k = min(len(b) for b in boots)
        diff = boots[0][:k] - boots[1][:k]
        # The fits' own intervals: t-expanded by each line's budgets - 2.
        low, high = expanded_ci(diff, ci, min(r["n_points"] for r in rows) - 2)
        d = {"estimate": rows[0]["a"] - rows[1]["a"], "low": low, "high": high, "status": "ok"}
        texts.append(stat_text(d, f"a({arch}) - a({reference}) at {ci:.4g}"))
        verdict = HOLDS if (low > 0 or high < 0) else UNDECIDED
        out.append(Scope(scope, "; ".join(texts), verdict))
    return out
