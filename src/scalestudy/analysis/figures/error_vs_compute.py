"""Figure `error_vs_compute`: `draw` composes its file of `panel`s, one per
architecture x task x prior (`panel` draws one into any Axes: the notebook API).
"""

from __future__ import annotations

from ...records import task_label
from ..fits import select, task_runs, x_values
from .layout import (
    drop,
    finished_runs,
    fitted_x_axis,
    fixed_grid,
    label_outer,
    loglog_axes,
    mark_unfinished,
    same_limits,
    tasks_of,
    unfinished_handles,
)
from .marks import (
    alpha_text,
    band_note,
    fmt_short,
    loglog_fit,
    over_seeds,
    place_texts,
    seed_errorbar,
    spread_note,
)
from .output import Drawn, NotDrawn, save, title_text
from .style import (
    X_LABELS,
    X_TITLES,
    arch_rank,
    arch_style,
    prior_linestyle,
    prior_rank,
    styled,
)


@styled
def panel(ax, runs, fits, task: str, prior: str, arch: str, x_axis=None) -> set[str]:
    """`arch`'s downstream error on `task` under `prior` against x (default: the
    fits' axis), log-log: mean over seeds (+-1 sd), the fitted alpha_D power law
    with its bootstrap band and exponent, unfinished runs along the top edge.
    Returns the statuses of the unfinished runs marked; NotDrawn without
    finished runs."""
    x_axis = x_axis or fitted_x_axis(fits)
    runs_t = task_runs(runs)
    ok = finished_runs(runs_t)
    ok = ok.assign(x=x_values(ok, x_axis))
    cell = ok[(ok["task"] == task) & (ok["prior"] == prior) & (ok["arch"] == arch)]
    if cell.empty:
        raise NotDrawn(f"no finished runs of {arch} on {task} under {prior}")
    unfinished = _panel(ax, runs_t, cell, fits, task, prior, arch, x_axis)
    ax.set_xscale("log")
    ax.set_yscale("log")
    loglog_axes(ax, X_LABELS[x_axis], "downstream error (1 - accuracy)", minor=False)
    place_texts([ax])
    return unfinished


def _panel(ax, runs_t, cell, fits, task, prior, arch, x_axis) -> set[str]:
    """One panel's marks: `cell` the finished runs it shows (with their x)."""
    style = arch_style(arch)
    ax.set_label(f"{task}/{prior}/{arch}")
    fit = select(fits, "alpha_D", task=task, arch=arch, prior=prior)
    if len(fit):
        row = fit.iloc[0]
        if row["status"] == "ok":
            loglog_fit(ax, cell["x"], cell["error"], row, f"fit:{arch}", sizes=cell["size"],
                       color=style["color"], linewidth=1.1, linestyle=prior_linestyle(prior))
        alpha_text(ax, fmt_short(row, "αD"))
    stats = over_seeds(cell, ["size"], "error", x="x")
    seed_errorbar(ax, stats["x"], stats, f"points:{arch}", label=arch, linestyle="none",
                  **style)
    bad = runs_t[(runs_t["task"] == task) & (runs_t["prior"] == prior)
                 & (runs_t["arch"] == arch) & (runs_t["status"] != "ok")]
    # At the run's own compute; a run that failed before training has
    # none, and stands at its size's finished runs' mean.
    at_size = bad["size"].map(dict(zip(stats["size"], stats["x"], strict=True)))
    return mark_unfinished(ax, x_values(bad, x_axis).fillna(at_size), bad, style["color"])


@styled
def draw(runs, fits, out_dir, tasks=None, x_axis=None) -> Drawn:
    """Downstream error against x: one row of panels per architecture and one column
    per task x prior (shared axes), mean over seeds (+-1 sd), with the fitted alpha_D
    power law, its bootstrap band and its exponent. A panel without finished runs is
    left out."""
    x_axis = x_axis or fitted_x_axis(fits)
    runs_t = task_runs(runs)
    ok = finished_runs(runs_t)
    if ok.empty:
        raise NotDrawn("no finished task runs" if len(runs_t) else "no task runs")
    ok = ok.assign(x=x_values(ok, x_axis))
    tasks = tasks_of(runs, tasks)
    priors = sorted(set(runs_t["prior"]), key=prior_rank)
    cols, notes = [], []
    for task in tasks:
        for prior in priors:
            if ((ok["task"] == task) & (ok["prior"] == prior)).any():
                cols.append((task, prior))
            elif ((runs_t["task"] == task) & (runs_t["prior"] == prior)).any():
                notes.append(f"{task} / {prior} (every run diverged or failed)")
    archs = sorted(set(ok["arch"]), key=arch_rank)
    have = set(ok[["arch", "task", "prior"]].itertuples(index=False, name=None))
    notes += [f"{a}, {t} / {p} (every run diverged or failed)"
              if ((runs_t["arch"] == a) & (runs_t["task"] == t) & (runs_t["prior"] == p)).any()
              else f"{a}, {t} / {p} (no runs)"
              for a in archs for t, p in cols if (a, t, p) not in have]
    stats_all = over_seeds(ok, ["task", "prior", "arch", "size"], "error")
    panel, gaps, (left, right, bottom) = (2.1, 1.35), (0.2, 0.12), (0.95, 0.2, 0.6)
    width = left + right + len(cols) * panel[0] + (len(cols) - 1) * gaps[0]
    title = title_text(width, f"Downstream error against {X_TITLES[x_axis]}",
                        f"{spread_note(stats_all)}; line: log-log fit, {band_note(fits)}; "
                        "αD with its 95% bootstrap interval", notes)
    top = 0.15 + 0.17 * (title.count("\n") + 1) + 0.3
    fig, cells = fixed_grid(len(archs), len(cols), panel, gaps, (left, right, bottom, top))
    fig.suptitle(title, fontsize=9.5, y=1 - 0.1 / fig.get_figheight(), va="top")
    multi_task = len({t for t, _ in cols}) > 1
    unfinished: set[str] = set()
    for i, arch in enumerate(archs):
        for j, (task, prior) in enumerate(cols):
            ax = cells[i, j]
            if i == 0:
                ax.set_title(f"{task_label(runs, task)} / {prior}" if multi_task else prior)
            cell = ok[(ok["task"] == task) & (ok["prior"] == prior) & (ok["arch"] == arch)]
            if cell.empty:
                drop(fig, ax)
                continue
            unfinished |= _panel(ax, runs_t, cell, fits, task, prior, arch, x_axis)
    present = [ax for ax in cells.ravel() if ax is not None]
    for ax in present:
        ax.set_xscale("log")
        ax.set_yscale("log")
    same_limits(present)
    for ax in present:
        loglog_axes(ax, "", None, minor=False)
    place_texts(present)
    for i, arch in enumerate(archs):
        row = [ax for ax in cells[i] if ax is not None]
        if row:
            row[0].set_ylabel(arch, color=arch_style(arch)["color"], fontweight="bold")
    label_outer(fig)
    fig.supxlabel(X_LABELS[x_axis], fontsize=9, y=0.12 / fig.get_figheight(), va="bottom")
    height = fig.get_figheight()
    fig.supylabel("downstream error (1 - accuracy)", fontsize=9,
                  x=0.1 / fig.get_figwidth(), ha="left", y=(bottom + (height - top)) / 2 / height)
    if unfinished:
        fig.legend(handles=unfinished_handles(unfinished), loc="lower right", fontsize=7,
                   frameon=False, ncols=2)
    return save(fig, out_dir, "error_vs_compute", notes, title_notes=False)
