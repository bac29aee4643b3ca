"""Figures, with matplotlib only (no torch): one style for every figure.

One style table (`ARCH_STYLES`) gives each of the 13 architectures its own
colour and marker, the same in every figure; `PRIOR_STYLES` gives each prior
its own line style and marker fill. Points are means over seeds with bars of
+-1 standard deviation over seeds where a point has several seeds; fitted
log-log lines carry the pointwise percentile band of their bootstrap
replicates. Panels that are compared share their axes.

A figure without data is not drawn: `plot_all` writes `index.md` next to the
figures, which lists every figure with its files or the reason it was not
drawn, and a panel without data is left out of its figure (the index and a
footnote name it). The workflow declares as outputs the figures its grid can
feed (`grid_figures`); should such a figure still have nothing to show (every
run it needs failed), a notice saying why stands in its place, so no declared
file is ever missing.

The figures (docs/analysis.md says what each shows and how it is computed):

- `upstream_loss_vs_compute`: upstream loss against x with the alpha_U fits
  (Tay et al. 2022, Fig. 2 style);
- `error_vs_compute`: downstream error against x with the alpha_D fits, one
  panel per task x prior;
- `alpha_per_arch`: alpha_U and alpha_D per architecture with their intervals,
  side by side;
- `accuracy_vs_size_{task}`: test accuracy against size, one line per prior;
- `arch_gap`: best architecture minus the vanilla transformer, random vs SPT
  (Amos et al. 2023);
- `loss_vs_depth`: final training loss against depth at a fixed width, per
  prior (Xu et al. 2021, DT-Fixup);
- `downstream_vs_upstream`: downstream error against upstream loss with the
  alpha_U,D fits;
- `spt_vs_matched`: SPT against the compute-matched control (Amos et al. 2023);
- `heldout_prediction`: each law's prediction of its held-out largest size
  against the observed value, with the y = x line.
"""

from __future__ import annotations

import functools
import textwrap
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only; never needs a display
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.collections import PolyCollection  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.ticker import (  # noqa: E402
    EngFormatter,
    FixedLocator,
    FormatStrFormatter,
    LogLocator,
    MaxNLocator,
    NullFormatter,
    NullLocator,
)
from matplotlib.transforms import blended_transform_factory  # noqa: E402

from .fits import select, size_order, task_runs, upstream_runs, x_values  # noqa: E402
from .names import (  # noqa: E402
    ARCHITECTURES,
    FIGURES,
    NORMS,
    PER_TASK_FIGURES,
    PRIORS,
    figure_names,
    grid_figures,
)
from .records import task_label  # noqa: E402
from .scaling import _clean, _loglog_replicates  # noqa: E402

# --------------------------------------------------------------------------- style

# One colour and one marker per architecture, in names.ARCHITECTURES order: the
# Okabe-Ito colour-blind-safe palette (Okabe & Ito 2008; its yellow, too faint on
# white, left out) and five of Paul Tol's (2021) muted colours, each paired with its
# own filled marker, so that two architectures never share a colour or a marker.
ARCH_STYLES: dict[str, dict] = {
    "transformer": {"color": "#000000", "marker": "o"},
    "glu": {"color": "#E69F00", "marker": "s"},
    "mos": {"color": "#56B4E9", "marker": "^"},
    "evolved": {"color": "#009E73", "marker": "D"},
    "universal": {"color": "#0072B2", "marker": "v"},
    "switch": {"color": "#D55E00", "marker": "P"},
    "performer": {"color": "#CC79A7", "marker": "X"},
    "funnel": {"color": "#882255", "marker": "<"},
    "albert": {"color": "#999933", "marker": "p"},
    "mixer": {"color": "#332288", "marker": "h"},
    "lconv": {"color": "#44AA99", "marker": ">"},
    "dconv": {"color": "#8C564B", "marker": "d"},
    "s4": {"color": "#E8384F", "marker": "*"},
    "s4_unstructured": {"color": "#AA4499", "marker": "8"},
}
# One line style and marker fill per prior (the marker's shape and colour stay the
# architecture's): where a panel shows one architecture, its priors differ in these.
PRIOR_STYLES: dict[str, dict] = {
    "random": {"linestyle": "-", "fillstyle": "full"},
    "random_noln": {"linestyle": (0, (1, 1)), "fillstyle": "none"},
    "random_causal": {"linestyle": (0, (5, 1, 1, 1, 1, 1)), "fillstyle": "none"},
    "tfixup": {"linestyle": (0, (3, 1.5)), "fillstyle": "left"},
    "dtfixup": {"linestyle": (0, (3, 1.5, 1, 1.5)), "fillstyle": "right"},
    "spt": {"linestyle": (0, (7, 2)), "fillstyle": "bottom"},
    "spt_causal": {"linestyle": (0, (7, 2, 1, 2)), "fillstyle": "bottom"},
    "upstream": {"linestyle": (0, (7, 1.5, 1, 1.5, 1, 1.5)), "fillstyle": "top"},
    "scratch_matched": {"linestyle": (0, (1, 2.5)), "fillstyle": "full"},
}
NORM_LABELS = {"pre": "pre-LN", "post": "post-LN", "none": "no LayerNorm"}
NEUTRAL = "#555555"  # series that are not one architecture
UNKNOWN_STYLE = {"color": NEUTRAL, "marker": "."}
X_LABELS = {
    "compute": "training compute C (FLOPs)",
    "params": "non-embedding parameters",
    "flops_per_token": "FLOPs per token",
}
X_TITLES = {"compute": "compute", "params": "model size", "flops_per_token": "FLOPs per token"}
# Fitted lines carry the pointwise percentile band of this many bootstrap replicates,
# drawn as the fit's own interval draws them (scaling._loglog_replicates, seed 0).
BAND_BOOT = 1000
BAND_SEED = 0

INDEX = "index.md"


def runs_grid_figures(runs: pd.DataFrame, tasks) -> dict[str, str]:
    """`grid_figures` of the grid the run records cover (every run, whatever its
    status: the workflow collects a record of every cell)."""
    t = task_runs(runs)
    both = pd.concat([t, upstream_runs(runs)])
    protocols = set(t["protocol"]) if "protocol" in t else set()
    return grid_figures(tasks, set(t["arch"]), set(both["size"]), set(t["prior"]),
                        "depth" if "depth" in protocols else "default")


def arch_style(arch: str) -> dict:
    """The colour and marker of an architecture, the same in every figure."""
    return dict(ARCH_STYLES.get(arch, UNKNOWN_STYLE))


def prior_style(prior: str) -> dict:
    """The line style and marker fill of a prior, the same in every figure."""
    return dict(PRIOR_STYLES.get(prior, {"linestyle": "-", "fillstyle": "full"}))


def prior_linestyle(prior: str):
    return prior_style(prior)["linestyle"]


def _arch_rank(arch: str) -> tuple[int, str]:
    return (ARCHITECTURES.index(arch) if arch in ARCHITECTURES else len(ARCHITECTURES), arch)


def _prior_rank(prior: str) -> tuple[int, str]:
    return (PRIORS.index(prior) if prior in PRIORS else len(PRIORS), prior)


STYLE = {
    "font.size": 9, "axes.titlesize": 9.5, "legend.fontsize": 8, "axes.grid": True,
    "grid.alpha": 0.3, "axes.spines.top": False, "axes.spines.right": False,
    "legend.handlelength": 4.5,  # long enough to tell the priors' line styles apart
    "lines.markersize": 5.5, "errorbar.capsize": 2,
}


def styled(plot):
    """Draw `plot`'s figure in the house style (STYLE), leaving global settings alone."""

    @functools.wraps(plot)
    def wrapper(*args, **kwargs):
        with plt.rc_context(STYLE):
            return plot(*args, **kwargs)

    return wrapper


# --------------------------------------------------------------------------- drawn or not


class NotDrawn(Exception):  # noqa: N818 (an outcome, not an error)
    """Raised by a plot function whose figure has nothing to show; says why."""


class Drawn(list):
    """The paths of a drawn figure, with `notes` on the panels left out."""

    def __init__(self, paths: Iterable[Path] = (), notes: Iterable[str] = ()):
        super().__init__(paths)
        self.notes = list(notes)


@dataclass
class FigureEntry:
    """One figure of `plot_all`: its files, or why it was not drawn."""

    name: str
    files: list[Path] = field(default_factory=list)
    reason: str = ""  # why it was not drawn ("" when it was)
    notes: list[str] = field(default_factory=list)  # panels left out of a drawn figure
    notice: bool = False  # a notice stands in its place (a declared output)

    @property
    def drawn(self) -> bool:
        return not self.reason


class FigureIndex(list):
    """The paths `plot_all` wrote (figures and index.md), with `entries`: every
    figure by name, drawn or not."""

    def __init__(self, paths: Iterable[Path], entries: dict[str, FigureEntry]):
        super().__init__(paths)
        self.entries = entries

    @property
    def drawn(self) -> list[str]:
        return [name for name, e in self.entries.items() if e.drawn]


def _title_text(width_in: float, main: str, detail: str = "", notes: Iterable[str] = ()) -> str:
    """A figure title wrapped to a figure `width_in` inches wide: `main`, then
    `detail` (what bars and bands are), then the panels left out (`notes`)."""
    notes = list(notes)
    note = ("Left out (no data): " + "; ".join(notes)) if notes else ""
    width = max(40, int(width_in * 14))
    return "\n".join(textwrap.fill(t, width) for t in (main, detail, note) if t)


def _title(fig, main: str, detail: str = "") -> None:
    """The figure's title, wrapped to its width."""
    fig.suptitle(_title_text(fig.get_figwidth(), main, detail), fontsize=9.5)


DATA_COLUMNS = ["panel", "series", "kind", "x", "y", "low", "high"]
FIGURE_FILES = ("png", "pdf", "csv")  # each drawn figure's files: image, vector, its data


def figure_data(fig) -> pd.DataFrame:
    """What `fig` plots, as a tidy frame (its source data, written beside it as CSV):
    one row per point of every named series (artist gid) of every panel (axes label).

    kind "line": a point (x, y) of a data series or fitted line; "ybar"/"xbar": an
    error bar or interval at (x, y) spanning low..high along y or x; "band": a fit
    band at x from low to high. A marker placed in axes coordinates (an unfinished
    run along the panel's top edge) has y NaN.
    """
    rows = []
    for ax in fig.axes:
        panel = ax.get_label()
        for artist in [*ax.lines, *ax.collections]:
            gid = artist.get_gid()
            if not gid:
                continue
            if isinstance(artist, Line2D):
                data = artist.get_transform() == ax.transData
                for x, y in zip(artist.get_xdata(), artist.get_ydata(), strict=True):
                    rows.append((panel, gid, "line", x, y if data else np.nan, np.nan, np.nan))
            elif isinstance(artist, PolyCollection):
                for path in artist.get_paths():
                    v = pd.DataFrame(path.vertices, columns=["x", "y"]).groupby("x")["y"]
                    rows += [(panel, gid, "band", x, np.nan, lo, hi)
                             for x, lo, hi in zip(v.min().index, v.min(), v.max(), strict=True)]
            elif hasattr(artist, "get_segments"):
                for seg in artist.get_segments():
                    (x0, y0), (x1, y1) = seg[0], seg[-1]
                    if x0 == x1:
                        rows.append((panel, gid, "ybar", x0, (y0 + y1) / 2, min(y0, y1),
                                     max(y0, y1)))
                    else:
                        rows.append((panel, gid, "xbar", (x0 + x1) / 2, y0, min(x0, x1),
                                     max(x0, x1)))
    return pd.DataFrame(rows, columns=DATA_COLUMNS)


def save(fig, out_dir: Path, name: str, notes: Iterable[str] = (),
         title_notes: bool = True) -> Drawn:
    """Write `fig` as PNG and PDF, and what it plots as CSV (`figure_data`); `notes`
    (the panels left out, and why) are added under its title (unless `title_notes`
    is False: the title has them already)."""
    notes = list(notes)
    if notes and title_notes:
        old = fig._suptitle.get_text() if fig._suptitle is not None else ""
        note = _title_text(fig.get_figwidth(), "", "", notes)
        fig.suptitle(f"{old}\n{note}" if old else note, fontsize=9.5)
        # Room for the added lines, so that the panels keep their size.
        fig.set_figheight(fig.get_figheight() + 0.17 * (note.count("\n") + 1))
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / f"{name}.{ext}" for ext in ("png", "pdf")]
    for path in paths:
        fig.savefig(path, dpi=150)  # constrained layout already fits the margins
        # The layout is solved now: freeze it rather than solve it again for the PDF.
        fig.set_layout_engine("none")
    figure_data(fig).to_csv(out_dir / f"{name}.csv", index=False)
    plt.close(fig)
    return Drawn([*paths, out_dir / f"{name}.csv"], notes)


def _notice(out_dir: Path, name: str, reason: str) -> list[Path]:
    """A figure-sized notice that `name` was not drawn, and why (no axes)."""
    with plt.rc_context(STYLE):
        fig = plt.figure(figsize=(6.4, 1.3))
        fig.text(0.03, 0.7, f"{name}: not drawn", fontsize=11, weight="bold")
        fig.text(0.03, 0.45, reason, fontsize=8.5, va="top", wrap=True, color=NEUTRAL)
        out_dir = Path(out_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        paths = [out_dir / f"{name}.{ext}" for ext in ("png", "pdf")]
        for path in paths:
            fig.savefig(path, dpi=150)
        plt.close(fig)
    # No data: its source data is the header alone.
    pd.DataFrame(columns=DATA_COLUMNS).to_csv(out_dir / f"{name}.csv", index=False)
    return [*paths, out_dir / f"{name}.csv"]


# --------------------------------------------------------------------------- layout


def _grid(nrows: int, ncols: int, size=(4.2, 3.4), sharex=False, sharey=False, link=True,
          min_width: float = 5.0):
    """A figure with an nrows x ncols grid of panels (2-D array), optionally sharing
    both axes across all of them; `_label_outer` then labels the outer ones only.
    With `link` False the axes are not linked (matplotlib's sharing costs time
    quadratic in the panels): the caller gives them the same limits (`_same_limits`).
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


def _fixed_grid(nrows: int, ncols: int, panel=(2.1, 1.35), gaps=(0.12, 0.12),
                margins=(0.95, 0.2, 0.6, 0.9)):
    """Like `_grid` (shared axes, unlinked), for figures of many panels: a fixed
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


def _drop(fig, ax) -> None:
    """Remove a panel (no data) from its figure's grid."""
    cells = fig._scalestudy_cells
    cells[cells == ax] = None
    ax.remove()


def _panels(n: int, ncols: int | None = None, size=(4.2, 3.4), sharex=False, sharey=False):
    """n panels on a grid of `ncols` columns, row by row; unused slots removed."""
    ncols = min(n, ncols or n)
    nrows = -(-n // ncols)
    fig, cells = _grid(nrows, ncols, size, sharex, sharey)
    flat = list(cells.ravel())
    for ax in flat[n:]:
        _drop(fig, ax)
    return fig, flat[:n]


def _same_limits(axes, pad: float = 0.08) -> None:
    """The same log-scale x and y limits on every panel: the union of their data
    (points and lines; bands do not count), padded by `pad` of the span in log space."""
    lims = []
    for dim in (0, 1):
        lo = min(ax.dataLim.get_points()[0, dim] for ax in axes)
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


def _label_outer(fig, axes=None) -> None:
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


def _ok(runs: pd.DataFrame) -> pd.DataFrame:
    return runs[runs["status"] == "ok"]


# Runs that did not finish are drawn, never left as silent gaps: a marker along
# the top edge of their panel at their x, one shape per status.
UNFINISHED_MARKERS = {"diverged": "x", "failed": "+"}


def _mark_unfinished(ax, x, bad: pd.DataFrame, color) -> set[str]:
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


def _unfinished_handles(statuses: set[str]) -> list[Line2D]:
    return [Line2D([], [], color=NEUTRAL, marker=marker, linestyle="none",
                   label=f"{status} (top edge)")
            for status, marker in UNFINISHED_MARKERS.items() if status in statuses]


def _tasks(runs: pd.DataFrame, tasks=None) -> list[str]:
    if tasks is not None:
        return list(tasks)
    return sorted(task_runs(runs)["task"].unique())


def _x_axis(fits: pd.DataFrame) -> str:
    """The x axis the fits were made on (compute when there are none)."""
    x = fits.loc[fits["metric"].isin(["alpha_D", "alpha_U"]), "x_axis"]
    return x.iloc[0] if len(x) else "compute"


def _loglog_axes(ax, xlabel: str | None, ylabel: str | None, minor: bool = True) -> None:
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


# --------------------------------------------------------------------------- marks


def over_seeds(runs: pd.DataFrame, by: list[str], y: str, x: str | None = None) -> pd.DataFrame:
    """Per group: the mean of `y` over its runs (seeds), its sample standard
    deviation `sd` (NaN with one run) and the number of runs `n`; with `x`, the
    mean of that column too (as `x`)."""
    runs = runs[np.isfinite(runs[y])]
    g = runs.groupby(by, sort=False)
    out = g[y].agg(mean="mean", sd="std", n="count")
    if x is not None:
        out["x"] = g[x].mean()
    return out.reset_index()


def _errorbar(ax, x, stats: pd.DataFrame, gid: str, *, label=None, xerr=None, **style):
    """Means with +-1 sd bars over seeds where a point has several; the data line's
    gid is `gid` (tests and readers find the series by it)."""
    sd = stats["sd"].where(stats["n"] > 1)
    yerr = sd.to_numpy() if sd.notna().any() else None
    if xerr is not None and not np.isfinite(xerr).any():
        xerr = None
    bars = ax.errorbar(np.asarray(x, dtype=float), stats["mean"].to_numpy(), yerr=yerr,
                       xerr=xerr, label=label, **style)
    bars.lines[0].set_gid(gid)
    for coll in bars.lines[2]:
        coll.set_gid(f"{gid}:bars")
    return bars


def fit_band(x, y, ci: float, grid) -> tuple[np.ndarray, np.ndarray]:
    """The pointwise percentile band (coverage `ci`) at `grid` of the log-log fits
    of the bootstrap replicates of the points (x, y): runs resampled with
    replacement exactly as the fit's interval resamples them (BAND_BOOT replicates,
    seed BAND_SEED: with the default fit.n_boot and seed, the very replicates behind
    alpha's interval)."""
    xc, yc, _ = _clean(x, y, None)
    slopes, intercepts = _loglog_replicates(np.log(xc), np.log(yc), BAND_BOOT, BAND_SEED)
    logy = intercepts[:, None] + slopes[:, None] * np.log(np.asarray(grid, float))[None, :]
    low, high = np.quantile(logy, [(1 - ci) / 2, (1 + ci) / 2], axis=0)
    return np.exp(low), np.exp(high)


def _loglog_fit(ax, x, y, row, gid: str, *, sign: int = -1, band: bool = True, **style):
    """The log-log fit `row` (y = coef x^(sign alpha)) over the range of x, with its
    bootstrap band when the fit has an interval. The band does not set the axes'
    limits (the points and lines do): where a few points leave the slope loose, it
    runs off the panel rather than squash the data."""
    xc, _, _ = _clean(x, y, None)
    grid = np.geomspace(xc.min(), xc.max(), 60)
    (line,) = ax.plot(grid, row["coef"] * grid ** (sign * row["alpha"]), **style)
    line.set_gid(gid)
    if band and np.isfinite(row["alpha_low"]):
        low, high = fit_band(x, y, float(row["ci"]), grid)
        verts = np.concatenate([np.column_stack([grid, low]),
                                np.column_stack([grid[::-1], high[::-1]])])
        coll = PolyCollection([verts], facecolors=style.get("color", NEUTRAL), alpha=0.18,
                              linewidths=0)
        coll.set_gid(f"band:{gid.split(':', 1)[1]}")
        ax.add_collection(coll, autolim=False)


def _alpha_text(ax, text: str) -> None:
    """The panel's fitted exponent(s), placed by `_place_texts` once the limits are
    final."""
    ax._scalestudy_text = text


CORNERS = (("right", "top"), ("left", "bottom"), ("right", "bottom"), ("left", "top"))


def _place_texts(axes) -> None:
    """Put each panel's `_alpha_text` in the corner where it covers the fewest points
    of its lines (call after the axes' limits are final)."""
    for ax in axes:
        text = getattr(ax, "_scalestudy_text", None)
        if not text:
            continue
        pts = [ln.get_xydata() for ln in ax.lines if len(ln.get_xydata())]
        xy = np.concatenate(pts) if pts else np.empty((0, 2))
        xy = xy[np.isfinite(xy).all(axis=1)]
        uv = ax.transAxes.inverted().transform(ax.transData.transform(xy)) if len(xy) else xy
        lines = text.count("\n") + 1
        box_w, box_h = 0.62, 0.07 + 0.07 * lines

        def covered(corner, uv=uv, box_w=box_w, box_h=box_h):
            h, v = corner
            u_in = uv[:, 0] >= 1 - box_w if h == "right" else uv[:, 0] <= box_w
            v_in = uv[:, 1] >= 1 - box_h if v == "top" else uv[:, 1] <= box_h
            return int((u_in & v_in).sum())

        h, v = min(CORNERS, key=covered)
        ax.text(0.97 if h == "right" else 0.03, 0.96 if v == "top" else 0.04, text,
                transform=ax.transAxes, ha=h, va=v, fontsize=6.5, color=NEUTRAL,
                bbox={"facecolor": "white", "edgecolor": "none", "pad": 1, "alpha": 0.8})


def _fmt_short(row, symbol: str) -> str:
    if row["status"] != "ok":
        return f"{symbol}: {row['status']}"
    if not np.isfinite(row["alpha_low"]):
        return f"{symbol} = {row['alpha']:.3f}"
    return f"{symbol} = {row['alpha']:.3f} [{row['alpha_low']:.3f}, {row['alpha_high']:.3f}]"


MAX_PANEL_LEGEND = 4  # at most this many architectures in a panel: name their points


def _legend_cols(fig, handles) -> int:
    """As many legend columns as fit the figure's width (about 1.3 inch each)."""
    return max(1, min(len(handles), int(fig.get_figwidth() // 1.3)))


def _arch_handle(arch: str, **extra) -> Line2D:
    return Line2D([], [], linestyle="none", label=arch, **arch_style(arch), **extra)


def _arch_legends(fig, axes, extra: Iterable[Line2D] = ()) -> None:
    """One legend for the whole figure, below it, so that it never covers the data:
    the architectures drawn in `axes` (in names.ARCHITECTURES order) and the `extra`
    handles (what a line or band means)."""
    archs: dict[str, None] = {}
    for ax in axes:
        for label in ax.get_legend_handles_labels()[1]:
            archs.setdefault(label, None)
    handles = [_arch_handle(a) for a in sorted(archs, key=_arch_rank)] + list(extra)
    if handles:
        fig.legend(handles=handles, loc="outside lower center", ncols=_legend_cols(fig, handles))


def _prior_handles(priors: Iterable[str], marker: str = "o") -> list[Line2D]:
    """Legend handles of the priors' styles, in neutral grey."""
    return [Line2D([], [], color=NEUTRAL, marker=marker, label=p, **prior_style(p))
            for p in sorted(set(priors), key=_prior_rank)]


def _fig_legend(fig, handles: list[Line2D], title: str | None = None) -> None:
    if handles:
        fig.legend(handles=handles, loc="outside lower center", title=title,
                   ncols=_legend_cols(fig, handles))


def _spread_note(stats: pd.DataFrame) -> str:
    """What the bars are: "+-1 sd over 3 seeds" (or a range of seed counts)."""
    n = stats.loc[stats["n"] > 1, "n"]
    if n.empty:
        return "one run per point: no bars"
    seeds = f"{n.min()}" if n.min() == n.max() else f"{n.min()}-{n.max()}"
    return f"mean ± 1 sd over {seeds} seeds"


# --------------------------------------------------------------------------- figures


def _band_note(fits: pd.DataFrame) -> str:
    ci = fits["ci"].dropna()
    level = f"{ci.iloc[0]:.0%}" if len(ci) else "95%"
    return f"band: {level} bootstrap band of the fitted line"


@styled
def plot_upstream_loss_vs_compute(runs, fits, out_dir, x_axis=None) -> Drawn:
    """Upstream loss of the masked-LM pretraining runs against x: a first panel with
    every architecture and its log-log fit, then one panel per architecture (shared
    axes) with the log-log fit (solid) and its bootstrap band, the saturating fit
    (dashed) and the fitted exponents."""
    x_axis = x_axis or _x_axis(fits)
    every = upstream_runs(runs)
    if every.empty:
        raise NotDrawn("no upstream pretraining runs: the study has no `upstream` prior")
    up = _ok(every)
    up = up[np.isfinite(up["upstream_loss"])]
    if up.empty:
        raise NotDrawn(f"every upstream pretraining run ({len(every)}) diverged or failed")
    up = up.assign(x=x_values(up, x_axis))
    archs = sorted(set(up["arch"]), key=_arch_rank)
    notes = [f"{a} (every upstream run diverged or failed)"
             for a in sorted(set(every["arch"]) - set(archs), key=_arch_rank)]
    fig, axes = _panels(len(archs) + 1, ncols=4, size=(3.1, 2.5), sharex=True, sharey=True)
    overlay = axes[0]
    overlay.set_title("all architectures (fits without bands)")
    overlay.set_label("overlay")
    saturating, spread = False, []
    for ax, arch in zip(axes[1:], archs, strict=True):
        style = arch_style(arch)
        cell = up[up["arch"] == arch]
        ax.set_title(arch, color=style["color"])
        ax.set_label(arch)
        texts = []
        ll = select(fits, "alpha_U", "loglog", arch=arch)
        if len(ll):
            row = ll.iloc[0]
            texts.append(_fmt_short(row, "αU"))
            if row["status"] == "ok":
                _loglog_fit(ax, cell["x"], cell["upstream_loss"], row, f"fit:{arch}",
                            color=style["color"], linewidth=1.2)
                _loglog_fit(overlay, cell["x"], cell["upstream_loss"], row,
                            f"overlay:{arch}", band=False, color=style["color"], linewidth=1)
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
        spread.append(stats)
        _errorbar(ax, stats["x"], stats, f"points:{arch}", linestyle="none", **style)
        _errorbar(overlay, stats["x"], stats, f"overlay-points:{arch}", label=arch,
                  linestyle="none", **style)
        _alpha_text(ax, "\n".join(texts))
    for ax in axes:
        _loglog_axes(ax, X_LABELS[x_axis], "upstream loss (nats)")
    _place_texts(axes)
    _label_outer(fig)
    key = [Line2D([], [], color=NEUTRAL, label="log-log fit")]
    if saturating:
        key.append(Line2D([], [], color=NEUTRAL, linestyle="--", label="saturating fit"))
    _title(fig, f"Upstream loss (held-out masked-token NLL) against {X_TITLES[x_axis]}",
           f"{_spread_note(pd.concat(spread))}; {_band_note(fits)}; "
           "exponents with their 95% bootstrap interval")
    _arch_legends(fig, [overlay], key)
    return save(fig, out_dir, "upstream_loss_vs_compute", notes)


@styled
def plot_error_vs_compute(runs, fits, out_dir, x_axis=None, tasks=None) -> Drawn:
    """Downstream error against x: one row of panels per architecture and one column
    per task x prior (shared axes), mean over seeds (+-1 sd), with the fitted alpha_D
    power law, its bootstrap band and its exponent. A panel without finished runs is
    left out."""
    x_axis = x_axis or _x_axis(fits)
    runs_t = task_runs(runs)
    ok = _ok(runs_t)
    if ok.empty:
        raise NotDrawn("no finished task runs" if len(runs_t) else "no task runs")
    ok = ok.assign(x=x_values(ok, x_axis))
    tasks = _tasks(runs, tasks)
    priors = sorted(set(runs_t["prior"]), key=_prior_rank)
    cols, notes = [], []
    for task in tasks:
        for prior in priors:
            if ((ok["task"] == task) & (ok["prior"] == prior)).any():
                cols.append((task, prior))
            elif ((runs_t["task"] == task) & (runs_t["prior"] == prior)).any():
                notes.append(f"{task} / {prior} (every run diverged or failed)")
    archs = sorted(set(ok["arch"]), key=_arch_rank)
    have = set(ok[["arch", "task", "prior"]].itertuples(index=False, name=None))
    notes += [f"{a}, {t} / {p} (every run diverged or failed)"
              if ((runs_t["arch"] == a) & (runs_t["task"] == t) & (runs_t["prior"] == p)).any()
              else f"{a}, {t} / {p} (no runs)"
              for a in archs for t, p in cols if (a, t, p) not in have]
    stats_all = over_seeds(ok, ["task", "prior", "arch", "size"], "error")
    panel, gaps, (left, right, bottom) = (2.1, 1.35), (0.2, 0.12), (0.95, 0.2, 0.6)
    width = left + right + len(cols) * panel[0] + (len(cols) - 1) * gaps[0]
    title = _title_text(width, f"Downstream error against {X_TITLES[x_axis]}",
                        f"{_spread_note(stats_all)}; line: log-log fit, {_band_note(fits)}; "
                        "αD with its 95% bootstrap interval", notes)
    top = 0.15 + 0.17 * (title.count("\n") + 1) + 0.3
    fig, cells = _fixed_grid(len(archs), len(cols), panel, gaps, (left, right, bottom, top))
    fig.suptitle(title, fontsize=9.5, y=1 - 0.1 / fig.get_figheight(), va="top")
    multi_task = len({t for t, _ in cols}) > 1
    unfinished: set[str] = set()
    for i, arch in enumerate(archs):
        style = arch_style(arch)
        for j, (task, prior) in enumerate(cols):
            ax = cells[i, j]
            if i == 0:
                ax.set_title(f"{task_label(runs, task)} / {prior}" if multi_task else prior)
            cell = ok[(ok["task"] == task) & (ok["prior"] == prior) & (ok["arch"] == arch)]
            if cell.empty:
                _drop(fig, ax)
                continue
            ax.set_label(f"{task}/{prior}/{arch}")
            fit = select(fits, "alpha_D", task=task, arch=arch, prior=prior)
            if len(fit):
                row = fit.iloc[0]
                if row["status"] == "ok":
                    _loglog_fit(ax, cell["x"], cell["error"], row, f"fit:{arch}",
                                color=style["color"], linewidth=1.1,
                                linestyle=prior_linestyle(prior))
                _alpha_text(ax, _fmt_short(row, "αD"))
            stats = over_seeds(cell, ["size"], "error", x="x")
            _errorbar(ax, stats["x"], stats, f"points:{arch}", label=arch, linestyle="none",
                      **style)
            bad = runs_t[(runs_t["task"] == task) & (runs_t["prior"] == prior)
                         & (runs_t["arch"] == arch) & (runs_t["status"] != "ok")]
            # At the run's own compute; a run that failed before training has
            # none, and stands at its size's finished runs' mean.
            at_size = bad["size"].map(dict(zip(stats["size"], stats["x"], strict=True)))
            unfinished |= _mark_unfinished(
                ax, x_values(bad, x_axis).fillna(at_size), bad, style["color"])
    present = [ax for ax in cells.ravel() if ax is not None]
    for ax in present:
        ax.set_xscale("log")
        ax.set_yscale("log")
    _same_limits(present)
    for ax in present:
        _loglog_axes(ax, "", None, minor=False)
    _place_texts(present)
    for i, arch in enumerate(archs):
        row = [ax for ax in cells[i] if ax is not None]
        if row:
            row[0].set_ylabel(arch, color=arch_style(arch)["color"], fontweight="bold")
    _label_outer(fig)
    fig.supxlabel(X_LABELS[x_axis], fontsize=9, y=0.12 / fig.get_figheight(), va="bottom")
    height = fig.get_figheight()
    fig.supylabel("downstream error (1 - accuracy)", fontsize=9,
                  x=0.1 / fig.get_figwidth(), ha="left", y=(bottom + (height - top)) / 2 / height)
    if unfinished:
        fig.legend(handles=_unfinished_handles(unfinished), loc="lower right", fontsize=7,
                   frameon=False, ncols=2)
    return save(fig, out_dir, "error_vs_compute", notes, title_notes=False)


def _forest(ax, rows: pd.DataFrame, ypos: dict, title: str, xlabel: str,
            filled: bool = True) -> None:
    """One horizontal interval per architecture (rows: fits, one per arch) at the row
    `ypos[arch]`; a fit that refused shows its reason in the row instead."""
    ax.set_title(title)
    ax.set_ylim(-0.7, len(ypos) - 0.3)
    ax.set_yticks(list(ypos.values()), list(ypos))
    for label, arch in zip(ax.get_yticklabels(), ypos, strict=True):
        label.set_color(arch_style(arch)["color"])
    text_x = blended_transform_factory(ax.transAxes, ax.transData)
    for _, row in rows.iterrows():
        style, y = arch_style(row["arch"]), ypos[row["arch"]]
        if row["status"] != "ok":
            ax.text(0.02, y, row["status"], transform=text_x, va="center", fontsize=6,
                    color=NEUTRAL, bbox={"facecolor": "white", "edgecolor": "none", "pad": 1})
            continue
        # A line, not error bars: a percentile interval need not contain the estimate.
        if np.isfinite(row["alpha_low"]):
            seg = ax.hlines(y, row["alpha_low"], row["alpha_high"], color=style["color"])
            seg.set_gid(f"interval:{row['arch']}")
        (pt,) = ax.plot(row["alpha"], y, linestyle="none", **style,
                        fillstyle="full" if filled else "none")
        pt.set_gid(f"alpha:{row['arch']}")
    ax.xaxis.set_major_locator(MaxNLocator(4))
    ax.axvline(0, color=NEUTRAL, linewidth=0.8)
    ax.set_xlabel(xlabel)
    ax.grid(True, axis="x", alpha=0.3)
    ax.grid(False, axis="y")


@styled
def plot_alpha_per_arch(runs, fits, out_dir, tasks=None) -> Drawn:
    """alpha per architecture with its 95% interval, upstream and downstream side by
    side: alpha_U (log-log, then saturating; top row) and alpha_D, one panel per prior
    and one row of panels per task. Every panel has one row per architecture; a panel
    in which every fit refused is left out, and panels of one quantity share x."""
    tasks = _tasks(runs, tasks)
    rel = fits[fits["metric"].isin(["alpha_U", "alpha_D"])]
    if not (rel["status"] == "ok").any():
        why = "; ".join(sorted(set(rel["status"]))[:3]) or "no fits"
        raise NotDrawn(f"no alpha_U or alpha_D fit succeeded ({why})")
    archs = sorted(set(rel["arch"]), key=_arch_rank)
    ypos = {a: len(archs) - 1 - i for i, a in enumerate(archs)}
    notes = []

    def kept(rows, title):
        if (rows["status"] == "ok").any():
            return True
        if len(rows):
            notes.append(f"{title} ({'; '.join(sorted(set(rows['status'])))})")
        return False

    up = [(form, f"upstream: αU, {label}", filled)
          for form, label, filled in (("loglog", "log-log", True), ("saturating", "saturating",
                                                                    False))
          if kept(select(fits, "alpha_U", form), f"alpha_U {label}")]
    down = select(fits, "alpha_D")
    priors = sorted(set(down["prior"]), key=_prior_rank)
    d_panels = [(t, p) for t in tasks for p in priors
                if kept(select(down, "alpha_D", task=t, prior=p), f"alpha_D {t} / {p}")]
    # Rows: the upstream panels, then the downstream ones, at most four to a row.
    ncols = min(max(len(up), len(d_panels), 1), 4)
    rows = ([up] if up else []) + [d_panels[k:k + ncols] for k in range(0, len(d_panels), ncols)]
    fig, cells = _grid(len(rows), ncols, size=(max(2.6, 6.0 / ncols), 1.3 + 0.22 * len(archs)))
    d_axes = [ax for r, row in enumerate(rows) for ax in cells[r, :len(row)]
              if not (up and r == 0)]
    for ax in d_axes[1:]:  # before drawing: alpha_D panels share their x axis
        ax.sharex(d_axes[0])
    for r, row in enumerate(rows):
        for c in range(ncols):
            ax = cells[r, c]
            if c >= len(row):
                _drop(fig, ax)
            elif up and r == 0:
                form, title, filled = row[c]
                _forest(ax, select(fits, "alpha_U", form), ypos, title, "αU (95% interval)",
                        filled)
                ax.set_label(f"alpha_U/{form}")
            else:
                task, prior = row[c]
                _forest(ax, select(fits, "alpha_D", task=task, prior=prior), ypos,
                        f"{task}: αD, {prior}" if len(tasks) > 1 else f"αD, {prior}",
                        "αD (95% interval)")
                ax.set_label(f"alpha_D/{task}/{prior}")
            if c and c < len(row):  # architecture names on the first panel of a row
                ax.tick_params(labelleft=False)
    _title(fig, "Scaling exponents per architecture",
           "point: the fitted alpha (filled: log-log; hollow: saturating, which absorbs the "
           "offset E and is not comparable with the log-log alpha); line: its 95% bootstrap "
           "interval; the alpha_D panels share their x axis")
    return save(fig, out_dir, "alpha_per_arch", notes)


def _mean_acc(runs: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Mean, sample standard deviation (`sd`), min and max test accuracy over the
    seeds of each group of ok runs, and their number (`count`)."""
    g = _ok(runs).groupby(by, sort=False)["test_acc"]
    out = g.agg(["mean", "std", "min", "max", "count"]).reset_index()
    return out.rename(columns={"std": "sd"})


@styled
def plot_accuracy_vs_size(runs, fits, out_dir, task: str) -> Drawn:
    """Test accuracy against size for one task: one panel per architecture with
    finished runs (shared axes), one line per prior in its style: mean over seeds
    with +-1 sd bars where there are several."""
    runs_t = task_runs(runs)
    runs_t = runs_t[runs_t["task"] == task]
    name = f"accuracy_vs_size_{task}"
    acc_all = _mean_acc(runs_t, ["arch", "prior", "size"])
    if acc_all.empty:
        raise NotDrawn(f"no finished runs on {task}" if len(runs_t) else f"no runs on {task}")
    archs = sorted(set(acc_all["arch"]), key=_arch_rank)
    notes = [f"{a} (every run diverged or failed)"
             for a in sorted(set(runs_t["arch"]) - set(archs), key=_arch_rank)]
    sizes = size_order(runs_t)
    pos = {s: i for i, s in enumerate(sizes)}
    present = sorted(set(acc_all["prior"]), key=_prior_rank)
    offset = {p: 0.04 * (j - (len(present) - 1) / 2) for j, p in enumerate(present)}
    fig, axes = _panels(len(archs), ncols=4, size=(3.3, 2.7), sharex=True, sharey=True)
    unfinished: set[str] = set()
    for ax, arch in zip(axes, archs, strict=True):
        ax.set_title(arch, color=arch_style(arch)["color"])
        ax.set_label(arch)
        acc = acc_all[acc_all["arch"] == arch]
        for prior in present:
            a = acc[acc["prior"] == prior].sort_values("size", key=lambda s: s.map(pos))
            if a.empty:
                continue
            # Dodge the priors sideways so that equal values stay visible.
            x = a["size"].map(pos).to_numpy() + offset[prior]
            stats = a.rename(columns={"count": "n"})
            _errorbar(ax, x, stats, f"points:{arch}:{prior}", label=prior,
                      **arch_style(arch), **prior_style(prior), linewidth=1.1)
        bad = runs_t[(runs_t["arch"] == arch) & (runs_t["status"] != "ok")]
        unfinished |= _mark_unfinished(
            ax, bad["size"].map(pos) + bad["prior"].map(offset).fillna(0.0), bad,
            arch_style(arch)["color"])
        ax.set_xticks(range(len(sizes)), sizes)
        ax.set_xlim(-0.5, len(sizes) - 0.5)
        ax.set_xlabel("size")
        ax.set_ylabel("test accuracy")
    _label_outer(fig, axes)
    note = _spread_note(acc_all.rename(columns={"count": "n"}))
    _title(fig, f"{task_label(runs, task)}: test accuracy against size", note)
    _fig_legend(fig, _prior_handles(present) + _unfinished_handles(unfinished), title="prior")
    return save(fig, out_dir, name, notes)


def arch_gap(runs: pd.DataFrame, priors=("random", "spt")) -> pd.DataFrame:
    """Per (task, prior, size): best architecture's mean test accuracy minus the
    vanilla transformer's (rows only where the transformer has finished runs), and
    the standard deviation of the per-seed gap over the seeds both have (`gap_sd`,
    NaN with fewer than two such seeds; `n_seeds` counts them)."""
    t = _ok(task_runs(runs))
    acc = _mean_acc(t, ["task", "prior", "size", "arch"])
    acc = acc[acc["prior"].isin(priors)]
    rows = []
    for (task, prior, size), g in acc.groupby(["task", "prior", "size"], sort=False):
        tf = g[g["arch"] == "transformer"]
        if tf.empty:
            continue
        best = g.loc[g["mean"].idxmax()]
        cell = t[(t["task"] == task) & (t["prior"] == prior) & (t["size"] == size)]
        per_seed = cell.pivot_table(index="seed", columns="arch", values="test_acc")
        paired = (per_seed[best["arch"]] - per_seed["transformer"]).dropna()
        rows.append({"task": task, "prior": prior, "size": size, "best_arch": best["arch"],
                     "best_acc": best["mean"], "transformer_acc": tf["mean"].iloc[0],
                     "gap": best["mean"] - tf["mean"].iloc[0], "n_archs": len(g),
                     "gap_sd": paired.std() if len(paired) > 1 else np.nan,
                     "n_seeds": len(paired)})
    return pd.DataFrame(rows, columns=["task", "prior", "size", "best_arch", "best_acc",
                                       "transformer_acc", "gap", "n_archs", "gap_sd",
                                       "n_seeds"])


@styled
def plot_arch_gap(runs, fits, out_dir, tasks=None) -> Drawn:
    """The architecture gap (best minus vanilla transformer test accuracy) against
    size under random initialisation and under SPT (Amos et al. 2023), one panel
    per task with data (shared y); each point is drawn in the style of the
    architecture that is best there, with +-1 sd bars of the per-seed gap."""
    runs_t = task_runs(runs)
    tasks = _tasks(runs, tasks)
    gaps = arch_gap(runs)
    gaps = gaps[gaps["n_archs"] >= 2]
    if gaps.empty:
        ok = _ok(runs_t)
        if not (ok["arch"] == "transformer").any():
            why = "no finished transformer runs to measure the gap from"
        elif ok["arch"].nunique() < 2:
            why = "only one architecture"
        elif not ok["prior"].isin(["random", "spt"]).any():
            why = "no finished runs under `random` or `spt`"
        else:
            why = "no size with finished runs of the transformer and another architecture"
        raise NotDrawn(why + " (the gap is the best architecture minus the transformer, "
                       "under random and spt)")
    shown = [t for t in tasks if (gaps["task"] == t).any()]
    notes = [f"{t} (no gap to measure)" for t in tasks if t not in shown]
    fig, axes = _panels(len(shown), sharey=True)
    for ax, task in zip(axes, shown, strict=True):
        ax.set_title(task)
        ax.set_label(task)
        g = gaps[gaps["task"] == task]
        sizes = size_order(runs_t[runs_t["task"] == task])
        pos = {s: i for i, s in enumerate(sizes)}
        for prior in ("random", "spt"):
            p = g[g["prior"] == prior].sort_values("size", key=lambda s: s.map(pos))
            if p.empty:
                continue
            x = p["size"].map(pos).to_numpy()
            (line,) = ax.plot(x, p["gap"], color=NEUTRAL, linestyle=prior_linestyle(prior),
                              label=prior)
            line.set_gid(f"gap:{prior}")
            for xi, (_, row) in zip(x, p.iterrows(), strict=True):
                style = arch_style(row["best_arch"])
                yerr = None if np.isnan(row["gap_sd"]) else [row["gap_sd"]]
                bars = ax.errorbar([xi], [row["gap"]], yerr=yerr, linestyle="none", **style)
                bars.lines[0].set_gid(f"best:{prior}:{row['size']}:{row['best_arch']}")
                ax.annotate(row["best_arch"], (xi, row["gap"]), fontsize=6.5,
                            xytext=(4, 3), textcoords="offset points", color=style["color"])
        ax.axhline(0, color=NEUTRAL, linewidth=0.6)
        ax.set_xticks(range(len(sizes)), sizes)
        ax.set_xlim(-0.4, len(sizes) - 0.6)
        ax.set_xlabel("size")
        ax.set_ylabel("accuracy gap (best - transformer)")
        ax.legend(title="prior", loc="upper left")
    _label_outer(fig, axes)
    n = gaps.loc[gaps["n_seeds"] > 1, "n_seeds"]
    seeds = "" if n.empty else f"{n.min()}" if n.min() == n.max() else f"{n.min()}-{n.max()}"
    _title(fig, "Best architecture minus the transformer, test accuracy",
           f"bars: ± 1 sd of the per-seed gap over {seeds} seeds" if seeds else "")
    return save(fig, out_dir, "arch_gap", notes)


def _depth_panels(runs_t: pd.DataFrame) -> list[tuple[str, int, str]]:
    """(arch, width, norm) of every group of task runs (any status) at two or more
    depths: where depth varies at a fixed width, LayerNorm placement and architecture."""
    keys = []
    for (arch, width, norm), g in runs_t.groupby(["arch", "width", "norm"], sort=False):
        if g["depth"].nunique() >= 2:
            keys.append((arch, int(width), norm))
    norm_rank = {n: i for i, n in enumerate(NORMS)}
    return sorted(keys, key=lambda k: (_arch_rank(k[0]), k[1], norm_rank.get(k[2], 9)))


def _depth_reason(runs_t: pd.DataFrame) -> str:
    if runs_t.empty:
        return "no task runs"
    hint = ("the `depth` scaling protocol (train.protocol: depth) with two or more sizes "
            "grows depth at a fixed width")
    if runs_t["depth"].nunique() == 1:
        return (f"every task run has depth {int(runs_t['depth'].iloc[0])}: no depths to "
                f"compare; {hint}")
    arch = min(set(runs_t["arch"]), key=_arch_rank)
    a = runs_t[runs_t["arch"] == arch]
    shape = ", ".join(f"{int(d)} at width {int(w)}" for (w, d), _ in
                      a.groupby(["width", "depth"], sort=True))
    return ("no architecture has runs at two or more depths of one width (and LayerNorm "
            f"placement): depth changes only together with width (e.g. {arch}: depth {shape}), "
            f"so a curve against depth would mix widths; {hint}")


@styled
def plot_loss_vs_depth(runs, fits, out_dir) -> Drawn:
    """Final training loss against depth at a fixed width: one panel per
    architecture, width and LayerNorm placement with runs at two or more depths (shared
    y), one line per prior in its style, mean over seeds +-1 sd. Runs that diverged or
    failed are crosses along the top edge (Xu et al. 2021: where the standard recipe
    fails). Different widths are never averaged into one point."""
    runs_t = task_runs(runs)
    keys = _depth_panels(runs_t)
    if not keys:
        raise NotDrawn(_depth_reason(runs_t))
    fig, axes = _panels(len(keys), ncols=4, size=(3.4, 2.9), sharey=True)
    spread, priors, failed = [], set(), False
    for ax, (arch, width, norm) in zip(axes, keys, strict=True):
        style = arch_style(arch)
        ax.set_title(f"{arch}, width {width}, {NORM_LABELS.get(norm, norm)}",
                     color=style["color"])
        ax.set_label(f"{arch}/{width}/{norm}")
        cell = runs_t[(runs_t["arch"] == arch) & (runs_t["width"] == width)
                      & (runs_t["norm"] == norm)]
        ok = _ok(cell)
        ok = ok[np.isfinite(ok["train_loss"])]
        bad = cell[cell["status"] != "ok"]
        for prior, s in sorted(ok.groupby("prior", sort=False), key=lambda kv: _prior_rank(kv[0])):
            stats = over_seeds(s, ["depth"], "train_loss").sort_values("depth")
            spread.append(stats)
            priors.add(prior)
            _errorbar(ax, stats["depth"], stats, f"points:{arch}:{width}:{norm}:{prior}",
                      label=prior, **style, **prior_style(prior), linewidth=1.1)
        top = blended_transform_factory(ax.transData, ax.transAxes)
        for _, row in bad.iterrows():
            (cross,) = ax.plot(row["depth"], 0.97, marker="x", color=style["color"],
                               linestyle="none", transform=top)
            cross.set_gid(f"failed:{row['prior']}")
            failed = True
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
    _label_outer(fig, axes)
    note = _spread_note(pd.concat(spread)) if spread else "no finished runs"
    _title(fig, "Final training loss against depth at a fixed width", note)
    handles = _prior_handles(priors)
    if failed:
        handles.append(Line2D([], [], color=NEUTRAL, marker="x", linestyle="none",
                              label="diverged / failed"))
    _fig_legend(fig, handles, title="prior")
    return save(fig, out_dir, "loss_vs_depth")


@styled
def plot_downstream_vs_upstream(runs, fits, out_dir, tasks=None) -> Drawn:
    """Downstream error of the upstream-prior runs against their upstream loss, per
    task: a first panel with every architecture and its fit, then one panel per
    architecture (shared axes) with the alpha_U,D fit (err = coef * loss^alpha_U,D),
    its bootstrap band and exponent; mean over seeds +-1 sd."""
    tasks = _tasks(runs, tasks)
    every = task_runs(runs)
    every = every[every["prior"] == "upstream"]
    if every.empty:
        raise NotDrawn("no runs finetuned from upstream pretraining: the study has no "
                       "`upstream` prior")
    ok = _ok(every)
    ok = ok[np.isfinite(ok["upstream_loss"])]
    if ok.empty:
        raise NotDrawn(f"every run finetuned from upstream pretraining ({len(every)}) "
                       "diverged or failed")
    shown = [t for t in tasks if (ok["task"] == t).any()]
    notes = [f"{t} (no finished upstream-prior runs)" for t in tasks if t not in shown]
    panels = []  # (task, arch or None for the overlay)
    for task in shown:
        panels.append((task, None))
        panels += [(task, a) for a in sorted(set(ok.loc[ok["task"] == task, "arch"]),
                                             key=_arch_rank)]
    fig, axes = _panels(len(panels), ncols=4, size=(3.1, 2.5), sharex=True, sharey=True)
    overlays, spread = {}, []
    prefix = (lambda t: f"{t}: ") if len(shown) > 1 else (lambda t: "")
    for ax, (task, arch) in zip(axes, panels, strict=True):
        if arch is None:
            ax.set_title(f"{prefix(task)}all architectures (fits without bands)")
            ax.set_label(f"{task}/overlay")
            overlays[task] = ax
            continue
        style = arch_style(arch)
        ax.set_title(prefix(task) + arch, color=style["color"])
        ax.set_label(f"{task}/{arch}")
        cell = ok[(ok["task"] == task) & (ok["arch"] == arch)]
        fit = select(fits, "alpha_UD", task=task, arch=arch)
        if len(fit):
            row = fit.iloc[0]
            if row["status"] == "ok":
                _loglog_fit(ax, cell["upstream_loss"], cell["error"], row, f"fit:{arch}",
                            sign=1, color=style["color"], linewidth=1.2)
                _loglog_fit(overlays[task], cell["upstream_loss"], cell["error"], row,
                            f"overlay:{arch}", sign=1, band=False, color=style["color"],
                            linewidth=1)
            _alpha_text(ax, _fmt_short(row, "αU,D"))
        stats = over_seeds(cell, ["size"], "error", x="upstream_loss")
        spread.append(stats)
        _errorbar(ax, stats["x"], stats, f"points:{arch}", linestyle="none", **style)
        _errorbar(overlays[task], stats["x"], stats, f"overlay-points:{arch}", label=arch,
                  linestyle="none", **style)
    for ax in axes:
        _loglog_axes(ax, "upstream loss (nats)", "downstream error")
    _place_texts(axes)
    _label_outer(fig)
    _title(fig, "Downstream error (1 - test accuracy) against upstream loss, upstream prior",
           f"{_spread_note(pd.concat(spread))}; line: err = c L^αU,D, {_band_note(fits)}")
    _arch_legends(fig, list(overlays.values()))
    return save(fig, out_dir, "downstream_vs_upstream", notes)


def spt_vs_matched(runs: pd.DataFrame) -> pd.DataFrame:
    """Per (task, arch, size): mean test accuracy under spt and under the
    compute-matched control, where both have finished runs, with each one's standard
    deviation over seeds (`spt_sd`, `scratch_matched_sd`; NaN with one run) and its
    number of runs (`spt_n`, `scratch_matched_n`)."""
    cols = ["task", "arch", "size", "spt", "scratch_matched", "spt_sd", "scratch_matched_sd",
            "spt_n", "scratch_matched_n"]
    acc = _mean_acc(task_runs(runs), ["task", "arch", "size", "prior"])
    acc = acc[acc["prior"].isin(["spt", "scratch_matched"])]
    if set(acc["prior"]) != {"spt", "scratch_matched"}:
        return pd.DataFrame(columns=cols)
    wide = acc.pivot_table(index=["task", "arch", "size"], columns="prior",
                           values=["mean", "sd", "count"])
    out = pd.DataFrame({
        "spt": wide[("mean", "spt")], "scratch_matched": wide[("mean", "scratch_matched")],
        "spt_sd": wide[("sd", "spt")] if ("sd", "spt") in wide else np.nan,
        "scratch_matched_sd": (wide[("sd", "scratch_matched")]
                               if ("sd", "scratch_matched") in wide else np.nan),
        "spt_n": wide[("count", "spt")], "scratch_matched_n": wide[("count", "scratch_matched")],
    })
    return out.dropna(subset=["spt", "scratch_matched"]).reset_index()[cols]


@styled
def plot_spt_vs_matched(runs, fits, out_dir, tasks=None) -> Drawn:
    """SPT's test accuracy against the compute-matched control's (random init
    trained for SPT's pretraining plus finetuning FLOPs), one point per arch and
    size (mean over seeds, +-1 sd both ways): above the diagonal, SPT wins at equal
    compute (Amos et al. 2023)."""
    tasks = _tasks(runs, tasks)
    pairs = spt_vs_matched(runs)
    if pairs.empty:
        priors = set(task_runs(runs)["prior"])
        missing = [p for p in ("spt", "scratch_matched") if p not in priors]
        if missing:
            why = " and ".join(f"`{p}`" for p in missing)
            raise NotDrawn(f"no {why} runs: the study's priors lack "
                           f"{'them' if len(missing) > 1 else 'it'}")
        raise NotDrawn("no architecture and size with finished runs under both spt and "
                       "scratch_matched")
    shown = [t for t in tasks if (pairs["task"] == t).any()]
    notes = [f"{t} (no spt and scratch_matched pair)" for t in tasks if t not in shown]
    fig, axes = _panels(len(shown), size=(4.4, 4.4), sharex=True, sharey=True)
    lo = min(pairs["spt"].min(), pairs["scratch_matched"].min())
    hi = max(pairs["spt"].max(), pairs["scratch_matched"].max())
    pad = 0.08 * max(hi - lo, 0.02)
    for ax, task in zip(axes, shown, strict=True):
        ax.set_title(task)
        ax.set_label(task)
        p = pairs[pairs["task"] == task]
        # The diagonal: equal accuracy at equal compute.
        ax.plot([lo - pad, hi + pad], [lo - pad, hi + pad], color=NEUTRAL, linewidth=0.8)
        for arch, cell in sorted(p.groupby("arch", sort=False), key=lambda kv: _arch_rank(kv[0])):
            stats = cell.rename(columns={"spt": "mean", "spt_sd": "sd", "spt_n": "n"})
            xerr = cell["scratch_matched_sd"].where(cell["scratch_matched_n"] > 1).to_numpy(float)
            _errorbar(ax, cell["scratch_matched"], stats, f"points:{arch}", label=arch,
                      xerr=xerr, linestyle="none", **arch_style(arch))
            if p["arch"].nunique() <= MAX_PANEL_LEGEND:  # few points: name their sizes
                for _, row in cell.iterrows():
                    ax.annotate(row["size"], (row["scratch_matched"], row["spt"]), fontsize=6,
                                xytext=(3, -8), textcoords="offset points")
        ax.set_xlim(lo - pad, hi + pad)
        ax.set_ylim(lo - pad, hi + pad)
        ax.set_aspect("equal")
        ax.set_xlabel("compute-matched control: test accuracy")
        ax.set_ylabel("SPT: test accuracy")
    _label_outer(fig, axes)
    n = pd.concat([pairs["spt_n"], pairs["scratch_matched_n"]])
    _title(fig, "SPT against the compute-matched control",
           f"mean ± 1 sd over {int(n.max())} seeds" if n.max() > 1 else "one run per point")
    _arch_legends(fig, axes)
    return save(fig, out_dir, "spt_vs_matched", notes)


def _heldout_panels(fits: pd.DataFrame, tasks) -> list[tuple[str, pd.DataFrame]]:
    """(title, fits rows) of each panel of `heldout_prediction`: alpha_U in both
    forms, then per task alpha_D per prior and alpha_U,D."""
    panels = [(f"upstream loss: αU, {label}", select(fits, "alpha_U", form))
              for form, label in (("loglog", "log-log"), ("saturating", "saturating"))]
    down = select(fits, "alpha_D")
    for task in tasks:
        panels += [(f"{task} error: αD, {prior}", select(down, "alpha_D", task=task, prior=prior))
                   for prior in sorted(set(down.loc[down["task"] == task, "prior"]),
                                       key=_prior_rank)]
        panels.append((f"{task} error vs upstream loss: αU,D",
                       select(fits, "alpha_UD", task=task)))
    return [(title, rows) for title, rows in panels if len(rows)]


@styled
def plot_heldout_prediction(runs, fits, out_dir, tasks=None) -> Drawn:
    """Each law refitted without its largest size: the prediction there (y) against
    the observed mean (x), one panel per law (and prior) with predictions, one point
    per architecture, bars the 95% bootstrap interval of the prediction. On the
    diagonal the law predicted the held-out size exactly; below it the size did worse
    (higher loss or error) than the law predicts. The grey band is +-10%."""
    panels = _heldout_panels(fits, _tasks(runs, tasks))
    notes, kept = [], []
    for title, rows in panels:
        if (rows["heldout_status"] == "ok").any():
            kept.append((title, rows))
        else:
            notes.append(f"{title} ({'; '.join(sorted(set(rows['heldout_status'])))})")
    if not kept:
        why = "; ".join(sorted({n.split(" (", 1)[1].rstrip(")") for n in notes})[:3])
        raise NotDrawn("no law could be refitted without its largest size"
                       + (f" ({why})" if why else ": no fits"))
    def interval(ok):  # the prediction's interval: obs * (1 + the rel. error's ends)
        return ok.assign(low=ok["heldout_obs"] * (1 + ok["heldout_rel_error_low"]),
                         high=ok["heldout_obs"] * (1 + ok["heldout_rel_error_high"]))

    # The alpha_D panels of one task (the same quantity, per prior) share their limits.
    limits: dict[str, np.ndarray] = {}
    for title, rows in kept:
        ok = interval(rows[rows["heldout_status"] == "ok"])
        values = ok[["heldout_obs", "heldout_pred", "low", "high"]].stack().dropna()
        key = title if " αD, " not in title else title.split(" αD, ")[0]
        lo, hi = limits.get(key, (np.inf, -np.inf))
        limits[key] = np.array([min(lo, values.min()), max(hi, values.max())])
    fig, axes = _panels(len(kept), ncols=3, size=(3.6, 3.5))
    for ax, (title, rows) in zip(axes, kept, strict=True):
        ok = interval(rows[rows["heldout_status"] == "ok"])
        size = "/".join(sorted(set(ok["heldout_size"])))
        ax.set_label(title)
        ax.set_title(f"{title}\nheld out {size}: median |error| "
                     f"{100 * ok['heldout_rel_error'].abs().median():.1f}%")
        lim = limits[title if " αD, " not in title else title.split(" αD, ")[0]].copy()
        lim += np.array([-1, 1]) * max(0.05 * (lim[1] - lim[0]), 0.03 * abs(lim[1]))
        ax.fill_between(lim, 0.9 * lim, 1.1 * lim, color=NEUTRAL, alpha=0.12, linewidth=0)
        ax.plot(lim, lim, color=NEUTRAL, linewidth=0.8)
        for _, row in ok.sort_values("arch", key=lambda a: a.map(_arch_rank)).iterrows():
            style = arch_style(row["arch"])
            # Lines, not error bars: a percentile interval need not contain the estimate.
            ax.vlines(row["heldout_obs"], row["low"], row["high"], color=style["color"])
            (pt,) = ax.plot(row["heldout_obs"], row["heldout_pred"], linestyle="none",
                            label=row["arch"], **style)
            pt.set_gid(f"points:{row['arch']}")
        refused = len(rows) - len(ok)
        if refused:
            ax.text(0.98, 0.02, f"{refused} without prediction", transform=ax.transAxes,
                    ha="right", va="bottom", fontsize=6, color=NEUTRAL)
        ax.set_xlim(lim)
        ax.set_ylim(lim)
        ax.set_aspect("equal")
        ax.xaxis.set_major_locator(MaxNLocator(4))
        ax.yaxis.set_major_locator(MaxNLocator(4))
        ax.ticklabel_format(useOffset=False)
        ax.set_xlabel("observed (mean over runs)")
        ax.set_ylabel("predicted by the law")
    _title(fig, "Each law refitted without its largest size: its prediction there against "
           "the observed mean", "bars: 95% bootstrap interval of the prediction; grey: ±10%; "
           "the alpha_D panels of a task share their scale")
    _arch_legends(fig, axes)
    return save(fig, out_dir, "heldout_prediction", notes)


# --------------------------------------------------------------------------- all of them


def _remove(out_dir: Path, name: str) -> None:
    """Remove an earlier run's files of a figure that is not drawn now."""
    for ext in FIGURE_FILES:
        (Path(out_dir) / f"{name}.{ext}").unlink(missing_ok=True)


def write_index(entries: dict[str, FigureEntry], out_dir: Path) -> Path:
    """figures/index.md: every figure with its files, or why it was not drawn."""
    drawn = [e for e in entries.values() if e.drawn]
    lines = ["# Figures", "",
             f"{len(drawn)} of {len(entries)} figures drawn. A figure without data is not "
             "drawn; its row says why. A panel without data is left out of its figure.", "",
             "| figure | file | notes |", "|---|---|---|"]
    for e in entries.values():
        if e.drawn:
            files = ", ".join(f"[{p.name}]({p.name})" for p in e.files)
            note = ("panels left out: " + "; ".join(e.notes)) if e.notes else ""
        else:
            files = "not drawn"
            note = e.reason
            if e.notice:
                note += (" (the study's grid should feed this figure, so a notice saying "
                         "this stands in its place)")
        lines.append(f"| {e.name} | {files} | {note.replace('|', '/')} |")
    path = Path(out_dir) / INDEX
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


_JOBS: dict = {}  # the figures of the `_draw_all` under way, inherited by its workers


def _draw_one(name: str) -> tuple[str, list[Path], list[str], str | None]:
    """Draw figure `name` of `_JOBS`: (name, files, notes, None), or
    (name, [], [], why) when it has no data."""
    try:
        result = _JOBS[name]()
    except NotDrawn as err:
        return name, [], [], str(err)
    return name, list(result), list(getattr(result, "notes", [])), None


def _draw_all(jobs: dict, workers: int) -> list[tuple]:
    """`_draw_one` of every job, in order; in `workers` forked processes when
    more than one (figures are independent: each a few seconds of layout and
    rendering, the longest ~10 s on a study of 13 architectures x 7 priors).
    Forking shares the data without pickling it; where there is no fork
    (Windows), or with one worker, they are drawn here in turn."""
    import multiprocessing

    _JOBS.clear()
    _JOBS.update(jobs)
    try:
        if workers > 1 and "fork" in multiprocessing.get_all_start_methods():
            context = multiprocessing.get_context("fork")
            with context.Pool(min(workers, len(jobs))) as pool:
                return pool.map(_draw_one, list(jobs), chunksize=1)
        return [_draw_one(name) for name in jobs]
    finally:
        _JOBS.clear()


def plot_all(runs: pd.DataFrame, fits: pd.DataFrame, out_dir: Path, tasks=None,
             declared=None, workers: int = 1) -> FigureIndex:
    """Every figure of `figure_names(tasks)` (tasks: default, those in `runs`) that
    has data, and `index.md` listing each figure with its files or the reason it was
    not drawn. A figure in `declared` (default: `runs_grid_figures`, the figures the
    runs' grid feeds, which the workflow declares as outputs) that has no data gets a
    notice in its place, so that its files exist. `workers` > 1 draws that many
    figures at a time, each in its own process. Returns the paths written
    (figures, then index.md), with `.entries` for every figure."""
    tasks = _tasks(runs, tasks)
    out_dir = Path(out_dir)
    declared = set(runs_grid_figures(runs, tasks) if declared is None else declared)
    jobs = {
        "upstream_loss_vs_compute": lambda: plot_upstream_loss_vs_compute(runs, fits, out_dir),
        "error_vs_compute": lambda: plot_error_vs_compute(runs, fits, out_dir, tasks=tasks),
        "alpha_per_arch": lambda: plot_alpha_per_arch(runs, fits, out_dir, tasks=tasks),
        "arch_gap": lambda: plot_arch_gap(runs, fits, out_dir, tasks=tasks),
        "loss_vs_depth": lambda: plot_loss_vs_depth(runs, fits, out_dir),
        "downstream_vs_upstream":
            lambda: plot_downstream_vs_upstream(runs, fits, out_dir, tasks=tasks),
        "spt_vs_matched": lambda: plot_spt_vs_matched(runs, fits, out_dir, tasks=tasks),
        "heldout_prediction": lambda: plot_heldout_prediction(runs, fits, out_dir, tasks=tasks),
    }
    for task in tasks:
        jobs[f"accuracy_vs_size_{task}"] = functools.partial(
            plot_accuracy_vs_size, runs, fits, out_dir, task)
    entries: dict[str, FigureEntry] = {}
    for name, files, notes, reason in _draw_all(jobs, workers):
        if reason is None:
            entries[name] = FigureEntry(name, files=files, notes=notes)
            continue
        _remove(out_dir, name)
        entry = FigureEntry(name, reason=reason)
        if name in declared:
            entry.files, entry.notice = _notice(out_dir, name, reason), True
        entries[name] = entry
    paths = [p for e in entries.values() for p in e.files]
    paths.append(write_index(entries, out_dir))
    return FigureIndex(paths, entries)


__all__ = [
    "ARCH_STYLES", "FIGURES", "PER_TASK_FIGURES", "PRIOR_STYLES", "Drawn", "FigureEntry",
    "FigureIndex", "NotDrawn", "arch_gap", "arch_style", "figure_data", "figure_names",
    "fit_band",
    "grid_figures", "over_seeds", "plot_all", "prior_style", "runs_grid_figures",
    "spt_vs_matched",
]
