"""Figure `frontier_loss`: `draw` composes its file of `panel`s, one per group
of the frontier but its architecture (a prior: losses of one kind), every
architecture on it in its colour; `panel` draws one into any Axes (the
notebook API). Drawn from the frontier's result (analysis/frontier).
"""

from __future__ import annotations

import itertools

import numpy as np
from matplotlib.lines import Line2D

from ..frontier.result import FrontierResult
from .layout import panel_figure, quiet_minor_labels
from .output import Drawn, figure_title, save
from .style import ARCH_STYLES, NEUTRAL, arch_style, plt, styled


def _rest(frontier: FrontierResult, key: tuple) -> tuple:
    """A group's values but its architecture's: the panel it is drawn on."""
    return tuple(v for c, v in zip(frontier.by, key, strict=True) if c != "arch")


def _archs(frontier: FrontierResult) -> list[str]:
    a = frontier.by.index("arch")
    return list(dict.fromkeys(key[a] for key in frontier.groups()))


def _colours(frontier: FrontierResult) -> dict[str, tuple]:
    """Each architecture's registry colour; a name not registered (a table of any
    runs) one of tab10's."""
    others = itertools.cycle(plt.get_cmap("tab10").colors)
    return {arch: arch_style(arch)["color"] if arch in ARCH_STYLES else next(others)
            for arch in _archs(frontier)}


@styled
def panel(ax, frontier: FrontierResult, prior: str | None = None) -> None:
    """The loss at the compute-optimal size against compute, every architecture
    of one `prior` (None: the frontier's only one): approach 3's L(N_opt, D_opt)
    with its bootstrap band, solid over the budgets run and dashed beyond the
    largest (dotted), and approach 2's IsoFLOP minima as squares."""
    rests = sorted({_rest(frontier, key) for key in frontier.groups()})
    rest_by = [c for c in frontier.by if c != "arch"]
    found = [r for r in rests
             if prior is None or dict(zip(rest_by, r, strict=True)).get("prior") == prior]
    if len(found) != 1:
        raise ValueError(f"prior {prior}: {len(found)} panels match; the panels: "
                         + "; ".join("/".join(r) or "all runs" for r in rests))
    _panel(ax, frontier, found[0], _colours(frontier))


def _panel(ax, frontier: FrontierResult, rest: tuple, colours: dict) -> None:
    a = frontier.by.index("arch")
    notes = []
    for key in (k for k in frontier.groups() if _rest(frontier, k) == rest):
        arch = key[a]
        colour = colours[arch]
        bands = frontier.rows(frontier.bands, key)
        band = bands[bands["method"] == "approach3"].sort_values("compute")
        c_max = float(frontier.rows(frontier.runs, key)["_axis_budget_compute"].max())
        ax.axvline(c_max, color=colour, lw=0.8, linestyle=":").set_gid(
            f"largest_budget:{arch}")
        if band.empty:
            notes.append(f"{arch}: approach 3 not fitted")
        else:
            # Solid up to the largest budget, dashed beyond, joined at the last grid
            # point inside.
            j = max(int(np.searchsorted(band["compute"].to_numpy(), c_max * (1 + 1e-9))), 1)
            (solid,) = ax.plot(band["compute"][:j], band["loss_opt"][:j], color=colour, lw=1.5)
            solid.set_gid(f"fit:{arch}")
            (dashed,) = ax.plot(band["compute"][j - 1:], band["loss_opt"][j - 1:],
                                color=colour, lw=1.5, linestyle="--")
            dashed.set_gid(f"extrapolated:{arch}")
            good = np.isfinite(band["loss_low"])
            area = ax.fill_between(band["compute"][good], band["loss_low"][good],
                                   band["loss_high"][good], color=colour, alpha=0.18, lw=0)
            area.set_gid(f"band:{arch}")
        points = frontier.rows(frontier.frontier, key)
        vertices = points[points["method"] == "approach2"]
        (squares,) = ax.plot(vertices["compute"], vertices["loss_opt"], linestyle="none",
                             color=colour, marker="s", ms=4.5, markeredgecolor="white",
                             markeredgewidth=0.5, zorder=3)
        squares.set_gid(f"vertices:{arch}")
    ax.set_xscale("log")
    ax.set_xlabel(frontier.compute_label)
    ax.set_ylabel(f"{frontier.loss_label} at N_opt")
    rest_by = [c for c in frontier.by if c != "arch"]
    label = ", ".join(f"{c} {v}" for c, v in zip(rest_by, rest, strict=True)
                      if v != "all") or "all runs"
    ax.set_title(label + ("\n" + "; ".join(notes) if notes else ""))
    ax.set_label("/".join(rest) or "all")


@styled
def draw(frontier: FrontierResult, out_dir) -> Drawn:
    """The loss at the compute-optimal size against compute, one panel per prior,
    extrapolated a decade beyond the largest budget with its interval."""
    rests = sorted({_rest(frontier, key) for key in frontier.groups()})
    colours = _colours(frontier)
    fig, axes = panel_figure(len(rests), 2, size=(5.4, 3.9))
    for ax, rest in zip(axes, rests, strict=True):
        _panel(ax, frontier, rest, colours)
    handles = [Line2D([], [], color=colour, lw=1.5, label=arch)
               for arch, colour in colours.items()]
    handles += [
        Line2D([], [], color=NEUTRAL, lw=1.5, label="L(N_opt, D_opt), approach 3"),
        Line2D([], [], color=NEUTRAL, lw=1.5, linestyle="--", label="extrapolated beyond"),
        Line2D([], [], color=NEUTRAL, lw=0.8, linestyle=":", label="largest budget"),
        Line2D([], [], color=NEUTRAL, marker="s", linestyle="none",
               label="IsoFLOP minimum, approach 2"),
    ]
    fig.legend(handles=handles, loc="outside lower center", ncols=min(len(handles), 4),
               frameon=False)
    figure_title(fig, "Loss at the compute-optimal size against compute",
                 "band: bootstrap interval of approach 3")
    quiet_minor_labels(fig)
    return save(fig, out_dir, "frontier_loss")
