"""One training cell end to end: a valid record, counted FLOPs, determinism."""

import pandas as pd
import pytest

from scalestudy import tasks
from scalestudy.records import read_records
from scalestudy.train import RunSpec, run

TASK = {"n_train": 64, "n_val": 16, "n_test": 16, "max_depth": 3, "max_args": 3,
        "min_length": 3, "max_length": 24}


def spec(**train):
    return RunSpec.from_dict({
        "study": "t", "task": "listops", "arch": "transformer", "size": "xxs",
        "prior": "random", "seed": 7, "task_config": TASK,
        "train": {"max_steps": 6, "batch_size": 8, "warmup_steps": 2, "val_every": 3, **train},
        "trainer": {"accelerator": "cpu", "threads": 1},
    })


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("data") / "listops"
    tasks.prepare("listops", TASK, path)
    return path


def test_one_cell_writes_a_valid_record(data_dir, tmp_path):
    record = run(spec(), data_dir, tmp_path / "run")
    frame = read_records(tmp_path / "run" / "record.parquet")
    row = frame.iloc[0]
    assert row["status"] == "ok" and row["stage"] == "scratch" and row["steps"] == 6
    assert row["n_params"] > row["n_params_nonembed"] > 0
    assert row["flops_per_step"] > 0
    assert row["train_flops"] == pytest.approx(6 * row["flops_per_step"])
    assert 0.0 <= row["test_acc"] <= 1.0 and 0.0 <= row["val_acc"] <= 1.0
    assert row["train_loss"] > 0 and row["tokens_seen"] > 0
    assert (row["depth"], row["width"], row["heads"], row["d_ff"]) == (2, 16, 2, 64)
    assert row["config_hash"] == record["config_hash"]
    history = pd.read_csv(tmp_path / "run" / "metrics.csv")
    assert {"train_loss", "val_loss", "val_acc", "step"} <= set(history.columns)
    assert (tmp_path / "run" / "last.ckpt").exists()


def test_counted_flops_are_close_to_6nd(data_dir, tmp_path):
    small = run(spec(max_steps=1), data_dir, tmp_path / "a")
    # Counted FLOPs include attention; the 6 N D rule of thumb ignores it.
    tokens = 8 * 24
    assert 0.8 < small["flops_per_step"] / (6 * small["n_params_nonembed"] * tokens) < 2.5


def test_same_config_and_seed_give_the_same_record(data_dir, tmp_path):
    a = run(spec(), data_dir, tmp_path / "a")
    b = run(spec(), data_dir, tmp_path / "b")
    timing = {"wall_seconds", "tokens_per_second"}
    assert {k: v for k, v in a.items() if k not in timing} == {
        k: v for k, v in b.items() if k not in timing
    }


def test_non_finite_loss_is_recorded_as_diverged(data_dir, tmp_path):
    record = run(spec(lr=1e30, grad_clip=0.0), data_dir, tmp_path / "run")
    assert record["status"] == "diverged"
    assert record["diverged_step"] is not None and record["diverged_step"] < 6


def test_unknown_train_key_names_the_field():
    with pytest.raises(ValueError, match=r"train: unknown keys \['epochs'\]"):
        RunSpec.from_dict({"study": "t", "task": "listops", "arch": "transformer",
                           "size": "xxs", "prior": "random", "seed": 0,
                           "train": {"epochs": 3}})
