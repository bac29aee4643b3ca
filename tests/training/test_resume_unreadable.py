"""A run whose last.ckpt cannot be read starts from step 0 and ends in the record
a fresh run writes."""

from __future__ import annotations

import pytest

from scalestudy.study.specs import RunSpec
from scalestudy.training.task_run import run

from tests.support.cells import TASK

TIMING = {"wall_seconds", "tokens_per_second"}


def spec() -> RunSpec:
    return RunSpec.from_dict({
        "study": "t", "task": "listops", "arch": "transformer", "size": "xxs",
        "prior": "random", "seed": 5, "task_config": TASK,
        "train": {"max_steps": 4, "batch_size": 8, "warmup_steps": 1, "val_every": 2,
                  "protocol": "default"},
        "trainer": {"accelerator": "cpu", "threads": 1},
    })


@pytest.fixture(scope="module")
def fresh(data_dir, tmp_path_factory):
    """An uninterrupted run: its record and its last.ckpt's bytes."""
    out = tmp_path_factory.mktemp("fresh")
    record = run(spec(), data_dir, out)
    return record, (out / "last.ckpt").read_bytes()


def comparable(record: dict) -> dict:
    return {k: v for k, v in record.items() if k not in TIMING}


@pytest.mark.parametrize("damage", ["garbage", "truncated", "empty"])
def test_an_unreadable_last_checkpoint_restarts_from_step_0(data_dir, tmp_path, fresh, damage,
                                                            capsys):
    record, checkpoint = fresh
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    # A truncated checkpoint of this very spec (a kill mid-copy), or no checkpoint at all.
    content = {"garbage": b"not a checkpoint\n" * 50,
               "truncated": checkpoint[: len(checkpoint) // 2], "empty": b""}[damage]
    (run_dir / "last.ckpt").write_bytes(content)
    again = run(spec(), data_dir, run_dir)
    out = capsys.readouterr().out
    assert "cannot be read" in out and "starting from step 0" in out
    assert "resuming from" not in out
    assert again["status"] == "ok" and again["steps"] == 4
    assert comparable(again) == comparable(record)
    # The unreadable file was replaced by this run's own checkpoint.
    assert (run_dir / "last.ckpt").read_bytes() != content
