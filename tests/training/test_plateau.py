"""A run that stops at its plateau is annealed first: the
plateau starts a linear cooldown of the learning rate to zero over
train.decay_fraction x the steps so far, within max_steps, and the record says
where the cooldown began and the last step's learning rate.

The plateau rule itself is tested at the end of this file; here it is replaced by one
that fires at a chosen step, so that what the loop does after it is exact."""

from __future__ import annotations

import math
import os
import signal

import pytest

from scalestudy.study.plateau import PLATEAU_GAIN, plateaued
from scalestudy.study.specs import RunSpec
from scalestudy.training import loop, modules
from scalestudy.training.task_run import run

from tests.support.cells import TASK

LR, WARMUP, STEPS = 2e-3, 2, 20
TIMING = {"wall_seconds", "tokens_per_second"}


def cosine(step: int) -> float:
    """Warm-up over 2 steps, then cosine to 10% at step 20, written out."""
    if step < WARMUP:
        return (step + 1) / WARMUP
    return 0.1 + 0.45 * (1 + math.cos(math.pi * (step - WARMUP) / (STEPS - WARMUP)))


def spec(**train_cfg) -> RunSpec:
    return RunSpec.from_dict({
        "study": "t", "task": "listops", "arch": "transformer", "size": "xxs",
        "prior": "random", "seed": 3, "task_config": TASK,
        "train": {"max_steps": STEPS, "batch_size": 8, "warmup_steps": WARMUP, "val_every": 2,
                  "lr": LR, "protocol": "default", "until": "plateau",
                  "decay_fraction": 0.5, **train_cfg},
        "trainer": {"accelerator": "cpu", "threads": 1},
    })


@pytest.fixture
def plateau_at(monkeypatch):
    """Make the plateau rule fire at the first validation at or after `step`."""
    def at(step: int):
        monkeypatch.setattr(loop, "plateaued", lambda history, _: history[-1][0] >= step)
    return at


@pytest.fixture
def lrs(monkeypatch):
    """The learning rate of each optimiser step, seen by the optimiser."""
    seen: list[float] = []
    original = modules.StudyModule.configure_optimizer

    def configure(self, *args):
        optimizer, schedule = original(self, *args)
        optimizer.register_step_pre_hook(
            lambda opt, a, k: seen.append(opt.param_groups[0]["lr"]))
        return optimizer, schedule

    monkeypatch.setattr(modules.StudyModule, "configure_optimizer", configure)
    return seen


def test_the_plateau_starts_a_cooldown_of_its_fraction_of_the_steps(
        data_dir, tmp_path, plateau_at, lrs):
    plateau_at(6)  # cooldown: ceil(0.5 x 6) = 3 steps, the run ends at step 9
    record = run(spec(), data_dir, tmp_path / "run")
    start = cosine(6)
    assert lrs[:6] == pytest.approx([LR * cosine(k) for k in range(6)], rel=1e-12)
    assert lrs[6:] == pytest.approx([LR * start, LR * start * 2 / 3, LR * start / 3],
                                    rel=1e-12)
    assert record["status"] == "ok" and record["steps"] == 9
    assert record["stopped_by"] == "plateau" and record["plateau_step"] == 6
    assert record["final_lr"] == pytest.approx(LR * start / 3, rel=1e-12)


def test_a_plateau_near_the_cap_cools_down_by_max_steps(data_dir, tmp_path, plateau_at, lrs):
    plateau_at(18)  # ceil(0.5 x 18) = 9 steps wanted, 2 left
    record = run(spec(), data_dir, tmp_path / "run")
    assert record["steps"] == STEPS and record["stopped_by"] == "plateau"
    assert lrs[18:] == pytest.approx([LR * cosine(18), LR * cosine(18) / 2], rel=1e-12)
    assert record["plateau_step"] == 18


def test_a_run_without_a_plateau_ends_at_max_steps_on_its_schedule(
        data_dir, tmp_path, plateau_at, lrs):
    plateau_at(10_000)
    record = run(spec(), data_dir, tmp_path / "run")
    assert record["steps"] == STEPS and record["stopped_by"] == "max_steps"
    assert record["plateau_step"] is None or math.isnan(record["plateau_step"])
    assert lrs == pytest.approx([LR * cosine(k) for k in range(STEPS)], rel=1e-12)
    assert record["final_lr"] == pytest.approx(LR * cosine(STEPS - 1), rel=1e-12)


def test_a_run_stopped_during_its_cooldown_resumes_to_the_unbroken_record(
        data_dir, tmp_path, plateau_at, monkeypatch):
    plateau_at(6)
    unbroken = run(spec(), data_dir, tmp_path / "unbroken")

    def stop(self):
        if self.step == 7:  # one step into the cooldown
            os.kill(os.getpid(), signal.SIGTERM)

    with monkeypatch.context() as killed:
        killed.setattr(loop.TrainingLoop, "after_step", stop)
        with pytest.raises(SystemExit):
            run(spec(), data_dir, tmp_path / "run")
    monkeypatch.setattr(loop, "plateaued", lambda *_: False)  # the cooldown is the checkpoint's
    resumed = run(spec(), data_dir, tmp_path / "run")

    def comparable(record):
        return {k: ("nan" if isinstance(v, float) and math.isnan(v) else v)
                for k, v in dict(record).items() if k not in TIMING}

    assert comparable(resumed) == comparable(unbroken)
    assert resumed["steps"] == 9 and resumed["plateau_step"] == 6


# --------------------------------------------------------------------------- the plateau rule
# The plateau rule's 2% gain is relative to the loss (study/plateau.py): the same
# histories at two scales of loss reach their
# plateau at the same step, whatever the loss's units.


def history(losses, val_every=10):
    return [(val_every * (i + 1), loss) for i, loss in enumerate(losses)]


# 100 steps: the window is the last fifth, so "then" is the best up to step 80.
GAIN_1PC = [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.995, 0.99]  # 1%: a plateau
GAIN_5PC = [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.97, 0.95]  # 5%: still improving


@pytest.mark.parametrize("scale", [0.01, 0.1, 1.0, 10.0, 100.0])
def test_the_gain_is_relative_at_every_scale_of_loss(scale):
    assert plateaued(history([scale * x for x in GAIN_1PC]), val_every=10)
    assert not plateaued(history([scale * x for x in GAIN_5PC]), val_every=10)


def test_an_absolute_gain_of_the_threshold_is_not_the_rule():
    """A loss of 10 that gains 0.1 (1%, ten times PLATEAU_GAIN in absolute
    terms) has plateaued; a loss of 0.1 that gains 0.01 (10%, under
    PLATEAU_GAIN in absolute terms) has not."""
    big = history([10.0] * 8 + [9.95, 9.9])
    small = history([0.1] * 8 + [0.095, 0.09])
    assert 9.9 < 10.0 - PLATEAU_GAIN and 0.1 - 0.09 < PLATEAU_GAIN
    assert plateaued(big, val_every=10)
    assert not plateaued(small, val_every=10)
