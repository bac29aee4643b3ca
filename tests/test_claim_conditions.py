"""Every condition of two claim rules (issue 25, item 9), each case built to hold,
to fail on exactly one condition, or to lack data:

- "SPT closes the Transformer-S4 gap": holds when the gap (S4 - transformer
  accuracy) under random init lies above 0, its reduction under SPT lies above 0,
  and the gap under SPT is not above 0;
- "The vanilla Transformer scales best upstream": holds only when the
  transformer's alpha_U interval lies above every other architecture's; an
  overlap does not hold.
"""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

from scalestudy.analysis.claims import amos, tay
from scalestudy.analysis.claims.check import FAILS, HOLDS, NO_DATA

BOOT = {"n_boot": 300, "seed": 0}
PARAMS = {"xxs": 1e4, "xs": 4e4, "s": 1.6e5}


def gap_runs(gap_random: float, gap_spt: float, archs=("s4", "transformer"),
             priors=("random", "spt")) -> pd.DataFrame:
    """Task runs of listops: transformer accuracy 0.5 (random) / 0.6 (spt), S4's that
    plus the given gap; three sizes, two seeds at +-0.005."""
    rows = []
    for arch, prior, size, seed in itertools.product(archs, priors, PARAMS, (0, 1)):
        acc = 0.5 if prior == "random" else 0.6
        if arch == "s4":
            acc += gap_random if prior == "random" else gap_spt
        rows.append(dict(task="listops", arch=arch, prior=prior, size=size, seed=seed,
                         stage="scratch" if prior == "random" else "finetune", status="ok",
                         test_acc=acc + (0.005 if seed else -0.005),
                         n_params_nonembed=PARAMS[size]))
    return pd.DataFrame(rows)


def s4_gap_verdict(runs) -> str:
    (check,) = amos.spt_closes_s4_gap(runs, **BOOT)
    assert check.scope == "listops"
    return check.verdict


def test_spt_closes_the_s4_gap_holds_when_all_three_conditions_do():
    # Gap 0.10 under random init, 0 under SPT.
    assert s4_gap_verdict(gap_runs(0.10, 0.0)) == HOLDS
    assert s4_gap_verdict(gap_runs(0.10, -0.03)) == HOLDS  # SPT's gap below 0 too


def test_spt_closes_the_s4_gap_fails_when_the_gap_under_spt_stays_above_0():
    """Reduced (0.10 -> 0.05: the reduction lies above 0) but not closed."""
    runs = gap_runs(0.10, 0.05)
    gap_random, gap_spt, reduction, _ = amos.gap_under_spt(runs, "s4", "transformer", BOOT)
    assert gap_random["low"] > 0 and reduction["low"] > 0 and gap_spt["low"] > 0
    assert s4_gap_verdict(runs) == FAILS


def test_spt_closes_the_s4_gap_fails_without_a_gap_to_close():
    """Under random init S4 is not behind (gap 0): nothing to close."""
    runs = gap_runs(0.0, -0.05)
    gap_random, gap_spt, reduction, _ = amos.gap_under_spt(runs, "s4", "transformer", BOOT)
    assert gap_random["low"] <= 0 and reduction["low"] > 0 and gap_spt["low"] <= 0
    assert s4_gap_verdict(runs) == FAILS


def test_spt_closes_the_s4_gap_fails_when_spt_does_not_reduce_it():
    """The gap is the same (0.10) under both priors (no reduction), or SPT widens it
    from -0.02 to 0.05 (a negative reduction)."""
    assert s4_gap_verdict(gap_runs(0.10, 0.10)) == FAILS
    assert s4_gap_verdict(gap_runs(-0.02, 0.05)) == FAILS


def test_spt_closes_the_s4_gap_lacks_data_without_spt_or_s4_runs():
    assert s4_gap_verdict(gap_runs(0.10, 0.0, priors=("random",))) == NO_DATA
    assert s4_gap_verdict(gap_runs(0.10, 0.0, archs=("transformer",))) == NO_DATA
    one_size = gap_runs(0.10, 0.0)
    one_size = one_size[(one_size["size"] == "xs") & (one_size["seed"] == 0)]
    assert s4_gap_verdict(one_size) == NO_DATA  # one run per cell: no interval


def upstream_fits(intervals: dict[str, tuple[float, float] | None]) -> pd.DataFrame:
    """alpha_U log-log rows: arch -> (low, high), or None for a refused fit."""
    rows = []
    for arch, interval in intervals.items():
        low, high = interval if interval else (np.nan, np.nan)
        rows.append(dict(metric="alpha_U", form="loglog", task="upstream", prior="upstream",
                         arch=arch, alpha=(low + high) / 2, alpha_low=low, alpha_high=high,
                         status="ok" if interval else "not enough sizes: 2 < 3"))
    return pd.DataFrame(rows)


def vanilla_verdict(intervals) -> str:
    (check,) = tay.vanilla_scales_best_upstream(upstream_fits(intervals))
    return check.verdict


def test_vanilla_scales_best_holds_only_above_every_other_architecture():
    assert vanilla_verdict({"transformer": (0.25, 0.30), "performer": (0.05, 0.10),
                            "albert": (0.15, 0.24)}) == HOLDS


def test_vanilla_scales_best_does_not_hold_on_an_overlap():
    """One architecture's interval overlaps the transformer's (its estimate is
    lower): the study does not show the transformer best."""
    verdict = vanilla_verdict({"transformer": (0.25, 0.30), "performer": (0.05, 0.10),
                               "albert": (0.20, 0.26)})
    assert verdict == FAILS
    assert vanilla_verdict({"transformer": (0.25, 0.30), "albert": (0.25, 0.30)}) == FAILS


def test_vanilla_scales_best_does_not_hold_below_another():
    assert vanilla_verdict({"transformer": (0.25, 0.30), "glu": (0.35, 0.40)}) == FAILS


@pytest.mark.parametrize("intervals", [
    {"performer": (0.05, 0.10)},  # no transformer fit
    {"transformer": None, "performer": (0.05, 0.10)},  # the transformer's fit refused
    {"transformer": (0.25, 0.30)},  # nothing to compare with
    {"transformer": (0.25, 0.30), "performer": None},  # the only other one refused
])
def test_vanilla_scales_best_lacks_data(intervals):
    assert vanilla_verdict(intervals) == NO_DATA
