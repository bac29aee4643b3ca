"""Figure `alpha_per_arch`: `draw` composes its file of `panel`s, alpha_U in
each form, then alpha_D per task and prior (`panel` draws one into any Axes:
the notebook API).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.ticker import (
    MaxNLocator,
)
from matplotlib.transforms import blended_transform_factory

from ..fits import select
from .layout import drop, panel_grid, tasks_of
from .output import Drawn, NotDrawn, figure_title, save
from .style import NEUTRAL, arch_rank, arch_style, prior_rank, styled

FORMS = (("loglog", "log-log", True), ("saturating", "saturating", False))  # alpha_U's


def _rows(fits) -> tuple[pd.DataFrame, dict]:
    """The alpha_U and alpha_D fits, and the row of each of their architectures
    (the registry's order, top down: the same rows in every panel)."""
    rel = fits[fits["metric"].isin(["alpha_U", "alpha_D"])]
    archs = sorted(set(rel["arch"]), key=arch_rank)
    return rel, {a: len(archs) - 1 - i for i, a in enumerate(archs)}


def _upstream(ax, fits, ypos, form) -> None:
    _, label, filled = next(f for f in FORMS if f[0] == form)
    _forest(ax, select(fits, "alpha_U", form), ypos, f"upstream: αU, {label}",
            "αU (95% interval)", f"alpha_U/{form}", filled)


def _downstream(ax, fits, ypos, task, prior, title) -> None:
    _forest(ax, select(fits, "alpha_D", task=task, prior=prior), ypos, title,
            "αD (95% interval)", f"alpha_D/{task}/{prior}")


@styled
def panel(ax, runs, fits, task: str | None = None, prior: str | None = None,
          form: str = "loglog") -> None:
    """alpha per architecture with its 95% interval, one row per architecture:
    alpha_D on `task` under `prior`, or without them alpha_U in `form` (loglog,
    saturating: hollow). A fit that refused shows its reason in its row;
    NotDrawn where every fit refused."""
    _, ypos = _rows(fits)
    if (task is None) != (prior is None):
        raise ValueError("alpha_D's panel takes both a task and a prior; alpha_U's neither")
    if task is None:
        if form not in {f[0] for f in FORMS}:
            raise ValueError(f"form {form!r}: accepted: {', '.join(f[0] for f in FORMS)}")
        rows, what = select(fits, "alpha_U", form), f"alpha_U {form}"
    else:
        rows, what = select(fits, "alpha_D", task=task, prior=prior), f"alpha_D {task} / {prior}"
    if not (rows["status"] == "ok").any():
        raise NotDrawn(f"{what}: no fit succeeded "
                       f"({'; '.join(sorted(set(rows['status']))) or 'no fits'})")
    if task is None:
        _upstream(ax, fits, ypos, form)
    else:
        _downstream(ax, fits, ypos, task, prior, f"{task}: αD, {prior}")


def _forest(ax, rows: pd.DataFrame, ypos: dict, title: str, xlabel: str, name: str,
            filled: bool = True) -> None:
    """One horizontal interval per architecture (rows: fits, one per arch) at the row
    `ypos[arch]`, in the panel labelled `name`; a fit that refused shows its reason in
    the row instead."""
    ax.set_title(title)
    ax.set_label(name)
    ax.set_ylim(-0.7, len(ypos) - 0.3)
    ax.set_yticks(list(ypos.values()), list(ypos))
    for label, arch in zip(ax.get_yticklabels(), ypos, strict=True):
        label.set_color(arch_style(arch)["color"])
    text_x = blended_transform_factory(ax.transAxes, ax.transData)
    for _, row in rows.iterrows():
        style, y = arch_style(row["arch"]), ypos[row["arch"]]
        if row["status"] != "ok":
            ax.text(0.02, y, row["status"], transform=text_x, va="center", fontsize=6,
                    color=NEUTRAL, bbox={"facecolor": "white", "edgecolor": "none", "pad": 1})
            continue
        # A line, not error bars: a percentile interval need not contain the estimate.
        if np.isfinite(row["alpha_low"]):
            seg = ax.hlines(y, row["alpha_low"], row["alpha_high"], color=style["color"])
            seg.set_gid(f"interval:{row['arch']}")
        (pt,) = ax.plot(row["alpha"], y, linestyle="none", **style,
                        fillstyle="full" if filled else "none")
        pt.set_gid(f"alpha:{row['arch']}")
    ax.xaxis.set_major_locator(MaxNLocator(4))
    ax.axvline(0, color=NEUTRAL, linewidth=0.8)
    ax.set_xlabel(xlabel)
    ax.grid(True, axis="x", alpha=0.3)
    ax.grid(False, axis="y")


@styled
def draw(runs, fits, out_dir, tasks=None) -> Drawn:
    """alpha per architecture with its 95% interval, upstream and downstream side by
    side: alpha_U (log-log, then saturating; top row) and alpha_D, one panel per prior
    and one row of panels per task. Every panel has one row per architecture; a panel
    in which every fit refused is left out, and panels of one quantity share x."""
    tasks = tasks_of(runs, tasks)
    rel, ypos = _rows(fits)
    if not (rel["status"] == "ok").any():
        why = "; ".join(sorted(set(rel["status"]))[:3]) or "no fits"
        raise NotDrawn(f"no alpha_U or alpha_D fit succeeded ({why})")
    notes = []

    def kept(rows, title):
        if (rows["status"] == "ok").any():
            return True
        if len(rows):
            notes.append(f"{title} ({'; '.join(sorted(set(rows['status'])))})")
        return False

    up = [form for form, label, _ in FORMS
          if kept(select(fits, "alpha_U", form), f"alpha_U {label}")]
    down = select(fits, "alpha_D")
    priors = sorted(set(down["prior"]), key=prior_rank)
    d_panels = [(t, p) for t in tasks for p in priors
                if kept(select(down, "alpha_D", task=t, prior=p), f"alpha_D {t} / {p}")]
    # Rows: the upstream panels, then the downstream ones, at most four to a row.
    ncols = min(max(len(up), len(d_panels), 1), 4)
    rows = ([up] if up else []) + [d_panels[k:k + ncols] for k in range(0, len(d_panels), ncols)]
    fig, cells = panel_grid(len(rows), ncols, size=(max(2.6, 6.0 / ncols), 1.3 + 0.22 * len(ypos)))
    d_axes = [ax for r, row in enumerate(rows) for ax in cells[r, :len(row)]
              if not (up and r == 0)]
    for ax in d_axes[1:]:  # before drawing: alpha_D panels share their x axis
        ax.sharex(d_axes[0])
    for r, row in enumerate(rows):
        for c in range(ncols):
            ax = cells[r, c]
            if c >= len(row):
                drop(fig, ax)
            elif up and r == 0:
                _upstream(ax, fits, ypos, row[c])
            else:
                task, prior = row[c]
                _downstream(ax, fits, ypos, task, prior,
                            f"{task}: αD, {prior}" if len(tasks) > 1 else f"αD, {prior}")
            if c and c < len(row):  # architecture names on the first panel of a row
                ax.tick_params(labelleft=False)
    figure_title(fig, "Scaling exponents per architecture",
           "point: the fitted alpha (filled: log-log; hollow: saturating, which absorbs the "
           "offset E and is not comparable with the log-log alpha); line: its 95% bootstrap "
           "interval; the alpha_D panels share their x axis")
    return save(fig, out_dir, "alpha_per_arch", notes)
