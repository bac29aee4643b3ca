"""`--holdout`: the method's error on the user's own ladder, before a prediction
is trusted.

The runs of the largest N (every token count and seed of it) are held out, the
rest refitted exactly as a prediction fits (fitting.fit_group: the method or
its selection, step 1 and, with a metric, step 2, their bootstrap and the
calibration by the rest's own largest sizes), and the refit predicts each
held-out run at its own N and D. The largest N rather than the largest compute:
a prediction is asked for a bigger model, and the largest compute of a ladder
is often one of its smaller sizes at its longest token count, which the other
runs of that size would still pin down. Reported (one row per group):

- loss_pred / loss_obs: the mean predicted and observed loss of the held-out
  runs, and rel_error = loss_pred / loss_obs - 1 with its percentile interval
  over the refit's bootstrap replicates, each judged on a resample of the
  held-out runs (prediction and observation of the same runs: their noise
  enters, as the held-out seeds' does in scaling.heldout_prediction);
- in_interval: the fraction of held-out runs inside their own prediction
  interval (the interval a prediction would have given them), and width, those
  intervals' mean width relative to the prediction;
- scale: the refit's calibration scale of the loss (calibration.py), method:
  the refit's method;
- with a task loss: task_pred, task_obs, task_error (relative), task_in_interval;
- with a metric: metric_pred, metric_obs, metric_error = metric_pred -
  metric_obs (in the metric's units) with its interval, metric_in_interval and
  metric_width (in the metric's units).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..stats import percentile_ci
from .chain import Ladder, Settings
from .fitting import Fitted, fit_group

HOLDOUT_COLUMNS = ["held_out_n", "n_runs", "method", "scale", "loss_pred", "loss_obs",
                   "rel_error", "rel_error_low", "rel_error_high", "in_interval", "width",
                   "status", "task_pred", "task_obs", "task_error", "task_in_interval",
                   "metric_pred", "metric_obs", "metric_error", "metric_error_low",
                   "metric_error_high", "metric_in_interval", "metric_width", "metric_status"]
COLUMNS = {"loss": "loss", "task": "_task", "metric": "_metric"}


def judged(fitted: Fitted, held: pd.DataFrame, ci: float, rng: np.random.Generator,
           ) -> tuple[pd.DataFrame, dict]:
    """Each held-out run's prediction of every quantity the chain has: its point,
    interval and observation (columns <quantity>_pred, _low, _high, _obs), and
    each quantity's draws (for the error's interval)."""
    drawn = fitted.chain.predict(held["params"], held["tokens"], rng)
    table = held[["params", "tokens"]].reset_index(drop=True).copy()
    for quantity, d in drawn.items():
        if d is None or COLUMNS[quantity] not in held:
            continue
        table[f"{quantity}_obs"] = held[COLUMNS[quantity]].to_numpy(dtype=float)
        table[f"{quantity}_pred"] = d.point
        low = high = np.full(len(held), np.nan)
        if d.raw.size:
            finite = np.where(np.isfinite(d.raw), d.raw, np.nan)
            low, high = np.nanquantile(finite, [(1 - ci) / 2, (1 + ci) / 2], axis=0)
        table[f"{quantity}_low"], table[f"{quantity}_high"] = low, high
    return table, drawn


def holdout(ladder: Ladder, settings: Settings, rng: np.random.Generator) -> dict:
    """Refit one group's ladder without its largest N and judge the prediction of it."""
    largest = float(ladder.sizes().max())
    train, held = ladder.below(largest), ladder.at(largest)
    row = dict.fromkeys(HOLDOUT_COLUMNS, np.nan)
    row.update(held_out_n=largest, n_runs=len(held), status="", metric_status="", method="")
    fitted = fit_group(train, settings, rng)
    chain = fitted.chain
    row["method"] = chain.method.label(ladder.task, ladder.metric)
    if not chain.law.ok:
        row["status"] = f"without N = {largest:.4g}: {chain.law.status}"
        return row
    row["status"] = chain.law.status
    row["scale"] = fitted.calibration.scales["loss"]
    table, drawn = judged(fitted, held, settings.ci, rng)
    obs, pred = table["loss_obs"].to_numpy(), table["loss_pred"].to_numpy()
    row.update(loss_pred=float(pred.mean()), loss_obs=float(obs.mean()),
               rel_error=float(pred.mean() / obs.mean() - 1))
    _, reps = chain.law.mean(held["params"], held["tokens"])
    if len(reps):
        idx = _held_out_draws(len(obs), len(reps), rng)
        pred_means = np.take_along_axis(reps, idx, axis=1).mean(axis=1)
        row["rel_error_low"], row["rel_error_high"] = percentile_ci(
            pred_means / obs[idx].mean(axis=1) - 1, settings.ci)
        row.update(_coverage(table, "loss", relative=True))
    if "task_pred" in table:
        row["task_pred"], row["task_obs"] = table["task_pred"].mean(), table["task_obs"].mean()
        row["task_error"] = row["task_pred"] / row["task_obs"] - 1
        row["task_in_interval"] = _coverage(table, "task", True).get("in_interval", np.nan)
    if ladder.metric:
        row.update(_metric_row(chain, table, drawn, held, settings.ci, rng))
    return row


def _coverage(table: pd.DataFrame, quantity: str, relative: bool) -> dict:
    """The share of runs inside their interval and the intervals' mean width."""
    low, high = table[f"{quantity}_low"], table[f"{quantity}_high"]
    if not np.isfinite(low).any():
        return {}
    obs = table[f"{quantity}_obs"]
    width = (high - low) / (table[f"{quantity}_pred"] if relative else 1.0)
    return {"in_interval": float(((obs >= low) & (obs <= high)).mean()),
            "width": float(width.mean())}


def _metric_row(chain, table, drawn, held, ci, rng) -> dict:
    mapping = chain.mapping
    if mapping is None or not mapping.ok or "metric_pred" not in table:
        return {"metric_status": mapping.status if mapping is not None else "no metric"}
    have = np.isfinite(table["metric_obs"].to_numpy())
    if not have.any():
        return {"metric_status": "no held-out run has the metric"}
    feed = drawn["task"] if drawn["task"] is not None else drawn["loss"]
    pred = table["metric_pred"].to_numpy()[have]
    observed = table["metric_obs"].to_numpy()[have]
    out = {"metric_pred": float(pred.mean()), "metric_obs": float(observed.mean()),
           "metric_error": float(pred.mean() - observed.mean()),
           "metric_status": mapping.note(float(feed.point[have].min()))}
    reps = drawn["metric"].raw
    if reps.size:
        idx = _held_out_draws(int(have.sum()), len(reps), rng)
        errors = (np.take_along_axis(reps[:, have], idx, axis=1).mean(axis=1)
                  - observed[idx].mean(axis=1))
        out["metric_error_low"], out["metric_error_high"] = percentile_ci(
            errors[np.isfinite(errors)], ci)
        cov = _coverage(table[have], "metric", relative=False)
        out["metric_in_interval"], out["metric_width"] = cov["in_interval"], cov["width"]
    return out


def _held_out_draws(n: int, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """(n_boot, n) resamples of the held-out runs, each paired with a replicate of
    the refit: the prediction and the observation of the same runs are compared
    (their token counts differ, so an unpaired mean would add their spread)."""
    return rng.integers(0, n, size=(n_boot, n))
