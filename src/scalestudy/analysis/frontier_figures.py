"""Figures of the compute-optimal frontier (scalestudy.analysis.frontier), PNG and PDF.

Three figures after Hoffmann et al. 2022 (Chinchilla), Figures 2-4:

- `frontier_isoflop`: per group (architecture, prior), loss against N for each
  budget, coloured by its compute as the table counts it, with approach 2's
  parabolas (in log N) over the sizes each was fitted on (those around the
  budget's lowest loss) and their vertices N_opt marked; the runs of budgets left
  out are drawn hollow and grey, with no parabola.
- `frontier_optimal`: per group, N_opt and D_opt against C (on the result's compute
  axis, named on the x label): each approach's points
  (approach 1: the envelope's; 2: the vertices; 3: the closed form at the
  budgets), its fitted power law and its bootstrap band, the legend giving the
  exponent with its interval.
- `frontier_loss`: the loss at the compute-optimal size against C, every group on
  one axes: approach 3's L(N_opt(C), D_opt(C)) with its bootstrap band, solid
  over the budgets run and dashed over the decade beyond the largest one (the
  extrapolation), and approach 2's vertex losses as markers, all on the compute
  axis.

Drawn from a `FrontierResult` only (its tables), with the Agg backend.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only; never needs a display
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.colors import LogNorm  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.ticker import LogFormatterSciNotation, LogLocator, NullFormatter  # noqa: E402

from .frontier import AXIS_LABELS, METHOD_LABELS, METHODS, FrontierResult  # noqa: E402

FIGURES = ("frontier_isoflop", "frontier_optimal", "frontier_loss")
STYLE = {
    "font.size": 9,
    "axes.titlesize": 10,
    "axes.labelsize": 9,
    "legend.fontsize": 7.5,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "grid.linewidth": 0.5,
}
METHOD_STYLE = {
    "approach1": {"color": "#1b9e77", "marker": "o", "ls": "-"},
    "approach2": {"color": "#d95f02", "marker": "s", "ls": "--"},
    "approach3": {"color": "#7570b3", "marker": "^", "ls": ":"},
}
GROUP_COLORS = plt.get_cmap("tab10").colors


def _compute_label(result: FrontierResult) -> str:
    return f"compute C ({AXIS_LABELS[result.compute_axis]})"


def _groups(result: FrontierResult) -> list[tuple]:
    keys = result.runs[list(result.by)].drop_duplicates()
    return sorted(tuple(str(v) for v in row) for row in keys.itertuples(index=False))


def _rows(df: pd.DataFrame, by, key) -> pd.DataFrame:
    mask = np.ones(len(df), dtype=bool)
    for c, v in zip(by, key, strict=True):
        mask &= df[c].astype(str).to_numpy() == v
    return df[mask]


def _title(by, key) -> str:
    parts = [f"{c} {v}" for c, v in zip(by, key, strict=True) if v != "all"]
    return ", ".join(parts) if parts else "all runs"


def _quiet_minor_labels(fig) -> None:
    """No labels on the minor ticks of log axes spanning 1.5 decades or more: the
    decades are labelled, and the minor labels crowd them (and cost most of the
    drawing time); a narrower axis, with few or no decades to label, keeps minor
    ticks at 2 and 5 times each decade only (every one, labelled, would overlap)."""
    for ax in fig.axes:
        for axis, lim in ((ax.xaxis, ax.get_xlim()), (ax.yaxis, ax.get_ylim())):
            if axis.get_scale() == "log" and min(lim) > 0:
                if abs(np.log10(lim[1] / lim[0])) >= 1.5:
                    axis.set_minor_formatter(NullFormatter())
                else:
                    axis.set_minor_locator(LogLocator(subs=(2.0, 5.0)))
                    axis.set_minor_formatter(LogFormatterSciNotation(
                        labelOnlyBase=False, minor_thresholds=(np.inf, np.inf)))


def _save(fig, out_dir: Path, name: str) -> list[Path]:
    _quiet_minor_labels(fig)
    paths = [Path(out_dir) / f"{name}.{ext}" for ext in ("png", "pdf")]
    for path in paths:
        fig.savefig(path, dpi=150)
        fig.set_layout_engine("none")  # solved once: the PDF keeps the PNG's layout
    plt.close(fig)
    return paths


def _panel_grid(n: int, ncols: int, size: tuple[float, float]):
    ncols = max(1, min(ncols, n))
    nrows = int(np.ceil(n / ncols))
    fig, axes = plt.subplots(nrows, ncols, figsize=(size[0] * ncols, size[1] * nrows),
                             squeeze=False, layout="constrained")
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    return fig, axes.flat[:n]


# --------------------------------------------------------------------------- IsoFLOP


def isoflop_figure(result: FrontierResult, out_dir: Path) -> list[Path]:
    by, runs, prof = result.by, result.runs, result.profiles
    keys = _groups(result)
    with plt.rc_context(STYLE):
        fig, axes = _panel_grid(len(keys), 2, (5.2, 3.9))
        cs = runs["_budget_compute"]
        norm = LogNorm(cs.min(), max(cs.max(), cs.min() * 1.01))
        cmap = plt.get_cmap("viridis")
        for ax, key in zip(axes, keys, strict=True):
            sub = _rows(runs, by, key)
            p = _rows(prof, by, key) if not prof.empty else prof
            status = dict(zip(p["budget"], p["status"], strict=True)) if len(p) else {}
            for b, r in sub.groupby("_budget", sort=True):
                colour = cmap(norm(r["_budget_compute"].iloc[0]))
                if status.get(b) == "ok":
                    ax.scatter(r["params"], r["loss"], s=16, color=colour, zorder=3,
                               edgecolor="none")
                else:
                    ax.scatter(r["params"], r["loss"], s=16, facecolor="none",
                               edgecolor="0.6", linewidth=0.7, zorder=2)
            for row in p[p["status"] == "ok"].itertuples(index=False):
                colour = cmap(norm(row.compute))
                u = np.linspace(np.log(row.n_min), np.log(row.n_max), 80) - row.ln_center
                ax.plot(np.exp(u + row.ln_center), row.p2 * u**2 + row.p1 * u + row.p0,
                        color=colour, lw=1.2, zorder=2)
                ax.plot(row.n_opt, row.loss_opt, marker="*", ms=10, color=colour,
                        markeredgecolor="black", markeredgewidth=0.6, zorder=4, ls="none")
            n_ok = int((p["status"] == "ok").sum()) if len(p) else 0
            ax.set_title(f"{_title(by, key)}: {n_ok} of {sub['_budget'].nunique()} budgets "
                         "fitted", fontsize=9.5)
            ax.set_xscale("log")
            ax.set_xlabel("parameters N")
            ax.set_ylabel(result.loss_label)
        handles = [
            Line2D([], [], marker="o", ls="none", color="0.3", ms=4,
                   label="run (budget fitted)"),
            Line2D([], [], marker="o", ls="none", mfc="none", mec="0.6", ms=4,
                   label="run (budget left out)"),
            Line2D([], [], color="0.3", lw=1.2, label="parabola in log N"),
            Line2D([], [], marker="*", ls="none", color="0.3", mec="black", ms=9,
                   label="vertex: N_opt"),
        ]
        sm = plt.cm.ScalarMappable(norm=norm, cmap=cmap)
        fig.colorbar(sm, ax=list(axes), label="budget compute (FLOPs, as counted)",
                     shrink=0.9)
        # Below the panels: inside, it would hide the curves of some budget.
        fig.legend(handles=handles, loc="outside lower center", frameon=False,
                   ncols=4 if len(keys) > 1 else 2)
        fig.suptitle("IsoFLOP profiles (approach 2, Hoffmann et al. 2022)", fontsize=11)
        return _save(fig, out_dir, "frontier_isoflop")


# --------------------------------------------------------------------------- N_opt, D_opt


def _fit_label(fits: pd.DataFrame, method: str, name: str) -> str:
    row = fits[fits["method"] == method]
    if row.empty:
        return METHOD_LABELS[method]
    r = row.iloc[0]
    if r["status"] != "ok":
        return f"{METHOD_LABELS[method]}: not fitted"
    lo, hi = r[f"{name}_low"], r[f"{name}_high"]
    ci = f" [{lo:.3f}, {hi:.3f}]" if np.isfinite(lo) else ""
    return f"{METHOD_LABELS[method]}: {name} = {r[name]:.3f}{ci}"


def optimal_figure(result: FrontierResult, out_dir: Path) -> list[Path]:
    by = result.by
    keys = _groups(result)
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(len(keys), 2, figsize=(10.4, 3.9 * len(keys)),
                                 squeeze=False, layout="constrained")
        for row_axes, key in zip(axes, keys, strict=True):
            pts = _rows(result.frontier, by, key)
            bands = _rows(result.bands, by, key)
            fits = _rows(result.fits, by, key).drop_duplicates("method")
            for ax, (col, lo, hi, name, ylabel) in zip(row_axes, (
                ("n_opt", "n_low", "n_high", "a", "N_opt (parameters)"),
                ("d_opt", "d_low", "d_high", "b", "D_opt (tokens)"),
            ), strict=True):
                for m in METHODS:
                    st = METHOD_STYLE[m]
                    p = pts[pts["method"] == m]
                    bd = bands[bands["method"] == m]
                    if not bd.empty:
                        ax.plot(bd["compute"], bd[col], color=st["color"], ls=st["ls"], lw=1.3,
                                label=_fit_label(fits, m, name))
                        good = np.isfinite(bd[lo]) & np.isfinite(bd[hi])
                        ax.fill_between(bd["compute"][good], bd[lo][good], bd[hi][good],
                                        color=st["color"], alpha=0.15, lw=0)
                    elif m in set(fits["method"]):
                        ax.plot([], [], color=st["color"], ls=st["ls"],
                                label=_fit_label(fits, m, name))
                    if not p.empty:
                        ax.scatter(p["compute"], p[col], marker=st["marker"],
                                   s=14 if len(p) > 20 else 22, facecolor="none",
                                   edgecolor=st["color"], linewidth=0.9, zorder=3)
                ax.set_xscale("log")
                ax.set_yscale("log")
                ax.set_xlabel(_compute_label(result))
                ax.set_ylabel(ylabel)
                sym = "N" if name == "a" else "D"
                ax.set_title(rf"{_title(by, key)}: ${sym}_{{opt}} \propto C^{name}$",
                             fontsize=9.5)
                ax.legend(loc="upper left", framealpha=0.85)
        fig.suptitle("Compute-optimal model size and tokens (markers: points fitted; "
                     "bands: bootstrap intervals)", fontsize=11)
        return _save(fig, out_dir, "frontier_optimal")


# --------------------------------------------------------------------------- loss


def loss_figure(result: FrontierResult, out_dir: Path) -> list[Path]:
    """One panel per group but its architecture (a prior: losses of one kind),
    every architecture on its axis in its own colour."""
    by = result.by
    keys = _groups(result)
    a = by.index("arch")
    rest = [c for c in by if c != "arch"]

    def panel_of(key: tuple) -> tuple:
        return tuple(v for c, v in zip(by, key, strict=True) if c != "arch")

    panels = sorted({panel_of(k) for k in keys})
    archs = list(dict.fromkeys(k[a] for k in keys))
    colours = {arch: GROUP_COLORS[i % len(GROUP_COLORS)] for i, arch in enumerate(archs)}
    with plt.rc_context(STYLE):
        fig, axes = _panel_grid(len(panels), 2, (5.4, 3.9))
        for ax, panel in zip(axes, panels, strict=True):
            notes = []
            for key in (k for k in keys if panel_of(k) == panel):
                arch = key[a]
                colour = colours[arch]
                bands = _rows(result.bands, by, key)
                bd = bands[bands["method"] == "approach3"].sort_values("compute")
                c_max = float(_rows(result.runs, by, key)["_axis_budget_compute"].max())
                ax.axvline(c_max, color=colour, lw=0.8, ls=":")
                if bd.empty:
                    notes.append(f"{arch}: approach 3 not fitted")
                else:
                    # Solid up to the largest budget, dashed beyond, joined at the last
                    # grid point inside.
                    j = max(int(np.searchsorted(bd["compute"].to_numpy(), c_max * (1 + 1e-9))),
                            1)
                    ax.plot(bd["compute"][:j], bd["loss_opt"][:j], color=colour, lw=1.5)
                    ax.plot(bd["compute"][j - 1:], bd["loss_opt"][j - 1:], color=colour,
                            lw=1.5, ls="--")
                    good = np.isfinite(bd["loss_low"])
                    ax.fill_between(bd["compute"][good], bd["loss_low"][good],
                                    bd["loss_high"][good], color=colour, alpha=0.18, lw=0)
                pts = _rows(result.frontier, by, key)
                vertices = pts[pts["method"] == "approach2"]
                ax.scatter(vertices["compute"], vertices["loss_opt"], color=colour, marker="s",
                           s=20, edgecolor="white", linewidth=0.5, zorder=3)
            ax.set_xscale("log")
            ax.set_xlabel(_compute_label(result))
            ax.set_ylabel(f"{result.loss_label} at N_opt")
            label = ", ".join(f"{c} {v}" for c, v in zip(rest, panel, strict=True)
                              if v != "all") or "all runs"
            ax.set_title(label + ("\n" + "; ".join(notes) if notes else ""))
        handles = [Line2D([], [], color=colours[arch], lw=1.5, label=arch) for arch in archs]
        handles += [
            Line2D([], [], color="0.3", lw=1.5, label="L(N_opt, D_opt), approach 3"),
            Line2D([], [], color="0.3", lw=1.5, ls="--", label="extrapolated beyond"),
            Line2D([], [], color="0.3", lw=0.8, ls=":", label="largest budget"),
            Line2D([], [], color="0.3", marker="s", ls="none", label="IsoFLOP minimum, "
                   "approach 2"),
        ]
        fig.legend(handles=handles, loc="outside lower center", ncol=min(len(handles), 4),
                   frameon=False)
        fig.suptitle("Loss at the compute-optimal size against compute (band: bootstrap "
                     "interval of approach 3)")
        return _save(fig, out_dir, "frontier_loss")


def render(result: FrontierResult, out_dir) -> list[Path]:
    """Draw the three figures into `out_dir`; returns the files written."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for draw in (isoflop_figure, optimal_figure, loss_figure):
        paths += draw(result, out_dir)
    return paths
