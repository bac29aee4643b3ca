"""The frontier-ranking claim (analysis/claims/frontier.py) on synthetic
budgeted records built to hold, to fail, and to lack data."""

import numpy as np
import pandas as pd

from scalestudy.analysis.claims import CLAIMS, Evidence
from scalestudy.analysis.claims.check import FAILS, HOLDS, NO_DATA, UNDECIDED

from tests.support.claim_studies import frontier_study

SIZES = {"xs": 1e4, "s": 4e4, "m": 1.6e5}


def records(loss, seeds=(0, 1, 2), budget=1e12, noise=0.002):
    """Upstream pretraining records of transformer and s4 at one budget;
    loss(arch, size) gives each cell's mean loss."""
    rng = np.random.default_rng(0)
    rows = []
    for arch in ("transformer", "s4"):
        for size, params in SIZES.items():
            for seed in seeds:
                rows.append({"study": "f", "task": "upstream", "arch": arch, "size": size,
                             "prior": "upstream", "stage": "upstream", "seed": seed,
                             "status": "ok", "budget": budget, "n_params_nonembed": params,
                             "train_flops": budget, "tokens_seen": budget / (6 * params),
                             "upstream_loss": loss(arch, size) + noise * rng.standard_normal(),
                             "val_loss": np.nan, "steps": 100, "fork_step": None,
                             "wall_seconds": 1.0, "fork_seconds": None})
    return pd.DataFrame(rows)


def verdict(runs):
    study = Evidence.of(runs, pd.DataFrame(), n_boot=100, ci=0.95, seed=0)
    scopes = CLAIMS["frontier_ranking_changes"].scopes(study)
    return [s.verdict for s in scopes], scopes


# The transformer is better at the largest size (m), but s4 is better at its own
# optimum (s), which beats the transformer's optimum (m): the ranking flips.
FLIP = {("transformer", "xs"): 3.0, ("transformer", "s"): 2.8, ("transformer", "m"): 2.6,
        ("s4", "xs"): 2.7, ("s4", "s"): 2.5, ("s4", "m"): 2.7}
# s4 better at every size: the same order at the fixed length and at the optimum.
SAME = {("transformer", "xs"): 3.0, ("transformer", "s"): 2.8, ("transformer", "m"): 2.9,
        ("s4", "xs"): 2.9, ("s4", "s"): 2.6, ("s4", "m"): 2.7}


def test_holds_when_the_order_flips():
    verdicts, scopes = verdict(records(lambda a, s: FLIP[(a, s)]))
    assert verdicts == [HOLDS], scopes
    assert "transformer (m) - s4 (s) optimal" in scopes[0].measurement


def test_fails_when_the_order_is_the_same_in_both():
    verdicts, _ = verdict(records(lambda a, s: SAME[(a, s)]))
    assert verdicts == [FAILS]


def test_not_enough_data_with_one_seed_undecided_with_noise_swamping_the_differences():
    assert verdict(records(lambda a, s: FLIP[(a, s)], seeds=(0,)))[0] == [NO_DATA]
    assert verdict(records(lambda a, s: FLIP[(a, s)], noise=1.0))[0] == [UNDECIDED]


def test_not_enough_data_without_budgets():
    runs = records(lambda a, s: FLIP[(a, s)]).assign(budget=np.nan)
    verdicts, scopes = verdict(runs)
    assert verdicts == [NO_DATA] and "no budgeted runs" in scopes[0].measurement


# --------------------------------------------------------------------------- exponent a

# Hoffmann et al.'s approach-3 constants: a = beta / (alpha + beta) = 0.452; with
# alpha and beta swapped, a = 0.548.
CHINCHILLA = {"alpha": 0.34, "beta": 0.28, "A": 406.4, "B": 410.7, "E": 1.69}
BUDGETS = tuple(np.logspace(17, 19.5, 6))  # FLOPs, half a decade apart


def surface_records(laws: dict, budgets=BUDGETS, noise=0.003, seed=0):
    """Budgeted upstream records of each architecture on its own loss surface
    L = E + A/N^alpha + B/D^beta, seven sizes over +-0.6 decades around each
    budget's true N_opt (so every vertex is bracketed), one seed."""
    rng = np.random.default_rng(seed)
    rows = []
    for arch, law in laws.items():
        al, be = law["alpha"], law["beta"]
        g = (al * law["A"] / (be * law["B"])) ** (1 / (al + be))
        for C in budgets:
            n_opt = g * (C / 6) ** (be / (al + be))
            for i, n in enumerate(n_opt * np.logspace(-0.6, 0.6, 7)):
                d = C / (6 * n)
                loss = law["E"] + law["A"] / n**al + law["B"] / d**be
                rows.append({"study": "f", "task": "upstream", "arch": arch, "size": f"n{i}",
                             "prior": "upstream", "stage": "upstream", "seed": 0,
                             "status": "ok", "budget": C, "n_params_nonembed": n,
                             "train_flops": C, "tokens_seen": d,
                             "upstream_loss": loss * (1 + noise * rng.standard_normal()),
                             "val_loss": np.nan, "steps": 100, "fork_step": None,
                             "wall_seconds": 1.0, "fork_seconds": None})
    return pd.DataFrame(rows)


def exponent_verdict(runs):
    study = frontier_study(runs, n_boot=200, ci=0.95, seed=0)
    return CLAIMS["frontier_exponent_differs"].scopes(study)


def test_exponent_differs_when_the_surfaces_give_different_a():
    swapped = {**CHINCHILLA, "alpha": CHINCHILLA["beta"], "beta": CHINCHILLA["alpha"]}
    scopes = exponent_verdict(surface_records({"transformer": CHINCHILLA, "s4": swapped}))
    assert [s.scope for s in scopes] == ["s4 vs transformer, upstream"]
    assert scopes[0].verdict == HOLDS, scopes
    # The measurement carries each a near its truth, and the difference's interval.
    text = scopes[0].measurement
    a_s4, a_ref = (float(text.split(f"a({n}) = ")[1].split()[0]) for n in ("s4", "transformer"))
    assert abs(a_s4 - 0.548) < 0.025 and abs(a_ref - 0.452) < 0.025, text
    assert "a(s4) - a(transformer)" in text


def test_exponent_does_not_differ_on_one_surface():
    scopes = exponent_verdict(surface_records({"transformer": CHINCHILLA, "s4": CHINCHILLA}))
    assert [s.verdict for s in scopes] == [UNDECIDED], scopes  # no difference shown


def test_exponent_needs_three_budgets_and_the_reference():
    two = surface_records({"transformer": CHINCHILLA, "s4": CHINCHILLA},
                          budgets=np.logspace(17, 18, 2))
    assert [s.verdict for s in exponent_verdict(two)] == [NO_DATA]
    alone = surface_records({"s4": CHINCHILLA})
    scopes = exponent_verdict(alone)
    assert [s.verdict for s in scopes] == [NO_DATA]
    assert "no transformer runs" in scopes[0].measurement


def test_the_exponent_claim_reads_the_frontier_the_stage_wrote(tmp_path):
    """The claim's a and its interval are the frontier's own (frontier_fits.csv's),
    whether it is given the stage's result or reads it back from the stage's
    directory; given none, it has no data (a claim never fits a frontier of its
    own: the analysis runs the frontier's stage for the claims stage)."""
    from scalestudy.analysis.claims.check import fmt
    from scalestudy.analysis.frontier.result import FrontierResult
    from scalestudy.analysis.frontier.stage import study_frontier, write_frontier

    swapped = {**CHINCHILLA, "alpha": CHINCHILLA["beta"], "beta": CHINCHILLA["alpha"]}
    runs = surface_records({"transformer": CHINCHILLA, "s4": swapped})
    stage = study_frontier(runs, n_boot=50, n_polish=16, quiet=True)
    write_frontier(stage, tmp_path / "frontier", figures=False)
    read = FrontierResult.read(tmp_path / "frontier")

    def scope(frontier):
        study = Evidence.of(runs, pd.DataFrame(), frontier, n_boot=50, ci=0.95, seed=0)
        (scope,) = CLAIMS["frontier_exponent_differs"].scopes(study)
        return scope

    given = scope(stage).measurement
    s4 = stage.fit("approach2", arch="s4", prior="upstream")
    assert f"a(s4) = {fmt(s4['a'], s4['a_low'], s4['a_high'])}" in given
    assert scope(read).measurement == given
    # The approach the claim reads, fitted alone, is the stage's.
    assert scope(frontier_study(runs, n_boot=50, seed=0).frontier).measurement == given
    assert scope(None).verdict == NO_DATA
