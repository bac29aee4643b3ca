"""The statistics under every fit: cleaning (x, y) pairs for a log-log fit,
least squares over a stack of resamples at once, the residual bootstrap of a
log-log line and its t interval, the lack-of-fit test, and the within-size
bootstrap of the saturating fits and the held-out observations. numpy and
scipy only; used by scaling.py, fits.py, the figures' bands and the claims.

**A log-log line's interval** (`Residuals`, `t_interval`) is the classical
least-squares one computed by a residual bootstrap (Efron & Tibshirani 1993,
ch. 9): each replicate adds to the fitted line the fit's residuals redrawn
with replacement, each divided by sqrt(1 - leverage) and centred (Davison &
Hinkley 1997, alg. 6.3), and the interval is the estimate +- t_df x the
replicates' standard deviation, df = units - 2. Drawing residuals pools the
noise of every size (the power law's usual homoscedastic model in log space),
so the spread rests on n - 2 degrees of freedom and the interval covers at its
level (tests/analysis: 0.94-0.96 at 3-6 sizes x 1-3 seeds), where resampling
each size's own seeds rested on a Satterthwaite-like 1-4 and covered 0.90.
The replicates, not a formula, carry the interval so that differences of two
fits (paired: the same draws for runs of the same size and seed), the ratio
alpha_D / alpha_U and the figures' bands come from the same resampling.

**The unit** redrawn is a run, or a size (`SIZE`) when the runs of a size share
noise that their seeds do not show: one pretraining checkpoint finetuned by
every seed of a size. A size's residual is then its runs' mean residual,
redrawn for the whole size, and df = sizes - 2.

**What the interval is for**: the log-log chord, the least-squares slope of
log E[y] on log x over the sizes run, which is the power law's exponent where
the law holds and a local slope where it does not (a saturating E + A x^-s
curves in log-log, and its chord over a decade is not s). The lack-of-fit F
test (`lack_of_fit_p`) is reported, not acted on: a departure from the law
inflates the run-level residuals, so the interval already covers the chord
(measured over 2,000 studies per case, 3 sizes x 3 seeds over a decade, 2.7%
log noise: 0.942-0.994 for an exact law, E + A x^-0.5 and E + A x^-1), where
redrawing sizes when the test rejects (one degree of freedom at three sizes)
bought 0.001-0.005 of coverage for 3-68 points of power to show the slope
above 0 (docs/analysis.md, "Metrics"). Where it rejects, the fits table says
that the exponent is local (`LACK_OF_FIT_LEVEL`) and, with four sizes or more,
gives the saturating fit beside it.
"""

from __future__ import annotations

import numpy as np

# Index arrays for the bootstrap are (n_boot, n) ints; redraws of degenerate
# resamples stop after this many rounds (each round redraws only the bad rows).
MAX_REDRAWS = 1000

RUN, SIZE = "run", "size"  # the units a log-log line's residual bootstrap redraws
# A lack-of-fit p-value below this: no power law over the sizes run, the
# exponent is the local log-log slope (the interval's unit is not changed).
LACK_OF_FIT_LEVEL = 0.05


def clean(x, y, sizes) -> tuple[np.ndarray, np.ndarray, int]:
    """Drop pairs that are non-finite or non-positive; count distinct sizes kept."""
    x, y, labels = clean_labelled(x, y, sizes)
    return x, y, len(set(labels.tolist()))


def clean_labelled(x, y, sizes) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`clean`'s pairs with each one's size label (its x when `sizes` is None)."""
    x, y = np.asarray(x, dtype=float).ravel(), np.asarray(y, dtype=float).ravel()
    if x.shape != y.shape:
        raise ValueError(f"x and y differ in length: {x.size} != {y.size}")
    keep = np.isfinite(x) & np.isfinite(y) & (x > 0) & (y > 0)
    if sizes is None:
        labels = x
    else:
        labels = np.asarray(sizes, dtype=object).ravel()
        if labels.size != x.size:
            raise ValueError(f"sizes has {labels.size} labels for {x.size} points")
    return x[keep], y[keep], labels[keep]


def n_distinct_rows(v: np.ndarray) -> np.ndarray:
    """Number of distinct values in each row of a 2-D array."""
    s = np.sort(v, axis=1)
    return 1 + np.count_nonzero(np.diff(s, axis=1), axis=1)


def resample(rng: np.random.Generator, lx: np.ndarray, n_boot: int, min_distinct: int):
    """(n_boot, n) bootstrap indices over runs, each row with >= min_distinct x values.

    Degenerate rows (the fit is undefined on them) are redrawn, not kept: the
    percentile interval is then conditional on an identifiable fit. Rows still
    degenerate after `MAX_REDRAWS` rounds (only for pathological inputs) are skipped.
    """
    n = lx.size
    idx = rng.integers(0, n, size=(n_boot, n))
    for _ in range(MAX_REDRAWS):
        bad = n_distinct_rows(lx[idx]) < min_distinct
        if not bad.any():
            return idx
        idx[bad] = rng.integers(0, n, size=(int(bad.sum()), n))
    return idx[n_distinct_rows(lx[idx]) >= min_distinct]


def percentile_ci(samples: np.ndarray, ci: float) -> tuple[float, float]:
    if samples.size == 0:
        return np.nan, np.nan
    low, high = np.quantile(samples, [(1 - ci) / 2, (1 + ci) / 2])
    return float(low), float(high)


def expanded_ci(samples: np.ndarray, ci: float, df: float) -> tuple[float, float]:
    """The percentile interval of `samples` at `ci`, each end moved away from the
    samples' median by t_df / z, for statistics that are not linear in the data
    (a ratio, a relative error), whose percentiles keep their skew; NaN without
    samples or df (Hesterberg 2015's expanded percentile interval)."""
    from scipy.stats import norm, t

    if samples.size == 0 or not df >= 1:
        return np.nan, np.nan
    low, high = percentile_ci(samples, ci)
    mid = float(np.median(samples))
    f = float(t.ppf((1 + ci) / 2, df) / norm.ppf((1 + ci) / 2))
    return mid - f * (mid - low), mid + f * (high - mid)


def r2(obs: np.ndarray, fit: np.ndarray) -> float:
    ss_tot = np.sum((obs - obs.mean()) ** 2)
    return float(1 - np.sum((obs - fit) ** 2) / ss_tot) if ss_tot > 0 else np.nan


def ols(lx: np.ndarray, ly: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Closed-form least-squares slope and intercept along the last axis.

    Works on one regression (1-D) or a stack of them (2-D), so the bootstrap's
    n_boot regressions are a few array operations rather than a Python loop.
    """
    mx, my = lx.mean(axis=-1, keepdims=True), ly.mean(axis=-1, keepdims=True)
    dx = lx - mx
    slope = np.sum(dx * (ly - my), axis=-1) / np.sum(dx * dx, axis=-1)
    return slope, my[..., 0] - slope * mx[..., 0]


class Strata:
    """The runs of a fit grouped by model size, for the within-size bootstrap of
    the saturating fits and of held-out observations (`stratified`): each
    replicate redraws every size's runs from that size's own runs, so no
    replicate loses a size, and a size's resampled runs deviate from its mean by
    sqrt(k / (k - 1)) times the drawn deviation (k its runs), which makes that
    variance unbiased (Davison & Hinkley 1997, ch. 3, for small strata). A size
    with a single run has no spread to draw from."""

    def __init__(self, labels):
        labels = np.asarray(labels, dtype=object).ravel()
        _, self.codes, self.counts = np.unique(labels.astype(str), return_inverse=True,
                                               return_counts=True)
        self.order = np.argsort(self.codes, kind="stable")  # runs of stratum 0, then 1, ...
        self.starts = np.concatenate([[0], np.cumsum(self.counts)[:-1]])

    @property
    def df(self) -> int:
        """Degrees of freedom of the within-size spread: runs minus sizes."""
        return int(self.counts.sum() - self.counts.size)

    @property
    def resamplable(self) -> bool:
        """Every stratum has two runs or more (a within-size spread to draw from)."""
        return bool(self.counts.size) and bool((self.counts >= 2).all())

    def indices(self, u: np.ndarray) -> np.ndarray:
        """(n_boot, n) run indices from uniforms u (n_boot, n): position j draws a
        run of j's own stratum. The same u on two fits whose runs are listed in
        the same (size, seed) order draws the same seeds for both (paired)."""
        k = self.counts[self.codes]
        return self.order[self.starts[self.codes] + np.minimum((u * k).astype(int), k - 1)]

    def rescaled(self, values: np.ndarray, idx: np.ndarray) -> np.ndarray:
        """values at the drawn indices, each deviation from its stratum's mean scaled
        by sqrt(k / (k - 1)) (k the stratum's runs; strata of one run keep theirs)."""
        means = np.bincount(self.codes, weights=values) / self.counts
        k = self.counts.astype(float)
        factor = np.sqrt(np.divide(k, k - 1, out=np.ones_like(k), where=k > 1))
        centre = means[self.codes]
        return centre + factor[self.codes] * (values[idx] - centre)


def stratified(strata: Strata, lx, ly, n_boot: int, rng=None, u=None):
    """(lx*, ly*) of n_boot within-size resamples (rows), ly rescaled (`Strata`);
    None when some size has a single run. `u` (n_boot, n) uniforms,
    shared between fits to pair them; else drawn from `rng`."""
    if not strata.resamplable or n_boot <= 0:
        return None
    if u is None:
        u = rng.random((n_boot, lx.size))
    idx = strata.indices(u)
    return lx[idx], strata.rescaled(ly, idx)


def resampled_means(values, rng, n_boot: int) -> np.ndarray:
    """n_boot bootstrap means of `values` (one group's runs), each deviation from
    the group's mean rescaled by sqrt(k / (k - 1)) as a size's runs are
    (`Strata`): their variance is the unbiased s^2 / k. One value: n_boot copies."""
    values = np.asarray(values, dtype=float)
    k = values.size
    drawn = values[rng.integers(0, k, (n_boot, k))].mean(axis=1)
    mean = values.mean()
    return mean + (np.sqrt(k / (k - 1)) if k > 1 else 1.0) * (drawn - mean)


def t_interval(estimate: float, replicates: np.ndarray, df: float, ci: float
               ) -> tuple[float, float]:
    """estimate +- t_df x the replicates' standard deviation; NaN without
    replicates or degrees of freedom (module docstring)."""
    from scipy.stats import t

    replicates = np.asarray(replicates, dtype=float)
    if replicates.size < 2 or not df >= 1:
        return np.nan, np.nan
    half = float(t.ppf((1 + ci) / 2, df)) * float(np.std(replicates, ddof=1))
    return estimate - half, estimate + half


def fieller(num: float, den: float, num_replicates, den_replicates, df: float, ci: float
            ) -> tuple[float, float]:
    """Fieller's interval for the ratio num / den of two estimates (Fieller 1954):
    the ratios r for which num - r den is within t_df x its standard error of
    0, their variances and covariance taken from paired bootstrap replicates.
    Bounded only where den is itself shown away from 0 at this level (den^2 >
    t^2 var(den)); else NaN, NaN: the set is unbounded (the whole line, or the
    line less an interval), and no finite interval covers. Unlike a percentile
    interval of the replicates' ratios, it keeps its coverage as den nears 0
    (docs/analysis.md, "The ratio")."""
    from scipy.stats import t

    a = np.asarray(num_replicates, dtype=float)
    b = np.asarray(den_replicates, dtype=float)
    if a.size < 2 or a.size != b.size or not df >= 1:
        return np.nan, np.nan
    cov = np.cov(a, b, ddof=1)
    v_num, v_den, c = float(cov[0, 0]), float(cov[1, 1]), float(cov[0, 1])
    q = float(t.ppf((1 + ci) / 2, df)) ** 2
    lead = den * den - q * v_den
    if lead <= 0:
        return np.nan, np.nan
    mid = num * den - q * c
    disc = mid * mid - lead * (num * num - q * v_num)
    root = np.sqrt(max(disc, 0.0))
    return (mid - root) / lead, (mid + root) / lead


def welch_df(variances, dfs) -> float:
    """Welch-Satterthwaite degrees of freedom of a sum of independent variance
    estimates, each with its own degrees of freedom."""
    v, k = np.asarray(variances, dtype=float), np.asarray(dfs, dtype=float)
    total = float(v.sum())
    if total == 0:
        return float(k.min())
    return total**2 / float(np.sum(v * v / k))


def lack_of_fit_p(lx, ly, sizes) -> float:
    """The p-value of the lack-of-fit F test of the line of ly on lx (Draper &
    Smith 1998, sec. 2.1): the line against a free level per size (with the
    line's slope within sizes, where a size's runs differ in x: runs stopped
    at their plateau), the departure from the line over the scatter left
    within sizes. NaN with fewer than three sizes or no scatter left."""
    from scipy.stats import f

    lx, ly = np.asarray(lx, dtype=float), np.asarray(ly, dtype=float)
    _, codes = np.unique(np.asarray(sizes, dtype=object).astype(str), return_inverse=True)
    levels = np.eye(codes.max() + 1)[codes]
    full = np.column_stack([levels, lx])
    rank = np.linalg.matrix_rank(full)
    n = lx.size
    if levels.shape[1] < 3 or n <= rank or rank <= 2:
        return np.nan
    slope, intercept = ols(lx, ly)
    ss_line = float(np.sum((ly - intercept - slope * lx) ** 2))
    ss_full = float(np.sum((ly - full @ np.linalg.lstsq(full, ly, rcond=None)[0]) ** 2))
    ss_lack = max(ss_line - ss_full, 0.0)
    if ss_full == 0:
        return 0.0 if ss_lack > 0 else 1.0
    return float(f.sf((ss_lack / (rank - 2)) / (ss_full / (n - rank)), rank - 2, n - rank))


def interval_unit(lx, ly, sizes, size_noise: bool = False) -> tuple[str, float, str]:
    """The unit a line's residual bootstrap redraws (module docstring), the
    lack-of-fit p-value, and why the unit is the size ("" for runs):
    `size_noise` says that a size's runs share noise their seeds do not show.
    The lack of fit does not change the unit (module docstring)."""
    p = lack_of_fit_p(lx, ly, sizes)
    if size_noise:
        return SIZE, p, "one pretraining per size"
    return RUN, p, ""


def is_local(lack_of_fit: float) -> bool:
    """Whether the lack-of-fit test rejects the power law: the exponent is then
    the local log-log slope over the sizes run, not a law's."""
    return bool(lack_of_fit < LACK_OF_FIT_LEVEL)


def local_text(lack_of_fit: float) -> str:
    """What a fits table and a figure say of an exponent the lack-of-fit test
    rejects as a law."""
    return (f"no power law (lack of fit p = {lack_of_fit:.2g}): the local log-log slope "
            "over the sizes run")


def interval_text(unit: str, df: float, why: str = "") -> str:
    """How a line's interval was made, for the fits table: 'runs resampled, 4 df'."""
    text = f"{unit}s resampled, {df:g} df"
    return f"{text} ({why})" if why else text


class Residuals:
    """The residual bootstrap of the least-squares line of ly on lx (module
    docstring): the fit, each unit's residual (a run's, or under `SIZE` the mean
    of a size's runs) scaled by sqrt(1 - leverage) and centred, and replicates
    that redraw them. `units` labels the units in order (a run's `ids` entry,
    default its size; a size's name): two fits with the same units drawn with
    the same uniforms are paired."""

    def __init__(self, lx, ly, sizes=None, unit: str = RUN, ids=None):
        if unit not in (RUN, SIZE):
            raise ValueError(f"unit: got {unit!r}, accepted values: {RUN}, {SIZE}")
        self.lx, self.ly = np.asarray(lx, dtype=float), np.asarray(ly, dtype=float)
        self.unit = unit
        self.slope, self.intercept = ols(self.lx, self.ly)
        self.fitted = self.intercept + self.slope * self.lx
        labels = np.asarray(self.lx if sizes is None else sizes, dtype=object).astype(str)
        if unit == RUN:
            self.codes = np.arange(self.lx.size)
            self.units = labels if ids is None else np.asarray(ids, dtype=object).astype(str)
        else:
            self.units, self.codes = np.unique(labels, return_inverse=True)
        counts = np.bincount(self.codes).astype(float)
        ux = np.bincount(self.codes, weights=self.lx) / counts
        ur = np.bincount(self.codes, weights=self.ly - self.fitted) / counts
        dx = ux - ux.mean()
        sxx = float(np.sum(dx * dx))
        self.df = self.units.size - 2
        leverage = 1 / ux.size + (dx * dx / sxx if sxx > 0 else 0.0)
        scaled = ur / np.sqrt(np.clip(1 - leverage, 1e-12, None))
        self.residuals = scaled - scaled.mean()

    @property
    def resamplable(self) -> bool:
        """Some residual freedom: three units or more, x varying."""
        return self.df >= 1 and np.ptp(self.lx) > 0

    def uniforms(self, n_boot: int, rng: np.random.Generator) -> np.ndarray:
        return rng.random((n_boot, self.units.size))

    def replicates(self, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Slopes and intercepts of the refits of the lines that the uniforms
        u (n_boot, units) redraw; empty without residual freedom."""
        if not self.resamplable or len(u) == 0:
            return np.array([]), np.array([])
        k = self.units.size
        drawn = self.residuals[np.minimum((u * k).astype(int), k - 1)]
        ly = self.fitted + drawn[:, self.codes]
        return ols(np.broadcast_to(self.lx, ly.shape), ly)


def run_line(lx, ly, sizes, seeds, size_noise: bool = False) -> Residuals:
    """The residual bootstrap of runs (log x, log y) labelled by size and seed,
    with the unit a fit's interval uses for them (`interval_unit`): runs are
    identified as size/seed, so two lines over the same runs pair."""
    unit, _, _ = interval_unit(lx, ly, sizes, size_noise)
    ids = [f"{size}/{seed}" for size, seed in zip(sizes, seeds, strict=True)]
    return Residuals(lx, ly, sizes, unit, ids)


def loglog_replicates(lx, ly, n_boot: int, seed: int, sizes=None, unit: str = RUN
                      ) -> tuple[np.ndarray, np.ndarray, int]:
    """Slopes and intercepts of the bootstrap refits behind `fit_loglog`'s interval
    (`Residuals` with `unit`, uniforms from `seed`) and their degrees of freedom;
    empty without residual freedom."""
    res = Residuals(lx, ly, sizes, unit)
    slopes, intercepts = res.replicates(res.uniforms(n_boot, np.random.default_rng(seed)))
    return slopes, intercepts, res.df
