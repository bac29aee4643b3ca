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
misses), drawn from the runs near the target in tokens per parameter
(`near`: within a factor of 4, or the 8 nearest): what the law misses
depends on it (on Porian et al.'s IsoFLOP profiles the runs at a tenth of a
token per parameter miss by ten times what those at 5-20 miss), and a run's
noise is the noise of runs like it. The interval of the surface alone
(`mean`) is reported beside it.
Residuals drawn as if independent miss a misfit of the form that grows with
the extrapolation, so the stage widens the draws by `scale`, the factor the
ladder's own held-out sizes ask for (calibration.py): each draw's log
distance from the fitted surface times `scale`.

Two forms (`FORMS`): Hoffmann et al.'s, every parameter free
("chinchilla"), and the same with an irreducible-loss prior ("e-prior"): a
normal prior on ln E, centred on a value the user knows (`--e-prior E0:SD`,
e.g. a larger study's E) or, without one, on half the lowest loss of the
ladder with a standard deviation of ln 2 (a factor of two), a weak prior that
keeps E off zero and off the losses measured, where a short ladder's flat
direction between E and alpha lets it wander. The prior enters the
objective as a penalty on the Huber objective's scale: for residuals well
beyond delta the objective is delta times their absolute sum, a Laplace
likelihood of scale b (the mean absolute residual of the free fit) up to
the factor delta b, so the penalty is delta b (ln E - ln E0)^2 / (2 SD^2).

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
from .options import FORMS  # noqa: F401  (the forms, declared with the options)

N_PARAMETERS = 5
NAMES = ("A", "B", "E", "alpha", "beta")  # theta's order, exponentiated where logs
# Measured (tests/analysis/predict/test_predict.py): Epoch's Chinchilla points 1.1e3;
# synthetic ladders with 4-5 sizes over 1-1.2 decades and 4 token counts (5-40 per
# parameter) 2e3-8e3, 3 token counts 4e3-4e4, 2 token counts 2e3-5e4; token counts
# 15-25 per parameter 1e5-inf; one token count per size 5e6-inf.
MAX_CONDITION = 1e5
MAX_DECADES = 2.0
GRID_BOX = np.array([CHINCHILLA_GRID.min(axis=0), CHINCHILLA_GRID.max(axis=0)])
# The default prior of the e-prior form (the module docstring): E0 half the
# lowest loss, one standard deviation a factor of two.
PRIOR_FRACTION = 0.5
PRIOR_SD = float(np.log(2.0))
# Runs "near" a target in tokens per parameter: within this factor, or the
# NEAREST nearest of them.
NEAR = float(np.log(4.0))
NEAREST = 8


def near(x: np.ndarray, x0: float, width: float = NEAR, nearest: int = NEAREST) -> np.ndarray:
    """Which of the points at x (ln D/N) lie within `width` of x0, or, where
    fewer than `nearest` do, the `nearest` closest (all, with fewer points)."""
    gap = np.abs(np.asarray(x, dtype=float) - x0)
    inside = gap <= width + 1e-12
    if inside.sum() >= min(nearest, gap.size):
        return inside
    return gap <= np.sort(gap)[min(nearest, gap.size) - 1] + 1e-12


class PriorPowerLaw(HuberPowerLaw):
    """HuberPowerLaw's objective plus `weight` (e - e0)^2 / 2, e = ln E (theta's
    index `k`): a normal prior on ln E (the module docstring)."""

    def __init__(self, logx, logy, delta, e0: float, weight: float, weights=None):
        super().__init__(logx, logy, delta, weights)
        self.e0, self.weight = e0, weight

    def fun_grad(self, theta):
        value, grad = super().fun_grad(theta)
        gap = theta[self.k] - self.e0
        grad = grad.copy()
        grad[self.k] += self.weight * gap
        return value + 0.5 * self.weight * gap**2, grad

    def values(self, thetas, chunk: int = 512):
        gap = np.asarray(thetas)[:, self.k] - self.e0
        return super().values(thetas, chunk) + 0.5 * self.weight * gap**2


def parse_prior(text: str | None) -> tuple[float, float] | None:
    """`--e-prior E0[:SD]` as (E0, SD), SD defaulting to ln 2; None for none."""
    if text is None or str(text).strip() == "":
        return None
    parts = str(text).split(":")
    try:
        e0 = float(parts[0])
        sd = float(parts[1]) if len(parts) == 2 else PRIOR_SD
    except ValueError:
        e0 = sd = np.nan
    if len(parts) > 2 or not (np.isfinite([e0, sd]).all() and e0 > 0 and sd > 0):
        raise ValueError(f"--e-prior: got {text!r}; accepted: E0 or E0:SD, the irreducible "
                         "loss in the loss's units and the prior's standard deviation of "
                         "ln E, both positive (e.g. 1.69:0.1)")
    return e0, sd


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
    ratios: np.ndarray | None = None  # ln(D / N) of each residual's run
    warnings: list[str] = field(default_factory=list)
    condition: float = np.nan
    n_points: int = 0
    n_sizes: int = 0
    form: str = "chinchilla"
    prior: tuple[float, float] | None = None  # (E0, SD) of the e-prior form
    # The calibration's widening of one run's draws (calibration.py): one number,
    # or one per target.
    scale: float | np.ndarray = 1.0

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
        """Each replicate's loss of one run at (N, D): its surface times e^r (k,
        m), its log distance from the fitted surface times `scale`."""
        point, reps = self.mean(N, D)
        drawn = reps * np.exp(self.draw_noise(N, D, reps.shape, rng))
        if np.all(np.asarray(self.scale) == 1.0):
            return drawn
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            return point * (drawn / point) ** self.scale

    def draw_noise(self, N, D, shape: tuple, rng: np.random.Generator) -> np.ndarray:
        """(k, m) draws of one run's log noise at each target: residuals of the
        runs near it in tokens per parameter (the module docstring)."""
        if self.ratios is None or self.noise.size <= 1:
            return rng.choice(self.noise, size=shape)
        x0 = np.log(np.asarray(D, dtype=float) / np.asarray(N, dtype=float))
        out = np.empty(shape)
        for j, x in enumerate(np.broadcast_to(x0, shape[1:])):
            out[:, j] = rng.choice(self.noise[near(self.ratios, x)], size=shape[0])
        return out

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
                 delta: float = 1e-3, form: str = "chinchilla",
                 prior: tuple[float, float] | None = None) -> LossLaw:
    """L(N, D) on the runs (N, D, L), refitted once per row of `weights` (the
    bootstrap's multiplicities, resampling.py), of `form` (FORMS; "e-prior" with
    `prior` (E0, SD), or the default prior); refused, with its reason, on fewer
    than 3 sizes or token counts or no more runs than parameters."""
    N, D, L = (np.asarray(v, dtype=float) for v in (N, D, L))
    k_n, k_d = np.unique(N).size, np.unique(D).size
    if k_n < MIN_SIZES or k_d < MIN_SIZES or L.size <= N_PARAMETERS:
        return LossLaw(f"no fit: L(N, D) needs >= {MIN_SIZES} sizes, >= {MIN_SIZES} token "
                       f"counts and more than {N_PARAMETERS} runs; the ladder has {k_n}, "
                       f"{k_d} and {L.size}", n_points=L.size, n_sizes=k_n, form=form)
    logx, logy = np.column_stack([np.log(N), np.log(D)]), np.log(L)
    fit = fit_chinchilla(N, D, L, delta=delta, n_polish=n_polish)
    model = HuberPowerLaw(logx, logy, delta)
    with one_blas_thread():
        res = model.polish_tight(fit.theta())
        if res.fun <= fit.loss:
            fit = ChinchillaFit.from_theta(res.x, res.fun, fit.n_points)
    if form == "e-prior":
        prior = prior or (PRIOR_FRACTION * float(L.min()), PRIOR_SD)
        spread = max(float(np.abs(logy - model.log_predict(fit.theta())).mean()), delta)
        weight = delta * spread / prior[1] ** 2

        def make(w=None):
            return PriorPowerLaw(logx, logy, delta, np.log(prior[0]), weight, weights=w)

        model = make()
        start = model.polish(np.vstack([fit.theta()[None], CHINCHILLA_GRID]), n_polish)
        with one_blas_thread():
            res = model.polish_tight(start.x)
        fit = ChinchillaFit.from_theta(res.x, res.fun, fit.n_points)
    else:
        prior = None

        def make(w=None):
            return HuberPowerLaw(logx, logy, delta, weights=w)
    with one_blas_thread():
        theta = fit.theta()
        reps = np.array([make(w).polish_tight(theta).x
                         for w in weights]).reshape(-1, N_PARAMETERS)
    # A replicate whose runs hold fewer than 3 token counts cannot tell D's effect.
    kept = np.array([np.unique(D[w > 0]).size >= MIN_SIZES for w in weights], dtype=bool)
    kept &= np.isfinite(reps).all(axis=1)
    residuals = logy - model.log_predict(theta)
    law = LossLaw("ok", fit, reps[kept], kept,
                  residuals * np.sqrt(L.size / (L.size - N_PARAMETERS)), residuals,
                  n_points=L.size, n_sizes=k_n, form=form, prior=prior,
                  ratios=np.log(D / N))
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
