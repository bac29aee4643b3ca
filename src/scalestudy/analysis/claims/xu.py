"""The claims of Xu et al. 2021, "Optimizing Deeper Transformers on Small
Datasets" (ACL 2021, arXiv:2012.15355): each function measures one claim on a
study and decides each scope; the priors it is about are its parameters (the
claim registry's entry, claims/__init__.py).
"""

from __future__ import annotations

import pandas as pd

from ..fits import task_runs
from .check import (
    FAILS,
    HOLDS,
    NO_DATA,
    PREMISE_NOT_SHOWN,
    UNDECIDED,
    Evidence,
    Scope,
    above,
    all_of,
    below,
    by_task_arch,
    finished,
    given,
    stat_text,
)
from .contrasts import contrast, mean_difference


def _standard(r: pd.DataFrame, standard: tuple[str, ...]) -> pd.DataFrame:
    """LayerNorm-free runs of the standard init: a `standard` prior with norm none."""
    return r[r["prior"].isin(standard) & r["norm"].eq("none")]


def _standard_fails(r: pd.DataFrame, std_d: pd.DataFrame, depth: int, normed: str,
                    study: Evidence) -> tuple[str, str]:
    """The premise of the DT-Fixup claims at `depth`: the standard LayerNorm-free
    recipe fails there: half its runs or more diverged or failed, or its accuracy
    lies below the same stack with LayerNorm (prior `normed`, norm not none).
    Returns the premise's verdict and what was measured."""
    failed = int((std_d["status"] != "ok").sum())
    if 2 * failed >= len(std_d):
        return HOLDS, f"standard: {failed} of {len(std_d)} runs diverged or failed"
    ln = r[(r["prior"] == normed) & r["norm"].ne("none") & (r["depth"] == depth)]
    if finished(ln).empty:
        return UNDECIDED, (f"standard: {failed} of {len(std_d)} runs diverged or failed, "
                           f"and no {normed} runs with LayerNorm at depth {depth} to compare")
    c = contrast(pd.concat([ln.assign(prior="layernorm"), std_d.assign(prior="standard")]),
                 {"layernorm": ({"prior": "layernorm"}, 1),
                  "standard": ({"prior": "standard"}, -1)}, **study.boot)
    return above(c), (f"standard: {failed} of {len(std_d)} runs diverged or failed; "
                      + stat_text(c, "accuracy with LayerNorm - standard"))


def trains_deep(study: Evidence, *, treatment: str, standard: tuple[str, ...], normed: str,
                archs: tuple[str, ...]) -> list[Scope]:
    """Per task and architecture of `archs`, at the deepest depth with runs of
    both: the premise (`_standard_fails`) first; then does not hold if a
    treatment run diverged or failed; holds if every treatment run finished and
    every standard run diverged or failed; otherwise treatment minus standard
    accuracy above 0."""
    out = []
    for (task, arch), r in by_task_arch(task_runs(study.runs)):
        dt, std = r[r["prior"] == treatment], _standard(r, standard).assign(prior="standard")
        if dt.empty or arch not in archs:
            continue
        scope = f"{task} / {arch}"
        depths = set(dt["depth"]) & set(std["depth"])
        if not depths:
            out.append(Scope(scope, f"no depth with both {treatment} and LayerNorm-free runs "
                                    f"of {', '.join(standard)}", NO_DATA))
            continue
        d = max(depths)
        dt_d, std_d = dt[dt["depth"] == d], std[std["depth"] == d]
        dt_ok, std_ok = int((dt_d["status"] == "ok").sum()), int((std_d["status"] == "ok").sum())
        premise, why = _standard_fails(r, std_d, d, normed, study)
        text = f"depth {d}: {why}; {treatment} {dt_ok}/{len(dt_d)} finished"
        if premise != HOLDS:
            text += f"; {PREMISE_NOT_SHOWN}: the standard recipe does not fail at depth {d}"
        if dt_ok < len(dt_d):
            verdict = FAILS
        elif std_ok == 0:
            verdict = HOLDS
        else:
            c = contrast(pd.concat([dt_d, std_d]), {
                treatment: ({"prior": treatment}, 1), "standard": ({"prior": "standard"}, -1)},
                **study.boot)
            text += "; " + stat_text(c, f"accuracy {treatment} - standard")
            verdict = above(c)
        out.append(Scope(scope, text, given(premise, verdict)))
    return out or [Scope("all", f"no {treatment} runs of {', '.join(archs)}", NO_DATA)]


def deeper_is_better(study: Evidence, *, treatment: str, standard: tuple[str, ...],
                     archs: tuple[str, ...]) -> list[Scope]:
    """Per task and architecture, at the width with most depths that have both
    treatment and standard LayerNorm-free runs, shallowest and deepest of those
    depths: the treatment's rise in accuracy lies above 0 and the standard recipe
    degrades (its rise below 0) or fails (every run at the deepest depth diverged
    or failed)."""
    out = []
    for (task, arch), r in by_task_arch(task_runs(study.runs)):
        dt, std = r[r["prior"] == treatment], _standard(r, standard)
        if dt.empty or arch not in archs:
            continue
        scope = f"{task} / {arch}"
        shared = {w: sorted(set(dt.loc[dt["width"] == w, "depth"])
                            & set(std.loc[std["width"] == w, "depth"]))
                  for w in set(dt["width"])}
        width = max(shared, key=lambda w: (len(shared[w]), w))
        depths = shared[width]
        if len(depths) < 2:
            out.append(Scope(scope, f"fewer than two depths at one width with both {treatment} "
                                    "and standard LayerNorm-free runs", NO_DATA))
            continue
        lo, hi = depths[0], depths[-1]

        def at(frame, depth, width=width):
            return frame[(frame["width"] == width) & (frame["depth"] == depth)]

        def rise(frame, lo=lo, hi=hi):
            return mean_difference(finished(at(frame, hi))["test_acc"],
                                   finished(at(frame, lo))["test_acc"], ci=study.ci)

        dt_deep, std_deep = at(dt, hi), at(std, hi)
        dt_failed = int((dt_deep["status"] != "ok").sum())
        std_failed = int((std_deep["status"] != "ok").sum())
        d_rise = rise(dt)
        text = (f"width {width}, depth {lo} -> {hi}: {stat_text(d_rise, f'{treatment} rise')}"
                f" ({dt_failed}/{len(dt_deep)} failed at depth {hi})")
        if std_failed == len(std_deep):
            text += f"; standard: all {len(std_deep)} runs at depth {hi} diverged or failed"
            std_bad = HOLDS
        else:
            s_rise = rise(std)
            text += (f"; {stat_text(s_rise, 'standard rise')} ({std_failed}/{len(std_deep)} "
                     f"failed at depth {hi})")
            std_bad = below(s_rise)
        verdict = FAILS if dt_failed == len(dt_deep) else all_of(above(d_rise), std_bad)
        out.append(Scope(scope, text, verdict))
    return out or [Scope("all", f"no {treatment} runs of {', '.join(archs)}", NO_DATA)]
