"""analysis/stats.py against computations made here by hand: the width of the
residual bootstrap's interval when a size is its unit (each size's mean
residual scaled by its leverage among the sizes), and the lack-of-fit F test's
p-value and degrees of freedom near the level that calls an exponent a local
slope; Fieller's interval of a ratio against its definition."""

import numpy as np
import pytest
from scipy.stats import f, t

from scalestudy.analysis.scaling import fit_loglog
from scalestudy.analysis.stats import LACK_OF_FIT_LEVEL, lack_of_fit_p


def test_a_size_unit_interval_scales_each_size_s_residual_by_its_leverage_among_sizes():
    """3 sizes x 3 seeds sharing their size's noise, the sizes unevenly spaced
    (log x 0, 1 and 3 decades: leverages 0.36, 0.45 and 0.19 apart from 1/3).
    Oracle: each size's mean residual over sqrt(1 - h), h = 1/3 + dx^2 / Sxx over
    the sizes' x, centred; a replicate's slope moves by sum dx e* / Sxx, e* drawn
    per size, so its standard deviation is sqrt(mean(e^2) / Sxx), and the interval
    is alpha +- t_1 x that. A leverage over the runs (1/9 + ...) would make it
    about a third narrower."""
    lxs = np.log([1e6, 1e7, 1e9])
    x = np.repeat(np.exp(lxs), 3)
    y = 3.0 * x**-0.3 * np.exp(np.random.default_rng(0).normal(0, 0.05, 9))
    fit = fit_loglog(x, y, np.repeat(["a", "b", "c"], 3), size_noise=True, n_boot=20000)
    assert (fit.interval_unit, fit.interval_df) == ("size", 1.0)
    lx, ly = np.log(x), np.log(y)
    slope, intercept = np.polyfit(lx, ly, 1)
    mean_residual = (ly - intercept - slope * lx).reshape(3, 3).mean(axis=1)
    dx = lxs - lxs.mean()
    sxx = float(np.sum(dx * dx))
    scaled = mean_residual / np.sqrt(1 - (1 / 3 + dx * dx / sxx))
    scaled -= scaled.mean()
    sd = np.sqrt(np.mean(scaled**2) / sxx)
    half = t.ppf(0.975, 1) * sd
    assert fit.alpha == pytest.approx(-slope, rel=1e-12)
    assert fit.alpha_high - fit.alpha == pytest.approx(half, rel=0.02)
    assert fit.alpha - fit.alpha_low == pytest.approx(half, rel=0.02)


def lack_of_fit_oracle(lx, ly, sizes) -> float:
    """The F test of the line against a free level per size (with a common slope
    within sizes, where x varies within one), by hand: the pure error is the
    scatter about each size's own line of the within-size slope (its mean where
    x does not vary), on runs - sizes - 1 df (runs - sizes without a slope within),
    the lack of fit what the line leaves beyond it, on the rest of sizes - 2."""
    lx, ly, sizes = np.asarray(lx), np.asarray(ly), np.asarray(sizes)
    labels = np.unique(sizes)
    cx = lx - np.array([lx[sizes == s].mean() for s in sizes])
    cy = ly - np.array([ly[sizes == s].mean() for s in sizes])
    within = float(np.sum(cx * cx)) > 1e-12
    b = float(np.sum(cx * cy) / np.sum(cx * cx)) if within else 0.0
    ss_pure = float(np.sum((cy - b * cx) ** 2))
    slope, intercept = np.polyfit(lx, ly, 1)
    ss_line = float(np.sum((ly - intercept - slope * lx) ** 2))
    df_lack = labels.size - 2 + within
    df_pure = lx.size - labels.size - within
    return float(f.sf(((ss_line - ss_pure) / df_lack) / (ss_pure / df_pure), df_lack, df_pure))


@pytest.mark.parametrize("seed, rejected", [(134, True), (8, False)])
def test_the_lack_of_fit_test_near_its_level(seed, rejected):
    """4 sizes x 3 seeds, each size off the line by a little (p 0.041 and 0.061):
    the p-value is the F test's on (4 - 2, 12 - 4) degrees of freedom, and the
    level decides whether the exponent is called a local slope on either side of
    it; the interval redraws runs either way."""
    lxs = np.log(np.logspace(6, 9, 4))
    rng = np.random.default_rng(seed)
    bump = rng.normal(0, 0.02, 4)
    lx = np.repeat(lxs, 3)
    ly = np.log(3.0) - 0.3 * lx + np.repeat(bump, 3) + rng.normal(0, 0.03, 12)
    sizes = np.repeat(list("abcd"), 3)
    p = lack_of_fit_oracle(lx, ly, sizes)
    assert abs(p - LACK_OF_FIT_LEVEL) < 0.015 and (p < LACK_OF_FIT_LEVEL) == rejected
    assert lack_of_fit_p(lx, ly, sizes) == pytest.approx(p, rel=1e-9)
    fit = fit_loglog(np.exp(lx), np.exp(ly), sizes, n_boot=100)
    assert fit.lack_of_fit_p == pytest.approx(p, rel=1e-9)
    assert (fit.interval_unit, fit.interval_df) == ("run", 10.0)
    assert ("no power law" in fit.interval) == rejected


def test_the_lack_of_fit_test_of_runs_that_differ_in_x_within_a_size():
    """Runs stopped at their plateau differ in x within a size: the line is tested
    against a free level per size with one slope within sizes, on (4 - 1, 12 - 5)
    degrees of freedom."""
    rng = np.random.default_rng(3)
    lx = np.repeat(np.log(np.logspace(6, 9, 4)), 3) + rng.normal(0, 0.3, 12)
    ly = np.log(3.0) - 0.3 * lx + np.repeat(rng.normal(0, 0.03, 4), 3) + rng.normal(0, 0.03, 12)
    sizes = np.repeat(list("abcd"), 3)
    p = lack_of_fit_oracle(lx, ly, sizes)
    assert 0.001 < p < 0.999
    assert lack_of_fit_p(lx, ly, sizes) == pytest.approx(p, rel=1e-9)


def test_fieller_interval_solves_its_defining_equation():
    """Fieller's interval for num / den: its ends are the r at which num - r den
    is exactly t_df standard errors from 0, its variance var(num) - 2 r
    cov + r^2 var(den) from the replicates (oracle: that equation, solved here
    by scipy's root finder); unbounded (NaN) where den is not shown away from
    0 at the level; near the delta method's interval where den is far from 0."""
    from scipy.optimize import brentq

    from scalestudy.analysis.stats import fieller

    rng = np.random.default_rng(0)
    cov = [[0.02**2, 0.6 * 0.02 * 0.008], [0.6 * 0.02 * 0.008, 0.008**2]]
    reps = rng.multivariate_normal([0.06, 0.02], cov, size=4000)
    num, den, df = 0.06, 0.02, 7
    low, high = fieller(num, den, reps[:, 0], reps[:, 1], df, 0.95)
    v = np.cov(reps[:, 0], reps[:, 1], ddof=1)
    q = t.ppf(0.975, df) ** 2

    def g(r):
        return (num - r * den) ** 2 - q * (v[0, 0] - 2 * r * v[0, 1] + r * r * v[1, 1])

    assert low == pytest.approx(brentq(g, -50, num / den), rel=1e-9)
    assert high == pytest.approx(brentq(g, num / den, 1e3), rel=1e-9)
    assert high - num / den > num / den - low  # skewed away from den = 0
    assert np.isnan(fieller(num, 0.01, reps[:, 0], reps[:, 1], df, 0.95)[0])
    far = reps * [1, 0.1] + [0, 0.2 * 0.9]  # den 0.2, se 0.0008: the delta method's
    low, high = fieller(num, 0.2, far[:, 0], far[:, 1], df, 0.95)
    se = np.sqrt(v[0, 0]) / 0.2  # num's noise dominates the ratio's
    assert (high - low) / 2 == pytest.approx(t.ppf(0.975, df) * se, rel=0.05)
