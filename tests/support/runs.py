"""Synthetic run records whose laws (and so whose answers) are known: the
analysis tests' input, no training needed."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

from scalestudy.analysis.fits import select
from scalestudy.records import SCHEMA, SCHEMA_VERSION

STAGE = {"random": "scratch", "tfixup": "scratch", "dtfixup": "scratch",
         "scratch_matched": "scratch", "spt": "finetune", "upstream": "finetune"}
PARAMS = {"xxs": 1e5, "xs": 4e5, "s": 1.6e6, "m": 6.4e6, "l": 2.56e7}
DEPTHS = {"xxs": 2, "xs": 4, "s": 8, "m": 16, "l": 32}


def _record(**values) -> dict:
    """A full, valid run record: schema defaults, then `values`."""
    row = {}
    for field in SCHEMA:
        if pa.types.is_string(field.type):
            row[field.name] = ""
        elif pa.types.is_integer(field.type):
            row[field.name] = 0
        else:
            row[field.name] = np.nan
    row.update(schema_version=SCHEMA_VERSION, study="synthetic", status="ok", norm="pre",
               diverged_step=None, error=None, protocol="default", batch_size=32, seq_len=128,
               stopped_by="max_steps")
    row.update(values)
    return row


def make_runs(
    archs=("transformer",), sizes=("xxs", "xs", "s", "m"), priors=("random",),
    tasks=("listops",), seeds=(0,), *, alpha_u=None, e_u=0.0, alpha_d=None, alpha_ud=0.5,
    acc=None, noise=0.0, seed=0, upstream=None, per_seed_upstream=False,
) -> pd.DataFrame:
    """Run records following known laws.

    Upstream runs (one per arch x size, or per arch x size x seed with
    `per_seed_upstream`, each finetuning seed then from its own; written when
    `upstream` or, by default, when the `upstream` prior is in the grid):
    loss = e_u + 10 C^-alpha_u[arch], C = 1000 N.
    Task runs: error = 0.9 x^-alpha_d[(arch, prior)], x = train_flops + pretrain_flops;
    under the `upstream` prior error = 0.5 loss^alpha_ud instead (finetuning compute is a
    tenth of pretraining's, so with e_u = 0 alpha_D = alpha_ud * alpha_U exactly).
    `acc[(arch, prior)]` (a number, or a dict size -> number) sets accuracy outright.
    Multiplicative log-normal `noise` on every loss and error.
    """
    rng = np.random.default_rng(seed)
    alpha_u, alpha_d, acc = alpha_u or {}, alpha_d or {}, acc or {}
    upstream = "upstream" in priors if upstream is None else upstream
    rows = []
    for arch in archs:
        for size in sizes:
            n = PARAMS[size]
            c_up = 1000 * n
            loss = (e_u + 10 * c_up ** -alpha_u.get(arch, 0.1)) * np.exp(rng.normal(0, noise))
            losses = ({s: (e_u + 10 * c_up ** -alpha_u.get(arch, 0.1))
                       * np.exp(rng.normal(0, noise)) for s in seeds}
                      if per_seed_upstream else dict.fromkeys(seeds, loss))
            model = dict(arch=arch, size=size, n_params=int(2 * n), n_params_nonembed=int(n),
                         depth=DEPTHS[size], width=64)
            for s in (seeds if per_seed_upstream else seeds[:1]) if upstream else ():
                rows.append(_record(task="upstream", prior="upstream", stage="upstream",
                                    train_flops=c_up, pretrain_flops=0.0, steps=100,
                                    flops_per_step=c_up / 100, upstream_loss=losses[s],
                                    seed=s if per_seed_upstream else 0, **model))
            for task in tasks:
                for prior in priors:
                    for s in seeds:
                        pre = c_up if prior in ("spt", "upstream") else 0.0
                        train = 0.1 * pre if pre else 100 * n
                        if prior == "upstream":
                            err = 0.5 * losses[s] ** alpha_ud
                        else:
                            err = 0.9 * (train + pre) ** -alpha_d.get((arch, prior), 0.05)
                        a = acc.get((arch, prior))
                        if a is not None:
                            err = 1 - (a[size] if isinstance(a, dict) else a)
                        err = min(err * np.exp(rng.normal(0, noise)), 1.0)
                        rows.append(_record(
                            task=task, prior=prior, stage=STAGE[prior], seed=s,
                            train_flops=train, pretrain_flops=pre, flops_per_step=train / 100,
                            steps=100, test_acc=1 - err, val_acc=1 - err, train_loss=2 * err,
                            upstream_loss=losses[s] if prior == "upstream" else np.nan,
                            pretrain_seed=s if per_seed_upstream else 0,
                            norm="none" if prior in ("tfixup", "dtfixup") else "pre", **model,
                        ))
    return pd.DataFrame(rows)


def one_fit(fits, metric, form="loglog", **where) -> pd.Series:
    """The one fit of `metric` (in `form`) whose columns match `where`."""
    rows = select(fits, metric, form, **where)
    assert len(rows) == 1, rows
    return rows.iloc[0]
