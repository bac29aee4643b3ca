"""A study's runs as the frontier's table (analysis/frontier/study.py), on
hand-built records: which runs enter, with which loss, compute, tokens and N."""

import numpy as np
import pandas as pd

from scalestudy.analysis.frontier.study import fit_table, study_table


def record(**values) -> dict:
    base = {"task": "listops", "arch": "s4", "size": "xs", "seed": 0, "status": "ok",
            "budget": 1e11, "n_params_nonembed": 100, "train_flops": 1e11, "tokens_seen": 1000,
            "upstream_loss": np.nan, "val_loss": np.nan, "steps": 10, "fork_step": np.nan,
            "wall_seconds": 1.0, "fork_seconds": np.nan, "pretrain_seed": np.nan}
    return {**base, **values}


def records() -> pd.DataFrame:
    return pd.DataFrame([
        # Upstream pretraining of seeds 0 and 1 (pretrain.seeds: per_seed).
        record(task="upstream", stage="upstream", prior="upstream", seed=0,
               upstream_loss=2.5, train_flops=1.02e11, tokens_seen=5000),
        record(task="upstream", stage="upstream", prior="upstream", seed=1,
               upstream_loss=2.6, train_flops=1.01e11, tokens_seen=5100),
        # Finetuned from each: their own FLOPs, tokens and N (with the head) are not the budget's.
        record(stage="finetune", prior="upstream", seed=0, pretrain_seed=0, val_loss=1.7,
               train_flops=3e9, tokens_seen=900, n_params_nonembed=104),
        record(stage="finetune", prior="upstream", seed=1, pretrain_seed=1, val_loss=1.9,
               train_flops=3e9, tokens_seen=900, n_params_nonembed=104),
        # From scratch on the task, at the budget: its own compute.
        record(stage="scratch", prior="random", val_loss=2.0, train_flops=0.99e11,
               tokens_seen=7000),
        # Not finished, and not budgeted: left out.
        record(stage="scratch", prior="random", seed=1, status="diverged", val_loss=np.inf),
        record(stage="scratch", prior="random", seed=2, budget=np.nan, val_loss=2.1),
    ])


def test_each_kind_of_run_enters_with_its_loss_and_compute():
    table = study_table(records()).set_index(["prior", "task", "seed"]).sort_index()
    assert len(table) == 5
    up = table.loc[("upstream", "upstream", 0)]
    assert (up["loss"], up["compute"], up["tokens"], up["on_task"]) == (2.5, 1.02e11, 5000, False)
    ft = table.loc[("upstream", "listops", 1)]
    # The finetuned run's loss, against the budget of the pretraining it started from.
    assert (ft["loss"], ft["compute"], ft["tokens"], ft["params"]) == (1.9, 1.01e11, 5100, 100)
    assert ft["on_task"]
    scratch = table.loc[("random", "listops", 0)]
    assert (scratch["loss"], scratch["compute"], scratch["tokens"]) == (2.0, 0.99e11, 7000)


def test_a_finetuned_run_without_its_pretraining_is_left_out():
    runs = records()
    runs = runs[~((runs["stage"] == "upstream") & (runs["seed"] == 1))]
    table = study_table(runs)
    assert set(table.loc[table["prior"] == "upstream", "seed"]) == {0}
    assert len(table[(table["prior"] == "upstream") & table["on_task"]]) == 1


def test_the_fit_table_names_a_task_frontier_with_its_task():
    priors = fit_table(records())["prior"].value_counts().to_dict()
    assert priors == {"upstream": 2, "upstream (listops)": 2, "random (listops)": 1}


# ------------------------------------------------------------------------- joins to the pretraining
# Finetuned runs joined to the pretraining they started from: its `pretrain_seed`, not
# the finetuning run's own seed. Under
# pretrain.seeds shared every seed finetunes the one pretraining run (of
# pretrain.seed); a finetuned run's compute, tokens and N on the frontier are
# that run's.
#
# The join is `_finetuned` of a study's frontier table, tested through its
# public `study_table` (analysis/frontier/study.py).


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
