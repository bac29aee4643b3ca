"""Every condition of two claim rules, each case built to hold, to fail on
exactly one condition, or to lack data:

- "SPT closes most of the Transformer-S4 gap": holds when the gap (S4 minus
  transformer accuracy) under random init lies above 0 (the premise) and the
  gap under SPT lies below half of it (the interval of half the random gap
  minus the SPT gap above 0);
- "The vanilla Transformer scales best upstream": holds only when the interval
  of the transformer's alpha_U minus each other architecture's lies above 0.
"""

from __future__ import annotations

import itertools

import pandas as pd
import pytest

from scalestudy.analysis.claims import amos
from scalestudy.analysis.claims.check import FAILS, HOLDS, NO_DATA, UNDECIDED, above
from scalestudy.analysis.claims.contrasts import contrast

from tests.support.claim_studies import scaling, scopes
from tests.support.claim_studies import study as claim_study

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


def conditions(runs) -> tuple[str, str]:
    """(premise, most) of the gap rule, from the contrasts the rule names."""
    def c(weights):
        return contrast(runs, {f"{a}/{p}": ({"arch": a, "prior": p}, w)
                               for (a, p), w in weights.items()})

    premise = c({("s4", "random"): 1, ("transformer", "random"): -1})
    most = c({("s4", "random"): 0.5, ("transformer", "random"): -0.5, ("s4", "spt"): -1,
              ("transformer", "spt"): 1})
    return above(premise), above(most)


def s4_gap_verdict(runs) -> str:
    (scope,) = scopes("spt_closes_s4_gap", runs)
    assert scope.scope == "listops"
    return scope.verdict


def test_spt_closes_the_s4_gap_holds_when_both_conditions_do():
    for gap_spt in (0.0, -0.03, 0.02):  # closed, overtaken, 80% closed
        assert conditions(gap_runs(0.10, gap_spt)) == (HOLDS, HOLDS)
        assert s4_gap_verdict(gap_runs(0.10, gap_spt)) == HOLDS


def test_spt_closes_the_s4_gap_fails_when_most_of_the_gap_stays():
    """Reduced (0.10 -> 0.07: the old rule's reduction lies above 0) but less than half."""
    runs = gap_runs(0.10, 0.07)
    assert conditions(runs) == (HOLDS, FAILS)
    assert s4_gap_verdict(runs) == FAILS


def test_spt_closes_the_s4_gap_is_undecided_without_a_gap_to_close():
    """Under random init S4 is not ahead (gap 0): nothing to close, though SPT's
    gap lies below half of it. The premise is not shown: undecided, not refuted."""
    runs = gap_runs(0.0, -0.05)
    assert conditions(runs) == (UNDECIDED, HOLDS)
    assert s4_gap_verdict(runs) == UNDECIDED


def test_spt_closes_the_s4_gap_fails_when_spt_widens_it():
    assert s4_gap_verdict(gap_runs(0.10, 0.10)) == FAILS
    assert s4_gap_verdict(gap_runs(0.10, 0.15)) == FAILS
    assert s4_gap_verdict(gap_runs(-0.02, 0.05)) == UNDECIDED  # no premise


def test_spt_closes_the_s4_gap_lacks_data_without_spt_or_s4_runs():
    assert s4_gap_verdict(gap_runs(0.10, 0.0, priors=("random",))) == NO_DATA
    assert s4_gap_verdict(gap_runs(0.10, 0.0, archs=("transformer",))) == NO_DATA
    one_seed = gap_runs(0.10, 0.0).query("seed == 0")  # one run per cell: no interval
    assert s4_gap_verdict(one_seed) == NO_DATA
    (scope,) = scopes("spt_closes_s4_gap", gap_runs(0.10, 0.0, priors=("random",)))
    assert "no finished runs of s4/spt, transformer/spt" in scope.measurement


def test_the_gap_rule_is_the_function_of_its_parameters():
    """The same function with the names swapped: transformer minus s4 has no
    premise here."""
    study = claim_study(gap_runs(0.10, 0.0))
    (scope,) = amos.gap_closes(study, first="transformer", second="s4", treatment="spt",
                               control="random")
    assert scope.verdict == UNDECIDED and "premise not shown" in scope.measurement


def vanilla_verdict(alpha_u: dict, **kw) -> str:
    (scope,) = scopes("vanilla_scales_best_upstream",
                      scaling(alpha_u=alpha_u, archs=tuple(alpha_u), **kw))
    return scope.verdict


def test_vanilla_scales_best_holds_only_above_every_other_architecture():
    assert vanilla_verdict({"transformer": 0.3, "performer": 0.1, "albert": 0.2}) == HOLDS


def test_vanilla_scales_best_is_undecided_when_one_difference_reaches_0():
    """The transformer's alpha_U is larger than albert's by 0.005 with 2% noise
    not shared between the two: the difference's interval contains 0."""
    assert vanilla_verdict({"transformer": 0.3, "albert": 0.295, "performer": 0.1},
                           noise=0.02, paired=False) == UNDECIDED
    assert vanilla_verdict({"transformer": 0.3, "albert": 0.3}) == UNDECIDED


def test_vanilla_scales_best_does_not_hold_below_another():
    assert vanilla_verdict({"transformer": 0.25, "glu": 0.35}) == FAILS


@pytest.mark.parametrize("case", ["no transformer", "nothing to compare"])
def test_vanilla_scales_best_lacks_data(case):
    data = scaling(alpha_u={"transformer": 0.3, "performer": 0.1},
                   archs=("transformer", "performer"))
    data = {"no transformer": data[data["arch"] != "transformer"],
            "nothing to compare": data[data["arch"] == "transformer"]}[case]
    (scope,) = scopes("vanilla_scales_best_upstream", data)
    assert scope.verdict == NO_DATA
