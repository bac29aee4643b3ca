"""What a prediction computed (`PredictionResult`) and the files it is written
as, in one directory the stage replaces whole (`FILES`, with the figure's
`FIGURE_FILES`):

- `predictions.csv`: one row per group and target: the group columns, n, d
  (the target's N and D), compute_axis and compute (its FLOPs on that axis:
  6 N D, or D times the FLOPs a token costs at N as the table counts them,
  inputs.TokenCost), n_ratio and compute_ratio (how far beyond the ladder's
  largest N and largest compute), loss (the fitted surface at the target),
  loss_low, loss_high (the prediction interval of one run's loss at level ci),
  loss_fit_low, loss_fit_high (the interval of the surface alone), ci, status
  (the loss fit's: "ok", "poorly determined", or why there is none; a target
  "far beyond the ladder" has no interval); with a task loss: task_loss_name,
  task_loss, task_loss_low, task_loss_high, task_status; with a metric:
  metric_name, metric, metric_low, metric_high, metric_status. Every interval
  is one run's, calibrated (calibration.py) unless --no-calibrate.
- `fit.csv`: one row per group, law ("loss"; "task", the task loss's own law,
  or "loss-to-loss", its map from the loss; "metric", the downstream mapping)
  and parameter (E, A, alpha, B, beta; K, kappa, E_task; a, k, L0, b): value,
  low, high (percentile interval of the bootstrap refits at ci), then per fit:
  method (the chain's form, path and link), scale (its quantity's calibration
  scale), calibration (the calibration's status), status,
  warnings (why it is poorly determined), n_points, n_sizes, n_boot,
  n_boot_used, ci, resampling (what the bootstrap redraws), compute_axis,
  condition_number (loss law), residual_sd (the loss law's log residuals; the
  mapping's residuals in the metric's units), r2, signal_p and lack_of_fit_p
  (the mapping's checks, downstream.py).
- `runs.csv`: the runs fitted: group columns, run and step (checkpoints), seed,
  params, tokens, compute_axis, compute, loss, fitted (the law's loss there),
  residual (ln loss - ln fitted), step1 (whether the loss laws fitted the row: a
  run's last checkpoint where they read final points); with a task loss, it and
  its fitted value; with a metric, the metric and its fitted value.
- `holdout.csv` (with `--holdout`): one row per group, holdout.HOLDOUT_COLUMNS.
- `selection.csv` (with `--select`): one row per group and candidate method,
  select.SELECTION_COLUMNS: its held-out errors and whether it was chosen.
- `calibration.csv`: one row per group, held-out run and quantity the
  calibration scored (calibration.CALIBRATION_COLUMNS); empty without one.
- `excluded.csv`: what the input held that was not fitted (left_out: rows,
  checkpoints or runs; reason), one row per set; empty when nothing was.
- `predict.json`: the input (its path, or "table"), the settings (group
  columns, targets, ci, n_boot, seed, compute axis, metric, holdout,
  min_fraction) and the figure's loss label.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

AXIS_LABELS = {"counted": "counted FLOPs", "6nd": "6 N D FLOPs"}
PREDICTION_COLUMNS = ["n", "d", "compute_axis", "compute", "n_ratio", "compute_ratio", "loss",
                      "loss_low", "loss_high", "loss_fit_low", "loss_fit_high", "ci", "status"]
METRIC_COLUMNS = ["metric_name", "metric", "metric_low", "metric_high", "metric_status"]
TASK_COLUMNS = ["task_loss_name", "task_loss", "task_loss_low", "task_loss_high", "task_status"]
FIT_COLUMNS = ["law", "parameter", "value", "low", "high", "method", "scale", "calibration",
               "status", "warnings", "n_points",
               "n_sizes", "n_boot", "n_boot_used", "ci", "resampling", "compute_axis",
               "condition_number", "residual_sd", "r2", "signal_p", "lack_of_fit_p"]
RUN_COLUMNS = ["params", "tokens", "compute_axis", "compute", "loss", "fitted", "residual"]

EXCLUDED_COLUMNS = ["left_out", "reason"]

TABLES = {"predictions.csv": "predictions", "fit.csv": "fit", "runs.csv": "runs",
          "holdout.csv": "holdout", "selection.csv": "selection",
          "calibration.csv": "calibration", "excluded.csv": "excluded"}
SETTINGS = "predict.json"
FILES = (*TABLES, SETTINGS)
FIGURE = "ladder_prediction"
FIGURE_FILES = tuple(f"{FIGURE}.{ext}" for ext in ("png", "pdf", "csv"))


def percent(x: float) -> str:
    """A relative error as a signed percentage; beyond +-1000% as such (a wild
    bootstrap replicate's interval end says no more than that)."""
    if not np.isfinite(x) or abs(x) <= 10:
        return f"{x:+.1%}"
    return ">+1000%" if x > 0 else "<-1000%"


def error_text(error: float, low: float, high: float) -> str:
    """A relative error with its interval, where it has one (a bootstrap)."""
    if np.isfinite(low) and np.isfinite(high):
        return f"{percent(error)} [{percent(low)}, {percent(high)}]"
    return percent(error)


def _criterion(r) -> str:
    """A candidate's held-out error of the chain's last quantity, in its units."""
    if not np.isfinite(r.criterion):
        return f"none ({r.status})"
    if np.isfinite(r.metric_error):
        return f"{r.criterion:.4f} (mean absolute, metric units)"
    return f"{r.criterion:.2%} (mean absolute relative)"


def coverage_text(holdout: pd.Series, ci: float) -> str:
    """How many of a holdout's runs fell inside the prediction interval a
    prediction would have given each ("" without intervals: no bootstrap)."""
    if not np.isfinite(holdout["in_interval"]):
        return ""
    n = int(holdout["n_runs"])
    inside = round(float(holdout["in_interval"]) * n)
    return f"{inside} of {n} held-out runs inside their {ci:.0%} prediction intervals"


@dataclass
class PredictionResult:
    """Everything the stage computed. `paths` is the figure's data: each
    target's fitted surface along its path (the target's tokens per parameter,
    from the ladder's smallest compute to the target's) with the band of the
    surface's bootstrap refits; `holdout` is None without --holdout."""

    predictions: pd.DataFrame
    fit: pd.DataFrame
    runs: pd.DataFrame
    paths: pd.DataFrame
    holdout: pd.DataFrame | None
    excluded: pd.DataFrame
    by: tuple[str, ...]
    settings: dict
    selection: pd.DataFrame | None = None
    calibration: pd.DataFrame | None = None
    files: list[Path] = field(default_factory=list)

    @property
    def compute_axis(self) -> str:
        return self.settings["compute_axis"]

    @property
    def loss_label(self) -> str:
        return self.settings["loss_label"]

    def groups(self) -> list[tuple]:
        """Each group's values of `by`, sorted: tuples, one column's too."""
        if not self.by:
            return [()]
        keys = self.runs[list(self.by)].drop_duplicates()
        return sorted(tuple(row) for row in keys.itertuples(index=False, name=None))

    def rows(self, table: pd.DataFrame, key: tuple) -> pd.DataFrame:
        """The rows of one of its tables that belong to group `key`."""
        mask = pd.Series(True, index=table.index)
        for c, v in zip(self.by, key, strict=True):
            mask &= table[c].astype(str) == str(v)
        return table[mask]

    def title(self, key: tuple) -> str:
        return ", ".join(f"{c} {v}" for c, v in zip(self.by, key, strict=True)) or "all runs"

    def summary(self) -> list[str]:
        """Each group's loss law and status, its predictions and its holdout."""
        lines = [f"compute axis: {AXIS_LABELS[self.compute_axis]}; intervals at "
                 f"{self.settings['ci']:g}"]
        for key in self.groups():
            fit = self.rows(self.fit, key)
            law = fit[fit["law"] == "loss"]
            head = law.iloc[0]
            lines.append(f"{self.title(key)}: {head['status']}"
                         + (f" ({head['warnings']})" if head["warnings"] else ""))
            lines.append(f"  method {head['method']}; intervals {head['calibration']}")
            if self.selection is not None:
                chosen = self.rows(self.selection, key)
                lines += [f"  {'*' if r.chosen else ' '} {r.method}: held-out error "
                          f"{_criterion(r)}" for r in chosen.itertuples()]
            if law["value"].notna().all():
                lines.append("  L(N, D) = " + ", ".join(
                    f"{r.parameter} {r.value:.4g} [{r.low:.4g}, {r.high:.4g}]"
                    for r in law.itertuples()))
            for r in self.rows(self.predictions, key).itertuples():
                text = (f"  N {r.n:.4g}, D {r.d:.4g}: loss {r.loss:.4g} "
                        f"[{r.loss_low:.4g}, {r.loss_high:.4g}]")
                if r.status != head["status"]:
                    text += f" ({r.status})"
                if "task_loss" in self.predictions:
                    text += (f"; {r.task_loss_name} {r.task_loss:.4g} [{r.task_loss_low:.4g}, "
                             f"{r.task_loss_high:.4g}]")
                if "metric" in self.predictions:
                    text += (f"; {r.metric_name} {r.metric:.4g} [{r.metric_low:.4g}, "
                             f"{r.metric_high:.4g}] ({r.metric_status})")
                lines.append(text)
            if self.holdout is not None:
                for _, r in self.rows(self.holdout, key).iterrows():
                    lines.append(self._holdout_line(r))
        return lines

    def _holdout_line(self, r: pd.Series) -> str:
        """The holdout of one group: the largest N predicted by a refit of the
        others, the refit's status, the error and how many runs its intervals held."""
        head = f"  holdout N {r['held_out_n']:.4g}"
        if not np.isfinite(r["rel_error"]):
            return f"{head}: {r['status']}"
        text = (f"{head} (refit without it: {r['status']}): relative error "
                f"{error_text(r['rel_error'], r['rel_error_low'], r['rel_error_high'])}")
        inside = coverage_text(r, self.settings["ci"])
        return f"{text}; {inside}" if inside else text

    def write(self, directory: Path) -> list[Path]:
        """Its tables and settings into `directory`, which exists (the stage
        writes them into the directory it is about to swap in)."""
        directory = Path(directory)
        written = []
        for name, attr in TABLES.items():
            table = getattr(self, attr)
            if table is not None:
                table.to_csv(directory / name, index=False)
                written.append(directory / name)
        (directory / SETTINGS).write_text(json.dumps(self.settings, indent=1) + "\n")
        return [*written, directory / SETTINGS]
