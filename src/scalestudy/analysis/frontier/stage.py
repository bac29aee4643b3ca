"""The frontier's stage: fit a table's frontier (`frontier`) or a study's
(`study_frontier`: its budgeted runs), and write what it computed, the
result's files and its figures, into one directory swapped in whole
(`write_frontier`, through atomic.replacing_directory).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from ...atomic import refuse_foreign, replacing_directory
from ...errors import NoResult
from .. import MIN_SIZES
from ..figures import FIGURES
from ..options import chosen
from .approaches import (
    Line,
    approach1_curves,
    approach1_final,
    approach2,
    approach3,
    interval,
    predictions,
)
from .inputs import CURVE_REQUIRED, assign_budgets, default_by, exclusion, prepare, read_table
from .options import COMPUTE_AXES, METHODS, FrontierOptions
from .result import (
    BANDS_COLUMNS,
    EXCLUDED_COLUMNS,
    FILES,
    FITS_COLUMNS,
    FRONTIER_COLUMNS,
    LOSS_PARAMETERS,
    PROFILE_COLUMNS,
    FrontierResult,
)
from .study import fit_table

# One decade beyond the largest compute point: the loss figure's extrapolation.
EXTRAPOLATE_DECADES = 1.0


def _fit_rows(line: Line, method: str, by, key, predict: np.ndarray, n_boot: int,
              ci: float) -> list[dict]:
    base = {"method": method, **dict(zip(by, key, strict=True)), "status": line.status,
            "n_points": line.n_points, "a": line.a, "b": line.b, "n_coef": line.n_coef,
            "d_coef": line.d_coef, "n_boot": n_boot, "ci": ci}
    for name, col in (("a", 0), ("b", 2)):
        lo = hi = np.nan
        if line.boot is not None and len(line.boot):
            lo, hi = interval(line.boot[:, col], ci, method, line)
        base[f"{name}_low"], base[f"{name}_high"] = lo, hi
    base["n_boot_used"] = 0 if line.boot is None else len(line.boot)
    f = line.chin
    for col, name in LOSS_PARAMETERS.items():
        base[col] = getattr(f, name) if (f is not None and method == "approach3") else np.nan
    if predict.size == 0:
        return [{**base, "predict_compute": np.nan}]
    p = predictions(line, method, predict, ci)
    rows = []
    for j, C in enumerate(predict):
        row = {**base, "predict_compute": float(C)}
        for name in ("n", "d", "loss"):
            row[f"{name}_opt_pred"] = p[name][j]
            row[f"{name}_opt_low"] = p[f"{name}_low"][j]
            row[f"{name}_opt_high"] = p[f"{name}_high"][j]
        rows.append(row)
    return rows


def _band_rows(line: Line, method: str, by, key, C: np.ndarray, ci: float) -> list[dict]:
    if line.status != "ok":
        return []
    p = predictions(line, method, C, ci)
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


def frontier(
    table,
    out_dir=None,
    predict: Iterable[float] = (),
    by: Sequence[str] | None = None,
    *,
    curves=None,
    options: FrontierOptions | None = None,
    **changes,
) -> FrontierResult:
    """The compute-optimal frontier of a runs table by Hoffmann et al.'s approaches 1-3,
    with `options` (options.FrontierOptions; `changes`: some of them changed, by name).

    `table`: a DataFrame or the path of a CSV/Parquet file (its columns:
    inputs.py). `curves`: optional per-step curves for approach 1 (DataFrame or
    path; columns run, params, loss, compute and/or tokens, and the `by` columns);
    without them approach 1 uses the final points. `by`: the group columns (default:
    arch and prior, those present). `predict`: compute budgets (FLOPs) at which each
    fit predicts N_opt and D_opt. `min_sizes`: the sizes an IsoFLOP budget needs
    for approach 2 (at least 3); `window`: approach 2 fits its parabola on the
    sizes within this many decades of the lowest-loss one (and always its
    neighbours). `compute_axis`: "counted" (the table's compute) or "6nd"
    (C = 6 N D), the C of every approach's N_opt ~ C^a. With `out_dir`, writes
    its files and (with `figures`) its figures there (`write_frontier`); without
    it, writes nothing. Every budget or point left out is in `excluded` and (unless
    `quiet`) printed to stderr. Where no approach fits any group, nothing is
    written: errors.NoResult.
    """
    options = chosen(FrontierOptions, options, changes)
    n_boot, ci, seed, methods = options.n_boot, options.ci, options.seed, options.methods
    min_sizes, window, compute_axis = options.min_sizes, options.window, options.compute_axis
    source = str(table) if not isinstance(table, pd.DataFrame) else "table"
    if out_dir is not None:  # refused before the fits, not after them
        _check_replaceable(Path(out_dir), [x for x in (table, curves)
                                           if x is not None and not isinstance(x, pd.DataFrame)])
    if not isinstance(table, pd.DataFrame):
        table = read_table(table)
    by = default_by(table) if by is None else tuple(by)
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
    runs, excluded = prepare(table, by, source)
    if runs.empty:
        raise ValueError(f"{source}: no row with positive finite params, compute, tokens "
                         "and loss")
    curve_df = None
    if curves is not None:
        csource = str(curves) if not isinstance(curves, pd.DataFrame) else "curves"
        if not isinstance(curves, pd.DataFrame):
            curves = read_table(curves)
        curve_df, cexcl = prepare(curves, by, csource, CURVE_REQUIRED)
        excluded += cexcl
        if compute_axis == "6nd":
            curve_df["compute"] = 6.0 * curve_df["params"] * curve_df["tokens"]
    runs = assign_budgets(runs, options.budget_gap, compute_axis)
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
                r, e, line = approach1_curves(cur, obys, okey, n_boot, rngs["approach1"],
                                               options.n_grid)
            else:
                r, e, line = approach1_final(sub, obys, okey, n_boot, rngs["approach1"],
                                              options.max_span, grouped_by_gap, compute_axis)
            frontier_rows += [{**dict(zip(obys, okey, strict=True)), **x} for x in r]
            excluded += e
            lines["approach1"] = line
        budget_cs = np.sort(sub["_axis_budget_compute"].unique())
        if "approach2" in methods:
            r, e, prof, line = approach2(sub, obys, okey, n_boot, rngs["approach2"],
                                          min_sizes, window, options.max_span, grouped_by_gap,
                                          compute_axis)
            frontier_rows += [{**dict(zip(obys, okey, strict=True)), **x} for x in r]
            excluded += e
            profile_rows += [{**dict(zip(obys, okey, strict=True)), **x} for x in prof]
            lines["approach2"] = line
        if "approach3" in methods:
            line = approach3(sub, n_boot, rngs["approach3"], options.n_polish, compute_axis)
            lines["approach3"] = line
            if line.status == "ok":
                p = predictions(line, "approach3", budget_cs, ci)
                for j, C in enumerate(budget_cs):
                    frontier_rows.append({**dict(zip(obys, okey, strict=True)),
                                          "method": "approach3", "compute": float(C),
                                          "n_opt": p["n"][j], "d_opt": p["d"][j],
                                          "loss_opt": p["loss"][j], "n_sizes": np.nan})
            else:
                excluded.append(exclusion("approach3", obys, okey, np.nan,
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
                excluded.append(exclusion(m, obys, okey, np.nan, np.nan,
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
        loss_label=options.loss_label,
        exponent_replicates=replicates,
    )
    if not options.quiet:
        where = Path(out_dir) / "excluded.csv" if out_dir is not None else "result.excluded"
        for line in result.excluded_lines(str(where)):
            print(line, file=sys.stderr)
    if out_dir is not None and not result.fits["status"].eq("ok").any():
        raise NoResult(f"{source}: no approach could fit a frontier in any group (why, per "
                       "approach: the lines above)")
    if out_dir is not None:
        result.paths = write_frontier(result, out_dir, options.figures)
    return result


def study_frontier(runs: pd.DataFrame, out_dir=None, options: FrontierOptions | None = None,
                   **changes) -> FrontierResult | None:
    """The frontier of a study's budgeted runs (`study.fit_table`: one per
    architecture and prior), as `frontier` fits any table; None when the study
    has no finished budgeted run, or none that any approach fits (its claims
    then lack data, and the study's other analyses go on)."""
    table = fit_table(runs)
    if table.empty:
        return None
    try:
        return frontier(table, out_dir, options=options, **changes)
    except NoResult as why:
        print(f"frontier: none: {why}", file=sys.stderr)
        return None


def write_frontier(result: FrontierResult, out_dir, figures: bool = True) -> list[Path]:
    """The result's files (result.FILES) and, with `figures`, the frontier's
    figures of the figure registry, into `out_dir`, replaced whole: a reader sees
    the old directory or the new one, and an error leaves the old one. A
    directory holding anything but a frontier's files is refused, never
    replaced (a mistyped --out-dir must not take a study's results with it)."""
    out_dir = Path(out_dir)
    _check_replaceable(out_dir)
    with replacing_directory(out_dir) as staged:
        names = [path.name for path in result.write(staged)]
        if figures:
            from ..figures.draw import draw_frontier  # matplotlib only when drawing

            names += [path.name for path in draw_frontier(result, staged)]
    return [out_dir / name for name in names]


def _check_replaceable(out_dir: Path, inputs=()) -> None:
    """ValueError when `out_dir` is a file, holds one of `inputs`, or holds
    anything the frontier does not write."""
    figures = {f"{name}.{ext}" for name, figure in FIGURES.items() if figure.from_frontier
               for ext in ("png", "pdf", "csv")}
    refuse_foreign(out_dir, {*FILES, *figures}, "a frontier's", inputs)


# --------------------------------------------------------------------------- the stage
# (analysis/stages.py: a study's frontier/; `scalestudy frontier --from-runs` is its
# command, which fits any table too)


def run(analysis, options: FrontierOptions) -> FrontierResult | None:
    return study_frontier(analysis.runs, options=options)


def write(analysis, out: Path, options: FrontierOptions) -> list[Path]:
    """Its files alone: in a study its figures are the figures stage's."""
    if analysis.frontier is None:  # no budgeted run, or none a frontier fits
        return []
    return write_frontier(analysis.frontier, out, figures=False)


def read(path: Path) -> FrontierResult:
    return FrontierResult.read(path)


def refuse(out: Path, inputs) -> None:
    _check_replaceable(out, inputs)
