"""Power-law fits for scaling studies: numpy and scipy only, never torch.

Four fits, all with the conventions of docs/analysis.md, "Metrics":

- `fit_loglog`: y = coef * x^(-alpha) by least squares in log-log space, with
  the t interval of a residual bootstrap (stats.py): an interval for the
  log-log chord over the sizes run, the law's exponent where the law holds.
- `fit_saturating`: y = E + A x^(-alpha) by a Huber loss on log residuals,
  L-BFGS-B from many starts (the Chinchilla approach 3 recipe with one input).
- `fit_chinchilla`: L(N, D) = E + A/N^alpha + B/D^beta, Hoffmann et al. 2022
  approach 3 as replicated by Besiroglu et al. 2024.
- `transfer_slope`: alpha_U,D, the log-log slope of downstream error against
  upstream loss (Tay et al. 2022).

`heldout_prediction` validates a law: it refits the law (log-log or saturating)
without the largest size and reports the relative error of its prediction of that
size, with a percentile-bootstrap interval from the same resampling as the fits.

A fit over fewer than `MIN_SIZES` distinct sizes refuses: its status says so and
every coefficient is NaN, never a number.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields

import numpy as np
from scipy.optimize import minimize
from scipy.special import huber
from threadpoolctl import ThreadpoolController

from . import MIN_SIZES
from .options import Bootstrap, FitOptions
from .stats import (
    Strata,
    clean_labelled,
    expanded_ci,
    interval_text,
    interval_unit,
    is_local,
    local_text,
    loglog_replicates,
    ols,
    r2,
    resampled_means,
    stratified,
    t_interval,
)

# --------------------------------------------------------------------------- results


@dataclass(frozen=True)
class PowerLawFit:
    """y = coef * x**(-alpha), fitted by least squares in log-log space."""

    alpha: float  # NaN unless status == "ok"
    coef: float  # NaN unless ok
    r2: float  # R^2 of the log-log regression; NaN unless ok
    alpha_low: float  # t interval from the residual bootstrap (stats.py); NaN unless ok
    alpha_high: float
    n_points: int  # finite points used
    n_sizes: int  # distinct sizes among them
    status: str  # "ok" or "not enough sizes: k < 3" style message
    lack_of_fit_p: float  # the power law's lack-of-fit F test; NaN without replication
    interval_unit: str  # what its residual bootstrap redraws: "run" or "size" (stats.py)
    interval_df: float  # the t interval's degrees of freedom; NaN without an interval
    interval: str  # how the interval was made ("runs resampled, 4 df"), or why none

    def predict(self, x) -> np.ndarray:
        return self.coef * np.asarray(x, dtype=float) ** (-self.alpha)

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class TransferFit(PowerLawFit):
    """err = coef * loss**alpha: alpha is alpha_U,D = d log(err) / d log(loss).

    Positive when downstream error falls together with upstream loss. The sign is
    the opposite of `PowerLawFit`, whose alpha is minus the log-log slope, so that
    "the bigger alpha_U,D, the more of the upstream gain transfers".
    """

    def predict(self, x) -> np.ndarray:
        return self.coef * np.asarray(x, dtype=float) ** self.alpha


@dataclass(frozen=True)
class SaturatingFit:
    """y = E + A * x**(-alpha), fitted by a Huber loss on log residuals."""

    E: float  # NaN unless status == "ok"
    A: float
    alpha: float
    alpha_low: float  # bootstrap CI bounds (percentile)
    alpha_high: float
    r2: float  # R^2 on log y
    n_points: int
    n_sizes: int
    status: str
    interval: str  # how the interval was made, or why none

    def predict(self, x) -> np.ndarray:
        return self.E + self.A * np.asarray(x, dtype=float) ** (-self.alpha)

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class ChinchillaFit:
    """L(N, D) = E + A / N**alpha + B / D**beta (Hoffmann et al. 2022, approach 3)."""

    A: float
    B: float
    E: float
    alpha: float
    beta: float
    loss: float  # the minimised sum of Huber losses on log residuals
    n_points: int

    def predict(self, N, D) -> np.ndarray:
        N, D = np.asarray(N, dtype=float), np.asarray(D, dtype=float)
        return self.E + self.A / N**self.alpha + self.B / D**self.beta

    def as_dict(self) -> dict:
        return asdict(self)

    def theta(self) -> np.ndarray:
        """(ln A, ln B, ln E, alpha, beta), `HuberPowerLaw`'s parameters; a
        coefficient fitted to 0 as e^-700, so that an optimiser sees a finite number."""
        with np.errstate(divide="ignore"):
            logs = np.maximum(np.log([self.A, self.B, self.E]), -700.0)
        return np.r_[logs, self.alpha, self.beta]

    @classmethod
    def from_theta(cls, theta, loss: float, n_points: int) -> ChinchillaFit:
        la, lb, le, alpha, beta = (float(v) for v in theta)
        return cls(A=float(np.exp(la)), B=float(np.exp(lb)), E=float(np.exp(le)),
                   alpha=alpha, beta=beta, loss=float(loss), n_points=int(n_points))


@dataclass(frozen=True)
class HeldoutPrediction:
    """A law fitted on every size but one, judged on the size held out.

    rel_error = (pred - obs) / obs: the signed relative error of the law's
    prediction `pred` at the held-out size's mean x, against that size's mean
    observed y `obs` (positive: the law predicts too high a loss or error).
    """

    size: str  # the held-out size ("" when there is none)
    x: float  # its mean x over runs; NaN unless ok
    pred: float  # the law's prediction at x; NaN unless ok
    obs: float  # the mean y of its runs; NaN unless ok
    rel_error: float  # (pred - obs) / obs; NaN unless ok
    rel_error_low: float  # bootstrap CI bounds (percentile); NaN unless ok
    rel_error_high: float
    status: str  # "ok" or why there is no prediction

    def as_dict(self) -> dict:
        """A flat row with every name prefixed `heldout_` (the fits table's columns)."""
        return {f"heldout_{k}": v for k, v in asdict(self).items()}


def _refused(cls, n_points: int, n_sizes: int, status: str):
    """A result of `cls` with every coefficient NaN and `status` saying why."""
    counts = {"n_points": n_points, "n_sizes": n_sizes, "status": status,
              "interval": f"none: {status}", "interval_unit": ""}
    return cls(**{f.name: counts.get(f.name, np.nan) for f in fields(cls)})


# --------------------------------------------------------------------------- log-log


def fit_loglog(
    x, y, sizes=None, *, n_boot=Bootstrap.n_boot, ci=Bootstrap.ci, seed=Bootstrap.seed,
    min_sizes=MIN_SIZES, size_noise=False,
) -> PowerLawFit:
    """Fit y = coef * x^(-alpha) by ordinary least squares on (log x, log y).

    `sizes` labels each point's model size (default: its x); fewer than
    `min_sizes` distinct sizes refuses. The interval is the t interval of the
    residual bootstrap (stats.py), deterministic given `seed`: runs redrawn, or
    sizes where `size_noise` (a size's runs share one pretraining). It is an
    interval for the log-log chord over the sizes run: the law's exponent where
    the power law holds, a local slope where the lack-of-fit test rejects it
    (the `interval` text then says so).
    """
    x, y, labels = clean_labelled(x, y, sizes)
    k, n = len(set(labels.tolist())), x.size
    if k < min_sizes:
        return _refused(PowerLawFit, n, k, f"not enough sizes: {k} < {min_sizes}")
    lx, ly = np.log(x), np.log(y)
    if np.unique(lx).size < 2:
        return _refused(PowerLawFit, n, k, "x does not vary: no slope")

    slope, intercept = ols(lx, ly)
    unit, lof_p, why = interval_unit(lx, ly, labels, size_noise)
    low = high = df = np.nan
    interval = "none: n_boot = 0"
    if n_boot > 0:
        boot_slopes, _, df = loglog_replicates(lx, ly, n_boot, seed, labels, unit)
        low, high = t_interval(float(-slope), -boot_slopes, df, ci)  # alpha = -slope
        interval = (interval_text(unit, df, why) if np.isfinite(low)
                    else "none: no residual freedom")
    if is_local(lof_p):
        interval += "; " + local_text(lof_p)
    return PowerLawFit(
        alpha=float(-slope),
        coef=float(np.exp(intercept)),
        r2=r2(ly, intercept + slope * lx),
        alpha_low=low,
        alpha_high=high,
        n_points=n,
        n_sizes=k,
        status="ok",
        lack_of_fit_p=lof_p,
        interval_unit=unit,
        interval_df=float(df) if np.isfinite(low) else np.nan,
        interval=interval,
    )


def transfer_slope(
    upstream_loss, downstream_error, sizes=None, *, n_boot=Bootstrap.n_boot, ci=Bootstrap.ci,
    seed=Bootstrap.seed,
    min_sizes=MIN_SIZES, size_noise=False,
) -> PowerLawFit:
    """alpha_U,D = d log(downstream error) / d log(upstream loss), across sizes.

    Tay et al. 2022: how much of the upstream gain transfers downstream. Positive
    when both fall together; if err ~ C^-alpha_D and loss ~ C^-alpha_U then
    alpha_U,D = alpha_D / alpha_U. Returns a `TransferFit` (a `PowerLawFit` whose
    alpha has this sign and whose predict gives err = coef * loss**alpha).
    """
    f = fit_loglog(
        upstream_loss, downstream_error, sizes,
        n_boot=n_boot, ci=ci, seed=seed, min_sizes=min_sizes, size_noise=size_noise,
    )
    # fit_loglog's alpha is minus the slope: flip it and swap the interval ends.
    flipped = {"alpha": -f.alpha, "alpha_low": -f.alpha_high, "alpha_high": -f.alpha_low}
    return TransferFit(**{**f.as_dict(), **flipped})


# --------------------------------------------------------------------------- Huber fits


class HuberPowerLaw:
    """Sum of Huber losses on log y - log yhat for yhat = E + sum_j C_j x_j^(-s_j).

    Parameters theta = (c_1..c_k, e, s_1..s_k) with C_j = exp(c_j), E = exp(e), so
    log yhat = logsumexp(c_j - s_j log x_j, e): positive terms without bounds and
    no overflow (Hoffmann et al. 2022, approach 3). Chinchilla is k = 2 with
    theta = (a, b, e, alpha, beta). `weights` are bootstrap multiplicities.
    """

    def __init__(self, logx: np.ndarray, logy: np.ndarray, delta: float, weights=None):
        self.logx, self.logy, self.delta = logx, logy, delta
        self.k = logx.shape[1]
        self.weights = np.ones_like(logy) if weights is None else weights

    def fun_grad(self, theta: np.ndarray) -> tuple[float, np.ndarray]:
        """Objective and its analytic gradient, for scipy's L-BFGS-B (jac=True)."""
        k, d, w8 = self.k, self.delta, self.weights
        z = np.empty((self.logy.size, k + 1))
        z[:, :k] = theta[:k] - theta[k + 1:] * self.logx
        z[:, k] = theta[k]
        zmax = z.max(axis=1)
        w = np.exp(z - zmax[:, None])
        total = w.sum(axis=1)
        w /= total[:, None]  # softmax: d log yhat / d (term exponent)
        r = self.logy - zmax - np.log(total)
        psi = (w8 * np.clip(r, -d, d))[:, None]  # Huber'(r), times the multiplicity
        # Reductions as elementwise sums, not `@`: on small arrays a threaded BLAS
        # call costs more than it saves, and far more on a busy machine.
        grad_ce = -(psi * w).sum(axis=0)  # d/dc_j and d/de
        grad_s = (psi * w[:, :k] * self.logx).sum(axis=0)  # d log yhat/ds_j = -w_j log x_j
        return float((w8 * huber(d, r)).sum()), np.concatenate([grad_ce, grad_s])

    def log_predict(self, theta: np.ndarray) -> np.ndarray:
        """log yhat at one (1-D) or many (2-D, one per row) parameter vectors."""
        k = self.k
        c, e, s = theta[..., None, :k], theta[..., None, k:k + 1], theta[..., None, k + 1:]
        z = c - s * self.logx
        z = np.concatenate([z, np.broadcast_to(e, z.shape[:-1] + (1,))], axis=-1)
        zmax = z.max(axis=-1, keepdims=True)
        return zmax[..., 0] + np.log(np.exp(z - zmax).sum(axis=-1))

    def values(self, thetas: np.ndarray, chunk: int = 512) -> np.ndarray:
        """The objective at many parameter vectors at once (rows of `thetas`)."""
        out = np.empty(len(thetas))
        for i in range(0, len(thetas), chunk):
            r = self.logy - self.log_predict(thetas[i:i + chunk])
            out[i:i + chunk] = (huber(self.delta, r) * self.weights).sum(axis=-1)
        return out

    def polish(self, starts: np.ndarray, n_polish: int | None):
        """L-BFGS-B from the `n_polish` starts with the lowest objective (all if None).

        Returns scipy's result with the lowest final objective.
        """
        if n_polish is not None and n_polish < len(starts):
            # Evaluating every start costs one vectorised pass; L-BFGS-B runs cost
            # ~60 evaluations each, so polishing only the promising ones is the saving.
            starts = starts[np.argsort(self.values(starts), kind="stable")[:n_polish]]
        with one_blas_thread():
            runs = [minimize(self.fun_grad, s, jac=True, method="L-BFGS-B") for s in starts]
        return min(runs, key=lambda res: res.fun)

    def polish_tight(self, start: np.ndarray):
        """L-BFGS-B from `start` to tight tolerances (ftol 1e-15, gtol 1e-12).

        scipy's defaults (gtol 1e-5) stop a refit started at the full-data optimum
        after a few steps when the Huber objective is small (low-noise data): on the
        synthetic surface of tests/analysis/frontier/test_approaches.py with 0.3%
        noise, 200 refits gave the interval 0.4475-0.4486 for the frontier's
        exponent a with the defaults against 0.4389-0.4617 with these tolerances
        (which covers the true 0.4516).
        With them the refit from the full-data optimum reached the objective of a
        refit from the best start of a coarse 3^5 grid (a, b in 0, 10, 20; e in -1,
        0, 1; alpha, beta in 0.25, 0.75, 1.5) in 49 of 50 resamples (the other: 1e-6
        lower, a within 2e-5), at a fifth of the cost, so bootstrap refits start from
        the full-data optimum alone. The caller limits BLAS (`one_blas_thread`).
        """
        return minimize(self.fun_grad, start, jac=True, method="L-BFGS-B",
                        options={"ftol": 1e-15, "gtol": 1e-12, "maxiter": 2000})


@functools.cache
def _blas_pools() -> ThreadpoolController:
    # Finding the loaded BLAS libraries reads /proc/self/maps: ~5 ms, once per
    # process instead of once per polish (6 s of a 13-architecture study's fits).
    return ThreadpoolController()


def one_blas_thread():
    """Limit BLAS to one thread while L-BFGS-B runs.

    SciPy >= 1.15's L-BFGS-B calls BLAS/LAPACK on 5x5 problems; a multi-threaded
    OpenBLAS makes that ~20x slower on a busy 2-core machine (measured here; scipy
    issue #22438).
    """
    return _blas_pools().limit(limits=1, user_api="blas")


def _grid(*axes: Sequence[float]) -> np.ndarray:
    """Cartesian product of per-parameter start values, one start per row."""
    return np.array(list(itertools.product(*axes)), dtype=float)


# The replication's grid (reference README), in theta order (a, b, e, alpha, beta):
# alpha, beta in {0, 0.5, ..., 2}; e in {-1, -0.5, ..., 1}; a, b in {0, 5, ..., 25}.
CHINCHILLA_GRID = _grid(
    np.arange(0, 30, 5), np.arange(0, 30, 5), np.arange(-1, 1.5, 0.5),
    np.arange(0, 2.5, 0.5), np.arange(0, 2.5, 0.5),
)


def fit_chinchilla(N, D, L, *, delta=1e-3, grid=None, n_polish=256) -> ChinchillaFit:
    """Fit L(N, D) = E + A/N^alpha + B/D^beta as Hoffmann et al. 2022, approach 3.

    Huber loss (`delta`) on log L - log L_hat, log L_hat = logsumexp(a - alpha log N,
    b - beta log D, e), L-BFGS-B from the starts in `grid` (rows (a, b, e, alpha,
    beta); default `CHINCHILLA_GRID`, 4,500 starts), keeping the lowest objective.

    `n_polish` runs L-BFGS-B only from the starts with the lowest objective on the
    grid (None: from all of them, the literal procedure, minutes instead of
    seconds). Checked on the Epoch AI data (240 points): the full 4,500-start run
    and the 256 best starts reach the same optimum (A 477.822 vs 477.828, B 2143.43
    vs 2143.37, E, alpha, beta equal to 5 digits, objectives to 1e-9 relative: the
    optimum is flat in A and B). On 6 bootstrap resamples of those data the best
    start to reach the full run's optimum ranked 0, 114, 4, 0, 0 and 0 by grid
    objective, hence 256 and not fewer. tests/analysis/test_scaling.py repeats the check on
    the full data as an opt-in slow test.
    """
    N, D, L = (np.asarray(v, dtype=float).ravel() for v in (N, D, L))
    keep = np.isfinite(N) & np.isfinite(D) & np.isfinite(L) & (N > 0) & (D > 0) & (L > 0)
    model = HuberPowerLaw(
        np.column_stack([np.log(N[keep]), np.log(D[keep])]), np.log(L[keep]), delta
    )
    starts = CHINCHILLA_GRID if grid is None else np.asarray(grid, dtype=float)
    res = model.polish(starts, n_polish)
    a, b, e, alpha, beta = res.x
    return ChinchillaFit(
        A=float(np.exp(a)), B=float(np.exp(b)), E=float(np.exp(e)),
        alpha=float(alpha), beta=float(beta), loss=float(res.fun), n_points=int(keep.sum()),
    )


def _offset_starts(lx: np.ndarray, ly: np.ndarray, n_e: int = 24) -> np.ndarray:
    """Starts (a, e, alpha) for y = E + A x^(-alpha) by profiling out E.

    For each E on a grid below min y, the least-squares line through
    (log x, log(y - E)) gives a and alpha in closed form, so the starts sit in the
    valley of the objective and L-BFGS-B polishes them in a few steps.
    """
    y = np.exp(ly)
    E = y.min() * (1 - np.geomspace(1e-3, 0.999, n_e))  # E from ~min y down to ~0
    slope, intercept = ols(np.broadcast_to(lx, (n_e, lx.size)), np.log(y - E[:, None]))
    return np.column_stack([intercept, np.log(E), -slope])


def _saturating_replicates(lx, ly, best, n_boot: int, seed: int, delta: float,
                           sizes=None) -> np.ndarray:
    """Parameters (a, e, alpha) of the bootstrap refits behind `fit_saturating`'s
    interval, one row each: runs resampled within each size (`sizes`, default x;
    stats.py), each refitted from the full-data optimum `best` or the resample's
    best profile start; no rows when some size has a single run. `lx` is log x in
    the fit's units."""
    drawn = stratified(Strata(lx if sizes is None else sizes), lx, ly, n_boot,
                       np.random.default_rng(seed))
    if drawn is None:
        return np.empty((0, 3))
    thetas = np.empty((n_boot, 3))
    for i, (lx_i, ly_i) in enumerate(zip(*drawn, strict=True)):
        m = HuberPowerLaw(lx_i[:, None], ly_i, delta)
        starts = np.vstack([best, _offset_starts(lx_i, ly_i)])
        thetas[i] = m.polish(starts, n_polish=1).x
    return thetas


def fit_saturating(
    x, y, sizes=None, *, n_boot=FitOptions.n_boot_saturating, ci=Bootstrap.ci,
    seed=Bootstrap.seed, delta=1e-3, min_sizes=MIN_SIZES,
) -> SaturatingFit:
    """Fit y = E + A x^(-alpha) by Huber loss on log residuals (Chinchilla approach 3).

    log yhat = logsumexp(a - alpha log x, e), A = e^a, E = e^e; L-BFGS-B with an
    analytic gradient from two families of starts: profile starts (`_offset_starts`)
    and a coarse grid. The bootstrap resamples runs within each size (stats.py)
    and refits each resample from the full-data optimum or the resample's best
    profile start. Percentile interval for alpha at `ci`; NaN when some size has a
    single run.
    """
    x, y, labels = clean_labelled(x, y, sizes)
    k, n = len(set(labels.tolist())), x.size
    if k < min_sizes:
        return _refused(SaturatingFit, n, k, f"not enough sizes: {k} < {min_sizes}")
    if np.unique(x).size < 3:
        return _refused(SaturatingFit, n, k, "fewer than 3 distinct x: E, A, alpha unidentified")

    # Measure x in units of its geometric mean so that one grid of starts suits any
    # x (FLOPs ~1e18 or parameters ~1e6): then A' = A x0^-alpha is of the order of y.
    log_x0 = np.log(x).mean()
    lx, ly = np.log(x) - log_x0, np.log(y)
    grid = _grid(
        np.median(ly) + np.log([0.01, 0.1, 0.5, 1.0]),  # a': the power-law part at x0
        ly.min() + np.log([0.01, 0.3, 0.6, 0.9]),  # e: E below the smallest y
        [0.05, 0.1, 0.2, 0.5, 1.0, 2.0],  # alpha: log-spaced, exponents are scale-like
    )
    model = HuberPowerLaw(lx[:, None], ly, delta)
    # Polishing all 120 starts finds a lower objective than this in ~1 in 12
    # synthetic cases, all ones where noise swamps the curve (alpha unidentified),
    # at ~10x the cost: grid starts far from the valley take many L-BFGS-B steps.
    best = min(
        model.polish(_offset_starts(lx, ly), n_polish=8),
        model.polish(grid, n_polish=4),
        key=lambda res: res.fun,
    ).x

    low = high = np.nan
    interval = "none: n_boot = 0"
    if n_boot > 0:
        alphas = _saturating_replicates(lx, ly, best, n_boot, seed, delta, labels)[:, -1]
        df = Strata(labels).df
        low, high = expanded_ci(alphas, ci, df)
        interval = (f"runs resampled within sizes, {df} df" if np.isfinite(low)
                    else "none: a size with a single run")

    a, e, alpha = best
    return SaturatingFit(
        E=float(np.exp(e)),
        A=float(np.exp(a + alpha * log_x0)),  # back to the caller's units of x
        alpha=float(alpha),
        alpha_low=low,
        alpha_high=high,
        r2=r2(ly, model.log_predict(best)),
        n_points=n,
        n_sizes=k,
        status="ok",
        interval=interval,
    )


# --------------------------------------------------------------------------- validation

HELDOUT_FORMS = ("loglog", "saturating")
HELDOUT_PARAMS = {"loglog": 2, "saturating": 3}  # the parameters of each form's law


def heldout_prediction(
    x, y, sizes, heldout: str, *, form="loglog", n_boot=Bootstrap.n_boot, ci=Bootstrap.ci,
    seed=Bootstrap.seed, delta=1e-3,
    min_sizes=MIN_SIZES, size_noise=False,
) -> HeldoutPrediction:
    """Fit the law on every size but `heldout`; predict that size and say how well.

    The law is `fit_loglog` (form "loglog"; alpha_U,D is the same regression of
    log error on log upstream loss) or `fit_saturating` (form "saturating"), fitted
    on the points of the other sizes with `min_sizes` required among them. Its
    prediction at the held-out size's mean x is compared with that size's mean y:
    rel_error = (pred - obs) / obs. The interval is the percentile interval of the
    same ratio over the fit's own bootstrap refits (the training runs resampled as
    the fit's interval resamples them, each refit predicting at the same x), each
    against a resample of the held-out runs' mean: the law's uncertainty and the
    held-out seeds' noise together (with one seed, the law's alone). A log-log
    refit resamples as `fit_loglog` does (residuals of runs, or of sizes where
    `size_noise` or its lack of fit says so); a refit through no more units than
    the law has parameters interpolates them and gets no interval (NaN bounds).
    """
    if form not in HELDOUT_FORMS:
        raise ValueError(f"form: got {form!r}, accepted values: {', '.join(HELDOUT_FORMS)}")
    x, y = np.asarray(x, dtype=float).ravel(), np.asarray(y, dtype=float).ravel()
    labels = np.asarray(sizes, dtype=object).ravel()
    keep = np.isfinite(x) & np.isfinite(y) & (x > 0) & (y > 0)
    test, train = keep & (labels == heldout), keep & (labels != heldout)

    def refused(status: str) -> HeldoutPrediction:
        return HeldoutPrediction(heldout, *[np.nan] * 6, status)

    if not test.any():
        return refused(f"no finished runs of {heldout}")
    train_xy = (x[train], y[train], labels[train])
    if form == "loglog":
        fit = fit_loglog(*train_xy, n_boot=0, min_sizes=min_sizes)
    else:
        fit = fit_saturating(*train_xy, n_boot=0, delta=delta, min_sizes=min_sizes)
    if fit.status != "ok":
        return refused(f"without {heldout}: {fit.status}")
    x0, obs = float(x[test].mean()), float(y[test].mean())
    pred = float(fit.predict(x0))

    low = high = np.nan
    # A refit through as many runs as the law has parameters interpolates them
    # and gets no interval (nor does one with a single run at some size: the
    # replicates resample within sizes).
    if n_boot > 0 and train.sum() > HELDOUT_PARAMS[form]:
        lx, ly = np.log(x[train]), np.log(y[train])
        if form == "loglog":
            unit, _, _ = interval_unit(lx, ly, labels[train], size_noise)
            slopes, intercepts, df = loglog_replicates(lx, ly, n_boot, seed, labels[train], unit)
            preds = np.exp(intercepts + slopes * np.log(x0))
        else:
            # fit_saturating's units: log x centred on its mean over the training points.
            log_c = lx.mean()
            best = np.array([np.log(fit.A) - fit.alpha * log_c, np.log(fit.E), fit.alpha])
            a, e, alpha = _saturating_replicates(lx - log_c, ly, best, n_boot, seed, delta,
                                                 labels[train]).T
            preds = np.exp(e) + np.exp(a - alpha * (np.log(x0) - log_c))
            df = Strata(labels[train]).df
        # The held-out runs are resampled too (seeds), so the interval holds the
        # noise of the observation as well as the law's.
        obs_boot = resampled_means(y[test], np.random.default_rng(seed + 1), preds.size)
        low, high = expanded_ci(preds / obs_boot - 1, ci, df)
    return HeldoutPrediction(heldout, x0, pred, obs, pred / obs - 1, low, high, "ok")
