"""A study's runs as the compute-optimal frontier's table.

The frontier is fitted on the runs a study budgets (grid.budgets, study/grid.py):

- the pretraining runs of a stage that measures the upstream loss (the
  upstream stage): loss = upstream_loss, the held-out masked-token loss at
  the budget's end; prior = the stage;
- the task runs of a prior that pretrains nothing: loss = val_loss (the
  task's cross-entropy), prior = the prior, per task;
- the task runs finetuned from such a budgeted upstream run: loss = val_loss
  after the fixed finetuning (train.max_steps), against the budget of the
  pretraining they start from: compute and tokens are the pretraining run's,
  so the frontier says which size's pretraining at a budget serves the task
  best (the finetuning's own FLOPs, the same steps at every budget, are left
  out of the IsoFLOP group: they grow with size).

Params is the non-embedding parameter count (Hoffmann et al.'s N), compute
the run's counted training FLOPs (a wsd branch's include its trunk's up to
the fork: what its model cost), tokens its tokens seen, budget its grid
budget (the IsoFLOP group). Runs that did not finish are left out.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from ...priors import PRIORS
from ...stages import STAGES, TASK_STAGES
from ..inputs import read_runs

COLUMNS = ["arch", "prior", "task", "size", "seed", "budget", "params", "compute", "tokens",
           "loss", "steps", "fork_step", "wall_seconds", "fork_seconds", "on_task"]


def study_table(runs: pd.DataFrame, budgeted_only: bool = True,
                extra: Sequence[str] = ()) -> pd.DataFrame:
    """The budgeted, finished runs of a study as the frontier's input table
    (every finished run, budgeted or not, without `budgeted_only`: the ladder a
    prediction fits, analysis/predict), with the record's `extra` columns too."""
    columns = [*COLUMNS, *extra]
    if budgeted_only and "budget" not in runs:
        return pd.DataFrame(columns=columns)
    done = runs[runs["status"] == "ok"]
    if budgeted_only:
        done = done[done["budget"].notna()]
    upstream = [s for s, stage in STAGES.items() if stage.measures_upstream_loss]
    scratch = [p for p, prior in PRIORS.items() if prior.needs is None]
    pre = done[done["stage"].isin(upstream)].assign(loss=lambda r: r["upstream_loss"],
                                                     on_task=False)
    pre = pre.assign(compute=pre["train_flops"], tokens=pre["tokens_seen"])
    task = done[done["prior"].isin(scratch)].assign(loss=lambda r: r["val_loss"], on_task=True)
    task = task.assign(compute=task["train_flops"], tokens=task["tokens_seen"])
    table = pd.concat([pre, task, _finetuned(done, pre, upstream)], ignore_index=True)
    table = table.assign(params=table["n_params_nonembed"])
    table = table[np.isfinite(table["loss"].astype(float))]
    return table[columns].reset_index(drop=True)


def _finetuned(done: pd.DataFrame, pre: pd.DataFrame, upstream: list[str]) -> pd.DataFrame:
    """Task runs finetuned from a budgeted upstream run, with that run's
    compute, tokens and parameters (matched on stage, arch, size, budget and
    the seed of the pretraining it started from)."""
    stage_of = {p: prior.pretrain for p, prior in PRIORS.items() if prior.pretrain in upstream}
    ft = done[done["prior"].isin(stage_of) & done["stage"].isin(TASK_STAGES)]
    if ft.empty or pre.empty:
        return ft.iloc[:0]
    key = ["stage", "arch", "size", "budget", "seed"]
    # N is the pretrained backbone's (the classifier's head is not the budget's).
    source = pre[key + ["compute", "tokens", "n_params_nonembed"]].drop_duplicates(key)
    ft = ft.drop(columns=["n_params_nonembed"]).assign(
        loss=ft["val_loss"], on_task=True, _stage=ft["prior"].map(stage_of),
        _seed=ft["pretrain_seed"].fillna(ft["seed"]).astype(int))
    merged = ft.merge(source.rename(columns={"stage": "_stage", "seed": "_seed"}),
                      on=["_stage", "arch", "size", "budget", "_seed"], how="inner")
    return merged.drop(columns=["_stage", "_seed"])


def fit_table(runs: pd.DataFrame) -> pd.DataFrame:
    """The table a study's frontier fits (`scalestudy frontier --from-runs`, the
    workflow's frontier rule, `scalestudy analyse`), one frontier per
    architecture and prior: a task run's prior is named with its task, since
    its loss is that task's."""
    table = study_table(runs)
    own = table["on_task"].astype(bool)
    table.loc[own, "prior"] = table.loc[own, "prior"] + " (" + table.loc[own, "task"] + ")"
    return table[["arch", "prior", "budget", "params", "compute", "tokens", "loss"]]


def read_fit_table(path) -> pd.DataFrame:
    """`fit_table` of a runs file (a study's runs.parquet, a cached study);
    ValueError when it has no finished budgeted run."""
    table = fit_table(read_runs(path))
    if table.empty:
        raise ValueError(f"{path}: no finished budgeted run (grid.budgets) to fit")
    return table
