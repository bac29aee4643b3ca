"""Loss-to-loss: a task's loss predicted from the general loss, the "loss-to-loss"
path of a chain (`--task-loss COLUMN` with path "loss-to-loss").

Brandfonbrener et al. 2024 ("Loss-to-Loss Prediction: Scaling Laws for All
Datasets", arXiv:2411.12925) find that the losses of one model on two
distributions follow a shifted power law in their reducible parts,

    L_task = K (L_general - E_general)^kappa + E_task,

across model sizes and token counts, so that a task's loss at a large run is
predicted from the general loss's L(N, D) rather than by a law of its own.
Faithful: the form, and E_general from the general loss's L(N, D) (each
bootstrap replicate its own replicate's E). Simplified: E_task, K and kappa are
fitted here (least squares on ln L_task, kappa > 0, 0 <= E_task < the lowest
task loss), not E_task taken from a law of the task loss; and the map is fitted
on every checkpoint kept (as step 2 is), where Brandfonbrener et al. fit final
points of many ladders.

A replicate's task loss of one run adds one of the map's log residuals (scaled
by sqrt(n / (n - 3))), as step 1 adds a run's noise.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import least_squares

NAMES = ("K", "kappa", "E_task")
MIN_POINTS = 6


def _log_task(params: np.ndarray, general, e_general) -> np.ndarray:
    """ln L_task for parameter rows (ln K, kappa, E_task), (k, 3) or (3,), against
    the general loss (shape broadcast against the rows' E_general)."""
    p = np.asarray(params, dtype=float)
    lk, kappa, et = (p[..., i, None] if p.ndim > 1 else p[i] for i in range(3))
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        gap = np.log(np.asarray(general, dtype=float) - e_general)
        return np.log(et + np.exp(lk + kappa * gap))


@dataclass
class LossMap:
    """A fitted L_task(L_general) (`params` (ln K, kappa, E_task) None when refused),
    its bootstrap refits and the E_general each was fitted against."""

    status: str
    params: np.ndarray | None = None
    e_general: float = np.nan
    replicates: np.ndarray = field(default_factory=lambda: np.empty((0, 3)))
    e_replicates: np.ndarray = field(default_factory=lambda: np.empty(0))
    noise: np.ndarray = field(default_factory=lambda: np.zeros(1))
    r2: float = np.nan
    n_points: int = 0

    @property
    def ok(self) -> bool:
        return self.params is not None

    def predict(self, general) -> np.ndarray:
        """The task loss at the general loss `general` (the fitted map)."""
        return np.exp(_log_task(self.params, general, self.e_general))

    def predictive(self, general_reps: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Each replicate's task loss of one run whose general loss is that
        replicate's (k, m): its map times e^r; NaN where a refit failed or the
        general loss lies at or below the replicate's E_general."""
        log_task = _log_task(self.replicates, general_reps, self.e_replicates[:, None])
        return np.exp(log_task + rng.choice(self.noise, size=log_task.shape))

    def parameters(self) -> dict[str, tuple[float, np.ndarray]]:
        """Each parameter's estimate and replicates, K exponentiated."""
        out = {}
        for i, name in enumerate(NAMES):
            value, reps = self.params[i], self.replicates[:, i]
            out[name] = (float(np.exp(value)), np.exp(reps)) if i == 0 else (float(value), reps)
        return out


def _fit(general, task, e_general, w, starts) -> np.ndarray | None:
    root = np.sqrt(w)
    lower = [-np.inf, 1e-6, 0.0]
    upper = [np.inf, 20.0, float(task.min()) * (1 - 1e-9)]
    best = None
    for x0 in starts:
        x0 = np.clip(x0, np.array(lower) + 1e-9, np.array(upper) - 1e-9)
        try:
            res = least_squares(
                lambda x: root * (_log_task(x, general, e_general) - np.log(task)), x0,
                bounds=(lower, upper), method="trf")
        except ValueError:  # a non-finite residual
            continue
        if best is None or res.cost < best.cost:
            best = res
    return None if best is None else best.x


def _starts(general, task, e_general) -> list[np.ndarray]:
    """E_task at 0, half and 0.9 of the lowest task loss; K and kappa by a line
    through ln(L_task - E_task) on ln(L_general - E_general)."""
    gap = np.log(general - e_general)
    starts = []
    for frac in (0.0, 0.5, 0.9):
        et = frac * float(task.min())
        slope, intercept = np.polyfit(gap, np.log(task - et), 1)
        starts.append(np.array([intercept, max(slope, 1e-3), et]))
    return starts


def fit_loss_map(general, task, e_general: float, e_replicates: np.ndarray,
                 weights: np.ndarray) -> LossMap:
    """L_task(L_general) on the points with both losses, E_general the general
    law's (and each replicate's its own), refitted once per row of `weights`
    (the replicates of step 1's refits, resampling.py)."""
    general, task = np.asarray(general, dtype=float), np.asarray(task, dtype=float)
    have = np.isfinite(general) & np.isfinite(task) & (task > 0)
    general, task = general[have], task[have]
    n = task.size
    if n < MIN_POINTS:
        return LossMap(f"no fit: {n} points with both losses (>= {MIN_POINTS} needed)",
                       n_points=n)
    if not general.min() > e_general:
        return LossMap(f"no fit: the general loss's E ({e_general:.4g}) is not below every "
                       f"general loss fitted (lowest {general.min():.4g})", n_points=n)
    params = _fit(general, task, e_general, np.ones(n), _starts(general, task, e_general))
    if params is None:
        return LossMap("no fit: the least-squares fit failed", n_points=n)
    resid = np.log(task) - _log_task(params, general, e_general)
    ss0 = float(((np.log(task) - np.log(task).mean()) ** 2).sum())
    fitted = LossMap("ok", params, e_general, noise=resid * np.sqrt(n / (n - len(NAMES))),
                     r2=1 - float((resid**2).sum()) / ss0 if ss0 > 0 else np.nan, n_points=n)
    reps, es = [], []
    for w, e in zip(weights, e_replicates, strict=True):
        fit = (_fit(general, task, e, w[have], [params]) if general.min() > e else None)
        reps.append(np.full(3, np.nan) if fit is None else fit)
        es.append(e)
    fitted.replicates = np.array(reps).reshape(-1, 3)
    fitted.e_replicates = np.array(es, dtype=float)
    return fitted
