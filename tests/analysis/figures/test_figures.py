"""The figures on synthetic run records whose laws are known: what each draws,
read back from the drawn figure, and what the index says of those not drawn."""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd
import pytest
import yaml

from scalestudy.analysis import scaling, stats
from scalestudy.analysis.figures import (
    FIGURES,
    NO_FRONTIER,
    Grid,
    draw,
    figure_names,
    grid_figures,
    heldout_prediction,
    loss_vs_depth,
    output,
    style,
)
from scalestudy.analysis.figures import arch_gap as arch_gap_figure
from scalestudy.analysis.fits import fit_study, select, task_runs
from scalestudy.analysis.tables import heldout_markdown
from scalestudy.architectures import ARCHITECTURES
from scalestudy.priors import PRIORS
from scalestudy.study.config import load_study

from tests.support import ROOT
from tests.support.figure_checks import (
    check_error_vs_compute_data,
    index_rows,
    of_runs_and_fits,
)
from tests.support.runs import make_runs, one_fit
from tests.support.studies import LRA_TASKS

# --------------------------------------------------------------------------- figures



def _panel(fig, label: str):
    """The panel of `fig` whose label (set by the plot function) is `label`."""
    (ax,) = [ax for ax in fig.axes if ax.get_label() == label]
    return ax


def _gid(ax, gid: str):
    """The artist (line or collection) of `ax` with this gid."""
    (artist,) = [a for a in [*ax.lines, *ax.collections] if a.get_gid() == gid]
    return artist


def _bars(ax, gid: str) -> np.ndarray:
    """Half-lengths of the vertical error bars of the series `gid` (one per point; NaN
    where a point has no bar)."""
    (coll,) = [c for c in ax.collections if c.get_gid() == f"{gid}:bars"]
    return np.array([abs(seg[1, 1] - seg[0, 1]) / 2 if len(seg) == 2 else np.nan
                     for seg in np.asarray(coll.get_segments(), dtype=object)])


def test_plot_all_writes_the_figures_with_data_and_indexes_the_others(study, tmp_path):
    runs, fits = study
    paths = draw.plot_all(runs, fits, tmp_path)
    tasks = ["listops", "text"]
    # Every figure of the runs and fits has data (loss_vs_depth too: the synthetic
    # runs grow depth at a fixed width of 64; heldout_prediction: two sizes refit
    # each log-log law); the frontier's need budgets, and say so.
    expected = of_runs_and_fits(tasks)
    assert paths.drawn == expected
    assert paths[-1] == tmp_path / "index.md"
    assert sorted(paths[:-1]) == sorted(tmp_path / f"{n}.{e}" for n in expected
                                        for e in ("png", "pdf", "csv"))
    for path in paths[:-1]:
        assert path.stat().st_size > 1000, path
    rows = index_rows(tmp_path / "index.md")
    assert list(rows) == list(figure_names(tasks))
    assert rows["frontier_loss"] == ("not drawn", NO_FRONTIER)
    assert rows["error_vs_compute"][0] == ("[error_vs_compute.png](error_vs_compute.png), "
                                           "[error_vs_compute.pdf](error_vs_compute.pdf), "
                                           "[error_vs_compute.csv](error_vs_compute.csv)")
    # Each figure's CSV holds what it plots: the seed means, their bars and the fit.
    data = pd.read_csv(tmp_path / "error_vs_compute.csv")
    assert list(data.columns) == output.DATA_COLUMNS
    check_error_vs_compute_data(data, runs, fits, "text", "random", "s4")
    # What the workflow declares for this grid: every drawn figure but loss_vs_depth
    # (the default protocol; it is drawn all the same, as it has data).
    declared = grid_figures(Grid.of_runs(runs, tasks))
    assert list(declared) == [n for n in expected if n != "loss_vs_depth"]
    assert declared == grid_figures(Grid.of(
        tasks, ["transformer", "performer", "s4"], ["xxs", "xs", "s"],
        ["random", "spt", "upstream", "scratch_matched"]))
    assert declared["accuracy_vs_size_text"] == (FIGURES["accuracy_vs_size"], "text")


def test_figures_drawn_in_parallel_processes_are_the_ones_drawn_in_turn(study, tmp_path):
    runs, fits = study
    runs = runs[runs["task"] == "listops"]
    one = draw.plot_all(runs, fits, tmp_path / "one")
    two = draw.plot_all(runs, fits, tmp_path / "two", workers=2)
    assert [p.name for p in two] == [p.name for p in one] and len(one) > 10
    assert {n: (e.drawn, e.reason, e.notes) for n, e in two.entries.items()} == {
        n: (e.drawn, e.reason, e.notes) for n, e in one.entries.items()}
    for path in one:
        if path.suffix in (".csv", ".md"):  # the images differ in their timestamps
            assert (tmp_path / "two" / path.name).read_bytes() == path.read_bytes(), path.name


def test_a_figure_without_data_is_not_drawn_and_the_index_says_why(drawn, tmp_path):
    # Two seeds, no `upstream` and no `scratch_matched` prior, one architecture.
    runs = make_runs(priors=("random", "spt"), seeds=(0, 1), noise=0.02)
    runs["width"] = runs["size"].map({"xxs": 16, "xs": 32, "s": 64, "m": 96})  # as on CPU
    fits = fit_study(runs, n_boot=50)
    stale = tmp_path / "spt_vs_matched.png"  # an earlier run's figure, now without data
    stale.write_bytes(b"old")
    out = draw.plot_all(runs, fits, tmp_path)
    assert not stale.exists() and not (tmp_path / "spt_vs_matched.pdf").exists()
    assert out.drawn == ["error_vs_compute", "alpha_per_arch", "heldout_prediction",
                         "accuracy_vs_size_listops"]
    assert set(drawn) == set(out.drawn)  # the others never made a figure
    reasons = {name: e.reason for name, e in out.entries.items() if not e.drawn}
    assert reasons == {
        "upstream_loss_vs_compute":
            "no upstream pretraining runs: the study has no `upstream` prior",
        "scaling_overview": "no upstream pretraining runs: the study has no `upstream` prior",
        "arch_gap": "only one architecture (the gap is the best architecture minus the "
                    "transformer, under random and spt)",
        "loss_vs_depth": "no architecture has runs at two or more depths of one width (and "
                         "LayerNorm placement): depth changes only together with width (e.g. "
                         "transformer: depth 2 at width 16, 4 at width 32, 8 at width 64, 16 "
                         "at width 96), so a curve against depth would mix widths; the `depth` "
                         "scaling protocol (train.protocol: depth) with two or more sizes "
                         "grows depth at a fixed width",
        "downstream_vs_upstream":
            "no runs finetuned from upstream pretraining: the study has no `upstream` prior",
        "spt_vs_matched": "no `scratch_matched` runs: the study's priors lack it",
        "gap_closing": "no finished s4 runs",
        **dict.fromkeys(["frontier_isoflop", "frontier_optimal", "frontier_loss"], NO_FRONTIER),
    }
    assert not any(e.notice for e in out.entries.values())
    rows = index_rows(tmp_path / "index.md")
    for name, reason in reasons.items():
        assert rows[name] == ("not drawn", reason)
        assert not (tmp_path / f"{name}.png").exists()
    # A panel without data inside a drawn figure is left out, and the figure says so.
    runs.loc[runs["prior"] == "spt", "status"] = "failed"
    drawn.clear()
    out = draw.plot_all(runs, fits, tmp_path)
    fig = drawn["error_vs_compute"]
    assert [ax.get_label() for ax in fig.axes] == ["listops/random/transformer"]
    assert out.entries["error_vs_compute"].notes == [
        "listops / spt (every run diverged or failed)"]
    assert "Left out (no data): listops / spt (every run diverged or failed)" in (
        _tidy(fig._suptitle.get_text()))
    assert "panels left out: listops / spt" in (tmp_path / "index.md").read_text()


def _tidy(text: str) -> str:
    return " ".join(text.split())


def test_a_declared_figure_whose_runs_all_failed_gets_a_notice(tmp_path):
    # The grid has the upstream prior, so the workflow declares the upstream figures;
    # every upstream pretraining run failed, so there is nothing to draw.
    runs = make_runs(priors=("random", "upstream"))
    runs.loc[runs["stage"] == "upstream", "status"] = "failed"
    runs.loc[runs["prior"] == "upstream", "status"] = "failed"
    fits = fit_study(runs, n_boot=20)
    out = draw.plot_all(runs, fits, tmp_path)
    entry = out.entries["upstream_loss_vs_compute"]
    assert not entry.drawn and entry.notice
    assert entry.reason == "every upstream pretraining run (4) diverged or failed"
    for ext in ("png", "pdf"):  # the declared outputs exist
        assert (tmp_path / f"upstream_loss_vs_compute.{ext}").stat().st_size > 0
    file_col, note = index_rows(tmp_path / "index.md")["upstream_loss_vs_compute"]
    assert file_col == "not drawn" and "a notice saying this stands in its place" in note
    # Not declared (the grid has no spt): no file at all.
    assert not out.entries["spt_vs_matched"].notice
    assert not (tmp_path / "spt_vs_matched.png").exists()


def test_empty_records_draw_nothing_and_say_why(drawn, tmp_path):
    runs = make_runs().iloc[:0]
    fits = fit_study(runs, n_boot=0)
    out = draw.plot_all(runs, fits, tmp_path, tasks=["listops"])
    assert out.drawn == [] and not drawn
    assert list(out) == [tmp_path / "index.md"]
    rows = index_rows(tmp_path / "index.md")
    assert list(rows) == list(figure_names(["listops"]))
    assert all(file_col == "not drawn" and note for file_col, note in rows.values())


def test_styles_are_one_per_architecture_and_prior():
    assert set(style.ARCH_STYLES) == set(ARCHITECTURES)
    colours = [style.arch_style(a)["color"].lower() for a in ARCHITECTURES]
    markers = [style.arch_style(a)["marker"] for a in ARCHITECTURES]
    assert len(set(colours)) == len(set(markers)) == len(ARCHITECTURES)
    assert set(style.PRIOR_STYLES) >= set(PRIORS)
    pairs = [(str(style.prior_style(p)["linestyle"]), style.prior_style(p)["fillstyle"])
             for p in PRIORS]
    assert len(set(pairs)) == len(PRIORS)
    assert len({str(style.prior_linestyle(p)) for p in PRIORS}) == len(PRIORS)


# Markers that read as one shape at a panel's size: a prior's must not share
# its family with another's (nor be one of the unfinished runs' `x` and `+`).
LOOK_ALIKE = [{"o", "h", "H", "8", "p", "."}, {"D", "d"}, {"1", "2", "3", "4"},
              {"+", "P"}, {"x", "X"}, {"|"}, {"_"}]


def test_every_prior_has_its_own_colour_and_marker_from_the_registry():
    """Where a panel's lines are priors (accuracy_vs_size): every pair of
    registered priors differs in colour and in marker shape, and no two markers
    look alike; the lists cover the registry with room for one more prior."""
    marks = {p: style.prior_mark(p) for p in PRIORS}
    assert len(style.PRIOR_COLOURS) > len(PRIORS) and len(style.PRIOR_MARKERS) > len(PRIORS)
    for a, b in [(a, b) for a in PRIORS for b in PRIORS if a < b]:
        assert marks[a]["color"].lower() != marks[b]["color"].lower(), (a, b)
        assert marks[a]["marker"] != marks[b]["marker"], (a, b)
    family = {m: i for i, shapes in enumerate(LOOK_ALIKE) for m in shapes}
    shapes = [family.get(m, m) for m in style.PRIOR_MARKERS]
    assert len(set(shapes)) == len(shapes)
    assert not {"x", "+"} & set(style.PRIOR_MARKERS)  # the unfinished runs' marks
    # In registry order, so that a new prior takes the next of each list.
    assert [marks[p]["marker"] for p in PRIORS] == list(style.PRIOR_MARKERS[:len(PRIORS)])
    assert style.prior_mark("not a prior") == style.UNKNOWN_STYLE


def test_every_architecture_keeps_its_colour_and_marker_in_every_figure(rendered):
    figures, _, _ = rendered
    seen = set()
    for name, fig in figures.items():
        for ax in fig.axes:
            for line in ax.lines:
                gid = line.get_gid() or ""
                if not gid.startswith(("points:", "overlay-points:", "alpha:", "best:")):
                    continue
                arch = next(a for a in ARCHITECTURES if a in gid.split(":")[1:])
                want = style.arch_style(arch)
                if name.startswith("accuracy_vs_size"):  # a panel per arch, a line per prior
                    want = style.prior_mark(gid.split(":")[2])
                assert line.get_color() == want["color"], (name, gid)
                assert line.get_marker() == want["marker"], (name, gid)
                seen.add(name)
    # gap_closing draws the difference of two architectures, in neutral grey.
    assert seen == set(figures) - {"gap_closing"}


def test_error_vs_compute_plots_seed_means_and_the_fit_with_its_band(rendered, study):
    figures, _, _ = rendered
    runs, fits = study
    fig = figures["error_vs_compute"]
    # One panel per task x prior x architecture, all on the same axes.
    assert len(fig.axes) == 2 * 4 * 3
    assert len({ax.get_xlim() for ax in fig.axes}) == 1
    assert len({ax.get_ylim() for ax in fig.axes}) == 1
    ax = _panel(fig, "text/random/s4")
    cell = task_runs(runs).query("task == 'text' and prior == 'random' and arch == 's4'")
    by_size = cell.groupby("size", sort=False)
    points = _gid(ax, "points:s4")
    np.testing.assert_allclose(points.get_xdata(), by_size["train_flops"].mean())
    np.testing.assert_allclose(points.get_ydata(), by_size["error"].mean())
    np.testing.assert_allclose(_bars(ax, "points:s4"), by_size["error"].std(ddof=1))
    row = one_fit(fits, "alpha_D", task="text", arch="s4", prior="random")
    fit = _gid(ax, "fit:s4")
    np.testing.assert_allclose(fit.get_ydata(), row["coef"] * fit.get_xdata() ** -row["alpha"])
    assert (fit.get_xdata().min(), fit.get_xdata().max()) == (
        cell["train_flops"].min(), cell["train_flops"].max())
    # The band: pointwise t interval (df: runs - 2) of the bootstrap replicates'
    # lines (residuals redrawn) about the fitted line, as alpha's interval is.
    from scipy.stats import t

    band = _gid(ax, "band:s4").get_paths()[0].vertices
    grid = fit.get_xdata()
    lx, ly = np.log(cell["train_flops"].to_numpy()), np.log(cell["error"].to_numpy())
    assert row["interval_unit"] == "run"
    slopes, intercepts, df = stats.loglog_replicates(lx, ly, style.BAND_BOOT, style.BAND_SEED,
                                                     cell["size"].to_numpy())
    assert df == len(cell) - 2
    lines = intercepts[:, None] + slopes[:, None] * np.log(grid)
    half = t.ppf(0.975, df) * lines.std(axis=0, ddof=1)
    centre = np.log(fit.get_ydata())
    low, high = np.exp(centre - half), np.exp(centre + half)
    np.testing.assert_allclose(band[:len(grid), 1], low, rtol=1e-5)
    np.testing.assert_allclose(band[len(grid):2 * len(grid), 1], high[::-1], rtol=1e-5)
    assert np.all(low <= fit.get_ydata()) and np.all(fit.get_ydata() <= high)
    assert f"αD = {row['alpha']:.3f} [{row['alpha_low']:.3f}, {row['alpha_high']:.3f}]" in [
        t.get_text() for t in ax.texts]
    # Those replicates are the ones behind alpha's interval (same n_boot and seed).
    f = scaling.fit_loglog(cell["train_flops"], cell["error"], cell["size"],
                           n_boot=style.BAND_BOOT, seed=style.BAND_SEED)
    a_half = t.ppf(0.975, df) * slopes.std(ddof=1)
    assert (f.alpha_low, f.alpha_high) == pytest.approx((f.alpha - a_half, f.alpha + a_half))


def test_upstream_and_transfer_figures_plot_the_fits(rendered, study):
    figures, _, _ = rendered
    runs, fits = study
    fig = figures["upstream_loss_vs_compute"]
    assert [ax.get_label() for ax in fig.axes] == ["overlay", "transformer", "performer", "s4"]
    assert len({ax.get_ylim() for ax in fig.axes}) == 1  # shared axes
    up = runs[runs["stage"] == "upstream"]
    for arch in ("transformer", "performer", "s4"):
        row = one_fit(fits, "alpha_U", arch=arch)
        cell = up[up["arch"] == arch]
        for ax, gid in ((_panel(fig, arch), "fit:"), (_panel(fig, "overlay"), "overlay:")):
            line = _gid(ax, gid + arch)
            np.testing.assert_allclose(line.get_ydata(),
                                       row["coef"] * line.get_xdata() ** -row["alpha"])
        points = _gid(_panel(fig, arch), f"points:{arch}")  # each size's mean over seeds
        np.testing.assert_allclose(np.sort(points.get_ydata()),
                                   np.sort(cell.groupby("size")["upstream_loss"].mean()))
        _gid(_panel(fig, arch), f"band:{arch}")  # a band in the arch's own panel only
        assert not [c for c in _panel(fig, "overlay").collections
                    if (c.get_gid() or "").startswith("band:")]

    fig = figures["downstream_vs_upstream"]
    ax = _panel(fig, "listops/performer")
    row = one_fit(fits, "alpha_UD", task="listops", arch="performer")
    line = _gid(ax, "fit:performer")  # err = coef * loss^alpha_U,D
    np.testing.assert_allclose(line.get_ydata(), row["coef"] * line.get_xdata() ** row["alpha"])
    cell = task_runs(runs).query("task == 'listops' and prior == 'upstream' and "
                                 "arch == 'performer'").groupby("size", sort=False)
    points = _gid(ax, "points:performer")
    np.testing.assert_allclose(points.get_xdata(), cell["upstream_loss"].mean())
    np.testing.assert_allclose(points.get_ydata(), cell["error"].mean())
    np.testing.assert_allclose(_bars(ax, "points:performer"), cell["error"].std(ddof=1))


def test_scaling_overview_puts_upstream_above_each_tasks_random_error(rendered, study):
    figures, _, _ = rendered
    runs, fits = study
    fig = figures["scaling_overview"]
    archs = ["transformer", "performer", "s4"]
    # The upstream row, then a row per task under random init, a column per arch.
    assert [ax.get_label() for ax in fig.axes] == [
        *archs, *(f"{task}/random/{arch}" for task in ("listops", "text") for arch in archs)]
    for row in (fig.axes[:3], fig.axes[3:6], fig.axes[6:]):
        assert len({ax.get_ylim() for ax in row}) == 1  # each row shares its limits
    # Its panels are the source figures' panels: the same fits and the same points.
    up = runs[runs["stage"] == "upstream"]
    for arch, ax in zip(archs, fig.axes[:3], strict=True):
        row = one_fit(fits, "alpha_U", arch=arch)
        line = _gid(ax, f"fit:{arch}")
        np.testing.assert_allclose(line.get_ydata(),
                                   row["coef"] * line.get_xdata() ** -row["alpha"])
        np.testing.assert_allclose(
            np.sort(_gid(ax, f"points:{arch}").get_ydata()),
            np.sort(up[up["arch"] == arch].groupby("size")["upstream_loss"].mean()))
    source = _panel(figures["error_vs_compute"], "text/random/s4")
    ax = _panel(fig, "text/random/s4")
    for gid in ("fit:s4", "points:s4"):
        np.testing.assert_allclose(_gid(ax, gid).get_xydata(), _gid(source, gid).get_xydata())
    row = one_fit(fits, "alpha_D", task="text", arch="s4", prior="random")
    assert f"αD = {row['alpha']:.3f} [{row['alpha_low']:.3f}, {row['alpha_high']:.3f}]" in [
        t.get_text() for t in ax.texts]


def test_scaling_overview_needs_upstream_and_random():
    entry = FIGURES["scaling_overview"]
    assert entry.fed_by(Grid.of(["listops"], ["s4"], ["xxs"], ["random", "upstream"]))
    assert not entry.fed_by(Grid.of(["listops"], ["s4"], ["xxs"], ["random", "spt"]))
    assert not entry.fed_by(Grid.of(["listops"], ["s4"], ["xxs"], ["upstream", "spt"]))
    from scalestudy.analysis.figures import scaling_overview

    runs = make_runs(archs=("s4",), sizes=("xxs", "xs", "s"), priors=("spt",), seeds=(0,))
    with pytest.raises(output.NotDrawn, match="no upstream pretraining runs"):
        scaling_overview.draw(runs, fit_study(runs, n_boot=10, n_boot_saturating=0), "unused")


def test_scaling_overview_leaves_out_and_names_the_cells_without_random_runs(drawn, tmp_path):
    """s4 has no random runs on listops (only upstream ones), and no architecture
    has any on text: the listops row keeps the transformer's panel, drawn from its
    random runs, s4's is left out and named, and the text row is left out and
    named; the upstream row is whole."""
    from scalestudy.analysis.figures import scaling_overview

    runs = make_runs(archs=("transformer", "s4"), sizes=("xxs", "xs", "s"),
                     priors=("random", "upstream"), tasks=("listops", "text"), seeds=(0, 1),
                     noise=0.02)
    gone = (runs["prior"] == "random") & ((runs["task"] == "text") | (
        (runs["task"] == "listops") & (runs["arch"] == "s4")))
    runs = runs[~gone]
    out = scaling_overview.draw(runs, fit_study(runs, n_boot=10, n_boot_saturating=0), tmp_path)
    assert out.notes == ["no finished runs on text under random", "s4: no finished listops runs"]
    fig = drawn["scaling_overview"]
    assert [ax.get_label() for ax in fig.axes] == ["transformer", "s4",
                                                   "listops/random/transformer"]
    cell = task_runs(runs).query("task == 'listops' and prior == 'random' and "
                                 "arch == 'transformer'")
    points = _gid(_panel(fig, "listops/random/transformer"), "points:transformer")
    np.testing.assert_allclose(np.sort(points.get_ydata()),
                               np.sort(cell.groupby("size")["error"].mean()))


def test_accuracy_vs_size_shares_its_axis_and_plots_mean_and_sd_over_seeds(rendered, study):
    figures, _, _ = rendered
    runs, _ = study
    fig = figures["accuracy_vs_size_text"]
    assert [ax.get_label() for ax in fig.axes] == ["transformer", "performer", "s4"]
    assert len({ax.get_ylim() for ax in fig.axes}) == 1
    ax = _panel(fig, "performer")
    cell = task_runs(runs).query("task == 'text' and arch == 'performer' and prior == 'spt'")
    by_size = cell.groupby("size")
    sizes = ["xxs", "xs", "s"]
    points = _gid(ax, "points:performer:spt")
    np.testing.assert_allclose(points.get_ydata(), by_size["test_acc"].mean()[sizes])
    np.testing.assert_allclose(_bars(ax, "points:performer:spt"),
                               by_size["test_acc"].std(ddof=1)[sizes])
    # Priors dodged sideways by a fixed offset around each size's position.
    offset = points.get_xdata() - np.arange(3)
    assert np.ptp(offset) == pytest.approx(0) and abs(offset[0]) < 0.15
    assert points.get_fillstyle() == style.prior_style("spt")["fillstyle"]
    # Each prior in its own colour and marker, in the panel and in the legend.
    for prior in ("random", "spt"):
        line = _gid(ax, f"points:performer:{prior}")
        assert (line.get_color(), line.get_marker()) == tuple(style.prior_mark(prior).values())
    (legend,) = fig.legends
    shown = {h.get_label(): (h.get_color(), h.get_marker()) for h in legend.legend_handles}
    assert shown["spt"] == tuple(style.prior_mark("spt").values())
    assert [t.get_text() for t in ax.get_xticklabels()] == sizes


def test_alpha_per_arch_draws_each_fit_and_its_interval(rendered, study):
    figures, index, _ = rendered
    _, fits = study
    fig = figures["alpha_per_arch"]
    # The saturating fits all refused (three sizes): that panel is left out, and named.
    assert "alpha_U/saturating" not in [ax.get_label() for ax in fig.axes]
    assert index.entries["alpha_per_arch"].notes == [
        "alpha_U saturating (not enough sizes: 3 < 4)"]
    for label, rows in (("alpha_U/loglog", select(fits, "alpha_U")),
                        ("alpha_D/text/scratch_matched",
                         select(fits, "alpha_D", task="text", prior="scratch_matched"))):
        ax = _panel(fig, label)
        for _, row in rows.iterrows():
            point = _gid(ax, f"alpha:{row['arch']}")
            assert point.get_xdata()[0] == pytest.approx(row["alpha"])
            (segment,) = _gid(ax, f"interval:{row['arch']}").get_segments()
            assert segment[:, 0] == pytest.approx([row["alpha_low"], row["alpha_high"]])
    d_axes = [ax for ax in fig.axes if ax.get_label().startswith("alpha_D/")]
    assert len(d_axes) == 8 and len({ax.get_xlim() for ax in d_axes}) == 1


def test_arch_gap_and_spt_vs_matched_read_back(rendered, study):
    figures, _, _ = rendered
    runs, _ = study
    t = task_runs(runs)
    gaps = arch_gap_figure.arch_gap(runs, ("random", "spt"))
    row = gaps[(gaps["task"] == "listops") & (gaps["prior"] == "random")
               & (gaps["size"] == "s")].iloc[0]
    cell = t[(t["task"] == "listops") & (t["prior"] == "random") & (t["size"] == "s")]
    acc = cell.pivot_table(index="seed", columns="arch", values="test_acc")
    assert row["best_arch"] == acc.mean().idxmax()
    assert row["gap"] == pytest.approx(acc.mean().max() - acc["transformer"].mean())
    assert row["gap_sd"] == pytest.approx((acc[row["best_arch"]] - acc["transformer"]).std())
    ax = _panel(figures["arch_gap"], "listops")
    point = _gid(ax, f"best:random:s:{row['best_arch']}")
    assert (point.get_xdata()[0], point.get_ydata()[0]) == pytest.approx((2, row["gap"]))
    np.testing.assert_allclose(_gid(ax, "gap:random").get_ydata(),
                               gaps.query("task == 'listops' and prior == 'random'")["gap"])

    ax = _panel(figures["spt_vs_matched"], "text")
    points = _gid(ax, "points:s4")
    means = t[(t["task"] == "text") & (t["arch"] == "s4")].pivot_table(
        index="size", columns="prior", values="test_acc").loc[["xxs", "xs", "s"]]
    np.testing.assert_allclose(np.sort(points.get_xdata()), np.sort(means["scratch_matched"]))
    np.testing.assert_allclose(np.sort(points.get_ydata()), np.sort(means["spt"]))


def test_gap_closing_reads_back_the_gaps_their_intervals_and_the_share_closed(rendered, study):
    from scipy.stats import t as student_t


    figures, _, _ = rendered
    runs, _ = study
    acc = task_runs(runs).query("task == 'listops' and prior in ['random', 'spt']").pivot_table(
        index=["prior", "size", "seed"], columns="arch", values="test_acc")
    ax = _panel(figures["gap_closing"], "listops")
    gaps = {}
    for prior in ("random", "spt"):
        line = _gid(ax, f"gap:{prior}")
        expected, halves = [], []
        for size in ("xxs", "xs", "s"):
            s4, tf = acc.loc[(prior, size), "s4"], acc.loc[(prior, size), "transformer"]
            expected.append(s4.mean() - tf.mean())
            # Welch with two runs each: 2 df when the variances are equal.
            se2 = s4.var() / 2 + tf.var() / 2
            df = se2 ** 2 / ((s4.var() / 2) ** 2 + (tf.var() / 2) ** 2)
            halves.append(student_t.ppf(0.975, df) * np.sqrt(se2))
        np.testing.assert_allclose(line.get_ydata(), expected)
        np.testing.assert_allclose(_bars(ax, f"gap:{prior}"), halves)
        gaps[prior] = np.array(expected)
    closed = (gaps["random"] - gaps["spt"]) / gaps["random"]
    labels = [text.get_text() for text in ax.texts]
    assert labels == [f"{share:.0%} closed" for share in closed[gaps["random"] > 0]]


def test_gap_closing_keeps_a_size_whose_run_has_no_test_accuracy(drawn, tmp_path):
    """One of s4's two finished random runs at xs has no test accuracy (NaN): the
    gap there is its other run's accuracy minus the transformer's mean, of one run
    (no interval), drawn and annotated as every other size's, never a NaN that
    leaves the size out."""
    from scalestudy.analysis.figures import gap_closing

    runs = make_runs(archs=("transformer", "s4"), sizes=("xxs", "xs", "s"),
                     priors=("random", "spt"), seeds=(0, 1),
                     acc={("s4", "random"): {"xxs": 0.6, "xs": 0.62, "s": 0.64},
                          ("s4", "spt"): 0.55, ("transformer", "random"): 0.5,
                          ("transformer", "spt"): 0.52})
    runs["test_acc"] += np.where(runs["seed"] == 1, 0.01, -0.01)
    lost = ((runs["arch"] == "s4") & (runs["prior"] == "random") & (runs["size"] == "xs")
            & (runs["seed"] == 1))
    runs.loc[lost, "test_acc"] = np.nan
    params = FIGURES["gap_closing"].params
    g = gap_closing.gaps(runs, "s4", "transformer", ("random", "spt")).set_index(
        ["prior", "size"])
    t = task_runs(runs)
    kept = t[(t["arch"] == "s4") & (t["prior"] == "random") & (t["size"] == "xs")]["test_acc"]
    tf = t[(t["arch"] == "transformer") & (t["prior"] == "random") & (t["size"] == "xs")]
    row = g.loc[("random", "xs")]
    assert row["gap"] == pytest.approx(kept.dropna().iloc[0] - tf["test_acc"].mean())
    assert (row["n_first"], row["n_second"]) == (1, 2)
    assert np.isnan(row["low"]) and np.isnan(row["high"])
    gap_closing.draw(runs, pd.DataFrame(), tmp_path, **params)
    ax = _panel(drawn["gap_closing"], "listops")
    line = _gid(ax, "gap:random")
    assert np.isfinite(line.get_ydata()).all() and len(line.get_ydata()) == 3
    np.testing.assert_allclose(line.get_ydata()[1], row["gap"])
    assert len([t for t in ax.texts if t.get_text().endswith("closed")]) == 3


def test_gap_closing_names_what_it_lacks():
    from scalestudy.analysis.figures import gap_closing

    runs = make_runs(archs=("transformer", "performer"), sizes=("xxs", "xs", "s"),
                     priors=("random", "spt"), seeds=(0, 1))
    with pytest.raises(output.NotDrawn, match="no finished s4 runs"):
        gap_closing.draw(runs, pd.DataFrame(), "unused", **FIGURES["gap_closing"].params)
    assert not FIGURES["gap_closing"].fed_by(Grid.of(["listops"], ["transformer", "s4"],
                                                     ["xxs"], ["random", "scratch_matched"]))
    assert FIGURES["gap_closing"].fed_by(Grid.of(["listops"], ["transformer", "s4"],
                                                 ["xxs"], ["random", "spt"]))


def _widths_study() -> pd.DataFrame:
    """Runs whose depth grows only with width (2, 2, 4 at widths 16, 32, 64, as the
    CPU ladder does), plus runs that grow depth 2 -> 4 -> 8 at the fixed width 32."""
    runs = make_runs(sizes=("xxs", "xs", "s"), priors=("random",), seeds=(0, 1), noise=0.05)
    runs["depth"] = runs["size"].map({"xxs": 2, "xs": 2, "s": 4})
    runs["width"] = runs["size"].map({"xxs": 16, "xs": 32, "s": 64})
    deep = runs[runs["size"] == "xs"].copy()
    deep = pd.concat([deep.assign(depth=4, seed=deep["seed"] + 10),
                      deep.assign(depth=8, seed=deep["seed"] + 20)])
    deep.loc[deep.index[:1], "train_loss"] += 0.3  # depth 4, seed 10
    return pd.concat([runs, deep], ignore_index=True)


def test_loss_vs_depth_compares_depth_at_a_fixed_width_only(drawn, tmp_path):
    runs = _widths_study()
    only_widths = runs[runs["seed"] < 10]  # one depth per width: nothing to compare
    with pytest.raises(output.NotDrawn, match=r"depth changes only together with width \(e.g. "
                       r"transformer: depth 2 at width 16, 2 at width 32, 4 at width 64\)"):
        loss_vs_depth.draw(only_widths, None, tmp_path)
    runs.loc[(runs["depth"] == 8) & (runs["seed"] == 21), "status"] = "diverged"
    loss_vs_depth.draw(runs, None, tmp_path)
    (ax,) = drawn["loss_vs_depth"].axes
    assert ax.get_label() == "transformer/32/pre"  # widths 16 and 64 have one depth each
    points = _gid(ax, "points:transformer:32:pre:random")
    ok = task_runs(runs).query("width == 32 and status == 'ok'").groupby("depth")["train_loss"]
    np.testing.assert_allclose(points.get_xdata(), [2, 4, 8])
    # Depth 4 is the mean of the width-32 runs only, never with the width-64 ones.
    np.testing.assert_allclose(points.get_ydata(), ok.mean())
    bars = _bars(ax, "points:transformer:32:pre:random")
    np.testing.assert_allclose(bars[:2], ok.std(ddof=1)[[2, 4]])
    assert len(bars) == 2 or np.isnan(bars[2])  # depth 8: one finished run, no bar
    assert [t.get_text() for t in ax.get_xticklabels()] == ["2", "4", "8"]  # no 0 tick
    (cross,) = [ln for ln in ax.lines if ln.get_gid() == "failed:random"]
    assert cross.get_xdata()[0] == 8


def test_workflow_declares_the_figures_its_grid_feeds():
    smk = (ROOT / "workflow/rules/figures.smk").read_text()
    assert "DECLARED = grid_figures(" in smk and "FIGURE_INDEX" in smk
    # One caption template shows each figure's caption, its registry entry's.
    assert "snakemake.params.caption" in (ROOT / "workflow/report/figure.rst").read_text()
    assert all(fig.caption.startswith("**") for fig in FIGURES.values())

    def declared(study):
        config = load_study()
        preset = yaml.safe_load((ROOT / f"config/studies/{study}.yaml").read_text())
        grid = {**config["grid"], **preset.get("grid", {})}
        protocol = {**config["train"], **preset.get("train", {})}["protocol"]
        return set(grid_figures(Grid.of(
            grid["tasks"], grid["archs"], grid["sizes"], grid["priors"], protocol,
            budgeted=bool(grid["budgets"]))))

    every = set(of_runs_and_fits(["listops"]))
    assert declared("workstation") == every - {"loss_vs_depth"}
    every_task = set(of_runs_and_fits(LRA_TASKS))  # the smoke study has every LRA task
    # The smoke study has one architecture: no gap between two.
    assert declared("smoke") == every_task - {"arch_gap", "loss_vs_depth", "gap_closing"}
    assert declared("deep_fixup") == {"error_vs_compute", "accuracy_vs_size_listops"}
    # A study with budgets: the frontier's figures too (and the others' notices).
    frontier = {"frontier_isoflop", "frontier_optimal", "frontier_loss"}
    assert frontier <= declared("frontier") and not frontier & declared("workstation")
    assert {stem: (fig.name, task) for stem, (fig, task) in grid_figures(Grid.of(
        ["listops"], ["transformer"], ["xxs", "xs"], ["random"], "depth")).items()} == {
        "error_vs_compute": ("error_vs_compute", None),
        "loss_vs_depth": ("loss_vs_depth", None),
        "accuracy_vs_size_listops": ("accuracy_vs_size", "listops")}


def test_heldout_table_and_figure_of_a_study_with_four_sizes(drawn, tmp_path):
    runs = make_runs(archs=("transformer", "s4"), priors=("random", "upstream"),
                     alpha_u={"transformer": 0.2, "s4": 0.1}, noise=0.01, seed=1)
    fits = fit_study(runs, n_boot=100, n_boot_saturating=20)
    md = heldout_markdown(fits)
    # One seed: a log-log refit through three sizes keeps one degree of freedom
    # and its interval; the saturating one through three runs interpolates them.
    assert re.search(r"\| transformer \| [+-]\d+\.\d% \[[^]]+\] \| [+-]\d+\.\d% \| m \|", md), md
    saturating = one_fit(fits, "alpha_U", "saturating", arch="transformer")
    assert saturating["heldout_status"] == "ok"
    assert math.isnan(saturating["heldout_rel_error_low"])
    # Two seeds, each from its own upstream run: intervals.
    two = make_runs(archs=("transformer", "s4"), priors=("random", "upstream"), seeds=(0, 1),
                    alpha_u={"transformer": 0.2, "s4": 0.1}, noise=0.01, seed=1,
                    per_seed_upstream=True)
    interval = r"[+-]\d+\.\d% \[[+-]\d+\.\d, [+-]\d+\.\d\]"
    assert re.search(rf"\| transformer \| {interval} \| {interval} \| m \|",
                     heldout_markdown(fit_study(two, n_boot=100, n_boot_saturating=20)))
    assert re.search(r"10 predictions, \d+ of them below the observed value; median", md)
    result = heldout_prediction.draw(runs, fits, tmp_path)
    fig = drawn["heldout_prediction"]
    titles = [ax.get_title() for ax in fig.axes]
    # alpha_U in both forms (the saturating one refitted on three sizes), alpha_D x 2
    # priors, alpha_U,D.
    assert len(titles) == 5
    assert all("held out m: median |error|" in t for t in titles)
    assert result.notes == []
    # One point per architecture in each panel, in its own style, at (observed, predicted).
    ax = _panel(fig, "listops error: αD, random")
    for arch in ("transformer", "s4"):
        row = one_fit(fits, "alpha_D", arch=arch, prior="random")
        point = _gid(ax, f"points:{arch}")
        assert point.get_color() == style.arch_style(arch)["color"]
        assert (point.get_xdata()[0], point.get_ydata()[0]) == pytest.approx(
            (row["heldout_obs"], row["heldout_pred"]))
    # The alpha_D panels of the task share their scale.
    d_axes = [ax for ax in fig.axes if " αD, " in ax.get_label()]
    assert len(d_axes) == 2 and d_axes[0].get_xlim() == d_axes[1].get_xlim()


def test_a_figure_with_nothing_finished_to_plot_is_not_drawn(tmp_path):
    """Every task run failed: the figure would hold only their markers along its
    top edge, so it is not drawn (a notice says why), never an empty figure
    counted as drawn."""
    from scalestudy.analysis.figures.draw import draw_figure

    runs = make_runs()
    on_task = runs["stage"].isin(["scratch", "finetune"])
    runs.loc[on_task, "status"] = "failed"
    fits = fit_study(runs, n_boot=10)
    for name in ("error_vs_compute", "accuracy_vs_size_listops", "loss_vs_depth"):
        entry = draw_figure(name, runs, fits, tmp_path, ["listops"], declared=True)
        assert not entry.drawn and entry.notice, name


def test_shared_log_limits_keep_every_positive_point_beside_a_zero():
    """A panel whose error is 0 somewhere (a task learned perfectly) leaves the
    shared log limits to the positive values: every other point stays in view."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from scalestudy.analysis.figures.layout import same_limits

    fig, (a, b) = plt.subplots(1, 2)
    a.plot([1e8, 1e9, 1e10], [0.9, 0.88, 0.87], "o")
    b.plot([1e9, 2e9, 5e9], [0.0, 0.17, 0.33], "o")
    for ax in (a, b):
        ax.set_xscale("log")
        ax.set_yscale("log")
    same_limits([a, b])
    low, high = b.get_ylim()
    assert 0 < low < 0.17 and high > 0.9 and a.get_ylim() == (low, high)
    plt.close(fig)
