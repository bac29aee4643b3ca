"""The claims of Xu et al. 2021, "Optimizing Deeper Transformers on Small
Datasets" (ACL 2021, arXiv:2012.15355).
"""

from __future__ import annotations

import pandas as pd

from ..fits import task_runs
from .check import (
    CONTRAST_RULE,
    FAILS,
    HOLDS,
    NO_DATA,
    XU,
    Check,
    by_task_arch,
    contrast_text,
    contrast_verdict,
    diff_text,
    finished,
)
from .stats import contrast, mean_difference


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
    for (task, arch), r in by_task_arch(runs_t):
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
            text += "; " + contrast_text(c, "accuracy dtfixup - standard")
            verdict = contrast_verdict(c)
        checks.append(Check(**base, scope=f"{task} / {arch}", measurement=text, verdict=verdict))
    if not checks:
        checks.append(Check(**base, scope="all", measurement="no dtfixup runs", verdict=NO_DATA))
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
    for (task, arch), r in by_task_arch(runs_t):
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
            return mean_difference(finished(at(frame, hi))["test_acc"],
                                   finished(at(frame, lo))["test_acc"], **boot)

        dt_deep, std_deep = at(dt, hi), at(std, hi)
        dt_failed = int((dt_deep["status"] != "ok").sum())
        std_failed = int((std_deep["status"] != "ok").sum())
        d_rise = rise(dt)
        text = (f"width {width}, depth {lo} -> {hi}: "
                + diff_text(d_rise, "dtfixup rise")
                + f" ({dt_failed}/{len(dt_deep)} failed at depth {hi})")
        std_fails = std_failed == len(std_deep)
        if std_fails:
            text += f"; standard: all {len(std_deep)} runs at depth {hi} diverged or failed"
            s_rise = None
        else:
            s_rise = rise(std)
            text += (f"; {diff_text(s_rise, 'standard rise')} ({std_failed}/{len(std_deep)} "
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
