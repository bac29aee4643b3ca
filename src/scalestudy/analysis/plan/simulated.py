"""The claims' statistics over many simulated studies at once (rows: studies),
each what the claims compute on one study (claims/contrasts.py,
analysis/stats.py) with the bootstrap's variance in closed form:

- `Line`: the least-squares line of log y on log x and the residual
  bootstrap's draws: each unit's residual (a run's, or a size's mean) scaled
  by sqrt(1 - leverage) and centred (stats.Residuals). A replicate's slope is
  slope + sum_j c_j e*_j, c_j the unit's summed dx over Sxx and e*_j drawn
  from the residuals, so its variance is sum_j c_j^2 mean(e^2): what the
  bootstrap's standard deviation tends to with its replicates.
- `contrast`: sum_l w_l alpha_l of lines that redraw the same units with the
  same draws (paired), its variance sum_j mean_u (sum_l w_l s_l c_lj e_lu)^2,
  df the smallest line's units - 2 (contrasts.alpha_difference);
- `welch`: contrasts.welch's interval of a weighted sum of cells' means.

Each returns (estimate, standard error, df); `Test` judges one against a bound.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.stats import t as student


@dataclass(frozen=True)
class Line:
    slope: np.ndarray  # (S,)
    c: np.ndarray  # (S, k): each unit's summed dx over Sxx
    resid: np.ndarray  # (S, k): scaled, centred residuals of the units
    df: int
    sign: int  # alpha = sign x slope: -1 for a falling law (alpha_U, alpha_D), +1 alpha_U,D

    @property
    def alpha(self) -> np.ndarray:
        return self.sign * self.slope


def line(lx: np.ndarray, ly: np.ndarray, units: np.ndarray | None = None, sign: int = -1) -> Line:
    """The line of ly (S, n) on lx ((n,) or (S, n)); `units` (n,) codes of the
    units redrawn (None: runs)."""
    ly = np.asarray(ly, dtype=float)
    lx = np.broadcast_to(np.asarray(lx, dtype=float), ly.shape)
    n = ly.shape[1]
    units = np.arange(n) if units is None else np.asarray(units)
    k = int(units.max()) + 1
    onehot = np.eye(k)[units]  # (n, k)
    counts = onehot.sum(axis=0)
    dx = lx - lx.mean(axis=1, keepdims=True)
    sxx = (dx * dx).sum(axis=1)
    slope = (dx * ly).sum(axis=1) / sxx
    intercept = ly.mean(axis=1) - slope * lx.mean(axis=1)
    r = ly - intercept[:, None] - slope[:, None] * lx
    ux = lx @ onehot / counts
    ur = r @ onehot / counts
    udx = ux - ux.mean(axis=1, keepdims=True)
    usxx = (udx * udx).sum(axis=1, keepdims=True)
    leverage = 1 / k + udx * udx / usxx
    scaled = ur / np.sqrt(np.clip(1 - leverage, 1e-12, None))
    scaled -= scaled.mean(axis=1, keepdims=True)
    return Line(slope, (dx @ onehot) / sxx[:, None], scaled, k - 2, sign)


def alpha(a: Line) -> tuple[np.ndarray, np.ndarray, int]:
    """One line's exponent: estimate, se, df."""
    var = (a.c**2).sum(axis=1) * (a.resid**2).mean(axis=1)
    return a.alpha, np.sqrt(var), a.df


def contrast(terms: list[tuple[float, Line]]) -> tuple[np.ndarray, np.ndarray, int]:
    """sum_l w_l alpha_l of paired lines (the same units, the same draws)."""
    est = sum(w * a.alpha for w, a in terms)
    c = np.stack([w * a.sign * a.c for w, a in terms])  # (L, S, k)
    e = np.stack([a.resid for _, a in terms])  # (L, S, k)
    v = np.einsum("lsj,lsu->sju", c, e)
    return est, np.sqrt((v * v).mean(axis=2).sum(axis=1)), min(a.df for _, a in terms)


def welch(groups: list[tuple[np.ndarray, float, str]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """sum_g c_g mean(x_g) with contrasts.welch's interval: each group (runs
    (S, m), coefficient, cell) a cell's runs at one size, a cell's variance
    pooled over its sizes, Welch-Satterthwaite df."""
    est = sum(c * x.mean(axis=1) for x, c, _ in groups)
    cells: dict[str, list] = {}
    for x, c, cell in groups:
        cells.setdefault(cell, []).append((x, c))
    se2, denom = 0.0, 0.0
    for members in cells.values():
        df = sum(x.shape[1] - 1 for x, _ in members)
        var = sum((x.shape[1] - 1) * x.var(axis=1, ddof=1) for x, _ in members) / df
        part = sum(c * c * var / x.shape[1] for x, c in members)
        se2 = se2 + part
        denom = denom + part * part / df
    return est, np.sqrt(se2), se2 * se2 / np.where(denom > 0, denom, np.inf)


@dataclass(frozen=True)
class Test:
    """One condition of a claim: the statistic above `bound` (`sign` +1) or below
    it (-1), with its t interval."""

    est: np.ndarray
    se: np.ndarray
    df: object  # int or (S,)
    sign: int = 1
    bound: float = 0.0

    def _ends(self, level: float | np.ndarray):
        half = student.ppf(1 - np.asarray(level), self.df) * self.se
        return self.est - half, self.est + half

    def holds(self, ci: float) -> np.ndarray:
        low, high = self._ends((1 - ci) / 2)
        return low > self.bound if self.sign > 0 else high < self.bound

    def fails(self, level) -> np.ndarray:
        """On the wrong side at one-sided `level` (the study's, or Bonferroni's)."""
        low, high = self._ends(level)
        return high < self.bound if self.sign > 0 else low > self.bound
