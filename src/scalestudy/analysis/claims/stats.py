"""The statistics the claims decide on: interval separation, contrasts of mean
accuracy over shared sizes with a bootstrap over sizes and runs, differences
of means, and Spearman's rank correlation of bootstrap replicates.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..fits import MIN_SIZES, size_order


def separation(a_low: float, a_high: float, b_low: float, b_high: float) -> str:
    """'above' when interval a lies wholly above b, 'below' when wholly below, else
    'overlap'."""
    if a_low > b_high:
        return "above"
    if a_high < b_low:
        return "below"
    return "overlap"



def contrast(runs: pd.DataFrame, cells: dict[str, tuple[dict, float]], *, n_boot: int = 1000,
             ci: float = 0.95, seed: int = 0) -> dict:
    """Mean over shared sizes of sum_k w_k * (mean test accuracy of cell k at that size).

    `cells` maps a label to (column filter, weight), e.g. {"spt": ({"prior": "spt"}, 1),
    "control": ({"prior": "scratch_matched"}, -1)}. Only runs with status "ok" count.
    The interval is a percentile bootstrap that resamples sizes (when at least
    MIN_SIZES are shared) and, within each resampled size, each cell's runs; with fewer
    sizes it resamples runs only, and needs two runs in every cell for that.
    """
    ok = runs[(runs["status"] == "ok") & np.isfinite(runs["test_acc"])]
    per_cell = {}
    for label, (where, _) in cells.items():
        mask = np.ones(len(ok), dtype=bool)
        for column, value in where.items():
            mask &= (ok[column] == value).to_numpy()
        per_cell[label] = {s: g.to_numpy(float) for s, g in
                           ok[mask].groupby("size")["test_acc"]}
    shared = set.intersection(*(set(d) for d in per_cell.values()))
    sizes = [s for s in size_order(ok) if s in shared]
    out = {"estimate": np.nan, "low": np.nan, "high": np.nan, "n_sizes": len(sizes),
           "sizes": sizes, "status": "ok"}
    if not sizes:
        return {**out, "status": "no size at which every compared cell has finished runs"}
    weights = {label: w for label, (_, w) in cells.items()}
    per_size = np.array([sum(w * per_cell[k][s].mean() for k, w in weights.items())
                         for s in sizes])
    out["estimate"] = float(per_size.mean())
    resample_sizes = len(sizes) >= MIN_SIZES
    single = min(per_cell[k][s].size for k in cells for s in sizes) < 2
    if not resample_sizes and single:
        return {**out, "status": f"no interval: {len(sizes)} shared size(s) (< {MIN_SIZES}) "
                                 "and a single run in some cell"}
    if n_boot <= 0:
        return {**out, "status": "no interval: n_boot = 0"}
    rng = np.random.default_rng(seed)
    # Each cell's bootstrap means at each size: (n_sizes, n_boot) per cell, summed.
    boot = np.zeros((len(sizes), n_boot))
    for k, w in weights.items():
        for i, s in enumerate(sizes):
            acc = per_cell[k][s]
            boot[i] += w * acc[rng.integers(0, acc.size, (n_boot, acc.size))].mean(axis=1)
    if resample_sizes:
        idx = rng.integers(0, len(sizes), (n_boot, len(sizes)))
        stats = np.take_along_axis(boot.T, idx, axis=1).mean(axis=1)
    else:
        stats = boot.mean(axis=0)
    out["low"], out["high"] = (float(q) for q in np.quantile(stats, [(1 - ci) / 2,
                                                                      (1 + ci) / 2]))
    return out



def mean_difference(a, b, *, n_boot: int = 1000, ci: float = 0.95, seed: int = 0) -> dict:
    """mean(a) - mean(b) of two independent groups of accuracies, with a percentile
    bootstrap interval resampling each group's runs (two runs needed in each)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    out = {"estimate": np.nan, "low": np.nan, "high": np.nan, "sizes": [], "status": "ok"}
    if a.size == 0 or b.size == 0:
        return {**out, "status": "a compared group has no finished run"}
    out["estimate"] = float(a.mean() - b.mean())
    if min(a.size, b.size) < 2:
        return {**out, "status": "no interval: a single run in a compared group"}
    if n_boot <= 0:
        return {**out, "status": "no interval: n_boot = 0"}
    rng = np.random.default_rng(seed)
    stats = (a[rng.integers(0, a.size, (n_boot, a.size))].mean(axis=1)
             - b[rng.integers(0, b.size, (n_boot, b.size))].mean(axis=1))
    out["low"], out["high"] = (float(q) for q in np.quantile(stats, [(1 - ci) / 2,
                                                                      (1 + ci) / 2]))
    return out



def spearman(x, y) -> np.ndarray:
    """Spearman's rank correlation (average ranks for ties) of each row of `x`
    with the same row of `y` (1-D: one value); NaN where a row is constant."""
    from scipy.stats import rankdata

    rx, ry = (rankdata(np.atleast_2d(v), axis=1) for v in (x, y))
    rx, ry = rx - rx.mean(axis=1, keepdims=True), ry - ry.mean(axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        rho = (rx * ry).sum(axis=1) / np.sqrt((rx**2).sum(axis=1) * (ry**2).sum(axis=1))
    return rho if np.ndim(x) > 1 else rho[0]


def boot_means(groups: list[np.ndarray], rng, n_boot: int) -> np.ndarray:
    """[n_boot, len(groups)]: each group's mean over its runs resampled."""
    return np.stack([g[rng.integers(0, g.size, (n_boot, g.size))].mean(axis=1)
                     for g in groups], axis=1)
