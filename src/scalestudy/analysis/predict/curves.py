"""A study's ladder on its intermediate checkpoints: every finished run's
validation curve (its metrics.csv) as points of the ladder.

Choshen et al. 2024 ("A Hitchhiker's Guide to Scaling Law Estimation") and
OLMo's ladder fit the loss surface on intermediate checkpoints as well as
final ones, after a cut of the early points (`--min-fraction`, applied by
inputs.prepare_ladder to any table with `step` and `run`). A study's results
directory holds each run's record.parquet beside its metrics.csv (and, for a
resumed run, the earlier attempts' metrics.attempt<n>.csv, whose steps the
later attempt overrides). A run's validation at step s is one point: its loss
the validation loss logged there (a pretraining run's masked-token loss on
the upstream corpus's held-out split, whose last value is the record's
upstream_loss; a task run's task loss), its tokens and counted FLOPs the run's
totals times s / steps (each step costs the same: the spec fixes the batch).

The runs are those the final-point ladder fits (inputs.ladder_of_runs), but
for the finetuned ones: their curves are finetuning steps at a fixed
pretraining budget, not points of a compute ladder; they are left out, with
a note. Intermediate points of a run are not compute-optimal for their own
length (its learning rate has not decayed there): the cut and the per-run
resampling (a run is the unit, inputs.prepare_ladder) are how the fit lives
with it, as the papers do.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ...records import read_records
from ..inputs import check_runs
from .inputs import LADDER_COLUMNS, ladder_of_runs

HISTORY = "metrics.csv"
EARLIER = "metrics.attempt*.csv"


def validation_curve(run_dir: Path) -> pd.Series:
    """step -> validation loss of the run in `run_dir` (every attempt's history,
    a later attempt's value replacing an earlier one's at the same step)."""
    files = sorted(run_dir.glob(EARLIER), key=lambda p: int(p.stem.split("attempt")[-1]))
    frames = [pd.read_csv(p) for p in [*files, run_dir / HISTORY] if p.is_file()]
    frames = [f for f in frames if {"step", "val_loss"} <= set(f.columns)]
    if not frames:
        return pd.Series(dtype=float)
    rows = pd.concat(frames, ignore_index=True)[["step", "val_loss"]].dropna()
    return rows.groupby("step")["val_loss"].last().sort_index()


def checkpoint_ladder(directory) -> tuple[pd.DataFrame, list[tuple[str, str]]]:
    """The checkpoints of every run under the study directory `directory`, as a
    ladder with `step` and `run` columns, and each run left out with why."""
    directory = Path(directory)
    paths = sorted(directory.rglob("record.parquet"))
    if not paths:
        raise ValueError(f"{directory}: no run record (record.parquet) under it; --checkpoints "
                         "reads a study's results directory, e.g. results/<study>")
    records = check_runs(pd.concat([read_records(p).assign(run_dir=str(p.parent))
                                    for p in paths], ignore_index=True), str(directory))
    final = ladder_of_runs(records, extra=["run_dir", "steps", "finetuned"])
    notes, points = [], []
    for run in final.itertuples(index=False):
        name = str(Path(run.run_dir).relative_to(directory))
        if run.finetuned:
            notes.append((name, "a finetuned run's curve is not a compute ladder"))
            continue
        curve = validation_curve(Path(run.run_dir))
        curve = curve[(curve.index > 0) & (curve.index <= run.steps)]
        if curve.empty:
            notes.append((name, "no validation in its metrics.csv"))
            continue
        fraction = curve.index.to_numpy(dtype=float) / float(run.steps)
        base = {c: getattr(run, c) for c in LADDER_COLUMNS if c not in ("tokens", "compute",
                                                                         "loss", "test_acc")}
        at_end = curve.index.to_numpy() == run.steps
        points.append(pd.DataFrame({
            **base, "run": name, "step": curve.index.to_numpy(dtype=int),
            "tokens": run.tokens * fraction, "compute": run.compute * fraction,
            "loss": curve.to_numpy(dtype=float),
            "test_acc": np.where(at_end, run.test_acc, np.nan)}))
    if not points:
        raise ValueError(f"{directory}: no run with a validation curve to fit")
    return pd.concat(points, ignore_index=True), notes
