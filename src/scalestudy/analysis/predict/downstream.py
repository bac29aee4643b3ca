"""Step 2 of a prediction: a downstream metric (an accuracy or an error in
[0, 1]) as a sigmoid of the loss, chained to step 1.

Bhagia et al. 2024 ("Establishing Task Scaling Laws via Compute-Efficient Model
Ladders", OLMo's ladder, arXiv:2412.04403) predict a task's accuracy in two
steps: a loss L(N, D) of the Chinchilla form, then

    metric(L) = a / (1 + exp(-k (L - L0))) + b,

fitted on the ladder's (loss, metric) points: the table's rows as given, every
checkpoint kept of a table of checkpoints (`run` and `step`), as Bhagia et al.
fit it on the ladder's intermediate checkpoints (far more points than the
final ones, over a wider range of loss, which pins the sigmoid's upper part),
while step 1 reads the runs' final points (stage.py). By least squares, the
sign of k free (an error rises with the loss, an accuracy falls), from a few
starts, in one of two links (`LINKS`):

- "sigmoid": the asymptote at low loss is the metric's best value (1 for an
  accuracy, 0 for an error), as Bhagia et al. pin it with an ideal point (zero
  loss, the task's maximum): three parameters (k, L0 and the chance level b,
  or the scale a of an error);
- "fitted-asymptote": a and b in [0, 1], a + b <= 1 (the metric stays in
  [0, 1]), both fitted: the asymptote is what the ladder shows, four parameters.

Faithful: the form and the chain (each bootstrap replicate of step 1 feeds a
replicate of step 2, both fitted on the same resample of runs, a run's
checkpoints drawn together, so that the metric's interval carries the loss
law's uncertainty and the mapping's). The interval adds one of the mapping's
residuals (scaled by sqrt(n / (n - p)), p its parameters) to each replicate,
as step 1 adds a run's noise to the loss, and clips to [0, 1].

The mapping is not extrapolated where it does not fit (`status`, and NaN
predictions): fewer than `MIN_POINTS` runs with the metric; no signal (an F
test of the sigmoid against a constant metric, p > `SIGNAL_LEVEL`: the metric
does not follow the loss, e.g. accuracy at chance on every run); or lack of
fit (where runs are replicated at one N and D, the pure-error F test, p <
`LACK_OF_FIT_LEVEL`: the sigmoid misses the metric by more than the seeds'
noise). Without replicated runs the lack of fit goes untested, and the status
says so. A loss beyond the losses fitted by more than their span
(`FAR_SPAN`) is "far beyond the ladder": the sigmoid's shape there is a guess,
and no interval is given.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy.optimize import least_squares
from scipy.stats import f as f_dist

from .options import LINKS  # noqa: F401  (the links, declared with the options)

NAMES = ("a", "k", "L0", "b")
MIN_POINTS = 6  # four parameters and two degrees of freedom left
SIGNAL_LEVEL = 0.05
LACK_OF_FIT_LEVEL = 0.01
# A loss further beyond the losses fitted than this many times their span is
# far beyond the ladder: no interval.
FAR_SPAN = 1.0


def sigmoid(params: np.ndarray, loss) -> np.ndarray:
    """metric(L) for one parameter vector (a, k, L0, b) (the shape of `loss`), or
    for rows of them (k, 4) against `loss` (k, m) or (m,) (shape (k, m))."""
    p = np.asarray(params, dtype=float)
    a, k, l0, b = (p[i] if p.ndim == 1 else p[:, i, None] for i in range(4))
    with np.errstate(over="ignore"):
        return a / (1.0 + np.exp(-k * (np.asarray(loss, dtype=float) - l0))) + b


@dataclass
class MetricMap:
    """A fitted metric(L) (`params` None when refused) and its bootstrap refits."""

    status: str  # "ok" (with a note where lack of fit went untested) or why there is none
    params: np.ndarray | None = None
    replicates: np.ndarray = field(default_factory=lambda: np.empty((0, 4)))
    noise: np.ndarray = field(default_factory=lambda: np.zeros(1))
    r2: float = np.nan
    signal_p: float = np.nan
    lack_of_fit_p: float = np.nan
    loss_range: tuple[float, float] = (np.nan, np.nan)
    n_points: int = 0
    link: str = "fitted-asymptote"

    @property
    def ok(self) -> bool:
        return self.params is not None

    def far(self, loss: float) -> bool:
        """Whether `loss` lies beyond the losses fitted by more than FAR_SPAN spans."""
        lo, hi = self.loss_range
        span = FAR_SPAN * (hi - lo)
        return bool(loss < lo - span or loss > hi + span)

    def predictive(self, loss_reps: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Each replicate's metric of one run whose loss is that replicate's
        (k, m), clipped to [0, 1]; NaN where a refit failed."""
        value = sigmoid(self.replicates, loss_reps)
        return np.clip(value + rng.choice(self.noise, size=value.shape), 0.0, 1.0)

    def note(self, loss: float) -> str:
        """The status of a prediction at `loss`: where it leaves the losses fitted."""
        lo, hi = self.loss_range
        if self.far(loss):
            side = "below the lowest" if loss < lo else "above the highest"
            return (f"far beyond the ladder: loss {loss:.4g} {side} fitted ({lo:.4g} to "
                    f"{hi:.4g}) by more than {FAR_SPAN:g}x their span, where no interval "
                    "is meaningful")
        if loss < lo:
            return (f"ok, extrapolated: loss {loss:.4g} below the lowest fitted ({lo:.4g}); "
                    "the sigmoid's shape is assumed")
        if loss > hi:
            return f"ok, extrapolated: loss {loss:.4g} above the highest fitted ({hi:.4g})"
        return self.status


class Link:
    """One link's free parameters and their bounds: `params` maps them to (a, k,
    L0, b). `trend` is the sign of the metric's slope in the loss (-1: an
    accuracy, falling as the loss rises)."""

    def __init__(self, name: str, trend: float, loss: np.ndarray):
        self.name, self.trend = name, trend
        span = float(np.ptp(loss)) or 1.0
        l0 = (loss.min() - 10 * span, loss.max() + 10 * span)
        k = (-np.inf, 0.0) if trend < 0 else (0.0, np.inf)
        if name == "fitted-asymptote":  # (a, k, L0, u), b = (1 - a) u
            self.lower, self.upper = [0.0, -np.inf, l0[0], 0.0], [1.0, np.inf, l0[1], 1.0]
        elif trend < 0:  # (k, L0, b), a = 1 - b: the asymptote at low loss is 1
            self.lower, self.upper = [k[0], l0[0], 0.0], [k[1], l0[1], 1.0]
        else:  # (a, k, L0), b = 0: an error's asymptote at low loss is 0
            self.lower, self.upper = [0.0, k[0], l0[0]], [1.0, k[1], l0[1]]
        self.n_free = len(self.lower)

    def params(self, x: np.ndarray) -> np.ndarray:
        if self.name == "fitted-asymptote":
            return np.array([x[0], x[1], x[2], (1.0 - x[0]) * x[3]])
        if self.trend < 0:
            return np.array([1.0 - x[2], x[0], x[1], x[2]])
        return np.array([x[0], x[1], x[2], 0.0])

    def free(self, params: np.ndarray) -> np.ndarray:
        a, k, l0, b = params
        if self.name == "fitted-asymptote":
            return np.array([a, k, l0, b / (1.0 - a) if a < 1 else 0.0])
        return np.array([k, l0, b]) if self.trend < 0 else np.array([a, k, l0])


def _fit(loss, metric, w, starts, link: Link) -> np.ndarray | None:
    """Weighted least squares from each start (a, k, L0, b); the best parameters,
    or None."""
    root = np.sqrt(w)
    lower, upper = np.array(link.lower), np.array(link.upper)
    best = None
    for x0 in starts:
        x0 = np.clip(np.nan_to_num(link.free(x0)), lower + 1e-9, upper - 1e-9)
        try:
            res = least_squares(lambda x: root * (sigmoid(link.params(x), loss) - metric), x0,
                                bounds=(lower, upper), method="trf")
        except ValueError:  # a non-finite residual
            continue
        if best is None or res.cost < best.cost:
            best = res
    return None if best is None else link.params(best.x)


def _trend(loss, metric) -> float:
    """The sign of the metric's trend in the loss (-1 where there is none)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        r = np.corrcoef(loss, metric)[0, 1]
    return float(np.sign(r)) if np.isfinite(r) and r != 0 else -1.0


def _starts(loss, metric, trend: float) -> list[np.ndarray]:
    """A few starts: the metric's range, the loss's quartiles, steep and shallow k
    with the sign of the metric's trend in the loss."""
    span = float(np.ptp(loss)) or 1.0
    a0 = float(np.clip(np.ptp(metric), 0.05, 0.95))
    b0 = float(np.clip(metric.min(), 0.0, 1.0 - a0))
    return [np.array([a0, trend * s / span, l0, b0])
            for s in (2.0, 8.0, 32.0) for l0 in np.quantile(loss, [0.25, 0.5, 0.75])]


def fit_metric_map(loss, metric, cells, weights: np.ndarray,
                   link: str = "fitted-asymptote") -> MetricMap:
    """metric(L) on the runs with a finite metric, refitted once per row of
    `weights` (the replicates of step 1's refits: resampling.py), by `link`
    (LINKS). `cells` labels each run's (N, D), the replication the
    lack-of-fit test needs."""
    loss, metric = np.asarray(loss, dtype=float), np.asarray(metric, dtype=float)
    have = np.isfinite(metric)
    loss, metric, cells = loss[have], metric[have], np.asarray(cells)[have]
    n = metric.size
    if n < MIN_POINTS:
        return MetricMap(f"no fit: {n} runs with the metric (>= {MIN_POINTS} needed)",
                         n_points=n, link=link)
    trend = _trend(loss, metric)
    shape = Link(link, trend, loss)
    params = _fit(loss, metric, np.ones(n), _starts(loss, metric, trend), shape)
    if params is None:
        return MetricMap("no fit: the least-squares fit failed", n_points=n, link=link)
    resid = metric - sigmoid(params, loss)
    ss1, ss0 = float((resid**2).sum()), float(((metric - metric.mean()) ** 2).sum())
    p = shape.n_free
    df1 = n - p
    if ss0 <= 0:  # a constant metric: nothing to map
        signal_p = 1.0
    else:
        signal_p = (float(f_dist.sf(((ss0 - ss1) / (p - 1)) / (ss1 / df1), p - 1, df1))
                    if ss1 > 0 else 0.0)
    fitted = MetricMap("ok", params, noise=resid * np.sqrt(n / df1),
                       r2=1 - ss1 / ss0 if ss0 > 0 else np.nan, signal_p=signal_p,
                       lack_of_fit_p=_lack_of_fit_p(metric, resid, cells, p),
                       loss_range=(float(loss.min()), float(loss.max())), n_points=n,
                       link=link)
    if not signal_p <= SIGNAL_LEVEL:
        fitted.status = (f"no fit: the metric does not follow the loss (F test against a "
                         f"constant: p = {signal_p:.2g} > {SIGNAL_LEVEL})")
    elif fitted.lack_of_fit_p < LACK_OF_FIT_LEVEL:
        fitted.status = (f"no fit: lack of fit (pure-error F test over replicated runs: "
                         f"p = {fitted.lack_of_fit_p:.2g} < {LACK_OF_FIT_LEVEL})")
    elif not np.isfinite(fitted.lack_of_fit_p):
        fitted.status = "ok (lack of fit untested: no replicated runs)"
    if not fitted.status.startswith("ok"):
        fitted.params = None
        return fitted
    reps = [_fit(loss, metric, w[have], [params], shape) for w in weights]
    fitted.replicates = np.array([np.full(4, np.nan) if r is None else r for r in reps]
                                 ).reshape(-1, 4)
    return fitted


def replicate_cells(runs: pd.DataFrame) -> np.ndarray:
    """Each run's (N, D) cell: runs of one N whose tokens lie within 1% of the
    previous run's (sorted) are replicates (seeds: a seed's tokens seen can
    differ by a batch's rounding)."""
    cells = np.empty(len(runs), dtype=object)
    for n, idx in runs.groupby("params").indices.items():
        lt = np.log(runs["tokens"].to_numpy(dtype=float)[idx])
        order = np.argsort(lt, kind="stable")
        ids = np.empty(idx.size, dtype=int)
        ids[order] = np.r_[0, np.cumsum(np.diff(lt[order]) > 0.01)]
        cells[idx] = [f"{n}:{i}" for i in ids]
    return cells


def _lack_of_fit_p(metric, resid, cells, p: int = len(NAMES)) -> float:
    """The pure-error F test's p-value of the sigmoid of `p` parameters; NaN
    without replicated cells or without freedom left for the lack of fit."""
    labels, inv, counts = np.unique(cells.astype(str), return_inverse=True,
                                    return_counts=True)
    m, n = labels.size, metric.size
    if m == n or m <= p:
        return np.nan
    means = np.bincount(inv, weights=metric) / counts
    ss_pe = float(((metric - means[inv]) ** 2).sum())
    ss_lof = float((resid**2).sum()) - ss_pe
    if ss_pe <= 0:
        return 0.0 if ss_lof > 1e-12 else 1.0
    return float(f_dist.sf((ss_lof / (m - p)) / (ss_pe / (n - m)), m - p, n - m))
