"""The ladder: a table of runs, checked and cleaned, as the prediction fits it.

Input table (CSV or Parquet), one row per run:

- `params` (N: parameters; a study's non-embedding count) and `loss`: required;
- `tokens` (D) or `compute` (C, FLOPs): at least one; the other is derived by
  C = 6 N D (frontier/inputs.py's `prepare`, which also leaves out, with its
  reason, every row whose params, compute, tokens or loss is not a positive
  finite number);
- optional: the group columns (`by`, default arch and prior, those present:
  one prediction per group), `seed`, a downstream metric named by `metric` (an
  accuracy or error in [0, 1]), a task's loss named by `task_loss` (the loss
  the metric is a sigmoid of, predicted from its own L(N, D) or from `loss`:
  chain.py), and `step` with `run` for a table of checkpoints (each row a
  point of run `run`'s curve; `min_fraction` keeps the points at or after that
  fraction of the run's final tokens).

A study's run records (`from_runs`: a runs.parquet or a cached study) are
mapped as the frontier maps them (frontier/study.py `study_table`), every
finished run rather than its budgeted ones alone: upstream pretraining runs
with their upstream loss, task runs with their validation loss (finetuned
ones against their pretraining's N and D), N the non-embedding parameters, D
the tokens seen, C the counted training FLOPs; `test_acc` rides along as the
downstream metric a task run can chain.

Bad input raises ValueError naming the column or argument and what it accepts.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from ...priors import PRIORS
from ...stages import TASK_STAGES
from ..frontier.inputs import check_numbers, default_by, prepare, present_columns, read_table
from ..frontier.study import COLUMNS as STUDY_COLUMNS
from ..frontier.study import study_table
from ..inputs import check_runs, read_runs

ACCEPTED = ("params, loss, tokens and/or compute (at least one); optional: group columns "
            "(arch, prior), seed, a metric column (--metric), step with run (checkpoints)")


def read_ladder(source, from_runs: bool = False) -> tuple[pd.DataFrame, str]:
    """The table `source` names (a DataFrame, or a CSV or Parquet path) and its name
    in messages; a study's run records mapped to the ladder's columns with `from_runs`."""
    if isinstance(source, pd.DataFrame):
        return (ladder_of_runs(check_runs(source)) if from_runs else source), "table"
    if from_runs:
        return ladder_of_runs(read_runs(source)), str(source)
    return read_table(source), str(source)


LADDER_COLUMNS = ["arch", "prior", "seed", "params", "tokens", "compute", "loss", "test_acc"]


def ladder_of_runs(runs: pd.DataFrame, extra: Sequence[str] = ()) -> pd.DataFrame:
    """Every finished run of a study as a ladder, grouped by arch and prior (a
    task run's prior named with its task: its loss is that task's), with the
    records' `extra` columns; `finetuned` among them says which task runs start
    from a pretraining (their N and D are the pretraining's)."""
    own_extra = [c for c in extra if c not in (*STUDY_COLUMNS, "finetuned")]
    table = study_table(runs, budgeted_only=False, extra=["test_acc", "stage", *own_extra])
    own = table["on_task"].astype(bool)
    table["finetuned"] = own & table["stage"].isin(TASK_STAGES) & table["prior"].map(
        lambda p: PRIORS[p].needs is not None if p in PRIORS else False)
    table.loc[own, "prior"] = table.loc[own, "prior"] + " (" + table.loc[own, "task"] + ")"
    return table[[*LADDER_COLUMNS, *extra]]


def check_columns(table: pd.DataFrame, source: str, by: Sequence[str], metric: str | None,
                  task_loss: str | None = None) -> None:
    """ValueError naming the first missing or unusable column."""
    cols = set(table.columns)
    for col in ("params", "loss"):
        if col not in cols:
            hint = (" (a study's run records? use --from-runs)"
                    if "n_params_nonembed" in cols else "")
            raise ValueError(f"{source}: missing column {col!r}{hint}; columns present: "
                             f"{present_columns(table)}; accepted columns: {ACCEPTED}")
    if not cols & {"tokens", "compute"}:
        raise ValueError(f"{source}: missing column 'tokens' (or 'compute'): one of them is "
                         f"needed; columns present: {present_columns(table)}; accepted columns: "
                         f"{ACCEPTED}")
    for col in by:
        if col not in cols:
            raise ValueError(f"{source}: missing group column {col!r} (by); columns present: "
                             f"{', '.join(map(str, table.columns))}")
    if metric is not None:
        if metric not in cols:
            raise ValueError(f"{source}: no column {metric!r} (--metric); columns present: "
                             f"{', '.join(map(str, table.columns))}")
        values = pd.to_numeric(table[metric], errors="coerce")
        bad = values.notna() & ~values.between(0, 1)
        if bad.any():
            raise ValueError(f"{source}: column {metric!r} (--metric) must be an accuracy or "
                             f"error in [0, 1]; row {int(np.flatnonzero(bad)[0])} (0-based) "
                             f"holds {values[bad].iloc[0]:g}")
    if task_loss is not None and task_loss not in cols:
        raise ValueError(f"{source}: no column {task_loss!r} (--task-loss); columns present: "
                         f"{', '.join(map(str, table.columns))}")
    if "step" in cols and "run" not in cols:
        raise ValueError(f"{source}: a 'step' column (checkpoints) needs a 'run' column naming "
                         "each checkpoint's run")


def prepare_ladder(table: pd.DataFrame, source: str, by: Sequence[str] | None,
                   metric: str | None, min_fraction: float, task_loss: str | None = None,
                   ) -> tuple[pd.DataFrame, tuple[str, ...], list[tuple[str, str]]]:
    """The clean runs (with `_group`, `_unit`: the resampling unit, a run;
    `_metric` when a metric is named, `_task` when a task loss is), the group
    columns, and what was left out and why, a pair per set of rows or
    checkpoints (excluded.csv)."""
    by = default_by(table) if by is None else tuple(by)
    check_columns(table, source, by, metric, task_loss)
    check_numbers(table, [c for c in (metric, task_loss) if c is not None], source)
    runs, excluded = prepare(table, by, source)
    notes = [(x["detail"], x["reason"]) for x in excluded]
    if metric is not None:
        runs["_metric"] = pd.to_numeric(runs[metric], errors="coerce").astype(float)
    if task_loss is not None:
        runs["_task"] = pd.to_numeric(runs[task_loss], errors="coerce").astype(float)
        bad = ~(np.isfinite(runs["_task"]) & (runs["_task"] > 0))
        if bad.any():
            notes.append((f"{int(bad.sum())} row(s)", f"the task loss {task_loss!r} "
                          "(--task-loss) is not a positive finite number"))
            runs = runs[~bad]
    if "step" in runs:
        runs["_unit"] = runs["_group"].astype(str) + "/" + runs["run"].astype(str)
        final = runs.groupby("_unit")["tokens"].transform("max")
        early = runs["tokens"] < min_fraction * final
        if early.any():
            notes.append((f"{int(early.sum())} checkpoint(s)",
                          f"before {min_fraction:g} of their run's final tokens (--min-fraction)"))
        runs = runs[~early]
    else:
        runs["_unit"] = np.arange(len(runs)).astype(str)
    if runs.empty:
        raise ValueError(f"{source}: no row with positive finite params, tokens (or compute) "
                         "and loss")
    return runs.reset_index(drop=True), by, notes


def parse_targets(texts: Sequence[str]) -> np.ndarray:
    """`--at N:D` texts as an (m, 2) array of positive (params, tokens)."""
    targets = []
    for text in texts:
        parts = str(text).split(":")
        try:
            n, d = (float(p) for p in parts) if len(parts) == 2 else (np.nan, np.nan)
        except ValueError:
            n = d = np.nan
        if not (np.isfinite([n, d]).all() and n > 0 and d > 0):
            raise ValueError(f"--at: got {text!r}; accepted: N:D, parameters and tokens as "
                             "positive numbers (e.g. 70e9:1.4e12)")
        targets.append((n, d))
    if not targets:
        raise ValueError("--at: no target; accepted: one or more N:D (e.g. 70e9:1.4e12)")
    return np.array(targets, dtype=float)


class TokenCost:
    """The FLOPs a token costs at size N on a compute axis: 6 N ("6nd"), or
    ("counted") each size's mean compute / tokens in the table, interpolated
    linearly in ln N - ln(FLOPs per token) between sizes and extended beyond the
    end sizes by the end segments' slopes (a single size: proportional to N), as
    the frontier's approach 3 reads it (frontier/approaches.py `_cost_model`).
    A table without `compute` counts 6 N D on both axes."""

    def __init__(self, runs: pd.DataFrame, axis: str):
        self.axis = axis
        per = (np.log(runs["compute"]) - np.log(runs["tokens"])).groupby(runs["params"]).mean()
        self.ln_n = np.log(per.index.to_numpy(dtype=float))
        self.ln_f = per.to_numpy(dtype=float)

    def __call__(self, N) -> np.ndarray:
        ln_n = np.log(np.asarray(N, dtype=float))
        if self.axis == "6nd":
            return 6.0 * np.exp(ln_n)
        x, y = self.ln_n, self.ln_f
        if x.size == 1:
            return np.exp(y[0] + ln_n - x[0])
        inside = np.interp(ln_n, x, y)
        low = y[0] + (ln_n - x[0]) * (y[1] - y[0]) / (x[1] - x[0])
        high = y[-1] + (ln_n - x[-1]) * (y[-1] - y[-2]) / (x[-1] - x[-2])
        return np.exp(np.where(ln_n < x[0], low, np.where(ln_n > x[-1], high, inside)))

    def compute(self, N, D) -> np.ndarray:
        return self(N) * np.asarray(D, dtype=float)
