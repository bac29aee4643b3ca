"""The statistics under every fit: cleaning (x, y) pairs for a log-log fit,
least squares over a stack of resamples at once, and the percentile
bootstrap over runs (Efron & Tibshirani 1993, ch. 13). numpy only; used by
scaling.py, fits.py, the figures' bands and the claims.
"""

from __future__ import annotations

import numpy as np

# Index arrays for the bootstrap are (n_boot, n) ints; redraws of degenerate
# resamples stop after this many rounds (each round redraws only the bad rows).
MAX_REDRAWS = 1000


def clean(x, y, sizes) -> tuple[np.ndarray, np.ndarray, int]:
    """Drop pairs that are non-finite or non-positive; count distinct sizes kept."""
    x, y = np.asarray(x, dtype=float).ravel(), np.asarray(y, dtype=float).ravel()
    if x.shape != y.shape:
        raise ValueError(f"x and y differ in length: {x.size} != {y.size}")
    keep = np.isfinite(x) & np.isfinite(y) & (x > 0) & (y > 0)
    if sizes is None:
        labels = x[keep]
    else:
        labels = np.asarray(sizes, dtype=object).ravel()
        if labels.size != x.size:
            raise ValueError(f"sizes has {labels.size} labels for {x.size} points")
        labels = labels[keep]
    return x[keep], y[keep], len(set(labels.tolist()))


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


def loglog_replicates(lx, ly, n_boot: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Slopes and intercepts of the bootstrap refits behind `fit_loglog`'s interval:
    points (runs) resampled with replacement, resamples with one x redrawn."""
    idx = resample(np.random.default_rng(seed), lx, n_boot, min_distinct=2)
    return ols(lx[idx], ly[idx])
