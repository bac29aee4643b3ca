"""The compute axis of the fits: C = train_flops + pretrain_flops.

Checked against literal sums, and on synthetic SPT runs whose finetuning FLOPs
are not proportional to their pretraining FLOPs, so that alpha_D is recovered
only when pretraining is counted in x.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from scalestudy.analysis.fits import fit_study, select, x_values

SIZES = ("xxs", "xs", "s", "m")
PARAMS = dict(zip(SIZES, (1e4, 4e4, 1.6e5, 6.4e5), strict=True))
# Pretraining grows 4x a size; finetuning does not follow it (not proportional).
PRETRAIN = dict(zip(SIZES, (1e12, 4e12, 1.6e13, 6.4e13), strict=True))
FINETUNE = dict(zip(SIZES, (3e12, 1e11, 9e12, 2e12), strict=True))
ALPHA = 0.1


def test_compute_is_train_plus_pretrain_flops_on_hand_values():
    runs = pd.DataFrame({"train_flops": [1.0e9, 2.0e9, 3.0e9, 4.0e9],
                         "pretrain_flops": [5.0e8, np.nan, 0.0, 4.0e9]})
    # NaN pretraining (a record without it) counts as none.
    assert x_values(runs, "compute").tolist() == [1.5e9, 2.0e9, 3.0e9, 8.0e9]


def spt_runs() -> pd.DataFrame:
    """SPT runs whose error is 0.9 (finetune + pretrain)^-ALPHA exactly, 2 seeds."""
    rows = []
    for size in SIZES:
        compute = FINETUNE[size] + PRETRAIN[size]
        for seed in (0, 1):
            rows.append(dict(
                task="listops", arch="transformer", prior="spt", stage="finetune",
                status="ok", size=size, seed=seed, n_params_nonembed=PARAMS[size],
                train_flops=FINETUNE[size], pretrain_flops=PRETRAIN[size],
                flops_per_step=FINETUNE[size] / 100, batch_size=32, seq_len=128,
                test_acc=1 - 0.9 * compute ** -ALPHA, upstream_loss=np.nan,
            ))
    return pd.DataFrame(rows)


def test_alpha_d_of_spt_is_recovered_only_with_pretraining_in_x():
    runs = spt_runs()
    row = select(fit_study(runs, n_boot=0), "alpha_D", prior="spt").iloc[0]
    assert row["status"] == "ok"
    assert row["alpha"] == pytest.approx(ALPHA, rel=1e-9)
    assert row["coef"] == pytest.approx(0.9, rel=1e-9)
    # The data are built so that the finetuning FLOPs alone give another slope
    # (an x that dropped pretrain_flops cannot pass the check above).
    slope = np.polyfit(np.log(runs["train_flops"]), np.log(1 - runs["test_acc"]), 1)[0]
    assert abs(-slope - ALPHA) > 0.05
