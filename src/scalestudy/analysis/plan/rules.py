"""Each claim's decision rule restated on simulated arrays (simulated.py), so that
a design's power is thousands of studies in a second: `PLAN_RULES`, claim name
-> its rule, reading the claim's own parameters (claims/__init__.py) and
deciding as its function does (claims/tay.py):

- a scope's tests (`simulated.Test`: a contrast's interval against its bound)
  must all hold at the study's level; where its premise (an exponent above 0)
  is not shown the scope is undecided and its tests count for nothing;
- the scopes combine as the claim's (check.COMBINE_RULES): every one must
  hold, and a refutation is one test on the wrong side at the study's
  one-sided level over the tests made (Bonferroni: Claim.checks); "the best
  architecture changes with scale" holds where some scope holds, each at the
  study's level over the scopes.

A rule says which runs it needs (`missing`); `verdicts` returns one code per
simulated study (HOLDS, FAILS, UNDECIDED: `CODES`). A claim without a rule here
is planned by simulating whole records (stage.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..claims import CLAIMS
from ..claims.check import FAILS, HOLDS, NO_DATA, UNDECIDED
from . import simulated
from .design import Design
from .model import Draw, Model

CODES = (HOLDS, FAILS, UNDECIDED, NO_DATA)
H, F, U, N = range(4)


@dataclass(frozen=True)
class Scope:
    tests: list  # simulated.Test
    premise: np.ndarray | None = None  # (S,) bool: shown; None: no premise


def every(scopes: list[Scope], ci: float, n: int) -> np.ndarray:
    """The claim's verdict per study, its scopes combined by EVERY with each
    refutation at the Bonferroni level over the tests its premises let count."""
    level = (1 - ci) / 2
    shown = [np.ones(n, bool) if s.premise is None else s.premise for s in scopes]
    m = sum(len(s.tests) * p for s, p in zip(scopes, shown, strict=True))
    m = np.maximum(m, 1)
    holds = np.ones(n, bool)
    fails = np.zeros(n, bool)
    for s, p in zip(scopes, shown, strict=True):
        for test in s.tests:
            holds &= p & test.holds(ci)
            fails |= p & test.fails(level / m)
    return np.where(fails, F, np.where(holds, H, U))


def _exponent_lines(draw: Draw, design: Design, sign: int = -1):
    """Per cell, its line (units: runs; sizes for a pretrained prior's cells
    when the seeds of a size share one pretraining, as the fits redraw them)."""
    runs = np.arange(draw.lx.size)
    up = {arch: simulated.line(draw.lx, ly) for arch, ly in draw.up.items()}
    if not design.per_seed:  # one upstream run per size: its first seed's column
        first = np.arange(len(design.sizes)) * design.seeds
        up = {arch: simulated.line(draw.lx[first], ly[:, first]) for arch, ly in draw.up.items()}
    down = {}
    for key, ly in draw.down.items():
        shared = not design.per_seed and design.prior_pretrains(key[2])
        down[key] = simulated.line(draw.lx, ly, draw.size_of if shared else runs, sign)
    return up, down


def _laws(draw: Draw, design: Design, prior: str):
    """(scope suffix, lines by arch) of alpha_U and of each task's alpha_D under
    `prior`, as tay._upstream_and_tasks yields them."""
    up, down = _exponent_lines(draw, design)
    yield "upstream alpha_U", up
    for task in design.tasks:
        yield f"{task} alpha_D ({prior} prior)", {a: ln for (t, a, p), ln in down.items()
                                                  if t == task and p == prior}


class Rule:
    """A claim's rule on arrays; `needs(design, model)`: what it lacks, or ''."""

    def __init__(self, name: str):
        self.name = name
        self.params = CLAIMS[name].params

    def missing(self, model: Model, design: Design) -> str:
        raise NotImplementedError

    def reads(self, design: Design) -> tuple[str, ...]:
        """The architectures of the design the rule reads: a cheaper design runs no
        other (by default every one)."""
        return design.archs

    def verdicts(self, model: Model, design: Design, n: int, rng, ci: float) -> np.ndarray:
        raise NotImplementedError

    def _archs(self, model: Model, design: Design, archs, prior: str | None,
               upstream: bool) -> str:
        lacking = [a for a in archs if a not in design.archs]
        if lacking:
            return f"the grid lacks {', '.join(lacking)}"
        if prior is not None and prior not in design.priors:
            return f"the grid lacks the {prior} prior"
        if upstream and not design.pretrains_upstream:
            return "the grid has no upstream pretraining"
        if upstream and [a for a in archs if a not in model.up]:
            return "the model has no upstream law for " + ", ".join(
                a for a in archs if a not in model.up)
        if prior is not None:
            no_law = [a for a in archs for t in design.tasks if (t, a, prior) not in model.down]
            if no_law:
                return f"the model has no {prior} law for {', '.join(sorted(set(no_law)))}"
        if len(design.sizes) < 3:
            return "fewer than three sizes"
        return ""


class VanillaBest(Rule):
    def missing(self, model, design):
        ref = self.params["reference"]
        if len([a for a in design.archs if a in model.up]) < 2:
            return "fewer than two architectures with an upstream law"
        return self._archs(model, design, [ref], None, True)

    def verdicts(self, model, design, n, rng, ci):
        ref = self.params["reference"]
        up, _ = _exponent_lines(model.draw(design, n, rng), design)
        tests = [simulated.Test(*simulated.contrast([(1.0, up[ref]), (-1.0, up[a])]))
                 for a in up if a != ref]
        return every([Scope(tests)], ci, n)


class _Named(Rule):
    """A rule about named architectures and the reference (its params)."""

    def reads(self, design):
        named = {*self.params["archs"], self.params["reference"]}
        return tuple(a for a in design.archs if a in named)


class ScaleWorse(_Named):
    def missing(self, model, design):
        p = self.params
        return self._archs(model, design, [*p["archs"], p["reference"]], p["prior"], True)

    def verdicts(self, model, design, n, rng, ci):
        p = self.params
        draw = model.draw(design, n, rng)
        ref = p["reference"]
        scopes = [Scope([simulated.Test(*simulated.contrast([(1.0, lines[a]), (-1.0, lines[ref])]),
                                    sign=-1)])
                  for a in p["archs"] for _, lines in _laws(draw, design, p["prior"])]
        return every(scopes, ci, n)


class ScaleLike(_Named):
    def missing(self, model, design):
        p = self.params
        return self._archs(model, design, [*p["archs"], p["reference"]], p["prior"], True)

    def verdicts(self, model, design, n, rng, ci):
        p, ref, m = self.params, self.params["reference"], self.params["margin"]
        draw = model.draw(design, n, rng)
        scopes = []
        for a in p["archs"]:
            for _, lines in _laws(draw, design, p["prior"]):
                premise = simulated.Test(*simulated.alpha(lines[ref])).holds(ci)
                scopes.append(Scope([
                    simulated.Test(*simulated.contrast([(1.0, lines[a]), (-(1 - m), lines[ref])])),
                    simulated.Test(*simulated.contrast([(-1.0, lines[a]), (1 + m, lines[ref])]))],
                    premise))
        return every(scopes, ci, n)


class FlatOrNegative(_Named):
    def missing(self, model, design):
        p = self.params
        return self._archs(model, design, [*p["archs"], p["reference"]], p["prior"], False)

    def verdicts(self, model, design, n, rng, ci):
        p, ref = self.params, self.params["reference"]
        _, down = _exponent_lines(model.draw(design, n, rng), design)
        scopes = []
        for a in p["archs"]:
            for task in design.tasks:
                lines = {arch: ln for (t, arch, pr), ln in down.items()
                         if t == task and pr == p["prior"]}
                premise = simulated.Test(*simulated.alpha(lines[ref])).holds(ci)
                scopes.append(Scope([simulated.Test(*simulated.contrast(
                    [(-1.0, lines[a]), (p["margin"], lines[ref])]))], premise))
        return every(scopes, ci, n)


class BestChanges(Rule):
    """tay.best_arch_changes_with_scale: per task and prior, the leaders at the
    smallest and largest size, each ahead of every other at its size (Welch,
    one-sided, Bonferroni over the scopes); some scope holding suffices."""

    def missing(self, model, design):
        if len(design.sizes) < 2:
            return "fewer than two sizes"
        if design.seeds < 2:
            return "one seed: Welch's test needs two runs a cell"
        scopes = [(t, p) for t in design.tasks for p in design.priors
                  if sum((t, a, p) in model.down for a in design.archs) >= 2]
        return "" if scopes else "no task and prior with two architectures' laws"

    def verdicts(self, model, design, n, rng, ci):
        draw = model.draw(design, n, rng)
        k, r = len(design.sizes), design.seeds
        scopes = [(t, p) for t in design.tasks for p in design.priors
                  if sum((t, a, p) in model.down for a in design.archs) >= 2]
        level = (1 - ci) / 2 / len(scopes)
        out = []
        for task, prior in scopes:
            archs = [a for a in design.archs if (task, a, prior) in draw.down]
            acc = np.stack([1 - np.exp(draw.down[task, a, prior]) for a in archs])  # (A, S, n)
            small, large = acc[:, :, :r], acc[:, :, (k - 1) * r:]
            lead_s, lead_l = small.mean(2).argmax(0), large.mean(2).argmax(0)
            ahead_s, ahead_l = _ahead(small, lead_s, level), _ahead(large, lead_l, level)
            both = ahead_s & ahead_l
            out.append(np.where(both & (lead_s != lead_l), H,
                                np.where(both & (lead_s == lead_l), F, U)))
        out = np.stack(out)
        return np.where((out == H).any(0), H, np.where((out == U).any(0), U, F))


def _ahead(acc: np.ndarray, lead: np.ndarray, level: float) -> np.ndarray:
    """Whether the leader (per study) is ahead of every other architecture by
    Welch's one-sided test at `level` (contrasts.leader_change)."""
    n_arch, n, r = acc.shape
    means, var = acc.mean(2), acc.var(2, ddof=1) / r  # (A, S)
    pick = lead[None, :]
    m_l = np.take_along_axis(means, pick, 0)
    v_l = np.take_along_axis(var, pick, 0)
    se = np.sqrt(v_l + var)
    df = (v_l + var) ** 2 / ((v_l**2 + var**2) / (r - 1))
    from scipy.stats import t as student

    low = (m_l - means) - student.ppf(1 - level, df) * se
    others = np.arange(n_arch)[:, None] != pick
    return np.where(others, low > 0, True).all(0)


PLAN_RULES: dict[str, Callable[[str], Rule]] = {
    "vanilla_scales_best_upstream": VanillaBest,
    "performer_albert_scale_poorly": ScaleWorse,
    "minimal_variants_scale_like_transformer": ScaleLike,
    "flat_or_negative_downstream": FlatOrNegative,
    "best_arch_changes_with_scale": BestChanges,
}


def rule(name: str) -> Rule | None:
    """The fast rule of claim `name`, or None (planned by simulating records)."""
    make = PLAN_RULES.get(name)
    return None if make is None else make(name)
