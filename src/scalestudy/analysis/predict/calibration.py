"""The intervals calibrated by what the ladder itself shows when its largest
sizes are held out: a rolling origin over sizes, and a conformal scale.

The bootstrap (resampling.py) and a run's drawn residual measure how the
ladder's noise moves the fit, as if the form were right; a form that misses
the ladder's curvature errs systematically when it extrapolates, by more than
its residuals say (on real ladders the smallest N of an IsoFLOP profile is
under-predicted and the sizes near its optimum over-predicted). So the ladder
is asked: each of its largest sizes in turn (the origin; up to `origins` of
them, while at least 3 sizes stay below it) is held out, the chain refitted
on the sizes below it exactly as a prediction fits (its bootstrap included),
and each held-out run predicted with its interval at the prediction's level.
A held-out run's score is its error over the interval's half-width: for a
loss, |ln(observed / predicted)| over z times the standard deviation of its
replicates' log draws; for a metric, in the metric's units (_score says why
a standard deviation).

The scale of each quantity is the conformal quantile of its scores (split
conformal prediction with normalised scores, e.g. Lei et al. 2018,
"Distribution-Free Predictive Inference for Regression", section 5.2): the
ceil((n + 1) ci)-th smallest of the n scores, or the largest where n is too
small for that rank (fewer than 19 runs at 0.95: then the interval is as wide
as the worst held-out run needed, which is not a guarantee), and at least 1:
the calibration widens the bootstrap's interval, never narrows it. A loss's
misfit depends on where a run sits in tokens per parameter (on Porian et al.'s
IsoFLOP profiles the held-out size's undertrained points, a tenth of a token
per parameter, are under-predicted by 20-30% while its points at 5-20 tokens
per parameter miss by 2-5%), so a loss's scale at a target is localised
(as Guan 2023, "Localized conformal prediction", Biometrika, localises by a
kernel; here a window): the conformal quantile of the scores of the held-out
runs near the target in tokens per parameter (loss.near: within a factor of
4, or the 8 nearest), as a run's noise is drawn (loss.py). The metric's scale
is one number (its scores are those of a few held-out runs). The
prediction's draws of one run are widened by it about the point prediction
(chain.Drawn). The quantities are calibrated in the chain's order, each
origin's later steps fed by the earlier steps' calibrated draws, so that the
metric's scale measures what the loss's scale left out and no more.

The metric's sigmoid, fitted on the losses the ladder reached, is extrapolated
to the lower losses of a larger run, where its shape is assumed; its bootstrap
says how its fit moves, not whether the shape holds there. So each origin's
sigmoid (fitted on the sizes below it) is also judged on the held-out size's
own points (every checkpoint kept) that lie below the losses it was fitted
on, at their measured loss: the link's error there, less the ci-quantile of
its residuals (a point's own noise), over the distance beyond the losses
fitted. The conformal quantile of these (`link`, in metric units per unit of
loss, at least 0) widens each replicate's metric by up to link x its distance
beyond the losses fitted, either way (uniformly), before the metric's own
scale is measured.

A ladder of fewer than 4 sizes has no origin (the largest held out leaves too
few to fit): its intervals are the bootstrap's, and the status says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy.stats import norm

from ..scaling import MIN_SIZES
from .chain import Chain, Ladder, Method, Settings, fit_chain
from .downstream import sigmoid
from .loss import near

QUANTITIES = ("loss", "task", "metric")
SCALES = ("loss", "task", "link", "metric")
LOCAL = ("loss", "task")  # the quantities whose scale is localised in ln(D / N)
CALIBRATION_COLUMNS = ["origin", "params", "tokens", "quantity", "observed", "predicted",
                       "low", "high", "score"]


@dataclass
class Calibration:
    """Each quantity's scale, the held-out runs' scores behind it, and a status."""

    status: str
    # One number each: the global scale of a loss (its localised scale: `scale`),
    # the metric's scale and the link's slope.
    scales: dict = field(default_factory=lambda: {"loss": 1.0, "task": 1.0, "link": 0.0,
                                                  "metric": 1.0})
    ci: float = 0.95
    rows: list = field(default_factory=list)
    origins: list = field(default_factory=list)

    def table(self) -> pd.DataFrame:
        return pd.DataFrame(self.rows, columns=CALIBRATION_COLUMNS)

    def scale(self, quantity: str, N, D) -> np.ndarray | float:
        """The scale of `quantity` at the targets (N, D): localised for a loss, one
        number for the metric; the link's slope for "link"."""
        if quantity not in LOCAL:
            return self.scales[quantity]
        scored = [r for r in self.rows if r["quantity"] == quantity
                  and not np.isnan(r["score"])]
        x0 = np.log(np.asarray(D, dtype=float) / np.asarray(N, dtype=float))
        if not scored:
            return np.ones_like(x0)
        scores = np.array([r["score"] for r in scored])
        x = np.log(np.array([r["tokens"] / r["params"] for r in scored]))
        return np.array([conformal_scale(scores[near(x, x0_j)], self.ci)
                         for x0_j in np.atleast_1d(x0)]).reshape(np.shape(x0))

    def n_scored(self, quantity: str) -> int:
        return sum(r["quantity"] == quantity and np.isfinite(r["score"]) for r in self.rows)


def conformal_quantile(scores: np.ndarray, ci: float) -> float:
    """The ceil((n + 1) ci)-th smallest of n scores, or the largest where n is too
    small for that rank (the module docstring); NaN without scores. An infinite
    score (a held-out run outside an interval of no width) counts."""
    scores = np.sort(np.asarray(scores, dtype=float)[~np.isnan(scores)])
    if not scores.size:
        return np.nan
    rank = int(np.ceil((scores.size + 1) * ci))
    return float(scores[min(rank, scores.size) - 1])


def conformal_scale(scores: np.ndarray, ci: float) -> float:
    """The conformal quantile of normalised scores, at least 1 (never narrower)."""
    q = conformal_quantile(scores, ci)
    return 1.0 if np.isnan(q) else float(max(1.0, q))


def _score(observed, point, draws, ci: float, log: bool) -> tuple[np.ndarray, ...]:
    """Each held-out run's interval and normalised error (NaN without draws): the
    error over z times the draws' standard deviation (of the log, for a loss),
    the interval's half-width were the draws normal. A standard deviation, not
    the percentiles' half-width: the percentiles of a hundred draws of a
    skewed residual sometimes sit near the point and would make one score
    dominate."""
    n = len(observed)
    if not draws.size:
        nan = np.full(n, np.nan)
        return nan, nan, nan
    finite = np.where(np.isfinite(draws), draws, np.nan)
    low, high = np.nanquantile(finite, [(1 - ci) / 2, (1 + ci) / 2], axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        if log:
            err, spread = np.log(observed / point), np.nanstd(np.log(finite), axis=0)
        else:
            err, spread = observed - point, np.nanstd(finite, axis=0)
        half = norm.ppf((1 + ci) / 2) * spread
        score = np.where(half > 0, np.abs(err) / half, np.where(err == 0, 0.0, np.inf))
    return low, high, score


def _link_slope(ladder: Ladder, fitted: list, ci: float) -> float:
    """The conformal quantile of the sigmoid's excess error per unit of loss beyond
    the losses it was fitted on, over the held-out sizes' points (the module
    docstring); 0 where no held-out point lies beyond them."""
    scores = []
    column = "_task" if ladder.task else "loss"
    for origin, chain, _ in fitted:
        mapping = chain.mapping
        if mapping is None or not mapping.ok:
            continue
        points = ladder.points[ladder.points["params"] == origin]
        x, y = (points[c].to_numpy(dtype=float) for c in (column, "_metric"))
        lo, hi = mapping.loss_range
        beyond = np.maximum(lo - x, 0.0) + np.maximum(x - hi, 0.0)
        keep = np.isfinite(y) & (beyond > 0)
        if not keep.any():
            continue
        noise = float(np.quantile(np.abs(mapping.noise), ci))
        excess = np.maximum(np.abs(y[keep] - sigmoid(mapping.params, x[keep])) - noise, 0.0)
        scores += list(excess / beyond[keep])
    slope = conformal_quantile(np.array(scores), ci) if scores else 0.0
    return slope if slope > 1e-9 else 0.0  # rounding, not an error


def calibrate(ladder: Ladder, method: Method, settings: Settings,
              rng: np.random.Generator) -> Calibration:
    """The scales of `method`'s intervals on `ladder` (the module docstring)."""
    sizes = ladder.sizes()
    usable = [s for s in sizes[::-1] if (sizes < s).sum() >= MIN_SIZES][: settings.origins]
    if not usable or settings.n_boot <= 0:
        why = ("no bootstrap" if settings.n_boot <= 0 else
               f"{sizes.size} sizes: holding out the largest leaves fewer than {MIN_SIZES}")
        return Calibration(f"uncalibrated ({why}): the bootstrap's intervals")
    fitted: list[tuple[float, Chain, pd.DataFrame]] = []
    for origin in usable:
        chain = fit_chain(ladder.below(origin), method, settings, rng)
        if chain.law.ok:
            fitted.append((origin, chain, ladder.at(origin)))
    calibration = Calibration("", origins=[o for o, _, _ in fitted], ci=settings.ci)
    if not fitted:
        calibration.status = "uncalibrated: no refit without a largest size succeeded"
        return calibration
    columns = {"loss": "loss", "task": "_task", "metric": "_metric"}
    for quantity in SCALES:
        if quantity == "link":
            if ladder.metric:
                calibration.scales["link"] = _link_slope(ladder, fitted, settings.ci)
            continue
        scored = []  # added once every origin is scored: each origin's draws are
        # widened by the quantities scored before this one, not by this one
        for origin, chain, held in fitted:
            chain.calibration = calibration
            drawn = chain.predict(held["params"], held["tokens"], rng)[quantity]
            if drawn is None or columns[quantity] not in held:
                continue
            observed = held[columns[quantity]].to_numpy(dtype=float)
            low, high, score = _score(observed, drawn.point, drawn.raw, settings.ci,
                                      log=quantity != "metric")
            for i in range(len(held)):
                if not np.isfinite(observed[i]):
                    continue
                scored.append({
                    "origin": origin, "params": float(held["params"].iloc[i]),
                    "tokens": float(held["tokens"].iloc[i]), "quantity": quantity,
                    "observed": observed[i], "predicted": float(drawn.point[i]),
                    "low": low[i], "high": high[i], "score": score[i]})
        calibration.rows += scored
        if scored:
            calibration.scales[quantity] = conformal_scale(
                np.array([r["score"] for r in scored]), settings.ci)
    n = calibration.n_scored("loss")
    small = (" (too few for the conformal rank: the largest score)"
             if int(np.ceil((n + 1) * settings.ci)) > n else "")
    scales = ", ".join(f"{q} x{calibration.scales[q]:.3g}"
                       + (" (overall; localised in D/N)" if q in LOCAL else "")
                       for q in QUANTITIES if calibration.n_scored(q))
    if ladder.metric:
        scales += f", link {calibration.scales['link']:.3g} per unit of loss beyond"
    origins = ", ".join(f"{o:.3g}" for o in calibration.origins)
    calibration.status = (f"calibrated on {n} held-out runs of N {origins}{small}: {scales}")
    return calibration
