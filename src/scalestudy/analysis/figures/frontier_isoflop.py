"""Figure `frontier_isoflop`: `draw` composes its file of `panel`s, one per
group of the frontier (architecture and prior); `panel` draws one into any
Axes (the notebook API). Drawn from the frontier's result (analysis/frontier).
"""

from __future__ import annotations

import numpy as np
from matplotlib.cm import ScalarMappable
from matplotlib.colors import LogNorm
from matplotlib.lines import Line2D

from ..frontier.result import FrontierResult
from .layout import panel_figure, quiet_minor_labels
from .output import Drawn, figure_title, save
from .style import plt, styled

CMAP = "viridis"  # a budget's colour, by its compute


def _norm(frontier: FrontierResult) -> LogNorm:
    """Budget compute to colour, over every budget of every group."""
    cs = frontier.runs["_budget_compute"]
    return LogNorm(cs.min(), max(cs.max(), cs.min() * 1.01))


@styled
def panel(ax, frontier: FrontierResult, arch: str, prior: str | None = None) -> None:
    """The IsoFLOP profiles of one group (its `arch`, and `prior` where the
    frontier has several): each run's loss against N coloured by its budget's
    compute, approach 2's parabola over the sizes each budget was fitted on and
    its vertex N_opt; the runs of a budget left out hollow and grey."""
    _panel(ax, frontier, frontier.group(arch=arch, prior=prior), _norm(frontier))


def _panel(ax, frontier: FrontierResult, key: tuple, norm: LogNorm) -> None:
    cmap = plt.get_cmap(CMAP)
    runs = frontier.rows(frontier.runs, key)
    profiles = frontier.rows(frontier.profiles, key)
    status = dict(zip(profiles["budget"], profiles["status"], strict=True))
    for budget, r in runs.groupby("_budget", sort=True):
        compute = r["_budget_compute"].iloc[0]
        if status.get(budget) == "ok":
            (points,) = ax.plot(r["params"], r["loss"], linestyle="none", marker="o", ms=4,
                                color=cmap(norm(compute)), markeredgecolor="none", zorder=3)
            points.set_gid(f"runs:{compute:.3g}")
        else:
            (points,) = ax.plot(r["params"], r["loss"], linestyle="none", marker="o", ms=4,
                                fillstyle="none", color="0.6", markeredgewidth=0.7, zorder=2)
            points.set_gid(f"left_out:{compute:.3g}")
    fitted = profiles[profiles["status"] == "ok"]
    for row in fitted.itertuples(index=False):
        colour = cmap(norm(row.compute))
        u = np.linspace(np.log(row.n_min), np.log(row.n_max), 80) - row.ln_center
        (curve,) = ax.plot(np.exp(u + row.ln_center), row.p2 * u**2 + row.p1 * u + row.p0,
                           color=colour, lw=1.2, zorder=2)
        curve.set_gid(f"parabola:{row.compute:.3g}")
        (vertex,) = ax.plot(row.n_opt, row.loss_opt, marker="*", ms=10, color=colour,
                            markeredgecolor="black", markeredgewidth=0.6, zorder=4,
                            linestyle="none")
        vertex.set_gid(f"vertex:{row.compute:.3g}")
    ax.set_title(f"{frontier.title(key)}: {len(fitted)} of {runs['_budget'].nunique()} "
                 "budgets fitted")
    ax.set_label("/".join(key))
    ax.set_xscale("log")
    ax.set_xlabel("parameters N")
    ax.set_ylabel(frontier.loss_label)


@styled
def draw(frontier: FrontierResult, out_dir) -> Drawn:
    """Every group's IsoFLOP profiles, two panels to a row, one colour scale of
    budget compute (Hoffmann et al. 2022, Fig. 3)."""
    keys = frontier.groups()
    norm = _norm(frontier)
    fig, axes = panel_figure(len(keys), 2, size=(5.2, 3.9))
    for ax, key in zip(axes, keys, strict=True):
        _panel(ax, frontier, key, norm)
    fig.colorbar(ScalarMappable(norm=norm, cmap=CMAP), ax=list(axes), shrink=0.9,
                 label="budget compute (FLOPs, as counted)")
    handles = [
        Line2D([], [], marker="o", linestyle="none", color="0.3", ms=4,
               label="run (budget fitted)"),
        Line2D([], [], marker="o", linestyle="none", fillstyle="none", color="0.6", ms=4,
               label="run (budget left out)"),
        Line2D([], [], color="0.3", lw=1.2, label="parabola in log N"),
        Line2D([], [], marker="*", linestyle="none", color="0.3", markeredgecolor="black",
               ms=9, label="vertex: N_opt"),
    ]
    # Below the panels: inside, it would hide the curves of some budget.
    fig.legend(handles=handles, loc="outside lower center", frameon=False,
               ncols=4 if len(keys) > 1 else 2)
    figure_title(fig, "IsoFLOP profiles (approach 2, Hoffmann et al. 2022)")
    quiet_minor_labels(fig)
    return save(fig, out_dir, "frontier_isoflop")
