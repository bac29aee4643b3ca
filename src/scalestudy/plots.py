"""Figures, with matplotlib only (no torch): one style for every figure.

Each architecture keeps one colour and marker across all figures, from the
colour-blind-safe Okabe-Ito palette (Okabe & Ito 2008) in the fixed order of
names.ARCHITECTURES (a second marker once the eight colours are used up); each
prior keeps one line style. Every figure is written as PNG and PDF, and a panel
with nothing to draw says so in words instead of showing empty axes.

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
- `loss_vs_depth`: final training loss against depth per prior and norm
  (Xu et al. 2021, DT-Fixup);
- `downstream_vs_upstream`: downstream error against upstream loss with the
  alpha_U,D fits;
- `spt_vs_matched`: SPT against the compute-matched control (Amos et al. 2023);
- `heldout_prediction`: each law's prediction of its held-out largest size
  against the observed value, with the y = x line.
"""

from __future__ import annotations

import functools
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only; never needs a display
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.ticker import (  # noqa: E402
    EngFormatter,
    FormatStrFormatter,
    LogLocator,
    MaxNLocator,
    NullFormatter,
    NullLocator,
)
from matplotlib.transforms import blended_transform_factory  # noqa: E402

from .fits import select, size_order, task_runs, upstream_runs, x_values  # noqa: E402
from .names import ARCHITECTURES, NORMS, PRIORS  # noqa: E402

OKABE_ITO = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442",
             "#000000")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
# One line style per prior, in names.PRIORS order.
LINESTYLES = ("-", "--", ":", "-.", (0, (5, 1, 1, 1, 1, 1)), (0, (1, 3)))
NORM_MARKERS = dict(zip(NORMS, ("o", "s", "^"), strict=True))
NEUTRAL = "#555555"  # series that are not one architecture
X_LABELS = {
    "compute": "training compute C (FLOPs)",
    "params": "non-embedding parameters",
    "flops_per_token": "FLOPs per token",
}
NO_DATA = "no finished runs for this panel"

FIGURES = (
    "upstream_loss_vs_compute", "error_vs_compute", "alpha_per_arch", "arch_gap",
    "loss_vs_depth", "downstream_vs_upstream", "spt_vs_matched", "heldout_prediction",
)
PER_TASK_FIGURES = ("accuracy_vs_size",)


def figure_names(tasks) -> list[str]:
    """The stem of every figure `plot_all` writes for a study with these tasks."""
    return [*FIGURES, *(f"{name}_{task}" for name in PER_TASK_FIGURES for task in tasks)]


def arch_style(arch: str) -> dict:
    i = ARCHITECTURES.index(arch) if arch in ARCHITECTURES else len(ARCHITECTURES)
    return {"color": OKABE_ITO[i % len(OKABE_ITO)], "marker": MARKERS[i // len(OKABE_ITO)]}


def prior_linestyle(prior: str):
    i = PRIORS.index(prior) if prior in PRIORS else 0
    return LINESTYLES[i % len(LINESTYLES)]


STYLE = {
    "font.size": 9, "axes.titlesize": 10, "legend.fontsize": 7, "axes.grid": True,
    "grid.alpha": 0.3, "axes.spines.top": False, "axes.spines.right": False,
    "legend.handlelength": 3.5,  # long enough to tell the priors' line styles apart
}


def styled(plot):
    """Draw `plot`'s figure in the house style (STYLE), leaving global settings alone."""

    @functools.wraps(plot)
    def wrapper(*args, **kwargs):
        with plt.rc_context(STYLE):
            return plot(*args, **kwargs)

    return wrapper


def save(fig, out_dir: Path, name: str) -> list[Path]:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / f"{name}.{ext}" for ext in ("png", "pdf")]
    for path in paths:
        fig.savefig(path, dpi=150)  # constrained layout already fits the margins
        # The layout is solved now: freeze it rather than solve it again for the PDF.
        fig.set_layout_engine("none")
    plt.close(fig)
    return paths


def no_data(ax, message: str = NO_DATA) -> None:
    """Say in the panel why it is empty, instead of drawing empty axes."""
    ax.text(0.5, 0.5, message, ha="center", va="center", transform=ax.transAxes, wrap=True,
            color=NEUTRAL)
    ax.set_xticks([])
    ax.set_yticks([])
    ax.grid(False)


def _panels(n: int, ncols: int | None = None, size=(4.2, 3.4)):
    ncols = min(n, ncols or n)
    nrows = -(-n // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(size[0] * ncols, size[1] * nrows),
                             squeeze=False, layout="constrained")
    flat = axes.ravel()
    for ax in flat[n:]:
        ax.set_visible(False)
    return fig, flat[:n]


def _ok(runs: pd.DataFrame) -> pd.DataFrame:
    return runs[runs["status"] == "ok"]


def _tasks(runs: pd.DataFrame, tasks=None) -> list[str]:
    if tasks is not None:
        return list(tasks)
    return sorted(task_runs(runs)["task"].unique())


def _x_axis(fits: pd.DataFrame) -> str:
    """The x axis the fits were made on (compute when there are none)."""
    x = fits.loc[fits["metric"].isin(["alpha_D", "alpha_U"]), "x_axis"]
    return x.iloc[0] if len(x) else "compute"


def _fmt_alpha(row, symbol: str) -> str:
    if row["status"] != "ok":
        return f"{symbol}: {row['status']}"
    return f"{symbol}={row['alpha']:.3f} [{row['alpha_low']:.3f}, {row['alpha_high']:.3f}]"


def _loglog_axes(ax, xlabel: str, ylabel: str) -> None:
    """Log-log axes; an axis spanning less than a decade gets plain evenly spaced
    ticks (log axes would label only one or two of them)."""
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    for axis, (lo, hi) in ((ax.xaxis, ax.get_xlim()), (ax.yaxis, ax.get_ylim())):
        axis.set_minor_formatter(NullFormatter())
        if not lo > 0:
            continue
        # Large values (FLOPs, parameters) with SI prefixes: 20G, not 2e+10.
        fmt = EngFormatter(sep="", places=0) if lo >= 1000 else FormatStrFormatter("%.3g")
        if hi / lo < 10:
            axis.set_major_locator(MaxNLocator(4))
            axis.set_minor_locator(NullLocator())
            axis.set_major_formatter(fmt)
        elif hi / lo < 100:
            axis.set_major_locator(LogLocator(subs=(1, 3)))
            axis.set_major_formatter(fmt)
    ax.grid(True, which="both", alpha=0.3)


def _fit_curve(ax, x, predict, **style) -> None:
    grid = np.geomspace(np.min(x), np.max(x), 50)
    ax.plot(grid, predict(grid), **style)


MAX_PANEL_LEGEND = 4  # more architectures than this: one legend for the figure


def _legend_cols(fig, handles) -> int:
    """As many legend columns as fit the figure's width (about 1.4 inch each)."""
    return max(1, min(len(handles), int(fig.get_figwidth() // 1.4)))


def _arch_legends(fig, axes) -> None:
    """Legends of the architectures: in each panel (with the fitted alphas in the
    labels) while panels have few series; otherwise one legend of names for the
    whole figure, so that legends never cover the data (the alphas are then in the
    alpha_per_arch figure and the tables)."""
    axes = [ax for ax in axes if ax.get_legend_handles_labels()[0]]
    if not axes:
        return
    if max(len(ax.get_legend_handles_labels()[0]) for ax in axes) <= MAX_PANEL_LEGEND:
        for ax in axes:
            ax.legend()
        return
    archs = {}
    for ax in axes:
        for label in ax.get_legend_handles_labels()[1]:
            archs.setdefault(label.split(":")[0], None)
    order = {a: i for i, a in enumerate(ARCHITECTURES)}
    handles = [Line2D([], [], linestyle="none", label=a, **arch_style(a))
               for a in sorted(archs, key=lambda a: order.get(a, len(order)))]
    fig.legend(handles=handles, loc="outside lower center", ncols=_legend_cols(fig, handles))


def _prior_legend(fig, priors: pd.Series, norms: pd.Series | None = None,
                  failed: bool = False) -> None:
    """One legend for the whole figure: the priors' line styles (and the norms'
    markers), in neutral grey, since every panel uses the same ones."""
    handles = [Line2D([], [], color=NEUTRAL, linestyle=prior_linestyle(p), label=p)
               for p in PRIORS if p in set(priors)]
    if norms is not None:
        handles += [Line2D([], [], color=NEUTRAL, marker=NORM_MARKERS[n], linestyle="none",
                           label=f"norm: {n}") for n in NORMS if n in set(norms)]
    if failed:
        handles.append(Line2D([], [], color=NEUTRAL, marker="x", linestyle="none",
                              label="diverged / failed"))
    if handles:
        fig.legend(handles=handles, loc="outside lower center",
                   ncols=_legend_cols(fig, handles))


# --------------------------------------------------------------------------- figures


@styled
def plot_upstream_loss_vs_compute(runs, fits, out_dir, x_axis=None) -> list[Path]:
    """Upstream loss of the masked-LM pretraining runs against x, per architecture,
    with the log-log (solid) and saturating (dashed) alpha_U fits."""
    x_axis = x_axis or _x_axis(fits)
    up = _ok(upstream_runs(runs))
    up = up.assign(x=x_values(up, x_axis))
    up = up[np.isfinite(up["upstream_loss"])]
    fig, (ax,) = _panels(1, size=(6, 4.2))
    ax.set_title("Upstream loss against compute\n(solid: log-log fit, dashed: saturating fit)")
    if up.empty:
        no_data(ax, "no finished upstream pretraining runs")
        return save(fig, out_dir, "upstream_loss_vs_compute")
    for arch, cell in up.groupby("arch", sort=False):
        style = arch_style(arch)
        label = arch
        ll = select(fits, "alpha_U", "loglog", arch=arch)
        sat = select(fits, "alpha_U", "saturating", arch=arch)
        if len(ll):
            row = ll.iloc[0]
            label += ": " + _fmt_alpha(row, "αU")
            if row["status"] == "ok":
                _fit_curve(ax, cell["x"], lambda g, r=row: r["coef"] * g ** -r["alpha"],
                           color=style["color"], linestyle="-")
        if len(sat) and sat.iloc[0]["status"] == "ok":
            r = sat.iloc[0]
            _fit_curve(ax, cell["x"], lambda g, r=r: r["E"] + r["A"] * g ** -r["alpha"],
                       color=style["color"], linestyle="--")
            label += f"; sat. {r['alpha']:.3f}, E={r['E']:.3g}"
        ax.plot(cell["x"], cell["upstream_loss"], linestyle="none", label=label, **style)
    _loglog_axes(ax, X_LABELS[x_axis], "upstream loss (masked-token NLL, nats)")
    _arch_legends(fig, [ax])
    return save(fig, out_dir, "upstream_loss_vs_compute")


@styled
def plot_error_vs_compute(runs, fits, out_dir, x_axis=None, tasks=None) -> list[Path]:
    """Downstream error against x, one panel per task x prior, one colour per
    architecture, with the fitted alpha_D power law."""
    x_axis = x_axis or _x_axis(fits)
    runs_t = task_runs(runs)
    ok = _ok(runs_t)
    ok = ok.assign(x=x_values(ok, x_axis))
    tasks = _tasks(runs, tasks)
    priors = [p for p in PRIORS if p in set(runs_t["prior"])]
    cells = [(t, p) for t in tasks for p in priors] or [("(no task runs)", None)]
    fig, axes = _panels(len(cells), ncols=min(len(priors), 3) or 1)
    for ax, (task, prior) in zip(axes, cells, strict=True):
        ax.set_title(f"{task} / {prior}" if prior else task)
        panel = ok[(ok["task"] == task) & (ok["prior"] == prior)]
        if panel.empty:
            no_data(ax)
            continue
        for arch, cell in panel.groupby("arch", sort=False):
            style = arch_style(arch)
            label = arch
            fit = select(fits, "alpha_D", task=task, arch=arch, prior=prior)
            if len(fit):
                row = fit.iloc[0]
                label += ": " + _fmt_alpha(row, "αD")
                if row["status"] == "ok":
                    _fit_curve(ax, cell["x"], lambda g, r=row: r["coef"] * g ** -r["alpha"],
                               color=style["color"], linestyle=prior_linestyle(prior))
            ax.plot(cell["x"], cell["error"], linestyle="none", label=label, alpha=0.8,
                    **style)
        _loglog_axes(ax, X_LABELS[x_axis], "downstream error (1 - test accuracy)")
    _arch_legends(fig, axes)
    return save(fig, out_dir, "error_vs_compute")


def _forest(ax, rows: pd.DataFrame, ypos: dict, title: str, xlabel: str, labels: bool,
            filled: bool = True) -> None:
    """One horizontal interval per architecture (rows: fits, one per arch) at the row
    `ypos[arch]`; a fit that refused shows its reason in the row instead."""
    ax.set_title(title)
    ax.set_ylim(-0.7, len(ypos) - 0.3)
    if rows.empty:
        no_data(ax, "no fits for this panel")
    ax.set_yticks(list(ypos.values()), list(ypos) if labels else [])
    if rows.empty:
        return
    text_x = blended_transform_factory(ax.transAxes, ax.transData)
    for _, row in rows.iterrows():
        style, y = arch_style(row["arch"]), ypos[row["arch"]]
        if row["status"] != "ok":
            ax.text(0.02, y, row["status"], transform=text_x, va="center", fontsize=6,
                    color=NEUTRAL, bbox={"facecolor": "white", "edgecolor": "none", "pad": 1})
            continue
        err = [[row["alpha"] - row["alpha_low"]], [row["alpha_high"] - row["alpha"]]]
        ax.errorbar(row["alpha"], y, xerr=np.nan_to_num(err), color=style["color"],
                    marker=style["marker"], markerfacecolor=style["color"] if filled else "white",
                    capsize=2, linestyle="none")
    ax.xaxis.set_major_locator(MaxNLocator(4))
    ax.axvline(0, color=NEUTRAL, linewidth=0.8)
    ax.set_xlabel(xlabel)
    ax.grid(True, axis="x", alpha=0.3)
    ax.grid(False, axis="y")


@styled
def plot_alpha_per_arch(runs, fits, out_dir, tasks=None) -> list[Path]:
    """alpha per architecture with its 95% interval, upstream and downstream side by
    side: alpha_U (log-log, then saturating; top row) and alpha_D, one panel per prior
    and one row of panels per task. Every panel has one row per architecture."""
    tasks = _tasks(runs, tasks)
    order = {a: i for i, a in enumerate(ARCHITECTURES)}
    archs = sorted(set(fits.loc[fits["metric"].isin(["alpha_U", "alpha_D"]), "arch"]),
                   key=lambda a: (order.get(a, len(order)), a))
    if not archs:
        fig, (ax,) = _panels(1)
        ax.set_title("alpha per architecture")
        no_data(ax, "no fits for this panel")
        return save(fig, out_dir, "alpha_per_arch")
    ypos = {a: len(archs) - 1 - i for i, a in enumerate(archs)}
    down = select(fits, "alpha_D")
    priors = [p for p in PRIORS if p in set(down["prior"])] or ["(none)"]
    nrows, ncols = max(len(tasks), 1), 2 + len(priors)
    fig, grid = plt.subplots(nrows, ncols, squeeze=False, layout="constrained",
                             figsize=(2.4 * ncols + 1.2, (0.9 + 0.22 * len(archs)) * nrows + 0.4))
    up_cols = (("loglog", "alpha_U, log-log", True), ("saturating", "alpha_U, saturating", False))
    for col, (form, title, filled) in enumerate(up_cols):
        _forest(grid[0, col], select(fits, "alpha_U", form), ypos, f"upstream: {title}",
                "αU (95% interval)", labels=col == 0, filled=filled)
        for row in range(1, nrows):
            grid[row, col].set_visible(False)
    for row, task in enumerate(tasks or ["(no task)"]):
        for j, prior in enumerate(priors):
            _forest(grid[row, 2 + j], select(fits, "alpha_D", task=task, prior=prior), ypos,
                    f"{task}: alpha_D, {prior}", "αD (95% interval)", labels=j == 0)
    return save(fig, out_dir, "alpha_per_arch")


def _mean_acc(runs: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Mean, min and max test accuracy over seeds of each group of ok runs."""
    g = _ok(runs).groupby(by, sort=False)["test_acc"]
    return g.agg(["mean", "min", "max", "count"]).reset_index()


@styled
def plot_accuracy_vs_size(runs, fits, out_dir, task: str) -> list[Path]:
    """Test accuracy against size for one task: one panel per architecture, one
    line per prior (mean over seeds; bars span the seeds' min to max)."""
    runs_t = task_runs(runs)
    runs_t = runs_t[runs_t["task"] == task]
    archs = [a for a in ARCHITECTURES if a in set(runs_t["arch"])]
    archs += sorted(set(runs_t["arch"]) - set(archs))
    name = f"accuracy_vs_size_{task}"
    fig, axes = _panels(max(len(archs), 1), ncols=4)
    if not archs:
        axes[0].set_title(task)
        no_data(axes[0], f"no runs on {task}")
        return save(fig, out_dir, name)
    sizes = size_order(runs_t)
    pos = {s: i for i, s in enumerate(sizes)}
    for ax, arch in zip(axes, archs, strict=True):
        ax.set_title(f"{task}: {arch}")
        acc = _mean_acc(runs_t[runs_t["arch"] == arch], ["prior", "size"])
        if acc.empty:
            no_data(ax)
            continue
        style = arch_style(arch)
        present = [p for p in PRIORS if p in set(acc["prior"])]
        for j, prior in enumerate(present):
            a = acc[acc["prior"] == prior].sort_values("size", key=lambda s: s.map(pos))
            # Dodge the priors sideways so that equal values stay visible.
            x = a["size"].map(pos).to_numpy() + 0.05 * (j - (len(present) - 1) / 2)
            ax.errorbar(x, a["mean"], yerr=[a["mean"] - a["min"], a["max"] - a["mean"]],
                        color=style["color"], marker=style["marker"],
                        linestyle=prior_linestyle(prior), capsize=2)
        ax.set_xticks(range(len(sizes)), sizes)
        ax.set_xlabel("size")
        ax.set_ylabel("test accuracy")
    _prior_legend(fig, runs_t["prior"])
    return save(fig, out_dir, name)


def arch_gap(runs: pd.DataFrame, priors=("random", "spt")) -> pd.DataFrame:
    """Per (task, prior, size): best architecture's mean test accuracy minus the
    vanilla transformer's (rows only where the transformer has finished runs)."""
    acc = _mean_acc(task_runs(runs), ["task", "prior", "size", "arch"])
    acc = acc[acc["prior"].isin(priors)]
    rows = []
    for (task, prior, size), g in acc.groupby(["task", "prior", "size"], sort=False):
        tf = g[g["arch"] == "transformer"]
        if tf.empty:
            continue
        best = g.loc[g["mean"].idxmax()]
        rows.append({"task": task, "prior": prior, "size": size, "best_arch": best["arch"],
                     "best_acc": best["mean"], "transformer_acc": tf["mean"].iloc[0],
                     "gap": best["mean"] - tf["mean"].iloc[0], "n_archs": len(g)})
    return pd.DataFrame(rows, columns=["task", "prior", "size", "best_arch", "best_acc",
                                       "transformer_acc", "gap", "n_archs"])


@styled
def plot_arch_gap(runs, fits, out_dir, tasks=None) -> list[Path]:
    """The architecture gap (best minus vanilla transformer test accuracy) against
    size under random initialisation and under SPT (Amos et al. 2023); each point
    is drawn in the style of the architecture that is best there."""
    tasks = _tasks(runs, tasks) or ["(no task runs)"]
    gaps = arch_gap(runs)
    fig, axes = _panels(len(tasks))
    for ax, task in zip(axes, tasks, strict=True):
        ax.set_title(f"{task}: best architecture minus transformer")
        g = gaps[gaps["task"] == task]
        if g.empty or g["n_archs"].max() < 2:
            no_data(ax, "needs the transformer and another architecture\n"
                        "under random or spt")
            continue
        sizes = size_order(task_runs(runs)[task_runs(runs)["task"] == task])
        pos = {s: i for i, s in enumerate(sizes)}
        for prior in ("random", "spt"):
            p = g[g["prior"] == prior].sort_values("size", key=lambda s: s.map(pos))
            if p.empty:
                continue
            x = p["size"].map(pos).to_numpy()
            ax.plot(x, p["gap"], color=NEUTRAL, linestyle=prior_linestyle(prior), label=prior)
            for xi, (_, row) in zip(x, p.iterrows(), strict=True):
                ax.plot(xi, row["gap"], linestyle="none", **arch_style(row["best_arch"]))
                ax.annotate(row["best_arch"], (xi, row["gap"]), fontsize=6,
                            xytext=(3, 3), textcoords="offset points")
        ax.set_xticks(range(len(sizes)), sizes)
        ax.set_xlabel("size")
        ax.set_ylabel("accuracy gap (best - transformer)")
        ax.legend(title="prior")
    return save(fig, out_dir, "arch_gap")


@styled
def plot_loss_vs_depth(runs, fits, out_dir) -> list[Path]:
    """Final training loss against depth, one panel per architecture, one line per
    (prior, norm): line style by prior, marker by norm. Runs that diverged or failed
    are crosses along the top edge (Xu et al. 2021: where the standard recipe fails)."""
    runs_t = task_runs(runs)
    archs = [a for a in ARCHITECTURES if a in set(runs_t["arch"])]
    fig, axes = _panels(max(len(archs), 1), ncols=4)
    if not archs:
        axes[0].set_title("final loss against depth")
        no_data(axes[0], "no task runs")
        return save(fig, out_dir, "loss_vs_depth")
    for ax, arch in zip(axes, archs, strict=True):
        ax.set_title(f"{arch}: final loss against depth")
        cell = runs_t[runs_t["arch"] == arch]
        ok = _ok(cell)
        ok = ok[np.isfinite(ok["train_loss"])]
        bad = cell[cell["status"] != "ok"]
        if ok.empty and bad.empty:
            no_data(ax)
            continue
        color = arch_style(arch)["color"]
        mean = ok.groupby(["prior", "norm", "depth"])["train_loss"].mean().reset_index()
        rank = {p: i for i, p in enumerate(PRIORS)}
        for (prior, norm), s in sorted(mean.groupby(["prior", "norm"], sort=False),
                                       key=lambda kv: (rank.get(kv[0][0], 99), kv[0][1])):
            s = s.sort_values("depth")
            ax.plot(s["depth"], s["train_loss"], color=color, linestyle=prior_linestyle(prior),
                    marker=NORM_MARKERS.get(norm, "o"))
        top = blended_transform_factory(ax.transData, ax.transAxes)
        for _, row in bad.iterrows():
            ax.plot(row["depth"], 0.97, marker="x", color=color, linestyle="none",
                    transform=top)
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_formatter(FormatStrFormatter("%d"))
        ax.set_xlabel("depth (layers)")
        ax.set_ylabel("final training loss")
        if ok.empty:
            ax.text(0.5, 0.5, "every run diverged or failed", transform=ax.transAxes,
                    ha="center", color=NEUTRAL)
    _prior_legend(fig, runs_t["prior"], norms=runs_t["norm"],
                  failed=bool((runs_t["status"] != "ok").any()))
    return save(fig, out_dir, "loss_vs_depth")


@styled
def plot_downstream_vs_upstream(runs, fits, out_dir, tasks=None) -> list[Path]:
    """Downstream error of the upstream-prior runs against their upstream loss, one
    panel per task, with the alpha_U,D fits (err = coef * loss^alpha_U,D)."""
    tasks = _tasks(runs, tasks) or ["(no task runs)"]
    ok = _ok(task_runs(runs))
    ok = ok[(ok["prior"] == "upstream") & np.isfinite(ok["upstream_loss"])]
    fig, axes = _panels(len(tasks))
    for ax, task in zip(axes, tasks, strict=True):
        ax.set_title(f"{task}: downstream against upstream")
        panel = ok[ok["task"] == task]
        if panel.empty:
            no_data(ax, "no finished runs finetuned from upstream pretraining")
            continue
        for arch, cell in panel.groupby("arch", sort=False):
            style = arch_style(arch)
            label = arch
            fit = select(fits, "alpha_UD", task=task, arch=arch)
            if len(fit):
                row = fit.iloc[0]
                label += ": " + _fmt_alpha(row, "αU,D")
                if row["status"] == "ok":
                    _fit_curve(ax, cell["upstream_loss"],
                               lambda g, r=row: r["coef"] * g ** r["alpha"],
                               color=style["color"])
            ax.plot(cell["upstream_loss"], cell["error"], linestyle="none", label=label,
                    **style)
        _loglog_axes(ax, "upstream loss (nats)", "downstream error (1 - test accuracy)")
    _arch_legends(fig, axes)
    return save(fig, out_dir, "downstream_vs_upstream")


def spt_vs_matched(runs: pd.DataFrame) -> pd.DataFrame:
    """Per (task, arch, size): mean test accuracy under spt and under the
    compute-matched control, where both have finished runs."""
    acc = _mean_acc(task_runs(runs), ["task", "arch", "size", "prior"])
    wide = acc.pivot_table(index=["task", "arch", "size"], columns="prior", values="mean")
    if not {"spt", "scratch_matched"} <= set(wide.columns):
        return pd.DataFrame(columns=["task", "arch", "size", "spt", "scratch_matched"])
    return wide[["spt", "scratch_matched"]].dropna().reset_index()


@styled
def plot_spt_vs_matched(runs, fits, out_dir, tasks=None) -> list[Path]:
    """SPT's test accuracy against the compute-matched control's (random init
    trained for SPT's pretraining plus finetuning FLOPs), one point per arch and
    size: above the diagonal, SPT wins at equal compute (Amos et al. 2023)."""
    tasks = _tasks(runs, tasks) or ["(no task runs)"]
    pairs = spt_vs_matched(runs)
    fig, axes = _panels(len(tasks), size=(4.2, 4.2))
    for ax, task in zip(axes, tasks, strict=True):
        ax.set_title(f"{task}: SPT vs compute-matched control")
        p = pairs[pairs["task"] == task]
        if p.empty:
            no_data(ax, "no spt and scratch_matched runs\nof the same arch and size")
            continue
        lo = min(p["spt"].min(), p["scratch_matched"].min())
        hi = max(p["spt"].max(), p["scratch_matched"].max())
        pad = 0.05 * max(hi - lo, 0.02)
        # The diagonal: equal accuracy at equal compute.
        ax.plot([lo - pad, hi + pad], [lo - pad, hi + pad], color=NEUTRAL, linewidth=0.8)
        for arch, cell in p.groupby("arch", sort=False):
            ax.plot(cell["scratch_matched"], cell["spt"], linestyle="none", label=arch,
                    **arch_style(arch))
            if p["arch"].nunique() <= MAX_PANEL_LEGEND:  # few points: name their sizes
                for _, row in cell.iterrows():
                    ax.annotate(row["size"], (row["scratch_matched"], row["spt"]), fontsize=6,
                                xytext=(3, -8), textcoords="offset points")
        ax.set_xlabel("compute-matched control: test accuracy")
        ax.set_ylabel("SPT: test accuracy")
        ax.set_aspect("equal", adjustable="datalim")
    _arch_legends(fig, axes)
    return save(fig, out_dir, "spt_vs_matched")


def _heldout_panels(fits: pd.DataFrame, tasks) -> list[tuple[str, pd.DataFrame]]:
    """(title, fits rows) of each panel of `heldout_prediction`: alpha_U in both
    forms, then per task alpha_D per prior and alpha_U,D."""
    panels = [(f"upstream loss: αU, {label}", select(fits, "alpha_U", form))
              for form, label in (("loglog", "log-log"), ("saturating", "saturating"))]
    down = select(fits, "alpha_D")
    for task in tasks:
        panels += [(f"{task} error: αD, {prior}", select(down, "alpha_D", task=task, prior=prior))
                   for prior in PRIORS if prior in set(down.loc[down["task"] == task, "prior"])]
        panels.append((f"{task} error vs upstream loss: αU,D",
                       select(fits, "alpha_UD", task=task)))
    return [(title, rows) for title, rows in panels if len(rows)]


@styled
def plot_heldout_prediction(runs, fits, out_dir, tasks=None) -> list[Path]:
    """Each law refitted without its largest size: the prediction there (y) against
    the observed mean (x), one panel per law (and prior), one point per architecture,
    bars the 95% bootstrap interval of the prediction. On the diagonal the law
    predicted the held-out size exactly; below it the size did worse (higher loss or
    error) than the law predicts. The grey band is +-10%."""
    panels = _heldout_panels(fits, _tasks(runs, tasks))
    fig, axes = _panels(max(len(panels), 1), ncols=3, size=(3.6, 3.4))
    if not panels:
        axes[0].set_title("held-out prediction")
        no_data(axes[0], "no fits for this panel")
        return save(fig, out_dir, "heldout_prediction")
    for ax, (title, rows) in zip(axes, panels, strict=True):
        ok = rows[rows["heldout_status"] == "ok"]
        if ok.empty:
            ax.set_title(title)
            no_data(ax, "no prediction:\n" + "\n".join(sorted(set(rows["heldout_status"]))))
            continue
        size = "/".join(sorted(set(ok["heldout_size"])))
        ax.set_title(f"{title}\nheld out {size}: median |error| "
                     f"{100 * ok['heldout_rel_error'].abs().median():.1f}%")
        # The prediction's interval: obs * (1 + the relative error's interval ends).
        ok = ok.assign(low=ok["heldout_obs"] * (1 + ok["heldout_rel_error_low"]),
                       high=ok["heldout_obs"] * (1 + ok["heldout_rel_error_high"]))
        values = ok[["heldout_obs", "heldout_pred", "low", "high"]].stack().dropna()
        lim = np.array([values.min(), values.max()])
        lim += np.array([-1, 1]) * 0.05 * (lim[1] - lim[0])
        ax.fill_between(lim, 0.9 * lim, 1.1 * lim, color=NEUTRAL, alpha=0.12, linewidth=0)
        ax.plot(lim, lim, color=NEUTRAL, linewidth=0.8)
        rank = {a: i for i, a in enumerate(ARCHITECTURES)}
        for _, row in ok.sort_values("arch", key=lambda a: a.map(rank)).iterrows():
            style = arch_style(row["arch"])
            # Lines, not error bars: a percentile interval need not contain the estimate.
            ax.vlines(row["heldout_obs"], row["low"], row["high"], color=style["color"])
            ax.plot(row["heldout_obs"], row["heldout_pred"], linestyle="none",
                    label=row["arch"], **style)
        refused = len(rows) - len(ok)
        if refused:
            ax.text(0.98, 0.02, f"{refused} without prediction", transform=ax.transAxes,
                    ha="right", va="bottom", fontsize=6, color=NEUTRAL)
        ax.set_xlim(lim)
        ax.set_ylim(lim)
        ax.set_aspect("equal")
        ax.xaxis.set_major_locator(MaxNLocator(4))
        ax.yaxis.set_major_locator(MaxNLocator(4))
        ax.set_xlabel("observed (mean over runs)")
        ax.set_ylabel("predicted by the law")
    _arch_legends(fig, axes)
    return save(fig, out_dir, "heldout_prediction")


def plot_all(runs: pd.DataFrame, fits: pd.DataFrame, out_dir: Path, tasks=None) -> list[Path]:
    """Every figure of `figure_names(tasks)` (tasks: default, those in `runs`)."""
    tasks = _tasks(runs, tasks)
    paths = [
        *plot_upstream_loss_vs_compute(runs, fits, out_dir),
        *plot_error_vs_compute(runs, fits, out_dir, tasks=tasks),
        *plot_alpha_per_arch(runs, fits, out_dir, tasks=tasks),
        *plot_arch_gap(runs, fits, out_dir, tasks=tasks),
        *plot_loss_vs_depth(runs, fits, out_dir),
        *plot_downstream_vs_upstream(runs, fits, out_dir, tasks=tasks),
        *plot_spt_vs_matched(runs, fits, out_dir, tasks=tasks),
        *plot_heldout_prediction(runs, fits, out_dir, tasks=tasks),
    ]
    for task in tasks:
        paths += plot_accuracy_vs_size(runs, fits, out_dir, task)
    return paths
