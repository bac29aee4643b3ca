"""The learning-rate schedule and gradient clipping as the training loop applies
them, seen from the optimiser itself during a short run: a
pre-step hook records each step's learning rate and gradient norm."""

from __future__ import annotations

import math

import pytest
import torch
from cells import TASK

from scalestudy.study.specs import RunSpec
from scalestudy.training import modules
from scalestudy.training.task import run

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
