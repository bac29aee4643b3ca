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
        r = runs_t[runs_t["task"] == task]
        cell = {("s4", "random"): 1, ("transformer", "random"): -1,
                ("s4", "spt"): -1, ("transformer", "spt"): 1}

        def c(weights, r=r):
            return contrast(r, {f"{a}/{p}": ({"arch": a, "prior": p}, w)
                                for (a, p), w in weights.items()}, **boot)

        gap_random = c({k: v for k, v in cell.items() if k[1] == "random"})
        gap_spt = c({k: -v for k, v in cell.items() if k[1] == "spt"})
        reduction = c(cell)
        parts = [_contrast_text(gap_random, "gap under random"),
                 _contrast_text(gap_spt, "gap under SPT"),
                 _contrast_text(reduction, "reduction")]
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
