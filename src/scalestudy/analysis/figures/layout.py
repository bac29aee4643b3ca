"""Panels and axes: grids of panels, shared limits, outer labels, log-log axes,
and which runs a panel shows (finished ones, unfinished ones marked).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.lines import Line2D
from matplotlib.ticker import (
    EngFormatter,
    FormatStrFormatter,
    LogFormatterSciNotation,
    LogLocator,
    MaxNLocator,
    NullFormatter,
    NullLocator,
)
from matplotlib.transforms import blended_transform_factory

from ..fits import task_runs
from .style import NEUTRAL, plt

# --------------------------------------------------------------------------- layout


def panel_grid(nrows: int, ncols: int, size=(4.2, 3.4), sharex=False, sharey=False, link=True,
          min_width: float = 5.0):
    """A figure with an nrows x ncols grid of panels (2-D array), optionally sharing
    both axes across all of them; `label_outer` then labels the outer ones only.
    With `link` False the axes are not linked (matplotlib's sharing costs time
    quadratic in the panels): the caller gives them the same limits (`same_limits`).
    The figure is at least `min_width` inches wide, so that its title has room."""
    width = max(size[0] * ncols, min_width)
    fig, cells = plt.subplots(nrows, ncols, figsize=(width, size[1] * nrows),
                              squeeze=False, layout="constrained")
    first = cells[0, 0]
    for ax in cells.ravel()[1:] if link else ():
        if sharex:
            ax.sharex(first)
        if sharey:
            ax.sharey(first)
    fig._scalestudy_cells = cells.astype(object)
    fig._scalestudy_shared = (sharex, sharey)
    return fig, cells


def fixed_grid(nrows: int, ncols: int, panel=(2.1, 1.35), gaps=(0.12, 0.12),
                margins=(0.95, 0.2, 0.6, 0.9)):
    """Like `panel_grid` (shared axes, unlinked), for figures of many panels: a fixed
    layout in inches (panel size, gaps between panels, left/right/bottom/top margins)
    instead of the constrained layout, whose cost grows with every tick label."""
    left, right, bottom, top = margins
    width = left + right + ncols * panel[0] + (ncols - 1) * gaps[0]
    height = bottom + top + nrows * panel[1] + (nrows - 1) * gaps[1]
    fig = plt.figure(figsize=(width, height))
    gs = fig.add_gridspec(nrows, ncols, left=left / width, right=1 - right / width,
                          bottom=bottom / height, top=1 - top / height,
                          wspace=gaps[0] / panel[0], hspace=gaps[1] / panel[1])
    cells = np.empty((nrows, ncols), dtype=object)
    for i in range(nrows):
        for j in range(ncols):
            cells[i, j] = fig.add_subplot(gs[i, j])
    fig._scalestudy_cells = cells
    fig._scalestudy_shared = (True, True)
    return fig, cells


def drop(fig, ax) -> None:
    """Remove a panel (no data) from its figure's grid."""
    cells = fig._scalestudy_cells
    cells[cells == ax] = None
    ax.remove()


def panel_figure(n: int, ncols: int | None = None, size=(4.2, 3.4), sharex=False, sharey=False):
    """n panels on a grid of `ncols` columns, row by row; unused slots removed."""
    ncols = min(n, ncols or n)
    nrows = -(-n // ncols)
    fig, cells = panel_grid(nrows, ncols, size, sharex, sharey)
    flat = list(cells.ravel())
    for ax in flat[n:]:
        drop(fig, ax)
    return fig, flat[:n]


def same_limits(axes, pad: float = 0.08) -> None:
    """The same log-scale x and y limits on every panel: the union of their data
    (points and lines; bands do not count), padded by `pad` of the span in log space."""
    lims = []
    for dim in (0, 1):
        # The smallest positive value: a zero (an error of 0) has no place on a log axis.
        lo = min(ax.dataLim.minpos[dim] for ax in axes)
        hi = max(ax.dataLim.get_points()[1, dim] for ax in axes)
        span = np.log(hi / lo) if hi > lo > 0 else 0.0
        if span < 1e-6:  # one value: a span of a factor 3 around it
            mid = np.sqrt(lo * hi)
            lims.append((mid / np.sqrt(3), mid * np.sqrt(3)))
            continue
        lims.append((lo * np.exp(-pad * span), hi * np.exp(pad * span)))
    for ax in axes:
        ax.set_xlim(lims[0])
        ax.set_ylim(lims[1])


def label_outer(fig, axes=None) -> None:
    """On shared axes, tick labels and axis labels only on the lowest panel of each
    column (x) and the leftmost of each row (y)."""
    cells = fig._scalestudy_cells
    sharex, sharey = fig._scalestudy_shared
    for col in cells.T if sharex else ():
        present = [ax for ax in col if ax is not None]
        for ax in present[:-1]:
            ax.tick_params(labelbottom=False)
            ax.set_xlabel("")
    for row in cells if sharey else ():
        present = [ax for ax in row if ax is not None]
        for ax in present[1:]:
            ax.tick_params(labelleft=False)
            ax.set_ylabel("")


def finished_runs(runs: pd.DataFrame) -> pd.DataFrame:
    return runs[runs["status"] == "ok"]


# Runs that did not finish are drawn, never left as silent gaps: a marker along
# the top edge of their panel at their x, one shape per status.
UNFINISHED_MARKERS = {"diverged": "x", "failed": "+"}


def mark_unfinished(ax, x, bad: pd.DataFrame, color) -> set[str]:
    """Markers (gid `status:prior`) for the diverged and failed runs `bad` at
    positions `x` along the top edge of `ax`; returns the statuses drawn."""
    top = blended_transform_factory(ax.transData, ax.transAxes)
    drawn = set()
    for xi, (_, row) in zip(np.asarray(x, dtype=float), bad.iterrows(), strict=True):
        if not np.isfinite(xi):
            continue
        (mark,) = ax.plot(xi, 0.97, marker=UNFINISHED_MARKERS[row["status"]], color=color,
                          linestyle="none", transform=top, clip_on=False)
        mark.set_gid(f"{row['status']}:{row['prior']}")
        drawn.add(row["status"])
    return drawn


def unfinished_handles(statuses: set[str]) -> list[Line2D]:
    return [Line2D([], [], color=NEUTRAL, marker=marker, linestyle="none",
                   label=f"{status} (top edge)")
            for status, marker in UNFINISHED_MARKERS.items() if status in statuses]


def tasks_of(runs: pd.DataFrame, tasks=None) -> list[str]:
    if tasks is not None:
        return list(tasks)
    return sorted(task_runs(runs)["task"].unique())


def fitted_x_axis(fits: pd.DataFrame) -> str:
    """The x axis the fits were made on (compute when there are none)."""
    x = fits.loc[fits["metric"].isin(["alpha_D", "alpha_U"]), "x_axis"]
    return x.iloc[0] if len(x) else "compute"


def loglog_axes(ax, xlabel: str | None, ylabel: str | None, minor: bool = True) -> None:
    """Log-log axes; an axis spanning less than a decade gets plain evenly spaced
    ticks (log axes would label only one or two of them). Call once the data of every
    panel sharing the axes are drawn. A label of None leaves the axis label alone;
    `minor` False drops the minor ticks (small panels)."""
    ax.set_xscale("log")
    ax.set_yscale("log")
    if xlabel is not None:
        ax.set_xlabel(xlabel)
    if ylabel is not None:
        ax.set_ylabel(ylabel)
    for axis, (lo, hi) in ((ax.xaxis, ax.get_xlim()), (ax.yaxis, ax.get_ylim())):
        axis.set_minor_formatter(NullFormatter())
        if not minor:
            axis.set_minor_locator(NullLocator())
        if not lo > 0:
            continue
        # Large values (FLOPs, parameters) with SI prefixes: 20G, not 2e+10.
        fmt = EngFormatter(sep="") if lo >= 1000 else FormatStrFormatter("%.3g")
        if hi / lo < 10:
            axis.set_major_locator(MaxNLocator(4))
            axis.set_minor_locator(NullLocator())
            axis.set_major_formatter(fmt)
        elif hi / lo < 100:
            axis.set_major_locator(LogLocator(subs=(1, 3)))
            axis.set_major_formatter(fmt)
    ax.grid(True, which="major", alpha=0.3)


def quiet_minor_labels(fig) -> None:
    """No labels on the minor ticks of log axes spanning 1.5 decades or more: the
    decades are labelled, and the minor labels crowd them (and cost most of the
    drawing time); a narrower axis, with few or no decades to label, keeps minor
    ticks at 2 and 5 times each decade only (every one, labelled, would overlap).
    Call once the limits are final."""
    for ax in fig.axes:
        for axis, lim in ((ax.xaxis, ax.get_xlim()), (ax.yaxis, ax.get_ylim())):
            if axis.get_scale() == "log" and min(lim) > 0:
                if abs(np.log10(lim[1] / lim[0])) >= 1.5:
                    axis.set_minor_formatter(NullFormatter())
                else:
                    axis.set_minor_locator(LogLocator(subs=(2.0, 5.0)))
                    axis.set_minor_formatter(LogFormatterSciNotation(
                        labelOnlyBase=False, minor_thresholds=(np.inf, np.inf)))
