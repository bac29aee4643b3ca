"""Figure `frontier_optimal`: `draw` composes its file of `panel`s, N_opt and
D_opt against compute for each group of the frontier (a row each); `panel`
draws one into any Axes (the notebook API). Drawn from the frontier's result
(analysis/frontier).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..frontier.options import METHODS
from ..frontier.result import METHOD_LABELS, FrontierResult
from .layout import panel_grid, quiet_minor_labels
from .output import Drawn, figure_title, save
from .style import METHOD_STYLES, styled

# What a panel shows: its interval's columns, the exponent, the y label.
QUANTITIES = {
    "n_opt": ("n_low", "n_high", "a", "N_opt (parameters)"),
    "d_opt": ("d_low", "d_high", "b", "D_opt (tokens)"),
}


def _fit_label(fits: pd.DataFrame, method: str, exponent: str) -> str:
    row = fits[fits["method"] == method]
    if row.empty:
        return METHOD_LABELS[method]
    r = row.iloc[0]
    if r["status"] != "ok":
        return f"{METHOD_LABELS[method]}: not fitted"
    lo, hi = r[f"{exponent}_low"], r[f"{exponent}_high"]
    ci = f" [{lo:.3f}, {hi:.3f}]" if np.isfinite(lo) else ""
    return f"{METHOD_LABELS[method]}: {exponent} = {r[exponent]:.3f}{ci}"


@styled
def panel(ax, frontier: FrontierResult, arch: str, prior: str | None = None,
          quantity: str = "n_opt") -> None:
    """One group's (its `arch`, and `prior` where the frontier has several)
    N_opt (`quantity` "n_opt") or D_opt ("d_opt") against compute: each
    approach's points, its fitted power law and bootstrap band, and in the
    legend its exponent with its interval."""
    if quantity not in QUANTITIES:
        raise ValueError(f"quantity: got {quantity!r}, accepted: {', '.join(QUANTITIES)}")
    _panel(ax, frontier, frontier.group(arch=arch, prior=prior), quantity)


def _panel(ax, frontier: FrontierResult, key: tuple, quantity: str) -> None:
    low, high, exponent, ylabel = QUANTITIES[quantity]
    points = frontier.rows(frontier.frontier, key)
    bands = frontier.rows(frontier.bands, key)
    fits = frontier.rows(frontier.fits, key).drop_duplicates("method")
    for method in METHODS:
        style = METHOD_STYLES[method]
        p = points[points["method"] == method]
        band = bands[bands["method"] == method]
        if not band.empty:
            (line,) = ax.plot(band["compute"], band[quantity], color=style["color"],
                              linestyle=style["linestyle"], lw=1.3,
                              label=_fit_label(fits, method, exponent))
            line.set_gid(f"fit:{method}")
            good = np.isfinite(band[low]) & np.isfinite(band[high])
            area = ax.fill_between(band["compute"][good], band[low][good], band[high][good],
                                   color=style["color"], alpha=0.15, lw=0)
            area.set_gid(f"band:{method}")
        elif method in set(fits["method"]):
            ax.plot([], [], color=style["color"], linestyle=style["linestyle"],
                    label=_fit_label(fits, method, exponent))
        if not p.empty:
            (marks,) = ax.plot(p["compute"], p[quantity], linestyle="none",
                               marker=style["marker"], ms=3.7 if len(p) > 20 else 4.7,
                               fillstyle="none", color=style["color"], markeredgewidth=0.9,
                               zorder=3)
            marks.set_gid(f"points:{method}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(frontier.compute_label)
    ax.set_ylabel(ylabel)
    symbol = "N" if exponent == "a" else "D"
    ax.set_title(rf"{frontier.title(key)}: ${symbol}_{{opt}} \propto C^{exponent}$")
    ax.set_label("/".join((*key, quantity)))
    ax.legend(loc="upper left", framealpha=0.85)


@styled
def draw(frontier: FrontierResult, out_dir) -> Drawn:
    """Per group, N_opt and D_opt against compute by each approach, with fits and
    bootstrap bands (Hoffmann et al. 2022, Fig. 2-4)."""
    keys = frontier.groups()
    fig, cells = panel_grid(len(keys), 2, size=(5.2, 3.9))
    for row, key in zip(cells, keys, strict=True):
        for ax, quantity in zip(row, QUANTITIES, strict=True):
            _panel(ax, frontier, key, quantity)
    figure_title(fig, "Compute-optimal model size and tokens",
                 "markers: points fitted; bands: bootstrap intervals")
    quiet_minor_labels(fig)
    return save(fig, out_dir, "frontier_optimal")
