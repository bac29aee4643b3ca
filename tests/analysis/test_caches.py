"""The committed caches (data/cache/*.parquet): each holds its preset's whole
grid and shows what its study was run to show."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import yaml

from scalestudy.analysis.fits import fit_study, task_runs
from scalestudy.architectures import ARCHITECTURES
from scalestudy.priors import PRIORS
from scalestudy.records import read_records

from tests.support import ROOT

# --------------------------------------------------------------------------- cached study


CACHED_STUDIES = ["default", "workstation", "deep_fixup", "converged", "converged_capacity",
                  "capacity_listops", "effects", "frontier", "spt_digits", "tay_scale_worse"]


def _preset(study: str):
    """The study file a cache was run from: config/config.yaml for the default."""
    return ROOT / ("config/config.yaml" if study == "default" else f"config/studies/{study}.yaml")


def test_every_cached_study_is_named_here():
    assert sorted(p.stem for p in (ROOT / "data" / "cache").glob("*.parquet")) == sorted(
        CACHED_STUDIES)


@pytest.mark.parametrize("study", CACHED_STUDIES)
def test_a_committed_cache_holds_its_whole_preset_grid(study):
    """data/cache/<study>.parquet (what `make figures-from-cache` reads): valid
    records of every cell of config/studies/<study>.yaml (config/config.yaml for
    the default study), and of every
    pretraining stage those cells used."""
    grid = yaml.safe_load(_preset(study).read_text())["grid"]
    runs = read_records(ROOT / "data" / "cache" / f"{study}.parquet")
    assert set(runs["study"]) == {study}
    cells = task_runs(runs)
    budgets = grid.get("budgets") or [None]  # a budgeted grid: every cell at every budget
    expected = set(itertools.product(grid["tasks"], grid["archs"], grid["sizes"],
                                     grid["priors"], grid["seeds"], budgets))
    assert len(cells) == len(expected)
    keys = ["task", "arch", "size", "prior", "seed"]
    got = cells[keys].itertuples(index=False, name=None)
    got_budgets = cells["budget"] if grid.get("budgets") else [None] * len(cells)
    assert {(*cell, b) for cell, b in zip(got, got_budgets, strict=True)} == expected
    stages = {PRIORS[prior].needs for prior in grid["priors"]} - {None}
    assert set(runs["stage"]) - {"scratch", "finetune"} == stages
    for stage in stages:
        pretrained = runs[runs["stage"] == stage]
        assert set(pretrained[["arch", "size"]].itertuples(index=False, name=None)) == set(
            itertools.product(grid["archs"], grid["sizes"]))


def _random_and_upstream_exponents(runs):
    """alpha_D under random init and alpha_U (log-log), refitted as the workflow
    fits them, each for the three families the effects studies run."""
    fits = fit_study(runs, n_boot=400, seed=0, n_boot_saturating=10)
    loglog = fits[fits["form"] == "loglog"]
    down = loglog[(loglog["metric"] == "alpha_D") & (loglog["prior"] == "random")]
    up = loglog[loglog["metric"] == "alpha_U"]
    for exponents in (down, up):
        assert set(exponents["arch"]) == {"transformer", "lconv", "s4"}
    return down, up


def test_the_default_cache_is_evidence_and_the_readme_shows_it():
    """The default study's cache (docs/results.md, o): under random init test
    error falls with training compute for each of its three architectures, and
    the upstream loss of the per-seed pretraining for each, every interval above
    0 (refitted here as the workflow fits it); its claims.md judges the claims
    about SPT and upstream scaling (none for want of data), and says that DT-Fixup's
    "trains deep" wants deeper stacks (depth 2 is not deep: not enough data); and
    the README shows its headline figure, which `make readme-figure` draws from it."""
    from scalestudy.analysis.claims import CLAIMS, evaluate

    runs = read_records(ROOT / "data" / "cache" / "default.parquet")
    assert (runs["status"] == "ok").all()
    for exponents in _random_and_upstream_exponents(runs):
        assert (exponents["alpha_low"] > 0).all(), exponents[["arch", "alpha", "alpha_low"]]
    checks = evaluate(runs, fit_study(runs, n_boot=50, n_boot_saturating=0), n_boot=200)
    for name in ("spt_closes_s4_gap", "spt_beats_random_every_size",
                 "vanilla_scales_best_upstream"):
        verdicts = checks.loc[checks["claim"] == CLAIMS[name].text, "verdict"]
        assert len(verdicts) and "not enough data" not in set(verdicts), (name, verdicts)
    deep = checks[checks["claim"] == CLAIMS["dtfixup_trains_deep"].text]
    assert deep["verdict"].tolist() == ["not enough data"]
    assert "no depth of 24 blocks or more" in deep["measurement"].iloc[0]
    figure = "docs/images/scaling_overview.png"
    assert f"]({figure})" in (ROOT / "README.md").read_text()
    assert (ROOT / figure).stat().st_size > 10_000
    assert f"README_FIGURE := {figure}" in (ROOT / "Makefile").read_text()


def test_the_capacity_limited_cache_scales_downstream_where_a_power_law_fits():
    """The capacity_listops cache (docs/results.md, i): under random init, test
    error falls with training compute for the transformer and lconv, alpha_D's
    interval above 0 (refitted here as the workflow fits it); s4's three sizes
    depart from a power law (lack of fit p = 0.015): its error falls too, but its
    exponent is the local log-log slope over the sizes run (0.059 [0.043,
    0.075]), and the fits table says so."""

    runs = read_records(ROOT / "data" / "cache" / "capacity_listops.parquet")
    fits = fit_study(runs, n_boot=400, seed=0, n_boot_saturating=10)
    down = fits[(fits["metric"] == "alpha_D") & (fits["prior"] == "random")
                & (fits["form"] == "loglog")]
    assert set(down["arch"]) == {"transformer", "lconv", "s4"}
    down = down.set_index("arch")
    assert (down.loc[["transformer", "lconv"], "alpha_low"] > 0).all(), down
    assert down.loc["s4", "lack_of_fit_p"] < 0.05 and down.loc["s4", "interval_unit"] == "run"
    assert "local log-log slope" in down.loc["s4", "interval"]
    assert down.loc["s4", "alpha_low"] > 0


def test_the_effects_cache_scales_upstream_and_downstream():
    """The effects cache (docs/results.md, i): under random init test error
    falls with training compute for each of its architectures, and upstream the
    masked-byte loss of the per-seed pretraining for lconv and s4, every
    interval above 0 (refitted here as the workflow fits it). The transformer's
    upstream loss is a plateau then a drop (3.110 / 3.080 / 2.712 nats), which
    the lack-of-fit test rejects as a power law (p < 0.01): its exponent is the
    local log-log slope over the sizes run, and the fits table says so."""

    runs = read_records(ROOT / "data" / "cache" / "effects.parquet")
    down, up = _random_and_upstream_exponents(runs)
    assert (down["alpha_low"] > 0).all(), down[["arch", "alpha", "alpha_low"]]
    up = up.set_index("arch")
    assert (up.loc[["lconv", "s4"], "alpha_low"] > 0).all(), up
    assert up.loc["transformer", "lack_of_fit_p"] < 0.01
    assert "local log-log slope" in up.loc["transformer", "interval"]


def test_the_spt_digits_cache_has_its_premise_and_decides_whether_spt_closes_the_gap():
    """The spt_digits cache (docs/results.md, n): on sequential digits S4 from
    scratch leads the transformer at every size (the mean over three seeds;
    Amos et al.'s premise), and claims.md decides "SPT closes most of the
    Transformer-S4 gap" on it, rather than leaving it undecided."""
    from scalestudy.analysis.claims import CLAIMS, evaluate

    runs = read_records(ROOT / "data" / "cache" / "spt_digits.parquet")
    t = task_runs(runs)
    random = t[t["prior"] == "random"].pivot_table(index="size", columns="arch",
                                                    values="test_acc", aggfunc="mean")
    assert (random["s4"] > random["transformer"]).all(), random
    assert (t.groupby(["arch", "size", "prior"])["seed"].nunique() == 3).all()
    checks = evaluate(runs, fit_study(runs, n_boot=50, n_boot_saturating=0), n_boot=200)
    gap = checks[checks["claim"] == CLAIMS["spt_closes_s4_gap"].text]
    assert list(gap["verdict"]) == ["holds"], gap


def test_the_tay_cache_decides_the_claim_it_was_planned_to_decide():
    """The tay_scale_worse cache (docs/results.md, p): the design `scalestudy
    plan` fixed before its runs (4 seeds of 3 sizes) decides "Performer and
    ALBERT scale worse than the vanilla Transformer", as planned: it does not
    hold, refuted by ALBERT's steeper upstream exponent at the Bonferroni level."""
    from scalestudy.analysis.claims import CLAIMS, evaluate

    runs = read_records(ROOT / "data" / "cache" / "tay_scale_worse.parquet")
    assert (runs["status"] == "ok").all()
    checks = evaluate(runs, fit_study(runs, n_boot=200, n_boot_saturating=0), n_boot=200)
    claim = checks[checks["claim"] == CLAIMS["performer_albert_scale_poorly"].text]
    assert set(claim["verdict"]) >= {"does not hold"}, claim
    refuted = claim[claim["verdict"] == "does not hold"]
    assert list(refuted["scope"]) == ["albert: upstream alpha_U"], refuted


def test_the_converged_cache_trained_every_run_until_its_plateau_or_its_cap():
    preset = yaml.safe_load((ROOT / "config/studies/converged.yaml").read_text())
    runs = read_records(ROOT / "data" / "cache" / "converged.parquet")
    assert (runs["status"] == "ok").all()
    for stage, section in (("scratch", "train"), ("finetune", "train"), ("spt", "pretrain"),
                           ("upstream", "pretrain")):
        schedule, stopped = preset[section], runs[runs["stage"] == stage]
        assert schedule["until"] == "plateau" and len(stopped)
        at_plateau = stopped[stopped["stopped_by"] == "plateau"]
        # Judged from the fifth validation on, at validations only, under the cap.
        assert (at_plateau["steps"] >= 5 * schedule["val_every"]).all()
        assert (at_plateau["steps"] % schedule["val_every"] == 0).all()
        assert (at_plateau["steps"] <= schedule["max_steps"]).all()
        capped = stopped[stopped["stopped_by"] == "max_steps"]
        assert (capped["steps"] == schedule["max_steps"]).all()
        assert (stopped["train_flops"] == stopped["steps"] * stopped["flops_per_step"]).all()


def test_the_annealed_converged_cache_cooled_down_from_each_plateau():
    """The converged_capacity cache (docs/results.md, i): a run that reached its
    plateau (judged at validations, from the fifth on) then decayed its rate
    over decay_fraction x its steps so far, within the cap; a run that did not
    trained to the cap."""
    preset = yaml.safe_load((ROOT / "config/studies/converged_capacity.yaml").read_text())
    runs = read_records(ROOT / "data" / "cache" / "converged_capacity.parquet")
    assert (runs["status"] == "ok").all()
    fraction = preset["train"]["decay_fraction"]
    for stage, section in (("scratch", "train"), ("finetune", "train"), ("upstream", "pretrain")):
        schedule, stopped = preset[section], runs[runs["stage"] == stage]
        assert schedule["until"] == "plateau" and len(stopped)
        cap, every = schedule["max_steps"], schedule["val_every"]
        at_plateau = stopped[stopped["stopped_by"] == "plateau"]
        start = at_plateau["plateau_step"]
        assert ((start >= 5 * every) & (start % every == 0) & (start <= cap)).all()
        cooled = np.minimum(cap, start + np.ceil(fraction * start))
        assert (at_plateau["steps"] == cooled).all()
        before_cap = at_plateau[start < cap]
        assert (before_cap["final_lr"] < 0.01 * before_cap["lr"]).all()
        capped = stopped[stopped["stopped_by"] == "max_steps"]
        assert (capped["steps"] == cap).all() and capped["plateau_step"].isna().all()


def test_the_workstation_cache_has_every_architecture_and_prior_at_four_sizes():
    runs = task_runs(read_records(ROOT / "data" / "cache" / "workstation.parquet"))
    # The 13 architectures of Tay et al. (the S4 ablations are the claims presets').
    assert len(set(runs["arch"])) == 13 and set(runs["arch"]) <= set(ARCHITECTURES)
    # Every prior but the causal ones (a claims preset's: amos_claims).
    assert set(runs["prior"]) == set(PRIORS) - {"random_causal", "spt_causal",
                                                "spt_causal_causal"}
    assert runs["size"].nunique() >= 4  # the saturating fit needs four


def test_the_frontier_cache_gives_s4_all_three_approaches():
    """The frontier cache (docs/results.md, j and k): S4's upstream IsoFLOP
    minima are bracketed at every budget, so approaches 1, 2 and 3 all give its
    exponent a with an interval (approach 2's, on four budgets with t on 2 df,
    reaches below 0); the transformer's lowest losses sit at the edge of its
    sizes at two of its four budgets, so its approach 2 is refused (refitted here
    as the workflow's frontier rule fits it)."""
    from scalestudy.analysis.frontier.stage import study_frontier

    runs = read_records(ROOT / "data" / "cache" / "frontier.parquet")
    result = study_frontier(runs, n_boot=200, quiet=True)
    fits = result.fits.set_index(["method", "arch", "prior"])
    for method in ("approach1", "approach2", "approach3"):
        row = fits.loc[(method, "s4", "upstream")]
        assert row["status"] == "ok" and row["a_low"] <= row["a"] <= row["a_high"], method
    assert set(fits["compute_axis"]) == {"counted"}
    s4 = fits.loc[("approach2", "s4", "upstream")]
    assert s4["n_points"] == 4 and s4["a_low"] < 0 < s4["a"]
    assert fits.loc[("approach2", "transformer", "upstream"), "status"].startswith("not enough")
