"""A study's runs as the compute-optimal frontier's table (analysis/frontier.py).

The frontier is fitted on the runs a study budgets (grid.budgets, study/grid.py):

- the pretraining runs of a stage that measures the upstream loss (the
  upstream stage): loss = upstream_loss, the held-out masked-token loss at
  the budget's end; prior = the stage;
- the task runs of a prior that pretrains nothing: loss = val_loss (the
  task's cross-entropy), prior = the prior, per task.

Params is the non-embedding parameter count (Hoffmann et al.'s N), compute
the run's counted training FLOPs (a wsd branch's include its trunk's up to
the fork: what its model cost), tokens its tokens seen, budget its grid
budget (the IsoFLOP group). Runs that did not finish are left out.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..priors import PRIORS
from ..stages import STAGES

COLUMNS = ["arch", "prior", "task", "size", "seed", "budget", "params", "compute", "tokens",
           "loss", "steps", "fork_step", "wall_seconds", "fork_seconds", "on_task"]


def study_table(runs: pd.DataFrame) -> pd.DataFrame:
    """The budgeted, finished runs of a study as the frontier's input table."""
    if "budget" not in runs:
        return pd.DataFrame(columns=COLUMNS)
    done = runs[(runs["status"] == "ok") & runs["budget"].notna()]
    upstream = [s for s, stage in STAGES.items() if stage.measures_upstream_loss]
    scratch = [p for p, prior in PRIORS.items() if prior.needs is None]
    pre = done[done["stage"].isin(upstream)].assign(loss=lambda r: r["upstream_loss"],
                                                     on_task=False)
    task = done[done["prior"].isin(scratch)].assign(loss=lambda r: r["val_loss"], on_task=True)
    table = pd.concat([pre, task], ignore_index=True)
    table = table.assign(params=table["n_params_nonembed"], compute=table["train_flops"],
                         tokens=table["tokens_seen"])
    table = table[np.isfinite(table["loss"].astype(float))]
    return table[COLUMNS].reset_index(drop=True)


def fit_table(runs: pd.DataFrame) -> pd.DataFrame:
    """The table `scalestudy frontier --from-runs` fits, one frontier per
    architecture and prior: a task run's prior is named with its task, since
    its loss is that task's."""
    table = study_table(runs)
    own = table["on_task"].astype(bool)
    table.loc[own, "prior"] = table.loc[own, "prior"] + " (" + table.loc[own, "task"] + ")"
    return table[["arch", "prior", "budget", "params", "compute", "tokens", "loss"]]
