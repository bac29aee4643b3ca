"""Figures, with matplotlib only (no torch): one style for every figure.

Each architecture keeps one colour (and marker) across all figures, from the
colour-blind-safe Okabe-Ito palette in the fixed order of names.ARCHITECTURES.
Every figure is written as PNG and PDF.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only; never needs a display
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from .fits import TASK_STAGES, x_values  # noqa: E402
from .names import ARCHITECTURES, PRIORS  # noqa: E402

OKABE_ITO = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442",
             "#000000")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
LINESTYLES = ("-", "--", ":", "-.")
X_LABELS = {
    "compute": "training compute C (FLOPs)",
    "params": "non-embedding parameters",
    "flops_per_token": "FLOPs per token",
}


def arch_style(arch: str) -> dict:
    i = ARCHITECTURES.index(arch) if arch in ARCHITECTURES else len(ARCHITECTURES)
    return {"color": OKABE_ITO[i % len(OKABE_ITO)], "marker": MARKERS[i // len(OKABE_ITO)]}


def prior_linestyle(prior: str) -> str:
    i = PRIORS.index(prior) if prior in PRIORS else 0
    return LINESTYLES[i % len(LINESTYLES)]


def save(fig, out_dir: Path, name: str) -> list[Path]:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / f"{name}.{ext}" for ext in ("png", "pdf")]
    for path in paths:
        fig.savefig(path, dpi=150, bbox_inches="tight")
    plt.close(fig)
    return paths


def no_data(ax, message: str = "no finished runs for this panel") -> None:
    ax.text(0.5, 0.5, message, ha="center", va="center", transform=ax.transAxes)
    ax.set_xticks([])
    ax.set_yticks([])


def plot_error_vs_compute(runs: pd.DataFrame, fits: pd.DataFrame, out_dir: Path) -> list[Path]:
    """Downstream error against compute, one panel per task, one series per
    architecture (line style per prior), with the fitted power law."""
    x_axis = fits["x_axis"].iloc[0] if len(fits) else "compute"
    runs = runs[runs["stage"].isin(TASK_STAGES)]
    ok = runs[runs["status"] == "ok"]
    ok = ok.assign(x=x_values(ok, x_axis), error=1.0 - ok["test_acc"])
    tasks = sorted(runs["task"].unique()) or ["(none)"]
    fig, axes = plt.subplots(1, len(tasks), figsize=(5 * len(tasks), 4), squeeze=False)
    for ax, task in zip(axes[0], tasks, strict=True):
        ax.set_title(task)
        cells = ok[ok["task"] == task]
        if cells.empty:
            no_data(ax)
            continue
        for (arch, prior), cell in cells.groupby(["arch", "prior"], sort=True):
            style = arch_style(arch)
            mean = cell.groupby("size", sort=False)[["x", "error"]].mean().sort_values("x")
            ax.scatter(cell["x"], cell["error"], color=style["color"], marker=style["marker"],
                       alpha=0.35, s=14)
            fit = fits[(fits["task"] == task) & (fits["arch"] == arch) & (fits["prior"] == prior)]
            label = f"{arch} / {prior}"
            if len(fit) and fit["status"].iloc[0] == "ok":
                row = fit.iloc[0]
                grid = np.geomspace(mean["x"].min(), mean["x"].max(), 50)
                ax.plot(grid, row["coef"] * grid ** (-row["alpha"]), color=style["color"],
                        linestyle=prior_linestyle(prior))
                label += (f": $\\alpha_D$={row['alpha']:.3f} "
                          f"[{row['alpha_low']:.3f}, {row['alpha_high']:.3f}]")
            elif len(fit):
                label += f": {fit['status'].iloc[0]}"
            ax.plot(mean["x"], mean["error"], color=style["color"], marker=style["marker"],
                    linestyle="none", label=label)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(X_LABELS[x_axis])
        ax.set_ylabel("downstream error (1 - test accuracy)")
        ax.legend(fontsize=7)
        ax.grid(True, which="both", alpha=0.3)
    return save(fig, out_dir, "error_vs_compute")
