"""Figure `scaling_overview`: a study's headline on one page, upstream loss (top
row) and downstream error under one prior (a row per task) against compute, one
column per architecture. Each panel is the `panel` of upstream_loss_vs_compute or
error_vs_compute, so its marks, fits and exponents are theirs.
"""

from __future__ import annotations

import numpy as np

from ..fits import task_runs, upstream_runs
from . import error_vs_compute, upstream_loss_vs_compute
from .layout import drop, finished_runs, fitted_x_axis, fixed_grid, same_limits, tasks_of
from .marks import band_note
from .output import Drawn, NotDrawn, save, title_text
from .style import X_LABELS, X_TITLES, arch_rank, arch_style, styled

UPSTREAM_ROW = "upstream"


@styled
def panel(ax, runs, fits, arch: str, task: str = UPSTREAM_ROW, prior: str = "random",
          x_axis=None):
    """One panel: `arch`'s upstream loss (task `upstream`), or its error on `task`
    under `prior`, against x. NotDrawn without finished runs."""
    if task == UPSTREAM_ROW:
        return upstream_loss_vs_compute.panel(ax, runs, fits, arch=arch, x_axis=x_axis)
    return error_vs_compute.panel(ax, runs, fits, task=task, prior=prior, arch=arch,
                                  x_axis=x_axis)


@styled
def draw(runs, fits, out_dir, tasks=None, prior: str = "random", x_axis=None) -> Drawn:
    """Upstream loss, then downstream error under `prior` for each task, against x:
    one column per architecture, each row on its own shared limits (the upstream
    row's compute is the pretraining's alone, the task rows' adds finetuning). A
    task row or a panel without finished runs is left out and named in the title;
    NotDrawn without upstream runs."""
    x_axis = x_axis or fitted_x_axis(fits)
    every_task, every_up = task_runs(runs), upstream_runs(runs)
    if every_up.empty:
        raise NotDrawn("no upstream pretraining runs: the study has no `upstream` prior")
    under = finished_runs(every_task)
    under = under[under["prior"] == prior]
    rows, notes = [UPSTREAM_ROW], []
    for task in tasks_of(runs, tasks):
        if (under["task"] == task).any():
            rows.append(task)
        else:
            notes.append(f"no finished runs on {task} under {prior}")
    archs = sorted(set(every_task["arch"]) | set(every_up["arch"]), key=arch_rank)
    up = finished_runs(every_up)
    has = {(UPSTREAM_ROW, a) for a in up.loc[np.isfinite(up["upstream_loss"]), "arch"]}
    has |= set(under[["task", "arch"]].itertuples(index=False, name=None))
    notes += [f"{arch}: no finished {'upstream runs' if row == UPSTREAM_ROW else row + ' runs'}"
              for row in rows for arch in archs if (row, arch) not in has]
    panel_size, gaps, (left, right, bottom) = (2.4, 1.9), (0.3, 0.55), (0.75, 0.2, 0.55)
    width = left + right + len(archs) * panel_size[0] + (len(archs) - 1) * gaps[0]
    title = title_text(width, f"Upstream loss and downstream error ({prior}) against "
                       f"{X_TITLES[x_axis]}",
                       f"means over seeds ± 1 sd; line: log-log fit, {band_note(fits)}; "
                       "exponents with their 95% interval", notes)
    top = 0.15 + 0.17 * (title.count("\n") + 1) + 0.3
    fig, cells = fixed_grid(len(rows), len(archs), panel_size, gaps, (left, right, bottom, top))
    fig.suptitle(title, fontsize=9.5, y=1 - 0.1 / fig.get_figheight(), va="top")
    for i, row in enumerate(rows):
        drawn = []
        for j, arch in enumerate(archs):
            ax = cells[i, j]
            if (row, arch) not in has:
                drop(fig, ax)
                continue
            panel(ax, runs, fits, arch, task=row, prior=prior, x_axis=x_axis)
            what = "upstream loss" if row == UPSTREAM_ROW else f"{row} error, {prior}"
            ax.set_title(f"{arch}: {what}", color=arch_style(arch)["color"], fontsize=8.5)
            ax.set_xlabel("")
            ax.set_ylabel("")
            drawn.append(ax)
        if drawn:
            same_limits(drawn)
            drawn[0].set_ylabel("upstream loss (nats)" if row == UPSTREAM_ROW
                                else "error (1 - accuracy)")
    fig.supxlabel(X_LABELS[x_axis], fontsize=9, y=0.12 / fig.get_figheight(), va="bottom")
    return save(fig, out_dir, "scaling_overview", notes, title_notes=False)
