"""Figure `loss_vs_depth`: `draw` composes its file of `panel`s, one per
architecture, width and LayerNorm placement whose runs span two or more depths
(`panel` draws one into any Axes: the notebook API).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.lines import Line2D
from matplotlib.ticker import (
    FixedLocator,
    FormatStrFormatter,
    NullLocator,
)
from matplotlib.transforms import blended_transform_factory

from ..fits import task_runs
from .layout import finished_runs, label_outer, panel_figure
from .marks import fig_legend, over_seeds, prior_handles, seed_errorbar, spread_note
from .output import Drawn, NotDrawn, figure_title, save
from .style import (
    NEUTRAL,
    NORM_LABELS,
    arch_rank,
    arch_style,
    prior_rank,
    prior_style,
    styled,
)


def _depth_panels(runs_t: pd.DataFrame) -> list[tuple[str, int, str]]:
    """(arch, width, norm) of every group of task runs (any status) at two or more
    depths: where depth varies at a fixed width, LayerNorm placement and architecture."""
    keys = []
    for (arch, width, norm), g in runs_t.groupby(["arch", "width", "norm"], sort=False):
        if g["depth"].nunique() >= 2:
            keys.append((arch, int(width), norm))
    norm_rank = {n: i for i, n in enumerate(NORM_LABELS)}
    return sorted(keys, key=lambda k: (arch_rank(k[0]), k[1], norm_rank.get(k[2], 9)))


def _depth_reason(runs_t: pd.DataFrame) -> str:
    if runs_t.empty:
        return "no task runs"
    hint = ("the `depth` scaling protocol (train.protocol: depth) with two or more sizes "
            "grows depth at a fixed width")
    if runs_t["depth"].nunique() == 1:
        return (f"every task run has depth {int(runs_t['depth'].iloc[0])}: no depths to "
                f"compare; {hint}")
    arch = min(set(runs_t["arch"]), key=arch_rank)
    a = runs_t[runs_t["arch"] == arch]
    shape = ", ".join(f"{int(d)} at width {int(w)}" for (w, d), _ in
                      a.groupby(["width", "depth"], sort=True))
    return ("no architecture has runs at two or more depths of one width (and LayerNorm "
            f"placement): depth changes only together with width (e.g. {arch}: depth {shape}), "
            f"so a curve against depth would mix widths; {hint}")


@styled
def panel(ax, runs, fits, arch: str, width: int | None = None, norm: str | None = None
          ) -> None:
    """`arch`'s final training loss against depth at `width` with LayerNorm
    placement `norm` (either may be left out where `arch` has one such group),
    one line per prior (mean over seeds +-1 sd), unfinished runs as crosses
    along the top edge. NotDrawn without runs at two depths; ValueError where
    the group is ambiguous."""
    runs_t = task_runs(runs)
    keys = [k for k in _depth_panels(runs_t) if k[0] == arch
            and width in (None, k[1]) and norm in (None, k[2])]
    if not keys:
        raise NotDrawn(f"{arch}: no runs at two or more depths of one width and LayerNorm "
                       f"placement{'' if width is None else f' (width {width})'}"
                       f"{'' if norm is None else f' (norm {norm})'}")
    if len(keys) > 1:
        raise ValueError(f"{arch}: several depth panels; give width and norm, one of: "
                         + ", ".join(f"width={w}, norm={n!r}" for _, w, n in keys))
    _panel(ax, runs_t, *keys[0])


def _panel(ax, runs_t, arch, width, norm) -> tuple[list[pd.DataFrame], set[str], bool]:
    """One panel: returns the seed statistics of its lines, their priors, and
    whether it marked an unfinished run."""
    style = arch_style(arch)
    ax.set_title(f"{arch}, width {width}, {NORM_LABELS.get(norm, norm)}", color=style["color"])
    ax.set_label(f"{arch}/{width}/{norm}")
    cell = runs_t[(runs_t["arch"] == arch) & (runs_t["width"] == width)
                  & (runs_t["norm"] == norm)]
    ok = finished_runs(cell)
    ok = ok[np.isfinite(ok["train_loss"])]
    bad = cell[cell["status"] != "ok"]
    spread, priors = [], set()
    for prior, s in sorted(ok.groupby("prior", sort=False), key=lambda kv: prior_rank(kv[0])):
        stats = over_seeds(s, ["depth"], "train_loss").sort_values("depth")
        spread.append(stats)
        priors.add(prior)
        seed_errorbar(ax, stats["depth"], stats, f"points:{arch}:{width}:{norm}:{prior}",
                      label=prior, **style, **prior_style(prior), linewidth=1.1)
    top = blended_transform_factory(ax.transData, ax.transAxes)
    for _, row in bad.iterrows():
        (cross,) = ax.plot(row["depth"], 0.97, marker="x", color=style["color"],
                           linestyle="none", transform=top)
        cross.set_gid(f"failed:{row['prior']}")
    depths = sorted(int(d) for d in cell["depth"].unique())
    ax.set_xscale("log", base=2)
    ax.set_xlim(depths[0] / 1.35, depths[-1] * 1.35)
    ax.xaxis.set_major_locator(FixedLocator(depths))
    ax.xaxis.set_major_formatter(FormatStrFormatter("%d"))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlabel("depth (layers)")
    ax.set_ylabel("final training loss")
    if ok.empty:
        ax.text(0.5, 0.5, "every run diverged or failed", transform=ax.transAxes,
                ha="center", color=NEUTRAL)
    return spread, priors, not bad.empty


@styled
def draw(runs, fits, out_dir, tasks=None) -> Drawn:
    """Final training loss against depth at a fixed width: one panel per
    architecture, width and LayerNorm placement with runs at two or more depths (shared
    y), one line per prior in its style, mean over seeds +-1 sd. Runs that diverged or
    failed are crosses along the top edge (Xu et al. 2021: where the standard recipe
    fails). Different widths are never averaged into one point."""
    runs_t = task_runs(runs)
    keys = _depth_panels(runs_t)
    if not keys:
        raise NotDrawn(_depth_reason(runs_t))
    fig, axes = panel_figure(len(keys), ncols=4, size=(3.4, 2.9), sharey=True)
    spread, priors, failed = [], set(), False
    for ax, key in zip(axes, keys, strict=True):
        s, p, f = _panel(ax, runs_t, *key)
        spread += s
        priors |= p
        failed |= f
    label_outer(fig, axes)
    note = spread_note(pd.concat(spread)) if spread else "no finished runs"
    figure_title(fig, "Final training loss against depth at a fixed width", note)
    handles = prior_handles(priors)
    if failed:
        handles.append(Line2D([], [], color=NEUTRAL, marker="x", linestyle="none",
                              label="diverged / failed"))
    fig_legend(fig, handles, title="prior")
    return save(fig, out_dir, "loss_vs_depth")
