"""The statistics the claims decide on, each a dict (estimate, low, high,
status) with an interval at the study's level:

- `contrast`: a weighted sum of cells' mean accuracies, averaged over the
  sizes they share; `mean_difference`: two groups' mean accuracies. Their
  intervals are Welch's t-intervals over the runs (seeds) of each cell (its
  variance pooled over sizes), the sizes fixed (the grid's): with two or three
  seeds per cell the percentile bootstrap of a mean is far too narrow
  (measured on null data, one-sided at 2.5%: 19% false positives for two runs
  against two, 9.5% for three against three; Welch's interval is exact for
  normal noise), and resampling sizes instead treats the grid's sizes as a
  sample of sizes;
- `alpha` and `alpha_difference`: a log-log scaling exponent, and the
  difference of two architectures' exponents, with the t interval of the
  residual bootstrap (analysis/stats.py: runs or sizes redrawn, as the fit
  stage does), paired where the two lines redraw the same units (the same
  draws for both; degrees of freedom the smaller of the two), else
  independent draws with Welch-Satterthwaite degrees of freedom;
- `leader_change`: whether the best architecture at the smallest size is
  another than at the largest: each leader ahead of every other architecture
  at its size (Welch, one-sided).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..fits import MIN_SIZES, shares_pretraining, size_order, x_values
from ..options import ClaimsOptions
from ..scaling import fit_loglog, transfer_slope
from ..stats import Residuals, run_line, t_interval, welch_df


def _result(estimate=np.nan, low=np.nan, high=np.nan, status="ok", **more) -> dict:
    return {"estimate": estimate, "low": low, "high": high, "status": status, **more}


def welch(groups: list[tuple[np.ndarray, float, str]], ci: float = ClaimsOptions.ci) -> dict:
    """sum_g c_g mean(x_g) with Welch's t-interval over cells: each group g is one
    cell's runs at one size, a cell's variance pooled over its sizes (a cell's
    seed-to-seed noise taken alike at every size: with two seeds per size, a
    variance per size has one degree of freedom and the interval is far too
    wide), Welch-Satterthwaite degrees of freedom across cells. `groups` are
    (runs' accuracies, coefficient, cell); every cell needs two runs at some size."""
    from scipy.stats import t

    est = float(sum(c * x.mean() for x, c, _ in groups))
    ci_ = {"ci": ci}
    cells: dict[str, list] = {}
    for x, c, cell in groups:
        cells.setdefault(cell, []).append((x, c))
    parts = []  # per cell: (its variance of the estimate, its degrees of freedom)
    for members in cells.values():
        df = sum(x.size - 1 for x, _ in members)
        if df < 1:
            return _result(est, status="no interval: a single run in some compared cell", **ci_)
        var = sum((x.size - 1) * x.var(ddof=1) for x, _ in members if x.size > 1) / df
        parts.append((sum(c * c * var / x.size for x, c in members), df))
    se2 = sum(v for v, _ in parts)
    if se2 == 0:
        return _result(est, est, est, df=np.inf, **ci_)
    df = se2**2 / sum(v * v / k for v, k in parts)
    half = float(t.ppf((1 + ci) / 2, df)) * np.sqrt(se2)
    return _result(est, est - half, est + half, df=df, **ci_)


def contrast(runs: pd.DataFrame, cells: dict[str, tuple[dict, float]], *,
             ci: float = ClaimsOptions.ci, **_) -> dict:
    """Mean over shared sizes of sum_k w_k * (mean test accuracy of cell k at that size).

    `cells` maps a label to (column filter, weight), e.g. {"spt": ({"prior": "spt"}, 1),
    "control": ({"prior": "scratch_matched"}, -1)}; a filter's value may be a tuple
    (any of them). Only runs with status "ok" count. Welch's interval over each
    cell's runs at each shared size (two runs per cell needed).
    """
    ok = runs[(runs["status"] == "ok") & np.isfinite(runs["test_acc"])]
    per_cell = {}
    for label, (where, _) in cells.items():
        mask = np.ones(len(ok), dtype=bool)
        for column, value in where.items():
            values = value if isinstance(value, tuple) else (value,)
            mask &= ok[column].isin(values).to_numpy()
        per_cell[label] = {s: g.to_numpy(float) for s, g in
                           ok[mask].groupby("size")["test_acc"]}
    shared = set.intersection(*(set(d) for d in per_cell.values()))
    sizes = [s for s in size_order(ok) if s in shared]
    if not sizes:
        return _result(status="no size at which every compared cell has finished runs",
                       sizes=[])
    groups = [(per_cell[k][s], w / len(sizes), k) for k, (_, w) in cells.items()
              for s in sizes]
    # Each size's own weighted sum, its interval from that size's runs alone: what
    # the mean over sizes is made of (claims.md prints it beside the mean).
    per_size = {s: welch([(per_cell[k][s], w, k) for k, (_, w) in cells.items()], ci)
                for s in sizes} if len(sizes) > 1 else {}
    return {**welch(groups, ci), "sizes": sizes, "per_size": per_size}


def mean_difference(a, b, *, ci: float = ClaimsOptions.ci, **_) -> dict:
    """mean(a) - mean(b) of two independent groups of accuracies, with Welch's
    interval (two runs needed in each)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.size == 0 or b.size == 0:
        return _result(status="a compared group has no finished run", sizes=[], ci=ci)
    return {**welch([(a, 1.0, "a"), (b, -1.0, "b")], ci), "sizes": []}


# --------------------------------------------------------------------------- exponents


@dataclass(frozen=True)
class Law:
    """A log-log law y = c x^(sign alpha) of a cell's runs: alpha_U and alpha_D
    fall with compute (sign -1), alpha_U,D rises with upstream loss (+1)."""

    y: str  # "upstream_loss" or "error"
    x: str = "compute"  # an X_AXES name, or "upstream_loss"
    sign: int = -1

    def points(self, runs: pd.DataFrame) -> pd.DataFrame:
        """The runs a fit can use (ok, finite and positive x and y) with columns
        x, y, lx, ly, in the runs' own order (the fit stage's, so that `alpha`
        draws what fits.py draws)."""
        runs = runs[runs["status"] == "ok"]
        if self.y == "error":
            runs = runs.assign(error=1.0 - runs["test_acc"])
        x = runs[self.x] if self.x == "upstream_loss" else x_values(runs, self.x)
        x, y = x.astype(float).to_numpy(), runs[self.y].astype(float).to_numpy()
        keep = np.isfinite(x) & np.isfinite(y) & (x > 0) & (y > 0)
        return pd.DataFrame({"size": runs["size"].to_numpy()[keep],
                             "seed": runs["seed"].to_numpy()[keep],
                             "stage": runs["stage"].to_numpy()[keep],
                             "pretrain_seed": runs.get("pretrain_seed", pd.Series(
                                 np.nan, index=runs.index)).to_numpy()[keep],
                             "x": x[keep], "y": y[keep],
                             "lx": np.log(x[keep]), "ly": np.log(y[keep])})

    def cells(self, runs: pd.DataFrame) -> dict[str, pd.DataFrame]:
        """Each architecture's points."""
        return {arch: self.points(g) for arch, g in runs.groupby("arch", sort=False)}


def _line(pts: pd.DataFrame) -> Residuals:
    """The residual bootstrap of a cell's points (sorted by size and seed), with
    the unit the fit stage's interval uses for them."""
    return run_line(pts["lx"].to_numpy(), pts["ly"].to_numpy(), pts["size"].to_numpy(),
                    pts["seed"], shares_pretraining(pts))


def _why_not(pts: pd.DataFrame, name: str) -> str | None:
    """Why a cell's points give no exponent (too few sizes), or none."""
    k = pts["size"].nunique()
    return f"{name}: not enough sizes: {k} < {MIN_SIZES}" if k < MIN_SIZES else None


def alpha(pts: pd.DataFrame, law: Law, name: str, *, n_boot: int = ClaimsOptions.n_boot,
          ci: float = ClaimsOptions.ci, seed: int = ClaimsOptions.seed) -> dict:
    """One cell's exponent with its interval, from its points (`Law.points`): the
    fit stage's own (fits.py's fit_loglog or transfer_slope on the same runs in
    the same order)."""
    why = _why_not(pts, name)
    if why:
        return _result(status=why)
    fit = (fit_loglog if law.sign < 0 else transfer_slope)(
        pts["x"].to_numpy(), pts["y"].to_numpy(), pts["size"].to_numpy(), n_boot=n_boot,
        ci=ci, seed=seed, size_noise=shares_pretraining(pts))
    why = "no interval: n_boot = 0" if n_boot <= 0 else None
    return _result(fit.alpha, fit.alpha_low, fit.alpha_high, status=why or "ok",
                   df=fit.interval_df, ci=ci, sizes=_sizes(pts))


def _sizes(*cells: pd.DataFrame) -> list[str]:
    """The sizes a fit of the cells spans (smallest first by x), for claims.md."""
    pts = pd.concat(cells)
    return list(pts.groupby("size")["x"].median().sort_values().index)


def alpha_difference(pa: pd.DataFrame, pb: pd.DataFrame, law: Law, names: tuple[str, str], *,
                     weights: tuple[float, float] = (1.0, -1.0), n_boot: int = ClaimsOptions.n_boot,
                     ci: float = ClaimsOptions.ci, seed: int = ClaimsOptions.seed) -> dict:
    """alpha(a) - alpha(b) of two cells' points (or w_a alpha(a) + w_b alpha(b)
    with `weights`: a margin relative to b's exponent, estimated alongside), with
    the t interval of the replicates' contrast (analysis/stats.py). Paired (`paired` True) when the
    two lines redraw the same units (runs of the same sizes and seeds, or the
    same sizes): one draw serves both and the degrees of freedom are the
    smaller of the two; otherwise independent draws and Welch-Satterthwaite
    degrees of freedom."""
    why = _why_not(pa, names[0]) or _why_not(pb, names[1])
    if why:
        return _result(status=why, paired=False)
    pa, pb = (p.sort_values(["size", "seed"], kind="stable") for p in (pa, pb))
    la, lb = _line(pa), _line(pb)
    wa, wb = weights
    est = law.sign * (wa * la.slope + wb * lb.slope)
    paired = la.units.tolist() == lb.units.tolist()
    if n_boot <= 0:
        return _result(est, status="no interval: n_boot = 0", paired=paired)
    rng = np.random.default_rng(seed)
    u = la.uniforms(n_boot, rng)
    sa, sb = la.replicates(u)[0], lb.replicates(u if paired else lb.uniforms(n_boot, rng))[0]
    if sa.size < 2 or sb.size < 2:
        return _result(est, status="no interval: no residual freedom", paired=paired)
    df = (min(la.df, lb.df) if paired
          else welch_df([wa * wa * sa.var(ddof=1), wb * wb * sb.var(ddof=1)], [la.df, lb.df]))
    low, high = t_interval(est, law.sign * (wa * sa + wb * sb), df, ci)
    return _result(est, low, high, paired=paired, df=df, ci=ci, sizes=_sizes(pa, pb))


# --------------------------------------------------------------------------- rankings


def leader_change(small: list[np.ndarray], large: list[np.ndarray], *, ci: float = ClaimsOptions.ci,
                  **_) -> dict:
    """Whether the best of several architectures (their accuracies `small[i]`,
    `large[i]` at the smallest and largest size) changes between the two sizes.

    The leaders L_s, L_l are the best means at each size. The change is shown at
    one-sided level a when L_s != L_l, L_s is ahead of every other architecture
    at the smallest size and L_l of every other at the largest, each by Welch's
    one-sided test at level a (`ahead(a)`: an intersection-union test, so a
    ranking that changes among near-tied followers, or a leader chosen by noise
    among tied ones, does not pass). The evidence against a change (`stays(a)`):
    one architecture leads at both sizes, ahead of every other at each by the
    same test. Returns the leaders, the two leaders' differences at each size
    (at the study's level), `ahead` and `stays`.
    """
    m_s, m_l = np.array([g.mean() for g in small]), np.array([g.mean() for g in large])
    lead_s, lead_l = int(m_s.argmax()), int(m_l.argmax())
    others_s = [j for j in range(len(small)) if j != lead_s]
    others_l = [j for j in range(len(large)) if j != lead_l]

    def leads(level: float) -> bool:
        pairs = ([(small[lead_s], small[j]) for j in others_s]
                 + [(large[lead_l], large[j]) for j in others_l])
        return all(welch([(x, 1.0, "a"), (y, -1.0, "b")], 1 - 2 * level)["low"] > 0
                   for x, y in pairs)

    def ahead(level: float) -> bool:
        return lead_s != lead_l and leads(level)

    def stays(level: float) -> bool:
        return lead_s == lead_l and leads(level)

    single = min(g.size for g in small + large) < 2
    return _result(
        status="no interval: a single run in some architecture x size cell" if single else "ok",
        leaders=(lead_s, lead_l), ahead=ahead, stays=stays,
        d_small=welch([(small[lead_s], 1.0, "a"), (small[lead_l], -1.0, "b")], ci),
        d_large=welch([(large[lead_l], 1.0, "a"), (large[lead_s], -1.0, "b")], ci))
