"""The compute-optimal frontier: N_opt(C) and D_opt(C) by Hoffmann et al.'s three approaches.

Hoffmann et al. 2022, "Training Compute-Optimal Large Language Models" (Chinchilla),
estimate how the loss-minimising model size N_opt and token count D_opt grow with
the compute budget C (FLOPs, C = 6 N D) in three ways, each giving N_opt ∝ C^a and
D_opt ∝ C^b. This module does the same for any table of runs, per architecture
(and prior), numpy/scipy/pandas only (no torch; matplotlib only inside the
figures module, imported when figures are drawn).

**One compute axis** (`compute_axis`, named in every output): all three
approaches answer N_opt ∝ C^a on the same C, so that their exponents compare.

- "counted" (the default): C is the FLOPs the table counts (`compute`: a model's
  counted training FLOPs, attention and embeddings included). Approaches 1-2 put
  a budget's point at its compute (curves: the grid of their compute); approach 3
  finds the optimum among the runs a budget C buys, D = C / f(N), f(N) the FLOPs a
  token costs at size N: each size's mean compute / tokens over its runs,
  interpolated linearly in ln N - ln f between sizes and extended beyond the end
  sizes by the end segments' slopes (`_cost_model`; f depends on N alone when
  FLOPs are counted per token). On each segment, where f ∝ N^g, the optimum has
  a closed form (`_chin_optimum`); the lowest of the segments' optima is it.
  Counted FLOPs per 6ND fall with N (2.48 to 1.12 from xxxs to m for the
  transformer of data/cache/frontier.parquet), so 6ND's closed form is not the
  counted optimum: on a surface with f ∝ N^0.85, a = beta / (alpha + 0.85 beta)
  = 0.484 where 6ND's gives 0.452 (tests/test_frontier.py).
- "6nd": C = 6 N D. Approaches 1-2 put a budget's point at 6 N_opt D_opt of the
  optimum found (curves: their 6ND replaces their compute); approach 3 takes f =
  6N, Hoffmann et al.'s closed form.

Budgets (the IsoFLOP groups) are the table's on either axis: its `budget` labels,
or its `compute` grouped by gaps. A table with `tokens` or `compute` alone has
C = 6ND on both axes.

- Approach 1, the envelope (their section 3.1): at each compute C the run with the
  lowest loss at C gives N_opt(C). From per-step curves (`curves`: a long table
  run, params, compute-so-far, loss) at `n_grid` log-spaced C between the
  smallest and the largest final compute of the runs, the loss of each run
  interpolated linearly in log C inside the span its curve covers; from a plain
  runs table (final points only) at each budget (grouped as in approach 2), the
  run with the lowest final loss. A compute point whose lowest loss belongs to
  the smallest or the largest size available there is left out with its reason:
  the optimum may lie beyond the sizes tried (the envelope is a bracketed minimum
  or nothing). Faithful: argmin over runs at fixed C, then log-log least squares
  of N_opt and D_opt on C. Simplified: no smoothing of the curves, and their
  schedule-horizon subtlety (several cosine lengths per size) is the caller's:
  a point of a curve counts as a run trained to that compute. N_opt is
  discretised to the sizes run, so the slope has an error of up to about one
  size step over the compute range (see tests/test_frontier.py).
- Approach 2, IsoFLOP profiles (section 3.2): per budget, loss against ln N fitted
  by a least-squares parabola through the runs near the minimum: the sizes
  within `window` decades (default 1) of the size of lowest mean loss, and
  always its two neighbours (the lowest-loss region); its vertex is N_opt(C);
  D_opt is the window's ln D against ln N (a line) at the vertex. A budget is
  left out with its reason, never fitted, when it has fewer than `min_sizes` (3)
  distinct sizes, when its lowest loss is at its smallest or largest size (the
  optimum is not bracketed), when its parabola opens downward (curvature <= 0),
  when its vertex lies outside the lowest-loss region, or, grouped without a
  `budget` column, when its compute spans more than `max_span` decades (not one
  budget). Why a window: the parabola approximates the profile, which is
  asymmetric in ln N (alpha != beta), and its vertex's bias grows with the span
  fitted and with how far off-centre the sizes sit (Open-Athena's
  scaling-law-analysis); through all sizes of a wide grid whose optimum sits near
  one end, the vertex lands inside the grid but far from the lowest loss (15
  sizes over three decades: a = 0.375 for a true 0.484, status ok). Fitted
  around the lowest loss, the span is bounded and the sizes sit within about a
  size step of centred. Faithful: the parabola in log N and the vertex.
  Simplified: Hoffmann et al. take each run's final loss after smoothing its
  curve and fit all sizes; here each run's final loss is taken as given.
- Approach 3, the parametric loss (section 3.3): L(N, D) = E + A/N^alpha + B/D^beta
  by `scaling.fit_chinchilla` (Huber loss, delta 1e-3, on log L; L-BFGS-B from the
  replication grid of Besiroglu et al. 2024), then N_opt(C) and D_opt(C) on the
  compute axis (above; on the 6ND axis N_opt = G (C/6)^a with a =
  beta/(alpha+beta), G = (alpha A / (beta B))^(1/(alpha+beta))), and the loss at
  the optimum L(N_opt, D_opt). Its a and b are the least-squares slopes of ln N_opt
  and ln D_opt on ln C over the group's budgets, as approaches 1-2 fit theirs
  (exactly the closed form's on the 6ND axis, or wherever f is a power law). A
  group with one budget is refused: along one IsoFLOP line N and D move
  together, and L(N, D) cannot tell their effects apart. Faithful: the
  objective, the grid and the closed form.
  Simplified: `n_polish` (default 256) runs L-BFGS-B only from the best grid starts
  (scaling.fit_chinchilla's docstring: the same optimum as all 4,500 on the
  Epoch data), the optimum is polished on to tight tolerances, and each bootstrap
  refit runs L-BFGS-B from the full-data optimum alone (`_polish_tight` says why),
  not from the full grid.

Intervals are bootstraps (`n_boot` replicates, default 200, at `ci`, default
0.95) over runs: approach 1 resamples the runs (curves: whole curves; final
points: runs within each budget), approach 2 the runs within each budget
(resamples with fewer than 3 distinct sizes redrawn; each replicate finds its
own lowest-loss size and window; a budget refused in a replicate is absent from
that replicate's line), and approach 3 all runs of the group, refitted. A
replicate with fewer than 3 compute points left is dropped; `n_boot_used` counts
the rest. Approaches 1 and 3 give percentile intervals. Approach 2's are
expanded percentile intervals (stats.expanded_ci: each end moved from the
replicates' median by t / z at budgets - 2 degrees of freedom, those of the line
through the vertices), for a, b and its predictions: the percentile interval
covered the true a in 0.92 of 300 noisy studies whose sampling drifts with C
(an edge budget refused only when its noise puts the lowest loss at the end
selects its noise; the old parabola through all sizes covered 0.91 there, and
0.00 on a grid the optima outgrow), the expanded one in 0.98-1.00 of every grid
of tests/test_frontier.py (`test_approach2_interval_coverage`), at the price of
intervals about t / z wider (1.4 at 6 budgets, 2.2 at 4, 6.5 at 3). Hoffmann et
al. bootstrap too (their Table 2 gives 10th-90th percentiles); the resampling
units are ours.

Input table (CSV or Parquet), one row per run:

- `params` (N, parameters) and `loss` (final loss): required;
- `compute` (C, FLOPs) or `tokens` (D): at least one; with one, the other is
  derived by C = 6 N D; with both, both are used as given;
- optional `arch`, `prior`: the groups (default `by`: those of them present; with
  neither, one group named "all");
- optional `budget`: the IsoFLOP group of each run (approaches 1 and 2), any
  label; the budget's compute is the geometric mean of its runs' `compute`
  (their common value when they agree; a label is never read as FLOPs, so that
  budget numbers 1, 2, 3 cannot pass for a compute). Without `budget`,
  runs are grouped by compute: sorted by log10 C, a new budget starts wherever
  the gap to the previous run exceeds `budget_gap` decades (default 0.02, a 4.7%
  step), and a group spanning more than `max_span` decades (default 0.1, 26%) is
  refused as not one budget. Gaps, not rounding to a fixed log grid: the runs of
  one budget sit within a few percent of each other (step counts are rounded),
  and a fixed grid cuts such a cluster in two when it straddles a grid edge (the
  Chinchilla data's 6e18 slice, 10^18.71-10^18.76, straddles 10^18.75 of a
  0.1-decade grid). The budget's compute is then the geometric mean of its runs'.

A row whose params, compute, tokens or loss is not a positive finite number is
left out with its reason (method "input"). A missing required column raises
ValueError naming it and the accepted columns.

Outputs (`frontier(..., out_dir)`, `main`), all written atomically (every file
rendered into a temporary directory beside its destination, then renamed in;
on an error nothing is left behind):

- `frontier.csv`: one row per method and compute point (approach 1: the budgets
  or curve grid points kept; approach 2: the budgets kept; approach 3: every
  budget of the group): `FRONTIER_COLUMNS` = method, the `by` columns (arch at
  least), compute_axis ("counted" or "6nd"), compute (C on that axis), n_opt,
  d_opt, loss_opt (approach 1: the lowest loss; 2: the parabola's minimum; 3:
  L(N_opt, D_opt)), n_sizes (the budget's sizes; NaN for approach 3).
- `frontier_fits.csv`: one row per method, group and `--predict` budget (one row
  per method and group, predict columns empty, without `--predict`):
  `FITS_COLUMNS` = method, by columns, compute_axis, status ("ok" or why not),
  n_points (compute points of approaches 1-2, runs of approach 3), a, a_low,
  a_high, b, b_low, b_high, n_coef, d_coef (N_opt = n_coef C^a, D_opt = d_coef C^b,
  C on the compute axis), loss_alpha_n, loss_beta_d, loss_E, loss_A_n, loss_B_d
  (approach 3's L = loss_E + loss_A_n / N^loss_alpha_n + loss_B_d / D^loss_beta_d;
  named apart from fits.parquet's alpha, E and A, another law's), n_boot,
  n_boot_used, ci, predict_compute (on the compute axis),
  n_opt_pred, n_opt_low, n_opt_high, d_opt_pred, d_opt_low, d_opt_high,
  loss_opt_pred, loss_opt_low, loss_opt_high (the loss at the optimum: approach 3
  only, NaN otherwise).
- `excluded.csv`: `EXCLUDED_COLUMNS` = method, by columns, compute (a budget's as
  the table counts it; a curves grid point's on the axis), n_sizes, reason,
  detail: every input row, budget or compute point left out, and why.
- `frontier_bands.csv`: `BANDS_COLUMNS`: each ok fit's N_opt, D_opt (and for
  approach 3 the loss) with bootstrap band on a log grid of C (on the compute
  axis) from the smallest compute point to ten times the largest (and any
  `--predict` budget beyond): the figures' lines.
- `frontier_profiles.csv`: `PROFILE_COLUMNS`: each budget (compute as the table
  counts it) and its parabola loss = p2 u^2 + p1 u + p0 in u = ln N - ln_center,
  ln_center the lowest-loss size's, fitted on the sizes n_min to n_max, with its
  status (p NaN where no parabola was fitted: too few sizes, lowest loss at an
  end, or not one budget).
- figures (frontier_figures.py): frontier_isoflop, frontier_optimal, frontier_loss,
  each PNG and PDF.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.optimize import minimize

from ..atomic import default_file_mode, naming
from .scaling import MIN_SIZES, ChinchillaFit, HuberPowerLaw, fit_chinchilla, one_blas_thread
from .stats import expanded_ci, percentile_ci, resample

METHODS = ("approach1", "approach2", "approach3")
METHOD_LABELS = {
    "approach1": "approach 1 (envelope)",
    "approach2": "approach 2 (IsoFLOP)",
    "approach3": "approach 3 (parametric)",
}
REQUIRED = ("params", "loss")
ONE_OF = ("compute", "tokens")
OPTIONAL = ("arch", "prior", "budget")
ACCEPTED = (*REQUIRED, *ONE_OF, *OPTIONAL)
CURVE_REQUIRED = ("run", "params", "loss")
DEFAULT_BY = ("arch", "prior")

COMPUTE_AXES = ("counted", "6nd")
AXIS_LABELS = {"counted": "counted FLOPs", "6nd": "6 N D FLOPs"}
# Approach 3's L(N, D) = loss_E + loss_A_n / N^loss_alpha_n + loss_B_d / D^loss_beta_d:
# the frontier_fits.csv column of each ChinchillaFit field (fits.parquet's alpha, E
# and A are another law's).
LOSS_PARAMETERS = {"loss_alpha_n": "alpha", "loss_beta_d": "beta", "loss_E": "E",
                   "loss_A_n": "A", "loss_B_d": "B"}

FRONTIER_COLUMNS = ["method", "compute_axis", "compute", "n_opt", "d_opt", "loss_opt",
                    "n_sizes"]
FITS_COLUMNS = [
    "method", "compute_axis", "status", "n_points", "a", "a_low", "a_high", "b", "b_low",
    "b_high", "n_coef", "d_coef", *LOSS_PARAMETERS, "n_boot", "n_boot_used", "ci",
    "predict_compute", "n_opt_pred", "n_opt_low", "n_opt_high", "d_opt_pred", "d_opt_low",
    "d_opt_high", "loss_opt_pred", "loss_opt_low", "loss_opt_high",
]
EXCLUDED_COLUMNS = ["method", "compute", "n_sizes", "reason", "detail"]
BANDS_COLUMNS = ["method", "compute_axis", "compute", "n_opt", "n_low", "n_high", "d_opt",
                 "d_low", "d_high", "loss_opt", "loss_low", "loss_high"]
PROFILE_COLUMNS = ["budget", "compute", "n_runs", "n_sizes", "ln_center", "p2", "p1", "p0",
                   "n_min", "n_max", "n_opt", "loss_opt", "status"]

# One decade beyond the largest compute point: the loss figure's extrapolation.
EXTRAPOLATE_DECADES = 1.0
LOG10 = np.log(10)


# --------------------------------------------------------------------------- results


@dataclass
class FrontierResult:
    """Everything `frontier` computed: the tables it writes, and the runs it used.

    `runs` is the cleaned input with `_group` (tuple of the `by` values),
    `_budget` (budget id within the group), `_budget_compute` (as the table
    counts it) and `_axis_budget_compute` (on `compute_axis`) added.
    `exponent_replicates` maps (method, *group) to the bootstrap replicates of
    that fit's exponent a (for comparing two groups' exponents).
    """

    frontier: pd.DataFrame
    fits: pd.DataFrame
    excluded: pd.DataFrame
    bands: pd.DataFrame
    profiles: pd.DataFrame
    runs: pd.DataFrame
    by: tuple[str, ...]
    compute_axis: str = "counted"
    loss_label: str = "loss (nats/token)"
    paths: list[Path] = field(default_factory=list)
    exponent_replicates: dict = field(default_factory=dict)

    def fit(self, method: str, **group) -> pd.Series:
        """The first fits row of `method` (and the group given by keyword)."""
        rows = self.fits[self.fits["method"] == method]
        for k, v in group.items():
            rows = rows[rows[k] == v]
        if rows.empty:
            raise KeyError(f"no fit of {method} for {group}")
        return rows.iloc[0]


@dataclass
class _Line:
    """One method's N_opt(C), D_opt(C) for one group: point estimate and replicates."""

    status: str
    n_points: int
    a: float = np.nan
    b: float = np.nan
    n_coef: float = np.nan
    d_coef: float = np.nan
    # Replicates: slopes and intercepts (ln space) of ln N_opt and ln D_opt on ln C.
    boot: np.ndarray | None = None  # (k, 4): a, ln n_coef, b, ln d_coef
    chin: object = None  # approach 3: the ChinchillaFit
    chin_boot: np.ndarray | None = None  # approach 3: (k, 5) refits (a, b, e, alpha, beta)
    cost: tuple | None = None  # approach 3: `_cost_model`'s knots
    extra: dict = field(default_factory=dict)


# --------------------------------------------------------------------------- inputs


def read_table(path) -> pd.DataFrame:
    """A CSV or Parquet table, by the file's suffix."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix in (".parquet", ".pq"):
        return pd.read_parquet(path)
    if suffix == ".csv":
        return pd.read_csv(path)
    raise ValueError(f"{path}: not a table: expected a .csv or .parquet file")


def _accepted_text() -> str:
    return ("params, loss, compute and/or tokens (at least one), optional arch, prior, "
            "budget")


def _default_by(table: pd.DataFrame) -> tuple[str, ...]:
    return tuple(c for c in DEFAULT_BY if c in table.columns)


def _check_columns(table: pd.DataFrame, by: Sequence[str], source: str,
                   required: Sequence[str] = REQUIRED) -> None:
    cols = set(table.columns)
    for col in required:
        if col not in cols:
            raise ValueError(
                f"{source}: missing column {col!r}; accepted columns: {_accepted_text()}"
                + (", and run (the run's id) in curves" if "run" in required else "")
            )
    if not cols & set(ONE_OF):
        raise ValueError(
            f"{source}: missing column 'compute' (or 'tokens'): one of them is needed; "
            f"accepted columns: {_accepted_text()}"
        )
    for col in by:
        if col not in cols:
            raise ValueError(
                f"{source}: missing column {col!r} named in by={tuple(by)}; "
                f"columns present: {', '.join(map(str, table.columns))}"
            )


def _group_label(by: Sequence[str], key: tuple) -> str:
    return ", ".join(f"{k}={v}" for k, v in zip(by, key, strict=True)) if by else "all"


def _prepare(table: pd.DataFrame, by: Sequence[str], source: str,
             required: Sequence[str] = REQUIRED) -> tuple[pd.DataFrame, list[dict]]:
    """Check columns, derive compute or tokens, drop rows that are not positive finite.

    Returns the clean frame (with `_group`) and the exclusion rows of the dropped ones.
    """
    _check_columns(table, by, source, required)
    df = table.reset_index(drop=True)  # row numbers in messages: 0-based positions
    for col in ("params", "loss", *ONE_OF):
        if col in df:
            df[col] = pd.to_numeric(df[col], errors="coerce").astype(float)
    if "compute" not in df:
        df["compute"] = 6.0 * df["params"] * df["tokens"]
    if "tokens" not in df:
        df["tokens"] = df["compute"] / (6.0 * df["params"])
    for col in by:
        df[col] = df[col].astype(object).where(df[col].notna(), "nan").astype(str)
    df["_group"] = list(zip(*(df[c] for c in by), strict=True)) if by else [()] * len(df)
    values = df[["params", "compute", "tokens", "loss"]].to_numpy(dtype=float)
    good = np.isfinite(values).all(axis=1) & (values > 0).all(axis=1)
    excluded = []
    if not good.all():
        bad = df.loc[~good]
        for key, rows in bad.groupby("_group", sort=False):
            numbers = ", ".join(str(i) for i in rows.index[:10])
            more = f" and {len(rows) - 10} more" if len(rows) > 10 else ""
            excluded.append(_exclusion(
                "input", by, key, np.nan, np.nan,
                f"{len(rows)} row(s) left out: params, compute, tokens and loss must be "
                f"positive finite numbers",
                f"{source} rows (0-based) {numbers}{more}",
            ))
    return df.loc[good].copy(), excluded


def _exclusion(method, by, key, compute, n_sizes, reason, detail="") -> dict:
    row = {"method": method, "compute": compute, "n_sizes": n_sizes, "reason": reason,
           "detail": detail}
    row.update(dict(zip(by, key, strict=True)))
    return row


def _geomean(v: np.ndarray) -> float:
    """The geometric mean; exactly the values' when they agree."""
    return float(v[0]) if (v == v[0]).all() else float(np.exp(np.log(v).mean()))


def _assign_budgets(df: pd.DataFrame, gap: float, axis: str) -> pd.DataFrame:
    """Add `_budget` (an id per group), `_budget_compute` (the budget's FLOPs as the
    table counts them) and `_axis_budget_compute` (on the compute axis: the same,
    or the geometric mean of its runs' 6 N D) to the runs."""
    df = df.copy()
    df["_budget"] = -1
    df["_budget_compute"] = np.nan
    df["_axis_budget_compute"] = np.nan
    axis_compute = (df["compute"] if axis == "counted"
                    else 6.0 * df["params"] * df["tokens"]).to_numpy()
    for _, idx in df.groupby("_group", sort=False).groups.items():
        sub = df.loc[idx]
        if "budget" in sub:
            ids = pd.factorize(sub["budget"].astype(str), sort=True)[0]
        else:
            lc = np.log10(sub["compute"].to_numpy())
            order = np.argsort(lc, kind="stable")
            ids_sorted = np.r_[0, np.cumsum(np.diff(lc[order]) > gap)]
            ids = np.empty_like(ids_sorted)
            ids[order] = ids_sorted
        budgets = np.unique(ids)
        cs, xs = sub["compute"].to_numpy(), axis_compute[df.index.get_indexer(idx)]
        computes = np.array([_geomean(cs[ids == b]) for b in budgets])
        on_axis = np.array([_geomean(xs[ids == b]) for b in budgets])
        # Budget ids in order of compute, however the labels sort.
        rank = np.empty(budgets.size, dtype=int)
        rank[np.argsort(computes, kind="stable")] = np.arange(budgets.size)
        pos = np.searchsorted(budgets, ids)
        df.loc[idx, "_budget"] = rank[pos]
        df.loc[idx, "_budget_compute"] = computes[pos]
        df.loc[idx, "_axis_budget_compute"] = on_axis[pos]
    df["_budget"] = df["_budget"].astype(int)
    return df


# --------------------------------------------------------------------------- fits of lines


def _masked_ols(X: np.ndarray, Y: np.ndarray, min_points: int = MIN_SIZES):
    """Slope and intercept of each row of Y on the same row of X (NaN in either:
    absent); NaN where a row has too few points or no spread in X."""
    X, Y = np.broadcast_arrays(np.asarray(X, dtype=float), np.asarray(Y, dtype=float))
    w = np.isfinite(X) & np.isfinite(Y)
    n = w.sum(axis=1)
    Xz, Yz = np.where(w, X, 0.0), np.where(w, Y, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        mx = Xz.sum(axis=1) / n
        my = Yz.sum(axis=1) / n
        dx = np.where(w, X - mx[:, None], 0.0)
        sxx = (dx * dx).sum(axis=1)
        slope = (dx * (Yz - my[:, None])).sum(axis=1) / sxx
        intercept = my - slope * mx
    # Points at one compute (to rounding) have no slope, only noise.
    ok = (n >= min_points) & (sxx > 1e-12 * np.maximum(n, 1))
    return np.where(ok, slope, np.nan), np.where(ok, intercept, np.nan)


def _line(lc: np.ndarray, ln: np.ndarray, ld: np.ndarray, what: str,
          min_points: int = MIN_SIZES) -> _Line:
    """N_opt = n_coef C^a and D_opt = d_coef C^b by least squares in ln space.

    lc, ln, ld: (1 + replicates, points) arrays, row 0 the data, NaN where a point
    is absent; lc may be one row shared by all (the counted axis: each point at
    its budget's compute)."""
    lc = np.broadcast_to(np.asarray(lc, dtype=float), ln.shape)
    have = np.isfinite(ln[0]) & np.isfinite(lc[0])
    k = int(np.unique(lc[0][have]).size)
    if k < min_points:
        return _Line(f"not enough {what}: {k} < {min_points}", k)
    a, ka = _masked_ols(lc, ln, min_points)
    b, kb = _masked_ols(lc, ld, min_points)
    if not np.isfinite([a[0], ka[0], b[0], kb[0]]).all():
        return _Line(f"no line through the {what}: their compute does not vary", k)
    boot = np.column_stack([a, ka, b, kb])[1:]
    boot = boot[np.isfinite(boot).all(axis=1)]
    return _Line("ok", k, float(a[0]), float(b[0]), float(np.exp(ka[0])),
                 float(np.exp(kb[0])), boot=boot)


def _budget_idx(rng, lx: np.ndarray, n_boot: int) -> np.ndarray:
    """(n_boot, n) resampled run indices of one budget, each with >= 3 distinct sizes.

    A budget with fewer distinct sizes gets the identity rows (it is refused anyway).
    """
    n = lx.size
    full = np.broadcast_to(np.arange(n), (n_boot, n))
    if np.unique(lx).size < MIN_SIZES or n_boot == 0:
        return np.array(full)
    idx = resample(rng, lx, n_boot, min_distinct=MIN_SIZES)
    if len(idx) < n_boot:  # pathological: keep the shape, pad with the data itself
        idx = np.vstack([idx, full[: n_boot - len(idx)]])
    return idx


def _counts(idx: np.ndarray, n: int) -> np.ndarray:
    """How often each of n runs is drawn in each row of idx: (rows, n) weights."""
    w = np.zeros((len(idx), n))
    np.add.at(w, (np.arange(len(idx))[:, None], idx), 1.0)
    return w


def _axis_ln(axis: str, lc_budget: float, ln: np.ndarray, ld: np.ndarray) -> np.ndarray:
    """ln C of a budget's frontier point (data and replicates) on the compute axis:
    the budget's counted compute, or 6 N D of the optimum found."""
    return np.full_like(ln, lc_budget) if axis == "counted" else np.log(6.0) + ln + ld


def _axis_compute(axis: str, C: float, x: np.ndarray) -> float:
    """The data's point on the compute axis: the budget's compute exactly, or 6 N D."""
    return C if axis == "counted" else float(np.exp(x[0]))


# --------------------------------------------------------------------------- approach 2


def _isoflop_budget(sub: pd.DataFrame, W: np.ndarray, window: float, min_sizes: int):
    """Approach 2 on one budget: the vertex of a parabola in ln N through the sizes
    around the lowest-loss one, for the data (row 0 of the run weights W) and each
    replicate (NaN where refused). Returns a dict."""
    N = sub["params"].to_numpy()
    x, y = np.log(N), sub["loss"].to_numpy()
    lt = np.log(sub["tokens"].to_numpy())
    sizes, inv = np.unique(N, return_inverse=True)
    out = {"n_sizes": int(sizes.size), "n_runs": len(sub), "ln_center": np.nan,
           "n_min": float(N.min()), "n_max": float(N.max()), "p": np.full(3, np.nan),
           "status": "ok"}
    if sizes.size < min_sizes:
        out["status"] = f"fewer than {min_sizes} sizes: {sizes.size}"
        return out
    onehot = np.eye(sizes.size)[inv]  # (runs, sizes)
    drawn = W @ onehot
    present = drawn > 0
    with np.errstate(all="ignore"):
        mean = np.where(present, ((W * y) @ onehot) / drawn, np.inf)
    best = mean.argmin(axis=1)
    rank = np.cumsum(present, axis=1) - 1  # rank among the sizes drawn
    r_best = np.take_along_axis(rank, best[:, None], 1)
    edge = (r_best[:, 0] == 0) | (r_best[:, 0] == present.sum(1) - 1)
    # The lowest-loss region: the sizes within `window` decades of the lowest-loss
    # one, and always its neighbours.
    ls = np.log(sizes)
    in_window = present & ((np.abs(ls[None] - ls[best][:, None]) <= window * LOG10 + 1e-9)
                           | (np.abs(rank - r_best) <= 1))
    lo = np.where(in_window, ls, np.inf).min(axis=1)
    hi = np.where(in_window, ls, -np.inf).max(axis=1)
    w = W * in_window[:, inv]
    center = ls[best]
    U = x[None] - center[:, None]
    S = [w.sum(1)] + [(w * U**k).sum(1) for k in range(1, 5)]
    T = [(w * U**k * y).sum(1) for k in range(3)]
    M = np.stack([np.stack([S[4], S[3], S[2]], -1), np.stack([S[3], S[2], S[1]], -1),
                  np.stack([S[2], S[1], S[0]], -1)], -2)
    M[edge] = np.eye(3)  # no parabola there (fewer than 3 sizes in some): refused below
    with np.errstate(all="ignore"):
        p2, p1, p0 = np.linalg.solve(M, np.stack([T[2], T[1], T[0]], -1)[..., None])[..., 0].T
        v = -p1 / (2 * p2)
        # ln D on ln N (a line through the window's runs) at the vertex.
        um, tm = S[1] / S[0], (w * lt).sum(1) / S[0]
        slope = (w * (U - um[:, None]) * (lt - tm[:, None])).sum(1) / (
            w * (U - um[:, None]) ** 2).sum(1)
    ln_v = center + v
    ok = ~edge & (p2 > 0) & (ln_v >= lo) & (ln_v <= hi)
    win = sizes[in_window[0]]
    out.update(ln_center=float(center[0]), n_min=float(win.min()), n_max=float(win.max()),
               p=np.array([p2[0], p1[0], p0[0]]))
    if edge[0]:
        side = "smallest" if r_best[0, 0] == 0 else "largest"
        out["status"] = (f"lowest loss at the {side} size ({sizes[best[0]]:.3g}): the vertex "
                         "is not bracketed")
        out["p"] = np.full(3, np.nan)
    elif not p2[0] > 0:
        out["status"] = f"parabola opens downward (curvature {p2[0]:.3g} <= 0)"
    elif not ok[0]:
        out["status"] = (f"vertex at N = {np.exp(ln_v[0]):.3g} lies outside the lowest-loss "
                         f"region ({np.exp(lo[0]):.3g} to {np.exp(hi[0]):.3g}, the sizes "
                         f"around {sizes[best[0]]:.3g} fitted)")
    out["ln"] = np.where(ok, ln_v, np.nan)
    out["ld"] = np.where(ok, tm + slope * (v - um), np.nan)
    out["loss"] = float(p0[0] - p1[0] ** 2 / (4 * p2[0]))
    return out


def _approach2(runs: pd.DataFrame, by, key, n_boot, rng, min_sizes, window, max_span,
               grouped_by_gap, axis):
    """Approach 2 for one group: frontier rows, exclusions, profiles, the line."""
    rows, excluded, profiles = [], [], []
    lc, ln, ld = [], [], []
    for b, sub in runs.groupby("_budget", sort=True):
        C = float(sub["_budget_compute"].iloc[0])
        span = float(np.log10(sub["compute"].max() / sub["compute"].min()))
        n = len(sub)
        if grouped_by_gap and span > max_span:
            n_sizes = int(sub["params"].nunique())
            reason = (f"compute spans {span:.3f} decades > max_span {max_span}: "
                      "not one budget")
            excluded.append(_exclusion("approach2", by, key, C, n_sizes, reason,
                                       f"budget {b}: {n} runs"))
            profiles.append({"budget": b, "compute": C, "n_runs": n, "n_sizes": n_sizes,
                             "status": reason})
            continue
        lx = np.log(sub["params"].to_numpy())
        W = _counts(np.vstack([np.arange(n)[None], _budget_idx(rng, lx, n_boot)]), n)
        res = _isoflop_budget(sub, W, window, min_sizes)
        prof = {"budget": b, "compute": C, "n_runs": res["n_runs"], "n_sizes": res["n_sizes"],
                "ln_center": res["ln_center"], "p2": res["p"][0], "p1": res["p"][1],
                "p0": res["p"][2], "n_min": res["n_min"], "n_max": res["n_max"],
                "status": res["status"]}
        if res["status"] != "ok":
            excluded.append(_exclusion("approach2", by, key, C, res["n_sizes"], res["status"],
                                       f"budget {b}: {n} runs"))
            profiles.append(prof)
            continue
        x = _axis_ln(axis, np.log(C), res["ln"], res["ld"])
        n_opt = float(np.exp(res["ln"][0]))
        prof.update(n_opt=n_opt, loss_opt=res["loss"])
        profiles.append(prof)
        rows.append({"method": "approach2", "compute": _axis_compute(axis, C, x),
                     "n_opt": n_opt,
                     "d_opt": float(np.exp(res["ld"][0])), "loss_opt": res["loss"],
                     "n_sizes": res["n_sizes"]})
        lc.append(x)
        ln.append(res["ln"])
        ld.append(res["ld"])
    what = "budgets with a bracketed vertex"
    if not lc:
        return rows, excluded, profiles, _Line(f"not enough {what}: 0 < {MIN_SIZES}", 0)
    line = _line(np.array(lc).T, np.array(ln).T, np.array(ld).T, what)
    return rows, excluded, profiles, line


# --------------------------------------------------------------------------- approach 1


def _edge_reason(which: str, n: float) -> str:
    side = "smallest" if which == "min" else "largest"
    return (f"lowest loss at the {side} size available ({n:.3g}): "
            "the optimum may lie beyond the sizes tried")


def _approach1_final(runs: pd.DataFrame, by, key, n_boot, rng, max_span, grouped_by_gap,
                     axis):
    """Approach 1 from final points: per budget, the run with the lowest loss."""
    rows, excluded = [], []
    lc, ln, ld = [], [], []
    for b, sub in runs.groupby("_budget", sort=True):
        C = float(sub["_budget_compute"].iloc[0])
        N = sub["params"].to_numpy()
        n_sizes = int(np.unique(N).size)
        span = float(np.log10(sub["compute"].max() / sub["compute"].min()))
        detail = f"budget {b}: {len(sub)} runs"
        if grouped_by_gap and span > max_span:
            excluded.append(_exclusion("approach1", by, key, C, n_sizes,
                                       f"compute spans {span:.3f} decades > max_span "
                                       f"{max_span}: not one budget", detail))
            continue
        if n_sizes < MIN_SIZES:
            excluded.append(_exclusion("approach1", by, key, C, n_sizes,
                                       f"fewer than {MIN_SIZES} sizes: {n_sizes}", detail))
            continue
        lx = np.log(N)
        idx = np.vstack([np.arange(len(sub))[None], _budget_idx(rng, lx, n_boot)])
        L = sub["loss"].to_numpy()[idx]
        best = np.take_along_axis(idx, L.argmin(1)[:, None], 1)[:, 0]
        Nb = N[best]
        lo, hi = N[idx].min(1), N[idx].max(1)
        ok = (Nb > lo) & (Nb < hi)
        if not ok[0]:
            which = "min" if Nb[0] <= lo[0] else "max"
            excluded.append(_exclusion("approach1", by, key, C, n_sizes,
                                       _edge_reason(which, Nb[0]), detail))
            continue
        lnb = np.where(ok, np.log(Nb), np.nan)
        lt = np.where(ok, np.log(sub["tokens"].to_numpy())[best], np.nan)
        x = _axis_ln(axis, np.log(C), lnb, lt)
        rows.append({"method": "approach1", "compute": _axis_compute(axis, C, x),
                     "n_opt": float(Nb[0]), "d_opt": float(np.exp(lt[0])),
                     "loss_opt": float(L[0].min()), "n_sizes": n_sizes})
        lc.append(x)
        ln.append(lnb)
        ld.append(lt)
    what = "budgets with a bracketed lowest loss"
    if not lc:
        return rows, excluded, _Line(f"not enough {what}: 0 < {MIN_SIZES}", 0)
    return rows, excluded, _line(np.array(lc).T, np.array(ln).T, np.array(ld).T, what)


def _curve_matrix(curves: pd.DataFrame, grid_lc: np.ndarray):
    """Per run: its size, and its loss and ln tokens at each grid ln C (NaN outside
    the span its curve covers), interpolated linearly in ln C."""
    sizes, losses, ltoks = [], [], []
    for _, c in curves.groupby("run", sort=True):
        c = c.sort_values("compute")
        lcr = np.log(c["compute"].to_numpy())
        inside = (grid_lc >= lcr[0]) & (grid_lc <= lcr[-1])
        loss = np.interp(grid_lc, lcr, c["loss"].to_numpy())
        lt = np.interp(grid_lc, lcr, np.log(c["tokens"].to_numpy()))
        sizes.append(float(c["params"].iloc[0]))
        losses.append(np.where(inside, loss, np.nan))
        ltoks.append(np.where(inside, lt, np.nan))
    return np.array(sizes), np.array(losses), np.array(ltoks)


def _approach1_curves(curves: pd.DataFrame, by, key, n_boot, rng, n_grid):
    """Approach 1 from per-step curves: the envelope on a log grid of compute (the
    curves' compute is already on the compute axis)."""
    final = curves.groupby("run")["compute"].max()
    if len(final) < MIN_SIZES:
        line = _Line(f"not enough runs with curves: {len(final)} < {MIN_SIZES}", 0)
        return [], [], line
    if np.log10(final.max() / final.min()) < 1e-9:
        return [], [], _Line(f"the curves all end at one compute ({final.max():.3g} FLOPs): "
                             "no range of compute to fit", 0)
    grid_lc = np.linspace(np.log(final.min()), np.log(final.max()), n_grid)
    N, M, T = _curve_matrix(curves, grid_lc)
    R = len(N)
    present = np.ones((1, R), dtype=bool)
    if n_boot > 0:
        draws = rng.integers(0, R, size=(n_boot, R))
        counts = np.zeros((n_boot, R), dtype=int)
        np.add.at(counts, (np.arange(n_boot)[:, None], draws), 1)
        present = np.vstack([present, counts > 0])
    covered = present[:, :, None] & np.isfinite(M)[None]  # (k, R, G)
    Lm = np.where(covered, M[None], np.inf)
    win = Lm.argmin(1)  # (k, G)
    any_cov = covered.any(1)
    Nwin = N[win]
    # The smallest and largest sizes whose curves cover each grid point.
    lo = np.where(covered, N[None, :, None], np.inf).min(1)
    hi = np.where(covered, N[None, :, None], -np.inf).max(1)
    ok = any_cov & (Nwin > lo) & (Nwin < hi)
    ln = np.where(ok, np.log(Nwin), np.nan)
    ld = np.where(ok, np.take_along_axis(np.broadcast_to(T, (len(win), *T.shape)),
                                         win[:, None, :], 1)[:, 0], np.nan)
    n_cov = covered.sum(1)
    rows, excluded = [], []
    for g, lcg in enumerate(grid_lc):
        C = float(np.exp(lcg))
        n_sizes = int(np.unique(N[covered[0, :, g]]).size)
        if ok[0, g]:
            rows.append({"method": "approach1", "compute": C, "n_opt": float(Nwin[0, g]),
                         "d_opt": float(np.exp(ld[0, g])), "loss_opt": float(Lm[0, win[0, g], g]),
                         "n_sizes": n_sizes})
        elif n_cov[0, g] == 0:
            excluded.append(_exclusion("approach1", by, key, C, 0,
                                       "no run's curve covers this compute"))
        else:
            which = "min" if Nwin[0, g] <= lo[0, g] else "max"
            excluded.append(_exclusion("approach1", by, key, C, n_sizes,
                                       _edge_reason(which, Nwin[0, g]), "curves grid point"))
    line = _line(grid_lc[None], ln, ld, "compute points with a bracketed lowest loss")
    return rows, excluded, line


# --------------------------------------------------------------------------- approach 3


def _cost_model(runs: pd.DataFrame, axis: str) -> tuple[np.ndarray, np.ndarray]:
    """The FLOPs a token costs at each size, as knots (ln N, ln FLOPs per token) of a
    piecewise-linear function of ln N (extended beyond the end sizes by the end
    segments' slopes): 6 N on the 6ND axis; on the counted axis each size's mean
    ln(compute / tokens) over its runs."""
    if axis == "6nd":
        return np.array([0.0, 1.0]), np.log(6.0) + np.array([0.0, 1.0])
    per = (np.log(runs["compute"]) - np.log(runs["tokens"])).groupby(runs["params"]).mean()
    return np.log(per.index.to_numpy(dtype=float)), per.to_numpy(dtype=float)


def _theta(fit: ChinchillaFit) -> np.ndarray:
    """(ln A, ln B, ln E, alpha, beta) of a fit; a coefficient fitted to 0 as
    e^-700, so that the optimiser and the optimum see a finite number."""
    with np.errstate(divide="ignore"):
        logs = np.maximum(np.log([fit.A, fit.B, fit.E]), -700.0)
    return np.r_[logs, fit.alpha, fit.beta]


def _chin_optimum(theta: np.ndarray, C: np.ndarray, cost):
    """N_opt, D_opt and the loss there for parameter rows theta (k, 5) at compute C (m,).

    theta = (ln A, ln B, ln E, alpha, beta); cost: `_cost_model`'s knots. On each
    segment of the cost model, where ln(FLOPs per token) = g0 + gamma (ln N - x0),
    the loss along the budget is convex in ln N with its minimum in closed form
    (gamma = 1 with g0 = ln 6 is Hoffmann et al.'s C = 6 N D); each segment's
    minimum is clipped to the segment and the lowest of them taken. Returns three
    (k, m) arrays.
    """
    la, lb, le, al, be = (theta[:, i, None, None] for i in range(5))
    kx, kg = cost
    gamma = np.diff(kg) / np.diff(kx)
    x0, g0 = kx[:-1], kg[:-1]
    seg_lo, seg_hi = np.r_[-np.inf, kx[1:-1]], np.r_[kx[1:-1], np.inf]
    lc = np.log(np.asarray(C, dtype=float))[None, :, None]
    with np.errstate(all="ignore"):
        ln = (np.log(al) + la - np.log(be * gamma) - lb + be * lc - be * (g0 - gamma * x0)) / (
            al + be * gamma)
        ln = np.clip(ln, seg_lo, seg_hi)
        ld = lc - g0 - gamma * (ln - x0)
        loss = np.exp(le) + np.exp(la - al * ln) + np.exp(lb - be * ld)
    j = np.nan_to_num(loss, nan=np.inf).argmin(-1)[..., None]
    ln, ld, loss = (np.take_along_axis(v, j, -1)[..., 0] for v in (ln, ld, loss))
    return np.exp(ln), np.exp(ld), loss


def _polish_tight(model: HuberPowerLaw, start: np.ndarray):
    """L-BFGS-B from `start` to tight tolerances (ftol 1e-15, gtol 1e-12).

    scipy's defaults (gtol 1e-5) stop a refit started at the full-data optimum
    after a few steps when the Huber objective is small (low-noise data): on the
    synthetic surface of tests/test_frontier.py with 0.3% noise, 200 refits gave
    the interval 0.4475-0.4486 for a with the defaults against 0.4389-0.4617 with
    these tolerances (which covers the true 0.4516). With them the refit from
    the full-data optimum reached the objective of a refit from the best start of a
    coarse 3^5 grid (a, b in 0, 10, 20; e in -1, 0, 1; alpha, beta in 0.25, 0.75,
    1.5) in 49 of 50 resamples (the other: 1e-6 lower, a within 2e-5),
    at a fifth of the cost, so the refits start from the full-data optimum alone.
    """
    return minimize(model.fun_grad, start, jac=True, method="L-BFGS-B",
                    options={"ftol": 1e-15, "gtol": 1e-12, "maxiter": 2000})


def _approach3(runs: pd.DataFrame, n_boot, rng, n_polish, axis, delta=1e-3):
    """Approach 3 for one group: fit_chinchilla, then bootstrap refits of the runs."""
    N, D, L = (runs[c].to_numpy() for c in ("params", "tokens", "loss"))
    k_n, k_d = np.unique(N).size, np.unique(D).size
    budgets = np.sort(runs.groupby("_budget")["_axis_budget_compute"].first().to_numpy())
    if k_n < MIN_SIZES or k_d < MIN_SIZES:
        status = (f"not enough sizes or token counts for L(N, D): {k_n} sizes, {k_d} token "
                  f"counts (>= {MIN_SIZES} each)")
        return _Line(status, len(runs))
    if budgets.size < 2:
        return _Line("one budget: on one IsoFLOP line N and D move together, so L(N, D) "
                     "cannot tell their effects apart", len(runs))
    cost = _cost_model(runs, axis)
    if not (np.diff(cost[1]) > 0).all():
        return _Line("counted FLOPs per token do not grow with N between some sizes: "
                     "no compute-optimal size", len(runs))
    fit = fit_chinchilla(N, D, L, delta=delta, n_polish=n_polish)
    # Polished on to tight tolerances, as the bootstrap refits are (`_polish_tight`).
    logx = np.column_stack([np.log(N), np.log(D)])
    logy = np.log(L)
    start = _theta(fit)
    with one_blas_thread():
        res = _polish_tight(HuberPowerLaw(logx, logy, delta), start)
    if res.fun <= fit.loss:
        la, lb, le, al, be = res.x
        fit = ChinchillaFit(A=float(np.exp(la)), B=float(np.exp(lb)), E=float(np.exp(le)),
                            alpha=float(al), beta=float(be), loss=float(res.fun),
                            n_points=fit.n_points)
    if not (fit.alpha > 0 and fit.beta > 0):
        return _Line(f"fitted alpha = {fit.alpha:.3g}, beta = {fit.beta:.3g}: not both "
                     "positive, so no compute-optimal frontier", len(runs), chin=fit)
    theta = _theta(fit)
    reps = np.empty((0, 5))
    if n_boot > 0:
        idx = resample(rng, logx[:, 0], n_boot, min_distinct=MIN_SIZES)
        idx = idx[[np.unique(D[r]).size >= MIN_SIZES for r in idx]]
        fitted = []
        with one_blas_thread():
            for r in idx:
                w = np.bincount(r, minlength=len(L)).astype(float)
                model = HuberPowerLaw(logx, logy, delta, weights=w)
                fitted.append(_polish_tight(model, theta).x)
        # (a, b, e, alpha, beta) -> (ln A, ln B, ln E, alpha, beta): the same numbers.
        reps = np.array(fitted).reshape(-1, 5)
        reps = reps[(reps[:, 3] > 0) & (reps[:, 4] > 0)]
    # a and b: the slopes of ln N_opt and ln D_opt over the group's budgets, as
    # approaches 1-2 fit theirs (exactly beta/(alpha+beta) on the 6ND axis).
    n_opt, d_opt, _ = _chin_optimum(np.vstack([theta[None], reps]), budgets, cost)
    lc = np.log(budgets)[None]
    line = _line(lc, np.log(n_opt), np.log(d_opt), "budgets", min_points=2)
    line.n_points = len(runs)
    line.chin, line.cost, line.chin_boot = fit, cost, reps
    return line


# --------------------------------------------------------------------------- tables


def _interval(samples: np.ndarray, ci: float, method: str, line: _Line):
    """A bootstrap interval: approach 2's expanded by t / z at budgets - 2 degrees of
    freedom (the line through its vertices; the module docstring says why), the
    others' percentile."""
    if method == "approach2":
        return expanded_ci(samples, ci, line.n_points - 2)
    return percentile_ci(samples, ci)


def _predict(line: _Line, method: str, C: np.ndarray, ci: float):
    """Point estimates and bootstrap intervals of N_opt, D_opt, loss_opt at C (m,)."""
    m = C.size
    nan = np.full(m, np.nan)
    out = {k: nan.copy() for k in ("n", "n_low", "n_high", "d", "d_low", "d_high",
                                   "loss", "loss_low", "loss_high")}
    if line.status != "ok":
        return out
    lc = np.log(C)
    if method == "approach3":
        n, d, loss = (v[0] for v in _chin_optimum(_theta(line.chin)[None], C, line.cost))
        out.update(n=n, d=d, loss=loss)
        if line.chin_boot is not None and len(line.chin_boot):
            nb, db, lb = _chin_optimum(line.chin_boot, C, line.cost)
            for name, arr in (("n", nb), ("d", db), ("loss", lb)):
                q = np.array([percentile_ci(arr[:, j], ci) for j in range(m)])
                out[f"{name}_low"], out[f"{name}_high"] = q[:, 0], q[:, 1]
        return out
    out["n"] = line.n_coef * C**line.a
    out["d"] = line.d_coef * C**line.b
    if line.boot is not None and len(line.boot):
        bt = line.boot
        for name, s, i in (("n", 0, 1), ("d", 2, 3)):
            arr = bt[:, i:i + 1] + bt[:, s:s + 1] * lc[None]  # ln N_opt, ln D_opt
            q = np.exp([_interval(arr[:, j], ci, method, line) for j in range(m)])
            out[f"{name}_low"], out[f"{name}_high"] = q[:, 0], q[:, 1]
    return out


def _fit_rows(line: _Line, method: str, by, key, predict: np.ndarray, n_boot: int,
              ci: float) -> list[dict]:
    base = {"method": method, **dict(zip(by, key, strict=True)), "status": line.status,
            "n_points": line.n_points, "a": line.a, "b": line.b, "n_coef": line.n_coef,
            "d_coef": line.d_coef, "n_boot": n_boot, "ci": ci}
    for name, col in (("a", 0), ("b", 2)):
        lo = hi = np.nan
        if line.boot is not None and len(line.boot):
            lo, hi = _interval(line.boot[:, col], ci, method, line)
        base[f"{name}_low"], base[f"{name}_high"] = lo, hi
    base["n_boot_used"] = 0 if line.boot is None else len(line.boot)
    f = line.chin
    for col, name in LOSS_PARAMETERS.items():
        base[col] = getattr(f, name) if (f is not None and method == "approach3") else np.nan
    if predict.size == 0:
        return [{**base, "predict_compute": np.nan}]
    p = _predict(line, method, predict, ci)
    rows = []
    for j, C in enumerate(predict):
        row = {**base, "predict_compute": float(C)}
        for name in ("n", "d", "loss"):
            row[f"{name}_opt_pred"] = p[name][j]
            row[f"{name}_opt_low"] = p[f"{name}_low"][j]
            row[f"{name}_opt_high"] = p[f"{name}_high"][j]
        rows.append(row)
    return rows


def _band_rows(line: _Line, method: str, by, key, C: np.ndarray, ci: float) -> list[dict]:
    if line.status != "ok":
        return []
    p = _predict(line, method, C, ci)
    rows = []
    for j, c in enumerate(C):
        rows.append({"method": method, **dict(zip(by, key, strict=True)), "compute": float(c),
                     "n_opt": p["n"][j], "n_low": p["n_low"][j], "n_high": p["n_high"][j],
                     "d_opt": p["d"][j], "d_low": p["d_low"][j], "d_high": p["d_high"][j],
                     "loss_opt": p["loss"][j], "loss_low": p["loss_low"][j],
                     "loss_high": p["loss_high"][j]})
    return rows


def _frame(rows: list[dict], columns: list[str], by: Sequence[str]) -> pd.DataFrame:
    cols = [columns[0], *by, *[c for c in columns[1:] if c not in by]]
    return pd.DataFrame(rows, columns=cols)


def _out_by(by: Sequence[str]) -> tuple[str, ...]:
    """The group columns of the outputs: `by`, with arch first (always present)."""
    return ("arch", *[c for c in by if c != "arch"])


# --------------------------------------------------------------------------- main entry


def frontier(
    table,
    out_dir=None,
    predict: Iterable[float] = (),
    by: Sequence[str] | None = None,
    *,
    curves=None,
    n_boot: int = 200,
    ci: float = 0.95,
    seed: int = 0,
    budget_gap: float = 0.02,
    max_span: float = 0.1,
    min_sizes: int = MIN_SIZES,
    window: float = 1.0,
    compute_axis: str = "counted",
    n_polish: int | None = 256,
    n_grid: int = 40,
    methods: Sequence[str] = METHODS,
    figures: bool = True,
    loss_label: str = "loss (nats/token)",
    quiet: bool = False,
) -> FrontierResult:
    """The compute-optimal frontier of a runs table by Hoffmann et al.'s approaches 1-3.

    `table`: a DataFrame or the path of a CSV/Parquet file (columns in the module
    docstring). `curves`: optional per-step curves for approach 1 (DataFrame or
    path; columns run, params, loss, compute and/or tokens, and the `by` columns);
    without them approach 1 uses the final points. `by`: the group columns (default:
    arch and prior, those present). `predict`: compute budgets (FLOPs) at which each
    fit predicts N_opt and D_opt. `min_sizes`: the sizes an IsoFLOP budget needs
    for approach 2 (at least 3); `window`: approach 2 fits its parabola on the
    sizes within this many decades of the lowest-loss one (and always its
    neighbours). `compute_axis`: "counted" (the table's compute) or "6nd"
    (C = 6 N D), the C of every approach's N_opt ~ C^a. With `out_dir`, writes
    the tables and (with `figures`) the figures there, atomically; without it,
    writes nothing. Every budget or point left out is in `excluded` and (unless
    `quiet`) printed to stderr.
    """
    source = str(table) if not isinstance(table, pd.DataFrame) else "table"
    if not isinstance(table, pd.DataFrame):
        table = read_table(table)
    by = _default_by(table) if by is None else tuple(by)
    for m in methods:
        if m not in METHODS:
            raise ValueError(f"methods: got {m!r}, accepted values: {', '.join(METHODS)}")
    predict = np.asarray(list(predict), dtype=float).ravel()
    if predict.size and not (np.isfinite(predict) & (predict > 0)).all():
        raise ValueError(f"predict: compute budgets must be positive FLOPs, got {predict}")
    if n_boot < 0:
        raise ValueError(f"n_boot: got {n_boot}, must be >= 0")
    if min_sizes < MIN_SIZES:
        raise ValueError(f"min_sizes: got {min_sizes}, a parabola needs >= {MIN_SIZES}")
    if not window > 0:
        raise ValueError(f"window: got {window}, must be > 0 decades")
    if compute_axis not in COMPUTE_AXES:
        raise ValueError(f"compute_axis: got {compute_axis!r}, accepted values: "
                         f"{', '.join(COMPUTE_AXES)}")
    runs, excluded = _prepare(table, by, source)
    if runs.empty:
        raise ValueError(f"{source}: no row with positive finite params, compute, tokens "
                         "and loss")
    curve_df = None
    if curves is not None:
        csource = str(curves) if not isinstance(curves, pd.DataFrame) else "curves"
        if not isinstance(curves, pd.DataFrame):
            curves = read_table(curves)
        curve_df, cexcl = _prepare(curves, by, csource, CURVE_REQUIRED)
        excluded += cexcl
        if compute_axis == "6nd":
            curve_df["compute"] = 6.0 * curve_df["params"] * curve_df["tokens"]
    runs = _assign_budgets(runs, budget_gap, compute_axis)
    grouped_by_gap = "budget" not in runs

    obys = _out_by(by)
    frontier_rows, fit_rows, band_rows, profile_rows = [], [], [], []
    replicates = {}
    groups = list(runs.groupby("_group", sort=True))
    for gi, (key, sub) in enumerate(groups):
        keyd = dict(zip(by, key, strict=True))
        okey = tuple(keyd.get(c, "all") for c in obys)
        lines = {}
        rngs = {m: np.random.default_rng([seed, gi, i]) for i, m in enumerate(METHODS)}
        if "approach1" in methods:
            if curve_df is not None:
                cur = curve_df[curve_df["_group"].map(lambda g, k=key: g == k)]
                r, e, line = _approach1_curves(cur, obys, okey, n_boot, rngs["approach1"],
                                               n_grid)
            else:
                r, e, line = _approach1_final(sub, obys, okey, n_boot, rngs["approach1"],
                                              max_span, grouped_by_gap, compute_axis)
            frontier_rows += [{**dict(zip(obys, okey, strict=True)), **x} for x in r]
            excluded += e
            lines["approach1"] = line
        budget_cs = np.sort(sub["_axis_budget_compute"].unique())
        if "approach2" in methods:
            r, e, prof, line = _approach2(sub, obys, okey, n_boot, rngs["approach2"],
                                          min_sizes, window, max_span, grouped_by_gap,
                                          compute_axis)
            frontier_rows += [{**dict(zip(obys, okey, strict=True)), **x} for x in r]
            excluded += e
            profile_rows += [{**dict(zip(obys, okey, strict=True)), **x} for x in prof]
            lines["approach2"] = line
        if "approach3" in methods:
            line = _approach3(sub, n_boot, rngs["approach3"], n_polish, compute_axis)
            lines["approach3"] = line
            if line.status == "ok":
                p = _predict(line, "approach3", budget_cs, ci)
                for j, C in enumerate(budget_cs):
                    frontier_rows.append({**dict(zip(obys, okey, strict=True)),
                                          "method": "approach3", "compute": float(C),
                                          "n_opt": p["n"][j], "d_opt": p["d"][j],
                                          "loss_opt": p["loss"][j], "n_sizes": np.nan})
            else:
                excluded.append(_exclusion("approach3", obys, okey, np.nan,
                                           int(sub["params"].nunique()), line.status))
        # The bands: from the smallest compute point to a decade past the largest.
        pts = [x["compute"] for x in frontier_rows if tuple(x[c] for c in obys) == okey]
        lo_c = min(pts + list(budget_cs))
        hi_c = max(pts + list(budget_cs)) * 10**EXTRAPOLATE_DECADES
        if predict.size:
            lo_c, hi_c = min(lo_c, predict.min()), max(hi_c, predict.max())
        band_c = np.geomspace(lo_c, hi_c, 60)
        for m in methods:
            fit_rows += _fit_rows(lines[m], m, obys, okey, predict, n_boot, ci)
            if lines[m].status == "ok" and lines[m].boot is not None:
                replicates[(m, *okey)] = lines[m].boot[:, 0]
            band_rows += _band_rows(lines[m], m, obys, okey, band_c, ci)
            if lines[m].status != "ok" and m != "approach3":
                excluded.append(_exclusion(m, obys, okey, np.nan, np.nan,
                                           f"no fit: {lines[m].status}"))

    # Input exclusions carry the `by` columns; give them arch too.
    excluded = [{**{c: "all" for c in obys}, **x} for x in excluded]
    result = FrontierResult(
        frontier=_frame(frontier_rows, FRONTIER_COLUMNS, obys).assign(compute_axis=compute_axis),
        fits=_frame(fit_rows, FITS_COLUMNS, obys).assign(compute_axis=compute_axis),
        excluded=_frame(excluded, EXCLUDED_COLUMNS, obys),
        bands=_frame(band_rows, BANDS_COLUMNS, obys).assign(compute_axis=compute_axis),
        profiles=_frame(profile_rows, ["budget", *PROFILE_COLUMNS[1:]], obys),
        # Output group columns not grouped by (arch, when by omits it) read "all".
        runs=runs.assign(**{c: "all" for c in obys if c not in by}),
        by=obys,
        compute_axis=compute_axis,
        loss_label=loss_label,
        exponent_replicates=replicates,
    )
    if not quiet:
        for line in excluded_lines(result):
            print(line, file=sys.stderr)
    if out_dir is not None:
        with naming(out_dir):  # a full disk: one message naming the directory
            result.paths = _write(result, Path(out_dir), figures)
    return result


def excluded_lines(result: FrontierResult) -> list[str]:
    """One message per exclusion (compute-grid points of one reason together)."""
    lines = []
    ex = result.excluded
    if ex.empty:
        return lines
    keys = ["method", *result.by, "reason"]
    for k, rows in ex.groupby(keys, sort=False, dropna=False):
        method, *group, reason = k
        label = ", ".join(f"{c}={v}" for c, v in zip(result.by, group, strict=True))
        cs = rows["compute"].dropna()
        if len(rows) == 1:
            where = f"budget {cs.iloc[0]:.3g} FLOPs" if len(cs) else ""
            sizes = rows["n_sizes"].iloc[0]
            if np.isfinite(sizes) and where:
                where += f" ({int(sizes)} sizes)"
        else:
            what = ("compute grid points" if rows["detail"].eq("curves grid point").all()
                    else "budgets")
            where = (f"{len(rows)} {what} {cs.min():.3g} to {cs.max():.3g} FLOPs"
                     if len(cs) else f"{len(rows)} items")
        lines.append(f"frontier: left out: {method}, {label}"
                     + (f", {where}" if where else "") + f": {reason}")
    return lines


# --------------------------------------------------------------------------- writing

OUTPUT_TABLES = {
    "frontier.csv": "frontier",
    "frontier_fits.csv": "fits",
    "excluded.csv": "excluded",
    "frontier_bands.csv": "bands",
    "frontier_profiles.csv": "profiles",
}


def _write(result: FrontierResult, out_dir: Path, figures: bool) -> list[Path]:
    """Render every output into a temporary directory beside `out_dir`, then rename
    each file into `out_dir`; on any error remove the temporary directory (and
    `out_dir` if this call created it), leaving nothing partial behind."""
    out_dir = Path(out_dir)
    parent = out_dir.resolve().parent
    parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=parent, prefix=f".{out_dir.name}.", suffix=".tmp"))
    created = not out_dir.exists()
    try:
        names = []
        for name, attr in OUTPUT_TABLES.items():
            getattr(result, attr).to_csv(tmp / name, index=False)
            names.append(name)
        if figures:
            from . import frontier_figures  # matplotlib only when drawing

            names += [p.name for p in frontier_figures.render(result, tmp)]
        out_dir.mkdir(parents=True, exist_ok=True)
        mode = default_file_mode()
        paths = []
        for name in names:
            os.chmod(tmp / name, mode)
            os.replace(tmp / name, out_dir / name)
            paths.append(out_dir / name)
        return paths
    except BaseException:
        if created and out_dir.exists():
            shutil.rmtree(out_dir, ignore_errors=True)
        raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# --------------------------------------------------------------------------- CLI


def run(args) -> None:
    """`scalestudy frontier`: fit, write, and print each method's exponents."""
    result = frontier(
        args.table, args.out_dir, predict=args.predict, by=args.by, curves=args.curves,
        n_boot=args.n_boot, ci=args.ci, seed=args.seed, budget_gap=args.budget_gap,
        max_span=args.max_span, min_sizes=args.min_sizes, window=args.window,
        compute_axis=args.compute_axis, n_polish=args.n_polish,
        figures=not args.no_figures, loss_label=args.loss_label,
    )
    ok = result.fits.drop_duplicates(["method", *result.by])
    print(f"compute axis: {AXIS_LABELS[result.compute_axis]}")
    for row in ok.itertuples(index=False):
        group = ", ".join(f"{c}={getattr(row, c)}" for c in result.by)
        if row.status == "ok":
            print(f"{row.method} ({group}): a = {row.a:.3f} [{row.a_low:.3f}, {row.a_high:.3f}]"
                  f", b = {row.b:.3f} [{row.b_low:.3f}, {row.b_high:.3f}]")
        else:
            print(f"{row.method} ({group}): {row.status}")
    print(f"wrote {len(result.paths)} files to {args.out_dir}")


def main(argv: Sequence[str] | None = None) -> int:
    """`scalestudy frontier TABLE --out-dir D [--predict C ...]`; 0 on success, 2 on
    bad input (the message on stderr, nothing written)."""
    from ..commands import run_command

    return run_command(["frontier", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
