"""The compute-optimal frontier: N_opt(C) and D_opt(C) by Hoffmann et al.'s three approaches.

Hoffmann et al. 2022, "Training Compute-Optimal Large Language Models" (Chinchilla),
estimate how the loss-minimising model size N_opt and token count D_opt grow with
the compute budget C (FLOPs, C = 6 N D) in three ways, each giving N_opt ∝ C^a and
D_opt ∝ C^b. This module does the same for any table of runs, per architecture
(and prior), numpy/scipy/pandas only (no torch; matplotlib only inside the
figures module, imported when figures are drawn).

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
  by a least-squares parabola; its vertex is N_opt(C); D_opt is the budget's
  ln D against ln N (a line) at the vertex, which is C / (6 N_opt) when
  C = 6 N D. A budget is left out with its reason, never fitted, when it has
  fewer than `min_sizes` (3) distinct sizes, when its parabola opens downward
  (curvature <= 0: no minimum), when its vertex lies outside the sizes tried
  (an extrapolated optimum), or, grouped without a `budget` column, when its
  compute spans more than `max_span` decades (not one budget). Faithful: the
  parabola in log N and the vertex. Simplified: Hoffmann et al. take each run's
  final loss after smoothing its curve; here each run's final loss is taken as
  given. The parabola is an approximation of the true profile, which
  is asymmetric in ln N (alpha != beta), so the vertex has a bias that depends on
  where the sizes sit around the optimum.
- Approach 3, the parametric loss (section 3.3): L(N, D) = E + A/N^alpha + B/D^beta
  by `scaling.fit_chinchilla` (Huber loss, delta 1e-3, on log L; L-BFGS-B from the
  replication grid of Besiroglu et al. 2024), then N_opt = G (C/6)^a, D_opt =
  G^-1 (C/6)^b with a = beta/(alpha+beta), b = alpha/(alpha+beta),
  G = (alpha A / (beta B))^(1/(alpha+beta)), and the loss at the optimum
  L(N_opt, D_opt). Faithful: the objective, the grid and the closed form.
  Simplified: `n_polish` (default 256) runs L-BFGS-B only from the best grid starts
  (scaling.fit_chinchilla's docstring: the same optimum as all 4,500 on the
  Epoch data), the optimum is polished on to tight tolerances, and each bootstrap
  refit runs L-BFGS-B from the full-data optimum alone (`_polish_tight` says why),
  not from the full grid.

Intervals are percentile bootstraps (`n_boot` replicates, default 200, at `ci`,
default 0.95) over runs: approach 1 resamples the runs (curves: whole curves;
final points: runs within each budget), approach 2 the runs within each budget
(resamples with fewer than 3 distinct sizes redrawn; a budget whose refitted
parabola is refused in a replicate is absent from that replicate's line), and
approach 3 all runs of the group, refitted. A replicate with fewer than 3 compute
points left is dropped; `n_boot_used` counts the rest. Hoffmann et al. bootstrap
too (their Table 2 gives 10th-90th percentiles); the resampling units are ours.

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
  least), compute, n_opt, d_opt, loss_opt (approach 1: the lowest loss; 2: the
  parabola's minimum; 3: L(N_opt, D_opt)), n_sizes (sizes behind the point; NaN
  for approach 3).
- `frontier_fits.csv`: one row per method, group and `--predict` budget (one row
  per method and group, predict columns empty, without `--predict`):
  `FITS_COLUMNS` = method, by columns, status ("ok" or why not), n_points (compute
  points of approaches 1-2, runs of approach 3), a, a_low, a_high, b, b_low,
  b_high, n_coef, d_coef (N_opt = n_coef C^a, D_opt = d_coef C^b), alpha, beta,
  E, A, B (approach 3 only), n_boot, n_boot_used, ci, predict_compute,
  n_opt_pred, n_opt_low, n_opt_high, d_opt_pred, d_opt_low, d_opt_high,
  loss_opt_pred, loss_opt_low, loss_opt_high (the loss at the optimum: approach 3
  only, NaN otherwise).
- `excluded.csv`: `EXCLUDED_COLUMNS` = method, by columns, compute, n_sizes,
  reason, detail: every input row, budget or compute point left out, and why.
- `frontier_bands.csv`: `BANDS_COLUMNS`: each ok fit's N_opt, D_opt (and for
  approach 3 the loss) with bootstrap band on a log grid of C from the smallest
  compute point to ten times the largest (and any `--predict` budget beyond): the
  figures' lines.
- `frontier_profiles.csv`: `PROFILE_COLUMNS`: each budget's parabola
  loss = p2 u^2 + p1 u + p0 in u = ln N - ln_center, with its status (p NaN
  where no parabola was fitted: too few sizes, or not one budget).
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
from .stats import percentile_ci, resample

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

FRONTIER_COLUMNS = ["method", "compute", "n_opt", "d_opt", "loss_opt", "n_sizes"]
FITS_COLUMNS = [
    "method", "status", "n_points", "a", "a_low", "a_high", "b", "b_low", "b_high",
    "n_coef", "d_coef", "alpha", "beta", "E", "A", "B", "n_boot", "n_boot_used", "ci",
    "predict_compute", "n_opt_pred", "n_opt_low", "n_opt_high", "d_opt_pred", "d_opt_low",
    "d_opt_high", "loss_opt_pred", "loss_opt_low", "loss_opt_high",
]
EXCLUDED_COLUMNS = ["method", "compute", "n_sizes", "reason", "detail"]
BANDS_COLUMNS = ["method", "compute", "n_opt", "n_low", "n_high", "d_opt", "d_low", "d_high",
                 "loss_opt", "loss_low", "loss_high"]
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
    `_budget` (budget id within the group) and `_budget_compute` added.
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


def _assign_budgets(df: pd.DataFrame, gap: float) -> pd.DataFrame:
    """Add `_budget` (an id per group) and `_budget_compute` (FLOPs) to the runs."""
    df = df.copy()
    df["_budget"] = -1
    df["_budget_compute"] = np.nan
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
        computes = np.empty(budgets.size)
        for j, b in enumerate(budgets):
            cs = sub["compute"].to_numpy()[ids == b]
            # The geometric mean; exactly the runs' compute when they agree.
            computes[j] = cs[0] if (cs == cs[0]).all() else np.exp(np.log(cs).mean())
        # Budget ids in order of compute, however the labels sort.
        rank = np.empty(budgets.size, dtype=int)
        rank[np.argsort(computes, kind="stable")] = np.arange(budgets.size)
        pos = np.searchsorted(budgets, ids)
        df.loc[idx, "_budget"] = rank[pos]
        df.loc[idx, "_budget_compute"] = computes[pos]
    df["_budget"] = df["_budget"].astype(int)
    return df


# --------------------------------------------------------------------------- fits of lines


def _masked_ols(x: np.ndarray, Y: np.ndarray, min_points: int = MIN_SIZES):
    """Slope and intercept of each row of Y (NaN: absent) on x; NaN where too few points."""
    w = np.isfinite(Y)
    n = w.sum(axis=1)
    Yz = np.where(w, Y, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        mx = (w * x).sum(axis=1) / n
        my = Yz.sum(axis=1) / n
        dx = np.where(w, x - mx[:, None], 0.0)
        sxx = (dx * dx).sum(axis=1)
        slope = (dx * (Yz - my[:, None])).sum(axis=1) / sxx
        intercept = my - slope * mx
    ok = (n >= min_points) & (sxx > 0)
    return np.where(ok, slope, np.nan), np.where(ok, intercept, np.nan)


def _line(lc: np.ndarray, ln: np.ndarray, ld: np.ndarray, ln_boot: np.ndarray,
          ld_boot: np.ndarray, what: str) -> _Line:
    """N_opt = n_coef C^a and D_opt = d_coef C^b from the points (lc, ln, ld) in ln
    space, with the bootstrap replicates' points (rows; NaN where absent)."""
    k = int(np.isfinite(ln).sum())
    if k < MIN_SIZES:
        return _Line(f"not enough {what}: {k} < {MIN_SIZES}", k)
    a, ka = _masked_ols(lc, ln[None])
    b, kb = _masked_ols(lc, ld[None])
    boot = None
    if ln_boot is not None and len(ln_boot):
        ba, bka = _masked_ols(lc, ln_boot)
        bb, bkb = _masked_ols(lc, ld_boot)
        boot = np.column_stack([ba, bka, bb, bkb])
        boot = boot[np.isfinite(boot).all(axis=1)]
    return _Line("ok", k, float(a[0]), float(b[0]), float(np.exp(ka[0])), float(np.exp(kb[0])),
                 boot=boot)


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


# --------------------------------------------------------------------------- approach 2


def _parabolas(u: np.ndarray, y: np.ndarray, idx: np.ndarray):
    """Least-squares parabolas y = p2 u^2 + p1 u + p0 through the rows idx of (u, y).

    Returns p (k, 3) as (p2, p1, p0) and the resampled u's min and max per row.
    Vectorised through the normal equations (u is centred and scaled by the caller).
    """
    U, Y = u[idx], y[idx]
    S = [np.ones_like(U).sum(1)] + [(U**k).sum(1) for k in range(1, 5)]
    T = [(U**k * Y).sum(1) for k in range(3)]
    M = np.stack([
        np.stack([S[4], S[3], S[2]], -1),
        np.stack([S[3], S[2], S[1]], -1),
        np.stack([S[2], S[1], S[0]], -1),
    ], -2)
    rhs = np.stack([T[2], T[1], T[0]], -1)
    with np.errstate(all="ignore"):
        p = np.linalg.solve(M, rhs[..., None])[..., 0]
    return p, U.min(1), U.max(1)


def _isoflop_budget(sub: pd.DataFrame, idx: np.ndarray, min_sizes: int):
    """Approach 2 on one budget: the data's vertex (row 0 of idx is the data
    itself) and each replicate's (NaN where refused). Returns a dict."""
    N = sub["params"].to_numpy()
    x = np.log(N)
    y = sub["loss"].to_numpy()
    lt = np.log(sub["tokens"].to_numpy())
    n_sizes = int(np.unique(N).size)
    center, scale = x.mean(), x.std() if x.std() > 0 else 1.0
    out = {"n_sizes": n_sizes, "n_runs": len(sub), "ln_center": center,
           "n_min": float(N.min()), "n_max": float(N.max()),
           "p": np.full(3, np.nan), "status": "ok"}
    if n_sizes < min_sizes:
        out["status"] = f"fewer than {min_sizes} sizes: {n_sizes}"
        return out
    u = (x - center) / scale
    p, umin, umax = _parabolas(u, y, idx)
    p2, p1, p0 = p.T
    with np.errstate(all="ignore"):
        v = -p1 / (2 * p2)
    ok = (p2 > 0) & (v >= umin) & (v <= umax)
    # ln D on ln N (a line) at the vertex: C / (6 N_opt) when C = 6 N D exactly.
    U, LT = u[idx], lt[idx]
    um, tm = U.mean(1), LT.mean(1)
    with np.errstate(all="ignore"):
        slope = ((U - um[:, None]) * (LT - tm[:, None])).sum(1) / ((U - um[:, None]) ** 2).sum(1)
    slope = np.where(np.isfinite(slope), slope, 0.0)
    ld = tm + slope * (v - um)
    ln_v = center + scale * v
    loss_v = p0 - p1**2 / (4 * p2)
    # The data's parabola, in u' = ln N - center (unscaled) for the profiles table.
    out["p"] = np.array([p2[0] / scale**2, p1[0] / scale, p0[0]])
    if not p2[0] > 0:
        out["status"] = f"parabola opens downward (curvature {p2[0] / scale**2:.3g} <= 0)"
    elif not ok[0]:
        out["status"] = (f"vertex at N = {np.exp(ln_v[0]):.3g} lies outside the sizes tried "
                         f"({N.min():.3g} to {N.max():.3g})")
    out["ln"] = np.where(ok, ln_v, np.nan)
    out["ld"] = np.where(ok, ld, np.nan)
    out["loss"] = float(loss_v[0])
    return out


def _approach2(runs: pd.DataFrame, by, key, n_boot, rng, min_sizes, max_span, grouped_by_gap):
    """Approach 2 for one group: frontier rows, exclusions, profiles, the line."""
    rows, excluded, profiles = [], [], []
    lc, ln0, ld0, ln_b, ld_b = [], [], [], [], []
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
        idx = np.vstack([np.arange(n)[None], _budget_idx(rng, lx, n_boot)])
        res = _isoflop_budget(sub, idx, min_sizes)
        prof = {"budget": b, "compute": C, "n_runs": res["n_runs"], "n_sizes": res["n_sizes"],
                "ln_center": res["ln_center"], "p2": res["p"][0], "p1": res["p"][1],
                "p0": res["p"][2], "n_min": res["n_min"], "n_max": res["n_max"],
                "status": res["status"]}
        if res["status"] != "ok":
            excluded.append(_exclusion("approach2", by, key, C, res["n_sizes"], res["status"],
                                       f"budget {b}: {n} runs"))
            profiles.append(prof)
            continue
        n_opt = float(np.exp(res["ln"][0]))
        prof.update(n_opt=n_opt, loss_opt=res["loss"])
        profiles.append(prof)
        rows.append({"method": "approach2", "compute": C, "n_opt": n_opt,
                     "d_opt": float(np.exp(res["ld"][0])), "loss_opt": res["loss"],
                     "n_sizes": res["n_sizes"]})
        lc.append(np.log(C))
        ln0.append(res["ln"][0])
        ld0.append(res["ld"][0])
        ln_b.append(res["ln"][1:])
        ld_b.append(res["ld"][1:])
    if lc:
        line = _line(np.array(lc), np.array(ln0), np.array(ld0),
                     np.array(ln_b).T, np.array(ld_b).T, "budgets with a bracketed vertex")
    else:
        line = _Line(f"not enough budgets with a bracketed vertex: 0 < {MIN_SIZES}", 0)
    return rows, excluded, profiles, line


# --------------------------------------------------------------------------- approach 1


def _edge_reason(which: str, n: float) -> str:
    side = "smallest" if which == "min" else "largest"
    return (f"lowest loss at the {side} size available ({n:.3g}): "
            "the optimum may lie beyond the sizes tried")


def _approach1_final(runs: pd.DataFrame, by, key, n_boot, rng, max_span, grouped_by_gap):
    """Approach 1 from final points: per budget, the run with the lowest loss."""
    rows, excluded = [], []
    lc, ln0, ld0, ln_b, ld_b = [], [], [], [], []
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
        lt = np.log(sub["tokens"].to_numpy())[best]
        rows.append({"method": "approach1", "compute": C, "n_opt": float(Nb[0]),
                     "d_opt": float(np.exp(lt[0])), "loss_opt": float(L[0].min()),
                     "n_sizes": n_sizes})
        lc.append(np.log(C))
        ln0.append(np.log(Nb[0]))
        ld0.append(lt[0])
        ln_b.append(np.where(ok, np.log(Nb), np.nan)[1:])
        ld_b.append(np.where(ok, lt, np.nan)[1:])
    if lc:
        line = _line(np.array(lc), np.array(ln0), np.array(ld0), np.array(ln_b).T,
                     np.array(ld_b).T, "budgets with a bracketed lowest loss")
    else:
        line = _Line(f"not enough budgets with a bracketed lowest loss: 0 < {MIN_SIZES}", 0)
    return rows, excluded, line


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
    """Approach 1 from per-step curves: the envelope on a log grid of compute."""
    final = curves.groupby("run")["compute"].max()
    if len(final) < MIN_SIZES:
        line = _Line(f"not enough runs with curves: {len(final)} < {MIN_SIZES}", 0)
        return [], [], line
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
    line = _line(grid_lc, ln[0], ld[0], ln[1:], ld[1:], "compute points with a bracketed "
                 "lowest loss")
    return rows, excluded, line


# --------------------------------------------------------------------------- approach 3


def _chin_optimum(theta: np.ndarray, C: np.ndarray):
    """N_opt, D_opt and the loss there for parameter rows theta (k, 5) at compute C (m,).

    theta = (ln A, ln B, ln E, alpha, beta). Returns three (k, m) arrays.
    """
    la, lb, le, al, be = (theta[:, i:i + 1] for i in range(5))
    s = al + be
    lG = (np.log(al) + la - np.log(be) - lb) / s
    lc6 = np.log(np.asarray(C, dtype=float) / 6.0)[None]
    ln = lG + be / s * lc6
    ld = lc6 - ln
    loss = np.exp(le) + np.exp(la - al * ln) + np.exp(lb - be * ld)
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


def _approach3(runs: pd.DataFrame, by, key, n_boot, rng, n_polish, delta=1e-3):
    """Approach 3 for one group: fit_chinchilla, then bootstrap refits of the runs."""
    N, D, L = (runs[c].to_numpy() for c in ("params", "tokens", "loss"))
    k_n, k_d = np.unique(N).size, np.unique(D).size
    if k_n < MIN_SIZES or k_d < MIN_SIZES:
        status = (f"not enough sizes or token counts for L(N, D): {k_n} sizes, {k_d} token "
                  f"counts (>= {MIN_SIZES} each)")
        return _Line(status, len(runs))
    fit = fit_chinchilla(N, D, L, delta=delta, n_polish=n_polish)
    # Polished on to tight tolerances, as the bootstrap refits are (`_polish_tight`).
    logx = np.column_stack([np.log(N), np.log(D)])
    logy = np.log(L)
    start = np.array([np.log(fit.A), np.log(fit.B), np.log(fit.E), fit.alpha, fit.beta])
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
    theta = np.array([np.log(fit.A), np.log(fit.B), np.log(fit.E), fit.alpha, fit.beta])
    s = fit.alpha + fit.beta
    a, b = fit.beta / s, fit.alpha / s
    n1, d1, _ = _chin_optimum(theta[None], np.array([6.0]))
    line = _Line("ok", len(runs), a, b, float(n1[0, 0] * 6.0**-a), float(d1[0, 0] * 6.0**-b),
                 chin=fit)
    if n_boot > 0:
        idx = resample(rng, logx[:, 0], n_boot, min_distinct=MIN_SIZES)
        idx = idx[[np.unique(D[r]).size >= MIN_SIZES for r in idx]]
        reps = []
        with one_blas_thread():
            for r in idx:
                w = np.bincount(r, minlength=len(L)).astype(float)
                model = HuberPowerLaw(logx, logy, delta, weights=w)
                reps.append(_polish_tight(model, theta).x)
        reps = np.array(reps).reshape(-1, 5)
        # (a, b, e, alpha, beta) -> (ln A, ln B, ln E, alpha, beta): the same numbers.
        reps = reps[(reps[:, 3] > 0) & (reps[:, 4] > 0)]
        line.chin_boot = reps
        sb = reps[:, 3] + reps[:, 4]
        nb, db, _ = _chin_optimum(reps, np.array([6.0]))
        ab, bb = reps[:, 4] / sb, reps[:, 3] / sb
        line.boot = np.column_stack([ab, np.log(nb[:, 0]) - ab * np.log(6.0),
                                     bb, np.log(db[:, 0]) - bb * np.log(6.0)])
    return line


# --------------------------------------------------------------------------- tables


def _predict(line: _Line, method: str, C: np.ndarray, ci: float):
    """Point estimates and percentile intervals of N_opt, D_opt, loss_opt at C (m,)."""
    m = C.size
    nan = np.full(m, np.nan)
    out = {k: nan.copy() for k in ("n", "n_low", "n_high", "d", "d_low", "d_high",
                                   "loss", "loss_low", "loss_high")}
    if line.status != "ok":
        return out
    lc = np.log(C)
    if method == "approach3":
        f = line.chin
        theta = np.array([[np.log(f.A), np.log(f.B), np.log(f.E), f.alpha, f.beta]])
        n, d, loss = (v[0] for v in _chin_optimum(theta, C))
        out.update(n=n, d=d, loss=loss)
        if line.chin_boot is not None and len(line.chin_boot):
            nb, db, lb = _chin_optimum(line.chin_boot, C)
            for name, arr in (("n", nb), ("d", db), ("loss", lb)):
                q = np.array([percentile_ci(arr[:, j], ci) for j in range(m)])
                out[f"{name}_low"], out[f"{name}_high"] = q[:, 0], q[:, 1]
        return out
    out["n"] = line.n_coef * C**line.a
    out["d"] = line.d_coef * C**line.b
    if line.boot is not None and len(line.boot):
        bt = line.boot
        for name, s, i in (("n", 0, 1), ("d", 2, 3)):
            arr = np.exp(bt[:, i:i + 1] + bt[:, s:s + 1] * lc[None])
            q = np.array([percentile_ci(arr[:, j], ci) for j in range(m)])
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
            lo, hi = percentile_ci(line.boot[:, col], ci)
        base[f"{name}_low"], base[f"{name}_high"] = lo, hi
    base["n_boot_used"] = 0 if line.boot is None else len(line.boot)
    f = line.chin
    for name in ("alpha", "beta", "E", "A", "B"):
        base[name] = getattr(f, name) if (f is not None and method == "approach3") else np.nan
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
    for approach 2 (at least 3). With `out_dir`, writes the tables and (with
    `figures`) the figures there, atomically; without it, writes nothing. Every
    budget or point left out is in `excluded` and (unless `quiet`) printed to stderr.
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
    runs = _assign_budgets(runs, budget_gap)
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
                                              max_span, grouped_by_gap)
            frontier_rows += [{**dict(zip(obys, okey, strict=True)), **x} for x in r]
            excluded += e
            lines["approach1"] = line
        budget_cs = np.sort(sub["_budget_compute"].unique())
        if "approach2" in methods:
            r, e, prof, line = _approach2(sub, obys, okey, n_boot, rngs["approach2"],
                                          min_sizes, max_span, grouped_by_gap)
            frontier_rows += [{**dict(zip(obys, okey, strict=True)), **x} for x in r]
            excluded += e
            profile_rows += [{**dict(zip(obys, okey, strict=True)), **x} for x in prof]
            lines["approach2"] = line
        if "approach3" in methods:
            line = _approach3(sub, obys, okey, n_boot, rngs["approach3"], n_polish)
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
        frontier=_frame(frontier_rows, FRONTIER_COLUMNS, obys),
        fits=_frame(fit_rows, FITS_COLUMNS, obys),
        excluded=_frame(excluded, EXCLUDED_COLUMNS, obys),
        bands=_frame(band_rows, BANDS_COLUMNS, obys),
        profiles=_frame(profile_rows, ["budget", *PROFILE_COLUMNS[1:]], obys),
        # Output group columns not grouped by (arch, when by omits it) read "all".
        runs=runs.assign(**{c: "all" for c in obys if c not in by}),
        by=obys,
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
        max_span=args.max_span, min_sizes=args.min_sizes, n_polish=args.n_polish,
        figures=not args.no_figures, loss_label=args.loss_label,
    )
    ok = result.fits.drop_duplicates(["method", *result.by])
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
