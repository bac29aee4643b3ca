"""The claims' statistics where a planted bug passed the suite, each against an interval
computed here independently:

- stats.alpha_difference: the t interval of a difference of exponents, with
  the smaller degrees of freedom when paired and Welch-Satterthwaite's when not;
  finetuned cells sharing one pretraining per size redraw sizes, on sizes - 2;
- tay.scale_like_reference: equivalence needs both one-sided contrasts;
- frontier.ranking_changes: Welch intervals at the Bonferroni level over every
  pair of architectures x budget;
- frontier.exponent_differs: the difference's interval from both fits'
  replicates, at the Bonferroni level over the architectures compared.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from scalestudy.analysis.claims import CLAIMS, Evidence
from scalestudy.analysis.claims.check import FAILS, HOLDS
from scalestudy.analysis.claims.contrasts import Law, alpha_difference
from scalestudy.analysis.stats import Residuals, lack_of_fit_p

from tests.analysis.claims.test_frontier import CHINCHILLA, surface_records
from tests.support.claim_studies import frontier_study, scaling, scopes, verdicts

LAW = Law("upstream_loss")  # sign -1: the exponent of a falling loss


def points(sizes, alpha, noise, seed) -> pd.DataFrame:
    """One run per size (seed 0) of loss 4 (N/1e4)^-alpha with log-normal noise."""
    rng = np.random.default_rng(seed)
    n = 1e4 * 4.0 ** np.arange(len(sizes))
    y = 4.0 * (n / 1e4) ** -alpha * np.exp(noise * rng.standard_normal(len(sizes)))
    return pd.DataFrame({"size": sizes, "seed": 0, "stage": "upstream",
                         "pretrain_seed": np.nan, "x": n, "y": y, "lx": np.log(n),
                         "ly": np.log(y)})


def slope(p: pd.DataFrame) -> float:
    return float(np.polyfit(p["lx"], p["ly"], 1)[0])


def line(p: pd.DataFrame) -> Residuals:
    """The residual bootstrap's draws (a run per size, no lack of fit to test: runs)."""
    return Residuals(p["lx"], p["ly"], p["size"], ids=[f"{s}/0" for s in p["size"]])


SIX = [f"n{i}" for i in range(6)]


@pytest.mark.parametrize("weights", [(1.0, -1.0), (1.0, -0.75), (-1.0, 1.25)])
def test_a_paired_difference_is_the_t_interval_of_its_replicates(weights):
    pa, pb = points(SIX, 0.3, 0.05, 1), points(SIX, 0.2, 0.05, 2)
    d = alpha_difference(pa, pb, LAW, ("a", "b"), weights=weights, n_boot=500, seed=3)
    assert d["status"] == "ok" and d["paired"]
    wa, wb = weights
    est = -(wa * slope(pa) + wb * slope(pb))
    # The same draws for both lines; n - 2 = 4 degrees of freedom each.
    u = np.random.default_rng(3).random((500, 6))
    reps = -(wa * line(pa).replicates(u)[0] + wb * line(pb).replicates(u)[0])
    half = sps.t.ppf(0.975, 4) * reps.std(ddof=1)
    assert d["df"] == 4
    assert (d["estimate"], d["low"], d["high"]) == pytest.approx((est, est - half, est + half),
                                                                 rel=1e-9)


@pytest.mark.parametrize("noise_b", [0.01, 0.05, 0.2])
def test_an_unpaired_difference_uses_welch_satterthwaite_degrees_of_freedom(noise_b):
    """a: 5 sizes (3 df), b: 8 other sizes (6 df): independent draws."""
    pa = points([f"a{i}" for i in range(5)], 0.3, 0.05, 1)
    pb = points([f"b{i}" for i in range(8)], 0.2, noise_b, 2)
    d = alpha_difference(pa, pb, LAW, ("a", "b"), n_boot=500, seed=3)
    assert d["status"] == "ok" and not d["paired"]
    rng = np.random.default_rng(3)
    ua, ub = rng.random((500, 5)), rng.random((500, 8))
    sa, sb = line(pa).replicates(ua)[0], line(pb).replicates(ub)[0]
    va, vb = sa.var(ddof=1), sb.var(ddof=1)
    df = (va + vb) ** 2 / (va**2 / 3 + vb**2 / 6)
    assert 3 < df < 9 and abs(df - 6) > 0.1  # neither the smaller nor the larger df
    est = slope(pb) - slope(pa)
    half = sps.t.ppf(0.975, df) * (sb - sa).std(ddof=1)
    assert d["df"] == pytest.approx(df, rel=1e-9)
    assert (d["estimate"], d["low"], d["high"]) == pytest.approx((est, est - half, est + half),
                                                                 rel=1e-9)


# --------------------------------------------------------------------------- shared pretraining

SIZES4 = {"n0": 1e4, "n1": 4e4, "n2": 1.6e5, "n3": 6.4e5}


def finetuned(arch: str, alpha: float, shared: bool, seed: int) -> pd.DataFrame:
    """Finetuned runs of `arch`, 4 sizes x 3 seeds, error 0.8 (N/1e4)^-alpha times
    each run's noise; with `shared` every seed of a size finetunes one pretraining
    (pretrain_seed 0), else each its own (the same errors either way)."""
    rng = np.random.default_rng(seed)
    rows = []
    for size, n in SIZES4.items():
        for s in range(3):
            err = 0.8 * (n / 1e4) ** -alpha * np.exp(rng.normal(0, 0.02))
            rows.append({"arch": arch, "size": size, "seed": s, "stage": "finetune",
                         "status": "ok", "pretrain_seed": 0 if shared else s,
                         "train_flops": 100 * n, "pretrain_flops": 1000 * n,
                         "test_acc": 1 - err})
    return pd.DataFrame(rows)


def size_replicates(p: pd.DataFrame, u: np.ndarray) -> tuple[float, np.ndarray]:
    """The slope of a line over runs of equal x within each size, and its residual
    bootstrap's slopes with a size as the unit, by hand: each size's mean residual
    over sqrt(1 - its leverage among the sizes), centred, redrawn per size (size j
    takes residual floor(u_j x k), sizes in sorted order), every run of a size
    moved by its size's draw."""
    p = p.sort_values(["size", "seed"])
    lx, ly = p["lx"].to_numpy(), p["ly"].to_numpy()
    slope, intercept = np.polyfit(lx, ly, 1)
    by = pd.DataFrame({"size": p["size"].to_numpy(), "lx": lx,
                       "r": ly - intercept - slope * lx}).groupby("size").mean()
    dx = by["lx"].to_numpy() - by["lx"].mean()
    k = len(by)
    scaled = by["r"].to_numpy() / np.sqrt(1 - (1 / k + dx * dx / np.sum(dx * dx)))
    scaled -= scaled.mean()
    drawn = scaled[np.minimum((u * k).astype(int), k - 1)]  # (n_boot, sizes)
    return slope, slope + drawn @ dx / np.sum(dx * dx)


def test_cells_sharing_a_pretraining_per_size_resample_sizes_with_sizes_minus_2_df():
    """Two architectures' finetuned runs, every seed of a size on one pretraining:
    however straight their line (no lack of fit shown), the difference of their
    exponents redraws sizes (paired: the same sizes) on 4 - 2 = 2 degrees of
    freedom, its interval the t interval of the replicates recomputed here. The
    same runs each on its own pretraining redraw runs, on 12 - 2 = 10."""
    law = Law("error")
    shared = law.cells(pd.concat([finetuned("a", 0.3, True, 1), finetuned("b", 0.2, True, 2)]))
    assert min(lack_of_fit_p(p["lx"], p["ly"], p["size"]) for p in shared.values()) > 0.05
    d = alpha_difference(shared["a"], shared["b"], law, ("a", "b"), n_boot=2000, seed=3)
    assert d["status"] == "ok" and d["paired"] and d["df"] == 2
    u = np.random.default_rng(3).random((2000, 4))
    (sa, ra), (sb, rb) = size_replicates(shared["a"], u), size_replicates(shared["b"], u)
    est, reps = -(sa - sb), -(ra - rb)
    half = sps.t.ppf(0.975, 2) * reps.std(ddof=1)
    assert (d["estimate"], d["low"], d["high"]) == pytest.approx(
        (est, est - half, est + half), rel=1e-9)
    own = law.cells(pd.concat([finetuned("a", 0.3, False, 1), finetuned("b", 0.2, False, 2)]))
    free = alpha_difference(own["a"], own["b"], law, ("a", "b"), n_boot=2000, seed=3)
    assert free["status"] == "ok" and free["paired"] and free["df"] == 10
    assert free["estimate"] == pytest.approx(est, rel=1e-12)
    assert free["high"] - free["low"] < 0.7 * (d["high"] - d["low"])


# --------------------------------------------------------------------------- equivalence


def test_an_exponent_below_the_lower_margin_is_not_equivalent():
    """glu at half the transformer's exponent: its contrast with the upper margin
    (1.25 x transformer - glu) lies above 0, with the lower one (glu - 0.75 x
    transformer) below 0, so the two one-sided tests do not both pass."""
    shallower = scaling(alpha_u={"transformer": 0.2, "glu": 0.1, "mos": 0.2},
                        alpha_d={"transformer": 0.1, "glu": 0.1, "mos": 0.1},
                        archs=("transformer", "glu", "mos"), noise=0.002)
    got = scopes("minimal_variants_scale_like_transformer", shallower)
    assert got[0].scope == "glu: upstream alpha_U"
    text = got[0].measurement
    assert "glu - 0.75 x transformer = -0.050" in text
    assert "1.25 x transformer - glu = 0.150" in text
    assert got[0].verdict == FAILS
    assert verdicts(got)[1:] == [HOLDS] * 3  # glu downstream, and mos, are equivalent


# --------------------------------------------------------------------------- the frontier claims

SIZES = {"xs": 1e4, "s": 4e4, "m": 1.6e5}


def budgeted_records(archs, budgets, seeds=(0, 1, 2), noise=0.05, seed=0) -> pd.DataFrame:
    """Budgeted upstream pretraining records: each architecture's loss falls with
    size at every budget, by an offset of its own, plus noise."""
    rng = np.random.default_rng(seed)
    rows = []
    for k, arch in enumerate(archs):
        for budget in budgets:
            for j, (size, params) in enumerate(SIZES.items()):
                for s in seeds:
                    rows.append({"study": "f", "task": "upstream", "arch": arch, "size": size,
                                 "prior": "upstream", "stage": "upstream", "seed": s,
                                 "status": "ok", "budget": budget, "n_params_nonembed": params,
                                 "train_flops": budget, "tokens_seen": budget / (6 * params),
                                 "upstream_loss": 3.0 - 0.1 * j + 0.05 * k
                                 + noise * rng.standard_normal(),
                                 "val_loss": np.nan, "steps": 100, "fork_step": None,
                                 "wall_seconds": 1.0, "fork_seconds": None})
    return pd.DataFrame(rows)


NUMBER = r"(-?\d+\.\d+)"
FIXED = re.compile(rf"(\w+) - (\w+) at size (\w+) = {NUMBER} \[{NUMBER}, {NUMBER}\]")


def welch_half(a: np.ndarray, b: np.ndarray, ci: float) -> float:
    va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
    df = (va + vb) ** 2 / (va**2 / (a.size - 1) + vb**2 / (b.size - 1))
    return float(sps.t.ppf((1 + ci) / 2, df) * np.sqrt(va + vb))


def test_the_ranking_claim_is_bonferroni_over_every_pair_and_budget():
    """Three architectures (3 pairs) at two budgets: six comparisons, each
    Welch interval at 1 - 0.05 / 6 (not / 2 scopes, not / 3 pairs)."""
    archs, budgets = ("transformer", "lconv", "s4"), (1e12, 1e13)
    runs = budgeted_records(archs, budgets)
    study = Evidence.of(runs, pd.DataFrame(), n_boot=100, ci=0.95, seed=0)
    got = CLAIMS["frontier_ranking_changes"].scopes(study)
    assert [s.scope for s in got] == ["upstream (upstream loss), budget 1e+12",
                                      "upstream (upstream loss), budget 1e+13"]
    level = 1 - 0.05 / 6
    checked = 0
    for scope, budget in zip(got, budgets, strict=True):
        for a, b, size, est, low, high in FIXED.findall(scope.measurement):
            at = runs[(runs["budget"] == budget) & (runs["size"] == size)]
            la = at.loc[at["arch"] == a, "upstream_loss"].to_numpy()
            lb = at.loc[at["arch"] == b, "upstream_loss"].to_numpy()
            assert float(est) == pytest.approx(la.mean() - lb.mean(), abs=6e-4)
            half = (float(high) - float(low)) / 2
            assert half == pytest.approx(welch_half(la, lb, level), abs=1e-3), scope
            checked += 1
    assert checked == 6


SWAPPED = {**CHINCHILLA, "alpha": CHINCHILLA["beta"], "beta": CHINCHILLA["alpha"]}


def surface(law: dict, arch: str, noise: float, seed: int) -> pd.DataFrame:
    """Budgeted upstream records of `arch` alone on the loss surface `law`, with
    its own noise and seed (test_claim_frontier's surface)."""
    return surface_records({arch: law}, noise=noise, seed=seed)


def exponent_scopes(runs: pd.DataFrame):
    study = frontier_study(runs, n_boot=200, ci=0.95, seed=0)
    return CLAIMS["frontier_exponent_differs"].scopes(study)


def intervals(text: str) -> dict[str, tuple[float, float, float]]:
    """Each `name = est [low, high]` of a measurement."""
    found = re.findall(rf"(a\([\w ()-]+?\)(?: - a\(\w+\))?)(?: at [\d.]+)? = "
                       rf"{NUMBER} \[{NUMBER}, {NUMBER}\]", text)
    return {name: tuple(map(float, nums)) for name, *nums in found}


@pytest.mark.parametrize("noisy", ["s4", "transformer"])
def test_the_exponent_difference_holds_both_fits_noise(noisy):
    """One fit noisy, the other nearly exact: the difference's interval is the
    noisy fit's own interval, moved by the other's estimate (one pair: the
    same level, the same budgets), whichever of the two is the noisy one."""
    law, swapped = CHINCHILLA, SWAPPED
    quiet = "transformer" if noisy == "s4" else "s4"
    noise = {noisy: 0.01, quiet: 0.0005}
    runs = pd.concat([surface(swapped, "s4", noise["s4"], 1),
                      surface(law, "transformer", noise["transformer"], 2)], ignore_index=True)
    (scope,) = exponent_scopes(runs)
    got = intervals(scope.measurement)
    a, ref = got["a(s4)"], got["a(transformer)"]
    est, low, high = got["a(s4) - a(transformer)"]
    assert est == pytest.approx(a[0] - ref[0], abs=1.5e-3)
    if noisy == "s4":
        expected = (a[1] - ref[0], a[2] - ref[0])
    else:
        expected = (a[0] - ref[2], a[0] - ref[1])
    width = expected[1] - expected[0]
    assert width > 5 * min(a[2] - a[1], ref[2] - ref[1])  # the design: one fit far noisier
    assert low == pytest.approx(expected[0], abs=0.1 * width), scope.measurement
    assert high == pytest.approx(expected[1], abs=0.1 * width), scope.measurement


def test_the_exponent_claim_is_bonferroni_over_the_architectures_compared():
    """Two architectures against the reference: each difference at 1 - 0.05 / 2.
    With the reference's fit nearly exact, a difference's interval is the
    architecture's own replicates' at 0.975, wider than its own interval at
    0.95 (for t-expanded normal replicates with 4 df, by t(0.9875)/t(0.975) =
    1.26), where at the study's level it would be as wide."""
    law, swapped = CHINCHILLA, SWAPPED
    runs = pd.concat([surface(swapped, "s4", 0.01, 1), surface(swapped, "glu", 0.01, 3),
                      surface(law, "transformer", 0.0005, 2)], ignore_index=True)
    got = exponent_scopes(runs)
    assert [s.scope for s in got] == ["glu vs transformer, upstream",
                                      "s4 vs transformer, upstream"]
    for scope, arch in zip(got, ("glu", "s4"), strict=True):
        assert "at 0.975 = " in scope.measurement, scope.measurement
        found = intervals(scope.measurement)
        own, diff = found[f"a({arch})"], found[f"a({arch}) - a(transformer)"]
        assert (diff[2] - diff[1]) > 1.12 * (own[2] - own[1]), scope.measurement
