"""Figure `downstream_vs_upstream`: `draw` composes its file of `panel`s, per
task the overlay of every architecture, then one per architecture (`panel`
draws one into any Axes: the notebook API).
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


def _finetuned(runs) -> pd.DataFrame:
    """The finished task runs finetuned from upstream pretraining with an upstream
    loss; NotDrawn without any."""
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
    return ok


def _shown(ok, tasks) -> list[str]:
    """The tasks with a panel: those with finished upstream-prior runs."""
    return [t for t in tasks if (ok["task"] == t).any()]


def _prefix(task, shown) -> str:
    """What a panel title starts with: its task, where several are shown."""
    return f"{task}: " if len(shown) > 1 else ""


@styled
def panel(ax, runs, fits, task: str, arch: str | None = None) -> None:
    """On `task`, `arch`'s downstream error against its upstream loss, log-log:
    mean over seeds (+-1 sd), the alpha_U,D fit err = c L^alpha_U,D with its
    bootstrap band and exponent; without `arch`, the overlay of every
    architecture with its fit (no bands). NotDrawn without finished runs."""
    ok = _finetuned(runs)
    prefix = _prefix(task, _shown(ok, tasks_of(runs)))
    ok = ok[ok["task"] == task]
    if arch is None:
        if ok.empty:
            raise NotDrawn(f"no finished upstream-prior runs on {task}")
        _overlay(ax, task, prefix)
        for a in sorted(set(ok["arch"]), key=arch_rank):
            _overlay_marks(ax, ok[ok["arch"] == a], fits, task, a)
    else:
        cell = ok[ok["arch"] == arch]
        if cell.empty:
            raise NotDrawn(f"no finished upstream-prior runs of {arch} on {task}")
        _panel(ax, cell, fits, task, arch, prefix)
    loglog_axes(ax, "upstream loss (nats)", "downstream error")
    place_texts([ax])


def _overlay(ax, task, prefix) -> None:
    ax.set_title(f"{prefix}all architectures (fits without bands)")
    ax.set_label(f"{task}/overlay")


def _overlay_marks(ax, cell, fits, task, arch) -> None:
    """`arch`'s fit (no band) and seed means on `task`'s overlay panel."""
    style = arch_style(arch)
    fit = select(fits, "alpha_UD", task=task, arch=arch)
    if len(fit) and fit.iloc[0]["status"] == "ok":
        loglog_fit(ax, cell["upstream_loss"], cell["error"], fit.iloc[0], f"overlay:{arch}",
                   sign=1, band=False, color=style["color"], linewidth=1)
    stats = over_seeds(cell, ["size"], "error", x="upstream_loss")
    seed_errorbar(ax, stats["x"], stats, f"overlay-points:{arch}", label=arch,
                  linestyle="none", **style)


def _panel(ax, cell, fits, task, arch, prefix) -> pd.DataFrame:
    """One architecture's panel on `task`: `cell` its finished runs. Returns its
    seed statistics."""
    style = arch_style(arch)
    ax.set_title(prefix + arch, color=style["color"])
    ax.set_label(f"{task}/{arch}")
    fit = select(fits, "alpha_UD", task=task, arch=arch)
    if len(fit):
        row = fit.iloc[0]
        if row["status"] == "ok":
            loglog_fit(ax, cell["upstream_loss"], cell["error"], row, f"fit:{arch}",
                       sizes=cell["size"], sign=1, color=style["color"], linewidth=1.2)
        alpha_text(ax, fmt_short(row, "αU,D"))
    stats = over_seeds(cell, ["size"], "error", x="upstream_loss")
    seed_errorbar(ax, stats["x"], stats, f"points:{arch}", linestyle="none", **style)
    return stats


@styled
def draw(runs, fits, out_dir, tasks=None) -> Drawn:
    """Downstream error of the upstream-prior runs against their upstream loss, per
    task: a first panel with every architecture and its fit, then one panel per
    architecture (shared axes) with the alpha_U,D fit (err = coef * loss^alpha_U,D),
    its bootstrap band and exponent; mean over seeds +-1 sd."""
    tasks = tasks_of(runs, tasks)
    ok = _finetuned(runs)
    shown = _shown(ok, tasks)
    notes = [f"{t} (no finished upstream-prior runs)" for t in tasks if t not in shown]
    panels = []  # (task, arch or None for the overlay)
    for task in shown:
        panels.append((task, None))
        panels += [(task, a) for a in sorted(set(ok.loc[ok["task"] == task, "arch"]),
                                             key=arch_rank)]
    fig, axes = panel_figure(len(panels), ncols=4, size=(3.1, 2.5), sharex=True, sharey=True)
    overlays, spread = {}, []
    for ax, (task, arch) in zip(axes, panels, strict=True):
        if arch is None:
            _overlay(ax, task, _prefix(task, shown))
            overlays[task] = ax
            continue
        cell = ok[(ok["task"] == task) & (ok["arch"] == arch)]
        spread.append(_panel(ax, cell, fits, task, arch, _prefix(task, shown)))
        _overlay_marks(overlays[task], cell, fits, task, arch)
    for ax in axes:
        loglog_axes(ax, "upstream loss (nats)", "downstream error")
    place_texts(axes)
    label_outer(fig)
    figure_title(fig, "Downstream error (1 - test accuracy) against upstream loss, upstream prior",
           f"{spread_note(pd.concat(spread))}; line: err = c L^αU,D, {band_note(fits)}")
    arch_legends(fig, list(overlays.values()))
    return save(fig, out_dir, "downstream_vs_upstream", notes)
