"""What is drawn on a panel: means over seeds with their bars, fitted lines
with bootstrap bands, alpha labels placed clear of the data, legends.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd
from matplotlib.collections import PolyCollection
from matplotlib.lines import Line2D

from ..stats import (
    LACK_OF_FIT_LEVEL,
    RUN,
    clean,
    clean_labelled,
    loglog_replicates,
    ols,
    t_interval,
)
from .layout import finished_runs
from .style import (
    BAND_BOOT,
    BAND_SEED,
    NEUTRAL,
    arch_rank,
    arch_style,
    prior_mark,
    prior_rank,
    prior_style,
)

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


def seed_errorbar(ax, x, stats: pd.DataFrame, gid: str, *, label=None, xerr=None, **style):
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


def fit_band(x, y, row, grid, sizes=None) -> tuple[np.ndarray, np.ndarray]:
    """The pointwise band of the log-log fit `row` at `grid`: the t interval of
    its bootstrap lines (the residual bootstrap of the points (x, y) with the
    fit's unit and degrees of freedom, BAND_BOOT replicates, seed BAND_SEED:
    with the default fit.n_boot and seed, the very replicates behind alpha's
    interval) about the fitted line, at the fit's level."""
    xc, yc, labels = clean_labelled(x, y, sizes)
    unit = row.get("interval_unit") or RUN
    slopes, intercepts, df = loglog_replicates(np.log(xc), np.log(yc), BAND_BOOT, BAND_SEED,
                                               labels, unit)
    lgrid = np.log(np.asarray(grid, float))
    slope, intercept = ols(np.log(xc), np.log(yc))
    logy = intercepts[:, None] + slopes[:, None] * lgrid[None, :]
    fitted = intercept + slope * lgrid
    ci = float(row["ci"])
    low, high = np.array([t_interval(f, column, df, ci)
                          for f, column in zip(fitted, logy.T, strict=True)]).T
    return np.exp(low), np.exp(high)


def loglog_fit(ax, x, y, row, gid: str, *, sizes=None, sign: int = -1, band: bool = True,
               **style):
    """The log-log fit `row` (y = coef x^(sign alpha)) over the range of x, with its
    bootstrap band when the fit has an interval (its runs resampled within each
    of `sizes`, as the fit's). The band does not set the axes' limits (the points
    and lines do): where a few points leave the slope loose, it runs off the
    panel rather than squash the data."""
    xc, _, _ = clean(x, y, None)
    grid = np.geomspace(xc.min(), xc.max(), 60)
    (line,) = ax.plot(grid, row["coef"] * grid ** (sign * row["alpha"]), **style)
    line.set_gid(gid)
    if band and np.isfinite(row["alpha_low"]):
        low, high = fit_band(x, y, row, grid, sizes)
        verts = np.concatenate([np.column_stack([grid, low]),
                                np.column_stack([grid[::-1], high[::-1]])])
        coll = PolyCollection([verts], facecolors=style.get("color", NEUTRAL), alpha=0.18,
                              linewidths=0)
        coll.set_gid(f"band:{gid.split(':', 1)[1]}")
        ax.add_collection(coll, autolim=False)


def alpha_text(ax, text: str) -> None:
    """The panel's fitted exponent(s), placed by `place_texts` once the limits are
    final."""
    ax._scalestudy_text = text


CORNERS = (("right", "top"), ("left", "bottom"), ("right", "bottom"), ("left", "top"))


def place_texts(axes) -> None:
    """Put each panel's `alpha_text` in the corner where it covers the fewest points
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


def fmt_short(row, symbol: str) -> str:
    """'αD = 0.050 [0.030, 0.070]', marked where the lack-of-fit test rejects the
    power law (the exponent is then the local log-log slope over the sizes run:
    stats.py)."""
    if row["status"] != "ok":
        return f"{symbol}: {row['status']}"
    text = f"{symbol} = {row['alpha']:.3f}"
    if np.isfinite(row["alpha_low"]):
        text += f" [{row['alpha_low']:.3f}, {row['alpha_high']:.3f}]"
    p = row.get("lack_of_fit_p", np.nan)
    if p < LACK_OF_FIT_LEVEL:
        text += f"\nlocal slope, no power law: lack of fit p = {p:.2g}"
    return text


MAX_PANEL_LEGEND = 4  # at most this many architectures in a panel: name their points


def legend_cols(fig, handles) -> int:
    """As many legend columns as fit the figure's width (about 1.3 inch each)."""
    return max(1, min(len(handles), int(fig.get_figwidth() // 1.3)))


def arch_handle(arch: str, **extra) -> Line2D:
    return Line2D([], [], linestyle="none", label=arch, **arch_style(arch), **extra)


def arch_legends(fig, axes, extra: Iterable[Line2D] = ()) -> None:
    """One legend for the whole figure, below it, so that it never covers the data:
    the architectures drawn in `axes` (in the registry's order) and the `extra`
    handles (what a line or band means)."""
    archs: dict[str, None] = {}
    for ax in axes:
        for label in ax.get_legend_handles_labels()[1]:
            archs.setdefault(label, None)
    handles = [arch_handle(a) for a in sorted(archs, key=arch_rank)] + list(extra)
    if handles:
        fig.legend(handles=handles, loc="outside lower center", ncols=legend_cols(fig, handles))


def prior_handles(priors: Iterable[str], marker: str = "o",
                  marked: bool = False) -> list[Line2D]:
    """Legend handles of the priors' styles, in neutral grey with `marker`, or
    (`marked`) each in its own colour and marker (style.prior_mark)."""
    return [Line2D([], [], label=p, **prior_style(p),
                   **(prior_mark(p) if marked else {"color": NEUTRAL, "marker": marker}))
            for p in sorted(set(priors), key=prior_rank)]


def fig_legend(fig, handles: list[Line2D], title: str | None = None) -> None:
    if handles:
        fig.legend(handles=handles, loc="outside lower center", title=title,
                   ncols=legend_cols(fig, handles))


def spread_note(stats: pd.DataFrame) -> str:
    """What the bars are: "+-1 sd over 3 seeds" (or a range of seed counts)."""
    n = stats.loc[stats["n"] > 1, "n"]
    if n.empty:
        return "one run per point: no bars"
    seeds = f"{n.min()}" if n.min() == n.max() else f"{n.min()}-{n.max()}"
    return f"mean ± 1 sd over {seeds} seeds"



def band_note(fits: pd.DataFrame) -> str:
    ci = fits["ci"].dropna()
    level = f"{ci.iloc[0]:.0%}" if len(ci) else "95%"
    return f"band: {level} bootstrap band of the fitted line"


def mean_acc(runs: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Mean, sample standard deviation (`sd`), min and max test accuracy over the
    seeds of each group of ok runs, and their number (`count`)."""
    g = finished_runs(runs).groupby(by, sort=False)["test_acc"]
    out = g.agg(["mean", "std", "min", "max", "count"]).reset_index()
    return out.rename(columns={"std": "sd"})
