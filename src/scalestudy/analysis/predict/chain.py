"""One group's chain as a method fits it: the ladder's two tables (step 1's
points and step 2's), the method (`Method`: the loss law's form, the task
loss's path, the metric's link), and the fitted chain (`Chain`), whose
`predict` draws every quantity of a run at given (N, D) with one bootstrap
replicate feeding the next step's (the replicates of every step fitted on one
resample of runs, resampling.py).

The quantities: `loss`, the table's loss, by L(N, D) (loss.py); with a task
loss (`--task-loss COLUMN`), `task`, either by an L(N, D) of its own
("direct") or from the loss by loss-to-loss (loss_map.py); with a metric,
`metric`, a sigmoid of the task loss where there is one, else of the loss
(downstream.py). Each quantity's draws of one run are widened by its
calibration's scale (calibration.py) about its point prediction: the log
distance of a loss, the distance of a metric.

The metric's point is the method's link's; its draws average over both links
(half the replicates each, an equal-weight model average): where the ladder
pins the sigmoid the two agree and the interval is the link's own, and beyond
the losses fitted, where the asymptote is a guess (1, or the ladder's), it
spans both guesses. On the benchmark's 8 synthetic ladders, whose accuracy
levels at 0.9, `--select` chose the asymptote at 1 on all 8 (the held-out size
cannot tell them apart), and the chosen link's calibrated interval alone held
53 of their 64 held-out runs' accuracy; averaged, 63 (benchmarks/
predict_ladders.py, 50 replicates).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from ..scaling import MIN_SIZES
from .downstream import MetricMap, fit_metric_map, replicate_cells, sigmoid
from .loss import LossLaw, fit_loss_law
from .loss_map import LossMap, fit_loss_map
from .options import FORMS, LINKS, PATHS
from .resampling import run_weights


@dataclass(frozen=True)
class Method:
    """How a chain is fitted: the loss laws' form (loss.FORMS), the task loss's
    path (PATHS: its own L(N, D), or loss-to-loss from the loss) and the
    metric's link (downstream.LINKS)."""

    form: str = FORMS[0]
    path: str = PATHS[0]
    link: str = LINKS[0]

    def label(self, task: bool, metric: bool) -> str:
        """What the method is, naming only the choices the chain makes."""
        parts = [self.form] + ([self.path] if task else []) + ([self.link] if metric else [])
        return " / ".join(parts)


@dataclass(frozen=True)
class Settings:
    """What every fit of a group shares: the bootstrap, the fitter, the prior of
    the e-prior form, the method (or its selection) and the calibration."""

    n_boot: int
    ci: float
    n_polish: int | None
    prior: tuple[float, float] | None = None
    method: Method = Method()
    select: bool = False
    calibrate: bool = True
    origins: int = 3


@dataclass
class Ladder:
    """One group's runs as the chain reads them: `finals`, step 1's points (one
    per run, where its schedule ended, or every checkpoint kept), and `points`,
    step 2's (every checkpoint kept); each with params, tokens, loss, `_unit`
    (its run), and `_task`, `_metric` where the chain has them."""

    finals: pd.DataFrame
    points: pd.DataFrame
    task: bool = False
    metric: bool = False

    @classmethod
    def of(cls, runs: pd.DataFrame, step1_points: str, final_evals: int, task: bool,
           metric: bool) -> Ladder:
        """One group's runs (inputs.prepare_ladder's) as the chain reads them: step 1
        on each run's final point (`step1_points` "final", a table of checkpoints)
        or on every row."""
        final = step1_points == "final" and "step" in runs
        return cls(final_points(runs, final_evals) if final else runs, runs, task, metric)

    def sizes(self) -> np.ndarray:
        return np.unique(self.finals["params"].to_numpy(dtype=float))

    def below(self, size: float) -> Ladder:
        """The ladder without its sizes at or above `size`."""
        return replace(self, finals=self.finals[self.finals["params"] < size],
                       points=self.points[self.points["params"] < size])

    def at(self, size: float) -> pd.DataFrame:
        """Step 1's points of size `size` (what a held-out size is judged on)."""
        return self.finals[self.finals["params"] == size]


def final_points(runs: pd.DataFrame, final_evals: int) -> pd.DataFrame:
    """Each run's final point: its last row's N, D and compute, and the mean of
    its last `final_evals` rows' loss, task loss and metric (a run's last
    evaluations, as Bhagia et al. average the last five)."""
    ordered = runs.sort_values(["_unit", "tokens"], kind="stable")
    last = ordered.groupby("_unit", sort=False).tail(1).set_index("_unit")
    tail = ordered.groupby("_unit", sort=False).tail(max(int(final_evals), 1))
    for col in ("loss", "_task", "_metric"):
        if col in tail:
            last[col] = tail.groupby("_unit")[col].mean()
    return last.reset_index()


@dataclass
class Drawn:
    """One quantity's point prediction (m,) and its replicates' draws of one
    run (k, m); `scale` the calibration's widening (applied in `draws`)."""

    point: np.ndarray
    raw: np.ndarray

    def draws(self, scale, log: bool) -> np.ndarray:
        if np.all(np.asarray(scale) == 1.0) or not self.raw.size:
            return self.raw
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            if log:
                return self.point * (self.raw / self.point) ** scale
            return np.clip(self.point + scale * (self.raw - self.point), 0.0, 1.0)


@dataclass
class Chain:
    """A fitted chain: the loss law, the task loss's (its own law, `task_law`,
    or the loss-to-loss map), the metric's mapping, and each quantity's
    calibration scale."""

    method: Method
    law: LossLaw
    resampling: str
    task_law: LossLaw | None = None
    loss_map: LossMap | None = None
    mapping: MetricMap | None = None
    alternative: MetricMap | None = None  # the other link, averaged in the draws
    # The calibration (calibration.Calibration): each quantity's scale at given
    # (N, D), and "link", the metric's error per unit of loss beyond the losses
    # its sigmoid was fitted on. None: the bootstrap's draws alone.
    calibration: object = None

    def scale(self, quantity: str, N, D):
        if self.calibration is None:
            return 0.0 if quantity == "link" else 1.0
        return self.calibration.scale(quantity, N, D)

    @property
    def task(self) -> bool:
        return self.task_law is not None or self.loss_map is not None

    def task_status(self) -> str:
        if self.task_law is not None:
            return self.task_law.status
        return self.loss_map.status if self.loss_map is not None else ""

    def _drawn(self, law, quantity: str, N, D, rng) -> Drawn:
        """A loss law's point and calibrated draws at (N, D)."""
        law.scale = self.scale(quantity, N, D)
        point, _ = law.mean(N, D)
        return Drawn(point, law.predictive(N, D, rng))

    def predict(self, N, D, rng: np.random.Generator) -> dict[str, Drawn | None]:
        """Every quantity's point and draws at the targets (N, D), each step's
        replicate feeding the next's; None where a step has no fit."""
        N, D = np.asarray(N, dtype=float), np.asarray(D, dtype=float)
        out = {"loss": None, "task": None, "metric": None}
        if not self.law.ok:
            return out
        out["loss"] = self._drawn(self.law, "loss", N, D, rng)
        feed = out["loss"]
        if self.task_law is not None:
            if self.task_law.ok:
                out["task"] = self._drawn(self.task_law, "task", N, D, rng)
            feed = out["task"]
        elif self.loss_map is not None:
            if self.loss_map.ok:
                raw = self.loss_map.predictive(feed.raw, rng) if feed.raw.size else feed.raw
                task = Drawn(self.loss_map.predict(feed.point), raw)
                out["task"] = Drawn(task.point, task.draws(self.scale("task", N, D), log=True))
            feed = out["task"]
        if self.mapping is not None and self.mapping.ok and feed is not None:
            value = sigmoid(self.mapping.params, feed.point)
            raw = (self.mapping.predictive(feed.raw, rng) if len(self.mapping.replicates)
                   and feed.raw.size else np.empty((0, value.size)))
            other = self.alternative
            if raw.size and other is not None and other.ok and len(other.replicates):
                raw[1::2] = other.predictive(feed.raw, rng)[1::2]
            slope = self.scale("link", N, D)
            if slope > 0 and raw.size:
                # The sigmoid's shape beyond the losses fitted is assumed: a replicate
                # that lies d beyond them errs by up to slope x d either way.
                lo, hi = self.mapping.loss_range
                beyond = np.maximum(lo - feed.raw, 0.0) + np.maximum(feed.raw - hi, 0.0)
                raw = np.clip(raw + slope * beyond * rng.uniform(-1, 1, raw.shape), 0.0, 1.0)
            metric = Drawn(value, raw)
            out["metric"] = Drawn(value, metric.draws(self.scale("metric", N, D), log=False))
        return out


def _row_weights(ladder: Ladder, n_boot: int, rng) -> tuple[np.ndarray, np.ndarray, str]:
    """The bootstrap's multiplicities of step 1's rows and of step 2's (a run's
    rows in both tables drawn together), and how they were drawn."""
    units = ladder.finals["_unit"].to_numpy().astype(str)
    weights, how = run_weights(units, ladder.finals["params"].to_numpy(dtype=float), n_boot,
                               rng)
    if not len(weights):
        return weights, np.empty((0, len(ladder.points))), how
    names, first = np.unique(units, return_index=True)
    per_unit = pd.DataFrame(weights[:, first].T, index=names)
    points = per_unit.reindex(ladder.points["_unit"].astype(str)).fillna(0.0).to_numpy().T
    return weights, points, how


def fit_chain(ladder: Ladder, method: Method, settings: Settings,
              rng: np.random.Generator, n_boot: int | None = None) -> Chain:
    """The chain of `method` on `ladder`, with `n_boot` (default the settings')
    bootstrap replicates."""
    n_boot = settings.n_boot if n_boot is None else n_boot
    finals, points = ladder.finals, ladder.points
    w_finals, w_points, how = _row_weights(ladder, n_boot, rng)
    N, D = (finals[c].to_numpy(dtype=float) for c in ("params", "tokens"))

    def law_of(column: str) -> LossLaw:
        return fit_loss_law(N, D, finals[column].to_numpy(dtype=float), w_finals,
                            settings.ci, n_polish=settings.n_polish, form=method.form,
                            prior=settings.prior)

    chain = Chain(method, law_of("loss"), how)
    feed_law, link_column = chain.law, "loss"
    if ladder.task:
        link_column = "_task"
        if method.path == "direct":
            chain.task_law = law_of("_task")
            feed_law = chain.task_law
        else:
            chain.loss_map = (
                fit_loss_map(points["loss"], points["_task"], chain.law.fit.E,
                             np.exp(chain.law.replicates[:, 2]), w_points[chain.law.kept])
                if chain.law.ok else LossMap("no fit: no loss law to map from"))
    if ladder.metric:
        if feed_law.ok and (chain.loss_map is None or chain.loss_map.ok):
            # A checkpoint's neighbours on other runs are no replicates of it: the
            # pure-error test is for seeds of one (N, D), not for curves.
            cells = (np.arange(len(points)) if "step" in points
                     else replicate_cells(points))
            weights = w_points[feed_law.kept]
            chain.mapping = fit_metric_map(points[link_column], points["_metric"], cells,
                                           weights, method.link)
            if chain.mapping.ok and len(weights):
                other = next(link for link in LINKS if link != method.link)
                chain.alternative = fit_metric_map(points[link_column], points["_metric"],
                                                   cells, weights, other)
        else:
            chain.mapping = MetricMap("no fit: no loss to chain", link=method.link)
    return chain


def enough_sizes(ladder: Ladder) -> bool:
    """Whether the ladder less its largest size still has the sizes a law needs."""
    return ladder.sizes().size > MIN_SIZES
