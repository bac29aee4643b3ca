"""Figure `heldout_prediction`: `draw` composes its file of `panel`s, one per
law (and prior) with a prediction (`panel` draws one into any Axes: the
notebook API).
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

FORMS = (("loglog", "log-log"), ("saturating", "saturating"))  # alpha_U's


def _heldout_panels(fits: pd.DataFrame, tasks) -> list[tuple[dict, str, pd.DataFrame]]:
    """(which law, title, fits rows) of each panel of `heldout_prediction`:
    alpha_U in both forms, then per task alpha_D per prior and alpha_U,D. `which`
    is the panel's key: `panel`'s arguments."""
    panels = [({"metric": "alpha_U", "form": form}, f"upstream loss: αU, {label}",
               select(fits, "alpha_U", form)) for form, label in FORMS]
    down = select(fits, "alpha_D")
    for task in tasks:
        panels += [({"metric": "alpha_D", "task": task, "prior": prior},
                    f"{task} error: αD, {prior}", select(down, "alpha_D", task=task, prior=prior))
                   for prior in sorted(set(down.loc[down["task"] == task, "prior"]),
                                       key=prior_rank)]
        panels.append(({"metric": "alpha_UD", "task": task},
                       f"{task} error vs upstream loss: αU,D",
                       select(fits, "alpha_UD", task=task)))
    return [(which, title, rows) for which, title, rows in panels if len(rows)]


def _interval(ok: pd.DataFrame) -> pd.DataFrame:
    """The prediction's interval: obs * (1 + the relative error's ends)."""
    return ok.assign(low=ok["heldout_obs"] * (1 + ok["heldout_rel_error_low"]),
                     high=ok["heldout_obs"] * (1 + ok["heldout_rel_error_high"]))


def _scale_key(which: dict) -> tuple:
    """Panels of one key share their limits: the alpha_D panels of a task (the
    same quantity, per prior)."""
    return tuple(v for k, v in which.items() if not (which["metric"] == "alpha_D"
                                                      and k == "prior"))


def _kept(fits, tasks):
    """The panels with a prediction (which, title, rows, their limits), and notes
    on those without."""
    notes, kept = [], []
    for which, title, rows in _heldout_panels(fits, tasks):
        if (rows["heldout_status"] == "ok").any():
            kept.append((which, title, rows))
        else:
            notes.append(f"{title} ({'; '.join(sorted(set(rows['heldout_status'])))})")
    limits: dict[tuple, np.ndarray] = {}
    for which, _, rows in kept:
        ok = _interval(rows[rows["heldout_status"] == "ok"])
        values = ok[["heldout_obs", "heldout_pred", "low", "high"]].stack().dropna()
        lo, hi = limits.get(_scale_key(which), (np.inf, -np.inf))
        limits[_scale_key(which)] = np.array([min(lo, values.min()), max(hi, values.max())])
    return [(w, t, r, limits[_scale_key(w)]) for w, t, r in kept], notes


@styled
def panel(ax, runs, fits, metric: str, task: str | None = None, prior: str | None = None,
          form: str = "loglog") -> None:
    """The law `metric` (alpha_U in `form`; alpha_D on `task` under `prior`;
    alpha_UD on `task`) refitted without its largest size: its prediction there
    (y) against the observed mean (x), one point per architecture with the 95%
    bootstrap interval of the prediction, the diagonal and a +-10% band; on the
    scale the figure gives it. NotDrawn without a prediction."""
    which = {"alpha_U": {"metric": metric, "form": form},
             "alpha_D": {"metric": metric, "task": task, "prior": prior},
             "alpha_UD": {"metric": metric, "task": task}}.get(metric)
    if which is None:
        raise ValueError(f"metric {metric!r}: accepted: alpha_U, alpha_D, alpha_UD")
    tasks = tasks_of(runs)
    for w, title, rows, lim in _kept(fits, tasks)[0]:
        if w == which:
            return _panel(ax, title, rows, lim)
    rows = [r for w, _, r in _heldout_panels(fits, tasks) if w == which]
    raise NotDrawn(f"{which}: no fits" if not rows else f"{which}: no prediction "
                   f"({'; '.join(sorted(set(rows[0]['heldout_status'])))})")


def _panel(ax, title, rows, lim) -> None:
    """One law's panel: `rows` its fits, `lim` its scale (before padding)."""
    ok = _interval(rows[rows["heldout_status"] == "ok"])
    size = "/".join(sorted(set(ok["heldout_size"])))
    ax.set_label(title)
    ax.set_title(f"{title}\nheld out {size}: median |error| "
                 f"{100 * ok['heldout_rel_error'].abs().median():.1f}%")
    lim = lim + np.array([-1, 1]) * max(0.05 * (lim[1] - lim[0]), 0.03 * abs(lim[1]))
    # A loss or an error is never negative: an interval reaching below 0 (a
    # replicate's relative error below -100%) runs to the axis, which starts at 0.
    lim[0] = max(lim[0], 0.0)
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


@styled
def draw(runs, fits, out_dir, tasks=None) -> Drawn:
    """Each law refitted without its largest size: the prediction there (y) against
    the observed mean (x), one panel per law (and prior) with predictions, one point
    per architecture, bars the 95% bootstrap interval of the prediction. On the
    diagonal the law predicted the held-out size exactly; below it the size did worse
    (higher loss or error) than the law predicts. The grey band is +-10%."""
    kept, notes = _kept(fits, tasks_of(runs, tasks))
    if not kept:
        why = "; ".join(sorted({n.split(" (", 1)[1].rstrip(")") for n in notes})[:3])
        raise NotDrawn("no law could be refitted without its largest size"
                       + (f" ({why})" if why else ": no fits"))
    fig, axes = panel_figure(len(kept), ncols=3, size=(3.6, 3.5))
    for ax, (_, title, rows, lim) in zip(axes, kept, strict=True):
        _panel(ax, title, rows, lim)
    figure_title(fig, "Each law refitted without its largest size: its prediction there against "
           "the observed mean", "bars: 95% bootstrap interval of the prediction; grey: ±10%; "
           "the alpha_D panels of a task share their scale")
    arch_legends(fig, axes)
    return save(fig, out_dir, "heldout_prediction", notes)
