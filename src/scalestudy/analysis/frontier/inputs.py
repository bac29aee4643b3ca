"""The frontier's input: a table of runs, checked and cleaned, and its budgets.

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

Budgets (the IsoFLOP groups) are the table's on either compute axis: its
`budget` labels, or its `compute` grouped by gaps. A table with `tokens` or
`compute` alone has C = 6ND on both axes.

A row whose params, compute, tokens or loss is not a positive finite number is
left out with its reason (method "input"). A missing required column raises
ValueError naming it and the accepted columns.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

REQUIRED = ("params", "loss")
ONE_OF = ("compute", "tokens")
CURVE_REQUIRED = ("run", "params", "loss")
DEFAULT_BY = ("arch", "prior")


def read_table(path) -> pd.DataFrame:
    """A CSV or Parquet table, by the file's suffix; one ValueError naming the
    file where it is missing, empty or not readable as that format."""
    import pyarrow as pa

    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in (".parquet", ".pq", ".csv"):
        raise ValueError(f"{path}: not a table: expected a .csv or .parquet file")
    if not path.is_file():
        raise ValueError(f"{path}: no such file" if not path.exists() else
                         f"{path}: a directory, not a .csv or .parquet file")
    kind = "CSV" if suffix == ".csv" else "Parquet"
    try:
        table = pd.read_csv(path) if suffix == ".csv" else pd.read_parquet(path)
    except pd.errors.EmptyDataError:
        raise ValueError(f"{path}: empty: no header and no rows") from None
    except (UnicodeDecodeError, pd.errors.ParserError, OSError, pa.ArrowException) as err:
        raise ValueError(f"{path}: not a readable {kind} table "
                         f"({str(err).splitlines()[0][:120]})") from None
    if table.empty:
        raise ValueError(f"{path}: no rows (columns: "
                         f"{', '.join(map(str, table.columns)) or 'none'})")
    return table


def _accepted_text() -> str:
    return ("params, loss, compute and/or tokens (at least one), optional arch, prior, "
            "budget")


def present_columns(table: pd.DataFrame) -> str:
    """The table's columns as a message names them (the first dozen)."""
    names = [str(c) for c in table.columns]
    return ", ".join(names[:12]) + (f" ... ({len(names)} in all)" if len(names) > 12 else "")


def default_by(table: pd.DataFrame) -> tuple[str, ...]:
    return tuple(c for c in DEFAULT_BY if c in table.columns)


def _check_columns(table: pd.DataFrame, by: Sequence[str], source: str,
                   required: Sequence[str] = REQUIRED) -> None:
    cols = set(table.columns)
    for col in required:
        if col not in cols:
            raise ValueError(
                f"{source}: missing column {col!r}; columns present: {present_columns(table)}; "
                f"accepted columns: {_accepted_text()}"
                + (", and run (the run's id) in curves" if "run" in required else "")
            )
    if not cols & set(ONE_OF):
        raise ValueError(
            f"{source}: missing column 'compute' (or 'tokens'): one of them is needed; "
            f"columns present: {present_columns(table)}; accepted columns: {_accepted_text()}"
        )
    for col in by:
        if col not in cols:
            raise ValueError(
                f"{source}: missing column {col!r} named in by={tuple(by)}; "
                f"columns present: {', '.join(map(str, table.columns))}"
            )


NUMERIC = ("params", "loss", *ONE_OF)


def check_numbers(table: pd.DataFrame, columns: Sequence[str], source: str) -> None:
    """ValueError naming the first of `columns` (those present) that is not
    numbers: booleans, or text that does not read as a number (an empty cell
    is a missing value, left out later with its reason)."""
    for col in columns:
        if col not in table:
            continue
        values = table[col]
        if pd.api.types.is_bool_dtype(values):
            raise ValueError(f"{source}: column {col!r} holds booleans (True/False); "
                             "accepted: numbers")
        if pd.api.types.is_numeric_dtype(values):
            continue
        text = values.astype(object).where(values.notna(), "").astype(str).str.strip()
        parsed = pd.to_numeric(text.where(text != ""), errors="coerce")
        bad = (text != "") & parsed.isna() | text.str.lower().isin(("true", "false"))
        if bad.any():
            rows = np.flatnonzero(bad.to_numpy())
            shown = ", ".join(f"{i} ({text.iloc[i][:20]!r})" for i in rows[:3])
            raise ValueError(f"{source}: column {col!r} is not numbers: rows (0-based) "
                             f"{shown}{' ...' if len(rows) > 3 else ''}; accepted: numbers")


def refuse_duplicates(table: pd.DataFrame, source: str) -> None:
    """ValueError naming the first rows that repeat another row whole: the same
    run twice would count as two independent measurements."""
    twice = table.astype(str).duplicated(keep=False).to_numpy()
    if twice.any():
        rows = np.flatnonzero(twice)
        raise ValueError(f"{source}: {len(rows)} rows repeat another row exactly, e.g. rows "
                         f"(0-based) {', '.join(map(str, rows[:4]))}"
                         f"{' ...' if len(rows) > 4 else ''}: each run (or checkpoint) must "
                         "appear once; drop the duplicates (a table stacked twice?)")


def prepare(table: pd.DataFrame, by: Sequence[str], source: str,
            required: Sequence[str] = REQUIRED) -> tuple[pd.DataFrame, list[dict]]:
    """Check columns, types and duplicates, derive compute or tokens, drop rows
    that are not positive finite.

    Returns the clean frame (with `_group`) and the exclusion rows of the dropped ones.
    """
    _check_columns(table, by, source, required)
    check_numbers(table, NUMERIC, source)
    df = table.reset_index(drop=True)  # row numbers in messages: 0-based positions
    refuse_duplicates(df, source)
    for col in NUMERIC:
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
            excluded.append(exclusion(
                "input", by, key, np.nan, np.nan,
                f"{len(rows)} row(s) left out: params, compute, tokens and loss must be "
                f"positive finite numbers",
                f"{source} rows (0-based) {numbers}{more}",
            ))
    return df.loc[good].copy(), excluded


def exclusion(method, by, key, compute, n_sizes, reason, detail="") -> dict:
    """A row of excluded.csv: what was left out (by `method`, of group `key`), and why."""
    row = {"method": method, "compute": compute, "n_sizes": n_sizes, "reason": reason,
           "detail": detail}
    row.update(dict(zip(by, key, strict=True)))
    return row


def _geomean(v: np.ndarray) -> float:
    """The geometric mean; exactly the values' when they agree."""
    return float(v[0]) if (v == v[0]).all() else float(np.exp(np.log(v).mean()))


def assign_budgets(df: pd.DataFrame, gap: float, axis: str) -> pd.DataFrame:
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
