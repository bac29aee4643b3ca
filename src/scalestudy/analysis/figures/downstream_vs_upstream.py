"""Figure `downstream_vs_upstream`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..fits import select, task_runs, transfers_upstream
from .layout import finished_runs, label_outer, loglog_axes, panel_figure, tasks_of
from .marks import (
    alpha_text,
    arch_legends,
    band_note,
    fmt_short,
    loglog_fit,
    over_seeds,
    place_texts,
    seed_errorbar,
    spread_note,
)
from .output import Drawn, NotDrawn, figure_title, save
from .style import arch_rank, arch_style, styled


@styled
def draw(runs, fits, out_dir, tasks=None) -> Drawn:
    """Downstream error of the upstream-prior runs against their upstream loss, per
    task: a first panel with every architecture and its fit, then one panel per
    architecture (shared axes) with the alpha_U,D fit (err = coef * loss^alpha_U,D),
    its bootstrap band and exponent; mean over seeds +-1 sd."""
    tasks = tasks_of(runs, tasks)
    every = task_runs(runs)
    every = every[every["prior"].map(transfers_upstream)]
    if every.empty:
        raise NotDrawn("no runs finetuned from upstream pretraining: the study has no "
                       "`upstream` prior")
    ok = finished_runs(every)
    ok = ok[np.isfinite(ok["upstream_loss"])]
    if ok.empty:
        raise NotDrawn(f"every run finetuned from upstream pretraining ({len(every)}) "
                       "diverged or failed")
    shown = [t for t in tasks if (ok["task"] == t).any()]
    notes = [f"{t} (no finished upstream-prior runs)" for t in tasks if t not in shown]
    panels = []  # (task, arch or None for the overlay)
    for task in shown:
        panels.append((task, None))
        panels += [(task, a) for a in sorted(set(ok.loc[ok["task"] == task, "arch"]),
                                             key=arch_rank)]
    fig, axes = panel_figure(len(panels), ncols=4, size=(3.1, 2.5), sharex=True, sharey=True)
    overlays, spread = {}, []
    prefix = (lambda t: f"{t}: ") if len(shown) > 1 else (lambda t: "")
    for ax, (task, arch) in zip(axes, panels, strict=True):
        if arch is None:
            ax.set_title(f"{prefix(task)}all architectures (fits without bands)")
            ax.set_label(f"{task}/overlay")
            overlays[task] = ax
            continue
        style = arch_style(arch)
        ax.set_title(prefix(task) + arch, color=style["color"])
        ax.set_label(f"{task}/{arch}")
        cell = ok[(ok["task"] == task) & (ok["arch"] == arch)]
        fit = select(fits, "alpha_UD", task=task, arch=arch)
        if len(fit):
            row = fit.iloc[0]
            if row["status"] == "ok":
                loglog_fit(ax, cell["upstream_loss"], cell["error"], row, f"fit:{arch}",
                            sizes=cell["size"], sign=1, color=style["color"], linewidth=1.2)
                loglog_fit(overlays[task], cell["upstream_loss"], cell["error"], row,
                            f"overlay:{arch}", sign=1, band=False, color=style["color"],
                            linewidth=1)
            alpha_text(ax, fmt_short(row, "αU,D"))
        stats = over_seeds(cell, ["size"], "error", x="upstream_loss")
        spread.append(stats)
        seed_errorbar(ax, stats["x"], stats, f"points:{arch}", linestyle="none", **style)
        seed_errorbar(overlays[task], stats["x"], stats, f"overlay-points:{arch}", label=arch,
                  linestyle="none", **style)
    for ax in axes:
        loglog_axes(ax, "upstream loss (nats)", "downstream error")
    place_texts(axes)
    label_outer(fig)
    figure_title(fig, "Downstream error (1 - test accuracy) against upstream loss, upstream prior",
           f"{spread_note(pd.concat(spread))}; line: err = c L^αU,D, {band_note(fits)}")
    arch_legends(fig, list(overlays.values()))
    return save(fig, out_dir, "downstream_vs_upstream", notes)
