"""Figure `arch_gap`: `draw` composes its file of `panel`s, one per task (`panel`
draws one into any Axes: the notebook API).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..fits import size_order, task_runs
from . import reference_arch
from .layout import finished_runs, label_outer, panel_figure, tasks_of
from .marks import mean_acc
from .output import Drawn, NotDrawn, figure_title, save
from .style import NEUTRAL, arch_style, prior_linestyle, styled


def arch_gap(runs: pd.DataFrame, priors: tuple[str, ...]) -> pd.DataFrame:
    """Per (task, prior, size): best architecture's mean test accuracy minus the
    reference architecture's (the vanilla transformer; rows only where it has
    finished runs), and the standard deviation of the per-seed gap over the
    seeds both have (`gap_sd`, NaN with fewer than two such seeds; `n_seeds`
    counts them). `reference_acc` is the reference's mean accuracy."""
    reference = reference_arch()
    t = finished_runs(task_runs(runs))
    acc = mean_acc(t, ["task", "prior", "size", "arch"])
    acc = acc[acc["prior"].isin(priors)]
    rows = []
    for (task, prior, size), g in acc.groupby(["task", "prior", "size"], sort=False):
        tf = g[g["arch"] == reference]
        if tf.empty:
            continue
        best = g.loc[g["mean"].idxmax()]
        cell = t[(t["task"] == task) & (t["prior"] == prior) & (t["size"] == size)]
        per_seed = cell.pivot_table(index="seed", columns="arch", values="test_acc")
        paired = (per_seed[best["arch"]] - per_seed[reference]).dropna()
        rows.append({"task": task, "prior": prior, "size": size, "best_arch": best["arch"],
                     "best_acc": best["mean"], "reference_acc": tf["mean"].iloc[0],
                     "gap": best["mean"] - tf["mean"].iloc[0], "n_archs": len(g),
                     "gap_sd": paired.std() if len(paired) > 1 else np.nan,
                     "n_seeds": len(paired)})
    return pd.DataFrame(rows, columns=["task", "prior", "size", "best_arch", "best_acc",
                                       "reference_acc", "gap", "n_archs", "gap_sd",
                                       "n_seeds"])


def _gaps(runs, priors) -> pd.DataFrame:
    """`arch_gap`'s rows where there is a gap to measure (two architectures)."""
    gaps = arch_gap(runs, priors)
    return gaps[gaps["n_archs"] >= 2]


@styled
def panel(ax, runs, fits, task: str, priors: tuple[str, ...] = ()) -> None:
    """On `task`, the best architecture's test accuracy minus the reference's
    against size, one line per prior of `priors`; each point in the style of
    the architecture best there, with +-1 sd bars of the per-seed gap.
    NotDrawn without a gap to measure."""
    gaps = _gaps(runs, priors)
    g = gaps[gaps["task"] == task]
    if g.empty:
        raise NotDrawn(f"no gap to measure on {task} under {' or '.join(priors)}: no size "
                       f"with finished runs of the {reference_arch()} and another architecture")
    _panel(ax, task_runs(runs), g, task, priors)


def _panel(ax, runs_t, g, task, priors) -> None:
    """One task's panel: `g` its gaps."""
    reference = reference_arch()
    ax.set_title(task)
    ax.set_label(task)
    sizes = size_order(runs_t[runs_t["task"] == task])
    pos = {s: i for i, s in enumerate(sizes)}
    for prior in priors:
        p = g[g["prior"] == prior].sort_values("size", key=lambda s: s.map(pos))
        if p.empty:
            continue
        x = p["size"].map(pos).to_numpy()
        (line,) = ax.plot(x, p["gap"], color=NEUTRAL, linestyle=prior_linestyle(prior),
                          label=prior)
        line.set_gid(f"gap:{prior}")
        for xi, (_, row) in zip(x, p.iterrows(), strict=True):
            style = arch_style(row["best_arch"])
            yerr = None if np.isnan(row["gap_sd"]) else [row["gap_sd"]]
            bars = ax.errorbar([xi], [row["gap"]], yerr=yerr, linestyle="none", **style)
            bars.lines[0].set_gid(f"best:{prior}:{row['size']}:{row['best_arch']}")
            ax.annotate(row["best_arch"], (xi, row["gap"]), fontsize=6.5,
                        xytext=(4, 3), textcoords="offset points", color=style["color"])
    ax.axhline(0, color=NEUTRAL, linewidth=0.6)
    ax.set_xticks(range(len(sizes)), sizes)
    ax.set_xlim(-0.4, len(sizes) - 0.6)
    ax.set_xlabel("size")
    ax.set_ylabel(f"accuracy gap (best - {reference})")
    ax.legend(title="prior", loc="upper left")


@styled
def draw(runs, fits, out_dir, tasks=None, priors: tuple[str, ...] = ()) -> Drawn:
    """The architecture gap (best minus vanilla transformer test accuracy) against
    size under random initialisation and under SPT (Amos et al. 2023), one panel
    per task with data (shared y); each point is drawn in the style of the
    architecture that is best there, with +-1 sd bars of the per-seed gap."""
    runs_t = task_runs(runs)
    tasks = tasks_of(runs, tasks)
    gaps = _gaps(runs, priors)
    reference = reference_arch()
    if gaps.empty:
        ok = finished_runs(runs_t)
        if not (ok["arch"] == reference).any():
            why = f"no finished {reference} runs to measure the gap from"
        elif ok["arch"].nunique() < 2:
            why = "only one architecture"
        elif not ok["prior"].isin(priors).any():
            why = f"no finished runs under {' or '.join(f'`{p}`' for p in priors)}"
        else:
            why = f"no size with finished runs of the {reference} and another architecture"
        raise NotDrawn(why + f" (the gap is the best architecture minus the {reference}, "
                       f"under {' and '.join(priors)})")
    shown = [t for t in tasks if (gaps["task"] == t).any()]
    notes = [f"{t} (no gap to measure)" for t in tasks if t not in shown]
    fig, axes = panel_figure(len(shown), sharey=True)
    for ax, task in zip(axes, shown, strict=True):
        _panel(ax, runs_t, gaps[gaps["task"] == task], task, priors)
    label_outer(fig, axes)
    n = gaps.loc[gaps["n_seeds"] > 1, "n_seeds"]
    seeds = "" if n.empty else f"{n.min()}" if n.min() == n.max() else f"{n.min()}-{n.max()}"
    figure_title(fig, f"Best architecture minus the {reference}, test accuracy",
           f"bars: ± 1 sd of the per-seed gap over {seeds} seeds" if seeds else "")
    return save(fig, out_dir, "arch_gap", notes)
