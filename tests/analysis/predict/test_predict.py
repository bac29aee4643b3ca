"""Tests for scalestudy.analysis.predict (`scalestudy predict`): predictions from a
ladder of runs, checked against published numbers and against synthetic ladders
whose truth is known.

Published numbers (tests/data/README.md): Epoch AI's extraction of Hoffmann et
al.'s Figure 4, the 240 points the project's approach-3 test fits
(tests/analysis/test_scaling.py), and Besiroglu et al. 2024's estimates from them: E =
1.817 (95% 1.769-1.871), alpha = 0.348 (0.317-0.373), beta = 0.366
(0.331-0.415), A = 482.01 (s.e. 124.52), B = 2085.43 (s.e. 1293.28).

Synthetic ladders (`synthetic_ladder`): Hoffmann et al.'s surface (E 1.69, A
406.4, alpha 0.34, B 410.7, beta 0.28), 4-6 sizes between 2e7 and 3e8
parameters, each moved off its log-spaced place by up to 0.1 decades, 3-5
token counts per size (5 to 80 tokens per parameter), two seeds each, 1%
log-normal seed noise; the target (1.2e9 parameters, 2.4e10 tokens) is about
8x the ladder's largest compute (4x its largest N).
"""

import json
import math
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from scipy.stats import f as f_dist

from scalestudy.analysis.predict.downstream import fit_metric_map, sigmoid
from scalestudy.analysis.predict.loss import MAX_CONDITION, fit_loss_law
from scalestudy.analysis.predict.resampling import ACROSS_SIZES, WITHIN_SIZES, run_weights
from scalestudy.analysis.predict.result import FIGURE_FILES
from scalestudy.analysis.predict.stage import predict
from scalestudy.cli.parser import run_command

from tests.support import DATA, ROOT

CHINCHILLA_CSV = DATA / "chinchilla/svg_extracted_data.csv"
EPOCH = {"E": 1.817, "A": 482.01, "B": 2085.43, "alpha": 0.348, "beta": 0.366}
EPOCH_SE = {"A": 124.52, "B": 1293.28}
EPOCH_95 = {"E": (1.769, 1.871), "alpha": (0.317, 0.373), "beta": (0.331, 0.415)}

ALPHA, BETA, A, B, E = 0.34, 0.28, 406.4, 410.7, 1.69
TARGET = (1.2e9, 2.4e10)


def surface(N, D):
    return E + A / np.asarray(N, dtype=float) ** ALPHA + B / np.asarray(D, dtype=float) ** BETA


def chinchilla_table() -> pd.DataFrame:
    """The Epoch AI points less the 5 highest losses (as tests/analysis/test_scaling.py)."""
    df = pd.read_csv(CHINCHILLA_CSV).sort_values("loss").iloc[:-5]
    return pd.DataFrame({"params": df["Model Size"], "compute": df["Training FLOP"],
                         "loss": df["loss"]})


def synthetic_ladder(seed: int, noise: float = 0.01, n_sizes: int | None = None,
                     multiples=None) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    k = n_sizes or 4 + seed % 3
    multiples = multiples or (5, 10, 20, 40, 80)[: 3 + (seed // 3) % 3]
    sizes = np.geomspace(2e7, 3e8, k) * 10 ** rng.uniform(-0.1, 0.1, k)
    rows = [(n, m * n, s) for n in sizes for m in multiples for s in range(2)]
    table = pd.DataFrame(rows, columns=["params", "tokens", "seed"])
    table["loss"] = surface(table["params"], table["tokens"]) * np.exp(
        rng.normal(0, noise, len(table)))
    return table


def main(argv) -> int:
    return run_command(["predict", *map(str, argv)])


# --------------------------------------------------------------------------- published


@pytest.fixture(scope="module")
def chinchilla():
    return predict(chinchilla_table(), None, ["70e9:1.4e12"], n_boot=20, compute_axis="6nd",
                   quiet=True)


def test_chinchilla_parameters_match_the_published_fit(chinchilla):
    fit = chinchilla.fit.set_index("parameter")
    assert (fit["status"] == "ok").all() and (fit["n_points"] == 240).all()
    for name in ("E", "alpha", "beta"):
        assert fit.loc[name, "value"] == pytest.approx(EPOCH[name], abs=0.01), name
    for name in ("A", "B"):  # flat directions: within one published standard error
        assert abs(fit.loc[name, "value"] - EPOCH[name]) < EPOCH_SE[name], name
    assert fit["condition_number"].iloc[0] < MAX_CONDITION  # 1.1e3


def test_chinchilla_prediction_at_chinchilla_s_size(chinchilla):
    """L(70e9, 1.4e12) from Epoch's parameters is 1.9729; the prediction is within
    0.005 of it (measured 1.9731), inside its interval."""
    row = chinchilla.predictions.iloc[0]
    epoch = EPOCH["E"] + EPOCH["A"] / 70e9 ** EPOCH["alpha"] + EPOCH["B"] / 1.4e12 ** EPOCH["beta"]
    assert row["loss"] == pytest.approx(epoch, abs=0.005)
    assert row["loss_low"] < epoch < row["loss_high"]
    assert row["loss_fit_low"] <= row["loss"] <= row["loss_fit_high"]
    assert row["compute"] == pytest.approx(6 * 70e9 * 1.4e12)


@pytest.mark.slow
def test_chinchilla_bootstrap_intervals_match_the_published_ones():
    """400 replicates (~5 s): every 95% interval end of E, alpha and beta within
    0.01 of Besiroglu et al.'s (measured: E 1.770-1.870, alpha 0.316-0.374,
    beta 0.329-0.411)."""
    result = predict(chinchilla_table(), None, ["70e9:1.4e12"], n_boot=400, quiet=True)
    fit = result.fit.set_index("parameter")
    for name, (low, high) in EPOCH_95.items():
        assert fit.loc[name, "low"] == pytest.approx(low, abs=0.01), name
        assert fit.loc[name, "high"] == pytest.approx(high, abs=0.01), name


# --------------------------------------------------------------------------- synthetic


def coverage(seeds, n_boot: int, calibrate: bool = True) -> dict:
    """The fraction of synthetic ladders whose prediction interval at TARGET holds
    a new run's loss (the surface times one seed's noise), and holds the surface."""
    new_run = surface_held = 0
    for seed in seeds:
        row = predict(synthetic_ladder(seed), None, [TARGET], n_boot=n_boot, seed=seed,
                      calibrate=calibrate, quiet=True).predictions.iloc[0]
        truth = float(surface(*TARGET))
        observed = truth * math.exp(np.random.default_rng(10_000 + seed).normal(0, 0.01))
        new_run += row["loss_low"] <= observed <= row["loss_high"]
        surface_held += row["loss_low"] <= truth <= row["loss_high"]
    return {"new_run": new_run / len(seeds), "surface": surface_held / len(seeds)}


def test_prediction_interval_covers_on_synthetic_ladders():
    """10 ladders (~10 s): the bootstrap's 95% interval, before the calibration
    widens it (the calibrated interval holds it: the slow test below), holds a
    new run's loss in at least 8 and the surface in at least 9 (measured: 9 and
    10)."""
    measured = coverage(range(10), n_boot=60, calibrate=False)
    assert measured["new_run"] >= 0.8 and measured["surface"] >= 0.9, measured


@pytest.mark.slow
def test_prediction_interval_coverage_over_many_ladders():
    """100 ladders (~4 min on one core): the bootstrap's 95% interval holds at
    least 0.92 of new runs (measured: 0.99 of new runs, 1.00 of the surface).
    The calibrated interval moves each of the same draws away from the
    prediction by a scale of at least 1 (calibration.conformal_scale), so it
    holds whatever they hold; its own coverage on real ladders is
    test_benchmark.py's."""
    measured = coverage(range(100), n_boot=200, calibrate=False)
    assert measured["new_run"] >= 0.92, measured


def test_holdout_recovers_the_held_out_size_on_a_noiseless_ladder():
    result = predict(synthetic_ladder(0, noise=0.0, n_sizes=5, multiples=(5, 10, 20, 40)),
                     None, [TARGET], with_holdout=True, n_boot=20, quiet=True)
    h = result.holdout.iloc[0]
    assert h["status"] == "ok" and h["n_runs"] == 8
    assert abs(h["rel_error"]) < 0.01, h
    assert h["held_out_n"] == result.runs["params"].max()


def test_holdout_refits_without_the_size_it_holds_out():
    """A noiseless ladder whose largest size breaks the law (its losses 1.3 x the
    surface's): a refit on the other sizes alone finds the surface, so it predicts
    the held-out runs at the surface and misses their loss by 1/1.3 - 1 (a refit
    that kept them would be pulled towards them), none inside its interval."""
    table = synthetic_ladder(0, noise=0.0, n_sizes=5, multiples=(5, 10, 20, 40))
    largest = table["params"].max()
    held = table["params"] == largest
    table.loc[held, "loss"] *= 1.3
    result = predict(table, None, [TARGET], with_holdout=True, n_boot=10, n_polish=32,
                     quiet=True)
    h = result.holdout.iloc[0]
    assert h["status"] == "ok" and h["n_runs"] == held.sum() == 8
    expected = float(surface(table.loc[held, "params"], table.loc[held, "tokens"]).mean())
    assert h["loss_pred"] == pytest.approx(expected, rel=1e-4)
    assert h["loss_obs"] == pytest.approx(1.3 * expected, rel=1e-9)
    assert h["rel_error"] == pytest.approx(1 / 1.3 - 1, abs=1e-4)
    assert h["rel_error_low"] <= h["rel_error_high"] < -0.2
    assert h["in_interval"] == 0


def test_a_noiseless_ladder_gives_the_surface_back():
    result = predict(synthetic_ladder(1, noise=0.0, n_sizes=5, multiples=(5, 10, 20, 40)),
                     None, [TARGET], n_boot=0, quiet=True)
    row = result.predictions.iloc[0]
    assert row["loss"] == pytest.approx(surface(*TARGET), rel=1e-3)
    assert np.isnan(row["loss_low"])  # n_boot = 0: no interval


# --------------------------------------------------------------------------- determination


def test_condition_number_separates_determined_from_confounded_ladders():
    """The calibration behind MAX_CONDITION (loss.py): a ladder of 4 token counts
    a size is well below it; one token count a size is far above, and says why."""
    good = synthetic_ladder(2, n_sizes=5, multiples=(5, 10, 20, 40))
    law = fit_loss_law(good["params"], good["tokens"], good["loss"], np.empty((0, len(good))),
                       0.95)
    assert law.condition < MAX_CONDITION / 5 and law.status == "ok"
    one = synthetic_ladder(2, n_sizes=5, multiples=(20,))
    result = predict(one, None, [TARGET], n_boot=10, quiet=True)
    fit = result.fit.iloc[0]
    assert fit["status"] == "poorly determined"
    assert "confounded" in fit["warnings"] and "condition number" in fit["warnings"]
    assert result.predictions["status"].iloc[0] == "poorly determined"


def test_a_ladder_too_small_is_refused_with_its_reason():
    small = synthetic_ladder(0, n_sizes=2)
    result = predict(small, None, [TARGET], n_boot=5, quiet=True)
    assert result.fit["status"].iloc[0].startswith("no fit: L(N, D) needs >= 3 sizes")
    assert result.predictions[["loss", "loss_low"]].isna().all().all()


def test_a_run_s_noise_is_scaled_for_the_five_parameters_fitted():
    """Ten runs (3 sizes x 3 token counts and one more): a run's noise is the fit's
    log residuals (recomputed here from its parameters) times sqrt(10 / (10 - 5)),
    and a predicted run is a replicate's surface times e^(one of them)."""
    table = synthetic_ladder(5, noise=0.02, n_sizes=3, multiples=(5, 20, 80)).iloc[::2]
    extra = synthetic_ladder(6, noise=0.02, n_sizes=3, multiples=(10,)).iloc[:1]
    table = pd.concat([table, extra], ignore_index=True)
    N, D, L = (table[c].to_numpy() for c in ("params", "tokens", "loss"))
    assert len(L) == 10
    weights, _ = run_weights(np.arange(10).astype(str), N, 20, np.random.default_rng(0))
    law = fit_loss_law(N, D, L, weights, 0.95, n_polish=32)
    p = {name: value for name, (value, _) in law.parameters().items()}
    residuals = np.log(L) - np.log(p["E"] + p["A"] / N ** p["alpha"] + p["B"] / D ** p["beta"])
    assert np.abs(residuals).max() > 0.005  # noise to scale
    np.testing.assert_allclose(law.noise, residuals * np.sqrt(10 / 5), rtol=1e-6, atol=1e-12)
    _, reps = law.mean(N[:2], D[:2])
    drawn = np.log(law.predictive(N[:2], D[:2], np.random.default_rng(1)) / reps)
    gaps = np.abs(drawn.ravel()[:, None] - law.noise[None, :]).min(axis=1)
    assert gaps.max() < 1e-9


def test_sizes_of_one_run_each_are_resampled_together_keeping_three_sizes():
    """Four runs of three checkpoints, each run its own size: a replicate redraws
    the runs across sizes (a run's checkpoints together), and one with fewer than
    3 sizes is redrawn. Oracle: four draws from four runs with 3 or more distinct
    have 4 distinct in 24 of the 168 ways (4! of 4^4, and 4 x 6 x 3! ways of
    exactly 3)."""
    units = np.repeat(["r0", "r1", "r2", "r3"], 3)
    sizes = np.repeat([1e7, 2e7, 4e7, 8e7], 3)
    weights, how = run_weights(units, sizes, 4000, np.random.default_rng(0))
    assert how == ACROSS_SIZES and weights.shape == (4000, 12)
    per_run = weights.reshape(4000, 4, 3)
    assert (per_run == per_run[:, :, :1]).all()  # a run's checkpoints drawn together
    per_run = per_run[:, :, 0]
    assert (per_run.sum(axis=1) == 4).all()
    distinct = (per_run > 0).sum(axis=1)
    assert distinct.min() >= 3
    assert (distinct == 4).mean() == pytest.approx(24 / 168, abs=0.02)
    np.testing.assert_allclose(per_run.mean(axis=0), 1.0, atol=0.05)
    # Two runs a size: each replicate redraws every size's runs from its own.
    _, how = run_weights(np.arange(8).astype(str), np.repeat([1e7, 2e7, 4e7, 8e7], 2), 5,
                         np.random.default_rng(0))
    assert how == WITHIN_SIZES


# --------------------------------------------------------------------------- downstream


def accuracy(loss):
    """A sigmoid in the loss: chance 0.25, rising to 0.9 as the loss falls."""
    return 0.65 / (1 + np.exp(6 * (np.asarray(loss) - 2.9))) + 0.25


def test_metric_is_chained_to_the_loss_with_its_interval():
    table = synthetic_ladder(3, n_sizes=5, multiples=(5, 10, 20, 40))
    rng = np.random.default_rng(3)
    table["acc"] = accuracy(table["loss"]) + rng.normal(0, 0.005, len(table))
    result = predict(table, None, [TARGET], metric="acc", n_boot=60, quiet=True)
    row = result.predictions.iloc[0]
    truth = float(accuracy(surface(*TARGET)))
    assert row["metric_name"] == "acc" and row["metric_status"].startswith("ok")
    assert row["metric_low"] <= truth <= row["metric_high"], (row, truth)
    assert 0 <= row["metric_low"] <= row["metric_high"] <= 1
    mapping = result.fit[result.fit["law"] == "metric"].set_index("parameter")
    assert list(mapping.index) == ["a", "k", "L0", "b"]
    assert mapping.loc["k", "value"] < 0  # an accuracy falls as the loss rises
    assert mapping["n_boot_used"].iloc[0] == 60


def test_a_metric_that_does_not_follow_the_loss_is_not_extrapolated():
    table = synthetic_ladder(4, n_sizes=5, multiples=(5, 10, 20, 40))
    table["acc"] = 0.25 + np.random.default_rng(4).normal(0, 0.01, len(table))  # chance
    result = predict(table, None, [TARGET], metric="acc", n_boot=10, quiet=True)
    row = result.predictions.iloc[0]
    assert row["metric_status"].startswith("no fit: the metric does not follow the loss")
    assert np.isnan(row["metric"]) and np.isnan(row["metric_low"])


@pytest.mark.parametrize("seed, accepted", [(11, True), (37, False)])
def test_the_signal_test_is_the_f_test_of_the_sigmoid_against_a_constant(seed, accepted):
    """Eight runs whose metric barely follows the loss, p near 0.05 on either side.
    Oracle: F = ((SS0 - SS1) / 3) / (SS1 / (8 - 4)) on (3, 4) degrees of freedom
    (three parameters beyond the constant), SS1 from the fitted sigmoid's residuals
    recomputed here; where refused, from its R^2 (F = (R^2 / 3) / ((1 - R^2) / 4))."""
    loss = np.linspace(2.0, 3.0, 8)
    metric = 0.5 - 0.03 * (loss - 2.5) + np.random.default_rng(seed).normal(0, 0.02, 8)
    mapping = fit_metric_map(loss, metric, np.arange(8), np.empty((0, 8)))
    ss0 = float(((metric - metric.mean()) ** 2).sum())
    if accepted:
        a, k, l0, b = mapping.params
        ss1 = float(((metric - (a / (1 + np.exp(-k * (loss - l0))) + b)) ** 2).sum())
        assert mapping.r2 == pytest.approx(1 - ss1 / ss0, rel=1e-9)
    else:
        ss1 = (1 - mapping.r2) * ss0
    p = f_dist.sf(((ss0 - ss1) / 3) / (ss1 / 4), 3, 4)
    assert 0.03 < p < 0.1 and (p <= 0.05) == accepted
    assert mapping.signal_p == pytest.approx(p, rel=1e-9)
    assert mapping.ok == accepted
    assert mapping.status.startswith("ok" if accepted else
                                     "no fit: the metric does not follow the loss")


def test_lack_of_fit_is_reported_where_seeds_repeat_runs():
    """A metric that rises and falls again in the loss (no sigmoid), measured on two
    seeds per run with little noise: the pure-error F test rejects the sigmoid."""
    loss = np.repeat(np.linspace(2.0, 3.0, 12), 2)
    metric = 0.5 + 0.3 * np.sin(4 * loss) + np.random.default_rng(5).normal(0, 0.002, 24)
    cells = np.repeat(np.arange(12), 2)
    mapping = fit_metric_map(loss, metric, cells, np.empty((0, 24)))
    assert mapping.status.startswith("no fit: lack of fit") and not mapping.ok
    assert mapping.lack_of_fit_p < 0.01


def test_the_metric_s_interval_carries_a_run_s_loss_noise():
    """Loss noise of 3% a run and a metric that follows the loss within 0.002:
    the metric of one run at the target is the sigmoid of that run's loss, so its
    interval is the sigmoid of the loss's prediction interval (the percentiles of a
    monotone map), far wider than the sigmoid of the surface's interval alone."""
    table = synthetic_ladder(1, noise=0.03, n_sizes=5, multiples=(5, 10, 20, 40))
    table["acc"] = (0.6 / (1 + np.exp(8 * (table["loss"] - 3.5))) + 0.3
                    + np.random.default_rng(1).normal(0, 0.002, len(table)))
    result = predict(table, None, [(1e8, 2e9)], metric="acc", n_boot=100, n_polish=32,
                     seed=1, quiet=True)
    row = result.predictions.iloc[0]
    assert row["metric_status"].startswith("ok")
    params = result.fit[result.fit["law"] == "metric"].set_index("parameter").loc[
        ["a", "k", "L0", "b"], "value"].to_numpy()
    low, high = sigmoid(params, row["loss_high"]), sigmoid(params, row["loss_low"])
    surface_only = sigmoid(params, row["loss_fit_low"]) - sigmoid(params, row["loss_fit_high"])
    assert high - low > 2.5 * surface_only  # the design: a run's noise dominates
    assert row["metric_low"] == pytest.approx(low, abs=0.05 * (high - low))
    assert row["metric_high"] == pytest.approx(high, abs=0.05 * (high - low))


# --------------------------------------------------------------------------- checkpoints, axes


def test_checkpoints_fit_after_the_cut_of_early_points(capsys):
    """Each run's curve as checkpoints (constant-rate runs: the loss at D tokens is
    the surface's, so step 1 may fit every checkpoint); the points before
    --min-fraction of a run's tokens, made wrong on purpose, are cut, and the fit
    gives the surface back."""
    rows = []
    for r, n in enumerate(np.geomspace(2e7, 3e8, 5)):
        for step, frac in enumerate(np.linspace(0.05, 1.0, 20)):
            d = 40 * n * frac
            loss = surface(n, d) * (1.5 if frac < 0.25 else 1.0)
            rows.append({"run": f"r{r}", "step": step, "params": n, "tokens": d, "loss": loss})
    result = predict(pd.DataFrame(rows), None, [TARGET], n_boot=10, min_fraction=0.25,
                     step1_points="checkpoints")
    assert "20 checkpoint(s): before 0.25" in capsys.readouterr().err
    assert result.excluded.values.tolist() == [
        ["20 checkpoint(s)", "before 0.25 of their run's final tokens (--min-fraction)"]]
    assert result.predictions["loss"].iloc[0] == pytest.approx(surface(*TARGET), rel=1e-3)
    assert result.fit["resampling"].iloc[0] == "runs across sizes"  # one run a size
    assert set(result.runs["step"]) == set(range(4, 20))


def test_the_compute_axis_is_named_and_used_everywhere():
    """Counted FLOPs that cost 2 x 6ND at every size: the counted axis puts the
    target at 12 N D, the 6ND axis at 6 N D; every table names its axis."""
    table = synthetic_ladder(0, n_sizes=4, multiples=(5, 10, 20))
    table["compute"] = 12 * table["params"] * table["tokens"]
    for axis, factor in (("counted", 12), ("6nd", 6)):
        result = predict(table, None, [TARGET], compute_axis=axis, n_boot=0, quiet=True)
        assert result.predictions["compute"].iloc[0] == pytest.approx(factor * np.prod(TARGET))
        for frame in (result.predictions, result.fit, result.runs):
            assert (frame["compute_axis"] == axis).all()


# --------------------------------------------------------------------------- the command


def test_the_command_writes_every_file(tmp_path, capsys):
    table = synthetic_ladder(0, n_sizes=4, multiples=(5, 10, 20))
    table["acc"] = accuracy(table["loss"])
    path = tmp_path / "ladder.csv"
    table.to_csv(path, index=False)
    out = tmp_path / "out"
    assert main([path, "--at", "1e9:2e10", "3e9:6e10", "--out-dir", out, "--metric", "acc",
                 "--holdout", "--n-boot", "8", "--n-polish", "32"]) == 0
    printed = capsys.readouterr().out
    assert "holdout N" in printed and "wrote" in printed
    files = {"predictions.csv", "fit.csv", "runs.csv", "holdout.csv", "excluded.csv",
             "calibration.csv", "predict.json", *FIGURE_FILES}
    assert set(os.listdir(out)) == files
    predictions = pd.read_csv(out / "predictions.csv")
    assert len(predictions) == 2 and {"loss_low", "loss_high", "metric"} <= set(predictions)
    assert sorted(os.listdir(tmp_path)) == ["ladder.csv", "out"]  # nothing staged left
    # Run again into its own directory: replaced whole.
    assert main([path, "--at", "1e9:2e10", "--out-dir", out, "--n-boot", "0",
                 "--no-figures"]) == 0
    assert set(os.listdir(out)) == {"predictions.csv", "fit.csv", "runs.csv", "excluded.csv",
                                    "calibration.csv", "predict.json"}
    assert json.loads((out / "predict.json").read_text())["input"] == str(path)


@pytest.mark.parametrize("args, message", [
    (["--at", "1e9"], "--at: got '1e9'; accepted: N:D"),
    (["--at", "1e9:x"], "--at: got '1e9:x'"),
    (["--at", "1e9:2e10", "--ci", "1.5"], "--ci: got 1.5; accepted: a level strictly"),
    (["--at", "1e9:2e10", "--metric", "acc"], "no column 'acc' (--metric)"),
    (["--at", "1e9:2e10", "--metric", "loss"], "must be an accuracy or error in [0, 1]"),
])
def test_bad_arguments_raise_one_clear_error_and_write_nothing(tmp_path, capsys, args, message):
    path = tmp_path / "ladder.csv"
    synthetic_ladder(0, n_sizes=4, multiples=(5, 10, 20)).to_csv(path, index=False)
    assert main([path, "--out-dir", tmp_path / "out", *args]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1, err
    assert sorted(os.listdir(tmp_path)) == ["ladder.csv"]


def test_missing_columns_name_the_column_and_the_accepted_ones(tmp_path, capsys):
    path = tmp_path / "ladder.csv"
    synthetic_ladder(0).drop(columns=["tokens"]).to_csv(path, index=False)
    assert main([path, "--at", "1e9:2e10", "--out-dir", tmp_path / "out"]) == 2
    err = capsys.readouterr().err
    assert "missing column 'tokens' (or 'compute')" in err and "accepted columns" in err
    records = tmp_path / "runs.parquet"
    synthetic_ladder(0).rename(columns={"params": "n_params_nonembed"}).to_parquet(records)
    assert main([records, "--at", "1e9:2e10", "--out-dir", tmp_path / "out"]) == 2
    assert "use --from-runs" in capsys.readouterr().err


def test_a_directory_that_is_not_a_prediction_s_is_never_replaced(tmp_path):
    study = tmp_path / "results"
    study.mkdir()
    (study / "runs.parquet").write_text("a study's runs\n")
    path = tmp_path / "ladder.csv"
    synthetic_ladder(0, n_sizes=4, multiples=(5, 10, 20)).to_csv(path, index=False)
    assert main([path, "--at", "1e9:2e10", "--out-dir", study, "--n-boot", "0"]) == 2
    assert os.listdir(study) == ["runs.parquet"]


def test_a_cached_study_is_read_as_its_finished_runs():
    result = predict(ROOT / "data/cache/frontier.parquet", None, ["2e6:2e6"],
                     from_runs=True, metric="test_acc", n_boot=0, n_polish=32, quiet=True)
    assert result.by == ("arch", "prior")
    assert len(result.predictions) == 6  # 3 architectures x (upstream, upstream (listops))
    on_task = result.predictions[result.predictions["prior"].str.endswith("(listops)")]
    assert on_task["metric"].notna().all()


def drawn_figure(result, out_dir, monkeypatch):
    """The prediction's figure as `draw` makes it, before it is saved (and closed)."""
    from scalestudy.analysis.predict import figure

    kept = []
    monkeypatch.setattr(figure, "save", lambda fig, *args: kept.append(fig))
    figure.draw(result, out_dir)
    return kept[0]


@pytest.mark.parametrize("groups, metric", [(1, None), (2, "acc")])
def test_the_figure_s_title_and_legends_lie_inside_it(tmp_path, monkeypatch, groups, metric):
    """Drawn, every title and legend lies within the figure (the legend below
    the panels takes as many columns as fit: one on a one-panel figure); the
    figure's title is one line and each panel's two at most."""
    import matplotlib.pyplot as plt

    table = pd.concat([synthetic_ladder(seed, n_sizes=4, multiples=(5, 10, 20)).assign(
        arch=f"arch{seed}") for seed in range(groups)], ignore_index=True)
    table["acc"] = accuracy(table["loss"])
    result = predict(table, None, ["1e9:2e10", "3e9:6e10"], metric=metric, with_holdout=True,
                     n_boot=8, n_polish=32, quiet=True)
    fig = drawn_figure(result, tmp_path, monkeypatch)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    titles = [ax.title for ax in fig.axes if ax.get_title()]
    legends = [*fig.legends, *(ax.get_legend() for ax in fig.axes if ax.get_legend())]
    assert len(titles) == groups * (2 if metric else 1) and len(legends) == 1 + groups
    for artist in [fig._suptitle, *titles, *legends]:
        box = artist.get_window_extent(renderer)
        assert fig.bbox.x0 <= box.x0 and box.x1 <= fig.bbox.x1, artist
        assert fig.bbox.y0 <= box.y0 and box.y1 <= fig.bbox.y1, artist
    assert "\n" not in fig._suptitle.get_text()
    assert all(title.get_text().count("\n") <= 1 for title in titles)
    # What the figure's title left out, the legend below says.
    (below,) = fig.legends
    labels = [t.get_text() for t in below.get_texts()]
    assert "band: the fit's 95% bootstrap interval" in labels
    assert "target; bar: one run's 95% prediction interval" in labels
    # The holdout heads each loss panel's legend: the error and what "in" counts.
    held_out = result.holdout.iloc[0]
    head = fig.axes[0].get_legend().get_title().get_text()
    assert head.startswith(f"held out N {held_out['held_out_n']:.3g}: ")
    assert f"of {held_out['n_runs']} runs in their 95% prediction interval" in head
    assert fig.axes[0].get_title().endswith(f"fit: {held_out['status']}")
    plt.close(fig)


def test_the_holdout_says_what_its_share_counts_and_whose_status_it_is():
    """The console's holdout line: the refit's status named as the refit's, the
    runs inside their prediction intervals counted, never a bare percentage
    beside a status ("0% ... (ok)")."""
    result = predict(synthetic_ladder(0, noise=0.0, n_sizes=5, multiples=(5, 10, 20, 40)),
                     None, [TARGET], with_holdout=True, n_boot=8, n_polish=32, quiet=True)
    h = result.holdout.iloc[0]
    (line,) = [line for line in result.summary() if "holdout" in line]
    inside = round(h["in_interval"] * h["n_runs"])
    assert line.startswith(f"  holdout N {h['held_out_n']:.4g} (refit without it: ok): "
                           "relative error ")
    assert line.endswith(f"; {inside} of 8 held-out runs inside their 95% prediction "
                         "intervals")
    assert "% of its runs" not in line
    # No bootstrap: no intervals to count.
    bare = predict(synthetic_ladder(0, noise=0.0, n_sizes=5, multiples=(5, 10, 20, 40)),
                   None, [TARGET], with_holdout=True, n_boot=0, n_polish=32, quiet=True)
    (line,) = [line for line in bare.summary() if "holdout" in line]
    assert "inside" not in line and "nan" not in line


def test_the_prediction_imports_neither_torch_nor_matplotlib():
    """matplotlib only when the figure is drawn (tests/test_layout.py checks torch)."""
    code = ("import sys, scalestudy.analysis.predict.stage, scalestudy.cli; "
            "bad = {'torch', 'lightning', 'matplotlib'} & set(sys.modules); assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)
