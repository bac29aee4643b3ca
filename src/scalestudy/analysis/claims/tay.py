"""The claims of Tay et al. 2022, "Scaling Laws vs Model Architectures: How does
Inductive Bias Influence Scaling?" (arXiv:2207.10551).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...architectures import ARCHITECTURES
from ..fits import select, size_order, task_runs
from .check import (
    CONTRAST_RULE,
    FAILS,
    HOLDS,
    INTERVAL_RULE,
    NO_DATA,
    TAY,
    Check,
    by_task_arch,
    contrast_text,
    contrast_verdict,
    finished,
    fit_text,
    fmt,
    has_interval,
    one_fit,
)
from .stats import boot_means, contrast, separation, spearman


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
    tf = one_fit(fits, "alpha_U", arch="transformer")
    if not has_interval(tf):
        why = "no upstream runs of the transformer" if tf is None else fit_text(tf)
        return [Check(**base, measurement=f"transformer alpha_U: {why}", verdict=NO_DATA)]
    others = up[(up["arch"] != "transformer")]
    usable = [r for _, r in others.iterrows() if has_interval(r)]
    skipped = [f"{r['arch']} ({r['status']})" for _, r in others.iterrows() if not has_interval(r)]
    text = f"transformer alpha_U = {fit_text(tf)}"
    if not usable:
        return [Check(**base, measurement=text + "; no other architecture has an alpha_U"
                      + (f" (refused: {', '.join(skipped)})" if skipped else ""),
                      verdict=NO_DATA)]
    seps = {r["arch"]: separation(tf["alpha_low"], tf["alpha_high"], r["alpha_low"],
                                  r["alpha_high"]) for r in usable}
    best = max(usable, key=lambda r: r["alpha"])
    text += (f"; largest other: {best['arch']} {fit_text(best)}; transformer above "
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
            a = one_fit(fits, metric, arch=arch, **where)
            tf = one_fit(fits, metric, arch="transformer", **where)
            if not (has_interval(a) and has_interval(tf)):
                parts = [f"{name}: {'no runs' if r is None else fit_text(r)}"
                         for name, r in ((arch, a), ("transformer", tf)) if not has_interval(r)]
                checks.append(Check(**base, scope=scope, measurement="; ".join(parts),
                                    verdict=NO_DATA))
                continue
            sep = separation(a["alpha_low"], a["alpha_high"], tf["alpha_low"], tf["alpha_high"])
            text = f"{arch} {fit_text(a)} vs transformer {fit_text(tf)}: {sep}"
            checks.append(Check(**base, scope=scope, measurement=text,
                                verdict=HOLDS if sep == "below" else FAILS))
    if not checks:
        checks.append(Check(claim="Performer and ALBERT scale worse than the transformer",
                            source=TAY, rule=INTERVAL_RULE, scope="all",
                            measurement="no fits", verdict=NO_DATA))
    return checks



DOWNSTREAM_PRIOR = "upstream"  # Tay et al.'s downstream numbers are of finetuned models


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
        sw = one_fit(fits, "alpha_UD", task=task, arch="switch")
        if not has_interval(sw):
            why = "no upstream-prior runs of switch" if sw is None else fit_text(sw)
            checks.append(Check(**base, scope=task, measurement=f"switch alpha_U,D: {why}",
                                verdict=NO_DATA))
            continue
        others = [r for _, r in rows[rows["arch"] != "switch"].iterrows()]
        usable = [r for r in others if has_interval(r)]
        text = f"switch alpha_U,D = {fit_text(sw)}"
        if not usable:
            checks.append(Check(**base, scope=task, verdict=NO_DATA,
                                measurement=text + "; no other architecture has an alpha_U,D"))
            continue
        seps = {r["arch"]: separation(sw["alpha_low"], sw["alpha_high"], r["alpha_low"],
                                      r["alpha_high"]) for r in usable}
        best = max(usable, key=lambda r: r["alpha"])
        text += (f"; largest other: {best['arch']} {fit_text(best)}; switch above "
                 f"{sum(v == 'above' for v in seps.values())} of {len(seps)}")
        for label, kind in (("below", "below"), ("overlapping", "overlap")):
            archs = [a for a, v in seps.items() if v == kind]
            if archs:
                text += f"; {label}: {', '.join(archs)}"
        skipped = [f"{r['arch']} ({r['status']})" for r in others if not has_interval(r)]
        if skipped:
            text += f"; not compared: {', '.join(skipped)}"
        verdict = HOLDS if all(v == "above" for v in seps.values()) else FAILS
        checks.append(Check(**base, scope=task, measurement=text, verdict=verdict))
    if not checks:
        checks.append(Check(**base, scope="all", measurement="no alpha_U,D fits (no runs of "
                                                             "the upstream prior)",
                            verdict=NO_DATA))
    return checks



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
    runs_t = finished(task_runs(runs))
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
            bs, bl = (boot_means([cells[a, size] for a in archs], rng, n_boot)
                      for size in (small, large))
            reps = spearman(bs, bl)
            reps = reps[np.isfinite(reps)]
            if reps.size:
                low, high = (float(q) for q in np.quantile(reps, [(1 - ci) / 2, (1 + ci) / 2]))
        text = (f"rho({small}, {large}) over {len(archs)} architectures = "
                f"{fmt(rho, low, high)}; best at {small}: {best_small}, at {large}: "
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
    for (task, arch), r in by_task_arch(runs_t):
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
            checks.append(Check(**base, scope=scope, verdict=contrast_verdict(c),
                                measurement=contrast_text(c, "depth - width accuracy")))
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
            v = one_fit(fits, metric, arch=arch, **where)
            tf = one_fit(fits, metric, arch="transformer", **where)
            v_ok = v is not None and v["status"] == "ok" and np.isfinite(v["alpha"])
            if not (v_ok and has_interval(tf)):
                parts = [f"{name}: {'no runs' if row is None else fit_text(row)}"
                         for name, row, good in ((arch, v, v_ok), ("transformer", tf,
                                                                    has_interval(tf))) if not good]
                checks.append(Check(**base, scope=scope, measurement="; ".join(parts),
                                    verdict=NO_DATA))
                continue
            inside = tf["alpha_low"] <= v["alpha"] <= tf["alpha_high"]
            text = (f"{arch} {fit_text(v)} vs transformer {fit_text(tf)}: estimate "
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
            row = one_fit(fits, "alpha_D", arch=arch, task=task, prior=DOWNSTREAM_PRIOR)
            scope = f"{arch}: {task} alpha_D ({DOWNSTREAM_PRIOR} prior)"
            if not has_interval(row):
                checks.append(Check(**base, scope=scope, verdict=NO_DATA, measurement=(
                    "no runs" if row is None else fit_text(row))))
                continue
            flat = row["alpha_low"] <= 0
            text = f"alpha_D = {fit_text(row)}: {'reaches 0 or below' if flat else 'above 0'}"
            tf = one_fit(fits, "alpha_D", arch="transformer", task=task, prior=DOWNSTREAM_PRIOR)
            if tf is not None:  # the reference: does the transformer itself scale here?
                text += f" (transformer: {fit_text(tf)})"
            checks.append(Check(**base, scope=scope, verdict=HOLDS if flat else FAILS,
                                measurement=text))
    if not checks:
        checks.append(Check(**base, scope="all", verdict=NO_DATA,
                            measurement=f"no alpha_D of the {DOWNSTREAM_PRIOR} prior"))
    return checks
