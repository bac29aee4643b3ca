"""The fit stage: power laws per (task, arch, prior) from a frame of run records.

alpha_D is the log-log slope of downstream error (1 - test accuracy) against the
chosen x axis (DESIGN, "Scaling analysis"). Only runs with status "ok" enter a
fit; a cell with fewer than three sizes gets a status saying so, not a number.
Torch-free.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyarrow as pa

from .names import X_AXES
from .records import write_atomic
from .scaling import fit_loglog

CELL = ["task", "arch", "prior"]
TASK_STAGES = ("finetune", "scratch")  # runs on the task; pretraining runs are not


def x_values(runs: pd.DataFrame, x_axis: str) -> pd.Series:
    """The x axis: training compute (train + pretrain FLOPs), parameters, or
    FLOPs per token."""
    if x_axis == "compute":
        return runs["train_flops"] + runs["pretrain_flops"]
    if x_axis == "params":
        return runs["n_params_nonembed"].astype(float)
    if x_axis == "flops_per_token":
        return runs["flops_per_step"] / (runs["batch_size"] * runs["seq_len"])
    raise ValueError(f"x: got {x_axis!r}, accepted values: {', '.join(X_AXES)}")


def fit_study(
    runs: pd.DataFrame, *, x_axis: str = "compute", n_boot: int = 1000, ci: float = 0.95,
    seed: int = 0,
) -> pd.DataFrame:
    """One row per (task, arch, prior) with alpha_D, its interval, R^2, points."""
    runs = runs[runs["stage"].isin(TASK_STAGES)]
    runs = runs.assign(x=x_values(runs, x_axis), error=1.0 - runs["test_acc"])
    ok = runs[runs["status"] == "ok"]
    rows = []
    for (task, arch, prior), cell in runs.groupby(CELL, sort=True):
        good = ok.loc[ok.index.intersection(cell.index)]
        fit = fit_loglog(good["x"].to_numpy(), good["error"].to_numpy(),
                         sizes=good["size"].to_numpy(), n_boot=n_boot, ci=ci, seed=seed)
        rows.append({
            "task": task, "arch": arch, "prior": prior, "metric": "alpha_D", "x_axis": x_axis,
            "n_runs": len(cell), "n_failed": int((cell["status"] != "ok").sum()),
            **fit.as_dict(),
        })
    return pd.DataFrame(rows)


def write_fits(fits: pd.DataFrame, path: Path) -> None:
    write_atomic(pa.Table.from_pandas(fits, preserve_index=False), path)

