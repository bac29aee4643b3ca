"""The fit stage: every scaling coefficient of a study, as one tidy frame.

docs/analysis.md, "Metrics" (after Tay et al. 2022, "Scaling Laws vs Model
Architectures"). x is training compute C = train_flops + pretrain_flops by
default, or non-embedding parameters, or FLOPs per token. One row per fit, its
`metric` one of:

- ``alpha_U``: upstream loss (held-out masked-token NLL of the runs of a
  pretraining stage that measures it, stages.py: `upstream`) against x, per
  architecture; `form` ``loglog``
  (y = coef x^-alpha, least squares in log-log space) and ``saturating``
  (y = E + A x^-alpha, Huber loss on log residuals, Hoffmann et al. 2022
  approach 3; three parameters, so it needs four sizes).
- ``alpha_D``: downstream error (1 - test accuracy) against x, per
  (task, arch, prior); form ``loglog``, and ``saturating`` beside it where the
  lack-of-fit test rejects the power law over four sizes or more (the log-log
  exponent is then a local slope: its `interval` says so).
- ``alpha_UD``: the log-log slope of downstream error against upstream loss of
  the runs of a prior that finetunes such a stage (`upstream`) across sizes,
  per (task, arch) (Tay et al.: how much
  of the upstream gain transfers); its x axis is ``upstream_loss``.
- ``alpha_D/alpha_U``: alpha_D of that prior over the log-log alpha_U of
  the same architecture, per (task, arch); its interval is Fieller's, the two
  exponents' variances and covariance from paired bootstrap replicates: the
  downstream runs are resampled and each brings the upstream run of its size
  (its checkpoint), so both fits see the same sizes in a replicate
  (`_paired_alphas`).

Only runs with status "ok" enter a fit; `n_runs` counts every run of the cell,
`n_failed` those that did not finish ok (diverged or failed) and `n_diverged`
those whose loss turned non-finite. Every coefficient has a percentile-bootstrap
interval over runs resampled within each size (analysis/stats.py; NaN bounds
when some size has a single run: one seed, or the one shared pretraining run of
alpha_U unless `pretrain.seeds: per_seed`), `n_points`, `n_sizes` and R^2; a
cell with fewer than three sizes has a status saying so and NaN coefficients.

Every law (alpha_U in both forms, alpha_D, alpha_U,D) is also validated on the
size it did not see: the `heldout_*` columns hold the same fit refitted without
the largest size, its prediction there, that size's mean observed y and the
relative error (pred - obs) / obs with a bootstrap interval
(`scaling.heldout_prediction`). A law is judged there by its prediction, not by
its residual, so the refit needs only as many sizes as the law has parameters
(`scaling.HELDOUT_PARAMS`: two for a log-log law, three for the saturating form) besides
the one held out: a three-size study validates its log-log laws. Otherwise the
columns are NaN and `heldout_status` says why.

A budgeted run (grid.budgets) is not fitted here: each size of a budgeted study
ran at several budgets, which a per-size fit would pool as if they were seeds;
its rows say so (`BUDGETED`), and the study's scaling analysis is the
frontier's (analysis/frontier/). Torch-free.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from ..atomic import refuse_overwrite, write_parquet
from ..priors import PRIORS
from ..stages import FINETUNE, STAGES, TASK_STAGES
from . import X_AXES
from .options import FitOptions, chosen
from .scaling import (
    HELDOUT_PARAMS,
    MIN_SIZES,
    fit_loglog,
    fit_saturating,
    heldout_prediction,
    transfer_slope,
)
from .stats import Residuals, fieller, is_local, run_line

CELL = ["task", "arch", "prior"]
BUDGETED = ("budgeted runs (grid.budgets): each size ran at several budgets, which a "
            "per-size fit would pool as seeds; the study's scaling analysis is frontier/")
# The pretraining stages whose runs alpha_U is fitted on (their held-out
# masked-token loss is the upstream loss).
UPSTREAM_STAGES = tuple(name for name, stage in STAGES.items() if stage.measures_upstream_loss)
METRICS = ("alpha_U", "alpha_D", "alpha_UD", "alpha_D/alpha_U")
COLUMNS = [
    "task", "arch", "prior", "metric", "form", "x_axis", "n_runs", "n_failed", "n_diverged",
    "alpha", "alpha_low", "alpha_high", "ci", "coef", "E", "A", "r2", "n_points", "n_sizes",
    "status", "lack_of_fit_p", "interval_unit", "interval_df", "interval",
]
HELDOUT_COLUMNS = [
    "heldout_size", "heldout_x", "heldout_pred", "heldout_obs", "heldout_rel_error",
    "heldout_rel_error_low", "heldout_rel_error_high", "heldout_status",
]
COLUMNS += HELDOUT_COLUMNS


def x_values(runs: pd.DataFrame, x_axis: str) -> pd.Series:
    """The x axis: training compute (train + pretrain FLOPs), parameters, or
    FLOPs per token."""
    if x_axis == "compute":
        return runs["train_flops"] + runs["pretrain_flops"].fillna(0.0)
    if x_axis == "params":
        return runs["n_params_nonembed"].astype(float)
    if x_axis == "flops_per_token":
        return runs["flops_per_step"] / (runs["batch_size"] * runs["seq_len"])
    raise ValueError(f"x: got {x_axis!r}, accepted values: {', '.join(X_AXES)}")


def task_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """Runs on a task (scratch or finetune), with `error` = 1 - test accuracy."""
    runs = runs[runs["stage"].isin(TASK_STAGES)]
    return runs.assign(error=1.0 - runs["test_acc"])


def upstream_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """The upstream (masked-LM) pretraining runs, one per arch x size."""
    return runs[runs["stage"].isin(UPSTREAM_STAGES)]


def transfers_upstream(prior: str) -> bool:
    """Whether a prior finetunes a stage that measures the upstream loss: its
    runs give alpha_U,D and alpha_D/alpha_U."""
    entry = PRIORS.get(prior)
    return bool(entry and entry.pretrain in UPSTREAM_STAGES)


def size_order(runs: pd.DataFrame) -> list[str]:
    """Sizes from smallest to largest by their median non-embedding parameters."""
    if runs.empty:
        return []
    return list(runs.groupby("size")["n_params_nonembed"].median().sort_values().index)


def _row(task, arch, prior, metric, form, x_axis, cell: pd.DataFrame, fit: dict) -> dict:
    return {
        "task": task, "arch": arch, "prior": prior, "metric": metric, "form": form,
        "x_axis": x_axis, "n_runs": len(cell), "n_failed": int((cell["status"] != "ok").sum()),
        "n_diverged": int((cell["status"] == "diverged").sum()),
        **fit,
    }


def _usable(runs: pd.DataFrame, y: str, x: str = "x") -> pd.DataFrame:
    """The runs a log-log fit of y against x can use (finite, positive)."""
    return runs[np.isfinite(runs[x]) & np.isfinite(runs[y]) & (runs[x] > 0) & (runs[y] > 0)]


def shares_pretraining(runs: pd.DataFrame) -> bool:
    """Whether some size's finetuned runs share a pretraining checkpoint (fewer
    distinct `pretrain_seed`s than runs: pretrain.seeds shared): its noise is
    common to the size's seeds, which their scatter does not show, so the
    size is the unit of the fit's interval (stats.py)."""
    tuned = runs[runs["stage"] == FINETUNE]
    if tuned.empty:
        return False
    # Records without the field (written before it) count as one shared pretraining.
    seeds = (tuned["pretrain_seed"] if "pretrain_seed" in tuned
             else pd.Series(np.nan, index=tuned.index)).astype(float).fillna(-1.0)
    per_size = seeds.groupby(tuned["size"].to_numpy())
    return bool((per_size.nunique() < per_size.size()).any())


def _line(runs: pd.DataFrame, y: str, size_noise: bool) -> Residuals | None:
    """The residual bootstrap of the log-log line of y against x of `runs`, with
    the unit its fit's interval used; None without residual freedom."""
    runs = _usable(runs, y).sort_values(["size", "seed"], kind="stable")
    line = run_line(np.log(runs["x"].to_numpy(float)), np.log(runs[y].to_numpy(float)),
                    runs["size"].to_numpy(), runs["seed"], size_noise)
    return line if line.resamplable else None


def _paired_alphas(up: pd.DataFrame, down: pd.DataFrame, size_noise: bool, n_boot: int,
                   seed: int):
    """Bootstrap replicates of (alpha_D, alpha_U) and their degrees of freedom.

    A downstream run finetunes the upstream checkpoint of its size, so the two
    fits share that checkpoint's noise: drawing their replicates independently
    ignores the correlation and over-covers. Where the two lines redraw the same
    units (the sizes, with one pretraining per size; or the same size and seed
    with pretrain.seeds per_seed) one draw of uniforms serves both, so a
    replicate moves a size's upstream loss and its finetuned error together.
    """
    line_d, line_u = _line(down, "error", size_noise), _line(up, "upstream_loss", False)
    if line_d is None or line_u is None:
        return np.array([]), np.array([]), np.nan
    rng = np.random.default_rng(seed)
    u_d = line_d.uniforms(n_boot, rng)
    paired = line_u.units.tolist() == line_d.units.tolist()
    u_u = u_d if paired else line_u.uniforms(n_boot, rng)
    slopes_d, slopes_u = line_d.replicates(u_d)[0], line_u.replicates(u_u)[0]
    keep = np.isfinite(slopes_u) & np.isfinite(slopes_d) & (slopes_u != 0)
    return -slopes_d[keep], -slopes_u[keep], min(line_d.df, line_u.df)


def _ratio(up: pd.DataFrame, down: pd.DataFrame, fit_u, fit_d, size_noise: bool, n_boot, ci,
           seed) -> dict:
    """alpha_D / alpha_U with Fieller's interval (stats.fieller), the two
    exponents' variances and covariance from paired replicates; none where
    alpha_U has no interval or one that reaches 0 (the ratio is then
    unbounded). A percentile interval of the replicates' ratios is too short
    as alpha_U nears 0 (docs/analysis.md, "The ratio": measured coverage)."""
    n_points = fit_u.n_points + fit_d.n_points
    n_sizes = min(fit_u.n_sizes, fit_d.n_sizes)
    out = {"alpha": np.nan, "alpha_low": np.nan, "alpha_high": np.nan, "coef": np.nan,
           "E": np.nan, "A": np.nan, "r2": np.nan, "n_points": n_points, "n_sizes": n_sizes,
           "lack_of_fit_p": np.nan, "interval_unit": "", "interval_df": np.nan}
    if fit_u.status != "ok" or fit_d.status != "ok":
        bad = [f"{name}: {f.status}" for name, f in (("alpha_U", fit_u), ("alpha_D", fit_d))
               if f.status != "ok"]
        return {**out, "status": "; ".join(bad), "interval": "none: a fit refused"}
    low = high = df = np.nan
    if not np.isfinite(fit_u.alpha_low):
        interval = "none: alpha_U has no interval"
    elif fit_u.alpha_low <= 0 <= fit_u.alpha_high:
        interval = "none: alpha_U's interval reaches 0"
    elif n_boot <= 0:
        interval = "none: n_boot = 0"
    else:
        a_d, a_u, df = _paired_alphas(up, down, size_noise, n_boot, seed)
        low, high = fieller(fit_d.alpha, fit_u.alpha, a_d, a_u, df, ci)
        if np.isfinite(low):
            interval = f"Fieller's, paired replicates' (co)variances, {df:g} df"
        elif a_u.size < 2 or not df >= 1:
            interval = "none: no residual freedom"
        else:
            interval = (f"none: Fieller's set is unbounded (alpha_U not shown away from 0 "
                        f"at {df:g} df)")
    return {**out, "alpha": fit_d.alpha / fit_u.alpha, "alpha_low": low, "alpha_high": high,
            "status": "ok", "interval_df": df if np.isfinite(low) else np.nan,
            "interval": interval}


def _no_heldout(status: str) -> dict:
    return dict.fromkeys(HELDOUT_COLUMNS, np.nan) | {"heldout_size": "", "heldout_status": status}


def _heldout(good: pd.DataFrame, x: str, y: str, form: str = "loglog", *, n_boot: int,
             ci: float, seed: int, size_noise: bool = False) -> dict:
    """The held-out columns of one law of y against x fitted on the runs `good`:
    its largest size (by parameters) among the points a fit can use is held out; the
    refit needs one size per parameter of the law (it is judged by its prediction)."""
    usable = _usable(good, y, x)
    order = size_order(usable)
    if not order:
        return _no_heldout("no finished runs")
    return heldout_prediction(
        good[x].to_numpy(), good[y].to_numpy(), good["size"].to_numpy(), order[-1], form=form,
        n_boot=n_boot, ci=ci, seed=seed, min_sizes=HELDOUT_PARAMS[form], size_noise=size_noise,
    ).as_dict()


def _nan_fields(d: dict) -> dict:
    """A fit's dict completed with the columns its form lacks (NaN)."""
    return {**{k: np.nan for k in ("coef", "E", "A", "lack_of_fit_p", "interval_df")}, **d}


def fit_study(runs: pd.DataFrame, options: FitOptions | None = None,
              **changes) -> pd.DataFrame:
    """Every coefficient of the study (see the module docstring), one row per fit,
    with `options` (options.FitOptions; `changes`: some of them changed, by name).

    `n_boot` resamples for the log-log fits and the ratio; `n_boot_saturating`
    for the saturating fits, each of whose replicates is an L-BFGS-B refit
    (~10 ms each, so 100 by default keeps a 13-architecture study in seconds).
    """
    options = chosen(FitOptions, options, changes)
    x_axis, n_boot, ci, seed = options.x_axis, options.n_boot, options.ci, options.seed
    n_boot_saturating = options.n_boot_saturating
    if x_axis not in X_AXES:
        raise ValueError(f"x: got {x_axis!r}, accepted values: {', '.join(X_AXES)}")
    rows: list[dict] = []
    if is_budgeted(runs):
        rows += _budgeted_rows(runs[runs["budget"].notna()], x_axis)
        runs = runs[runs["budget"].isna()]
    tasks = task_runs(runs)
    tasks = tasks.assign(x=x_values(tasks, x_axis))
    up = upstream_runs(runs)
    up = up.assign(x=x_values(up, x_axis))
    kw = {"ci": ci, "seed": seed}

    loglog_u: dict[tuple[str, str], tuple] = {}
    for (stage, arch), cell in up.groupby(["stage", "arch"], sort=True):
        corpus = STAGES[stage].corpus(None)
        good = cell[cell["status"] == "ok"]
        args = (good["x"].to_numpy(), good["upstream_loss"].to_numpy(), good["size"].to_numpy())
        f = fit_loglog(*args, n_boot=n_boot, **kw)
        loglog_u[stage, arch] = (good, f)
        held = _heldout(good, "x", "upstream_loss", n_boot=n_boot, **kw)
        rows.append(_row(corpus, arch, stage, "alpha_U", "loglog", x_axis,
                         cell, _nan_fields(f.as_dict()) | held))
        # Three parameters: with three sizes the curve interpolates them (no residual,
        # a collapsed interval), so the saturating form needs one size more.
        s = fit_saturating(*args, n_boot=n_boot_saturating, min_sizes=MIN_SIZES + 1, **kw)
        held = _heldout(good, "x", "upstream_loss", "saturating", n_boot=n_boot_saturating,
                        **kw)
        rows.append(_row(corpus, arch, stage, "alpha_U", "saturating", x_axis,
                         cell, _nan_fields(s.as_dict()) | held))

    for (task, arch, prior), cell in tasks.groupby(CELL, sort=True):
        good = cell[cell["status"] == "ok"]
        shared = shares_pretraining(good)
        f = fit_loglog(good["x"].to_numpy(), good["error"].to_numpy(),
                       sizes=good["size"].to_numpy(), n_boot=n_boot, size_noise=shared, **kw)
        held = _heldout(good, "x", "error", n_boot=n_boot, size_noise=shared, **kw)
        rows.append(_row(task, arch, prior, "alpha_D", "loglog", x_axis, cell,
                         _nan_fields(f.as_dict()) | held))
        if is_local(f.lack_of_fit_p) and f.n_sizes > MIN_SIZES:
            # No power law over the sizes run: the saturating law beside the local slope.
            s = fit_saturating(good["x"].to_numpy(), good["error"].to_numpy(),
                               good["size"].to_numpy(), n_boot=n_boot_saturating,
                               min_sizes=MIN_SIZES + 1, **kw)
            held = _heldout(good, "x", "error", "saturating", n_boot=n_boot_saturating, **kw)
            rows.append(_row(task, arch, prior, "alpha_D", "saturating", x_axis, cell,
                             _nan_fields(s.as_dict()) | held))
        if not transfers_upstream(prior):
            continue
        t = transfer_slope(good["upstream_loss"].to_numpy(), good["error"].to_numpy(),
                           sizes=good["size"].to_numpy(), n_boot=n_boot, size_noise=shared,
                           **kw)
        held = _heldout(good, "upstream_loss", "error", n_boot=n_boot, size_noise=shared, **kw)
        rows.append(_row(task, arch, prior, "alpha_UD", "loglog", "upstream_loss", cell,
                         _nan_fields(t.as_dict()) | held))
        up_good, f_u = loglog_u.get((PRIORS[prior].pretrain, arch), (None, None))
        if f_u is None:
            f_u = fit_loglog([], [], n_boot=0)  # refused: no upstream runs of this arch
            up_good = up.iloc[:0]
        ratio = _ratio(up_good, good, f_u, f, shared, n_boot, ci, seed)
        rows.append(_row(task, arch, prior, "alpha_D/alpha_U", "loglog", x_axis, cell,
                         ratio | _no_heldout("not a law: the ratio of two fits")))

    return pd.DataFrame(rows, columns=COLUMNS).assign(ci=ci)


def is_budgeted(runs: pd.DataFrame) -> bool:
    """Whether some run trained at a grid budget (grid.budgets)."""
    return "budget" in runs and bool(runs["budget"].notna().any())


def _budgeted_rows(runs: pd.DataFrame, x_axis: str) -> list[dict]:
    """One refused row per fit the budgeted runs would have had, saying why."""
    refused = {**_nan_fields(fit_loglog([], [], n_boot=0).as_dict()), "status": BUDGETED,
               **_no_heldout(BUDGETED)}
    rows = []
    for (stage, arch), cell in upstream_runs(runs).groupby(["stage", "arch"], sort=True):
        corpus = STAGES[stage].corpus(None)
        rows += [_row(corpus, arch, stage, "alpha_U", form, x_axis, cell, refused)
                 for form in ("loglog", "saturating")]
    for (task, arch, prior), cell in task_runs(runs).groupby(CELL, sort=True):
        rows.append(_row(task, arch, prior, "alpha_D", "loglog", x_axis, cell, refused))
        if transfers_upstream(prior):
            rows.append(_row(task, arch, prior, "alpha_UD", "loglog", "upstream_loss", cell,
                             refused))
            rows.append(_row(task, arch, prior, "alpha_D/alpha_U", "loglog", x_axis, cell,
                             refused))
    return rows


def select(fits: pd.DataFrame, metric: str, form: str = "loglog", **where) -> pd.DataFrame:
    """The rows of one metric (and form), optionally filtered by column values."""
    mask = (fits["metric"] == metric) & (fits["form"] == form)
    for column, value in where.items():
        mask &= fits[column] == value
    return fits[mask]


def write_fits(fits: pd.DataFrame, path: Path) -> None:
    write_parquet(pa.Table.from_pandas(fits, preserve_index=False), path)


def read_fits(path) -> pd.DataFrame:
    """A fits.parquet (scalestudy fit), or one ValueError naming the file."""
    try:
        fits = pd.read_parquet(path)
    except (OSError, pa.ArrowInvalid) as err:
        raise ValueError(f"{path}: not a readable Parquet file: {err}") from None
    missing = [c for c in COLUMNS if c not in fits.columns]
    if missing:
        raise ValueError(f"{path}: not a fits table (scalestudy fit): missing columns "
                         f"{', '.join(missing[:5])}{' ...' if len(missing) > 5 else ''}")
    return fits


def is_fits_table(path) -> bool:
    """Whether `path` reads as a fits table (a file `scalestudy fit` may replace)."""
    try:
        read_fits(path)
    except ValueError:
        return False
    return True


# --------------------------------------------------------------------------- the stage
# (analysis/stages.py: what runs it, writes fits.parquet and reads it back)


def run(analysis, options: FitOptions) -> pd.DataFrame:
    return fit_study(analysis.runs, options)


def write(analysis, out: Path, options: FitOptions) -> list[Path]:
    write_fits(analysis.fits, out)
    return [out]


def read(path: Path) -> pd.DataFrame:
    return read_fits(path)


def refuse(out: Path, inputs) -> None:
    refuse_overwrite(out, "a fits table", inputs, is_fits_table)


def summary(analysis, paths: list[Path]) -> str:
    return analysis.fits.drop(columns=["coef", "E", "A"]).to_string(index=False)


__all__ = [
    "CELL", "COLUMNS", "HELDOUT_COLUMNS", "METRICS", "MIN_SIZES", "TASK_STAGES", "UPSTREAM_STAGES",
    "X_AXES", "fit_study", "select", "size_order", "task_runs", "transfers_upstream",
    "upstream_runs", "write_fits", "x_values", "read_fits", "is_fits_table",
]
