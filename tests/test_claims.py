"""The decision rules of the claims added for issue 15, each on synthetic records
built to hold, to fail and to lack data (fast: no training, no fit stage)."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

from scalestudy.analysis.claims import amos, report, stats, tay, xu
from scalestudy.analysis.claims.check import FAILS, HOLDS, NO_DATA

PARAMS = {"xxs": 1e4, "xs": 4e4, "s": 1.6e5, "m": 6.4e5}
# (depth, width) of each size under the depth and width protocols (xs: the anchor).
SHAPES = {"depth": {"xxs": (1, 32), "xs": (2, 32), "s": (8, 32), "m": (36, 32)},
          "width": {"xxs": (2, 16), "xs": (2, 32), "s": (2, 64), "m": (2, 136)},
          "default": {"xxs": (2, 16), "xs": (2, 32), "s": (2, 64), "m": (4, 96)}}
BOOT = {"n_boot": 300, "seed": 0}


def runs(acc, archs=("transformer",), sizes=("xxs", "xs", "s"), priors=("random",),
         seeds=(0, 1), protocols=("default",), status=None) -> pd.DataFrame:
    """Task-run records: test accuracy acc(arch, size, prior, protocol) plus a
    seed-dependent +-0.005; `status(arch, size, prior)` (default "ok")."""
    rows = []
    for arch, size, prior, protocol, seed in itertools.product(archs, sizes, priors,
                                                               protocols, seeds):
        depth, width = SHAPES[protocol][size]
        rows.append(dict(
            study="synthetic", task="listops", arch=arch, size=size, prior=prior, seed=seed,
            stage="finetune" if prior.startswith("spt") or prior == "upstream" else "scratch",
            status=status(arch, size, prior) if status else "ok",
            test_acc=acc(arch, size, prior, protocol) + (0.005 if seed % 2 else -0.005),
            n_params_nonembed=PARAMS[size], depth=depth, width=width, protocol=protocol,
            norm="none" if prior in ("dtfixup", "random_noln") else "pre",
        ))
    return pd.DataFrame(rows)


def fits(rows: list[dict]) -> pd.DataFrame:
    """A fits frame of log-log rows: metric, arch, task, prior, alpha, interval."""
    base = {"form": "loglog", "task": "listops", "prior": "upstream", "status": "ok"}
    return pd.DataFrame([{**base, **r} for r in rows])


def fit(metric, arch, alpha, low, high, **more) -> dict:
    if metric == "alpha_U":
        more = {"task": "upstream", "prior": "upstream", **more}
    return dict(metric=metric, arch=arch, alpha=alpha, alpha_low=low, alpha_high=high, **more)


def verdicts(checks) -> list[str]:
    return [c.verdict for c in checks]


# --------------------------------------------------------------------------- Tay et al.


def test_switch_highest_alpha_ud():
    rows = [fit("alpha_UD", "transformer", 0.5, 0.4, 0.6),
            fit("alpha_UD", "mixer", 0.3, 0.2, 0.4)]
    holds = fits(rows + [fit("alpha_UD", "switch", 0.9, 0.8, 1.0)])
    assert verdicts(tay.switch_transfers_best(holds)) == [HOLDS]
    overlaps = fits(rows + [fit("alpha_UD", "switch", 0.6, 0.55, 0.7)])
    (check,) = tay.switch_transfers_best(overlaps)
    assert check.verdict == FAILS and "overlapping: transformer" in check.measurement
    refused = fits(rows + [fit("alpha_UD", "switch", np.nan, np.nan, np.nan,
                               status="not enough sizes: 2 < 3")])
    assert verdicts(tay.switch_transfers_best(refused)) == [NO_DATA]
    assert verdicts(tay.switch_transfers_best(fits(rows))) == [NO_DATA]  # no switch


def _ranking(small, large):
    return lambda arch, size, prior, protocol: (small if size == "xxs" else large)[arch]


ARCHS3 = ("transformer", "switch", "mixer")


def test_best_architecture_changes_with_scale():
    flipped = runs(_ranking({"transformer": 0.3, "switch": 0.4, "mixer": 0.5},
                            {"transformer": 0.6, "switch": 0.5, "mixer": 0.4}),
                   archs=ARCHS3, sizes=("xxs", "xs", "s"))
    (check,) = tay.best_arch_changes_with_scale(flipped, **BOOT)
    assert check.verdict == HOLDS
    assert "rho(xxs, s) over 3 architectures = -1.000" in check.measurement
    assert "best at xxs: mixer, at s: transformer" in check.measurement
    assert "3 of 3 pairs cross" in check.measurement
    same = runs(_ranking({"transformer": 0.3, "switch": 0.4, "mixer": 0.5},
                         {"transformer": 0.4, "switch": 0.5, "mixer": 0.6}),
                archs=ARCHS3, sizes=("xxs", "s"))
    (check,) = tay.best_arch_changes_with_scale(same, **BOOT)
    assert check.verdict == FAILS and "0 of 3 pairs cross: none" in check.measurement
    one_seed = flipped[flipped["seed"] == 0]
    assert verdicts(tay.best_arch_changes_with_scale(one_seed, **BOOT)) == [NO_DATA]
    # Two protocols' runs collected together are ranked apart.
    both = pd.concat([flipped, same.assign(protocol="width")])
    checks = tay.best_arch_changes_with_scale(both, **BOOT)
    assert [(c.scope, c.verdict) for c in checks] == [
        ("listops / random / default protocol", HOLDS),
        ("listops / random / width protocol", FAILS)]
    two_archs = flipped[flipped["arch"] != "mixer"]
    assert verdicts(tay.best_arch_changes_with_scale(two_archs, **BOOT)) == [NO_DATA]


def _protocols(depth_gain):
    return lambda arch, size, prior, protocol: 0.4 + (depth_gain if protocol == "depth" else 0)


def test_depth_scaling_beats_width_scaling():
    both = ("depth", "width")
    holds = runs(_protocols(0.05), archs=("transformer", "lconv"), protocols=both)
    checks = tay.depth_beats_width(holds, **BOOT)
    assert [c.scope for c in checks] == ["listops / transformer / random",
                                         "listops / lconv / random"]
    assert verdicts(checks) == [HOLDS, HOLDS]
    # The anchor size builds one shape under both protocols and is left out.
    assert "over sizes xxs, s" in checks[0].measurement
    fails = runs(_protocols(-0.05), protocols=both)
    assert verdicts(tay.depth_beats_width(fails, **BOOT)) == [FAILS]
    only_depth = runs(_protocols(0.05), protocols=("depth",))
    (check,) = tay.depth_beats_width(only_depth, **BOOT)
    assert check.verdict == NO_DATA and "no runs of the width protocol" in check.measurement
    other_arch = runs(_protocols(0.05), archs=("switch",), protocols=both)
    assert verdicts(tay.depth_beats_width(other_arch, **BOOT)) == [NO_DATA]


def _variants(glu, mos):
    tf = [fit("alpha_U", "transformer", 0.2, 0.15, 0.25),
          fit("alpha_D", "transformer", 0.1, 0.05, 0.15)]
    return fits(tf + [fit("alpha_U", "glu", glu, glu - 0.1, glu + 0.1),
                      fit("alpha_D", "glu", glu / 2, 0.0, 1.0),
                      fit("alpha_U", "mos", mos, mos - 0.1, mos + 0.1),
                      fit("alpha_D", "mos", mos / 2, 0.0, 1.0)])


def test_minimal_variants_scale_like_the_transformer():
    checks = tay.minimal_variants_scale_like_transformer(_variants(0.22, 0.18))
    assert [c.scope for c in checks] == [
        "glu: upstream alpha_U", "glu: listops alpha_D (upstream prior)",
        "mos: upstream alpha_U", "mos: listops alpha_D (upstream prior)"]
    assert verdicts(checks) == [HOLDS] * 4
    checks = tay.minimal_variants_scale_like_transformer(_variants(0.4, 0.18))
    assert verdicts(checks) == [FAILS, FAILS, HOLDS, HOLDS]
    no_transformer = _variants(0.22, 0.18).query("arch != 'transformer'")
    assert set(verdicts(tay.minimal_variants_scale_like_transformer(no_transformer))) == {
        NO_DATA}


def test_mixer_performer_albert_scale_flat_or_negatively_downstream():
    flat = fits([fit("alpha_D", "mixer", 0.01, -0.02, 0.04),
                 fit("alpha_D", "performer", -0.05, -0.08, -0.02),
                 fit("alpha_D", "albert", 0.2, 0.1, 0.3)])
    assert verdicts(tay.flat_or_negative_downstream(flat)) == [HOLDS, HOLDS, FAILS]
    with_reference = fits([fit("alpha_D", "mixer", 0.01, -0.02, 0.04),
                           fit("alpha_D", "transformer", 0.1, 0.05, 0.15)])
    mixer, performer, albert = tay.flat_or_negative_downstream(with_reference)
    assert mixer.measurement.endswith("(transformer: 0.100 [0.050, 0.150])")
    assert (performer.verdict, performer.measurement) == (NO_DATA, "no runs")
    scratch_only = flat.assign(prior="random")  # Tay et al.'s downstream is finetuned
    (check,) = tay.flat_or_negative_downstream(scratch_only)
    assert check.verdict == NO_DATA
    no_interval = flat.assign(alpha_low=np.nan, alpha_high=np.nan)
    assert verdicts(tay.flat_or_negative_downstream(no_interval)) == [NO_DATA] * 3


# --------------------------------------------------------------------------- Amos et al.


def _spt(gain):
    """Accuracy 0.4, plus gain(size) under spt."""
    return lambda arch, size, prior, protocol: 0.4 + (gain(size) if prior == "spt" else 0)


def test_spt_beats_random_at_every_size():
    priors = ("random", "spt")
    holds = runs(_spt(lambda s: 0.05), priors=priors)
    (check,) = amos.spt_beats_random_every_size(holds, **BOOT)
    assert check.verdict == HOLDS and check.measurement.count("0.050") == 3
    one_size_worse = runs(_spt(lambda s: -0.05 if s == "s" else 0.05), priors=priors)
    assert verdicts(amos.spt_beats_random_every_size(one_size_worse, **BOOT)) == [FAILS]
    one_seed = holds[holds["seed"] == 0]
    assert verdicts(amos.spt_beats_random_every_size(one_seed, **BOOT)) == [NO_DATA]
    no_random = holds[holds["prior"] == "spt"]
    assert verdicts(amos.spt_beats_random_every_size(no_random, **BOOT)) == [NO_DATA]


def _structure(gap_random, gap_spt):
    def acc(arch, size, prior, protocol):
        gap = gap_random if prior == "random" else gap_spt
        return 0.4 + (gap if arch == "s4" else 0.0)
    return runs(acc, archs=("s4", "s4_unstructured"), priors=("random", "spt"))


def test_structured_s4_is_mostly_redundant_under_spt():
    (check,) = amos.structure_redundant_under_spt(_structure(0.10, 0.01), **BOOT)
    assert check.verdict == HOLDS and "reduction = 0.090" in check.measurement
    (check,) = amos.structure_redundant_under_spt(_structure(0.10, 0.10), **BOOT)
    assert check.verdict == FAILS
    only_s4 = _structure(0.10, 0.01).query("arch == 's4'")
    assert verdicts(amos.structure_redundant_under_spt(only_s4, **BOOT)) == [NO_DATA]


def _objectives(masked_gain, causal_gain):
    gain = {"spt": masked_gain, "spt_causal": causal_gain}
    return runs(lambda arch, size, prior, protocol: 0.4 + gain.get(prior, 0.0),
                priors=("random", "random_causal", "spt", "spt_causal"))


def test_spt_works_with_both_objectives():
    checks = amos.spt_works_with_both_objectives(_objectives(0.05, 0.03), **BOOT)
    assert [c.scope for c in checks] == [
        "listops / transformer / masked (next token if train.causal)",
        "listops / transformer / next token (causal backbone)"]
    assert verdicts(checks) == [HOLDS, HOLDS]
    checks = amos.spt_works_with_both_objectives(_objectives(0.05, -0.03), **BOOT)
    assert verdicts(checks) == [HOLDS, FAILS]
    masked_only = _objectives(0.05, 0.03).query("prior in ['random', 'spt']")
    checks = amos.spt_works_with_both_objectives(masked_only, **BOOT)
    assert verdicts(checks) == [HOLDS, NO_DATA]


# --------------------------------------------------------------------------- Xu et al.


def _deep(dt_rise, std_rise, std_deepest="ok"):
    """Depth protocol (depths 1, 2, 8 at width 32): accuracy 0.4 at depth 1,
    rising linearly in log depth by dt_rise / std_rise up to depth 8."""
    def acc(arch, size, prior, protocol):
        step = {"xxs": 0.0, "xs": 1 / 3, "s": 1.0}[size]
        return 0.4 + step * (dt_rise if prior == "dtfixup" else std_rise)

    def status(arch, size, prior):
        return std_deepest if prior == "random_noln" and size == "s" else "ok"

    return runs(acc, priors=("dtfixup", "random_noln"), protocols=("depth",), status=status)


def test_dtfixup_deeper_is_better_and_the_standard_recipe_is_not():
    (check,) = xu.dtfixup_deeper_is_better(_deep(0.1, 0.0, "diverged"), **BOOT)
    assert check.verdict == HOLDS
    assert check.measurement.startswith("width 32, depth 1 -> 8: dtfixup rise = 0.100")
    assert "standard: all 2 runs at depth 8 diverged or failed" in check.measurement
    assert verdicts(xu.dtfixup_deeper_is_better(_deep(0.1, -0.1), **BOOT)) == [HOLDS]
    # The standard recipe trains and improves too: not shown.
    assert verdicts(xu.dtfixup_deeper_is_better(_deep(0.1, 0.1), **BOOT)) == [FAILS]
    # DT-Fixup does not improve with depth.
    assert verdicts(xu.dtfixup_deeper_is_better(_deep(-0.1, -0.2), **BOOT)) == [FAILS]
    one_depth = _deep(0.1, -0.1).query("size == 's'")
    assert verdicts(xu.dtfixup_deeper_is_better(one_depth, **BOOT)) == [NO_DATA]
    one_seed = _deep(0.1, -0.1).query("seed == 0")
    assert verdicts(xu.dtfixup_deeper_is_better(one_seed, **BOOT)) == [NO_DATA]


@pytest.mark.parametrize("n_boot", [0, 200])
def test_mean_difference_interval(n_boot):
    d = stats.mean_difference([0.5, 0.6], [0.3, 0.3], n_boot=n_boot)
    assert d["estimate"] == pytest.approx(0.25)
    if n_boot:
        assert 0.2 <= d["low"] <= d["high"] <= 0.3 and d["status"] == "ok"
    else:
        assert np.isnan(d["low"]) and d["status"].startswith("no interval")
    assert stats.mean_difference([0.5], [0.3], n_boot=n_boot)["status"].startswith(
        "no interval")


def test_runs_section_names_the_runs_that_stopped_at_their_cap_not_their_plateau():
    study = runs(lambda *_: 0.4).assign(steps=500, stopped_by="plateau", diverged_step=None,
                                        error="")
    study.loc[3, ["stopped_by", "steps"]] = ("max_steps", 2000)
    text = "\n".join(report.runs_markdown(study))
    assert "5 of 6 ok runs stopped at their validation loss's plateau" in text
    assert "1 reached their max_steps cap first and may not have converged:" in text
    row = study.loc[3]
    assert f"| {row['arch']} | {row['size']} | {row['prior']} | {row['seed']} | 2000 |" in text
    # A study whose runs all trained max_steps says nothing of plateaus.
    fixed = "\n".join(report.runs_markdown(study.assign(stopped_by="max_steps")))
    assert "plateau" not in fixed and "6 ok" in fixed


def test_spearman_is_scipys_per_row_and_nan_for_a_constant_row():
    from scipy.stats import spearmanr

    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(50, 6)), rng.normal(size=(50, 6))
    x[3, :2] = x[3, 2]  # ties get average ranks
    rows = stats.spearman(x, y)
    assert rows.shape == (50,)
    assert np.allclose(rows, [spearmanr(a, b).statistic for a, b in zip(x, y, strict=True)])
    assert stats.spearman(x[7], y[7]) == pytest.approx(spearmanr(x[7], y[7]).statistic)
    x[9] = 1.0
    assert np.isnan(stats.spearman(x, y)[9]) and np.isnan(stats.spearman(x[9], y[9]))
