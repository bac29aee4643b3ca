"""A job as the command runs it (training/job.py): a pretraining run that raises
before it trains leaves a failed record that names it as its record would
have, its budget and seed included, as a training run's does
(tests/test_run_lock.py)."""

import copy

import pandas as pd
import pytest

from scalestudy.records import read_records
from scalestudy.study import grid, specs
from scalestudy.training import job, pretrain

from tests.support.studies import DECLARED_STUDY, typed


@pytest.mark.parametrize("stage, task, seeds, seed, corpus", [
    ("upstream", None, "shared", None, "upstream"),
    ("spt", "listops", "per_seed", 2, "listops"),
])
def test_a_failed_pretraining_record_is_named_by_the_spec_s_cell(tmp_path, monkeypatch, stage,
                                                                 task, seeds, seed, corpus):
    """Its corpus as its task, its stage as its prior and stage, the seed it
    trained with (pretrain.seed 3 when shared, the finetuning seed's when per
    seed), and its budget."""
    config = copy.deepcopy(DECLARED_STUDY)
    config["grid"]["budgets"] = [1e11, 3e11]
    config["pretrain"].update(seeds=seeds, seed=3)
    run = grid.PretrainCell(stage, task, "s4", "xs", seed, 3e11)
    spec = specs.PretrainSpec.from_dict(specs.pretrain_spec(typed(config), run))
    out_dir = tmp_path / run.directory

    def broken(*args):
        raise FileNotFoundError("no corpus")

    monkeypatch.setattr(pretrain, "run_pretrain", broken)
    record = job.pretrain(spec, tmp_path / "data", out_dir)
    assert record["status"] == "failed" and "no corpus" in record["error"]
    row = read_records(out_dir / "record.parquet").iloc[0]
    expected_seed = 3 if seed is None else seed
    assert (row["study"], row["task"], row["arch"], row["size"]) == (
        config["study"], corpus, "s4", "xs")
    assert (row["prior"], row["stage"], row["seed"], row["budget"]) == (
        stage, stage, expected_seed, 3e11)
    assert row["status"] == "failed" and pd.isna(row["steps"])
