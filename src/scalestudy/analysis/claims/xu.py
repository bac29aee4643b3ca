"""The claims of Xu et al. 2021, "Optimizing Deeper Transformers on Small
Datasets" (ACL 2021, arXiv:2012.15355): each function measures one claim on a
study and decides each scope; the priors it is about are its parameters (the
claim registry's entry, claims/__init__.py).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...tasks import TASKS
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
    shown,
    stat_text,
)
from .contrasts import mean_difference, welch


def _standard(r: pd.DataFrame, standard: tuple[str, ...]) -> pd.DataFrame:
    """LayerNorm-free runs of the standard init: a `standard` prior with norm none."""
    return r[r["prior"].isin(standard) & r["norm"].eq("none")]


def chance(task: str) -> float:
    """The accuracy of a uniform guess on `task`: one over its classes (the
    task's declared defaults; the stand-ins' classes are balanced: generated
    ListOps' largest class is 12% of its test split)."""
    entry = TASKS[task]
    return 1.0 / entry.module.n_classes(entry.config())


def _accuracy(runs: pd.DataFrame, ci: float) -> dict:
    """The mean test accuracy of finished runs with its t interval (Welch's of one cell)."""
    acc = finished(runs)["test_acc"].to_numpy(float)
    if acc.size == 0:
        return {"estimate": np.nan, "low": np.nan, "high": np.nan, "status": "no finished run"}
    return welch([(acc, 1.0, "runs")], ci)


def _fails(std_d: pd.DataFrame, floor: float, study: Evidence) -> tuple[str, str]:
    """The premise, Xu et al.'s: the standard LayerNorm-free recipe fails at the
    depth judged: half its runs or more diverged or failed, or it fails to train
    (its mean accuracy's interval below `floor`). Its verdict (HOLDS, UNDECIDED,
    NO_DATA) and what was measured."""
    failed = int((std_d["status"] != "ok").sum())
    text = f"standard: {failed} of {len(std_d)} runs diverged or failed"
    if 2 * failed >= len(std_d):
        return HOLDS, text
    acc = _accuracy(std_d, study.ci)
    return shown(below(acc, floor)), f"{text}; {stat_text(acc, 'its accuracy')}"


def trains_deep(study: Evidence, *, treatment: str, standard: tuple[str, ...],
                archs: tuple[str, ...], min_depth: int, over_chance: float) -> list[Scope]:
    """Per task and architecture of `archs`, at the deepest depth of at least
    `min_depth` blocks with runs of both: the premise (`_fails`, against the
    floor chance + `over_chance`) first; then the treatment trains there:
    does not hold if one of its runs diverged or failed or its mean accuracy's
    interval lies below the floor; holds if every run finished and that
    interval lies above the floor."""
    out = []
    for (task, arch), r in by_task_arch(task_runs(study.runs)):
        dt, std = r[r["prior"] == treatment], _standard(r, standard).assign(prior="standard")
        if dt.empty or arch not in archs:
            continue
        scope = f"{task} / {arch}"
        depths = {d for d in set(dt["depth"]) & set(std["depth"]) if d >= min_depth}
        if not depths:
            shallow = sorted(set(dt["depth"]) & set(std["depth"]))
            out.append(Scope(scope, f"no depth of {min_depth} blocks or more with both {treatment} "
                                    f"and LayerNorm-free runs of {', '.join(standard)} (depths "
                                    f"with both: {', '.join(map(str, shallow)) or 'none'}; "
                                    "deep: Xu et al. train 24 layers from scratch)", NO_DATA))
            continue
        d = max(depths)
        dt_d, std_d = dt[dt["depth"] == d], std[std["depth"] == d]
        floor = chance(task) + over_chance
        premise, why = _fails(std_d, floor, study)
        dt_ok = int((dt_d["status"] == "ok").sum())
        acc = _accuracy(dt_d, study.ci)
        text = (f"depth {d}, floor {floor:.3f} (chance {chance(task):.3f} + {over_chance:g}): "
                f"{why}; {treatment} {dt_ok}/{len(dt_d)} finished, "
                + stat_text(acc, f"{treatment} accuracy"))
        if premise == UNDECIDED:
            text += (f"; {PREMISE_NOT_SHOWN}: the standard recipe neither diverged nor failed "
                     f"to train at depth {d}")
        verdict = FAILS if dt_ok < len(dt_d) else above(acc, floor)
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
