"""When a run has converged: the plateau rule of `train.until: plateau`.

A fit stops at its validation loss's plateau: when, over the last
PLATEAU_WINDOW (a fifth) of its steps, the best validation loss improved by
under PLATEAU_GAIN (2%, relative). Judged at every validation (loop.TrainingLoop.validate)
from the PLATEAU_MIN_VALIDATIONS-th validation interval on, so that the window
always spans at least one interval; max_steps stays the cap.

Torch-free: the config checks (scalestudy.study) read the constants.
"""

from __future__ import annotations

PLATEAU_GAIN = 0.02
PLATEAU_WINDOW = 0.2
PLATEAU_MIN_VALIDATIONS = 5


def plateaued(history: list[tuple[int, float]], val_every: int) -> bool:
    """Whether a validation history [(step, val_loss), ...], in step order,
    has reached its plateau. A loss that got worse (overfitting) is no
    improvement; a non-finite one is a plateau (nothing more to gain)."""
    step = history[-1][0]
    if step < PLATEAU_MIN_VALIDATIONS * val_every:
        return False
    horizon = (1 - PLATEAU_WINDOW) * step
    best_then = min(loss for s, loss in history if s <= horizon)
    best_now = min(loss for _, loss in history)
    return not best_then - best_now >= PLATEAU_GAIN * abs(best_then)
