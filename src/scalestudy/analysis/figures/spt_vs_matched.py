"""Figure `spt_vs_matched`: `draw` composes its file of `panel`s, one per task
(`panel` draws one into any Axes: the notebook API).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..fits import task_runs
from .layout import label_outer, panel_figure, tasks_of
from .marks import MAX_PANEL_LEGEND, arch_legends, mean_acc, seed_errorbar
from .output import Drawn, NotDrawn, figure_title, save
from .style import NEUTRAL, arch_rank, arch_style, styled


def spt_vs_matched(runs: pd.DataFrame, treated: str, control: str) -> pd.DataFrame:
    """Per (task, arch, size) with finished runs under both: the mean test
    accuracy over seeds of the pretrained prior (`treated`: spt) and of its
    compute-matched control (`control`: scratch_matched), their standard
    deviations (`*_sd`) and seed counts (`*_n`); columns named by the priors."""
    cols = ["task", "arch", "size", treated, control, f"{treated}_sd", f"{control}_sd",
            f"{treated}_n", f"{control}_n"]
    acc = mean_acc(task_runs(runs), ["task", "arch", "size", "prior"])
    acc = acc[acc["prior"].isin([treated, control])]
    if set(acc["prior"]) != {treated, control}:
        return pd.DataFrame(columns=cols)
    wide = acc.pivot_table(index=["task", "arch", "size"], columns="prior",
                           values=["mean", "sd", "count"])
    out = pd.DataFrame({
        **{p: wide[("mean", p)] for p in (treated, control)},
        **{f"{p}_sd": wide[("sd", p)] if ("sd", p) in wide else np.nan
           for p in (treated, control)},
        **{f"{p}_n": wide[("count", p)] for p in (treated, control)},
    })
    return out.dropna(subset=[treated, control]).reset_index()[cols]


@styled
def panel(ax, runs, fits, task: str, treated: str, control: str) -> None:
    """On `task`, the pretrained prior's test accuracy (`treated`) against its
    compute-matched control's, one point per arch and size (mean over seeds,
    +-1 sd both ways), with the diagonal; NotDrawn without a pair."""
    pairs = spt_vs_matched(runs, treated, control)
    p = pairs[pairs["task"] == task]
    if p.empty:
        raise NotDrawn(f"no architecture and size of {task} with finished runs under both "
                       f"{treated} and {control}")
    _panel(ax, p, *_limits(p, treated, control), treated, control)


def _limits(pairs, treated, control):
    lo = min(pairs[treated].min(), pairs[control].min())
    hi = max(pairs[treated].max(), pairs[control].max())
    return lo, hi, 0.08 * max(hi - lo, 0.02)


def _panel(ax, p, lo, hi, pad, treated, control) -> None:
    task = p["task"].iloc[0]
    ax.set_title(task)
    ax.set_label(task)
    # The diagonal: equal accuracy at equal compute.
    ax.plot([lo - pad, hi + pad], [lo - pad, hi + pad], color=NEUTRAL, linewidth=0.8)
    for arch, cell in sorted(p.groupby("arch", sort=False), key=lambda kv: arch_rank(kv[0])):
        stats = cell.rename(columns={treated: "mean", f"{treated}_sd": "sd",
                                     f"{treated}_n": "n"})
        xerr = cell[f"{control}_sd"].where(cell[f"{control}_n"] > 1).to_numpy(float)
        seed_errorbar(ax, cell[control], stats, f"points:{arch}", label=arch,
                      xerr=xerr, linestyle="none", **arch_style(arch))
        if p["arch"].nunique() <= MAX_PANEL_LEGEND:  # few points: name their sizes
            for _, row in cell.iterrows():
                ax.annotate(row["size"], (row[control], row[treated]), fontsize=6,
                            xytext=(3, -8), textcoords="offset points")
    ax.set_xlim(lo - pad, hi + pad)
    ax.set_ylim(lo - pad, hi + pad)
    ax.set_aspect("equal")
    ax.set_xlabel(f"compute-matched control ({control}): test accuracy")
    ax.set_ylabel(f"{treated}: test accuracy")


@styled
def draw(runs, fits, out_dir, tasks=None, treated: str = "", control: str = "") -> Drawn:
    """SPT's test accuracy against the compute-matched control's (random init
    trained for SPT's pretraining plus finetuning FLOPs), one point per arch and
    size (mean over seeds, +-1 sd both ways): above the diagonal, SPT wins at equal
    compute (Amos et al. 2023)."""
    tasks = tasks_of(runs, tasks)
    pairs = spt_vs_matched(runs, treated, control)
    if pairs.empty:
        priors = set(task_runs(runs)["prior"])
        missing = [p for p in (treated, control) if p not in priors]
        if missing:
            why = " and ".join(f"`{p}`" for p in missing)
            raise NotDrawn(f"no {why} runs: the study's priors lack "
                           f"{'them' if len(missing) > 1 else 'it'}")
        raise NotDrawn(f"no architecture and size with finished runs under both {treated} "
                       f"and {control}")
    shown = [t for t in tasks if (pairs["task"] == t).any()]
    notes = [f"{t} (no {treated} and {control} pair)" for t in tasks if t not in shown]
    fig, axes = panel_figure(len(shown), size=(4.4, 4.4), sharex=True, sharey=True)
    limits = _limits(pairs, treated, control)
    for ax, task in zip(axes, shown, strict=True):
        _panel(ax, pairs[pairs["task"] == task], *limits, treated, control)
    label_outer(fig, axes)
    n = pd.concat([pairs[f"{treated}_n"], pairs[f"{control}_n"]])
    figure_title(fig, f"{treated} against its compute-matched control",
           f"mean ± 1 sd over {int(n.max())} seeds" if n.max() > 1 else "one run per point")
    arch_legends(fig, axes)
    return save(fig, out_dir, "spt_vs_matched", notes)
