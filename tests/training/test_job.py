"""A job as the command runs it (training/job.py, training/run.py's execute): a
pretraining run that raises before it trains leaves a failed record that
names it as its record would have, its budget and seed included, as a
training run's does (tests/test_run_lock.py)."""

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

    monkeypatch.setattr(pretrain, "corpus", broken)
    record = job.pretrain(spec, tmp_path / "data", out_dir)
    assert record["status"] == "failed" and "no corpus" in record["error"]
    row = read_records(out_dir / "record.parquet").iloc[0]
    expected_seed = 3 if seed is None else seed
    assert (row["study"], row["task"], row["arch"], row["size"]) == (
        config["study"], corpus, "s4", "xs")
    assert (row["prior"], row["stage"], row["seed"], row["budget"]) == (
        stage, stage, expected_seed, 3e11)
    assert row["status"] == "failed" and pd.isna(row["steps"])


def test_a_record_is_named_by_its_spec_whatever_its_pretraining_s_record_says(data_dir,
                                                                            tmp_path):
    """Every record a run writes takes its identity from its spec
    (record_identity): a budgeted scratch_matched run, whose budget its spt
    pretraining spends, carries its cell's budget, so that the runs of two
    budgets are two records."""
    from scalestudy.records import failed_record, write_record

    from tests.support.cells import TASK

    config = copy.deepcopy(DECLARED_STUDY)
    config["grid"]["budgets"] = [1e11, 3e11]
    config["tasks"] = {"listops": TASK}
    config["train"].update(max_steps=4, batch_size=8, warmup_steps=1, val_every=2)
    config["trainer"].update(accelerator="cpu")
    run = grid.PretrainCell("spt", "listops", "transformer", "xxs", None, 3e11)
    pretraining = specs.PretrainSpec.from_dict(specs.pretrain_spec(typed(config), run))
    spt = tmp_path / run.directory
    write_record(dict(failed_record(pretraining.record_identity(), ValueError()), status="ok",
                      train_flops=1.0), spt / "record.parquet")
    cell = grid.Cell("listops", "transformer", "xxs", "scratch_matched", 1, 3e11)
    spec = specs.RunSpec.from_dict(specs.run_spec(typed(config), cell))
    record = job.train(spec, data_dir, tmp_path / cell.directory, spt)
    assert record["status"] == "ok" and record["steps"] == 5  # spt's one step matched
    identity = spec.placed(tmp_path / cell.directory).record_identity()
    assert {k: record[k] for k in identity} == identity
    assert (record["prior"], record["stage"], record["budget"]) == ("scratch_matched",
                                                                    "scratch", 3e11)
