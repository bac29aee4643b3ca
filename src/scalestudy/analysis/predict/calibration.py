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
A held-out run's score is its error over the interval's half-width on the
error's side: for a loss, ln(observed / predicted) over the log distance from
the prediction to the interval's end; for a metric, in the metric's units.

The scale of each quantity is the conformal quantile of its scores (split
conformal prediction with normalised scores, e.g. Lei et al. 2018,
"Distribution-Free Predictive Inference for Regression", section 5.2): the
ceil((n + 1) ci)-th smallest of the n scores, or the largest where n is too
small for that rank (fewer than 19 runs at 0.95: then the interval is as wide
as the worst held-out run needed, which is not a guarantee), and at least 1:
the calibration widens the bootstrap's interval, never narrows it. The
prediction's draws of one run are widened by it about the point prediction
(chain.Drawn). The quantities are calibrated in the chain's order, each
origin's later steps fed by the earlier steps' calibrated draws, so that the
metric's scale measures what the loss's scale left out and no more.

A ladder of fewer than 4 sizes has no origin (the largest held out leaves too
few to fit): its intervals are the bootstrap's, and the status says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..scaling import MIN_SIZES
from .chain import Chain, Ladder, Method, Settings, fit_chain

QUANTITIES = ("loss", "task", "metric")
CALIBRATION_COLUMNS = ["origin", "params", "tokens", "quantity", "observed", "predicted",
                       "low", "high", "score"]


@dataclass
class Calibration:
    """Each quantity's scale, the held-out runs' scores behind it, and a status."""

    status: str
    scales: dict = field(default_factory=lambda: dict.fromkeys(QUANTITIES, 1.0))
    rows: list = field(default_factory=list)
    origins: list = field(default_factory=list)

    def table(self) -> pd.DataFrame:
        return pd.DataFrame(self.rows, columns=CALIBRATION_COLUMNS)

    def n_scored(self, quantity: str) -> int:
        return sum(r["quantity"] == quantity and np.isfinite(r["score"]) for r in self.rows)


def conformal_scale(scores: np.ndarray, ci: float) -> float:
    """The conformal quantile of normalised scores (the module docstring), at least 1."""
    scores = np.sort(np.asarray(scores, dtype=float)[np.isfinite(scores)])
    if not scores.size:
        return 1.0
    rank = int(np.ceil((scores.size + 1) * ci))
    q = scores[rank - 1] if rank <= scores.size else scores[-1]
    return float(max(1.0, q))


def _score(observed, point, draws, ci: float, log: bool) -> tuple[np.ndarray, ...]:
    """Each held-out run's interval and normalised error (NaN without draws)."""
    n = len(observed)
    if not draws.size:
        nan = np.full(n, np.nan)
        return nan, nan, nan
    finite = np.where(np.isfinite(draws), draws, np.nan)
    low, high = np.nanquantile(finite, [(1 - ci) / 2, (1 + ci) / 2], axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        if log:
            err, up, down = (np.log(observed / point), np.log(high / point),
                             np.log(point / low))
        else:
            err, up, down = observed - point, high - point, point - low
        half = np.where(err >= 0, up, down)
        score = np.where(half > 0, np.abs(err) / half, np.inf)
    return low, high, score


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
    calibration = Calibration("", origins=[o for o, _, _ in fitted])
    if not fitted:
        calibration.status = "uncalibrated: no refit without a largest size succeeded"
        return calibration
    columns = {"loss": "loss", "task": "_task", "metric": "_metric"}
    for quantity in QUANTITIES:
        scores = []
        for origin, chain, held in fitted:
            chain.scales = dict(calibration.scales)
            drawn = chain.predict(held["params"], held["tokens"], rng)[quantity]
            if drawn is None or columns[quantity] not in held:
                continue
            observed = held[columns[quantity]].to_numpy(dtype=float)
            low, high, score = _score(observed, drawn.point, drawn.raw, settings.ci,
                                      log=quantity != "metric")
            for i in range(len(held)):
                if not np.isfinite(observed[i]):
                    continue
                calibration.rows.append({
                    "origin": origin, "params": float(held["params"].iloc[i]),
                    "tokens": float(held["tokens"].iloc[i]), "quantity": quantity,
                    "observed": observed[i], "predicted": float(drawn.point[i]),
                    "low": low[i], "high": high[i], "score": score[i]})
                scores.append(score[i])
        if scores:
            calibration.scales[quantity] = conformal_scale(np.array(scores), settings.ci)
    n = calibration.n_scored("loss")
    small = (" (too few for the conformal rank: the largest score)"
             if int(np.ceil((n + 1) * settings.ci)) > n else "")
    scales = ", ".join(f"{q} x{calibration.scales[q]:.3g}" for q in QUANTITIES
                       if calibration.n_scored(q))
    origins = ", ".join(f"{o:.3g}" for o in calibration.origins)
    calibration.status = (f"calibrated on {n} held-out runs of N {origins}{small}: {scales}")
    return calibration
