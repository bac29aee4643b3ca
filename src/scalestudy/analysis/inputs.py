"""The run records every analysis command reads, checked once: `read_runs`
(a runs.parquet or a cached study) and `check_runs` (a frame of records, as
the notebook is given one); a stage's own artifact is read back by its stage
(fits.py `read_fits`, a fits.parquet).

The record schema (records.py) checks columns, types and categories; this
module checks what a fit would otherwise take silently (docs/analysis.md,
"What the analysis refuses"):

- each run once: two records of one identity (`IDENTITY`: a stacked or
  concatenated cache) would count as independent evidence;
- the measurements the fits read present in a finished (`ok`) run: a task
  run's test accuracy, an upstream stage's held-out loss; parameters and
  FLOPs > 0; every accuracy recorded in [0, 1] and every loss finite and >= 0;
- something to fit: at least one finished run (else `errors.NoResult`, exit 3).

A refusal is one ValueError naming the file, the column, the first offending
runs and what is accepted. Torch-free.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import NoResult
from ..records import read_records
from ..stages import STAGES, TASK_STAGES

# What makes a record one run: its grid cell, its stage, budget and pretraining seed.
IDENTITY = ["study", "task", "arch", "size", "prior", "seed", "stage", "budget",
            "pretrain_seed"]
ACCURACIES = ("test_acc", "val_acc")
LOSSES = ("train_loss", "val_loss", "upstream_loss")
SHOWN = 3  # offending runs named in a message


def read_runs(path) -> pd.DataFrame:
    """The run records at `path`, read (records.py) and checked (`check_runs`)."""
    return check_runs(read_records(Path(path)), str(path))


def check_runs(runs: pd.DataFrame, source: str = "runs") -> pd.DataFrame:
    """`runs` when it is a table of run records an analysis can read, else one
    ValueError (or NoResult, when no run finished) naming `source`."""
    if runs.empty:
        raise NoResult(f"{source}: no run record in it")
    _refuse_duplicates(runs, source)
    ok = runs["status"].eq("ok").to_numpy()
    if not ok.any():
        counts = runs["status"].value_counts().to_dict()
        errors = [e for e in runs["error"].dropna().unique() if e][:2]
        raise NoResult(f"{source}: no run finished ok ({_counts(counts)}), so there is nothing "
                       f"to fit" + (f"; errors: {'; '.join(errors)}" if len(errors) else ""))
    for column in ACCURACIES:
        values = runs[column].to_numpy(dtype=float)
        _refuse(runs, source, column, ~np.isnan(values) & ~((values >= 0) & (values <= 1)),
                "an accuracy in [0, 1]")
    for column in LOSSES:
        values = runs[column].to_numpy(dtype=float)
        _refuse(runs, source, column, ~np.isnan(values) & ~(np.isfinite(values) & (values >= 0)),
                "a loss: a finite number >= 0, or empty")
    on_task = runs["stage"].isin(TASK_STAGES).to_numpy()
    upstream = runs["stage"].isin([n for n, s in STAGES.items() if s.measures_upstream_loss])
    needed = {"test_acc": ok & on_task, "upstream_loss": ok & upstream.to_numpy()}
    for column, rows in needed.items():
        _refuse(runs, source, column, rows & np.isnan(runs[column].to_numpy(dtype=float)),
                "a number in every run that finished ok "
                + ("on its task" if column == "test_acc" else "upstream"))
    for column in ("n_params", "train_flops", "flops_per_step"):
        values = runs[column].to_numpy(dtype=float)
        _refuse(runs, source, column, ok & ~(np.isfinite(values) & (values > 0)),
                "a positive number in every run that finished ok")
    return runs


def _refuse_duplicates(runs: pd.DataFrame, source: str) -> None:
    key = runs[IDENTITY].astype(object).where(runs[IDENTITY].notna(), None).astype(str)
    twice = key.duplicated(keep=False).to_numpy()
    if twice.any():
        rows = np.flatnonzero(twice)
        raise ValueError(
            f"{source}: {len(rows)} records share an identity ({', '.join(IDENTITY)}), e.g. "
            f"{_named(runs, rows)}: each run must appear once (a cache stacked or "
            f"concatenated twice?); drop the duplicates or collect the records again")


def _refuse(runs: pd.DataFrame, source: str, column: str, bad: np.ndarray,
            accepted: str) -> None:
    if bad.any():
        rows = np.flatnonzero(bad)
        shown = ", ".join(_value(runs[column].iloc[i]) for i in rows[:SHOWN])
        raise ValueError(f"{source}: column {column!r}: {len(rows)} run(s) hold {shown}"
                         f"{' ...' if len(rows) > SHOWN else ''} ({_named(runs, rows)}); "
                         f"accepted: {accepted}")


def _value(value) -> str:
    if isinstance(value, (float, np.floating)):
        return "NaN" if np.isnan(value) else f"{value:g}"
    return repr(value)


def _named(runs: pd.DataFrame, rows: np.ndarray) -> str:
    """The first offending runs, by row number and cell."""
    names = []
    for i in rows[:SHOWN]:
        r = runs.iloc[i]
        names.append(f"row {i}: {r['stage']} {r['task']}/{r['arch']}/{r['size']}/"
                     f"{r['prior']}/s{r['seed']}")
    return "; ".join(names) + (f" and {len(rows) - SHOWN} more" if len(rows) > SHOWN else "")


def _counts(counts: dict) -> str:
    return ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
