"""Figure `gap_closing`: how much of one architecture's lead over another a
prior closes, size by size (Amos et al. 2023: self-pretraining closes the
vanilla transformer's gap to S4). `draw` composes its file of `panel`s, one
per task (`panel` draws one into any Axes: the notebook API).

The gap at a size is the difference of the two architectures' mean test
accuracies over seeds, with Welch's 95% t-interval over the seeds of the two
cells at that size (claims/contrasts.py: `welch`, as the claims decide on it, but
size by size rather than averaged over sizes).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..claims.contrasts import welch
from ..fits import size_order, task_runs
from ..options import ClaimsOptions
from .layout import finished_runs, label_outer, panel_figure, tasks_of
from .marks import fig_legend, prior_handles
from .output import Drawn, NotDrawn, figure_title, save
from .style import NEUTRAL, prior_style, styled

GAP_COLUMNS = ["task", "prior", "size", "gap", "low", "high", "n_first", "n_second"]


def gaps(runs: pd.DataFrame, first: str, second: str, priors: tuple[str, ...],
         ci: float = ClaimsOptions.ci) -> pd.DataFrame:
    """Per (task, prior of `priors`, size) with finished runs of both
    architectures: `first`'s mean test accuracy minus `second`'s (`gap`), its
    Welch interval (`low`, `high`; NaN unless both have two runs or more) and
    each one's number of runs."""
    ok = finished_runs(task_runs(runs))
    ok = ok[np.isfinite(ok["test_acc"])]
    rows = []
    for (task, prior, size), g in ok.groupby(["task", "prior", "size"], sort=False):
        if prior not in priors:
            continue
        a = g.loc[g["arch"] == first, "test_acc"].to_numpy(float)
        b = g.loc[g["arch"] == second, "test_acc"].to_numpy(float)
        if not (a.size and b.size):
            continue
        d = welch([(a, 1.0, first), (b, -1.0, second)], ci=ci)
        rows.append({"task": task, "prior": prior, "size": size, "gap": d["estimate"],
                     "low": d["low"], "high": d["high"], "n_first": a.size,
                     "n_second": b.size})
    return pd.DataFrame(rows, columns=GAP_COLUMNS)


def share_closed(g: pd.DataFrame, treatment: str, control: str) -> pd.Series:
    """Per size: the share of the control's gap the treatment closes,
    (gap_control - gap_treatment) / gap_control, where the control's gap is
    above 0 (NaN elsewhere)."""
    wide = g.pivot_table(index="size", columns="prior", values="gap")
    if not {treatment, control} <= set(wide.columns):
        return pd.Series(dtype=float)
    c, t = wide[control], wide[treatment]
    return ((c - t) / c).where(c > 0)


@styled
def panel(ax, runs, fits, task: str, first: str = "", second: str = "",
          treatment: str = "", control: str = "") -> None:
    """On `task`, `first` minus `second` test accuracy against size under the
    control and the treatment priors, with 95% Welch intervals, and the share of
    the gap the treatment closes at each size. NotDrawn without such a gap."""
    g = gaps(runs, first, second, (control, treatment))
    g = g[g["task"] == task]
    if g.empty:
        raise NotDrawn(f"no size of {task} with finished runs of both {first} and {second} "
                       f"under {control} or {treatment}")
    _panel(ax, task_runs(runs), g, task, first, second, treatment, control)
    ax.legend(title="prior", loc="best")


def _panel(ax, runs_t, g, task, first, second, treatment, control) -> None:
    ax.set_title(task)
    ax.set_label(task)
    sizes = size_order(runs_t[runs_t["task"] == task])
    pos = {s: i for i, s in enumerate(sizes)}
    for k, prior in enumerate((control, treatment)):
        p = g[g["prior"] == prior].sort_values("size", key=lambda s: s.map(pos))
        if p.empty:
            continue
        x = p["size"].map(pos).to_numpy(float) + (k - 0.5) * 0.12  # dodged apart
        err = np.vstack([p["gap"] - p["low"], p["high"] - p["gap"]]).astype(float)
        bars = ax.errorbar(x, p["gap"].to_numpy(float),
                           yerr=None if np.isnan(err).all() else err,
                           color=NEUTRAL, marker="o", label=prior, **prior_style(prior))
        bars.lines[0].set_gid(f"gap:{prior}")
        for coll in bars.lines[2]:
            coll.set_gid(f"gap:{prior}:bars")
    closed = share_closed(g, treatment, control)
    top = g["high"].where(np.isfinite(g["high"]), g["gap"]).groupby(g["size"]).max()
    for size, share in closed.dropna().items():
        ax.annotate(f"{share:.0%} closed", (pos[size], top[size]), fontsize=7,
                    ha="center", xytext=(0, 5), textcoords="offset points")
    ax.axhline(0, color=NEUTRAL, linewidth=0.6)
    ax.set_xticks(range(len(sizes)), sizes)
    ax.set_xlim(-0.5, len(sizes) - 0.5)
    ax.margins(y=0.15)
    ax.set_xlabel("size")
    ax.set_ylabel(f"test accuracy gap ({first} - {second})")


@styled
def draw(runs, fits, out_dir, tasks=None, first: str = "", second: str = "",
         treatment: str = "", control: str = "") -> Drawn:
    """`first` minus `second` test accuracy against size under the control
    prior and the treatment, one panel per task with data (shared y), 95% Welch
    intervals, and the share of the control's gap the treatment closes."""
    tasks = tasks_of(runs, tasks)
    g = gaps(runs, first, second, (control, treatment))
    if g.empty:
        ok = finished_runs(task_runs(runs))
        missing = [a for a in (first, second) if not (ok["arch"] == a).any()]
        why = (f"no finished {' or '.join(missing)} runs" if missing else
               f"no size with finished runs of both {first} and {second} under {control} "
               f"or {treatment}")
        raise NotDrawn(why)
    shown = [t for t in tasks if (g["task"] == t).any()]
    notes = [f"{t} (no {first} and {second} pair)" for t in tasks if t not in shown]
    fig, axes = panel_figure(len(shown), sharey=True)
    runs_t = task_runs(runs)
    for ax, task in zip(axes, shown, strict=True):
        _panel(ax, runs_t, g[g["task"] == task], task, first, second, treatment, control)
    label_outer(fig, axes)
    fig_legend(fig, prior_handles((control, treatment)), "prior")
    n = pd.concat([g["n_first"], g["n_second"]])
    seeds = f"{n.min()}" if n.min() == n.max() else f"{n.min()}-{n.max()}"
    figure_title(fig, f"How much of the {first} - {second} gap {treatment} closes",
                 f"mean over {seeds} seeds per architecture, bars: 95% Welch interval")
    return save(fig, out_dir, "gap_closing", notes)
