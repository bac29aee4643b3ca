"""The planning stage (analysis/stages.py: `plan`, no study runs it): for every
claim a candidate design can check, its power under the claims' own rules and
the cheapest design that reaches the stated power (`plan`), and the preset of
a design (`preset`). `scalestudy plan` (cli/commands.py) hands in the cost of
a design (study/costs.py, calibrated on the pilot's wall time).

Power is the probability that a study of the design decides the claim (holds
or does not hold) when the model is true: the pilot's effects and noise, or
the noise stated. A claim with a rule in rules.py is simulated as arrays
(`n_sims` studies); any other by simulating whole run records and running the
claim itself (`slow_sims` studies, n_boot 200), which is also how
tests/analysis/plan checks the fast rules.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from ..claims import CLAIMS
from ..claims.check import FAILS, HOLDS, NO_DATA, Evidence
from .design import Design, Planned, cheapest, size_windows
from .model import Model
from .options import PlanOptions
from .rules import CODES, F, H, rule

SLOW_BOOT = 200  # the claims' bootstrap replicates in a simulated record study


@dataclass(frozen=True)
class Power:
    """Shares of simulated studies by the claim's verdict."""

    holds: float
    fails: float
    no_data: float = 0.0

    @property
    def decided(self) -> float:
        return self.holds + self.fails

    def text(self) -> str:
        return (f"{self.decided:.2f} (holds {self.holds:.2f}, does not hold "
                f"{self.fails:.2f})")


@dataclass(frozen=True)
class ClaimPlan:
    claim: str
    why_not: str  # why the design cannot check it ("" where it can)
    how: str  # "fast" (rules.py) or "records" (the claim on simulated records)
    power: Power | None  # on the candidate design
    cheapest: Planned | None  # the cheapest design reaching the power
    nearest: Planned | None  # the most powerful within the budget
    cheapest_power: Power | None = None  # the cheapest design's, by verdict


def simulated_power(claim: str, model: Model, design: Design, n: int,
                    seed: int = PlanOptions.seed, ci: float = PlanOptions.ci,
                    n_boot: int = SLOW_BOOT) -> Power:
    """The claim itself (claims/) on `n` studies of whole simulated records."""
    rng = np.random.default_rng(seed)
    got = []
    for i in range(n):
        runs = model.records(design, rng)
        study = Evidence.of(runs, pd.DataFrame(), n_boot=n_boot, seed=seed + i, ci=ci)
        got.append(CLAIMS[claim].checks(study)[0].claim_verdict)
    return Power(got.count(HOLDS) / n, got.count(FAILS) / n, got.count(NO_DATA) / n)


def fast_power(claim: str, model: Model, design: Design, n: int,
               seed: int = PlanOptions.seed, ci: float = PlanOptions.ci) -> Power:
    codes = rule(claim).verdicts(model, design, n, np.random.default_rng(seed), ci)
    return Power(float((codes == H).mean()), float((codes == F).mean()))


def power(claim: str, model: Model, design: Design, options: PlanOptions,
          slow_sims: int = 100) -> Power:
    """The claim's power on `design` (module docstring)."""
    if rule(claim) is not None:
        return fast_power(claim, model, design, options.n_sims, options.seed, options.ci)
    return simulated_power(claim, model, design, slow_sims, options.seed, options.ci)


def why_not(claim: str, model: Model, design: Design) -> str:
    """Why `design` (with `model`'s laws) cannot check the claim, or ''."""
    if CLAIMS[claim].on_budgets:
        return "it reads budgeted runs (grid.budgets), which the planner does not model"
    fast = rule(claim)
    if fast is not None:
        return fast.missing(model, design)
    checks = CLAIMS[claim].checks(Evidence.of(model.records(design, np.random.default_rng(0)),
                                              pd.DataFrame(), n_boot=20))
    if all(c.verdict == NO_DATA for c in checks):
        return "not enough data on every scope: " + checks[0].measurement
    return ""


def windows(model: Model, options: PlanOptions) -> list[tuple[str, ...]]:
    """The size sets a design may run: within the pilot's sizes unless
    `options.extrapolate`."""
    return size_windows(() if options.extrapolate else model.sizes)


def plan(model: Model, candidate: Design, hours_of: Callable[[Design], float],
         options: PlanOptions | None = None, claims: list[str] | None = None,
         search: bool = True) -> list[ClaimPlan]:
    """Per claim (`claims`, default every claim of the registry): whether the
    candidate design can check it, its power there, and (`search`, fast rules
    only) the cheapest design over the size windows and seeds reaching
    `options.power` within `options.budget_hours`, running only the
    architectures the claim reads, and the most powerful one within the
    budget."""
    options = options or PlanOptions()
    out = []
    for claim in claims or list(CLAIMS):
        reason = why_not(claim, model, candidate)
        fast = rule(claim) is not None
        if reason:
            out.append(ClaimPlan(claim, reason, "fast" if fast else "records", None, None, None))
            continue
        got = power(claim, model, candidate, options)
        best = nearest = None
        if search and fast:
            reads = rule(claim).reads(candidate)

            def decided(design, claim=claim):
                if why_not(claim, model, design):
                    return 0.0
                return fast_power(claim, model, design, options.n_sims, options.seed,
                                  options.ci).decided

            best, nearest = cheapest(replace(candidate, archs=reads), decided, hours_of,
                                     options.power, options.max_seeds, options.budget_hours,
                                     windows(model, options))
        at_best = (None if best is None else
                   fast_power(claim, model, best.design, options.n_sims, options.seed, options.ci))
        out.append(ClaimPlan(claim, "", "fast" if fast else "records", got, best, nearest,
                             at_best))
    return out


def summary(plans: list[ClaimPlan], candidate: Design, hours: float, options: PlanOptions,
            model: Model) -> str:
    """What `scalestudy plan` prints: the model, then per claim its power on the
    candidate and the cheapest design reaching the power."""
    lines = [f"model: {model.source}; noise: log sd {model.sd:.3f} (error), "
             f"{model.up_sd:.3f} (upstream loss), correlation between architectures "
             f"{model.rho:.2f}",
             f"candidate: {candidate.text()}, {hours:.2f} h on {options.cores} cores",
             f"power asked: {options.power:g}"
             + (f" within {options.budget_hours:g} h" if options.budget_hours else ""), ""]
    for p in plans:
        if p.why_not:
            lines.append(f"{p.claim}: cannot check: {p.why_not}")
            continue
        text = f"{p.claim}: power {p.power.text()} on the candidate"
        if p.cheapest is not None:
            text += (f"; cheapest reaching {options.power:g}: {p.cheapest.design.text()}, "
                     f"power {p.cheapest.power:.2f}, {p.cheapest.hours:.2f} h")
            if p.cheapest_power is not None:
                text += f" ({p.cheapest_power.text()})"
        elif p.how == "fast":
            near = (f"; the most powerful within the budget: {p.nearest.design.text()}, power "
                    f"{p.nearest.power:.2f}, {p.nearest.hours:.2f} h" if p.nearest else "")
            text += f"; no design reaches {options.power:g}{near}"
        else:
            text += " (simulated records; no search)"
        lines.append(text)
    return "\n".join(lines)


def preset(config: dict, design: Design, name: str, claims: list[str],
           plan_section: dict) -> dict:
    """The candidate preset's `config` with the design's sizes and seeds, the
    study's `name`, and its plan section (the claims it is designed to decide
    and the noise and effects that planned them)."""
    out = {key: value for key, value in config.items()}
    out["study"] = name
    out["grid"] = {**config["grid"], "sizes": list(design.sizes),
                   "seeds": list(range(design.seeds))}
    out["plan"] = {**plan_section, "claims": list(claims)}
    return out


def with_design(candidate: Design, **changes) -> Design:
    return replace(candidate, **changes)


__all__ = ["CODES", "ClaimPlan", "Power", "fast_power", "plan", "power", "preset",
           "simulated_power", "summary", "why_not"]
