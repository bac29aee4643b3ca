"""Figure `accuracy_vs_size`: `draw` composes a task's file of `panel`s, one per
architecture (`panel` draws one into any Axes: the notebook API). A panel's
lines are priors, each in its own colour and marker (style.prior_mark) as well
as its line style and fill: the panel's title names the architecture.
"""

from __future__ import annotations

from ...records import task_label
from ..fits import size_order, task_runs
from .layout import label_outer, mark_unfinished, panel_figure, unfinished_handles
from .marks import fig_legend, mean_acc, prior_handles, seed_errorbar, spread_note
from .output import Drawn, NotDrawn, figure_title, save
from .style import arch_rank, prior_mark, prior_rank, prior_style, styled


@styled
def panel(ax, runs, fits, task: str, arch: str) -> set[str]:
    """`arch`'s test accuracy on `task` against size, one line per prior (mean
    over seeds, +-1 sd bars), unfinished runs along the top edge. Returns the
    statuses of the unfinished runs marked; NotDrawn without finished runs."""
    runs_t = task_runs(runs)
    runs_t = runs_t[runs_t["task"] == task]
    acc_all = mean_acc(runs_t, ["arch", "prior", "size"])
    if not (acc_all["arch"] == arch).any():
        raise NotDrawn(f"no finished runs of {arch} on {task}")
    present = sorted(set(acc_all["prior"]), key=prior_rank)
    return _panel(ax, runs_t, acc_all, arch, size_order(runs_t), present)


def _panel(ax, runs_t, acc_all, arch, sizes, present) -> set[str]:
    pos = {s: i for i, s in enumerate(sizes)}
    offset = {p: 0.04 * (j - (len(present) - 1) / 2) for j, p in enumerate(present)}
    ax.set_title(arch)
    ax.set_label(arch)
    acc = acc_all[acc_all["arch"] == arch]
    for prior in present:
        a = acc[acc["prior"] == prior].sort_values("size", key=lambda s: s.map(pos))
        if a.empty:
            continue
        # Dodge the priors sideways so that equal values stay visible.
        x = a["size"].map(pos).to_numpy() + offset[prior]
        stats = a.rename(columns={"count": "n"})
        seed_errorbar(ax, x, stats, f"points:{arch}:{prior}", label=prior,
                      **prior_mark(prior), **prior_style(prior), linewidth=1.1)
    bad = runs_t[(runs_t["arch"] == arch) & (runs_t["status"] != "ok")]
    unfinished: set[str] = set()
    for prior, rows in bad.groupby("prior", sort=False, observed=True):
        unfinished |= mark_unfinished(ax, rows["size"].map(pos) + offset.get(prior, 0.0),
                                      rows, prior_mark(prior)["color"])
    ax.set_xticks(range(len(sizes)), sizes)
    ax.set_xlim(-0.5, len(sizes) - 0.5)
    ax.set_xlabel("size")
    ax.set_ylabel("test accuracy")
    return unfinished


@styled
def draw(runs, fits, out_dir, task: str) -> Drawn:
    """Test accuracy against size for one task: one panel per architecture with
    finished runs (shared axes), one line per prior in its style: mean over seeds
    with +-1 sd bars where there are several."""
    runs_t = task_runs(runs)
    runs_t = runs_t[runs_t["task"] == task]
    name = f"accuracy_vs_size_{task}"
    acc_all = mean_acc(runs_t, ["arch", "prior", "size"])
    if acc_all.empty:
        raise NotDrawn(f"no finished runs on {task}" if len(runs_t) else f"no runs on {task}")
    archs = sorted(set(acc_all["arch"]), key=arch_rank)
    notes = [f"{a} (every run diverged or failed)"
             for a in sorted(set(runs_t["arch"]) - set(archs), key=arch_rank)]
    sizes = size_order(runs_t)
    present = sorted(set(acc_all["prior"]), key=prior_rank)
    fig, axes = panel_figure(len(archs), ncols=4, size=(3.3, 2.7), sharex=True, sharey=True)
    unfinished: set[str] = set()
    for ax, arch in zip(axes, archs, strict=True):
        unfinished |= _panel(ax, runs_t, acc_all, arch, sizes, present)
    label_outer(fig, axes)
    note = spread_note(acc_all.rename(columns={"count": "n"}))
    figure_title(fig, f"{task_label(runs, task)}: test accuracy against size", note)
    fig_legend(fig, prior_handles(present, marked=True) + unfinished_handles(unfinished),
               title="prior")
    return save(fig, out_dir, name, notes)
