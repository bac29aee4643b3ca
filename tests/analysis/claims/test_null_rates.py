"""How often each claim holds on a study with no effect anywhere: synthetic null studies
on the grids of the default study, the
workstation preset and the claim presets, every architecture and prior with the
same law (claim_studies.null_study), each evaluated as claims.md evaluates it.

A claim's verdict combines its scopes (check.COMBINE_RULES): most hold only
where every scope holds, so their rate is at most a single scope's (2.5%
one-sided); "the best architecture changes with scale" holds where some scope
does, each judged at the Bonferroni level. The rate asked for is at most 5%
per claim. "GLU and MoS scale like the Transformer" is an equivalence claim:
with no effect anywhere it is true, so its null is the margin itself (the
variants' exponent 25% above the transformer's), where it should hold at most
2.5% of the time.

Measured with 200 studies per grid (the measure test, `make measure`; n_boot 400, docs/analysis.md
lists the numbers): every claim's rate at most 2.5% on every grid.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from scalestudy.analysis.claims import CLAIMS, evaluate
from scalestudy.analysis.claims.check import HOLDS

from tests.support.claim_studies import null_study, preset_grid, preset_norm

GRIDS = ["default", "workstation", "amos_claims", "tay_claims", "xu_depth", "spt_evidence",
         "tay_depth+tay_width", "deep_fixup"]
EQUIVALENCE = "minimal_variants_scale_like_transformer"
TEXT = {claim.text: name for name, claim in CLAIMS.items()}


def one_null_study(grid_name: str, rng, **law) -> pd.DataFrame:
    parts = []
    for name in grid_name.split("+"):  # presets whose runs are collected together
        grid, protocol, per_seed = preset_grid(name)
        parts.append(null_study(grid, protocol, per_seed, rng, norm=preset_norm(name),
                                **law).assign(study=name))
    return pd.concat(parts, ignore_index=True)


def null_rates(grid_name: str, n_studies: int, n_boot: int, **law) -> tuple[dict, dict]:
    """Per claim: the share of studies where the claim holds, and where some
    scope of it holds."""
    claim_holds = dict.fromkeys(CLAIMS, 0)
    scope_holds = dict.fromkeys(CLAIMS, 0)
    for rep in range(n_studies):
        runs = one_null_study(grid_name, np.random.default_rng(rep), **law)
        checks = evaluate(runs, pd.DataFrame(), n_boot=n_boot, seed=rep)
        for text, g in checks.groupby("claim"):
            claim_holds[TEXT[text]] += g["claim_verdict"].iloc[0] == HOLDS
            scope_holds[TEXT[text]] += (g["verdict"] == HOLDS).any()
    return ({k: v / n_studies for k, v in claim_holds.items()},
            {k: v / n_studies for k, v in scope_holds.items()})


def check_rates(rates: dict, bound: float, skip=()) -> None:
    high = {k: v for k, v in rates.items() if v > bound and k not in skip}
    assert not high, high


@pytest.mark.parametrize("grid_name", ["spt_evidence", "xu_depth"])
def test_no_claim_holds_on_null_studies_more_than_5_percent(grid_name):
    """50 null studies of two small claim presets' grids (~10 s each); the measure
    test runs 200 on every grid. The bound 0.1 is 5% plus 2 standard errors of
    50 studies."""
    claims, _ = null_rates(grid_name, 50, n_boot=200)
    check_rates(claims, 0.1, skip=(EQUIVALENCE,))


def test_the_equivalence_claim_holds_rarely_at_its_margin():
    variants = {"glu": 1.25 * 0.05, "mos": 1.25 * 0.05}
    claims, _ = null_rates("tay_claims", 20, n_boot=200, variant_alpha=variants)
    assert claims[EQUIVALENCE] <= 0.15


@pytest.mark.measure
@pytest.mark.parametrize("grid_name", GRIDS)
def test_no_claim_holds_on_null_studies_more_than_5_percent_measured(grid_name, capsys):
    """Opt-in: 200 null studies per grid, n_boot 400; prints the rates."""
    claims, scopes = null_rates(grid_name, 200, n_boot=400)
    with capsys.disabled():
        print(f"\n{grid_name}: claim holds {claims}\n  some scope holds {scopes}")
    check_rates(claims, 0.05, skip=(EQUIVALENCE,))


@pytest.mark.measure
def test_the_equivalence_claim_holds_rarely_at_its_margin_measured(capsys):
    variants = {"glu": 1.25 * 0.05, "mos": 1.25 * 0.05}
    claims, _ = null_rates("tay_claims", 200, n_boot=400, variant_alpha=variants)
    with capsys.disabled():
        print(f"\nequivalence at its margin: {claims[EQUIVALENCE]}")
    assert claims[EQUIVALENCE] <= 0.05
