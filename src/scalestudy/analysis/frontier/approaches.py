"""Hoffmann et al.'s three approaches to N_opt(C) and D_opt(C), each for one
group of runs, and their predictions with bootstrap intervals.

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
  size step over the compute range (see tests/analysis/frontier/test_approaches.py).
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
  compute axis (the package docstring; on the 6ND axis N_opt = G (C/6)^a with
  a = beta/(alpha+beta), G = (alpha A / (beta B))^(1/(alpha+beta))), and the loss
  at the optimum L(N_opt, D_opt). Its a and b are the least-squares slopes of
  ln N_opt and ln D_opt on ln C over the group's budgets, as approaches 1-2 fit
  theirs (exactly the closed form's on the 6ND axis, or wherever f is a power
  law). A group with one budget is refused: along one IsoFLOP line N and D move
  together, and L(N, D) cannot tell their effects apart. Faithful: the
  objective, the grid and the closed form.
  Simplified: `n_polish` (default 256) runs L-BFGS-B only from the best grid starts
  (scaling.fit_chinchilla's docstring: the same optimum as all 4,500 on the
  Epoch data), the optimum is polished on to tight tolerances, and each bootstrap
  refit runs L-BFGS-B from the full-data optimum alone
  (scaling.HuberPowerLaw.polish_tight says why),
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
of tests/analysis/frontier/test_approaches.py (`test_approach2_interval_coverage`), at the price of
intervals about t / z wider (1.4 at 6 budgets, 2.2 at 4, 6.5 at 3). Hoffmann et
al. bootstrap too (their Table 2 gives 10th-90th percentiles); the resampling
units are ours.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..scaling import MIN_SIZES, ChinchillaFit, HuberPowerLaw, fit_chinchilla, one_blas_thread
from ..stats import expanded_ci, percentile_ci, resample
from .inputs import exclusion

LOG10 = np.log(10)


@dataclass
class Line:
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


def fit_line(lc: np.ndarray, ln: np.ndarray, ld: np.ndarray, what: str,
          min_points: int = MIN_SIZES) -> Line:
    """N_opt = n_coef C^a and D_opt = d_coef C^b by least squares in ln space.

    lc, ln, ld: (1 + replicates, points) arrays, row 0 the data, NaN where a point
    is absent; lc may be one row shared by all (the counted axis: each point at
    its budget's compute)."""
    lc = np.broadcast_to(np.asarray(lc, dtype=float), ln.shape)
    have = np.isfinite(ln[0]) & np.isfinite(lc[0])
    k = int(np.unique(lc[0][have]).size)
    if k < min_points:
        return Line(f"not enough {what}: {k} < {min_points}", k)
    a, ka = _masked_ols(lc, ln, min_points)
    b, kb = _masked_ols(lc, ld, min_points)
    if not np.isfinite([a[0], ka[0], b[0], kb[0]]).all():
        return Line(f"no line through the {what}: their compute does not vary", k)
    boot = np.column_stack([a, ka, b, kb])[1:]
    boot = boot[np.isfinite(boot).all(axis=1)]
    return Line("ok", k, float(a[0]), float(b[0]), float(np.exp(ka[0])),
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


def approach2(runs: pd.DataFrame, by, key, n_boot, rng, min_sizes, window, max_span,
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
            excluded.append(exclusion("approach2", by, key, C, n_sizes, reason,
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
            excluded.append(exclusion("approach2", by, key, C, res["n_sizes"], res["status"],
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
        return rows, excluded, profiles, Line(f"not enough {what}: 0 < {MIN_SIZES}", 0)
    line = fit_line(np.array(lc).T, np.array(ln).T, np.array(ld).T, what)
    return rows, excluded, profiles, line


# --------------------------------------------------------------------------- approach 1


def _edge_reason(which: str, n: float) -> str:
    side = "smallest" if which == "min" else "largest"
    return (f"lowest loss at the {side} size available ({n:.3g}): "
            "the optimum may lie beyond the sizes tried")


def approach1_final(runs: pd.DataFrame, by, key, n_boot, rng, max_span, grouped_by_gap,
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
            excluded.append(exclusion("approach1", by, key, C, n_sizes,
                                       f"compute spans {span:.3f} decades > max_span "
                                       f"{max_span}: not one budget", detail))
            continue
        if n_sizes < MIN_SIZES:
            excluded.append(exclusion("approach1", by, key, C, n_sizes,
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
            excluded.append(exclusion("approach1", by, key, C, n_sizes,
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
        return rows, excluded, Line(f"not enough {what}: 0 < {MIN_SIZES}", 0)
    return rows, excluded, fit_line(np.array(lc).T, np.array(ln).T, np.array(ld).T, what)


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


def approach1_curves(curves: pd.DataFrame, by, key, n_boot, rng, n_grid):
    """Approach 1 from per-step curves: the envelope on a log grid of compute (the
    curves' compute is already on the compute axis)."""
    final = curves.groupby("run")["compute"].max()
    if len(final) < MIN_SIZES:
        line = Line(f"not enough runs with curves: {len(final)} < {MIN_SIZES}", 0)
        return [], [], line
    if np.log10(final.max() / final.min()) < 1e-9:
        return [], [], Line(f"the curves all end at one compute ({final.max():.3g} FLOPs): "
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
            excluded.append(exclusion("approach1", by, key, C, 0,
                                       "no run's curve covers this compute"))
        else:
            which = "min" if Nwin[0, g] <= lo[0, g] else "max"
            excluded.append(exclusion("approach1", by, key, C, n_sizes,
                                       _edge_reason(which, Nwin[0, g]), "curves grid point"))
    line = fit_line(grid_lc[None], ln, ld, "compute points with a bracketed lowest loss")
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


def approach3(runs: pd.DataFrame, n_boot, rng, n_polish, axis, delta=1e-3):
    """Approach 3 for one group: fit_chinchilla, then bootstrap refits of the runs."""
    N, D, L = (runs[c].to_numpy() for c in ("params", "tokens", "loss"))
    k_n, k_d = np.unique(N).size, np.unique(D).size
    budgets = np.sort(runs.groupby("_budget")["_axis_budget_compute"].first().to_numpy())
    if k_n < MIN_SIZES or k_d < MIN_SIZES:
        status = (f"not enough sizes or token counts for L(N, D): {k_n} sizes, {k_d} token "
                  f"counts (>= {MIN_SIZES} each)")
        return Line(status, len(runs))
    if budgets.size < 2:
        return Line("one budget: on one IsoFLOP line N and D move together, so L(N, D) "
                     "cannot tell their effects apart", len(runs))
    cost = _cost_model(runs, axis)
    if not (np.diff(cost[1]) > 0).all():
        return Line("counted FLOPs per token do not grow with N between some sizes: "
                     "no compute-optimal size", len(runs))
    fit = fit_chinchilla(N, D, L, delta=delta, n_polish=n_polish)
    # Polished on to tight tolerances, as the bootstrap refits are.
    logx = np.column_stack([np.log(N), np.log(D)])
    logy = np.log(L)
    with one_blas_thread():
        res = HuberPowerLaw(logx, logy, delta).polish_tight(fit.theta())
    if res.fun <= fit.loss:
        fit = ChinchillaFit.from_theta(res.x, res.fun, fit.n_points)
    if not (fit.alpha > 0 and fit.beta > 0):
        return Line(f"fitted alpha = {fit.alpha:.3g}, beta = {fit.beta:.3g}: not both "
                     "positive, so no compute-optimal frontier", len(runs), chin=fit)
    theta = fit.theta()
    reps = np.empty((0, 5))
    if n_boot > 0:
        idx = resample(rng, logx[:, 0], n_boot, min_distinct=MIN_SIZES)
        idx = idx[[np.unique(D[r]).size >= MIN_SIZES for r in idx]]
        fitted = []
        with one_blas_thread():
            for r in idx:
                w = np.bincount(r, minlength=len(L)).astype(float)
                model = HuberPowerLaw(logx, logy, delta, weights=w)
                fitted.append(model.polish_tight(theta).x)
        # (a, b, e, alpha, beta) -> (ln A, ln B, ln E, alpha, beta): the same numbers.
        reps = np.array(fitted).reshape(-1, 5)
        reps = reps[(reps[:, 3] > 0) & (reps[:, 4] > 0)]
    # a and b: the slopes of ln N_opt and ln D_opt over the group's budgets, as
    # approaches 1-2 fit theirs (exactly beta/(alpha+beta) on the 6ND axis).
    n_opt, d_opt, _ = _chin_optimum(np.vstack([theta[None], reps]), budgets, cost)
    lc = np.log(budgets)[None]
    line = fit_line(lc, np.log(n_opt), np.log(d_opt), "budgets", min_points=2)
    line.n_points = len(runs)
    line.chin, line.cost, line.chin_boot = fit, cost, reps
    return line


# --------------------------------------------------------------------------- predictions


def interval(samples: np.ndarray, ci: float, method: str, line: Line):
    """A bootstrap interval: approach 2's expanded by t / z at budgets - 2 degrees of
    freedom (the line through its vertices; the module docstring says why), the
    others' percentile."""
    if method == "approach2":
        return expanded_ci(samples, ci, line.n_points - 2)
    return percentile_ci(samples, ci)


def predictions(line: Line, method: str, C: np.ndarray, ci: float):
    """Point estimates and bootstrap intervals of N_opt, D_opt, loss_opt at C (m,)."""
    m = C.size
    nan = np.full(m, np.nan)
    out = {k: nan.copy() for k in ("n", "n_low", "n_high", "d", "d_low", "d_high",
                                   "loss", "loss_low", "loss_high")}
    if line.status != "ok":
        return out
    lc = np.log(C)
    if method == "approach3":
        n, d, loss = (v[0] for v in _chin_optimum(line.chin.theta()[None], C, line.cost))
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
            q = np.exp([interval(arr[:, j], ci, method, line) for j in range(m)])
            out[f"{name}_low"], out[f"{name}_high"] = q[:, 0], q[:, 1]
    return out
