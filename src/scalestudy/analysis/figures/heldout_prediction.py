"""Figure `heldout_prediction`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.ticker import (
    MaxNLocator,
)

from ..fits import select
from .layout import panel_figure, tasks_of
from .marks import arch_legends
from .output import Drawn, NotDrawn, figure_title, save
from .style import NEUTRAL, arch_rank, arch_style, prior_rank, styled


def _heldout_panels(fits: pd.DataFrame, tasks) -> list[tuple[str, pd.DataFrame]]:
    """(title, fits rows) of each panel of `heldout_prediction`: alpha_U in both
    forms, then per task alpha_D per prior and alpha_U,D."""
    panels = [(f"upstream loss: αU, {label}", select(fits, "alpha_U", form))
              for form, label in (("loglog", "log-log"), ("saturating", "saturating"))]
    down = select(fits, "alpha_D")
    for task in tasks:
        panels += [(f"{task} error: αD, {prior}", select(down, "alpha_D", task=task, prior=prior))
                   for prior in sorted(set(down.loc[down["task"] == task, "prior"]),
                                       key=prior_rank)]
        panels.append((f"{task} error vs upstream loss: αU,D",
                       select(fits, "alpha_UD", task=task)))
    return [(title, rows) for title, rows in panels if len(rows)]


@styled
def draw(runs, fits, out_dir, tasks=None) -> Drawn:
    """Each law refitted without its largest size: the prediction there (y) against
    the observed mean (x), one panel per law (and prior) with predictions, one point
    per architecture, bars the 95% bootstrap interval of the prediction. On the
    diagonal the law predicted the held-out size exactly; below it the size did worse
    (higher loss or error) than the law predicts. The grey band is +-10%."""
    panels = _heldout_panels(fits, tasks_of(runs, tasks))
    notes, kept = [], []
    for title, rows in panels:
        if (rows["heldout_status"] == "ok").any():
            kept.append((title, rows))
        else:
            notes.append(f"{title} ({'; '.join(sorted(set(rows['heldout_status'])))})")
    if not kept:
        why = "; ".join(sorted({n.split(" (", 1)[1].rstrip(")") for n in notes})[:3])
        raise NotDrawn("no law could be refitted without its largest size"
                       + (f" ({why})" if why else ": no fits"))
    def interval(ok):  # the prediction's interval: obs * (1 + the rel. error's ends)
        return ok.assign(low=ok["heldout_obs"] * (1 + ok["heldout_rel_error_low"]),
                         high=ok["heldout_obs"] * (1 + ok["heldout_rel_error_high"]))

    # The alpha_D panels of one task (the same quantity, per prior) share their limits.
    limits: dict[str, np.ndarray] = {}
    for title, rows in kept:
        ok = interval(rows[rows["heldout_status"] == "ok"])
        values = ok[["heldout_obs", "heldout_pred", "low", "high"]].stack().dropna()
        key = title if " αD, " not in title else title.split(" αD, ")[0]
        lo, hi = limits.get(key, (np.inf, -np.inf))
        limits[key] = np.array([min(lo, values.min()), max(hi, values.max())])
    fig, axes = panel_figure(len(kept), ncols=3, size=(3.6, 3.5))
    for ax, (title, rows) in zip(axes, kept, strict=True):
        ok = interval(rows[rows["heldout_status"] == "ok"])
        size = "/".join(sorted(set(ok["heldout_size"])))
        ax.set_label(title)
        ax.set_title(f"{title}\nheld out {size}: median |error| "
                     f"{100 * ok['heldout_rel_error'].abs().median():.1f}%")
        lim = limits[title if " αD, " not in title else title.split(" αD, ")[0]].copy()
        lim += np.array([-1, 1]) * max(0.05 * (lim[1] - lim[0]), 0.03 * abs(lim[1]))
        ax.fill_between(lim, 0.9 * lim, 1.1 * lim, color=NEUTRAL, alpha=0.12, linewidth=0)
        ax.plot(lim, lim, color=NEUTRAL, linewidth=0.8)
        for _, row in ok.sort_values("arch", key=lambda a: a.map(arch_rank)).iterrows():
            style = arch_style(row["arch"])
            # Lines, not error bars: a percentile interval need not contain the estimate.
            ax.vlines(row["heldout_obs"], row["low"], row["high"], color=style["color"])
            (pt,) = ax.plot(row["heldout_obs"], row["heldout_pred"], linestyle="none",
                            label=row["arch"], **style)
            pt.set_gid(f"points:{row['arch']}")
        refused = len(rows) - len(ok)
        if refused:
            ax.text(0.98, 0.02, f"{refused} without prediction", transform=ax.transAxes,
                    ha="right", va="bottom", fontsize=6, color=NEUTRAL)
        ax.set_xlim(lim)
        ax.set_ylim(lim)
        ax.set_aspect("equal")
        ax.xaxis.set_major_locator(MaxNLocator(4))
        ax.yaxis.set_major_locator(MaxNLocator(4))
        ax.ticklabel_format(useOffset=False)
        ax.set_xlabel("observed (mean over runs)")
        ax.set_ylabel("predicted by the law")
    figure_title(fig, "Each law refitted without its largest size: its prediction there against "
           "the observed mean", "bars: 95% bootstrap interval of the prediction; grey: ±10%; "
           "the alpha_D panels of a task share their scale")
    arch_legends(fig, axes)
    return save(fig, out_dir, "heldout_prediction", notes)
