"""The prediction's figure (`ladder_prediction`): per group, the ladder's runs
(loss against compute on the prediction's axis, coloured by N), the fitted
surface along each target's path (its tokens per parameter, from the ladder's
smallest compute to the target's; solid within the ladder's compute, dashed
beyond) with the band of the surface's bootstrap refits, and each target's
prediction with its prediction interval. With a metric, a second panel per
group: the metric against the loss, the fitted sigmoid and each target's
chained prediction. Its title is one line; what the lines, bands and bars are
is the legend below the panels (in as many columns as the figure's width
holds); each panel's title names its group and its fit's status, and the
holdout's result (the error predicting the largest N, and how many of its
runs fell inside their prediction intervals) heads the loss panel's legend.
Drawn from the result (result.py), in the house style (figures/style.py);
imported only when drawing, so that the analysis loads no matplotlib
otherwise.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib as mpl
import numpy as np
from matplotlib.collections import LineCollection
from matplotlib.container import ErrorbarContainer
from matplotlib.legend_handler import HandlerErrorbar
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from ..figures.layout import panel_figure, quiet_minor_labels
from ..figures.output import Drawn, save
from ..figures.style import NEUTRAL, plt, styled
from .downstream import sigmoid
from .result import AXIS_LABELS, FIGURE, PredictionResult, error_text

TITLE = "Loss predicted from the ladder"


@styled
def draw(result: PredictionResult, out_dir: Path) -> Drawn:
    """The figure's PNG, PDF and CSV (what it plots) in `out_dir`. Its title is
    one short line; what the lines, bands and bars are is the legend below the
    panels, sized to the figure's width; each panel's title names its group and
    its fit's status, and the holdout's result heads the panel's legend."""
    keys = result.groups()
    metric = result.settings["metric"]
    per_group = 2 if metric else 1
    fig, axes = panel_figure(len(keys) * per_group, per_group if metric else 2,
                             size=(4.8, 3.7))
    size_norm = mpl.colors.LogNorm(result.runs["params"].min(), result.runs["params"].max())
    for i, key in enumerate(keys):
        _loss_panel(axes[i * per_group], result, key, size_norm)
        if metric:
            _metric_panel(axes[i * per_group + 1], result, key, metric)
    mappable = mpl.cm.ScalarMappable(norm=size_norm, cmap="viridis")
    fig.colorbar(mappable, ax=axes, label="N (parameters)", shrink=min(0.9, 2.4 / len(axes)),
                 aspect=25)
    fig.suptitle(TITLE, fontsize=9.5)
    # The target's bar taller than its diamond, as in the panels.
    fit_legend(fig, _handles(result.settings["ci"]),
               handler_map={ErrorbarContainer: HandlerErrorbar(yerr_size=0.75)})
    quiet_minor_labels(fig)
    return save(fig, out_dir, FIGURE)


def _handles(ci: float) -> list:
    """What each mark is: the legend below the panels."""
    level = f"{ci:.0%}"
    target = Line2D([], [], color=NEUTRAL, marker="D", linestyle="none", markersize=5)
    bar = LineCollection([[(0, 0), (0, 1)]], colors=NEUTRAL, linewidths=1.3)
    return [
        Line2D([], [], color=plt.get_cmap("viridis")(0.6), marker="o", linestyle="none",
               markersize=3.5, label="a run of the ladder (colour: its N)"),
        Line2D([], [], color=NEUTRAL, lw=1.5, label="fitted L(N, D) at the target's D / N"),
        Line2D([], [], color=NEUTRAL, lw=1.5, linestyle="--",
               label="the same, beyond the ladder's compute"),
        Patch(color=NEUTRAL, alpha=0.18, lw=0, label=f"band: the fit's {level} bootstrap interval"),
        ErrorbarContainer((target, (), (bar,)), has_yerr=True,
                          label=f"target; bar: one run's {level} prediction interval"),
    ]


def fit_legend(fig, handles: list, **options) -> None:
    """The legend below the panels, in as many columns as fit the figure's width
    (fewer, down to one, where its labels are long): never clipped at its edges."""
    renderer = fig._get_renderer()
    width = fig.bbox.width * 0.98
    for ncols in range(len(handles), 0, -1):
        legend = fig.legend(handles=handles, loc="outside lower center", ncols=ncols,
                            frameon=False, **options)
        if ncols == 1 or legend.get_window_extent(renderer).width <= width:
            return
        legend.remove()


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
    fit = result.rows(result.fit, key)
    status = fit[fit["law"] == "loss"]["status"].iloc[0]
    ax.set_title(_title_lines(result.title(key), f"fit: {status}"))
    ax.set_label(result.title(key))
    handles, _ = ax.get_legend_handles_labels()
    holdout = _holdout_text(result, key)
    if handles or holdout:
        ax.legend(handles=handles, title=holdout or None, fontsize=7, title_fontsize=7,
                  loc="best", frameon=False)


def _target(ax, x, y, low, high, colour, j: int, label: str | None = None) -> None:
    """A target's prediction at (x, y) and its interval low..high (a bar, which
    need not be centred on y: the interval is the replicates' percentiles)."""
    if not np.isfinite(y):
        return
    (mark,) = ax.plot([x], [y], color=colour, marker="D", ms=5, linestyle="none", label=label)
    mark.set_gid(f"target{j}")
    if np.isfinite(low) and np.isfinite(high):
        ax.vlines([x], [low], [high], color=colour, lw=1.3).set_gid(f"interval:target{j}")


def _title_lines(*lines: str) -> str:
    """A panel's title: each line cut to the panel's width."""
    return "\n".join(_short(line) for line in lines)


def _holdout_text(result: PredictionResult, key: tuple) -> str:
    """The holdout's result for the panel (empty without --holdout): the
    relative error of the refit's prediction of the largest N, and how many of
    its runs fell inside the prediction interval each would have been given."""
    if result.holdout is None:
        return ""
    h = result.rows(result.holdout, key).iloc[0]
    head = f"held out N {h['held_out_n']:.3g}"
    if not np.isfinite(h["rel_error"]):
        return _short(f"{head}: {h['status']}", 48)
    lines = [f"{head}: {error_text(h['rel_error'], h['rel_error_low'], h['rel_error_high'])}"]
    if np.isfinite(h["in_interval"]):
        n = int(h["n_runs"])
        lines.append(f"{round(h['in_interval'] * n)} of {n} runs in their "
                     f"{result.settings['ci']:.0%} prediction interval")
    return "\n".join(lines)


def _short(text: str, width: int = 60) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def _metric_panel(ax, result: PredictionResult, key: tuple, metric: str) -> None:
    """The metric against the loss it is a sigmoid of (the task loss, with
    --task-loss): every point step 2 fitted, the fitted sigmoid, the targets."""
    runs = result.rows(result.runs, key)
    task = result.settings.get("task_loss")
    x = task or "loss"
    (points,) = ax.plot(runs[x], runs[metric], linestyle="none", marker="o", ms=3.5,
                        color=NEUTRAL, alpha=0.8)
    points.set_gid("runs")
    fit = result.rows(result.fit, key)
    mapping = fit[fit["law"] == "metric"].set_index("parameter")
    predictions = result.rows(result.predictions, key)
    at = predictions["task_loss" if task else "loss"]
    status = mapping["status"].iloc[0] if len(mapping) else "no fit"
    if not np.isfinite(runs[metric].to_numpy(dtype=float)).any():
        ax.set_axis_off()  # a group without the metric (an upstream loss): say so, no axes
        ax.text(0.5, 0.5, f"{metric}: {_short(status)}", ha="center", va="center",
                transform=ax.transAxes, color=NEUTRAL)
        return
    if len(mapping) and mapping["value"].notna().all():
        params = mapping.loc[["a", "k", "L0", "b"], "value"].to_numpy(dtype=float)
        losses = np.r_[runs[x].to_numpy(dtype=float), at.dropna().to_numpy()]
        grid = np.linspace(np.nanmin(losses), np.nanmax(losses), 100)
        (curve,) = ax.plot(grid, sigmoid(params, grid), color=NEUTRAL, lw=1.3)
        curve.set_gid("sigmoid")
    for j, (row, colour) in enumerate(zip(predictions.itertuples(),
                                          _target_colours(len(predictions)), strict=True)):
        _target(ax, at.iloc[j], row.metric, row.metric_low, row.metric_high, colour, j)
    ax.set_xlabel(task or result.loss_label)
    ax.set_ylabel(metric)
    ax.set_title(_title_lines(f"{metric} from the {'task ' if task else ''}loss",
                              f"fit: {status}"))
    ax.set_label(f"{result.title(key)}: {metric}")
