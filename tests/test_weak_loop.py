"""The training loop's weak spots (training/loop.py):

- a budgeted run validates at its budget's last step even where val_every
  does not divide its steps, so its last validation (metrics.csv, a
  pretraining's best checkpoint) is of the weights it ends with;
- a step's train loss under gradient accumulation (trainer.micro_batch) is the
  mean over its micro-batches, the whole batch's, not the first micro-batch's.
"""

import json

import pandas as pd
import pytest
from cells import TASK

from scalestudy.study.specs import RunSpec
from scalestudy.training import loop, modules
from scalestudy.training.task import run


def seq_len(data_dir) -> int:
    return json.loads((data_dir / "manifest.json").read_text())["seq_len"]


def spec(train: dict, **trainer) -> RunSpec:
    return RunSpec.from_dict({
        "study": "t", "task": "listops", "arch": "transformer", "size": "xxs",
        "prior": "random", "seed": 5, "task_config": TASK,
        "train": {"max_steps": 99, "batch_size": 8, "warmup_steps": 2, "val_every": 4,
                  "protocol": "default", **train},
        "trainer": {"accelerator": "cpu", "threads": 1, **trainer},
    })


@pytest.fixture
def validated(monkeypatch):
    """The steps at which the loop validated."""
    steps: list[int] = []
    original = loop.TrainingLoop.validate

    def validate(self):
        steps.append(self.step)
        return original(self)

    monkeypatch.setattr(loop.TrainingLoop, "validate", validate)
    return steps


def test_a_budgeted_run_validates_at_its_last_step(data_dir, tmp_path, validated):
    steps = 10  # val_every 4 does not divide it
    budget = float(steps * 8 * seq_len(data_dir))  # tokens: exactly 10 steps
    record = run(spec({"budget": budget, "budget_unit": "tokens"}), data_dir, tmp_path / "run")
    assert record["status"] == "ok" and record["steps"] == steps
    assert validated == [4, 8, 10]
    history = pd.read_csv(tmp_path / "run" / "metrics.csv")
    val = history.dropna(subset=["val_loss"])
    assert val["step"].max() == steps
    # The record's validation loss is the last validation's.
    assert record["val_loss"] == pytest.approx(val.loc[val["step"] == steps, "val_loss"].iloc[-1])


def test_an_unbudgeted_run_validates_every_val_every_steps_only(data_dir, tmp_path, validated):
    record = run(spec({"max_steps": 6}), data_dir, tmp_path / "run")
    assert record["steps"] == 6 and validated == [4]


def test_the_train_loss_under_micro_batches_is_the_whole_batchs(data_dir, tmp_path):
    """Micro-batches of 2 of a batch of 8 (dropout 0): the same steps to float
    rounding, so the same recorded train loss, the mean of the four micro-batches'."""
    train = {"max_steps": 3, "val_every": 3}
    whole = run(spec(train), data_dir, tmp_path / "whole")
    parts = run(spec(train, micro_batch=2), data_dir, tmp_path / "parts")
    assert (whole["micro_batch"], parts["micro_batch"]) == (8, 2)
    assert parts["train_loss"] == pytest.approx(whole["train_loss"], rel=1e-4)


def test_a_steps_train_loss_is_the_mean_of_its_micro_batches(data_dir, tmp_path, monkeypatch):
    """The loss training_step returns, against the micro-batches' own losses."""
    losses: list[float] = []  # every micro-batch's loss, in order
    seen: list[list[float]] = []  # per step
    returned: list[float] = []
    own_loss, step = modules.Classifier.training_loss, loop.TrainingLoop.training_step

    def training_loss(self, batch):
        loss, aux = own_loss(self, batch)
        losses.append(float(loss.detach()))
        return loss, aux

    def training_step(self, batch):
        losses.clear()
        out = step(self, batch)
        seen.append(list(losses))
        returned.append(float(out))
        return out

    monkeypatch.setattr(modules.Classifier, "training_loss", training_loss)
    monkeypatch.setattr(loop.TrainingLoop, "training_step", training_step)
    run(spec({"max_steps": 2, "val_every": 2}, micro_batch=2), data_dir, tmp_path / "run")
    assert [len(s) for s in seen] == [4, 4]
    assert returned == pytest.approx([sum(s) / len(s) for s in seen], rel=1e-6)
    assert all(max(s) > min(s) for s in seen)  # the micro-batches' losses differ
