"""The planner's options, declared once (analysis/options.py): `scalestudy plan`
takes its options and defaults from them. Light."""

from __future__ import annotations

from dataclasses import dataclass

from ..options import Bootstrap, restated, setting


@dataclass(frozen=True)
class PlanOptions:
    """The planning stage's (plan/stage.py)."""

    power: float = setting(0.8, """the power a design must reach: the probability that the
        study decides the claim (holds or does not hold) when the pilot's effects are true""")
    n_sims: int = setting(2000, "simulated studies per design and claim")
    ci: float = restated(Bootstrap, "ci", "coverage of the claims' intervals (the study's fit.ci)")
    seed: int = restated(Bootstrap, "seed", "seed of the simulations")
    max_seeds: int = setting(12, "the most seeds a design may run")
    extrapolate: bool = setting(False, """let a design run sizes beyond the pilot's (its laws
        extrapolated there); by default a design's sizes lie within the pilot's""", cli=False)
    budget_hours: float = setting(0.0, """the most wall-clock hours a design may take on the
        study's cores (0: no limit)""")
    cores: int = setting(2, "the cores the study runs on (jobs at a time)")
