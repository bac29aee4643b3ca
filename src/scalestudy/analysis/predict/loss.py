"""Step 1 of a prediction: L(N, D) = E + A/N^alpha + B/D^beta fitted on a
ladder, its bootstrap refits, the noise of a single run, and whether the fit
is well determined.

The fit is Hoffmann et al. 2022's approach 3 as the frontier fits it
(scaling.fit_chinchilla: Huber loss, delta 1e-3, on log L; L-BFGS-B from the
best `n_polish` starts of Besiroglu et al.'s grid), polished on to tight
tolerances (scaling.HuberPowerLaw.polish_tight); each bootstrap replicate
refits the resampled runs (resampling.py) from that optimum.

A prediction interval is for one run's loss, not the surface's: each
replicate's L(N*, D*) is multiplied by e^r, r one of the fit's log residuals
drawn at random and scaled by sqrt(n / (n - 5)) for the five parameters
fitted (their spread is the table's seed-to-seed noise plus whatever the law
misses). The interval of the surface alone (`mean`) is reported beside it.

Poorly determined (`status`, `warnings`), each a reason of its own:

- the optimum lies outside the box of the start grid (a, b in [0, 25], e in
  [-1, 1], alpha, beta in [0, 2]): no start bracketed it, so a lower one may
  lie further out;
- flat directions: the condition number of the Gauss-Newton matrix J'J of
  log L_hat in (ln A, ln B, ln E, alpha, beta), with ln N and ln D centred on
  the ladder's means (so that A and alpha are not confounded by where the
  origin is) and scaled to a unit diagonal, exceeds `MAX_CONDITION`;
- each size trained on a single token count: N's and D's effects are then
  confounded whatever the optimiser finds;
- bootstrap replicates of A or B spread over more than `MAX_DECADES` decades
  (their interval at the stated level), or of E down to zero.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..scaling import (
    CHINCHILLA_GRID,
    MIN_SIZES,
    ChinchillaFit,
    HuberPowerLaw,
    fit_chinchilla,
    one_blas_thread,
)
from ..stats import percentile_ci

N_PARAMETERS = 5
NAMES = ("A", "B", "E", "alpha", "beta")  # theta's order, exponentiated where logs
# Measured (tests/analysis/test_predict.py): Epoch's Chinchilla points 1.1e3; synthetic ladders
# with 4-5 sizes over 1-1.2 decades and 4 token counts (5-40 per parameter) 2e3-8e3,
# 3 token counts 4e3-4e4, 2 token counts 2e3-5e4; token counts 15-25 per parameter
# 1e5-inf; one token count per size 5e6-inf.
MAX_CONDITION = 1e5
MAX_DECADES = 2.0
GRID_BOX = np.array([CHINCHILLA_GRID.min(axis=0), CHINCHILLA_GRID.max(axis=0)])


@dataclass
class LossLaw:
    """A fitted L(N, D) (`fit`, NaN fields when refused), its bootstrap
    replicates (rows of theta = ln A, ln B, ln E, alpha, beta) and what the
    noise draw uses."""

    status: str  # "ok", "poorly determined", or why there is no fit
    fit: ChinchillaFit | None = None
    replicates: np.ndarray = field(default_factory=lambda: np.empty((0, N_PARAMETERS)))
    kept: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=bool))
    noise: np.ndarray = field(default_factory=lambda: np.zeros(1))  # scaled log residuals
    residuals: np.ndarray = field(default_factory=lambda: np.empty(0))
    warnings: list[str] = field(default_factory=list)
    condition: float = np.nan
    n_points: int = 0
    n_sizes: int = 0

    @property
    def ok(self) -> bool:
        return self.fit is not None

    def mean(self, N, D) -> tuple[np.ndarray, np.ndarray]:
        """The fitted surface at (N, D) (m,) and each replicate's (k, m)."""
        N, D = np.asarray(N, dtype=float), np.asarray(D, dtype=float)
        point = self.fit.predict(N, D)
        la, lb, le, al, be = (self.replicates[:, i, None] for i in range(N_PARAMETERS))
        with np.errstate(over="ignore"):  # a wild replicate's loss is inf, not an error
            reps = np.exp(le) + np.exp(la - al * np.log(N)) + np.exp(lb - be * np.log(D))
        return point, reps

    def predictive(self, N, D, rng: np.random.Generator) -> np.ndarray:
        """Each replicate's loss of one run at (N, D): its surface times e^r (k, m)."""
        _, reps = self.mean(N, D)
        return reps * np.exp(rng.choice(self.noise, size=reps.shape))

    def parameters(self) -> dict[str, tuple[float, np.ndarray]]:
        """Each parameter's estimate and replicates, on its own scale."""
        theta = self.fit.theta()
        out = {}
        with np.errstate(over="ignore"):
            for i, name in enumerate(NAMES):
                exp = i < 3
                out[name] = (float(np.exp(theta[i]) if exp else theta[i]),
                             np.exp(self.replicates[:, i]) if exp else self.replicates[:, i])
        return out


def fit_loss_law(N, D, L, weights: np.ndarray, ci: float, *, n_polish: int | None = 256,
                 delta: float = 1e-3) -> LossLaw:
    """L(N, D) on the runs (N, D, L), refitted once per row of `weights` (the
    bootstrap's multiplicities, resampling.py); refused, with its reason, on
    fewer than 3 sizes or token counts or no more runs than parameters."""
    N, D, L = (np.asarray(v, dtype=float) for v in (N, D, L))
    k_n, k_d = np.unique(N).size, np.unique(D).size
    if k_n < MIN_SIZES or k_d < MIN_SIZES or L.size <= N_PARAMETERS:
        return LossLaw(f"no fit: L(N, D) needs >= {MIN_SIZES} sizes, >= {MIN_SIZES} token "
                       f"counts and more than {N_PARAMETERS} runs; the ladder has {k_n}, "
                       f"{k_d} and {L.size}", n_points=L.size, n_sizes=k_n)
    logx, logy = np.column_stack([np.log(N), np.log(D)]), np.log(L)
    fit = fit_chinchilla(N, D, L, delta=delta, n_polish=n_polish)
    model = HuberPowerLaw(logx, logy, delta)
    with one_blas_thread():
        res = model.polish_tight(fit.theta())
        if res.fun <= fit.loss:
            fit = ChinchillaFit.from_theta(res.x, res.fun, fit.n_points)
        theta = fit.theta()
        reps = np.array([HuberPowerLaw(logx, logy, delta, weights=w).polish_tight(theta).x
                         for w in weights]).reshape(-1, N_PARAMETERS)
    # A replicate whose runs hold fewer than 3 token counts cannot tell D's effect.
    kept = np.array([np.unique(D[w > 0]).size >= MIN_SIZES for w in weights], dtype=bool)
    kept &= np.isfinite(reps).all(axis=1)
    residuals = logy - model.log_predict(theta)
    law = LossLaw("ok", fit, reps[kept], kept,
                  residuals * np.sqrt(L.size / (L.size - N_PARAMETERS)), residuals,
                  n_points=L.size, n_sizes=k_n)
    law.condition = condition_number(logx, theta)
    law.warnings = determination_warnings(law, N, D, ci)
    if law.warnings:
        law.status = "poorly determined"
    return law


def condition_number(logx: np.ndarray, theta: np.ndarray) -> float:
    """The condition number of J'J scaled to a unit diagonal, J the Jacobian of
    log L_hat in theta with ln N and ln D centred on their means; inf where a
    term vanishes (its columns are zero)."""
    centred = logx - logx.mean(axis=0)
    la, lb, le, al, be = theta
    # ln A and ln B at the centre: the same surface, A and alpha no longer confounded.
    z = np.column_stack([la - al * logx.mean(axis=0)[0] - al * centred[:, 0],
                         lb - be * logx.mean(axis=0)[1] - be * centred[:, 1],
                         np.full(len(logx), le)])
    w = np.exp(z - z.max(axis=1, keepdims=True))
    w /= w.sum(axis=1, keepdims=True)  # d log L_hat / d (each term's exponent)
    J = np.column_stack([w[:, 0], w[:, 1], w[:, 2], -w[:, 0] * centred[:, 0],
                         -w[:, 1] * centred[:, 1]])
    M = J.T @ J
    scale = np.sqrt(np.diag(M))
    if not (scale > 1e-12 * scale.max()).all():
        return float("inf")
    eig = np.linalg.eigvalsh(M / np.outer(scale, scale))
    return float(eig[-1] / eig[0]) if eig[0] > 0 else float("inf")


def determination_warnings(law: LossLaw, N: np.ndarray, D: np.ndarray, ci: float) -> list[str]:
    """Why the optimum is poorly determined (the module docstring), or nothing."""
    warnings = []
    theta = law.fit.theta()
    labels = ("a = ln A", "b = ln B", "e = ln E", "alpha", "beta")
    for value, label, lo, hi in zip(theta, labels, *GRID_BOX, strict=True):
        if not lo - 1e-9 <= value <= hi + 1e-9:
            warnings.append(f"{label} = {value:.3g} lies outside the start grid [{lo:g}, "
                            f"{hi:g}]")
    if law.condition > MAX_CONDITION:
        warnings.append(f"flat directions: condition number {law.condition:.3g} > "
                        f"{MAX_CONDITION:g}")
    if all(np.unique(D[N == n]).size == 1 for n in np.unique(N)):
        warnings.append("each size trained on one token count: N's and D's effects are "
                        "confounded")
    if len(law.replicates):
        for i, name in ((0, "A"), (1, "B")):  # theta holds ln A and ln B
            low, high = percentile_ci(law.replicates[:, i] / np.log(10), ci)
            if high - low > MAX_DECADES:
                warnings.append(f"bootstrap {name} spreads over {high - low:.1f} decades")
        low, _ = percentile_ci(law.replicates[:, 2], ci)
        if low < theta[2] + np.log(1e-3):
            warnings.append("bootstrap E reaches zero")
    return warnings
