"""The learning-rate schedules' values at hand-picked steps, written out by hand."""

import math

import pytest
import torch

from scalestudy.study.specs import TrainConfig
from scalestudy.training.branches import cooldown_begins
from scalestudy.training.schedules import Schedule


def test_cosine_warms_up_linearly_then_decays_to_a_tenth():
    s = Schedule("cosine", warmup=4, total=20)
    assert [s(i) for i in range(4)] == [0.25, 0.5, 0.75, 1.0]
    assert s(4) == pytest.approx(1.0)
    # Halfway through the decay (step 4 + 16/2): 0.1 + 0.9 * 0.5 * (1 + cos(pi/2)) = 0.55.
    assert s(12) == pytest.approx(0.55)
    assert s(20) == pytest.approx(0.1) and s(25) == pytest.approx(0.1)


def test_wsd_holds_the_peak_then_cools_down_linearly_to_zero():
    s = Schedule("wsd", warmup=2, total=20, decay_fraction=0.25)
    assert s.decay_start == 15  # the last 5 of 20 steps
    assert [s(i) for i in (0, 1, 2, 10, 14)] == [0.5, 1.0, 1.0, 1.0, 1.0]
    assert [s(i) for i in range(15, 21)] == [1.0, 0.8, 0.6, 0.4, 0.2, 0.0]
    assert s(30) == 0.0


def test_an_early_cooldown_decays_from_where_the_schedule_stands():
    s = Schedule("cosine", warmup=0, total=100)
    reached = s(40)  # 0.1 + 0.9 * 0.5 * (1 + cos(0.4 pi))
    assert reached == pytest.approx(0.1 + 0.45 * (1 + math.cos(0.4 * math.pi)))
    assert s.cooldown(40, 10) == 50
    assert s(39) == s.planned(39)  # before the cooldown: unchanged
    assert s(40) == pytest.approx(reached)
    assert s(45) == pytest.approx(reached / 2) and s(50) == 0.0 and s(60) == 0.0


def test_the_optimiser_follows_the_schedule_and_a_resumed_scheduler_keeps_the_cooldown():
    """Through torch's LambdaLR, as the training loop uses it: the rate at each
    step is peak x factor, and the scheduler's state dict carries the schedule's
    fields (a cooldown begun included) to a fresh scheduler."""
    param = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([param], lr=0.5)
    schedule = Schedule("wsd", warmup=1, total=10, decay_fraction=0.5)
    lr = torch.optim.lr_scheduler.LambdaLR(opt, schedule)
    seen = []
    for _ in range(4):
        seen.append(opt.param_groups[0]["lr"])
        opt.step()
        lr.step()
    assert seen == [0.5, 0.5, 0.5, 0.5]
    schedule.cooldown(4, 4)
    state = lr.state_dict()
    fresh_opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.5)
    fresh = torch.optim.lr_scheduler.LambdaLR(fresh_opt, Schedule("wsd", 1, 10, 0.5))
    fresh.load_state_dict(state)
    assert fresh.lr_lambdas[0].cooldown_start == 4
    assert [fresh.lr_lambdas[0](i) * 0.5 for i in (4, 5, 8)] == [0.5, 0.375, 0.0]


def test_a_scheduler_started_at_a_step_keeps_its_own_length():
    """What a wsd branch does at its trunk's fork (ScheduledLR.start_at): the
    optimiser's rates those of the step under the branch's own schedule, and
    every later step's too; its state dict then holds the branch's fields."""
    from scalestudy.training.modules import ScheduledLR

    def scheduler(total):
        opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.5)
        return opt, ScheduledLR(opt, Schedule("wsd", warmup=2, total=total,
                                              decay_fraction=0.5))

    opt, branch = scheduler(12)
    branch.start_at(6)  # the branch's cooldown begins at 12 - 6
    assert branch.last_epoch == 6 and branch.get_last_lr() == [0.5 * branch.schedule(6)]
    seen = []
    for _ in range(6):
        seen.append(opt.param_groups[0]["lr"])
        opt.step()
        branch.step()
    whole_opt, whole = scheduler(12)  # the same schedule stepped from step 0
    expected = []
    for step in range(12):
        if step >= 6:
            expected.append(whole_opt.param_groups[0]["lr"])
        whole_opt.step()
        whole.step()
    assert seen == expected and seen[-1] == 0.5 / 6
    assert branch.state_dict()["lr_lambdas"][0]["total"] == 12


def test_a_schedule_names_what_it_accepts():
    with pytest.raises(ValueError, match="schedule: got 'step', accepted values: cosine, wsd"):
        Schedule("step", 1, 10)
    with pytest.raises(ValueError, match="decay_fraction"):
        Schedule("wsd", 1, 10, decay_fraction=0.0)


def _committed_warmup_cosine(warmup: int, total: int):
    """The schedule the committed studies' records were trained with (the
    training code's before train.schedule), copied here as the oracle."""

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        progress = min(1.0, (step - warmup) / max(1, total - warmup))
        return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress))

    return factor


@pytest.mark.parametrize("warmup,total", [(9, 90), (2, 12), (0, 7), (4, 4), (50, 3000)])
def test_the_default_schedule_gives_the_committed_rates_bitwise(warmup, total):
    """train.schedule's default (cosine) through the optimiser the loop uses:
    every step's learning rate equal, bit for bit, to the committed studies'."""
    from scalestudy.study.specs import TrainConfig
    from scalestudy.training.modules import StudyModule

    cfg = TrainConfig(lr=0.002, warmup_steps=warmup, max_steps=total)
    module = StudyModule(torch.nn.Linear(3, 2))
    optimizer, scheduler = module.configure_optimizer(cfg)
    old = torch.optim.AdamW(torch.nn.Linear(3, 2).parameters(), lr=0.002)
    reference = torch.optim.lr_scheduler.LambdaLR(old, _committed_warmup_cosine(warmup, total))
    for _ in range(total + 3):
        assert optimizer.param_groups[0]["lr"] == old.param_groups[0]["lr"]
        optimizer.step(), scheduler.step(), old.step(), reference.step()


def test_a_spec_at_the_default_schedule_keeps_its_committed_hash():
    """A spec that states the new train keys at their defaults hashes as one
    written before them (the committed records' config_hash, resume's check)."""
    from scalestudy.study.specs import RunSpec

    base = {"study": "t", "task": "listops", "arch": "transformer", "size": "xxs",
            "prior": "random", "seed": 0, "train": {"max_steps": 12}}
    stated = {**base, "train": {"max_steps": 12, "schedule": "cosine", "decay_fraction": 0.3,
                                "budget_unit": "tokens", "forks": [], "branch_of": None}}
    assert RunSpec.from_dict(stated).config_hash() == RunSpec.from_dict(base).config_hash()
    wsd = {**base, "train": {"max_steps": 12, "schedule": "wsd"}}
    assert RunSpec.from_dict(wsd).config_hash() != RunSpec.from_dict(base).config_hash()


# --------------------------------------------------------------------------- wsd inside warm-up
# A wsd schedule whose planned decay would start inside warm-up: warm-up runs to the
# peak first and the cooldown starts from the peak
# at the end of warm-up (schedules.Schedule.cooldown_begins), so a branch's fork
# step (training/branches.py) is never inside warm-up either.


def test_a_decay_planned_inside_warm_up_starts_at_the_peak_after_it():
    # decay_fraction 0.5 of 10 steps plans the decay from step 5, inside the 8 warm-up steps.
    s = Schedule("wsd", warmup=8, total=10, decay_fraction=0.5)
    assert s.decay_start == 5
    assert s.cooldown_begins == 8
    assert [s(i) for i in range(8)] == [(i + 1) / 8 for i in range(8)]  # warm-up untouched
    # From the peak at the end of warm-up, linearly to zero over the 2 steps left.
    assert [s(i) for i in range(8, 11)] == [1.0, 0.5, 0.0]


@pytest.mark.parametrize("warmup,total,fraction", [(8, 10, 0.5), (3, 4, 0.9), (5, 6, 1.0),
                                                    (2, 20, 0.25), (9, 90, 0.2)])
def test_the_wsd_factor_rises_to_the_peak_and_only_then_decays(warmup, total, fraction):
    s = Schedule("wsd", warmup=warmup, total=total, decay_fraction=fraction)
    factors = [s(i) for i in range(total + 1)]
    assert max(factors) == 1.0 and factors[warmup] == 1.0
    rising, falling = factors[:s.cooldown_begins + 1], factors[s.cooldown_begins:]
    assert rising == sorted(rising) and falling == sorted(falling, reverse=True)
    assert s.cooldown_begins >= warmup and factors[-1] == 0.0


def test_a_branch_forks_after_its_warm_up():
    cfg = TrainConfig(schedule="wsd", warmup_steps=8, max_steps=10, decay_fraction=0.5)
    assert cooldown_begins(cfg) == 8
