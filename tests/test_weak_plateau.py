"""The plateau rule's 2% gain is relative to the loss (training/plateau.py): the same
histories at two scales of loss reach their
plateau at the same step, whatever the loss's units."""

import pytest

from scalestudy.training.plateau import PLATEAU_GAIN, plateaued


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
