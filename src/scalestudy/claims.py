"""The headline claims of the three papers, checked on one study's run records.

Usage: `scalestudy claims RUNS.parquet FITS.parquet --out claims.md` (also run
as `python analysis/claims.py ...`), or `scalestudy analyse`; both call
`write_claims`. The code lives in the package so that every install has it.

Each claim is stated as in its paper, measured on the study with a bootstrap
interval, and judged by a decision rule fixed here in advance and printed with the
verdict (no threshold is tuned to the data):

- an interval comparison *holds* when the intervals separate in the claimed
  direction; it *does not hold* when they separate the other way or overlap (the
  study does not show the claim at this confidence); it has *not enough data* when
  a quantity is missing or has no interval (fewer than three sizes, a missing
  architecture or prior, one run where an interval needs several).

Papers: Tay et al. 2022, "Scaling Laws vs Model Architectures: How does Inductive
Bias Influence Scaling?" (arXiv:2207.10551); Amos, Berant & Gupta 2023, "Never
Train from Scratch: Fair Comparison of Long-Sequence Models Requires Data-Driven
Priors" (ICLR 2024, arXiv:2310.02980); Xu et al. 2021, "Optimizing Deeper
Transformers on Small Datasets" (ACL 2021, arXiv:2012.15355).

Torch-free: imports only the analysis modules of scalestudy.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from .fits import MIN_SIZES, select, size_order, task_runs
from .names import ARCHITECTURES, STATUSES
from .tables import markdown, write_text_atomic

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


# --------------------------------------------------------------------------- helpers


def _fmt(est: float, low: float, high: float) -> str:
    if np.isnan(low) or np.isnan(high):
        return f"{est:.3f} (no interval)"
    return f"{est:.3f} [{low:.3f}, {high:.3f}]"


def _fit_text(row: pd.Series) -> str:
    if row["status"] != "ok":
        return f"n/a ({row['status']})"
    return _fmt(row["alpha"], row["alpha_low"], row["alpha_high"])


def _usable(row) -> bool:
    return (row is not None and row["status"] == "ok"
            and np.isfinite(row["alpha_low"]) and np.isfinite(row["alpha_high"]))


def separation(a_low: float, a_high: float, b_low: float, b_high: float) -> str:
    """'above' when interval a lies wholly above b, 'below' when wholly below, else
    'overlap'."""
    if a_low > b_high:
        return "above"
    if a_high < b_low:
        return "below"
    return "overlap"


def _by_task_arch(runs: pd.DataFrame):
    """(task, arch) groups of `runs`, tasks sorted, architectures in registry order."""
    rank = {a: i for i, a in enumerate(ARCHITECTURES)}
    groups = runs.groupby(["task", "arch"], sort=False)
    return sorted(groups, key=lambda kv: (kv[0][0], rank.get(kv[0][1], len(rank)), kv[0][1]))


def _one(fits: pd.DataFrame, metric: str, **where):
    rows = select(fits, metric, **where)
    return rows.iloc[0] if len(rows) else None


def contrast(runs: pd.DataFrame, cells: dict[str, tuple[dict, float]], *, n_boot: int = 1000,
             ci: float = 0.95, seed: int = 0) -> dict:
    """Mean over shared sizes of sum_k w_k * (mean test accuracy of cell k at that size).

    `cells` maps a label to (column filter, weight), e.g. {"spt": ({"prior": "spt"}, 1),
    "control": ({"prior": "scratch_matched"}, -1)}. Only runs with status "ok" count.
    The interval is a percentile bootstrap that resamples sizes (when at least
    MIN_SIZES are shared) and, within each resampled size, each cell's runs; with fewer
    sizes it resamples runs only, and needs two runs in every cell for that.
    """
    ok = runs[(runs["status"] == "ok") & np.isfinite(runs["test_acc"])]
    per_cell = {}
    for label, (where, _) in cells.items():
        mask = np.ones(len(ok), dtype=bool)
        for column, value in where.items():
            mask &= (ok[column] == value).to_numpy()
        per_cell[label] = {s: g.to_numpy(float) for s, g in
                           ok[mask].groupby("size")["test_acc"]}
    shared = set.intersection(*(set(d) for d in per_cell.values()))
    sizes = [s for s in size_order(ok) if s in shared]
    out = {"estimate": np.nan, "low": np.nan, "high": np.nan, "n_sizes": len(sizes),
           "sizes": sizes, "status": "ok"}
    if not sizes:
        return {**out, "status": "no size at which every compared cell has finished runs"}
    weights = {label: w for label, (_, w) in cells.items()}
    per_size = np.array([sum(w * per_cell[k][s].mean() for k, w in weights.items())
                         for s in sizes])
    out["estimate"] = float(per_size.mean())
    resample_sizes = len(sizes) >= MIN_SIZES
    single = min(per_cell[k][s].size for k in cells for s in sizes) < 2
    if not resample_sizes and single:
        return {**out, "status": f"no interval: {len(sizes)} shared size(s) (< {MIN_SIZES}) "
                                 "and a single run in some cell"}
    if n_boot <= 0:
        return {**out, "status": "no interval: n_boot = 0"}
    rng = np.random.default_rng(seed)
    # Each cell's bootstrap means at each size: (n_sizes, n_boot) per cell, summed.
    boot = np.zeros((len(sizes), n_boot))
    for k, w in weights.items():
        for i, s in enumerate(sizes):
            acc = per_cell[k][s]
            boot[i] += w * acc[rng.integers(0, acc.size, (n_boot, acc.size))].mean(axis=1)
    if resample_sizes:
        idx = rng.integers(0, len(sizes), (n_boot, len(sizes)))
        stats = np.take_along_axis(boot.T, idx, axis=1).mean(axis=1)
    else:
        stats = boot.mean(axis=0)
    out["low"], out["high"] = (float(q) for q in np.quantile(stats, [(1 - ci) / 2,
                                                                      (1 + ci) / 2]))
    return out


def _contrast_verdict(c: dict) -> str:
    if c["status"] != "ok":
        return NO_DATA
    return HOLDS if c["low"] > 0 else FAILS


def _gap_under_spt(runs: pd.DataFrame, first: str, second: str, boot: dict):
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
    parts = [_contrast_text(gap_random, "gap under random"),
             _contrast_text(gap_spt, "gap under SPT"), _contrast_text(reduction, "reduction")]
    return gap_random, gap_spt, reduction, parts


def _contrast_text(c: dict, what: str) -> str:
    if np.isnan(c["estimate"]):
        return f"{what}: n/a ({c['status']})"
    text = f"{what} = {_fmt(c['estimate'], c['low'], c['high'])} over sizes " + ", ".join(
        c["sizes"])
    return text if c["status"] == "ok" else f"{text}; {c['status']}"


# --------------------------------------------------------------------------- claims


def vanilla_scales_best_upstream(fits: pd.DataFrame) -> list[Check]:
    """Tay et al. 2022: the vanilla Transformer has the best (upstream) scaling."""
    base = dict(
        claim="The vanilla Transformer scales best upstream (largest alpha_U)",
        source=f"{TAY}, §1 (summary of findings) and the upstream scaling figure "
               "(Figure 2: upstream negative log-perplexity against FLOPs)",
        rule="log-log alpha_U per architecture; the transformer's interval against every "
             f"other architecture's: {INTERVAL_RULE}; holds only when it lies above all",
        scope="upstream",
    )
    up = select(fits, "alpha_U")
    tf = _one(fits, "alpha_U", arch="transformer")
    if not _usable(tf):
        why = "no upstream runs of the transformer" if tf is None else _fit_text(tf)
        return [Check(**base, measurement=f"transformer alpha_U: {why}", verdict=NO_DATA)]
    others = up[(up["arch"] != "transformer")]
    usable = [r for _, r in others.iterrows() if _usable(r)]
    skipped = [f"{r['arch']} ({r['status']})" for _, r in others.iterrows() if not _usable(r)]
    text = f"transformer alpha_U = {_fit_text(tf)}"
    if not usable:
        return [Check(**base, measurement=text + "; no other architecture has an alpha_U"
                      + (f" (refused: {', '.join(skipped)})" if skipped else ""),
                      verdict=NO_DATA)]
    seps = {r["arch"]: separation(tf["alpha_low"], tf["alpha_high"], r["alpha_low"],
                                  r["alpha_high"]) for r in usable}
    best = max(usable, key=lambda r: r["alpha"])
    text += (f"; largest other: {best['arch']} {_fit_text(best)}; transformer above "
             f"{sum(v == 'above' for v in seps.values())} of {len(seps)}")
    below = [a for a, v in seps.items() if v == "below"]
    overlap = [a for a, v in seps.items() if v == "overlap"]
    if below:
        text += f"; below: {', '.join(below)}"
    if overlap:
        text += f"; overlapping: {', '.join(overlap)}"
    if skipped:
        text += f"; not compared: {', '.join(skipped)}"
    verdict = HOLDS if all(v == "above" for v in seps.values()) else FAILS
    return [Check(**base, measurement=text, verdict=verdict)]


def performer_albert_scale_poorly(fits: pd.DataFrame) -> list[Check]:
    """Tay et al. 2022: Performer (linear attention) and ALBERT scale poorly, i.e.
    worse than the vanilla Transformer, upstream and downstream."""
    checks = []
    tasks = sorted(select(fits, "alpha_D", prior="upstream")["task"].unique())
    for arch in ("performer", "albert"):
        base = dict(
            claim="Performer and ALBERT scale worse than the vanilla Transformer",
            source=f"{TAY}, §1 (summary of findings: Performer 'struggles with scaling up', "
                   "ALBERT 'scales negatively') and the scaling results per architecture",
            rule="each architecture's alpha against the transformer's, upstream (alpha_U) "
                 f"and per task downstream (alpha_D, upstream prior): {INTERVAL_RULE} "
                 "(claimed: below the transformer's)",
        )
        scopes = [(f"{arch}: upstream alpha_U", "alpha_U", {})]
        scopes += [(f"{arch}: {t} alpha_D (upstream prior)", "alpha_D",
                    {"task": t, "prior": "upstream"}) for t in tasks]
        for scope, metric, where in scopes:
            a = _one(fits, metric, arch=arch, **where)
            tf = _one(fits, metric, arch="transformer", **where)
            if not (_usable(a) and _usable(tf)):
                parts = [f"{name}: {'no runs' if r is None else _fit_text(r)}"
                         for name, r in ((arch, a), ("transformer", tf)) if not _usable(r)]
                checks.append(Check(**base, scope=scope, measurement="; ".join(parts),
                                    verdict=NO_DATA))
                continue
            sep = separation(a["alpha_low"], a["alpha_high"], tf["alpha_low"], tf["alpha_high"])
            text = f"{arch} {_fit_text(a)} vs transformer {_fit_text(tf)}: {sep}"
            checks.append(Check(**base, scope=scope, measurement=text,
                                verdict=HOLDS if sep == "below" else FAILS))
    if not checks:
        checks.append(Check(claim="Performer and ALBERT scale worse than the transformer",
                            source=TAY, rule=INTERVAL_RULE, scope="all",
                            measurement="no fits", verdict=NO_DATA))
    return checks


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
        gap_random, gap_spt, reduction, parts = _gap_under_spt(
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
    for (task, arch), r in _by_task_arch(runs_t):
        if not {"spt", "scratch_matched"} & set(r["prior"]):
            continue
        c = contrast(r, {"spt": ({"prior": "spt"}, 1),
                         "control": ({"prior": "scratch_matched"}, -1)}, **boot)
        checks.append(Check(**base, scope=f"{task} / {arch}",
                            measurement=_contrast_text(c, "SPT - control"),
                            verdict=_contrast_verdict(c)))
    if not checks:
        checks.append(Check(**base, scope="all", measurement="no spt or scratch_matched runs",
                            verdict=NO_DATA))
    return checks


def dtfixup_trains_deep(runs: pd.DataFrame, **boot) -> list[Check]:
    """Xu et al. 2021: DT-Fixup trains deep LayerNorm-free transformers (no warm-up)
    where the standard initialisation without LayerNorm fails."""
    base = dict(
        claim="DT-Fixup trains deep LayerNorm-free stacks where the standard recipe fails",
        source=f"{XU}, abstract and §3-4 (DT-Fixup; deep models trained without warm-up "
               "or LayerNorm on small data)",
        rule="At the deepest depth with both dtfixup runs and LayerNorm-free runs of the "
             "standard initialisation (prior random_noln, or random with train.norm: none): "
             "does not hold if any "
             "dtfixup run diverged or failed; holds if every dtfixup run finished and every "
             "standard run diverged or failed; otherwise compares test accuracy, dtfixup "
             f"minus standard. {CONTRAST_RULE}",
    )
    runs_t = task_runs(runs)
    checks = []
    for (task, arch), r in _by_task_arch(runs_t):
        dt = r[r["prior"] == "dtfixup"]
        standard = (r["prior"] == "random_noln") | (r["prior"].eq("random") & r["norm"].eq("none"))
        std = r[standard].assign(prior="standard")
        if dt.empty:
            continue
        if std.empty:
            checks.append(Check(**base, scope=f"{task} / {arch}", verdict=NO_DATA,
                                measurement="no LayerNorm-free runs of the standard "
                                            "initialisation (prior random_noln) to compare "
                                            "with"))
            continue
        depths = set(dt["depth"]) & set(std["depth"])
        if not depths:
            checks.append(Check(**base, scope=f"{task} / {arch}", verdict=NO_DATA,
                                measurement="no depth with both dtfixup and standard runs"))
            continue
        d = max(depths)
        dt_d, std_d = dt[dt["depth"] == d], std[std["depth"] == d]
        dt_ok, std_ok = int((dt_d["status"] == "ok").sum()), int((std_d["status"] == "ok").sum())
        text = (f"depth {d}: dtfixup {dt_ok}/{len(dt_d)} finished, standard {std_ok}/"
                f"{len(std_d)} finished")
        if dt_ok < len(dt_d):
            verdict = FAILS
        elif std_ok == 0:
            verdict = HOLDS
        else:
            c = contrast(pd.concat([dt_d, std_d]),
                         {"dtfixup": ({"prior": "dtfixup"}, 1),
                          "standard": ({"prior": "standard"}, -1)}, **boot)
            text += "; " + _contrast_text(c, "accuracy dtfixup - standard")
            verdict = _contrast_verdict(c)
        checks.append(Check(**base, scope=f"{task} / {arch}", measurement=text, verdict=verdict))
    if not checks:
        checks.append(Check(**base, scope="all", measurement="no dtfixup runs", verdict=NO_DATA))
    return checks


# --------------------------------------------------------------------------- more claims
# The rest of the papers' headline findings (issue 15). Each takes the runs or the
# fits, returns its checks and says in its rule which grid it needs.

DOWNSTREAM_PRIOR = "upstream"  # Tay et al.'s downstream numbers are of finetuned models


def mean_difference(a, b, *, n_boot: int = 1000, ci: float = 0.95, seed: int = 0) -> dict:
    """mean(a) - mean(b) of two independent groups of accuracies, with a percentile
    bootstrap interval resampling each group's runs (two runs needed in each)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    out = {"estimate": np.nan, "low": np.nan, "high": np.nan, "sizes": [], "status": "ok"}
    if a.size == 0 or b.size == 0:
        return {**out, "status": "a compared group has no finished run"}
    out["estimate"] = float(a.mean() - b.mean())
    if min(a.size, b.size) < 2:
        return {**out, "status": "no interval: a single run in a compared group"}
    if n_boot <= 0:
        return {**out, "status": "no interval: n_boot = 0"}
    rng = np.random.default_rng(seed)
    stats = (a[rng.integers(0, a.size, (n_boot, a.size))].mean(axis=1)
             - b[rng.integers(0, b.size, (n_boot, b.size))].mean(axis=1))
    out["low"], out["high"] = (float(q) for q in np.quantile(stats, [(1 - ci) / 2,
                                                                      (1 + ci) / 2]))
    return out


def _diff_text(d: dict, what: str) -> str:
    if np.isnan(d["estimate"]):
        return f"{what}: n/a ({d['status']})"
    text = f"{what} = {_fmt(d['estimate'], d['low'], d['high'])}"
    return text if d["status"] == "ok" else f"{text}; {d['status']}"


def _ok(runs: pd.DataFrame) -> pd.DataFrame:
    return runs[(runs["status"] == "ok") & np.isfinite(runs["test_acc"])]


def switch_transfers_best(fits: pd.DataFrame) -> list[Check]:
    """Tay et al. 2022: the Switch Transformer has the highest alpha_U,D (its
    downstream error falls the most per unit of upstream loss)."""
    base = dict(
        claim="Switch has the highest alpha_U,D",
        source=f"{TAY}, §1 (summary of findings) and §4 (the alpha_U,D of each architecture: "
               "downstream against upstream performance)",
        rule="per task, the log-log slope alpha_U,D of downstream error against upstream "
             "loss (upstream prior, at least three sizes of every architecture); Switch's "
             f"interval against every other architecture's: {INTERVAL_RULE}; holds only "
             "when it lies above all",
    )
    tasks = sorted(select(fits, "alpha_UD")["task"].unique())
    checks = []
    for task in tasks:
        rows = select(fits, "alpha_UD", task=task)
        sw = _one(fits, "alpha_UD", task=task, arch="switch")
        if not _usable(sw):
            why = "no upstream-prior runs of switch" if sw is None else _fit_text(sw)
            checks.append(Check(**base, scope=task, measurement=f"switch alpha_U,D: {why}",
                                verdict=NO_DATA))
            continue
        others = [r for _, r in rows[rows["arch"] != "switch"].iterrows()]
        usable = [r for r in others if _usable(r)]
        text = f"switch alpha_U,D = {_fit_text(sw)}"
        if not usable:
            checks.append(Check(**base, scope=task, verdict=NO_DATA,
                                measurement=text + "; no other architecture has an alpha_U,D"))
            continue
        seps = {r["arch"]: separation(sw["alpha_low"], sw["alpha_high"], r["alpha_low"],
                                      r["alpha_high"]) for r in usable}
        best = max(usable, key=lambda r: r["alpha"])
        text += (f"; largest other: {best['arch']} {_fit_text(best)}; switch above "
                 f"{sum(v == 'above' for v in seps.values())} of {len(seps)}")
        for label, kind in (("below", "below"), ("overlapping", "overlap")):
            archs = [a for a, v in seps.items() if v == kind]
            if archs:
                text += f"; {label}: {', '.join(archs)}"
        skipped = [f"{r['arch']} ({r['status']})" for r in others if not _usable(r)]
        if skipped:
            text += f"; not compared: {', '.join(skipped)}"
        verdict = HOLDS if all(v == "above" for v in seps.values()) else FAILS
        checks.append(Check(**base, scope=task, measurement=text, verdict=verdict))
    if not checks:
        checks.append(Check(**base, scope="all", measurement="no alpha_U,D fits (no runs of "
                                                             "the upstream prior)",
                            verdict=NO_DATA))
    return checks


def spearman(x, y) -> np.ndarray:
    """Spearman's rank correlation (average ranks for ties) of each row of `x`
    with the same row of `y` (1-D: one value); NaN where a row is constant."""
    from scipy.stats import rankdata

    rx, ry = (rankdata(np.atleast_2d(v), axis=1) for v in (x, y))
    rx, ry = rx - rx.mean(axis=1, keepdims=True), ry - ry.mean(axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        rho = (rx * ry).sum(axis=1) / np.sqrt((rx**2).sum(axis=1) * (ry**2).sum(axis=1))
    return rho if np.ndim(x) > 1 else rho[0]


def _boot_means(groups: list[np.ndarray], rng, n_boot: int) -> np.ndarray:
    """[n_boot, len(groups)]: each group's mean over its runs resampled."""
    return np.stack([g[rng.integers(0, g.size, (n_boot, g.size))].mean(axis=1)
                     for g in groups], axis=1)


def best_arch_changes_with_scale(runs: pd.DataFrame, *, n_boot: int = 1000, ci: float = 0.95,
                                 seed: int = 0) -> list[Check]:
    """Tay et al. 2022: the best architecture at one scale is not the best at
    another; the architectures' ranking at the smallest size differs from the
    ranking at the largest."""
    base = dict(
        claim="The best architecture changes with scale",
        source=f"{TAY}, §1 (summary of findings: 'the best performing model can fluctuate "
               "at different scales') and §4 (the per-scale comparisons)",
        rule="per task and prior (and scaling protocol, where runs of several are "
             "collected together): Spearman's rank correlation rho between the architectures' "
             "mean test accuracy at the smallest and at the largest size of the grid (sizes "
             "ordered by parameters; the architectures with finished runs at both, at least "
             "three; two runs per cell for an interval). Interval: percentile bootstrap "
             "resampling runs within each architecture x size cell. Holds when the interval "
             "lies below 1 (the two rankings differ in all but a tail of the resamples); does "
             "not hold when it reaches 1; not enough data with fewer than three architectures "
             "or two sizes, or a single run in some cell. Crossings: the pairs whose order of "
             "mean accuracy flips between the two sizes",
    )
    runs_t = _ok(task_runs(runs))
    several = runs_t["protocol"].nunique() > 1  # runs of two studies collected together
    checks = []
    for (task, prior, protocol), r in sorted(runs_t.groupby(["task", "prior", "protocol"]),
                                             key=lambda kv: kv[0]):
        scope = f"{task} / {prior}" + (f" / {protocol} protocol" if several else "")
        order = size_order(r)
        if len(order) < 2:
            checks.append(Check(**base, scope=scope, verdict=NO_DATA,
                                measurement=f"sizes: {', '.join(order) or 'none'} (< 2)"))
            continue
        small, large = order[0], order[-1]
        cells = {(a, s): g["test_acc"].to_numpy(float)
                 for (a, s), g in r[r["size"].isin([small, large])].groupby(["arch", "size"])}
        rank = {a: i for i, a in enumerate(ARCHITECTURES)}
        archs = sorted({a for a, _ in cells if (a, small) in cells and (a, large) in cells},
                       key=lambda a: (rank.get(a, len(rank)), a))
        if len(archs) < 3:
            checks.append(Check(**base, scope=scope, verdict=NO_DATA,
                                measurement=f"{len(archs)} architecture(s) with runs at both "
                                            f"{small} and {large} (< 3)"))
            continue
        at_small = np.array([cells[a, small].mean() for a in archs])
        at_large = np.array([cells[a, large].mean() for a in archs])
        rho = float(spearman(at_small, at_large))
        best_small, best_large = archs[int(at_small.argmax())], archs[int(at_large.argmax())]
        crossings = [(a, b) for i, a in enumerate(archs) for j, b in enumerate(archs)
                     if i < j and (at_small[i] - at_small[j]) * (at_large[i] - at_large[j]) < 0]
        # The crossings of the two leaders first; the list is cut at MAX_NAMED.
        crossings.sort(key=lambda p: not {best_small, best_large} & set(p))
        named = ", ".join(f"{a}/{b}" for a, b in crossings[:MAX_NAMED])
        if len(crossings) > MAX_NAMED:
            named += f" (and {len(crossings) - MAX_NAMED} more)"
        n_pairs = len(archs) * (len(archs) - 1) // 2
        low = high = np.nan
        single = min(cells[a, s].size for a in archs for s in (small, large)) < 2
        if not single and n_boot > 0:
            rng = np.random.default_rng(seed)
            bs, bl = (_boot_means([cells[a, size] for a in archs], rng, n_boot)
                      for size in (small, large))
            reps = spearman(bs, bl)
            reps = reps[np.isfinite(reps)]
            if reps.size:
                low, high = (float(q) for q in np.quantile(reps, [(1 - ci) / 2, (1 + ci) / 2]))
        text = (f"rho({small}, {large}) over {len(archs)} architectures = "
                f"{_fmt(rho, low, high)}; best at {small}: {best_small}, at {large}: "
                f"{best_large}; {len(crossings)} of {n_pairs} pairs cross: {named or 'none'}")
        if np.isnan(high):
            verdict = NO_DATA
            text += "; no interval (a single run in some cell)" if single else "; no interval"
        else:
            verdict = HOLDS if high < 1 else FAILS
        checks.append(Check(**base, scope=scope, measurement=text, verdict=verdict))
    if not checks:
        checks.append(Check(**base, scope="all", measurement="no task runs", verdict=NO_DATA))
    return checks


MAX_NAMED = 8  # crossings named in a measurement
DEPTH_WIDTH_ARCHS = ("mos", "transformer", "evolved", "lconv")


def depth_beats_width(runs: pd.DataFrame, **boot) -> list[Check]:
    """Tay et al. 2022: scaling depth improves downstream performance more than
    scaling width, for MoS, the Transformer, the Evolved Transformer and LConv."""
    base = dict(
        claim="Depth scaling helps downstream more than width scaling",
        source=f"{TAY}, §4.3 (scaling protocols: depth against width, MoS-Transformer, "
               "Transformer, Evolved Transformer, LConv)",
        rule="per task, architecture and prior: test accuracy of the `depth` protocol minus "
             "the `width` protocol (train.protocol; one study per protocol, their runs "
             "collected together) at the sizes where both have runs and build different "
             "shapes (the anchor size xs builds the same under both and is left out), "
             "which keep the same ~12 L D^2 budget (up to whole blocks and widths); mean "
             "over those sizes. "
             f"{CONTRAST_RULE}",
    )
    runs_t = task_runs(runs)
    runs_t = runs_t[runs_t["protocol"].isin(["depth", "width"])]
    checks = []
    for (task, arch), r in _by_task_arch(runs_t):
        if arch not in DEPTH_WIDTH_ARCHS:
            continue
        for prior, rp in sorted(r.groupby("prior"), key=lambda kv: kv[0]):
            scope = f"{task} / {arch} / {prior}"
            protocols = set(rp["protocol"])
            if protocols != {"depth", "width"}:
                missing = ({"depth", "width"} - protocols).pop()
                checks.append(Check(**base, scope=scope, verdict=NO_DATA,
                                    measurement=f"no runs of the {missing} protocol"))
                continue
            shapes = rp.groupby(["size", "protocol"])[["depth", "width"]].first()
            distinct = [s for s in rp["size"].unique()
                        if (s, "depth") in shapes.index and (s, "width") in shapes.index
                        and tuple(shapes.loc[(s, "depth")]) != tuple(shapes.loc[(s, "width")])]
            c = contrast(rp[rp["size"].isin(distinct)],
                         {"depth": ({"protocol": "depth"}, 1),
                          "width": ({"protocol": "width"}, -1)}, **boot)
            checks.append(Check(**base, scope=scope, verdict=_contrast_verdict(c),
                                measurement=_contrast_text(c, "depth - width accuracy")))
    if not checks:
        checks.append(Check(**base, scope="all", verdict=NO_DATA,
                            measurement="no runs of mos, transformer, evolved or lconv under "
                                        "the depth and width protocols"))
    return checks


def _downstream_scopes(fits: pd.DataFrame, arch: str):
    """(scope, metric, filter) of an architecture's upstream and downstream alphas."""
    tasks = sorted(select(fits, "alpha_D", prior=DOWNSTREAM_PRIOR)["task"].unique())
    return [(f"{arch}: upstream alpha_U", "alpha_U", {})] + [
        (f"{arch}: {t} alpha_D ({DOWNSTREAM_PRIOR} prior)", "alpha_D",
         {"task": t, "prior": DOWNSTREAM_PRIOR}) for t in tasks]


def minimal_variants_scale_like_transformer(fits: pd.DataFrame) -> list[Check]:
    """Tay et al. 2022: the minimal changes to the Transformer (GLU feed-forward,
    mixture of softmaxes) scale like it."""
    base = dict(
        claim="GLU and MoS scale like the Transformer",
        source=f"{TAY}, §1 (summary of findings: the models closest to the vanilla "
               "Transformer scale like it) and §4 (alpha of each architecture)",
        rule="each variant's alpha (upstream alpha_U; downstream alpha_D per task, "
             "upstream prior; at least three sizes) against the transformer's interval: "
             "holds when the variant's estimate lies within the transformer's interval; "
             "does not hold when it lies outside; not enough data when a fit is missing, "
             "refused, or the transformer's has no interval",
    )
    checks = []
    for arch in ("glu", "mos"):
        for scope, metric, where in _downstream_scopes(fits, arch):
            v = _one(fits, metric, arch=arch, **where)
            tf = _one(fits, metric, arch="transformer", **where)
            v_ok = v is not None and v["status"] == "ok" and np.isfinite(v["alpha"])
            if not (v_ok and _usable(tf)):
                parts = [f"{name}: {'no runs' if row is None else _fit_text(row)}"
                         for name, row, good in ((arch, v, v_ok), ("transformer", tf,
                                                                    _usable(tf))) if not good]
                checks.append(Check(**base, scope=scope, measurement="; ".join(parts),
                                    verdict=NO_DATA))
                continue
            inside = tf["alpha_low"] <= v["alpha"] <= tf["alpha_high"]
            text = (f"{arch} {_fit_text(v)} vs transformer {_fit_text(tf)}: estimate "
                    f"{'inside' if inside else 'outside'} the transformer's interval")
            checks.append(Check(**base, scope=scope, measurement=text,
                                verdict=HOLDS if inside else FAILS))
    return checks


def flat_or_negative_downstream(fits: pd.DataFrame) -> list[Check]:
    """Tay et al. 2022: Mixer, Performer and ALBERT scale flat or negatively
    downstream."""
    base = dict(
        claim="Mixer, Performer and ALBERT scale flat or negatively downstream",
        source=f"{TAY}, §1 (summary of findings: ALBERT 'scales negatively', Performer and "
               "MLP-Mixer scale poorly) and §4 (downstream scaling per architecture)",
        rule="downstream alpha_D per task (upstream prior, at least three sizes): holds when "
             "its interval reaches 0 or below (no positive scaling shown); does not hold when "
             "the interval lies above 0; not enough data when the fit is missing, refused or "
             "has no interval. A wide interval passes: read it with the measurement",
    )
    tasks = sorted(select(fits, "alpha_D", prior=DOWNSTREAM_PRIOR)["task"].unique())
    checks = []
    for arch in ("mixer", "performer", "albert"):
        for task in tasks:
            row = _one(fits, "alpha_D", arch=arch, task=task, prior=DOWNSTREAM_PRIOR)
            scope = f"{arch}: {task} alpha_D ({DOWNSTREAM_PRIOR} prior)"
            if not _usable(row):
                checks.append(Check(**base, scope=scope, verdict=NO_DATA, measurement=(
                    "no runs" if row is None else _fit_text(row))))
                continue
            flat = row["alpha_low"] <= 0
            text = f"alpha_D = {_fit_text(row)}: {'reaches 0 or below' if flat else 'above 0'}"
            tf = _one(fits, "alpha_D", arch="transformer", task=task, prior=DOWNSTREAM_PRIOR)
            if tf is not None:  # the reference: does the transformer itself scale here?
                text += f" (transformer: {_fit_text(tf)})"
            checks.append(Check(**base, scope=scope, verdict=HOLDS if flat else FAILS,
                                measurement=text))
    if not checks:
        checks.append(Check(**base, scope="all", verdict=NO_DATA,
                            measurement=f"no alpha_D of the {DOWNSTREAM_PRIOR} prior"))
    return checks


def _per_size_gain(r: pd.DataFrame, prior: str, control: str, boot: dict) -> tuple[str, str]:
    """(measurement, verdict) of `prior` minus `control` accuracy at every size of `r`:
    holds when every size's interval lies above 0."""
    ok = _ok(r)
    parts, verdicts = [], []
    for size in size_order(r):
        at = ok[ok["size"] == size]
        d = mean_difference(at.loc[at["prior"] == prior, "test_acc"],
                            at.loc[at["prior"] == control, "test_acc"], **boot)
        parts.append(_diff_text(d, size))
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
    for (task, arch), r in _by_task_arch(runs_t):
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
        _, _, reduction, parts = _gap_under_spt(
            runs_t[runs_t["task"] == task], "s4", "s4_unstructured", boot)
        checks.append(Check(**base, scope=task, measurement="; ".join(parts),
                            verdict=_contrast_verdict(reduction)))
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
    for (task, arch), r in _by_task_arch(runs_t):
        if not set(SPT_OBJECTIVES) & set(r["prior"]):
            continue
        for prior, (control, objective) in SPT_OBJECTIVES.items():
            c = contrast(r, {prior: ({"prior": prior}, 1), control: ({"prior": control}, -1)},
                         **boot)
            checks.append(Check(**base, scope=f"{task} / {arch} / {objective}",
                                measurement=_contrast_text(c, f"{prior} - {control}"),
                                verdict=_contrast_verdict(c)))
    if not checks:
        checks.append(Check(**base, scope="all", measurement="no spt or spt_causal runs",
                            verdict=NO_DATA))
    return checks


def _standard_noln(r: pd.DataFrame) -> pd.Series:
    """LayerNorm-free runs of the standard init: random_noln, or random with norm none."""
    return (r["prior"] == "random_noln") | (r["prior"].eq("random") & r["norm"].eq("none"))


def dtfixup_deeper_is_better(runs: pd.DataFrame, **boot) -> list[Check]:
    """Xu et al. 2021: with DT-Fixup, deeper LayerNorm-free stacks generalise better
    on small data, where the standard recipe degrades or fails with depth."""
    base = dict(
        claim="Under DT-Fixup deeper stacks generalise better; the standard recipe does not",
        source=f"{XU}, abstract, §1 and §5 (deeper DT-Fixup models improve on small "
               "datasets, Spider and ReClor; the standard recipe cannot train them)",
        rule="per task and architecture, at the width with most depths that have both "
             "dtfixup and standard LayerNorm-free runs (random_noln, or random with "
             "train.norm none; e.g. the depth protocol), shallowest and deepest of those "
             "depths (two runs per cell): rise = accuracy at the deepest minus at the "
             "shallowest, percentile bootstrap over runs. Holds when dtfixup's rise lies "
             "above 0 and the standard recipe degrades (its rise lies below 0) or fails "
             "(every standard run at the deepest depth diverged or failed); does not hold "
             "when dtfixup's rise does not lie above 0, dtfixup fails at the deepest depth, "
             "or the standard recipe neither degrades nor fails; otherwise not enough data",
    )
    runs_t = task_runs(runs)
    checks = []
    for (task, arch), r in _by_task_arch(runs_t):
        dt, std = r[r["prior"] == "dtfixup"], r[_standard_noln(r)]
        if dt.empty:
            continue
        scope = f"{task} / {arch}"
        shared = {w: sorted(set(dt.loc[dt["width"] == w, "depth"])
                            & set(std.loc[std["width"] == w, "depth"]))
                  for w in set(dt["width"])}
        width = max(shared, key=lambda w: (len(shared[w]), w))
        depths = shared[width]
        if len(depths) < 2:
            checks.append(Check(**base, scope=scope, verdict=NO_DATA, measurement=(
                "fewer than two depths at one width with both dtfixup and standard "
                "LayerNorm-free runs")))
            continue
        lo, hi = depths[0], depths[-1]

        def at(frame, depth, width=width):
            return frame[(frame["width"] == width) & (frame["depth"] == depth)]

        def rise(frame, lo=lo, hi=hi):
            return mean_difference(_ok(at(frame, hi))["test_acc"],
                                   _ok(at(frame, lo))["test_acc"], **boot)

        dt_deep, std_deep = at(dt, hi), at(std, hi)
        dt_failed = int((dt_deep["status"] != "ok").sum())
        std_failed = int((std_deep["status"] != "ok").sum())
        d_rise = rise(dt)
        text = (f"width {width}, depth {lo} -> {hi}: "
                + _diff_text(d_rise, "dtfixup rise")
                + f" ({dt_failed}/{len(dt_deep)} failed at depth {hi})")
        std_fails = std_failed == len(std_deep)
        if std_fails:
            text += f"; standard: all {len(std_deep)} runs at depth {hi} diverged or failed"
            s_rise = None
        else:
            s_rise = rise(std)
            text += (f"; {_diff_text(s_rise, 'standard rise')} ({std_failed}/{len(std_deep)} "
                     f"failed at depth {hi})")
        if dt_failed == len(dt_deep):
            verdict = FAILS
        elif d_rise["status"] != "ok" or (s_rise is not None and s_rise["status"] != "ok"):
            verdict = NO_DATA
        else:
            std_bad = std_fails or s_rise["high"] < 0
            verdict = HOLDS if d_rise["low"] > 0 and std_bad else FAILS
        checks.append(Check(**base, scope=scope, measurement=text, verdict=verdict))
    if not checks:
        checks.append(Check(**base, scope="all", measurement="no dtfixup runs", verdict=NO_DATA))
    return checks


def evaluate(runs: pd.DataFrame, fits: pd.DataFrame, *, n_boot: int = 1000, ci: float = 0.95,
             seed: int = 0) -> pd.DataFrame:
    """Every check of every claim, one row each (columns of `Check`)."""
    boot = {"n_boot": n_boot, "ci": ci, "seed": seed}
    checks = [
        *vanilla_scales_best_upstream(fits),
        *performer_albert_scale_poorly(fits),
        *spt_closes_s4_gap(runs, **boot),
        *spt_beats_matched(runs, **boot),
        *dtfixup_trains_deep(runs, **boot),
        *switch_transfers_best(fits),
        *best_arch_changes_with_scale(runs, **boot),
        *depth_beats_width(runs, **boot),
        *minimal_variants_scale_like_transformer(fits),
        *flat_or_negative_downstream(fits),
        *spt_beats_random_every_size(runs, **boot),
        *structure_redundant_under_spt(runs, **boot),
        *spt_works_with_both_objectives(runs, **boot),
        *dtfixup_deeper_is_better(runs, **boot),
    ]
    return pd.DataFrame([c.as_dict() for c in checks])


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


def write_claims(runs: pd.DataFrame, fits: pd.DataFrame, path: Path, *, n_boot: int = 1000,
                 ci: float = 0.95, seed: int = 0) -> pd.DataFrame:
    """Evaluate every claim and write claims.md to `path`; returns the checks."""
    checks = evaluate(runs, fits, n_boot=n_boot, ci=ci, seed=seed)
    study = ", ".join(sorted(runs["study"].dropna().unique())) if len(runs) else ""
    write_text_atomic(claims_markdown(checks, study, ci, runs), path)
    return checks
