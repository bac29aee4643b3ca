"""The statistics under every fit: cleaning (x, y) pairs for a log-log fit,
least squares over a stack of resamples at once, and the percentile
bootstrap (Efron & Tibshirani 1993, ch. 13). numpy only; used by scaling.py,
fits.py, the figures' bands and the claims.

The fits' bootstrap is stratified by model size: each replicate redraws the
runs of every size from that size's own runs (seeds), so no replicate loses a
size, and the design (which sizes, how many runs each) is the study's in every
replicate. A size's resampled runs deviate from its mean by sqrt(k / (k - 1))
times the drawn deviation (k its runs): the plain within-size bootstrap
spreads a size's mean by (k - 1) / k of its variance (half of it with two
seeds), and the rescaling makes that variance unbiased (the adjustment of
Davison & Hinkley 1997, ch. 3, for small strata). A size with a single run has
no within-size spread to draw from, so a fit with one gets no interval.

With two or three seeds per size that spread is itself estimated from a few
degrees of freedom (nu = runs - sizes), which a percentile interval ignores:
measured on 3-6 sizes x 2 seeds, the plain within-size percentile interval at
95% covered the true slope 0.74-0.86 of the time. `expanded_ci` widens it
about the replicates' median by t_nu / z (the small-sample expansion of
Hesterberg 2015's "expanded percentile interval"): coverage then 0.90-0.92 at
two seeds, 0.92-0.93 with three, 0.96 at 6 sizes x 5 (tests/test_scaling.py).
"""

from __future__ import annotations

import numpy as np

# Index arrays for the bootstrap are (n_boot, n) ints; redraws of degenerate
# resamples stop after this many rounds (each round redraws only the bad rows).
MAX_REDRAWS = 1000


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
    samples' median by t_df / z (module docstring); NaN without samples or df."""
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
    """The runs of a fit grouped by model size: each run's stratum, and the
    within-size resampling of `stratified` (module docstring)."""

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
    """(lx*, ly*) of n_boot within-size resamples (rows), ly rescaled (module
    docstring); None when some size has a single run. `u` (n_boot, n) uniforms,
    shared between fits to pair them; else drawn from `rng`."""
    if not strata.resamplable or n_boot <= 0:
        return None
    if u is None:
        u = rng.random((n_boot, lx.size))
    idx = strata.indices(u)
    return lx[idx], strata.rescaled(ly, idx)


def resampled_means(values, rng, n_boot: int) -> np.ndarray:
    """n_boot bootstrap means of `values` (one group's runs), each deviation from
    the group's mean rescaled by sqrt(k / (k - 1)) as a size's runs are (module
    docstring): their variance is the unbiased s^2 / k. One value: n_boot copies."""
    values = np.asarray(values, dtype=float)
    k = values.size
    drawn = values[rng.integers(0, k, (n_boot, k))].mean(axis=1)
    mean = values.mean()
    return mean + (np.sqrt(k / (k - 1)) if k > 1 else 1.0) * (drawn - mean)


def loglog_replicates(lx, ly, n_boot: int, seed: int, sizes=None
                      ) -> tuple[np.ndarray, np.ndarray]:
    """Slopes and intercepts of the bootstrap refits behind `fit_loglog`'s interval:
    runs resampled within each size (`sizes`, each run's label; default its x),
    empty when some size has a single run."""
    strata = Strata(lx if sizes is None else sizes)
    drawn = stratified(strata, lx, ly, n_boot, np.random.default_rng(seed))
    if drawn is None:
        return np.array([]), np.array([])
    return ols(*drawn)
