"""A study's design as the planner varies it, `Design`: its sizes (a window of
the ladder: how many, over how many decades) and seeds (every architecture
runs the same seeds, so its contrasts pair), over a grid's architectures,
priors and tasks; the candidate designs; and the cheapest that reaches a
power."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

from ...ladder import CPU_SIZES, shape_for
from ...priors import PRIORS
from ...stages import STAGES


@dataclass(frozen=True)
class Design:
    sizes: tuple[str, ...]
    seeds: int
    archs: tuple[str, ...]
    priors: tuple[str, ...]
    tasks: tuple[str, ...]
    per_seed: bool = True  # each finetuning seed its own pretraining run (pretrain.seeds)
    protocol: str = "default"

    def runs(self) -> list[tuple[str, int]]:
        """(size, seed) of each run of a cell, size-major: the draws' columns."""
        return [(size, seed) for size in self.sizes for seed in range(self.seeds)]

    @property
    def upstream_seeds(self) -> tuple[int, ...]:
        return tuple(range(self.seeds)) if self.per_seed else (0,)

    @staticmethod
    def prior_pretrains(prior: str) -> bool:
        return PRIORS[prior].pretrain is not None

    @property
    def pretrains_upstream(self) -> bool:
        """Whether a prior of the grid finetunes a stage that measures the upstream loss."""
        return any(PRIORS[p].pretrain is not None
                   and STAGES[PRIORS[p].pretrain].measures_upstream_loss for p in self.priors)

    @property
    def decades(self) -> float:
        """The decades of non-embedding parameters its sizes span."""
        def params(size):
            shape = shape_for(size, self.protocol)
            return shape.depth * (4 * shape.width**2 + 2 * shape.width * shape.d_ff)

        return math.log10(params(self.sizes[-1]) / params(self.sizes[0]))

    def text(self) -> str:
        return (f"sizes {', '.join(self.sizes)} ({self.decades:.1f} decades), "
                f"{self.seeds} seeds")


def size_windows(within: tuple[str, ...] = (), ladder: tuple[str, ...] = CPU_SIZES,
                 min_sizes: int = 3) -> list[tuple[str, ...]]:
    """Candidate size sets: every run of consecutive ladder sizes, and every
    other size, of at least `min_sizes` (three: a line's fit needs them);
    `within`: only between the smallest and the largest of those sizes."""
    if within:
        inside = [s for s in ladder if s in within]
        ladder = ladder[ladder.index(inside[0]):ladder.index(inside[-1]) + 1] if inside else ()
    out = []
    for step in (1, 2):
        for k in range(min_sizes, len(ladder) + 1):
            for start in range(len(ladder)):
                window = ladder[start::step][:k]
                if len(window) == k and window not in out:
                    out.append(window)
    return out


@dataclass(frozen=True)
class Planned:
    """A design with its power (the probability the claims are decided) and cost."""

    design: Design
    power: float
    hours: float  # wall-clock hours on the study's cores


def cheapest(base: Design, power_of: Callable[[Design], float],
             hours_of: Callable[[Design], float], target: float, max_seeds: int,
             budget_hours: float = 0.0, windows: Iterable[tuple[str, ...]] | None = None
             ) -> tuple[Planned | None, Planned | None]:
    """The cheapest design over the size windows and 2..max_seeds seeds whose
    power reaches `target` (within `budget_hours` when it is > 0), and the most
    powerful design seen within the budget (to say what is nearest). Power
    rises with seeds, so each window's seeds are searched upward until the
    target is reached or the cost passes the cheapest found."""
    best = nearest = None
    for window in windows or size_windows():
        for seeds in range(2, max_seeds + 1):
            design = replace(base, sizes=tuple(window), seeds=seeds)
            hours = hours_of(design)
            if (budget_hours and hours > budget_hours) or (best and hours >= best.hours):
                break
            p = power_of(design)
            planned = Planned(design, p, hours)
            if nearest is None or (p, -hours) > (nearest.power, -nearest.hours):
                nearest = planned
            if p >= target:
                best = planned
                break
    return best, nearest
