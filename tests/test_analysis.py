"""The analysis layer: fits, figures, tables and claim checks on synthetic run
records whose laws (and so whose answers) are known, and the torch-free paths."""

from __future__ import annotations

import itertools
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
import yaml
from figure_checks import check_error_vs_compute_data, check_upstream_loss_data

from scalestudy.analysis import claims, scaling, stats
from scalestudy.analysis.claims import CLAIMS
from scalestudy.analysis.claims.check import HOLDS
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
from scalestudy.analysis.fits import COLUMNS, HELDOUT_COLUMNS, fit_study, select, task_runs
from scalestudy.analysis.tables import (
    TABLE_FILES,
    alpha_markdown,
    heldout_markdown,
    heldout_table,
    lra_markdown,
    lra_table,
    write_tables,
)
from scalestudy.architectures import ARCHITECTURES
from scalestudy.priors import PRIORS
from scalestudy.records import SCHEMA, SCHEMA_VERSION, read_records, write_frame
from scalestudy.study.config import load_study
from scalestudy.tasks import TASKS

ROOT = Path(__file__).resolve().parents[1]

# --------------------------------------------------------------------------- synthetic runs

STAGE = {"random": "scratch", "tfixup": "scratch", "dtfixup": "scratch",
         "scratch_matched": "scratch", "spt": "finetune", "upstream": "finetune"}
PARAMS = {"xxs": 1e5, "xs": 4e5, "s": 1.6e6, "m": 6.4e6, "l": 2.56e7}
DEPTHS = {"xxs": 2, "xs": 4, "s": 8, "m": 16, "l": 32}


def _record(**values) -> dict:
    """A full, valid run record: schema defaults, then `values`."""
    row = {}
    for field in SCHEMA:
        if pa.types.is_string(field.type):
            row[field.name] = ""
        elif pa.types.is_integer(field.type):
            row[field.name] = 0
        else:
            row[field.name] = np.nan
    row.update(schema_version=SCHEMA_VERSION, study="synthetic", status="ok", norm="pre",
               diverged_step=None, error=None, protocol="default", batch_size=32, seq_len=128,
               stopped_by="max_steps")
    row.update(values)
    return row


def make_runs(
    archs=("transformer",), sizes=("xxs", "xs", "s", "m"), priors=("random",),
    tasks=("listops",), seeds=(0,), *, alpha_u=None, e_u=0.0, alpha_d=None, alpha_ud=0.5,
    acc=None, noise=0.0, seed=0, upstream=None, per_seed_upstream=False,
) -> pd.DataFrame:
    """Run records following known laws.

    Upstream runs (one per arch x size, or per arch x size x seed with
    `per_seed_upstream`, each finetuning seed then from its own; written when
    `upstream` or, by default, when the `upstream` prior is in the grid):
    loss = e_u + 10 C^-alpha_u[arch], C = 1000 N.
    Task runs: error = 0.9 x^-alpha_d[(arch, prior)], x = train_flops + pretrain_flops;
    under the `upstream` prior error = 0.5 loss^alpha_ud instead (finetuning compute is a
    tenth of pretraining's, so with e_u = 0 alpha_D = alpha_ud * alpha_U exactly).
    `acc[(arch, prior)]` (a number, or a dict size -> number) sets accuracy outright.
    Multiplicative log-normal `noise` on every loss and error.
    """
    rng = np.random.default_rng(seed)
    alpha_u, alpha_d, acc = alpha_u or {}, alpha_d or {}, acc or {}
    upstream = "upstream" in priors if upstream is None else upstream
    rows = []
    for arch in archs:
        for size in sizes:
            n = PARAMS[size]
            c_up = 1000 * n
            loss = (e_u + 10 * c_up ** -alpha_u.get(arch, 0.1)) * np.exp(rng.normal(0, noise))
            losses = ({s: (e_u + 10 * c_up ** -alpha_u.get(arch, 0.1))
                       * np.exp(rng.normal(0, noise)) for s in seeds}
                      if per_seed_upstream else dict.fromkeys(seeds, loss))
            model = dict(arch=arch, size=size, n_params=int(2 * n), n_params_nonembed=int(n),
                         depth=DEPTHS[size], width=64)
            for s in (seeds if per_seed_upstream else seeds[:1]) if upstream else ():
                rows.append(_record(task="upstream", prior="upstream", stage="upstream",
                                    train_flops=c_up, pretrain_flops=0.0, steps=100,
                                    flops_per_step=c_up / 100, upstream_loss=losses[s],
                                    seed=s if per_seed_upstream else 0, **model))
            for task in tasks:
                for prior in priors:
                    for s in seeds:
                        pre = c_up if prior in ("spt", "upstream") else 0.0
                        train = 0.1 * pre if pre else 100 * n
                        if prior == "upstream":
                            err = 0.5 * losses[s] ** alpha_ud
                        else:
                            err = 0.9 * (train + pre) ** -alpha_d.get((arch, prior), 0.05)
                        a = acc.get((arch, prior))
                        if a is not None:
                            err = 1 - (a[size] if isinstance(a, dict) else a)
                        err = min(err * np.exp(rng.normal(0, noise)), 1.0)
                        rows.append(_record(
                            task=task, prior=prior, stage=STAGE[prior], seed=s,
                            train_flops=train, pretrain_flops=pre, flops_per_step=train / 100,
                            steps=100, test_acc=1 - err, val_acc=1 - err, train_loss=2 * err,
                            upstream_loss=losses[s] if prior == "upstream" else np.nan,
                            pretrain_seed=s if per_seed_upstream else 0,
                            norm="none" if prior in ("tfixup", "dtfixup") else "pre", **model,
                        ))
    return pd.DataFrame(rows)


def _one(fits, metric, form="loglog", **where) -> pd.Series:
    rows = select(fits, metric, form, **where)
    assert len(rows) == 1, rows
    return rows.iloc[0]


# --------------------------------------------------------------------------- fits


def test_fits_recover_known_alphas():
    runs = make_runs(
        archs=("transformer", "performer"), priors=("random", "spt", "upstream"),
        alpha_u={"transformer": 0.2, "performer": 0.08}, alpha_ud=0.6,
        alpha_d={("transformer", "random"): 0.07, ("performer", "random"): 0.03},
        seeds=(0, 1), per_seed_upstream=True,  # two runs per size: an interval to resample
    )
    fits = fit_study(runs, n_boot=200, n_boot_saturating=20)
    assert list(fits.columns) == COLUMNS
    assert set(fits["metric"]) == {"alpha_U", "alpha_D", "alpha_UD", "alpha_D/alpha_U"}
    for arch, a_u in (("transformer", 0.2), ("performer", 0.08)):
        row = _one(fits, "alpha_U", arch=arch)
        assert row["alpha"] == pytest.approx(a_u, rel=1e-6)
        assert row["alpha_low"] == pytest.approx(a_u) and row["r2"] == pytest.approx(1.0)
        assert (row["n_sizes"], row["task"], row["prior"]) == (4, "upstream", "upstream")
        assert _one(fits, "alpha_U", "saturating", arch=arch)["status"] == "ok"
        assert _one(fits, "alpha_UD", arch=arch)["alpha"] == pytest.approx(0.6, rel=1e-6)
        assert _one(fits, "alpha_D", arch=arch, prior="upstream")["alpha"] == pytest.approx(
            0.6 * a_u, rel=1e-6)
        ratio = _one(fits, "alpha_D/alpha_U", arch=arch)
        assert ratio["alpha"] == pytest.approx(0.6, rel=1e-6)
        assert ratio["alpha_low"] == pytest.approx(0.6) and ratio["alpha_high"] == pytest.approx(
            0.6)
    assert _one(fits, "alpha_D", arch="transformer", prior="random")["alpha"] == pytest.approx(
        0.07, rel=1e-6)
    assert _one(fits, "alpha_D", arch="performer", prior="random")["alpha"] == pytest.approx(
        0.03, rel=1e-6)
    # alpha_U,D and the ratio exist only for the upstream prior.
    assert set(select(fits, "alpha_UD")["prior"]) == {"upstream"}


def test_saturating_alpha_u_recovers_offset_and_exponent():
    runs = make_runs(sizes=("xxs", "xs", "s", "m", "l"), priors=("upstream",), e_u=1.5,
                     alpha_u={"transformer": 0.25}, seeds=(0, 1), per_seed_upstream=True)
    fits = fit_study(runs, n_boot=50, n_boot_saturating=20)
    sat = _one(fits, "alpha_U", "saturating", arch="transformer")
    assert sat["alpha"] == pytest.approx(0.25, rel=0.02)
    assert sat["E"] == pytest.approx(1.5, rel=0.02)
    # Noiseless: every replicate is the same refit (to L-BFGS-B's tolerance).
    assert sat["alpha_low"] - 1e-4 <= sat["alpha"] <= sat["alpha_high"] + 1e-4
    # The pure power law misreads the offset as a shallower slope.
    assert _one(fits, "alpha_U", arch="transformer")["alpha"] < 0.2


def test_noisy_fits_cover_the_true_alpha():
    runs = make_runs(sizes=("xxs", "xs", "s", "m", "l"), priors=("random",), seeds=(0, 1, 2),
                     alpha_d={("transformer", "random"): 0.1}, noise=0.03, seed=5)
    row = _one(fit_study(runs, n_boot=500), "alpha_D", prior="random")
    assert row["alpha_low"] < 0.1 < row["alpha_high"]
    assert (row["n_points"], row["n_sizes"], row["n_runs"]) == (15, 5, 15)


def test_too_few_sizes_give_a_status_not_a_number():
    runs = make_runs(sizes=("xxs", "xs"), priors=("random", "upstream"))
    fits = fit_study(runs, n_boot=50)
    assert len(fits) == 1 + 1 + 2 + 2  # alpha_U x2 forms, alpha_D x2 priors, UD, ratio
    for _, row in fits.iterrows():
        assert math.isnan(row["alpha"]) and math.isnan(row["alpha_low"]), row
        assert re.search(r"not enough sizes: 2 < [34]", row["status"]), row
    assert _one(fits, "alpha_U", "saturating")["status"] == "not enough sizes: 2 < 4"
    assert _one(fits, "alpha_D", prior="random")["status"] == "not enough sizes: 2 < 3"
    ratio = _one(fits, "alpha_D/alpha_U")["status"]
    assert ratio == "alpha_U: not enough sizes: 2 < 3; alpha_D: not enough sizes: 2 < 3"
    # Three sizes: the three-parameter saturating form still refuses (it would interpolate).
    three = fit_study(make_runs(sizes=("xxs", "xs", "s"), priors=("upstream",)), n_boot=20)
    assert _one(three, "alpha_U")["status"] == "ok"
    assert _one(three, "alpha_U", "saturating")["status"] == "not enough sizes: 3 < 4"


def test_failed_runs_are_counted_not_fitted():
    runs = make_runs(priors=("random",), alpha_d={("transformer", "random"): 0.07})
    bad = runs.iloc[[0]].assign(status="diverged", test_acc=0.99, seed=9)
    fits = fit_study(pd.concat([runs, bad], ignore_index=True), n_boot=20)
    row = _one(fits, "alpha_D", prior="random")
    assert row["alpha"] == pytest.approx(0.07, rel=1e-6)
    assert (row["n_runs"], row["n_failed"], row["n_points"]) == (5, 1, 4)


def test_x_axis_is_selectable():
    runs = make_runs(priors=("random", "upstream"), alpha_d={("transformer", "random"): 0.07})
    # Three axes that are not proportional: error = c (100 N)^-0.07 against compute;
    # the parameter count recorded as N^2 (so alpha halves) and FLOPs per step as
    # N^0.5 (so alpha doubles).
    n = runs["size"].map(PARAMS)
    runs["n_params_nonembed"] = (n**2).astype("int64")
    runs["flops_per_step"] = 1e3 * n**0.5
    for x_axis, alpha in (("compute", 0.07), ("params", 0.035), ("flops_per_token", 0.14)):
        fits = fit_study(runs, x_axis=x_axis, n_boot=20, n_boot_saturating=0)
        assert _one(fits, "alpha_D", prior="random")["alpha"] == pytest.approx(alpha, rel=1e-6)
        assert set(fits.loc[fits["metric"] != "alpha_UD", "x_axis"]) == {x_axis}
    with pytest.raises(ValueError, match="accepted values: compute, params"):
        fit_study(runs, x_axis="tokens")


@pytest.mark.slow
def test_ratio_interval_coverage():
    """Opt-in (~30 s of CPU). 100 seeded studies, 4 sizes x 3 seeds, 1% noise,
    alpha_U 0.2 and alpha_U,D 0.5, so alpha_D/alpha_U = 0.5. The three seeds of a
    size finetune one shared upstream run, so both fits redraw sizes (2 df) and
    the ratio's replicates are paired through them: the upstream noise of a size
    moves both slopes of a replicate and largely cancels in the ratio. Measured
    (95%): coverage 1.00 with a mean width 2.9 x 2 x 1.96 x the ratio's spread
    over the studies, alpha_D's own interval 0.97: conservative, since the ratio
    rests on the 2 degrees of freedom of four sizes (t_2 = 4.3) although the
    shared noise cancels in it."""
    covered, covered_d, widths, ratios = [], [], [], []
    for rep in range(100):
        runs = make_runs(priors=("upstream",), seeds=(0, 1, 2), alpha_u={"transformer": 0.2},
                         alpha_ud=0.5, noise=0.01, seed=rep)
        fits = fit_study(runs, n_boot=200, n_boot_saturating=0)
        row = _one(fits, "alpha_D/alpha_U")
        covered.append(row["alpha_low"] <= 0.5 <= row["alpha_high"])
        widths.append(row["alpha_high"] - row["alpha_low"])
        ratios.append(row["alpha"])
        d = _one(fits, "alpha_D", prior="upstream")
        covered_d.append(d["alpha_low"] <= 0.1 <= d["alpha_high"])
    assert np.mean(covered) >= 0.94 and np.mean(covered_d) >= 0.94
    assert np.mean(widths) / (2 * 1.96 * np.std(ratios)) < 3.5  # a guard: measured 2.9


# --------------------------------------------------------------------------- held-out


LAWS = [("alpha_U", "loglog"), ("alpha_U", "saturating"), ("alpha_D", "loglog"),
        ("alpha_UD", "loglog")]


def _law_rows(fits) -> pd.DataFrame:
    return fits[fits["metric"] != "alpha_D/alpha_U"]


def test_heldout_prediction_of_laws_that_hold():
    runs = make_runs(sizes=("xxs", "xs", "s", "m", "l"), priors=("random", "upstream"),
                     alpha_u={"transformer": 0.2}, seeds=(0, 1), per_seed_upstream=True)
    fits = fit_study(runs, n_boot=100, n_boot_saturating=10)
    assert set(HELDOUT_COLUMNS) <= set(fits.columns)
    laws = _law_rows(fits)
    assert sorted(zip(laws["metric"], laws["form"], strict=True)) == sorted(
        LAWS + [("alpha_D", "loglog")])  # alpha_D of both priors
    for _, row in laws.iterrows():
        where = (row["metric"], row["form"], row["prior"])
        assert row["heldout_status"] == "ok" and row["heldout_size"] == "l", where
        # Exact laws: exact predictions (the saturating fit to E = 0 to within 1e-3).
        for column in ("heldout_rel_error", "heldout_rel_error_low", "heldout_rel_error_high"):
            assert abs(row[column]) < 1e-3, (where, column)
        assert row["heldout_pred"] == pytest.approx(
            row["heldout_obs"] * (1 + row["heldout_rel_error"])), where
    # The held-out x is the largest size's mean x: its compute (upstream: 1000 N).
    assert _one(fits, "alpha_U")["heldout_x"] == pytest.approx(1000 * PARAMS["l"])
    assert _one(fits, "alpha_UD")["heldout_x"] == pytest.approx(
        runs.loc[(runs["size"] == "l") & (runs["stage"] == "upstream"), "upstream_loss"].iloc[0])
    ratio = _one(fits, "alpha_D/alpha_U")
    assert math.isnan(ratio["heldout_rel_error"])
    assert ratio["heldout_status"] == "not a law: the ratio of two fits"
    # With noise (1%, three seeds): small error, and an interval around 0.
    noisy = make_runs(sizes=("xxs", "xs", "s", "m", "l"), seeds=(0, 1, 2), noise=0.01, seed=1)
    row = _one(fit_study(noisy, n_boot=200), "alpha_D", prior="random")
    assert abs(row["heldout_rel_error"]) < 0.03
    assert row["heldout_rel_error_low"] < 0 < row["heldout_rel_error_high"]


def test_heldout_prediction_catches_a_largest_size_off_the_law():
    runs = make_runs(priors=("random", "upstream"), seeds=(0, 1, 2), noise=0.005, seed=2,
                     per_seed_upstream=True)
    largest = runs["size"] == "m"
    off = largest & (runs["prior"] == "random")
    runs.loc[off, "test_acc"] = 1 - 2 * (1 - runs.loc[off, "test_acc"])  # error doubled
    runs.loc[largest & (runs["stage"] == "upstream"), "upstream_loss"] /= 2  # loss halved
    fits = fit_study(runs, n_boot=200, n_boot_saturating=0)
    worse = _one(fits, "alpha_D", prior="random")  # predicted half the observed error
    assert worse["heldout_rel_error"] == pytest.approx(-0.5, abs=0.02)
    assert worse["heldout_rel_error_high"] < 0
    better = _one(fits, "alpha_U")  # predicted twice the observed loss
    assert better["heldout_rel_error"] == pytest.approx(1.0, abs=0.05)
    assert better["heldout_rel_error_low"] > 0
    # The laws left alone still predict the largest size.
    assert abs(_one(fits, "alpha_D", prior="upstream")["heldout_rel_error"]) < 0.03


def test_heldout_prediction_with_three_sizes_validates_the_loglog_laws_only():
    # A log-log law has two parameters: refitted on two sizes it predicts the third.
    # The saturating form has three, so it is refused and says why.
    runs = make_runs(sizes=("xxs", "xs", "s"), priors=("random", "upstream"),
                     seeds=(0, 1), noise=0.01)
    fits = fit_study(runs, n_boot=200, n_boot_saturating=0)
    laws = _law_rows(fits)
    assert set(laws["heldout_size"]) == {"s"}
    loglog = laws[laws["form"] == "loglog"]
    assert set(loglog["heldout_status"]) == {"ok"}
    for _, row in loglog.iterrows():
        where = (row["metric"], row["prior"])
        assert abs(row["heldout_rel_error"]) < 0.05, where  # the laws hold, 1% noise
        if row["metric"] == "alpha_U" or row["prior"] == "upstream":
            # One upstream run per size (finetuned by both seeds of the upstream
            # prior: the size is the unit): the line through two sizes
            # interpolates them, so there is no interval to give.
            assert math.isnan(row["heldout_rel_error_low"]), where
            assert math.isnan(row["heldout_rel_error_high"]), where
            continue
        assert row["heldout_rel_error_low"] <= row["heldout_rel_error"] <= (
            row["heldout_rel_error_high"]), where
    saturating = _one(fits, "alpha_U", "saturating")
    assert saturating["heldout_status"] == "without s: not enough sizes: 2 < 3"
    for column in HELDOUT_COLUMNS[1:-1]:
        assert math.isnan(saturating[column]), column
    # The tables say why instead of giving a number.
    assert "n/a (without s: not enough sizes: 2 < 3)" in heldout_markdown(fits)
    # Two sizes are the least: with them, no law is refitted.
    two = fit_study(make_runs(sizes=("xxs", "xs"), priors=("random",), seeds=(0, 1)),
                    n_boot=20, n_boot_saturating=0)
    assert set(_law_rows(two)["heldout_status"]) == {"without xs: not enough sizes: 1 < 2"}
    assert heldout_table(two)["heldout_rel_error"].isna().all()


# --------------------------------------------------------------------------- figures


@pytest.fixture(scope="module")
def study():
    """A small multi-architecture study with every prior, two tasks and two seeds."""
    runs = make_runs(
        archs=("transformer", "performer", "s4"), sizes=("xxs", "xs", "s"),
        priors=("random", "spt", "upstream", "scratch_matched"),
        tasks=("listops", "text"), seeds=(0, 1), noise=0.02,
        alpha_u={"transformer": 0.2, "performer": 0.1, "s4": 0.15}, per_seed_upstream=True,
    )
    return runs, fit_study(runs, n_boot=100, n_boot_saturating=0)


def _keep_figures(monkeypatch) -> dict:
    """Make the figures' `save` keep each figure open (by name) instead of writing it."""
    kept = {}

    def keep(fig, out_dir, name, notes=(), title_notes=True):
        kept[name] = fig
        return output.Drawn([Path(out_dir) / f"{name}.png", Path(out_dir) / f"{name}.pdf"],
                           notes)

    for stem in FIGURES:  # each figure module saves through output.save
        monkeypatch.setattr(f"scalestudy.analysis.figures.{stem}.save", keep)
    return kept


@pytest.fixture
def drawn(monkeypatch):
    """The figures the plot functions save, kept open for inspection."""
    yield _keep_figures(monkeypatch)
    plt.close("all")


@pytest.fixture(scope="module")
def rendered(study, tmp_path_factory):
    """Every figure of `study`, drawn once and kept open: (figures by name, the
    FigureIndex plot_all returned, its output directory)."""
    out = tmp_path_factory.mktemp("figures")
    with pytest.MonkeyPatch.context() as mp:
        figures = _keep_figures(mp)
        runs, fits = study
        index = draw.plot_all(runs, fits, out)
    yield figures, index, out
    plt.close("all")


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


def of_runs_and_fits(tasks) -> list[str]:
    """The figures drawn from the runs and fits (every one but the frontier's)."""
    return [stem for stem, (fig, _) in figure_names(tasks).items() if not fig.from_frontier]


def _index_rows(path: Path) -> dict[str, tuple[str, str]]:
    """index.md's table: figure -> (file column, notes column)."""
    rows = {}
    for line in path.read_text().splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 3 and cells[0] not in ("figure", "---"):
            rows[cells[0]] = (cells[1], cells[2])
    return rows


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
    rows = _index_rows(tmp_path / "index.md")
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
        **dict.fromkeys(["frontier_isoflop", "frontier_optimal", "frontier_loss"], NO_FRONTIER),
    }
    assert not any(e.notice for e in out.entries.values())
    rows = _index_rows(tmp_path / "index.md")
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
    file_col, note = _index_rows(tmp_path / "index.md")["upstream_loss_vs_compute"]
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
    rows = _index_rows(tmp_path / "index.md")
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
                assert line.get_color() == want["color"], (name, gid)
                assert line.get_marker() == want["marker"], (name, gid)
                seen.add(name)
    assert seen == set(figures)


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
    row = _one(fits, "alpha_D", task="text", arch="s4", prior="random")
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
        row = _one(fits, "alpha_U", arch=arch)
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
    row = _one(fits, "alpha_UD", task="listops", arch="performer")
    line = _gid(ax, "fit:performer")  # err = coef * loss^alpha_U,D
    np.testing.assert_allclose(line.get_ydata(), row["coef"] * line.get_xdata() ** row["alpha"])
    cell = task_runs(runs).query("task == 'listops' and prior == 'upstream' and "
                                 "arch == 'performer'").groupby("size", sort=False)
    points = _gid(ax, "points:performer")
    np.testing.assert_allclose(points.get_xdata(), cell["upstream_loss"].mean())
    np.testing.assert_allclose(points.get_ydata(), cell["error"].mean())
    np.testing.assert_allclose(_bars(ax, "points:performer"), cell["error"].std(ddof=1))


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
    every_task = set(of_runs_and_fits(TASKS))  # the smoke study has every LRA task
    assert declared("smoke") == every_task - {"arch_gap", "loss_vs_depth"}
    assert declared("deep_fixup") == {"error_vs_compute", "accuracy_vs_size_listops"}
    # A study with budgets: the frontier's figures too (and the others' notices).
    frontier = {"frontier_isoflop", "frontier_optimal", "frontier_loss"}
    assert frontier <= declared("frontier") and not frontier & declared("workstation")
    assert {stem: (fig.name, task) for stem, (fig, task) in grid_figures(Grid.of(
        ["listops"], ["transformer"], ["xxs", "xs"], ["random"], "depth")).items()} == {
        "error_vs_compute": ("error_vs_compute", None),
        "loss_vs_depth": ("loss_vs_depth", None),
        "accuracy_vs_size_listops": ("accuracy_vs_size", "listops")}


# --------------------------------------------------------------------------- tables


def test_tables(study, tmp_path):
    runs, fits = study
    paths = write_tables(runs, fits, tmp_path)
    assert [p.name for p in paths] == list(TABLE_FILES)
    alpha = pd.read_csv(tmp_path / "alpha.csv")
    assert set(alpha["metric"]) == {"alpha_U", "alpha_D", "alpha_UD", "alpha_D/alpha_U"}
    tf = alpha[(alpha["metric"] == "alpha_U") & (alpha["arch"] == "transformer")
               & (alpha["form"] == "loglog")]
    assert tf["alpha"].iloc[0] == pytest.approx(0.2, abs=0.03)
    md = (tmp_path / "alpha.md").read_text()
    assert "## Upstream: alpha_U per architecture" in md
    assert "## Downstream (text): alpha_D per architecture and prior" in md
    # The saturating form refuses three sizes and the table says why.
    assert "n/a (not enough sizes: 3 < 4)" in md

    lra = pd.read_csv(tmp_path / "lra_accuracy.csv")
    assert set(lra["size"]) == {"s"}  # the largest size
    row = lra[(lra["prior"] == "random") & (lra["arch"] == "s4") & (lra["task"] == "text")]
    cell = runs[(runs["prior"] == "random") & (runs["arch"] == "s4") & (runs["task"] == "text")
                & (runs["size"] == "s")]["test_acc"]
    assert row["mean_acc"].iloc[0] == pytest.approx(cell.mean())
    assert row["std_acc"].iloc[0] == pytest.approx(cell.std())
    assert row["n_ok"].iloc[0] == 2
    text = (tmp_path / "lra_accuracy.md").read_text()
    assert "## Prior: spt" in text and "| architecture | listops | text | Avg |" in text

    held = pd.read_csv(tmp_path / "heldout.csv")
    assert set(held["metric"]) == {"alpha_U", "alpha_D", "alpha_UD"}  # the laws, no ratio
    assert len(held) == 3 * (2 + 2 * 4 + 2)  # archs x (alpha_U forms + tasks x (priors + UD))
    # Three sizes: the log-log laws are refitted on two; the saturating form refuses.
    saturating = held["form"] == "saturating"
    assert set(held.loc[saturating, "heldout_status"]) == {"without s: not enough sizes: 2 < 3"}
    assert set(held.loc[~saturating, "heldout_status"]) == {"ok"}
    text = (tmp_path / "heldout.md").read_text()
    assert "## Downstream error (text, alpha_D) per architecture and prior" in text
    row = _one(fits, "alpha_D", task="text", arch="performer", prior="spt")
    cell = (f"{100 * row['heldout_rel_error']:+.1f}% [{100 * row['heldout_rel_error_low']:+.1f}, "
            f"{100 * row['heldout_rel_error_high']:+.1f}]")
    assert re.search(rf"\| performer \|( [^|]+ \|)* {re.escape(cell)} \|", text), text


def test_heldout_table_and_figure_of_a_study_with_four_sizes(drawn, tmp_path):
    runs = make_runs(archs=("transformer", "s4"), priors=("random", "upstream"),
                     alpha_u={"transformer": 0.2, "s4": 0.1}, noise=0.01, seed=1)
    fits = fit_study(runs, n_boot=100, n_boot_saturating=20)
    md = heldout_markdown(fits)
    # One seed: a log-log refit through three sizes keeps one degree of freedom
    # and its interval; the saturating one through three runs interpolates them.
    assert re.search(r"\| transformer \| [+-]\d+\.\d% \[[^]]+\] \| [+-]\d+\.\d% \| m \|", md), md
    saturating = _one(fits, "alpha_U", "saturating", arch="transformer")
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
        row = _one(fits, "alpha_D", arch=arch, prior="random")
        point = _gid(ax, f"points:{arch}")
        assert point.get_color() == style.arch_style(arch)["color"]
        assert (point.get_xdata()[0], point.get_ydata()[0]) == pytest.approx(
            (row["heldout_obs"], row["heldout_pred"]))
    # The alpha_D panels of the task share their scale.
    d_axes = [ax for ax in fig.axes if " αD, " in ax.get_label()]
    assert len(d_axes) == 2 and d_axes[0].get_xlim() == d_axes[1].get_xlim()


def test_lra_table_marks_missing_and_failed_cells():
    runs = make_runs(archs=("transformer", "s4"), tasks=("listops", "text"),
                     acc={("transformer", "random"): 0.5, ("s4", "random"): 0.7})
    runs = runs[~((runs["arch"] == "s4") & (runs["task"] == "text"))].copy()
    runs.loc[(runs["arch"] == "transformer") & (runs["task"] == "text"), "status"] = "failed"
    md = lra_markdown(lra_table(runs))
    assert "| transformer | 50.0 (m) | n/a |  |" in md
    assert "| s4 | 70.0 (m) |  |  |" in md


def test_alpha_markdown_without_upstream_runs():
    fits = fit_study(make_runs(priors=("random",)), n_boot=20)
    md = alpha_markdown(fits)
    assert "No upstream pretraining runs." in md
    assert "No runs finetuned from upstream pretraining." in md


# --------------------------------------------------------------------------- claims


def _verdicts(checks: pd.DataFrame, claim_start: str) -> list[str]:
    return checks.loc[checks["claim"].str.startswith(claim_start), "verdict"].tolist()


def _scaling_study(alpha_u: dict, seeds=(0, 1, 2)) -> pd.DataFrame:
    """Each finetuning seed from its own upstream run (pretrain.seeds: per_seed):
    alpha_U's bootstrap resamples runs within each size, so it needs several."""
    return make_runs(archs=tuple(alpha_u), sizes=("xxs", "xs", "s", "m"), priors=("upstream",),
                     seeds=seeds, alpha_u=alpha_u, noise=0.01, seed=3, per_seed_upstream=True)


def test_claims_vanilla_best_and_performer_albert_poor_hold_and_fail():
    good = _scaling_study({"transformer": 0.3, "performer": 0.1, "albert": 0.05})
    checks = claims.evaluate(good, fit_study(good, n_boot=300, n_boot_saturating=0))
    assert _verdicts(checks, "The vanilla Transformer") == ["holds"]
    assert _verdicts(checks, "Performer and ALBERT") == ["holds"] * 4

    bad = _scaling_study({"transformer": 0.1, "performer": 0.3, "albert": 0.1})
    checks = claims.evaluate(bad, fit_study(bad, n_boot=300, n_boot_saturating=0))
    assert _verdicts(checks, "The vanilla Transformer") == ["does not hold"]
    checks = checks[checks["claim"].str.startswith("Performer and ALBERT")]
    perf = checks[checks["scope"].str.startswith("performer")]
    assert perf["verdict"].tolist() == ["does not hold"] * 2
    assert "performer minus transformer = 0.2" in perf["measurement"].iloc[0]  # reversed
    albert = checks[checks["scope"].str.startswith("albert")]
    assert albert["verdict"].iloc[0] == "undecided"  # the same exponent: not shown either way
    # The claim's alpha_U is the fit stage's: same estimate and interval.
    fits = fit_study(good, n_boot=1000, n_boot_saturating=0)
    row = _one(fits, "alpha_U", arch="transformer")
    text = claims.evaluate(good, fits).set_index("scope").loc["upstream", "measurement"]
    assert f"transformer alpha_U = {row['alpha']:.3f} [{row['alpha_low']:.3f}, " \
           f"{row['alpha_high']:.3f}]" in text


def test_claims_without_enough_data():
    few = _scaling_study({"transformer": 0.3, "performer": 0.1}).query("size != 'm'")
    few = few[few["size"] != "s"]
    checks = claims.evaluate(few, fit_study(few, n_boot=50, n_boot_saturating=0))
    # Two sizes: no exponent; the leaders at the two sizes are still compared.
    judged = checks["claim"].str.startswith("The best architecture")
    assert set(checks.loc[~judged, "verdict"]) == {"not enough data"}
    assert "not enough sizes" in checks["measurement"].iloc[0]
    # No runs at all: every claim still has a row, and says so.
    empty = few.iloc[:0]
    checks = claims.evaluate(empty, fit_study(empty, n_boot=0))
    assert set(checks["verdict"]) == set(checks["claim_verdict"]) == {"not enough data"}
    assert checks["claim"].nunique() == len(CLAIMS)


def _gap_study(tf_spt: float, sizes=("xxs", "xs", "s"), seeds=(0, 1)) -> pd.DataFrame:
    acc = {("s4", "random"): 0.80, ("transformer", "random"): 0.60,
           ("s4", "spt"): 0.82, ("transformer", "spt"): tf_spt,
           ("s4", "scratch_matched"): 0.80, ("transformer", "scratch_matched"): 0.62}
    return make_runs(archs=("transformer", "s4"), sizes=sizes, seeds=seeds,
                     priors=("random", "spt", "scratch_matched"), acc=acc, noise=0.01, seed=4)


def test_claim_spt_closes_the_s4_gap():
    # Under SPT the transformer draws level with S4 (here: overtakes it).
    checks = claims.evaluate(closed := _gap_study(0.83), fit_study(closed, n_boot=0))
    assert _verdicts(checks, "SPT closes") == ["holds"]
    checks = claims.evaluate(open_ := _gap_study(0.62), fit_study(open_, n_boot=0))
    assert _verdicts(checks, "SPT closes") == ["does not hold"]
    # Two sizes and one seed: no interval, so no verdict either way.
    thin = _gap_study(0.83, sizes=("xxs", "xs"), seeds=(0,))
    checks = claims.evaluate(thin, fit_study(thin, n_boot=0))
    assert _verdicts(checks, "SPT closes") == ["not enough data"]


def test_claim_spt_beats_the_compute_matched_control():
    runs = _gap_study(0.83)
    checks = claims.evaluate(runs, fit_study(runs, n_boot=0)).set_index("scope")
    spt = checks[checks["claim"] == "SPT beats the compute-matched control"]["verdict"]
    assert spt["listops / transformer"] == "holds"  # 0.83 against 0.62
    worse = _gap_study(0.5)
    checks = claims.evaluate(worse, fit_study(worse, n_boot=0)).set_index("scope")
    spt = checks[checks["claim"] == "SPT beats the compute-matched control"]["verdict"]
    assert spt["listops / transformer"] == "does not hold"
    # Ahead on the estimate but within the noise: the interval spans 0, undecided.
    near = _gap_study(0.623)
    cell = near[near["arch"] == "transformer"].groupby("prior")["test_acc"].mean()
    assert cell["spt"] > cell["scratch_matched"]
    checks = claims.evaluate(near, fit_study(near, n_boot=0)).set_index("scope")
    spt = checks[checks["claim"] == "SPT beats the compute-matched control"]
    assert spt.loc["listops / transformer", "verdict"] == "undecided"


def test_contrast_interval_coverage_and_false_positive_rate_on_null_data():
    """200 synthetic studies (seeded) in which SPT and its control have the same
    accuracy law (0.7, 5% log-normal noise on the error; 3 sizes x 2 seeds).

    "holds" needs the whole 95% interval above 0: on null data it should say so
    in ~2.5% of studies (measured: 2.5% here); the bound 6% is 3 standard errors
    above 2.5%, and refuses a verdict on the estimate alone (~50%), on a 50%
    interval (~25%) or an 80% one (~10%). Coverage of the true contrast (0):
    measured 0.95. Width: the mean Welch interval (each cell's variance pooled
    over its 3 sizes: 3 degrees of freedom a cell, ~5 for the contrast) against
    2 x 1.96 x the spread of the estimate over the studies, measured 1.28 (its t
    quantile is ~1.3 x 1.96; the spread itself is known to ~5% from 200
    studies); a 99% interval (x1.31: 1.67) or an 80% one (x0.65: 0.83) leaves
    the band."""
    acc = {("transformer", "spt"): 0.7, ("transformer", "scratch_matched"): 0.7}
    holds, covered, widths, estimates = [], [], [], []
    claim = claims.CLAIMS["spt_beats_matched"]
    for rep in range(200):
        runs = make_runs(sizes=("xxs", "xs", "s"), priors=("spt", "scratch_matched"),
                         seeds=(0, 1), acc=acc, noise=0.05, seed=rep)
        study = claims.Study(runs, n_boot=200, ci=0.95, seed=rep)
        (check,) = claim.scopes(study)
        holds.append(check.verdict == HOLDS)
        # "SPT - control = 0.046 [0.039, 0.053] over sizes ...": stats.contrast's numbers.
        estimate, low, high = map(float, re.search(
            r"= (-?[\d.]+) \[(-?[\d.]+), (-?[\d.]+)\]", check.measurement).groups())
        covered.append(low <= 0 <= high)
        widths.append(high - low)
        estimates.append(estimate)
    assert np.mean(holds) <= 0.06
    assert 0.88 <= np.mean(covered) <= 0.99
    assert 0.9 < np.mean(widths) / (2 * 1.96 * np.std(estimates)) < 1.35


def _depth_study(dt_status="ok", std_status="diverged", std_norm="none") -> pd.DataFrame:
    runs = make_runs(priors=("random", "dtfixup"), sizes=("xxs", "xs", "s"), seeds=(0, 1))
    std = runs["prior"] == "random"
    runs.loc[std, "norm"] = std_norm
    deepest = runs["depth"] == runs["depth"].max()
    runs.loc[std & deepest, "status"] = std_status
    runs.loc[~std & deepest, "status"] = dt_status
    return runs


def test_claim_dtfixup_trains_where_the_standard_recipe_fails():
    def verdict(runs):
        return _verdicts(claims.evaluate(runs, fit_study(runs, n_boot=0)), "DT-Fixup")

    assert verdict(_depth_study()) == ["holds"]
    assert verdict(_depth_study(dt_status="diverged")) == ["does not hold"]
    # The standard recipe also trains, and nothing with LayerNorm to compare it with:
    # the premise (it fails) is not shown.
    assert verdict(_depth_study(std_status="ok")) == ["undecided"]
    assert verdict(_depth_study(std_norm="pre")) == ["not enough data"]


def test_claims_markdown_states_source_rule_and_verdicts(study, tmp_path):
    runs, fits = study
    checks = claims.write_claims(runs, fits, tmp_path / "claims.md", n_boot=100)
    text = (tmp_path / "claims.md").read_text()
    assert text.startswith("# Claims checked on study synthetic")
    for claim in checks["claim"].unique():
        assert f"## {claim}" in text
    assert text.count("- Where the paper states it:") == checks["claim"].nunique() == len(CLAIMS)
    assert text.count("- Decision rule:") == len(CLAIMS)
    # Every check's row, with its verdict, under its claim.
    sections = {part.split("\n", 1)[0]: part for part in text.split("\n## ")[1:]}
    for _, row in checks.iterrows():
        line = f"| {row['scope']} | {row['measurement']} | {row['verdict']} |"
        assert line in sections[row["claim"]], line
    # The verdicts the study's laws fix. Upstream: alpha_U 0.2 (transformer) against
    # 0.15 and 0.1, each finetuning seed from its own upstream run; no albert runs;
    # every architecture has the same task law, so SPT closes no gap; SPT's 11x
    # compute lowers its error 11^-0.05 = 11% (about 4 accuracy points) below the
    # control's, 2% noise; no dtfixup runs.
    verdict = {(c, s): v for c, s, v in zip(checks["claim"], checks["scope"], checks["verdict"],
                                            strict=True)}
    assert verdict["The vanilla Transformer scales best upstream (largest alpha_U)",
                   "upstream"] == "holds"
    poorly = "Performer and ALBERT scale worse than the vanilla Transformer"
    assert verdict[poorly, "performer: upstream alpha_U"] == "holds"
    assert {v for (c, s), v in verdict.items() if c == poorly and s.startswith("albert")} == {
        "not enough data"}
    assert _verdicts(checks, "SPT closes") == ["undecided"] * 2  # no gap: premise not shown
    assert _verdicts(checks, "SPT beats the compute-matched control") == ["holds"] * 6
    assert _verdicts(checks, "DT-Fixup") == ["not enough data"]
    summary = text.split("## Summary")[1].split("\n## ")[0]
    assert "| SPT beats the compute-matched control | holds | 6 / 0 / 0 / 0 |" in summary
    assert "| SPT closes most of the Transformer-S4 gap | undecided | 0 / 0 / 2 / 0 |" in summary
    assert "its own pretraining run (pretrain.seeds: per_seed)" in text


# --------------------------------------------------------------------------- torch-free


def _no_torch_env(tmp_path: Path) -> dict:
    """An environment in which importing torch fails loudly."""
    fake = tmp_path / "no_torch" / "torch"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('torch imported by the analysis')\n")
    path = os.pathsep.join([str(fake.parent), os.environ.get("PYTHONPATH", "")])
    return {**os.environ, "PYTHONPATH": path, "OMP_NUM_THREADS": "1"}


def test_analysis_modules_import_without_torch():
    code = ("import sys, scalestudy.study, scalestudy.analysis.fits, scalestudy.analysis.tables, "
            "scalestudy.analysis.figures.draw, scalestudy.analysis.claims, scalestudy.cli, "
            "scalestudy.architectures, scalestudy.priors, scalestudy.stages, scalestudy.tasks; "
            "assert 'torch' not in sys.modules and 'lightning' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_figures_from_cache_regenerates_everything_without_torch(tmp_path):
    cache = tmp_path / "cache" / "mini.parquet"
    cache.parent.mkdir()
    write_frame(make_runs(archs=("transformer", "s4"), sizes=("xxs", "xs", "s"),
                          priors=("random", "spt", "upstream", "scratch_matched")), cache)
    out = tmp_path / "results" / "mini"
    env = _no_torch_env(tmp_path)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    done = subprocess.run(
        ["make", "--no-print-directory", "-C", str(ROOT), "figures-from-cache",
         f"CACHE={cache}", f"OUT={out}"],
        env=env, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    # Every figure of the runs and fits has data, so each is drawn (the runs have
    # no budgets: no frontier).
    rows = _index_rows(out / "figures" / "index.md")
    drawn = [name for name, (file_col, _) in rows.items() if file_col != "not drawn"]
    assert drawn == of_runs_and_fits(["listops"])
    assert not (out / "frontier").exists()
    for name in drawn:
        for ext in ("png", "pdf"):
            assert (out / "figures" / f"{name}.{ext}").stat().st_size > 1000
        assert len(pd.read_csv(out / "figures" / f"{name}.csv")) > 0, name
    # The figures plot the cached runs and the fits made from them.
    runs, fits = read_records(cache), pd.read_parquet(out / "fits.parquet")
    errors = pd.read_csv(out / "figures" / "error_vs_compute.csv")
    for prior in ("random", "spt"):
        check_error_vs_compute_data(errors, runs, fits, "listops", prior, "s4")
    check_upstream_loss_data(pd.read_csv(out / "figures" / "upstream_loss_vs_compute.csv"),
                             runs, fits, "transformer")
    for name in TABLE_FILES:
        assert (out / "tables" / name).stat().st_size > 0
    assert (out / "claims.md").read_text().startswith("# Claims checked on study synthetic")
    assert len(pd.read_parquet(out / "fits.parquet")) > 0
    assert len(read_records(cache)) == 2 * 3 * 5  # archs x sizes x (4 priors + upstream)


def test_figures_from_cache_names_a_missing_cache(tmp_path):
    done = subprocess.run(["make", "--no-print-directory", "-C", str(ROOT),
                           "figures-from-cache", f"CACHE={tmp_path}/nope.parquet",
                           f"OUT={tmp_path}/out"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert re.search(r"nope\.parquet", done.stderr + done.stdout)
    assert not (tmp_path / "out").exists()


# --------------------------------------------------------------------------- cached study


CACHED_STUDIES = ["workstation", "deep_fixup", "converged", "converged_capacity",
                  "capacity_listops", "effects", "frontier"]


def test_every_cached_study_is_named_here():
    assert sorted(p.stem for p in (ROOT / "data" / "cache").glob("*.parquet")) == sorted(
        CACHED_STUDIES)


@pytest.mark.parametrize("study", CACHED_STUDIES)
def test_a_committed_cache_holds_its_whole_preset_grid(study):
    """data/cache/<study>.parquet (what `make figures-from-cache` reads): valid
    records of every cell of config/studies/<study>.yaml, and of every
    pretraining stage those cells used."""
    grid = yaml.safe_load((ROOT / f"config/studies/{study}.yaml").read_text())["grid"]
    runs = read_records(ROOT / "data" / "cache" / f"{study}.parquet")
    assert set(runs["study"]) == {study}
    cells = task_runs(runs)
    budgets = grid.get("budgets") or [None]  # a budgeted grid: every cell at every budget
    expected = set(itertools.product(grid["tasks"], grid["archs"], grid["sizes"],
                                     grid["priors"], grid["seeds"], budgets))
    assert len(cells) == len(expected)
    keys = ["task", "arch", "size", "prior", "seed"]
    got = cells[keys].itertuples(index=False, name=None)
    got_budgets = cells["budget"] if grid.get("budgets") else [None] * len(cells)
    assert {(*cell, b) for cell, b in zip(got, got_budgets, strict=True)} == expected
    stages = {PRIORS[prior].needs for prior in grid["priors"]} - {None}
    assert set(runs["stage"]) - {"scratch", "finetune"} == stages
    for stage in stages:
        pretrained = runs[runs["stage"] == stage]
        assert set(pretrained[["arch", "size"]].itertuples(index=False, name=None)) == set(
            itertools.product(grid["archs"], grid["sizes"]))


def test_the_capacity_limited_cache_scales_downstream_where_a_power_law_fits():
    """The capacity_listops cache (docs/results.md, i): under random init, test
    error falls with training compute for the transformer and lconv, alpha_D's
    interval above 0 (refitted here as the workflow fits it); s4's three sizes
    depart from a power law (lack of fit p = 0.015), so its interval rests on
    the sizes (1 df) and reaches below 0."""
    from scalestudy.analysis.fits import fit_study

    runs = read_records(ROOT / "data" / "cache" / "capacity_listops.parquet")
    fits = fit_study(runs, n_boot=400, seed=0, n_boot_saturating=10)
    down = fits[(fits["metric"] == "alpha_D") & (fits["prior"] == "random")
                & (fits["form"] == "loglog")]
    assert set(down["arch"]) == {"transformer", "lconv", "s4"}
    down = down.set_index("arch")
    assert (down.loc[["transformer", "lconv"], "alpha_low"] > 0).all(), down
    assert down.loc["s4", "lack_of_fit_p"] < 0.05 and down.loc["s4", "interval_unit"] == "size"
    assert down.loc["s4", "alpha_low"] < 0 < down.loc["s4", "alpha"]


def test_the_effects_cache_scales_upstream_and_downstream():
    """The effects cache (docs/results.md, i): under random init test error
    falls with training compute for each of its architectures, and upstream the
    masked-byte loss of the per-seed pretraining for lconv and s4, every
    interval above 0 (refitted here as the workflow fits it). The transformer's
    upstream loss is a plateau then a drop (3.110 / 3.080 / 2.712 nats), which
    the lack-of-fit test rejects as a power law (p < 0.01): its interval rests
    on the three sizes and reaches below 0."""
    from scalestudy.analysis.fits import fit_study

    runs = read_records(ROOT / "data" / "cache" / "effects.parquet")
    fits = fit_study(runs, n_boot=400, seed=0, n_boot_saturating=10)
    loglog = fits[fits["form"] == "loglog"]
    down = loglog[(loglog["metric"] == "alpha_D") & (loglog["prior"] == "random")]
    up = loglog[loglog["metric"] == "alpha_U"]
    for exponents in (down, up):
        assert set(exponents["arch"]) == {"transformer", "lconv", "s4"}
    assert (down["alpha_low"] > 0).all(), down[["arch", "alpha", "alpha_low"]]
    up = up.set_index("arch")
    assert (up.loc[["lconv", "s4"], "alpha_low"] > 0).all(), up
    assert up.loc["transformer", "lack_of_fit_p"] < 0.01
    assert up.loc["transformer", "alpha_low"] < 0


def test_the_converged_cache_trained_every_run_until_its_plateau_or_its_cap():
    preset = yaml.safe_load((ROOT / "config/studies/converged.yaml").read_text())
    runs = read_records(ROOT / "data" / "cache" / "converged.parquet")
    assert (runs["status"] == "ok").all()
    for stage, section in (("scratch", "train"), ("finetune", "train"), ("spt", "pretrain"),
                           ("upstream", "pretrain")):
        schedule, stopped = preset[section], runs[runs["stage"] == stage]
        assert schedule["until"] == "plateau" and len(stopped)
        at_plateau = stopped[stopped["stopped_by"] == "plateau"]
        # Judged from the fifth validation on, at validations only, under the cap.
        assert (at_plateau["steps"] >= 5 * schedule["val_every"]).all()
        assert (at_plateau["steps"] % schedule["val_every"] == 0).all()
        assert (at_plateau["steps"] <= schedule["max_steps"]).all()
        capped = stopped[stopped["stopped_by"] == "max_steps"]
        assert (capped["steps"] == schedule["max_steps"]).all()
        assert (stopped["train_flops"] == stopped["steps"] * stopped["flops_per_step"]).all()


def test_the_annealed_converged_cache_cooled_down_from_each_plateau():
    """The converged_capacity cache (docs/results.md, i): a run that reached its
    plateau (judged at validations, from the fifth on) then decayed its rate
    over decay_fraction x its steps so far, within the cap; a run that did not
    trained to the cap."""
    preset = yaml.safe_load((ROOT / "config/studies/converged_capacity.yaml").read_text())
    runs = read_records(ROOT / "data" / "cache" / "converged_capacity.parquet")
    assert (runs["status"] == "ok").all()
    fraction = preset["train"]["decay_fraction"]
    for stage, section in (("scratch", "train"), ("finetune", "train"), ("upstream", "pretrain")):
        schedule, stopped = preset[section], runs[runs["stage"] == stage]
        assert schedule["until"] == "plateau" and len(stopped)
        cap, every = schedule["max_steps"], schedule["val_every"]
        at_plateau = stopped[stopped["stopped_by"] == "plateau"]
        start = at_plateau["plateau_step"]
        assert ((start >= 5 * every) & (start % every == 0) & (start <= cap)).all()
        cooled = np.minimum(cap, start + np.ceil(fraction * start))
        assert (at_plateau["steps"] == cooled).all()
        before_cap = at_plateau[start < cap]
        assert (before_cap["final_lr"] < 0.01 * before_cap["lr"]).all()
        capped = stopped[stopped["stopped_by"] == "max_steps"]
        assert (capped["steps"] == cap).all() and capped["plateau_step"].isna().all()


def test_the_workstation_cache_has_every_architecture_and_prior_at_four_sizes():
    runs = task_runs(read_records(ROOT / "data" / "cache" / "workstation.parquet"))
    # The 13 architectures of Tay et al. (the S4 ablations are the claims presets').
    assert len(set(runs["arch"])) == 13 and set(runs["arch"]) <= set(ARCHITECTURES)
    # Every prior but the causal ones (a claims preset's: amos_claims).
    assert set(runs["prior"]) == set(PRIORS) - {"random_causal", "spt_causal",
                                                "spt_causal_causal"}
    assert runs["size"].nunique() >= 4  # the saturating fit needs four


def test_the_frontier_cache_gives_s4_all_three_approaches():
    """The frontier cache (docs/results.md, j and k): S4's upstream IsoFLOP
    minima are bracketed at every budget, so approaches 1, 2 and 3 all give its
    exponent a with an interval (approach 2's, on four budgets with t on 2 df,
    reaches below 0); the transformer's lowest losses sit at the edge of its
    sizes at two of its four budgets, so its approach 2 is refused (refitted here
    as the workflow's frontier rule fits it)."""
    from scalestudy.analysis.frontier.stage import study_frontier

    runs = read_records(ROOT / "data" / "cache" / "frontier.parquet")
    result = study_frontier(runs, n_boot=200, quiet=True)
    fits = result.fits.set_index(["method", "arch", "prior"])
    for method in ("approach1", "approach2", "approach3"):
        row = fits.loc[(method, "s4", "upstream")]
        assert row["status"] == "ok" and row["a_low"] <= row["a"] <= row["a_high"], method
    assert set(fits["compute_axis"]) == {"counted"}
    s4 = fits.loc[("approach2", "s4", "upstream")]
    assert s4["n_points"] == 4 and s4["a_low"] < 0 < s4["a"]
    assert fits.loc[("approach2", "transformer", "upstream"), "status"].startswith("not enough")


