"""The chain of a prediction (analysis/predict/chain.py and what it calls): step 1
on each run's final point and step 2 on every checkpoint, the task loss by its
own law or loss-to-loss, the two links, the irreducible-loss prior, the
calibration by the ladder's own held-out sizes, `--select`, and the statuses
of a target far beyond the ladder. Oracles: synthetic ladders whose surface,
map and sigmoid are known (test_predict.py's surface)."""

import numpy as np
import pandas as pd
import pytest

from scalestudy.analysis.predict.calibration import conformal_quantile, conformal_scale
from scalestudy.analysis.predict.chain import Ladder, Method, Settings, final_points, fit_chain
from scalestudy.analysis.predict.downstream import fit_metric_map, sigmoid
from scalestudy.analysis.predict.loss import PRIOR_SD, fit_loss_law, near, parse_prior
from scalestudy.analysis.predict.loss_map import fit_loss_map
from scalestudy.analysis.predict.select import candidates
from scalestudy.analysis.predict.stage import predict
from scalestudy.cli.parser import run_command

from tests.analysis.predict.test_predict import TARGET, surface, synthetic_ladder

# The task loss of a run: Brandfonbrener et al.'s shifted power law of its
# general loss (K, kappa, E_task), against the general surface's E (1.69).
K, KAPPA, E_TASK, E_GENERAL = 0.8, 1.6, 0.3, 1.69


def task_loss(general):
    return K * (np.asarray(general) - E_GENERAL) ** KAPPA + E_TASK


def accuracy(loss):
    """A sigmoid of the task loss with its asymptote at 1: chance 0.25."""
    return 0.75 / (1 + np.exp(5 * (np.asarray(loss) - 1.0))) + 0.25


def checkpoint_ladder(seed: int = 0, noise: float = 0.0, sizes: int = 5) -> pd.DataFrame:
    """Constant-rate runs of `sizes` sizes at 5-40 tokens per parameter, ten
    checkpoints each; the loss at D tokens is the surface's (times noise), the
    task loss its map, the accuracy the sigmoid of the task loss."""
    rng = np.random.default_rng(seed)
    rows = []
    for i, n in enumerate(np.geomspace(2e7, 3e8, sizes)):
        for m in (5, 10, 20, 40):
            for step, frac in enumerate(np.linspace(0.1, 1.0, 10)):
                d = m * n * frac
                loss = surface(n, d) * np.exp(rng.normal(0, noise))
                rows.append({"run": f"n{i}x{m}", "step": step, "params": n, "tokens": d,
                             "loss": loss, "task": task_loss(loss),
                             "acc": accuracy(task_loss(loss))})
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- the two steps


def test_step_1_reads_each_run_s_final_point_and_step_2_every_checkpoint():
    """A table of checkpoints whose runs' last five evaluations are averaged
    (--final-evals 5): the loss law fits one point a run, at its final tokens,
    its loss the mean of its last five; the sigmoid fits every checkpoint kept."""
    table = checkpoint_ladder(noise=0.004)
    result = predict(table, None, [TARGET], metric="acc", n_boot=0, final_evals=5,
                     n_polish=32, quiet=True)
    fit = result.fit.set_index("law")
    runs = table["run"].nunique()
    assert fit.loc["loss", "n_points"].iloc[0] == runs
    kept = int((table["tokens"] >= 0.25 * table.groupby("run")["tokens"].transform("max")).sum())
    assert fit.loc["metric", "n_points"].iloc[0] == kept == len(result.runs)
    assert result.runs["step1"].sum() == runs  # a run's last row marks its final point
    units = table.assign(_unit=table["run"])
    finals = final_points(units, 5)
    last5 = units.sort_values("tokens").groupby("run").tail(5).groupby("run")["loss"].mean()
    np.testing.assert_allclose(finals.set_index("_unit")["loss"], last5.loc[finals["_unit"]])
    assert (finals.set_index("_unit")["tokens"]
            == units.groupby("run")["tokens"].max().loc[finals["_unit"]]).all()


def test_the_runs_of_step_1_and_step_2_are_drawn_together():
    """A replicate's multiplicity of a run is the same in step 1's one row and
    step 2's checkpoints of it."""
    table = checkpoint_ladder().assign(_unit=lambda t: t["run"])
    ladder = Ladder.of(table, "final", 1, task=False, metric=True)
    from scalestudy.analysis.predict.chain import _row_weights

    finals, points, _ = _row_weights(ladder, 30, np.random.default_rng(0))
    per_run = dict(zip(ladder.finals["_unit"], finals.T, strict=True))
    for i, unit in enumerate(ladder.points["_unit"]):
        np.testing.assert_array_equal(points[:, i], per_run[unit])


# --------------------------------------------------------------------------- the choices


def test_loss_to_loss_recovers_the_map_and_predicts_the_task_loss():
    """The shifted power law recovered from noiseless checkpoints against the
    general law's own E, and the chain's task loss at the target is the map of
    the predicted general loss."""
    table = checkpoint_ladder()
    general = table["loss"].to_numpy()
    fitted = fit_loss_map(general, table["task"], E_GENERAL, np.empty(0), np.empty((0, 0)))
    assert fitted.ok and fitted.r2 > 0.999999
    params = fitted.parameters()
    assert params["K"][0] == pytest.approx(K, rel=1e-4)
    assert params["kappa"][0] == pytest.approx(KAPPA, rel=1e-4)
    assert params["E_task"][0] == pytest.approx(E_TASK, abs=1e-4)
    result = predict(table, None, [TARGET], metric="acc", task_loss="task", n_boot=0,
                     path="loss-to-loss", n_polish=64, quiet=True)
    row = result.predictions.iloc[0]
    assert row["task_loss"] == pytest.approx(float(task_loss(row["loss"])), rel=2e-3)
    assert row["task_loss"] == pytest.approx(float(task_loss(surface(*TARGET))), rel=2e-3)
    assert set(result.fit["law"]) == {"loss", "loss-to-loss", "metric"}


def test_the_direct_path_fits_the_task_loss_its_own_law():
    table = checkpoint_ladder()
    result = predict(table, None, [TARGET], metric="acc", task_loss="task", n_boot=0,
                     path="direct", n_polish=64, quiet=True)
    assert set(result.fit["law"]) == {"loss", "task", "metric"}
    row = result.predictions.iloc[0]
    assert row["task_status"] in ("ok", "poorly determined")
    assert row["task_loss"] == pytest.approx(float(task_loss(surface(*TARGET))), rel=0.02)


@pytest.mark.parametrize("trend", [-1, 1])
def test_the_sigmoid_link_pins_the_asymptote_at_the_metric_s_best_value(trend):
    """An accuracy (falling with the loss) levels at 1 as the loss falls, an error
    (rising) at 0; the fitted-asymptote link levels where the data say."""
    loss = np.linspace(1.0, 3.0, 40)
    best = 0.9 / (1 + np.exp(3 * (loss - 2.0))) + 0.05  # levels at 0.95, chance 0.05
    metric = best if trend < 0 else 1 - best
    pinned = fit_metric_map(loss, metric, np.arange(40), np.empty((0, 40)), link="sigmoid")
    free = fit_metric_map(loss, metric, np.arange(40), np.empty((0, 40)),
                          link="fitted-asymptote")
    low_loss = -50.0
    assert sigmoid(pinned.params, low_loss) == pytest.approx(1.0 if trend < 0 else 0.0,
                                                             abs=1e-9)
    assert sigmoid(free.params, low_loss) == pytest.approx(0.95 if trend < 0 else 0.05,
                                                           abs=1e-3)


def fits(seed: int, **form) -> float:
    table = synthetic_ladder(seed, noise=0.01, n_sizes=3, multiples=(5, 10, 20))
    N, D, L = (table[c].to_numpy() for c in ("params", "tokens", "loss"))
    return fit_loss_law(N, D, L, np.empty((0, len(L))), 0.95, n_polish=64, **form).fit.E


def test_the_irreducible_loss_prior_pulls_a_flat_e_to_its_centre():
    """Three sizes over 1.2 decades, 1% noise: E is poorly determined (free: 1.96
    for a true 1.69 on one ladder, 0 on another). A tight prior at the truth
    holds it there; the default prior (half the lowest loss, a factor of two)
    is weak, and keeps E off zero (measured 1.06); parse_prior reads E0[:SD]."""
    assert abs(np.log(fits(0, form="e-prior", prior=(1.69, 0.01)) / 1.69)) < 0.01
    assert abs(np.log(fits(0) / 1.69)) > 0.1
    assert fits(5) < 1e-6 < 0.5 < fits(5, form="e-prior")
    assert parse_prior("1.69") == (1.69, PRIOR_SD) and parse_prior("") is None
    assert parse_prior("2:0.1") == (2.0, 0.1)
    with pytest.raises(ValueError, match="--e-prior: got '-1'"):
        parse_prior("-1")


def test_select_reports_every_candidate_and_picks_the_lowest_held_out_error(tmp_path):
    """`--select` on a ladder whose task loss is loss-to-loss exactly: every
    candidate's held-out error is reported (selection.csv), the chosen one has
    the lowest, and the prediction uses it."""
    path = tmp_path / "ladder.csv"
    checkpoint_ladder(noise=0.003, sizes=4).to_csv(path, index=False)
    out = tmp_path / "out"
    assert run_command(["predict", str(path), "--at", "1e9:2e10", "--out-dir", str(out),
                        "--metric", "acc", "--task-loss", "task", "--select", "--n-boot", "0",
                        "--n-polish", "16", "--no-figures"]) == 0
    selection = pd.read_csv(out / "selection.csv")
    assert len(selection) == len(candidates(True, True)) == 8
    assert selection["criterion"].notna().all()
    best = selection.loc[selection["criterion"].idxmin()]
    assert selection["chosen"].sum() == 1 and best["chosen"]
    assert pd.read_csv(out / "fit.csv")["method"].iloc[0] == best["method"]


def test_a_ladder_of_three_sizes_keeps_the_defaults_and_says_why():
    table = checkpoint_ladder(sizes=3)
    result = predict(table, None, [TARGET], metric="acc", n_boot=10, select=True,
                     n_polish=16, quiet=True)
    assert result.selection["chosen"].iloc[0] and (
        result.selection["status"] == "3 sizes: nothing to hold out").all()
    assert result.fit["calibration"].iloc[0].startswith("uncalibrated (3 sizes")
    assert result.calibration.empty


# --------------------------------------------------------------------------- calibration


def test_the_conformal_quantiles_and_the_runs_near_a_target():
    """The ceil((n + 1) ci)-th smallest of n scores, the largest where n is too
    few for that rank; the scale never below 1. Near a target in ln(D / N):
    within ln 4 of it, or the 8 nearest."""
    scores = np.arange(1.0, 40.0)  # 39 scores: rank ceil(40 x 0.95) = 38
    assert conformal_quantile(scores, 0.95) == 38.0
    assert conformal_quantile(scores[:10], 0.95) == 10.0
    assert conformal_scale(np.array([0.2, 0.5]), 0.95) == 1.0
    x = np.log(np.r_[np.full(10, 20.0), np.full(10, 0.1), 60.0])
    assert near(x, np.log(20.0)).tolist() == [True] * 10 + [False] * 10 + [True]
    assert near(x, np.log(0.2)).sum() == 10  # a factor of 2 from ten of them
    assert near(x, np.log(1e4)).tolist() == [True] * 10 + [False] * 10 + [True]
    assert near(x[:5], 0.0).all()  # fewer than eight: all


def test_a_size_that_breaks_the_law_widens_the_interval_by_what_the_ladder_shows():
    """Six sizes, the largest two 5% above the surface: the calibration holds out
    each in turn and finds the refit on the rest misses them by more than its
    bootstrap says, so it widens the loss's interval (scale > 1), and the
    widened interval of the holdout's refit holds the held-out runs its
    bootstrap alone missed."""
    table = synthetic_ladder(2, noise=0.005, n_sizes=6, multiples=(5, 10, 20, 40))
    big = table["params"] >= np.sort(table["params"].unique())[-2]
    table.loc[big, "loss"] *= 1.05
    calibrated = predict(table, None, [TARGET], with_holdout=True, n_boot=40, n_polish=32,
                         origins=2, quiet=True)
    plain = predict(table, None, [TARGET], with_holdout=True, n_boot=40, n_polish=32,
                    calibrate=False, quiet=True)
    scale = calibrated.fit["scale"].iloc[0]
    assert scale > 1.5, calibrated.fit["calibration"].iloc[0]
    assert calibrated.calibration["origin"].nunique() == 2
    row, bare = calibrated.predictions.iloc[0], plain.predictions.iloc[0]
    assert row["loss_high"] - row["loss_low"] > 1.5 * (bare["loss_high"] - bare["loss_low"])
    assert plain.holdout["in_interval"].iloc[0] < calibrated.holdout["in_interval"].iloc[0]


def test_the_metric_s_interval_widens_beyond_the_losses_its_sigmoid_saw():
    """A metric whose sigmoid bends beyond the ladder's losses (a second rise the
    ladder cannot see, below loss 2.6): the calibration's held-out sizes show
    the link erring beyond the losses fitted (`link` > 0), and the target's
    interval grows with its distance beyond them."""
    table = checkpoint_ladder(noise=0.002, sizes=6)
    general = table["loss"]
    table["acc"] = 0.3 + 0.2 * np.clip(3.2 - general, 0, None) + 0.5 * np.clip(
        2.9 - general, 0, None) ** 2
    chain_result = predict(table, None, [TARGET, (3e9, 6e10)], metric="acc", n_boot=40,
                           n_polish=32, quiet=True)
    status = chain_result.fit["calibration"].iloc[0]
    slope = float(status.split("link ")[1].split()[0])
    assert slope > 0, status
    rows = chain_result.predictions
    assert (rows["metric_high"] - rows["metric_low"]).is_monotonic_increasing


# --------------------------------------------------------------------------- far beyond


def test_a_target_far_beyond_the_ladder_has_no_interval():
    """Over 1000x the ladder's compute, or a task loss beyond the losses the
    sigmoid was fitted on by more than their span: a point, a status that says
    why, no interval."""
    table = checkpoint_ladder(noise=0.003)
    far = (1e12, 1e14)
    result = predict(table, None, [TARGET, far], metric="acc", n_boot=20, n_polish=16,
                     quiet=True)
    near, beyond = result.predictions.iloc[0], result.predictions.iloc[1]
    assert beyond["status"].startswith("far beyond the ladder")
    assert np.isfinite(beyond["loss"]) and np.isnan(beyond["loss_low"])
    assert np.isnan(beyond["metric_low"]) and beyond["metric_status"].startswith("far beyond")
    assert np.isfinite(near["loss_low"])
    mapping = fit_metric_map(np.linspace(2.0, 3.0, 20), accuracy(np.linspace(2.0, 3.0, 20)),
                             np.arange(20), np.empty((0, 20)))
    assert mapping.note(0.9).startswith("far beyond the ladder: loss 0.9 below the lowest")
    assert mapping.note(1.5).startswith("ok, extrapolated")


def test_the_chain_feeds_each_replicate_to_the_next_step():
    """One replicate's loss feeds the same replicate's map and sigmoid: with the
    noise of one run zero, the metric's draws are exactly the sigmoid replicates
    of the map replicates of the loss replicates, the even replicates the
    method's link's and the odd ones the other link's (the model average)."""
    table = checkpoint_ladder()
    ladder = Ladder.of(table.assign(_unit=table["run"], _task=table["task"],
                                    _metric=table["acc"]), "final", 1, True, True)
    chain = fit_chain(ladder, Method(path="loss-to-loss", link="sigmoid"),
                      Settings(12, 0.95, 16), np.random.default_rng(0))
    assert chain.mapping.link == "sigmoid" and chain.alternative.link == "fitted-asymptote"
    for part in (chain.law, chain.loss_map, chain.mapping, chain.alternative):
        part.noise = np.zeros(1)
    drawn = chain.predict([TARGET[0]], [TARGET[1]], np.random.default_rng(1))
    _, loss_reps = chain.law.mean([TARGET[0]], [TARGET[1]])
    np.testing.assert_allclose(drawn["loss"].raw, loss_reps)
    map_reps = chain.loss_map.replicates
    task = (np.exp(map_reps[:, :1]) * (loss_reps - chain.loss_map.e_replicates[:, None])
            ** map_reps[:, 1:2] + map_reps[:, 2:3])
    np.testing.assert_allclose(drawn["task"].raw, task, rtol=1e-9)
    expected = sigmoid(chain.mapping.replicates, task)
    expected[1::2] = sigmoid(chain.alternative.replicates, task)[1::2]
    np.testing.assert_allclose(drawn["metric"].raw, np.clip(expected, 0, 1))
