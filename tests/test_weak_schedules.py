"""A wsd schedule whose planned decay would start inside warm-up: warm-up runs to the
peak first and the cooldown starts from the peak
at the end of warm-up (schedules.Schedule.cooldown_begins), so a branch's fork
step (training/branches.py) is never inside warm-up either."""

import pytest

from scalestudy.study.specs import TrainConfig
from scalestudy.training.branches import cooldown_begins
from scalestudy.training.schedules import Schedule


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
