"""Learning-rate schedules: the factor of the peak rate at each optimiser step.

- `cosine` (the default): linear warm-up to the peak, then cosine decay to 10%
  of it at the last step.
- `wsd`, warmup-stable-decay (Hu et al. 2024, MiniCPM; Hägele et al. 2024,
  "Scaling Laws and Compute-Optimal Training Beyond Fixed Training
  Durations"): linear warm-up, the peak rate held, then a linear cooldown to
  zero over the last `decay_fraction` of the steps. Hägele et al. find that a
  short cooldown after a constant rate matches a cosine schedule of the same
  length, which lets one constant-rate run serve many budgets: each budget is
  a cooldown branched from the stable phase at its own step.

A schedule can also be cut short: `cooldown(step, length)` replaces what is
left of it by a linear decay from the factor it has reached at `step` to zero
over `length` steps (a run stopped at its plateau anneals before it ends).

A `Schedule` is a callable object, so torch's LambdaLR (modules.ScheduledLR)
keeps its fields in the scheduler's state dict, and a resumed run continues
the schedule (a cooldown begun included) where it stopped. Simplified against MiniCPM: its
decay is exponential; Hägele et al. compare linear and 1 - sqrt cooldowns, and
this one is linear.
"""

from __future__ import annotations

import math

SCHEDULES = ("cosine", "wsd")
COSINE_FLOOR = 0.1  # the cosine schedule ends at 10% of the peak


class Schedule:
    """The factor of the peak learning rate at each step (LambdaLR's lambda)."""

    def __init__(self, kind: str, warmup: int, total: int, decay_fraction: float = 0.2):
        if kind not in SCHEDULES:
            raise ValueError(f"schedule: got {kind!r}, accepted values: {', '.join(SCHEDULES)}")
        if not 0.0 < decay_fraction <= 1.0:
            raise ValueError(f"decay_fraction: got {decay_fraction}, accepted: in (0, 1]")
        self.kind, self.warmup, self.total = kind, warmup, total
        self.decay_fraction = decay_fraction
        # A cooldown begun early: (the step it starts at, its length, the factor it starts from).
        self.cooldown_start: int | None = None
        self.cooldown_length = 0
        self.cooldown_from = 1.0

    @property
    def decay_start(self) -> int:
        """The first step of a wsd schedule's cooldown (its stable phase ends there)."""
        return self.total - max(1, round(self.decay_fraction * self.total))

    @property
    def cooldown_begins(self) -> int:
        """The step a wsd schedule leaves its peak at: its decay start, or the
        end of warm-up when the decay would start inside it. Up to this step
        a wsd schedule of any length has the same factors, so a run of this
        length can start from a longer one's checkpoint here (training/branches.py)."""
        return max(self.decay_start, self.warmup)

    def planned(self, step: int) -> float:
        """The factor at `step` as the schedule was planned (no early cooldown)."""
        if step < self.warmup:
            return (step + 1) / self.warmup
        if self.kind == "cosine":
            progress = min(1.0, (step - self.warmup) / max(1, self.total - self.warmup))
            return COSINE_FLOOR + (1 - COSINE_FLOOR) * 0.5 * (1 + math.cos(math.pi * progress))
        start = self.cooldown_begins
        if step < start:
            return 1.0
        return max(0.0, (self.total - step) / max(1, self.total - start))

    def __call__(self, step: int) -> float:
        if self.cooldown_start is None or step < self.cooldown_start:
            return self.planned(step)
        left = self.cooldown_start + self.cooldown_length - step
        return self.cooldown_from * max(0.0, left / self.cooldown_length)

    @property
    def cooldown_end(self) -> int | None:
        """The step at which a cooldown begun early reaches zero (None: none begun)."""
        return None if self.cooldown_start is None else self.cooldown_start + self.cooldown_length

    def cooldown(self, step: int, length: int) -> int:
        """From `step` on, decay linearly from the factor reached there to zero
        over `length` steps; returns the step at which it reaches zero."""
        self.cooldown_from = self(step)
        self.cooldown_start, self.cooldown_length = step, max(1, length)
        return step + self.cooldown_length
