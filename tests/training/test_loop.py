"""The learning-rate schedule and gradient clipping as the training loop applies
them, seen from the optimiser itself during a short run: a
pre-step hook records each step's learning rate and gradient norm."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest
import torch

from scalestudy.study.specs import RunSpec
from scalestudy.training import loop, modules
from scalestudy.training.task_run import run

from tests.support.cells import TASK

LR, WARMUP, STEPS, CLIP = 2e-3, 2, 6, 0.05


def spec(**train_cfg) -> RunSpec:
    return RunSpec.from_dict({
        "study": "t", "task": "listops", "arch": "transformer", "size": "xxs",
        "prior": "random", "seed": 3, "task_config": TASK,
        "train": {"max_steps": STEPS, "batch_size": 8, "warmup_steps": WARMUP, "val_every": 3,
                  "lr": LR, "grad_clip": CLIP, "protocol": "default", **train_cfg},
        "trainer": {"accelerator": "cpu", "threads": 1},
    })


def lr_factor(step: int) -> float:
    """Warm-up then cosine to 10%, written out for WARMUP = 2, STEPS = 6: steps 0, 1
    warm up (1/2, 2/2); from step 2 the decay runs over 4 steps."""
    return {0: 0.5, 1: 1.0, 2: 1.0,
            3: 0.1 + 0.45 * (1 + math.cos(math.pi / 4)),
            4: 0.1 + 0.45 * (1 + math.cos(math.pi / 2)),
            5: 0.1 + 0.45 * (1 + math.cos(3 * math.pi / 4)),
            6: 0.1}[step]


@pytest.fixture
def observed(monkeypatch):
    """(learning rate, total gradient norm) at each optimiser step of a run."""
    steps: list[tuple[float, float]] = []
    original = modules.StudyModule.configure_optimizer

    def configure(self, *args):
        optimizer, schedule = original(self, *args)

        def before_step(opt, args, kwargs):
            grads = [p.grad for group in opt.param_groups for p in group["params"]
                     if p.grad is not None]
            norm = torch.linalg.vector_norm(torch.stack([g.norm() for g in grads])).item()
            steps.append((opt.param_groups[0]["lr"], norm))

        optimizer.register_step_pre_hook(before_step)
        return optimizer, schedule

    monkeypatch.setattr(modules.StudyModule, "configure_optimizer", configure)
    return steps


def test_the_loop_steps_the_schedule_every_step(data_dir, tmp_path, observed):
    record = run(spec(), data_dir, tmp_path / "run")
    assert record["status"] == "ok" and record["steps"] == STEPS
    lrs = [lr for lr, _ in observed]
    assert lrs == pytest.approx([LR * lr_factor(k) for k in range(STEPS)], rel=1e-12)
    # The checkpoint holds the schedule at the run's last step, and the rate of the next.
    last = torch.load(tmp_path / "run" / "last.ckpt", weights_only=False)
    assert last["global_step"] == STEPS and last["schedule"]["last_epoch"] == STEPS
    assert last["optimizer"]["param_groups"][0]["lr"] == pytest.approx(LR * lr_factor(STEPS))


def test_the_loop_clips_the_gradient_norm_to_grad_clip(data_dir, tmp_path, observed):
    """grad_clip 0.05 is far below an untrained model's gradient norm, so every
    step's update is made from gradients of norm exactly grad_clip."""
    run(spec(), data_dir, tmp_path / "run")
    norms = [norm for _, norm in observed]
    assert len(norms) == STEPS
    assert norms == pytest.approx([CLIP] * STEPS, rel=1e-4)


def test_without_clipping_the_gradients_are_left_alone(data_dir, tmp_path, observed):
    """grad_clip 0 turns clipping off: the norms are the raw ones, above 0.05 here
    (which is what makes the clipped run above a test of clipping)."""
    run(spec(grad_clip=0.0), data_dir, tmp_path / "run")
    norms = [norm for _, norm in observed]
    assert len(norms) == STEPS and min(norms) > 2 * CLIP


# --------------------------------------------------------------------- validation and micro-batches
# The training loop (training/loop.py):
#
# -------------------------- a budgeted run validates at its budget's last step even where val_every
#   does not divide its steps, so its last validation (metrics.csv, a
#   pretraining's best checkpoint) is of the weights it ends with;
# --------------------- a step's train loss under gradient accumulation (trainer.micro_batch) is the
#   mean over its micro-batches, the whole batch's, not the first micro-batch's.


def seq_len(data_dir) -> int:
    return json.loads((data_dir / "manifest.json").read_text())["seq_len"]


def run_spec(train: dict, **trainer) -> RunSpec:
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
    record = run(run_spec({"budget": budget, "budget_unit": "tokens"}), data_dir, tmp_path / "run")
    assert record["status"] == "ok" and record["steps"] == steps
    assert validated == [4, 8, 10]
    history = pd.read_csv(tmp_path / "run" / "metrics.csv")
    val = history.dropna(subset=["val_loss"])
    assert val["step"].max() == steps
    # The record's validation loss is the last validation's.
    assert record["val_loss"] == pytest.approx(val.loc[val["step"] == steps, "val_loss"].iloc[-1])


def test_an_unbudgeted_run_validates_every_val_every_steps_only(data_dir, tmp_path, validated):
    record = run(run_spec({"max_steps": 6}), data_dir, tmp_path / "run")
    assert record["steps"] == 6 and validated == [4]


def test_the_train_loss_under_micro_batches_is_the_whole_batchs(data_dir, tmp_path):
    """Micro-batches of 2 of a batch of 8 (dropout 0): the same steps to float
    rounding, so the same recorded train loss, the mean of the four micro-batches'."""
    train = {"max_steps": 3, "val_every": 3}
    whole = run(run_spec(train), data_dir, tmp_path / "whole")
    parts = run(run_spec(train, micro_batch=2), data_dir, tmp_path / "parts")
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
    run(run_spec({"max_steps": 2, "val_every": 2}, micro_batch=2), data_dir, tmp_path / "run")
    assert [len(s) for s in seen] == [4, 4]
    assert returned == pytest.approx([sum(s) / len(s) for s in seen], rel=1e-6)
    assert all(max(s) > min(s) for s in seen)  # the micro-batches' losses differ
