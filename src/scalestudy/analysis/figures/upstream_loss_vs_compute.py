"""Figure `upstream_loss_vs_compute`: `draw` composes its file of `panel`s, the
overlay of every architecture, then one per architecture (`panel` draws one
into any Axes: the notebook API).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.lines import Line2D

from ..fits import select, upstream_runs, x_values
from .layout import (
    finished_runs,
    fitted_x_axis,
    label_outer,
    loglog_axes,
    panel_figure,
)
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
from .style import NEUTRAL, X_LABELS, X_TITLES, arch_rank, arch_style, styled


def _upstream(runs, x_axis) -> pd.DataFrame:
    """The finished upstream runs with an upstream loss, with their x; NotDrawn
    without any."""
    every = upstream_runs(runs)
    if every.empty:
        raise NotDrawn("no upstream pretraining runs: the study has no `upstream` prior")
    up = finished_runs(every)
    up = up[np.isfinite(up["upstream_loss"])]
    if up.empty:
        raise NotDrawn(f"every upstream pretraining run ({len(every)}) diverged or failed")
    return up.assign(x=x_values(up, x_axis))


@styled
def panel(ax, runs, fits, arch: str | None = None, x_axis=None) -> None:
    """`arch`'s upstream loss against x (default: the fits' axis), log-log: mean
    over seeds (+-1 sd), the log-log fit (solid) with its bootstrap band, the
    saturating fit (dashed) and the exponents; without `arch`, the overlay of
    every architecture with its log-log fit (no bands). NotDrawn without
    finished runs."""
    x_axis = x_axis or fitted_x_axis(fits)
    up = _upstream(runs, x_axis)
    if arch is None:
        _overlay(ax)
        for a in sorted(set(up["arch"]), key=arch_rank):
            _overlay_marks(ax, up[up["arch"] == a], fits, a)
    else:
        if not (up["arch"] == arch).any():
            raise NotDrawn(f"no finished upstream runs of {arch}")
        _panel(ax, up[up["arch"] == arch], fits, arch)
    loglog_axes(ax, X_LABELS[x_axis], "upstream loss (nats)")
    place_texts([ax])


def _overlay(ax) -> None:
    ax.set_title("all architectures (fits without bands)")
    ax.set_label("overlay")


def _overlay_marks(ax, cell, fits, arch) -> None:
    """`arch`'s log-log fit (no band) and seed means on the overlay panel."""
    style = arch_style(arch)
    ll = select(fits, "alpha_U", "loglog", arch=arch)
    if len(ll) and ll.iloc[0]["status"] == "ok":
        loglog_fit(ax, cell["x"], cell["upstream_loss"], ll.iloc[0], f"overlay:{arch}",
                   band=False, color=style["color"], linewidth=1)
    stats = over_seeds(cell, ["size"], "upstream_loss", x="x")
    seed_errorbar(ax, stats["x"], stats, f"overlay-points:{arch}", label=arch,
                  linestyle="none", **style)


def _panel(ax, cell, fits, arch) -> tuple[pd.DataFrame, bool]:
    """One architecture's panel: `cell` its finished runs (with their x).
    Returns its seed statistics and whether it drew a saturating fit."""
    style = arch_style(arch)
    ax.set_title(arch, color=style["color"])
    ax.set_label(arch)
    texts = []
    ll = select(fits, "alpha_U", "loglog", arch=arch)
    if len(ll):
        row = ll.iloc[0]
        texts.append(fmt_short(row, "αU"))
        if row["status"] == "ok":
            loglog_fit(ax, cell["x"], cell["upstream_loss"], row, f"fit:{arch}",
                       sizes=cell["size"], color=style["color"], linewidth=1.2)
    saturating = False
    sat = select(fits, "alpha_U", "saturating", arch=arch)
    if len(sat) and sat.iloc[0]["status"] == "ok":
        r = sat.iloc[0]
        grid = np.geomspace(cell["x"].min(), cell["x"].max(), 60)
        (line,) = ax.plot(grid, r["E"] + r["A"] * grid ** -r["alpha"], color=style["color"],
                          linestyle="--", linewidth=1)
        line.set_gid(f"sat:{arch}")
        texts.append(f"saturating: αU = {r['alpha']:.3f}, E = {r['E']:.3g}")
        saturating = True
    stats = over_seeds(cell, ["size"], "upstream_loss", x="x")
    seed_errorbar(ax, stats["x"], stats, f"points:{arch}", linestyle="none", **style)
    alpha_text(ax, "\n".join(texts))
    return stats, saturating


@styled
def draw(runs, fits, out_dir, tasks=None, x_axis=None) -> Drawn:
    """Upstream loss of the masked-LM pretraining runs against x: a first panel with
    every architecture and its log-log fit, then one panel per architecture (shared
    axes) with the log-log fit (solid) and its bootstrap band, the saturating fit
    (dashed) and the fitted exponents."""
    x_axis = x_axis or fitted_x_axis(fits)
    up = _upstream(runs, x_axis)
    every = upstream_runs(runs)
    archs = sorted(set(up["arch"]), key=arch_rank)
    notes = [f"{a} (every upstream run diverged or failed)"
             for a in sorted(set(every["arch"]) - set(archs), key=arch_rank)]
    fig, axes = panel_figure(len(archs) + 1, ncols=4, size=(3.1, 2.5), sharex=True, sharey=True)
    overlay = axes[0]
    _overlay(overlay)
    saturating, spread = False, []
    for ax, arch in zip(axes[1:], archs, strict=True):
        cell = up[up["arch"] == arch]
        stats, sat = _panel(ax, cell, fits, arch)
        _overlay_marks(overlay, cell, fits, arch)
        spread.append(stats)
        saturating |= sat
    for ax in axes:
        loglog_axes(ax, X_LABELS[x_axis], "upstream loss (nats)")
    place_texts(axes)
    label_outer(fig)
    key = [Line2D([], [], color=NEUTRAL, label="log-log fit")]
    if saturating:
        key.append(Line2D([], [], color=NEUTRAL, linestyle="--", label="saturating fit"))
    figure_title(fig, f"Upstream loss (held-out masked-token NLL) against {X_TITLES[x_axis]}",
           f"{spread_note(pd.concat(spread))}; {band_note(fits)}; "
           "exponents with their 95% bootstrap interval")
    arch_legends(fig, [overlay], key)
    return save(fig, out_dir, "upstream_loss_vs_compute", notes)
