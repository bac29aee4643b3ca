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

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
import yaml

from scalestudy import claims, plots
from scalestudy.fits import COLUMNS, HELDOUT_COLUMNS, fit_study, select, task_runs
from scalestudy.names import ARCHITECTURES, PRIORS
from scalestudy.priors import needs_pretraining
from scalestudy.records import SCHEMA, SCHEMA_VERSION, read_records, write_frame
from scalestudy.tables import (
    TABLE_FILES,
    alpha_markdown,
    heldout_markdown,
    heldout_table,
    lra_markdown,
    lra_table,
    write_tables,
)

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
               diverged_step=None, error=None, protocol="default", batch_size=32, seq_len=128)
    row.update(values)
    return row


def make_runs(
    archs=("transformer",), sizes=("xxs", "xs", "s", "m"), priors=("random",),
    tasks=("listops",), seeds=(0,), *, alpha_u=None, e_u=0.0, alpha_d=None, alpha_ud=0.5,
    acc=None, noise=0.0, seed=0, upstream=None,
) -> pd.DataFrame:
    """Run records following known laws.

    Upstream runs (one per arch x size; written when `upstream` or, by default, when the
    `upstream` prior is in the grid): loss = e_u + 10 C^-alpha_u[arch], C = 1000 N.
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
            model = dict(arch=arch, size=size, n_params=int(2 * n), n_params_nonembed=int(n),
                         depth=DEPTHS[size], width=64)
            if upstream:
                rows.append(_record(task="upstream", prior="upstream", stage="upstream",
                                    train_flops=c_up, pretrain_flops=0.0, steps=100,
                                    flops_per_step=c_up / 100, upstream_loss=loss, **model))
            for task in tasks:
                for prior in priors:
                    for s in seeds:
                        pre = c_up if prior in ("spt", "upstream") else 0.0
                        train = 0.1 * pre if pre else 100 * n
                        if prior == "upstream":
                            err = 0.5 * loss ** alpha_ud
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
                            upstream_loss=loss if prior == "upstream" else np.nan,
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
                     alpha_u={"transformer": 0.25})
    fits = fit_study(runs, n_boot=50, n_boot_saturating=20)
    sat = _one(fits, "alpha_U", "saturating", arch="transformer")
    assert sat["alpha"] == pytest.approx(0.25, rel=0.02)
    assert sat["E"] == pytest.approx(1.5, rel=0.02)
    assert sat["alpha_low"] <= sat["alpha"] <= sat["alpha_high"]
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
    for x_axis in ("params", "flops_per_token"):
        fits = fit_study(runs, x_axis=x_axis, n_boot=20)
        # Compute, parameters and FLOPs per token are all proportional here.
        assert _one(fits, "alpha_D", prior="random")["alpha"] == pytest.approx(0.07, rel=1e-6)
        assert set(fits.loc[fits["metric"] != "alpha_UD", "x_axis"]) == {x_axis}
    with pytest.raises(ValueError, match="accepted values: compute, params"):
        fit_study(runs, x_axis="tokens")


# --------------------------------------------------------------------------- held-out


LAWS = [("alpha_U", "loglog"), ("alpha_U", "saturating"), ("alpha_D", "loglog"),
        ("alpha_UD", "loglog")]


def _law_rows(fits) -> pd.DataFrame:
    return fits[fits["metric"] != "alpha_D/alpha_U"]


def test_heldout_prediction_of_laws_that_hold():
    runs = make_runs(sizes=("xxs", "xs", "s", "m", "l"), priors=("random", "upstream"),
                     alpha_u={"transformer": 0.2})
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
    runs = make_runs(priors=("random", "upstream"), seeds=(0, 1, 2), noise=0.005, seed=2)
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


def test_heldout_prediction_with_three_sizes_is_refused_with_the_reason():
    runs = make_runs(sizes=("xxs", "xs", "s"), priors=("random", "upstream"), noise=0.01)
    fits = fit_study(runs, n_boot=50, n_boot_saturating=0)
    for _, row in fits.iterrows():
        for column in HELDOUT_COLUMNS[1:-1]:
            assert math.isnan(row[column]), (row["metric"], column)
    laws = _law_rows(fits)
    assert set(laws["heldout_size"]) == {"s"}
    assert set(laws.loc[laws["form"] == "loglog", "heldout_status"]) == {
        "without s: not enough sizes: 2 < 3"}
    assert _one(fits, "alpha_U", "saturating")["heldout_status"] == (
        "without s: not enough sizes: 2 < 4")
    # The tables say why instead of giving a number.
    assert "n/a (without s: not enough sizes: 2 < 3)" in heldout_markdown(fits)
    assert heldout_table(fits)["heldout_rel_error"].isna().all()


# --------------------------------------------------------------------------- figures


@pytest.fixture(scope="module")
def study():
    """A small multi-architecture study with every prior, two tasks and two seeds."""
    runs = make_runs(
        archs=("transformer", "performer", "s4"), sizes=("xxs", "xs", "s"),
        priors=("random", "spt", "upstream", "scratch_matched"),
        tasks=("listops", "text"), seeds=(0, 1), noise=0.02,
        alpha_u={"transformer": 0.2, "performer": 0.1, "s4": 0.15},
    )
    return runs, fit_study(runs, n_boot=100, n_boot_saturating=0)


def test_every_figure_is_written_as_png_and_pdf(study, tmp_path):
    runs, fits = study
    paths = plots.plot_all(runs, fits, tmp_path)
    names = plots.figure_names(["listops", "text"])
    assert sorted(paths) == sorted(tmp_path / f"{n}.{e}" for n in names for e in ("png", "pdf"))
    for path in paths:
        assert path.stat().st_size > 1000, path
    assert (tmp_path / "accuracy_vs_size_text.png").exists()


@pytest.fixture
def drawn(monkeypatch):
    """The figures the plot functions save, kept open for inspection."""
    figures = {}

    def keep(fig, out_dir, name):
        figures[name] = fig
        return [Path(out_dir) / f"{name}.png"]

    monkeypatch.setattr(plots, "save", keep)
    yield figures
    plots.plt.close("all")


def _texts(fig) -> list[str]:
    return [t.get_text() for ax in fig.axes if ax.get_visible() for t in ax.texts]


def test_panels_without_data_say_so(drawn, tmp_path):
    # Only the transformer from random init: nothing upstream, no spt, no control, no
    # second architecture; and every tfixup run failed.
    runs = make_runs(priors=("random", "tfixup"))
    runs.loc[runs["prior"] == "tfixup", "status"] = "failed"
    fits = fit_study(runs, n_boot=20)
    plots.plot_all(runs, fits, tmp_path)
    assert "no finished upstream pretraining runs" in _texts(drawn["upstream_loss_vs_compute"])
    assert plots.NO_DATA in _texts(drawn["error_vs_compute"])  # the tfixup panel
    assert any("no runs finetuned" in t or "no finished runs finetuned" in t
               for t in _texts(drawn["downstream_vs_upstream"]))
    assert any("no spt and scratch_matched" in t for t in _texts(drawn["spt_vs_matched"]))
    assert any("needs the transformer and another" in t for t in _texts(drawn["arch_gap"]))
    # alpha_U has no fits at all; the downstream panel has its two rows.
    assert "no fits for this panel" in _texts(drawn["alpha_per_arch"])
    # A panel with data has no such text.
    err_axes = [ax for ax in drawn["error_vs_compute"].axes if ax.get_visible()]
    random_ax = next(ax for ax in err_axes if ax.get_title().endswith("/ random"))
    assert not random_ax.texts and random_ax.lines


def test_empty_records_draw_every_figure_with_a_message(drawn, tmp_path):
    runs = make_runs().iloc[:0]
    fits = fit_study(runs, n_boot=0)
    plots.plot_all(runs, fits, tmp_path, tasks=["listops"])
    assert set(drawn) == set(plots.figure_names(["listops"]))
    for name, fig in drawn.items():
        assert _texts(fig), name


def test_architecture_keeps_its_colour_across_figures(drawn, study, tmp_path):
    runs, fits = study
    plots.plot_all(runs, fits, tmp_path)
    colour = plots.arch_style("performer")["color"]
    for name in ("upstream_loss_vs_compute", "error_vs_compute", "downstream_vs_upstream"):
        lines = [ln for ax in drawn[name].axes for ln in ax.lines
                 if ln.get_label().startswith("performer")]
        assert lines and all(ln.get_color() == colour for ln in lines), name


def test_figure_list_matches_the_workflow_rule():
    smk = (ROOT / "workflow/rules/figures.smk").read_text()
    for name in (*plots.FIGURES, *plots.PER_TASK_FIGURES):
        assert f'"{name}"' in smk, name
        assert (ROOT / f"workflow/report/{name}.rst").is_file(), name


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
    assert set(held["heldout_status"]) == {"without s: not enough sizes: 2 < 3",
                                           "without s: not enough sizes: 2 < 4"}
    text = (tmp_path / "heldout.md").read_text()
    assert "## Downstream error (text, alpha_D) per architecture and prior" in text
    assert "| performer | n/a (without s: not enough sizes: 2 < 3) |" in text


def test_heldout_table_and_figure_of_a_study_with_four_sizes(drawn, tmp_path):
    runs = make_runs(archs=("transformer", "s4"), priors=("random", "upstream"),
                     alpha_u={"transformer": 0.2, "s4": 0.1}, noise=0.01, seed=1)
    fits = fit_study(runs, n_boot=100, n_boot_saturating=0)
    md = heldout_markdown(fits)
    assert re.search(r"\| transformer \| [+-]\d+\.\d% \[[+-]\d+\.\d, [+-]\d+\.\d\] \| n/a "
                     r"\(without m: not enough sizes: 3 < 4\) \| m \|", md), md
    assert re.search(r"8 predictions, \d of them below the observed value; median", md)
    plots.plot_heldout_prediction(runs, fits, tmp_path)
    fig = drawn["heldout_prediction"]
    titles = [ax.get_title() for ax in fig.axes if ax.get_visible()]
    assert len(titles) == 5  # alpha_U x 2 forms, alpha_D x 2 priors, alpha_U,D
    assert any("held out m: median |error|" in t for t in titles)
    assert any("without m: not enough sizes: 3 < 4" in t for t in _texts(fig))
    # One point per architecture in each panel with predictions, on its own colour.
    ax = next(ax for ax in fig.axes if ax.get_title().startswith("listops error: αD, random"))
    points = {ln.get_label(): ln.get_color() for ln in ax.lines
              if ln.get_label() in ("transformer", "s4")}
    assert points == {a: plots.arch_style(a)["color"] for a in ("transformer", "s4")}


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
    return make_runs(archs=tuple(alpha_u), sizes=("xxs", "xs", "s", "m"), priors=("upstream",),
                     seeds=seeds, alpha_u=alpha_u, noise=0.01, seed=3)


def test_claims_vanilla_best_and_performer_albert_poor_hold_and_fail():
    good = _scaling_study({"transformer": 0.3, "performer": 0.1, "albert": 0.05})
    checks = claims.evaluate(good, fit_study(good, n_boot=300, n_boot_saturating=0))
    assert _verdicts(checks, "The vanilla Transformer") == ["holds"]
    assert _verdicts(checks, "Performer and ALBERT") == ["holds"] * 4

    bad = _scaling_study({"transformer": 0.1, "performer": 0.3, "albert": 0.1})
    checks = claims.evaluate(bad, fit_study(bad, n_boot=300, n_boot_saturating=0))
    assert _verdicts(checks, "The vanilla Transformer") == ["does not hold"]
    perf = checks[checks["scope"].str.startswith("performer")]
    assert perf["verdict"].tolist() == ["does not hold"] * 2
    assert "above" in perf["measurement"].iloc[0]  # reversed, not just overlapping
    albert = checks[checks["scope"].str.startswith("albert")]
    assert "overlap" in albert["measurement"].iloc[0]
    assert albert["verdict"].iloc[0] == "does not hold"


def test_claims_without_enough_data():
    few = _scaling_study({"transformer": 0.3, "performer": 0.1}).query("size != 'm'")
    few = few[few["size"] != "s"]
    checks = claims.evaluate(few, fit_study(few, n_boot=50, n_boot_saturating=0))
    assert set(checks["verdict"]) == {"not enough data"}
    assert "not enough sizes" in checks["measurement"].iloc[0]
    # No runs at all: every claim still has a row, and says so.
    empty = few.iloc[:0]
    checks = claims.evaluate(empty, fit_study(empty, n_boot=0))
    assert set(checks["verdict"]) == {"not enough data"}
    assert checks["claim"].nunique() == 5


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
    # The standard recipe also trains: accuracy decides (equal here: does not hold).
    assert verdict(_depth_study(std_status="ok")) == ["does not hold"]
    assert verdict(_depth_study(std_norm="pre")) == ["not enough data"]


def test_claims_markdown_states_source_rule_and_verdicts(study, tmp_path):
    runs, fits = study
    checks = claims.write_claims(runs, fits, tmp_path / "claims.md", n_boot=100)
    text = (tmp_path / "claims.md").read_text()
    assert text.startswith("# Claims checked on study synthetic")
    for claim in checks["claim"].unique():
        assert f"## {claim}" in text
    assert text.count("- Where the paper states it:") == checks["claim"].nunique() == 5
    assert text.count("- Decision rule:") == 5
    assert set(checks["verdict"]) <= {"holds", "does not hold", "not enough data"}


# --------------------------------------------------------------------------- torch-free


def _no_torch_env(tmp_path: Path) -> dict:
    """An environment in which importing torch fails loudly."""
    fake = tmp_path / "no_torch" / "torch"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('torch imported by the analysis')\n")
    path = os.pathsep.join([str(fake.parent), os.environ.get("PYTHONPATH", "")])
    return {**os.environ, "PYTHONPATH": path, "OMP_NUM_THREADS": "1"}


def test_analysis_modules_import_without_torch():
    code = ("import sys, scalestudy.fits, scalestudy.plots, scalestudy.tables, scalestudy.cli, "
            "scalestudy.claims; "
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
    for name in plots.figure_names(["listops"]):
        for ext in ("png", "pdf"):
            assert (out / "figures" / f"{name}.{ext}").stat().st_size > 1000
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


CACHED_STUDIES = ["workstation", "deep_fixup"]


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
    expected = set(itertools.product(grid["tasks"], grid["archs"], grid["sizes"],
                                     grid["priors"], grid["seeds"]))
    assert len(cells) == len(expected)
    keys = ["task", "arch", "size", "prior", "seed"]
    assert set(cells[keys].itertuples(index=False, name=None)) == expected
    stages = {needs_pretraining(prior) for prior in grid["priors"]} - {None}
    assert set(runs["stage"]) - {"scratch", "finetune"} == stages
    for stage in stages:
        pretrained = runs[runs["stage"] == stage]
        assert set(pretrained[["arch", "size"]].itertuples(index=False, name=None)) == set(
            itertools.product(grid["archs"], grid["sizes"]))


def test_the_workstation_cache_has_every_architecture_and_prior_at_four_sizes():
    runs = task_runs(read_records(ROOT / "data" / "cache" / "workstation.parquet"))
    assert set(runs["arch"]) == set(ARCHITECTURES)
    # random_noln (the Fixup priors' control) is newer than this cache.
    assert set(runs["prior"]) == set(PRIORS) - {"random_noln"}
    assert runs["size"].nunique() >= 4  # the saturating fit needs four
