"""The prediction's stage: fit each group's ladder, predict the targets, and
write the result and its figure into one directory swapped in whole
(`write_prediction`, through atomic.replacing_directory, as the frontier's
stage writes frontier/).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from ...atomic import refuse_foreign, replacing_directory
from ...errors import NoResult
from ..frontier.options import COMPUTE_AXES
from ..options import chosen
from ..stats import percentile_ci
from .calibration import CALIBRATION_COLUMNS
from .chain import Chain, Ladder, Method, Settings
from .curves import checkpoint_ladder
from .downstream import NAMES as METRIC_NAMES
from .downstream import MetricMap, sigmoid
from .fitting import fit_group
from .holdout import HOLDOUT_COLUMNS, holdout
from .inputs import TokenCost, parse_targets, prepare_ladder, read_ladder
from .loss import LossLaw, parse_prior
from .loss_map import NAMES as MAP_NAMES
from .loss_map import LossMap
from .options import STEP1_POINTS, PredictOptions
from .result import (
    EXCLUDED_COLUMNS,
    FIGURE_FILES,
    FILES,
    FIT_COLUMNS,
    METRIC_COLUMNS,
    PREDICTION_COLUMNS,
    RUN_COLUMNS,
    TASK_COLUMNS,
    PredictionResult,
)
from .select import SELECTION_COLUMNS

PATH_POINTS = 48  # points of each target's path in the figure
# A target beyond this multiple of the ladder's largest compute (three decades)
# is too far for an interval to mean anything: its status says so, and it has none.
FAR_BEYOND = 1e3


def predict(table, out_dir=None, at: Sequence = (), by: Sequence[str] | None = None, *,
            metric: str | None = None, task_loss: str | None = None,
            with_holdout: bool = False, from_runs: bool = False, checkpoints: bool = False,
            options: PredictOptions | None = None, **changes) -> PredictionResult:
    """Predict the loss (and, with `metric`, a downstream metric; with
    `task_loss`, the task loss the metric is a sigmoid of) of runs at the
    targets `at` ("N:D" texts or (N, D) pairs) from a ladder of runs.

    `table`: a DataFrame or a CSV/Parquet path (inputs.py: its columns; a study's
    run records with `from_runs`; with `checkpoints`, a study's results
    directory, whose runs' validation curves are the ladder: curves.py); `by`:
    the group columns (default arch and prior, those present), one fit per
    group. `options`: options.PredictOptions (`changes`: some of them changed, by
    name). With `out_dir`, writes the files (result.py) and, with `figures`,
    the figure there; without it, writes nothing. Bad input raises
    ValueError before anything is written, and a ladder no group's law fits
    errors.NoResult.
    """
    options = chosen(PredictOptions, options, changes)
    n_boot, ci, seed, n_polish = options.n_boot, options.ci, options.seed, options.n_polish
    compute_axis, min_fraction, quiet = options.compute_axis, options.min_fraction, options.quiet
    targets = (parse_targets(at) if all(isinstance(t, str) for t in at)
               else np.asarray(at, dtype=float).reshape(-1, 2))
    _check_options(targets, options)
    settings = Settings(n_boot, ci, n_polish, prior=parse_prior(options.e_prior),
                        method=Method(options.form, options.path, options.link),
                        select=options.select, calibrate=options.calibrate,
                        origins=options.origins)
    inputs = [] if isinstance(table, pd.DataFrame) else [table]
    if out_dir is not None:  # refused before the fits, not after them
        refuse_foreign(Path(out_dir), {*FILES, *FIGURE_FILES}, "a prediction's", inputs)
    if checkpoints:
        frame, notes = checkpoint_ladder(table)
        source = str(table)
    else:
        (frame, source), notes = read_ladder(table, from_runs), []
    runs, by, cleaned = prepare_ladder(frame, source, by, metric, min_fraction, task_loss)
    excluded = pd.DataFrame(notes + cleaned, columns=EXCLUDED_COLUMNS)
    if not quiet and len(excluded):
        print(f"predict: left out {len(excluded)} set(s) of rows ({source}); each with its "
              f"reason in excluded.csv:", file=sys.stderr)
        for what, why in excluded.head(3).itertuples(index=False):
            print(f"  {what}: {why}", file=sys.stderr)
        if len(excluded) > 3:
            print(f"  ... and {len(excluded) - 3} more", file=sys.stderr)

    runs["_axis_compute"] = (runs["compute"] if compute_axis == "counted"
                             else 6.0 * runs["params"] * runs["tokens"])
    step1 = options.step1_points if "step" in runs else "checkpoints"
    out = {key: [] for key in ("predictions", "fit", "runs", "paths", "holdout", "selection",
                               "calibration")}
    for gi, (key, sub) in enumerate(runs.groupby("_group", sort=True)):
        group = dict(zip(by, key, strict=True))
        rng = np.random.default_rng([seed, gi])
        cost = TokenCost(sub, compute_axis)
        ladder = Ladder.of(sub, step1, options.final_evals, task=task_loss is not None,
                           metric=metric is not None)
        fitted = fit_group(ladder, settings, rng)
        chain = fitted.chain
        common = {"n_boot": n_boot, "ci": ci, "resampling": chain.resampling,
                  "compute_axis": compute_axis}
        out["fit"] += [{**group, **r} for r in _fit_rows(chain, ci, common, fitted)]
        out["predictions"] += [{**group, **r} for r in _prediction_rows(
            chain, metric, task_loss, targets, ladder, cost, ci, rng)]
        out["runs"].append(_run_rows(sub, ladder, chain, by, compute_axis, metric, task_loss))
        if chain.law.ok:
            out["paths"] += [{**group, **r} for r in _path_rows(chain.law, targets, sub, cost,
                                                               ci)]
        if fitted.selection is not None:
            out["selection"].append(fitted.selection.assign(**group))
        out["calibration"].append(fitted.calibration.table().assign(**group))
        if with_holdout:
            out["holdout"].append({**group, **holdout(ladder, settings, rng)})

    columns = (PREDICTION_COLUMNS + (TASK_COLUMNS if task_loss is not None else [])
               + (METRIC_COLUMNS if metric is not None else []))
    result = PredictionResult(
        predictions=pd.DataFrame(out["predictions"], columns=[*by, *columns]),
        fit=pd.DataFrame(out["fit"], columns=[*by, *FIT_COLUMNS]),
        runs=pd.concat(out["runs"], ignore_index=True),
        paths=pd.DataFrame(out["paths"]),
        holdout=(pd.DataFrame(out["holdout"], columns=[*by, *HOLDOUT_COLUMNS])
                 if with_holdout else None),
        excluded=excluded,
        by=by,
        settings={"input": source, "by": list(by), "targets": targets.tolist(), "ci": ci,
                  "n_boot": n_boot,
                  "seed": seed, "n_polish": n_polish, "compute_axis": compute_axis,
                  "metric": metric, "task_loss": task_loss, "holdout": with_holdout,
                  "min_fraction": min_fraction, "checkpoints": "step" in runs,
                  "step1_points": step1, "final_evals": options.final_evals,
                  "form": options.form, "e_prior": options.e_prior, "path": options.path,
                  "link": options.link, "select": options.select,
                  "calibrate": options.calibrate, "origins": options.origins,
                  "loss_label": options.loss_label},
        selection=(pd.concat(out["selection"], ignore_index=True)[[*by, *SELECTION_COLUMNS]]
                   if options.select else None),
        calibration=pd.concat(out["calibration"], ignore_index=True).reindex(
            columns=[*by, *CALIBRATION_COLUMNS]),
    )
    if out_dir is not None and not result.predictions["loss"].notna().any():
        statuses = result.fit.loc[result.fit["law"] == "loss", "status"].unique()
        raise NoResult(f"{source}: no group's L(N, D) could be fitted ({'; '.join(statuses)}), "
                       "so there is no prediction")
    if out_dir is not None:
        result.files = write_prediction(result, out_dir, options.figures)
    return result


def _check_options(targets, options: PredictOptions) -> None:
    n_boot, ci, compute_axis = options.n_boot, options.ci, options.compute_axis
    min_fraction, n_polish = options.min_fraction, options.n_polish
    if not (np.isfinite(targets).all() and (targets > 0).all() and len(targets)):
        raise ValueError("at: targets must be positive (N, D) pairs, e.g. 70e9:1.4e12")
    if not 0 < ci < 1:
        raise ValueError(f"--ci: got {ci}; accepted: a level strictly between 0 and 1 "
                         "(e.g. 0.95)")
    if n_boot < 0:
        raise ValueError(f"--n-boot: got {n_boot}; accepted: 0 (no intervals) or more")
    if compute_axis not in COMPUTE_AXES:
        raise ValueError(f"--compute-axis: got {compute_axis!r}; accepted values: "
                         f"{', '.join(COMPUTE_AXES)}")
    if not 0 <= min_fraction < 1:
        raise ValueError(f"--min-fraction: got {min_fraction}; accepted: a fraction in "
                         "[0, 1)")
    if n_polish is not None and n_polish < 1:
        raise ValueError(f"--n-polish: got {n_polish}; accepted: 1 or more starts")
    if options.step1_points not in STEP1_POINTS:
        raise ValueError(f"--step1-points: got {options.step1_points!r}; accepted values: "
                         f"{', '.join(STEP1_POINTS)}")
    if options.final_evals < 1:
        raise ValueError(f"--final-evals: got {options.final_evals}; accepted: 1 or more")
    if options.origins < 1:
        raise ValueError(f"--origins: got {options.origins}; accepted: 1 or more")


def _interval(samples: np.ndarray, ci: float) -> tuple[float, float]:
    samples = samples[np.isfinite(samples)]
    return percentile_ci(samples, ci) if samples.size else (np.nan, np.nan)


def _fit_rows(chain: Chain, ci: float, common: dict, fitted) -> list[dict]:
    """fit.csv's rows of a group: each law of its chain, one row a parameter."""
    method = chain.method.label(chain.task, chain.mapping is not None)
    base = {**common, "method": method, "calibration": fitted.calibration.status}
    scales = fitted.calibration.scales
    rows = _law_rows(chain.law, "loss", ci, {**base, "scale": scales["loss"]})
    if chain.task_law is not None:
        rows += _law_rows(chain.task_law, "task", ci, {**base, "scale": scales["task"]})
    if chain.loss_map is not None:
        rows += _map_rows(chain.loss_map, ci, {**base, "scale": scales["task"]})
    if chain.mapping is not None:
        rows += _mapping_rows(chain.mapping, ci, {**base, "scale": scales["metric"]})
    return rows


def _law_rows(law: LossLaw, name: str, ci: float, common: dict) -> list[dict]:
    base = {**common, "law": name, "status": law.status,
            "warnings": "; ".join(law.warnings), "n_points": law.n_points,
            "n_sizes": law.n_sizes, "n_boot_used": len(law.replicates),
            "condition_number": law.condition,
            "residual_sd": float(np.std(law.residuals, ddof=5)) if law.ok else np.nan}
    if not law.ok:
        return [{**base, "parameter": name, "value": np.nan, "low": np.nan, "high": np.nan}
                for name in ("E", "A", "alpha", "B", "beta")]
    params = law.parameters()
    return [{**base, "parameter": name, "value": params[name][0],
             **dict(zip(("low", "high"), _interval(params[name][1], ci), strict=True))}
            for name in ("E", "A", "alpha", "B", "beta")]


def _map_rows(loss_map: LossMap, ci: float, common: dict) -> list[dict]:
    base = {**common, "law": "loss-to-loss", "status": loss_map.status, "warnings": "",
            "n_points": loss_map.n_points, "n_sizes": np.nan, "r2": loss_map.r2,
            "n_boot_used": int(np.isfinite(loss_map.replicates).all(axis=1).sum()),
            "residual_sd": float(np.std(loss_map.noise)) if loss_map.ok else np.nan}
    if not loss_map.ok:
        return [{**base, "parameter": name, "value": np.nan, "low": np.nan, "high": np.nan}
                for name in MAP_NAMES]
    params = loss_map.parameters()
    return [{**base, "parameter": name, "value": params[name][0],
             **dict(zip(("low", "high"), _interval(params[name][1], ci), strict=True))}
            for name in MAP_NAMES]


def _mapping_rows(mapping: MetricMap, ci: float, common: dict) -> list[dict]:
    good = (mapping.replicates[np.isfinite(mapping.replicates).all(axis=1)]
            if mapping.ok else np.empty((0, 4)))
    base = {**common, "law": "metric", "status": mapping.status, "warnings": "",
            "n_points": mapping.n_points, "n_sizes": np.nan, "n_boot_used": len(good),
            "residual_sd": float(np.std(mapping.noise)) if mapping.ok else np.nan,
            "r2": mapping.r2, "signal_p": mapping.signal_p,
            "lack_of_fit_p": mapping.lack_of_fit_p}
    rows = []
    for i, name in enumerate(METRIC_NAMES):
        value = mapping.params[i] if mapping.ok else np.nan
        low, high = _interval(good[:, i], ci) if len(good) else (np.nan, np.nan)
        rows.append({**base, "parameter": name, "value": value, "low": low, "high": high})
    return rows


def _prediction_rows(chain: Chain, metric, task_loss, targets, ladder: Ladder, cost, ci,
                     rng) -> list[dict]:
    runs = ladder.points
    law, mapping = chain.law, chain.mapping
    Nt, Dt = targets[:, 0], targets[:, 1]
    compute = cost.compute(Nt, Dt)
    rows = []
    base = {"compute_axis": cost.axis, "ci": ci, "status": law.status}
    nan = dict.fromkeys(("loss", "loss_low", "loss_high", "loss_fit_low", "loss_fit_high"),
                        np.nan)
    drawn = chain.predict(Nt, Dt, rng)
    reps = law.mean(Nt, Dt)[1] if law.ok else np.empty((0, len(Nt)))
    for j in range(len(targets)):
        row = {**base, "n": Nt[j], "d": Dt[j], "compute": compute[j],
               "n_ratio": Nt[j] / runs["params"].max(),
               "compute_ratio": compute[j] / runs["_axis_compute"].max(), **nan}
        outside = _outside(Nt[j], Dt[j], row["compute_ratio"], runs)
        far = outside is not None and outside.startswith("far beyond")
        if law.ok and outside:
            row["status"] = outside
        if law.ok:
            row["loss"] = drawn["loss"].point[j]
            if len(reps) and not far:
                row["loss_low"], row["loss_high"] = _interval(drawn["loss"].raw[:, j], ci)
                row["loss_fit_low"], row["loss_fit_high"] = _interval(reps[:, j], ci)
        feed = drawn["loss"]
        if task_loss is not None:
            task = drawn["task"]
            row.update(task_loss_name=task_loss, task_loss=np.nan, task_loss_low=np.nan,
                       task_loss_high=np.nan, task_status=chain.task_status() or law.status)
            if task is not None:
                row["task_loss"] = task.point[j]
                if task.raw.size and not far:
                    row["task_loss_low"], row["task_loss_high"] = _interval(task.raw[:, j], ci)
            feed = task
        if metric is not None:
            row.update(metric_name=metric, metric=np.nan, metric_low=np.nan,
                       metric_high=np.nan, metric_status=mapping.status)
            if mapping.ok and drawn["metric"] is not None:
                row["metric"] = float(drawn["metric"].point[j])
                row["metric_status"] = outside if far else mapping.note(feed.point[j])
                if (drawn["metric"].raw.size and not far
                        and not mapping.far(feed.point[j])):
                    row["metric_low"], row["metric_high"] = _interval(
                        drawn["metric"].raw[:, j], ci)
        rows.append(row)
    return rows


def _outside(n: float, d: float, compute_ratio: float, runs: pd.DataFrame) -> str | None:
    """Why a target lies where the ladder says nothing (below its smallest N or
    D, or over FAR_BEYOND times its largest compute), else None."""
    n_min, d_min = runs["params"].min(), runs["tokens"].min()
    if n < n_min or d < d_min:
        return (f"outside the ladder: below its smallest {'N' if n < n_min else 'D'} "
                f"({n_min if n < n_min else d_min:.3g}), where the law was not measured")
    if compute_ratio > FAR_BEYOND:
        return (f"far beyond the ladder: {compute_ratio:.3g}x its largest compute (over "
                f"{FAR_BEYOND:g}x), where no interval is meaningful")
    return None


def _run_rows(runs, ladder: Ladder, chain: Chain, by, compute_axis, metric, task_loss,
              ) -> pd.DataFrame:
    """runs.csv: every row kept (step 2's), the loss law's fit at it, and whether
    step 1 fitted it (a run's last row where step 1 reads final points)."""
    law, mapping = chain.law, chain.mapping
    N, D, L = (runs[c].to_numpy(dtype=float) for c in ("params", "tokens", "loss"))
    fitted = law.fit.predict(N, D) if law.ok else np.full(len(runs), np.nan)
    extra = [c for c in ("run", "step", "seed") if c in runs]
    table = runs[[*by, *extra, "params", "tokens", "loss"]].assign(
        compute_axis=compute_axis, compute=runs["_axis_compute"], fitted=fitted,
        residual=np.log(L) - np.log(fitted))
    table = table[[*by, *extra, *RUN_COLUMNS]]
    last = runs.groupby("_unit")["tokens"].transform("max") == runs["tokens"]
    table["step1"] = (last if len(ladder.finals) < len(ladder.points) else True)
    link = L
    if task_loss is not None:
        link = runs["_task"].to_numpy(dtype=float)
        table[task_loss] = link
        task = chain.task_law
        if task is not None and task.ok:
            table[f"{task_loss}_fitted"] = task.fit.predict(N, D)
        elif chain.loss_map is not None and chain.loss_map.ok:
            table[f"{task_loss}_fitted"] = chain.loss_map.predict(L)
        else:
            table[f"{task_loss}_fitted"] = np.nan
    if metric is not None:
        table[metric] = runs["_metric"].to_numpy()
        table[f"{metric}_fitted"] = (sigmoid(mapping.params, link) if mapping is not None
                                     and mapping.ok else np.nan)
    return table


def _path_rows(law, targets, runs, cost, ci) -> list[dict]:
    """Each target's path: N and D scaled together (the target's tokens per
    parameter) from the ladder's smallest compute to the target's."""
    rows = []
    c_min = float(runs["_axis_compute"].min())
    for j, (n, d) in enumerate(targets):
        c_target = float(cost.compute(n, d))
        # Compute grows about as t^2 along the path (N and D both times t).
        t = np.geomspace(min(1.0, np.sqrt(c_min / c_target)), 1.0, PATH_POINTS)
        N, D = n * t, d * t
        point, reps = law.mean(N, D)
        low = high = np.full(t.size, np.nan)
        if len(reps):
            low, high = np.quantile(reps, [(1 - ci) / 2, (1 + ci) / 2], axis=0)
        rows += [{"target": j, "n": N[i], "d": D[i], "compute": float(cost.compute(N[i], D[i])),
                  "loss": point[i], "loss_fit_low": low[i], "loss_fit_high": high[i]}
                 for i in range(t.size)]
    return rows


def write_prediction(result: PredictionResult, out_dir, figures: bool = True) -> list[Path]:
    """The result's files and, with `figures`, its figure, into `out_dir`,
    replaced whole: a reader sees the old directory or the new one, and an error
    leaves the old one. A directory holding anything but a prediction's files is
    refused, never replaced (a mistyped --out-dir must not take other results
    with it)."""
    out_dir = Path(out_dir)
    refuse_foreign(out_dir, {*FILES, *FIGURE_FILES}, "a prediction's")
    with replacing_directory(out_dir) as staged:
        names = [path.name for path in result.write(staged)]
        if figures:
            from .figure import draw  # matplotlib only when drawing

            names += [path.name for path in draw(result, staged)]
    return [out_dir / name for name in names]
