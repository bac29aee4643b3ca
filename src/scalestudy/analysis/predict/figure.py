"""The prediction's figure (`ladder_prediction`): per group, the ladder's runs
(loss against compute on the prediction's axis, coloured by N), the fitted
surface along each target's path (its tokens per parameter, from the ladder's
smallest compute to the target's; solid within the ladder's compute, dashed
beyond) with the band of the surface's bootstrap refits, and each target's
prediction with its prediction interval. With a metric, a second panel per
group: the metric against the loss, the fitted sigmoid and each target's
chained prediction. Drawn from the result (result.py), in the house style
(figures/style.py); imported only when drawing, so that the analysis loads
no matplotlib otherwise.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib as mpl
import numpy as np
from matplotlib.lines import Line2D

from ..figures.layout import panel_figure, quiet_minor_labels
from ..figures.output import Drawn, figure_title, save
from ..figures.style import NEUTRAL, plt, styled
from .downstream import sigmoid
from .result import AXIS_LABELS, FIGURE, PredictionResult, percent


@styled
def draw(result: PredictionResult, out_dir: Path) -> Drawn:
    """The figure's PNG, PDF and CSV (what it plots) in `out_dir`."""
    keys = result.groups()
    metric = result.settings["metric"]
    per_group = 2 if metric else 1
    fig, axes = panel_figure(len(keys) * per_group, per_group if metric else 2,
                             size=(4.6, 3.6))
    size_norm = mpl.colors.LogNorm(result.runs["params"].min(), result.runs["params"].max())
    for i, key in enumerate(keys):
        _loss_panel(axes[i * per_group], result, key, size_norm)
        if metric:
            _metric_panel(axes[i * per_group + 1], result, key, metric)
    mappable = mpl.cm.ScalarMappable(norm=size_norm, cmap="viridis")
    fig.colorbar(mappable, ax=axes[:per_group], label="N (parameters)", shrink=0.9)
    handles = [
        Line2D([], [], color=NEUTRAL, lw=1.5, label="fitted L(N, D) along the target's path"),
        Line2D([], [], color=NEUTRAL, lw=1.5, linestyle="--", label="beyond the ladder"),
        Line2D([], [], color=NEUTRAL, marker="D", linestyle="none",
               label=f"target: prediction interval ({result.settings['ci']:.0%})"),
    ]
    fig.legend(handles=handles, loc="outside lower center", ncols=3, frameon=False)
    figure_title(fig, "Predictions from the ladder",
                 "band: the fitted surface's bootstrap interval; bar: one run's prediction "
                 "interval (the surface's refits plus the ladder's residual noise)")
    quiet_minor_labels(fig)
    return save(fig, out_dir, FIGURE)


def _target_colours(n: int) -> list:
    return [plt.get_cmap("tab10")(j % 10) for j in range(n)]


def _loss_panel(ax, result: PredictionResult, key: tuple, size_norm) -> None:
    runs = result.rows(result.runs, key)
    cmap = plt.get_cmap("viridis")
    for n, sized in runs.groupby("params", sort=True):
        (line,) = ax.plot(sized["compute"], sized["loss"], linestyle="none", marker="o",
                          ms=3.5, color=cmap(size_norm(n)), alpha=0.85)
        line.set_gid(f"runs:N={n:.4g}")
    c_max = float(runs["compute"].max())
    predictions = result.rows(result.predictions, key)
    paths = result.rows(result.paths, key) if not result.paths.empty else result.paths
    colours = _target_colours(len(predictions))
    for j, (row, colour) in enumerate(zip(predictions.itertuples(), colours, strict=True)):
        path = paths[paths["target"] == j] if len(paths) else paths
        if len(path):
            inside = path["compute"] <= c_max * (1 + 1e-9)
            k = max(int(inside.sum()), 1)
            (solid,) = ax.plot(path["compute"][:k], path["loss"][:k], color=colour, lw=1.3)
            solid.set_gid(f"surface:target{j}")
            (dashed,) = ax.plot(path["compute"][k - 1:], path["loss"][k - 1:], color=colour,
                                lw=1.3, linestyle="--")
            dashed.set_gid(f"extrapolated:target{j}")
            good = np.isfinite(path["loss_fit_low"])
            if good.any():
                ax.fill_between(path["compute"][good], path["loss_fit_low"][good],
                                path["loss_fit_high"][good], color=colour, alpha=0.18,
                                lw=0).set_gid(f"band:target{j}")
        _target(ax, row.compute, row.loss, row.loss_low, row.loss_high, colour, j,
                f"N {row.n:.3g}, D {row.d:.3g}")
    ax.set_xscale("log")
    ax.set_xlabel(f"compute ({AXIS_LABELS[result.compute_axis]})")
    ax.set_ylabel(result.loss_label)
    ax.set_title(_title(result, key))
    ax.set_label(result.title(key))
    if len(predictions):
        ax.legend(fontsize=7, loc="upper right", frameon=False)


def _target(ax, x, y, low, high, colour, j: int, label: str | None = None) -> None:
    """A target's prediction at (x, y) and its interval low..high (a bar, which
    need not be centred on y: the interval is the replicates' percentiles)."""
    if not np.isfinite(y):
        return
    (mark,) = ax.plot([x], [y], color=colour, marker="D", ms=5, linestyle="none", label=label)
    mark.set_gid(f"target{j}")
    if np.isfinite(low) and np.isfinite(high):
        ax.vlines([x], [low], [high], color=colour, lw=1.3).set_gid(f"interval:target{j}")


def _title(result: PredictionResult, key: tuple) -> str:
    fit = result.rows(result.fit, key)
    status = fit[fit["law"] == "loss"]["status"].iloc[0]
    lines = [result.title(key), status]
    if result.holdout is not None:
        h = result.rows(result.holdout, key).iloc[0]
        if np.isfinite(h["rel_error"]):
            lines.append(f"holdout N {h['held_out_n']:.3g}: {percent(h['rel_error'])} "
                         f"[{percent(h['rel_error_low'])}, {percent(h['rel_error_high'])}]")
    return "\n".join(_short(line) for line in lines)


def _short(text: str, width: int = 60) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def _metric_panel(ax, result: PredictionResult, key: tuple, metric: str) -> None:
    runs = result.rows(result.runs, key)
    (points,) = ax.plot(runs["loss"], runs[metric], linestyle="none", marker="o", ms=3.5,
                        color=NEUTRAL, alpha=0.8)
    points.set_gid("runs")
    fit = result.rows(result.fit, key)
    mapping = fit[fit["law"] == "metric"].set_index("parameter")
    predictions = result.rows(result.predictions, key)
    status = mapping["status"].iloc[0] if len(mapping) else "no fit"
    if not np.isfinite(runs[metric].to_numpy(dtype=float)).any():
        ax.set_axis_off()  # a group without the metric (an upstream loss): say so, no axes
        ax.text(0.5, 0.5, f"{metric}: {_short(status)}", ha="center", va="center",
                transform=ax.transAxes, color=NEUTRAL)
        return
    if len(mapping) and mapping["value"].notna().all():
        params = mapping.loc[["a", "k", "L0", "b"], "value"].to_numpy(dtype=float)
        losses = np.r_[runs["loss"].to_numpy(), predictions["loss"].dropna().to_numpy()]
        grid = np.linspace(losses.min(), losses.max(), 100)
        (curve,) = ax.plot(grid, sigmoid(params, grid), color=NEUTRAL, lw=1.3)
        curve.set_gid("sigmoid")
    for j, (row, colour) in enumerate(zip(predictions.itertuples(),
                                          _target_colours(len(predictions)), strict=True)):
        _target(ax, row.loss, row.metric, row.metric_low, row.metric_high, colour, j)
    ax.set_xlabel(result.loss_label)
    ax.set_ylabel(metric)
    ax.set_title(_short(f"{metric} from the loss") + "\n" + _short(status))
    ax.set_label(f"{result.title(key)}: {metric}")
