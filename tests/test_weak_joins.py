"""Finetuned runs joined to the pretraining they started from: its `pretrain_seed`, not
the finetuning run's own seed. Under
pretrain.seeds shared every seed finetunes the one pretraining run (of
pretrain.seed); a finetuned run's compute, tokens and N on the frontier are
that run's.

The join is `_finetuned` of a study's frontier table, tested through its
public `study_table` (analysis/frontier/study.py)."""

import numpy as np
import pandas as pd
from test_frontier_study import record

from scalestudy.analysis.frontier.study import study_table


def test_every_seed_of_a_shared_pretraining_joins_it():
    runs = pd.DataFrame([
        # pretrain.seeds shared: one upstream run, of pretrain.seed 0.
        record(task="upstream", stage="upstream", prior="upstream", seed=0,
               upstream_loss=2.5, train_flops=1.02e11, tokens_seen=5000),
        *[record(stage="finetune", prior="upstream", seed=s, pretrain_seed=0,
                 val_loss=1.7 + 0.1 * s, train_flops=3e9, tokens_seen=900,
                 n_params_nonembed=104) for s in (0, 1, 2)],
    ])
    table = study_table(runs)
    tuned = table[table["on_task"]].set_index("seed").sort_index()
    assert list(tuned.index) == [0, 1, 2]
    assert list(tuned["loss"]) == [1.7, 1.8, 1.9]
    assert set(tuned["compute"]) == {1.02e11} and set(tuned["tokens"]) == {5000}
    assert set(tuned["params"]) == {100}


def test_a_finetuned_run_joins_its_pretrain_seeds_run_not_its_own_seeds():
    runs = pd.DataFrame([
        record(task="upstream", stage="upstream", prior="upstream", seed=0,
               upstream_loss=2.5, train_flops=1.02e11, tokens_seen=5000),
        record(task="upstream", stage="upstream", prior="upstream", seed=1,
               upstream_loss=2.6, train_flops=1.01e11, tokens_seen=5100),
        # Seed 1 finetuned from the seed-0 pretraining, seed 0 from the seed-1 one.
        record(stage="finetune", prior="upstream", seed=1, pretrain_seed=0, val_loss=1.9,
               train_flops=3e9, tokens_seen=900, n_params_nonembed=104),
        record(stage="finetune", prior="upstream", seed=0, pretrain_seed=1, val_loss=1.7,
               train_flops=3e9, tokens_seen=900, n_params_nonembed=104),
    ])
    tuned = study_table(runs).query("on_task").set_index("seed").sort_index()
    assert list(tuned.index) == [0, 1]
    assert (tuned.loc[0, "compute"], tuned.loc[0, "tokens"]) == (1.01e11, 5100)
    assert (tuned.loc[1, "compute"], tuned.loc[1, "tokens"]) == (1.02e11, 5000)


def test_a_record_without_pretrain_seed_joins_its_own_seed():
    """Records written before the field: the run's own seed, as before."""
    runs = pd.DataFrame([
        record(task="upstream", stage="upstream", prior="upstream", seed=1,
               upstream_loss=2.6, train_flops=1.01e11, tokens_seen=5100),
        record(stage="finetune", prior="upstream", seed=1, pretrain_seed=np.nan,
               val_loss=1.9, train_flops=3e9, tokens_seen=900, n_params_nonembed=104),
    ])
    tuned = study_table(runs).query("on_task")
    assert list(tuned["compute"]) == [1.01e11]
