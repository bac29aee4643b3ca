"""`--holdout`: the method's error on the user's own ladder, before a prediction
is trusted.

The runs of the largest N (every token count and seed of it) are held out, the
rest refitted exactly as a prediction fits (step 1 and, with a metric, step 2,
their bootstrap included), and the refit predicts each held-out run at its own
N and D. The largest N rather than the largest compute: a prediction is asked
for a bigger model, and the largest compute of a ladder is often one of its
smaller sizes at its longest token count, which the other runs of that size
would still pin down. Reported (one row per group):

- loss_pred / loss_obs: the mean predicted and observed loss of the held-out
  runs, and rel_error = loss_pred / loss_obs - 1 with its percentile interval
  over the refit's bootstrap replicates, each judged on a resample of the
  held-out runs (prediction and observation of the same runs: their noise
  enters, as the held-out seeds' does in scaling.heldout_prediction);
- in_interval: the fraction of held-out runs inside their own prediction
  interval (the interval a prediction would have given them);
- with a metric: metric_pred, metric_obs, metric_error = metric_pred -
  metric_obs (in the metric's units) with its interval.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..stats import percentile_ci
from .downstream import fit_metric_map, replicate_cells, sigmoid
from .loss import fit_loss_law
from .resampling import run_weights

HOLDOUT_COLUMNS = ["held_out_n", "n_runs", "loss_pred", "loss_obs", "rel_error",
                   "rel_error_low", "rel_error_high", "in_interval", "status", "metric_pred",
                   "metric_obs", "metric_error", "metric_error_low", "metric_error_high",
                   "metric_status"]


def holdout(runs: pd.DataFrame, n_boot: int, ci: float, rng: np.random.Generator,
            n_polish: int | None, metric: bool) -> dict:
    """Refit one group's ladder without its largest N and judge the prediction of it."""
    largest = float(runs["params"].max())
    test, train = runs[runs["params"] == largest], runs[runs["params"] < largest]
    row = dict.fromkeys(HOLDOUT_COLUMNS, np.nan)
    row.update(held_out_n=largest, n_runs=len(test), status="", metric_status="")
    N, D, L = (train[c].to_numpy(dtype=float) for c in ("params", "tokens", "loss"))
    weights, _ = run_weights(train["_unit"].to_numpy(), N, n_boot, rng)
    law = fit_loss_law(N, D, L, weights, ci, n_polish=n_polish)
    if not law.ok:
        row["status"] = f"without N = {largest:.4g}: {law.status}"
        return row
    row["status"] = law.status
    Nt, Dt, Lt = (test[c].to_numpy(dtype=float) for c in ("params", "tokens", "loss"))
    point, reps = law.mean(Nt, Dt)
    obs = float(Lt.mean())
    row.update(loss_pred=float(point.mean()), loss_obs=obs,
               rel_error=float(point.mean() / obs - 1))
    if len(reps):
        idx = _held_out_draws(len(Lt), len(reps), rng)
        pred_means = np.take_along_axis(reps, idx, axis=1).mean(axis=1)
        row["rel_error_low"], row["rel_error_high"] = percentile_ci(
            pred_means / Lt[idx].mean(axis=1) - 1, ci)
        runs_pred = law.predictive(Nt, Dt, rng)
        low, high = np.quantile(runs_pred, [(1 - ci) / 2, (1 + ci) / 2], axis=0)
        row["in_interval"] = float(((Lt >= low) & (Lt <= high)).mean())
    if metric:
        row.update(_metric_holdout(train, test, law, weights, point, ci, rng))
    return row


def _metric_holdout(train, test, law, weights, loss_point, ci, rng) -> dict:
    mapping = fit_metric_map(train["loss"], train["_metric"], replicate_cells(train),
                             weights[law.kept])
    observed = test["_metric"].to_numpy(dtype=float)
    have = np.isfinite(observed)
    if not mapping.ok or not have.any():
        why = mapping.status if not mapping.ok else "no held-out run has the metric"
        return {"metric_status": why}
    pred = float(sigmoid(mapping.params, loss_point[have]).mean())
    obs = float(observed[have].mean())
    out = {"metric_pred": pred, "metric_obs": obs, "metric_error": pred - obs,
           "metric_status": mapping.note(float(loss_point[have].min()))}
    if len(law.replicates):
        _, loss_reps = law.mean(*(test[c].to_numpy(dtype=float)[have]
                                  for c in ("params", "tokens")))
        reps = sigmoid(mapping.replicates, loss_reps)
        idx = _held_out_draws(int(have.sum()), len(reps), rng)
        errors = (np.take_along_axis(reps, idx, axis=1).mean(axis=1)
                  - observed[have][idx].mean(axis=1))
        out["metric_error_low"], out["metric_error_high"] = percentile_ci(
            errors[np.isfinite(errors)], ci)
    return out


def _held_out_draws(n: int, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """(n_boot, n) resamples of the held-out runs, each paired with a replicate of
    the refit: the prediction and the observation of the same runs are compared
    (their token counts differ, so an unpaired mean would add their spread)."""
    return rng.integers(0, n, size=(n_boot, n))
