"""Read a figure back from its source data (`figures.output.figure_data`, the CSV written
beside each figure) and check it against the runs and fits it was drawn from; keep
the drawn figures open instead of saving them; read the figures' index."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from scalestudy.analysis.figures import FIGURES, figure_names, output
from scalestudy.analysis.fits import select, task_runs, upstream_runs, x_values


def series(data: pd.DataFrame, panel: str, series: str, kind: str = "line") -> pd.DataFrame:
    """One series of a figure's source data (figures.output.figure_data), sorted by x."""
    rows = data[(data["panel"] == panel) & (data["series"] == series) & (data["kind"] == kind)]
    assert len(rows), (panel, series, kind)
    return rows.sort_values("x")


def check_error_vs_compute_data(data, runs, fits, task, prior, arch):
    """error_vs_compute's source data for one panel against the runs and the fit:
    the seed means and sd of the error at each size's compute, and the fitted line."""
    cell = task_runs(runs).query("task == @task and prior == @prior and arch == @arch")
    cell = cell[cell["status"] == "ok"].assign(x=lambda c: x_values(c, "compute"))
    by_size = cell.groupby("size").agg(x=("x", "mean"), mean=("error", "mean"),
                                       sd=("error", "std")).sort_values("x")
    panel = f"{task}/{prior}/{arch}"
    points = series(data, panel, f"points:{arch}")
    np.testing.assert_allclose(points["x"], by_size["x"], rtol=1e-6)
    np.testing.assert_allclose(points["y"], by_size["mean"], rtol=1e-6)
    if len(cell) > len(by_size):  # several seeds: bars of +-1 sd
        bars = series(data, panel, f"points:{arch}:bars", "ybar")
        np.testing.assert_allclose(bars["high"] - bars["y"], by_size["sd"], rtol=1e-6)
    (row,) = [r for _, r in select(fits, "alpha_D", task=task, arch=arch, prior=prior).iterrows()]
    fit = series(data, panel, f"fit:{arch}")
    np.testing.assert_allclose(fit["y"], row["coef"] * fit["x"] ** -row["alpha"], rtol=1e-6)
    assert (fit["x"].min(), fit["x"].max()) == pytest.approx((by_size["x"].min(),
                                                              by_size["x"].max()))


def check_upstream_loss_data(data, runs, fits, arch):
    """upstream_loss_vs_compute's source data for one architecture's panel: the
    upstream loss of each size's pretraining run at its compute, and the log-log fit."""
    up = upstream_runs(runs)
    up = up[(up["arch"] == arch) & (up["status"] == "ok")].assign(
        x=lambda c: x_values(c, "compute")).sort_values("x")
    points = series(data, arch, f"points:{arch}")
    np.testing.assert_allclose(points["x"], up["x"], rtol=1e-6)
    np.testing.assert_allclose(points["y"], up["upstream_loss"], rtol=1e-6)
    (row,) = [r for _, r in select(fits, "alpha_U", "loglog", arch=arch).iterrows()]
    fit = series(data, arch, f"fit:{arch}")
    np.testing.assert_allclose(fit["y"], row["coef"] * fit["x"] ** -row["alpha"], rtol=1e-6)


def keep_figures(monkeypatch) -> dict:
    """Make the figures' `save` keep each figure open (by name) instead of writing it."""
    kept = {}

    def keep(fig, out_dir, name, notes=(), title_notes=True):
        kept[name] = fig
        return output.Drawn([Path(out_dir) / f"{name}.png", Path(out_dir) / f"{name}.pdf"],
                           notes)

    for stem in FIGURES:  # each figure module saves through output.save
        monkeypatch.setattr(f"scalestudy.analysis.figures.{stem}.save", keep)
    return kept




def of_runs_and_fits(tasks) -> list[str]:
    """The figures drawn from the runs and fits (every one but the frontier's)."""
    return [stem for stem, (fig, _) in figure_names(tasks).items() if not fig.from_frontier]


def index_rows(path: Path) -> dict[str, tuple[str, str]]:
    """index.md's table: figure -> (file column, notes column)."""
    rows = {}
    for line in path.read_text().splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 3 and cells[0] not in ("figure", "---"):
            rows[cells[0]] = (cells[1], cells[2])
    return rows
