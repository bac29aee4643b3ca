"""What the frontier's stage computes (`FrontierResult`), the files it is written
as, and reading them back: the figures and the claims draw on the one or the
other, never on a fit of their own. numpy and pandas only, so that the DAG can
name the files without importing the fits.

The files (`FILES`), in a directory the stage replaces whole:

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
- `frontier_runs.csv`: `RUNS_COLUMNS`: the runs fitted, each with its budget
  (numbered in order of compute, as in frontier_profiles.csv), the budget's
  compute as the table counts it and on the compute axis.
- `frontier_replicates.csv`: method, by columns, a: each ok fit's bootstrap
  replicates of its exponent a, in order (the exponent claim pairs two fits'
  replicates).
- `frontier.json`: the group columns, the compute axis and the figures' loss
  label.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from .options import LOSS_LABEL, METHODS

METHOD_LABELS = {
    "approach1": "approach 1 (envelope)",
    "approach2": "approach 2 (IsoFLOP)",
    "approach3": "approach 3 (parametric)",
}
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
# frontier_runs.csv's name of each budget column the fits add to the runs.
RUN_BUDGET_COLUMNS = {"_budget": "budget", "_budget_compute": "budget_compute",
                      "_axis_budget_compute": "axis_budget_compute"}
RUN_VALUES = ["params", "tokens", "compute", "loss"]
RUNS_COLUMNS = [*RUN_BUDGET_COLUMNS.values(), *RUN_VALUES]

# Each table's file and the FrontierResult field it holds.
TABLES = {
    "frontier.csv": "frontier",
    "frontier_fits.csv": "fits",
    "excluded.csv": "excluded",
    "frontier_bands.csv": "bands",
    "frontier_profiles.csv": "profiles",
}
RUNS = "frontier_runs.csv"
REPLICATES = "frontier_replicates.csv"
SETTINGS = "frontier.json"
FILES = (*TABLES, RUNS, REPLICATES, SETTINGS)


@dataclass
class FrontierResult:
    """Everything the frontier's stage computed: the tables it writes, and the
    runs it used.

    `runs` is the cleaned input with `_budget` (budget id within the group),
    `_budget_compute` (as the table counts it) and `_axis_budget_compute` (on
    `compute_axis`) added. `exponent_replicates` maps (method, *group) to the
    bootstrap replicates of that fit's exponent a (for comparing two groups'
    exponents).
    """

    frontier: pd.DataFrame
    fits: pd.DataFrame
    excluded: pd.DataFrame
    bands: pd.DataFrame
    profiles: pd.DataFrame
    runs: pd.DataFrame
    by: tuple[str, ...]
    compute_axis: str = "counted"
    loss_label: str = LOSS_LABEL
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

    # ------------------------------------------------------------------ groups

    def groups(self) -> list[tuple[str, ...]]:
        """Every group's values of `by`, sorted."""
        keys = self.runs[list(self.by)].drop_duplicates()
        return sorted(tuple(str(v) for v in row) for row in keys.itertuples(index=False))

    def group(self, **values) -> tuple[str, ...]:
        """The one group with these values of its `by` columns (arch="s4",
        prior="upstream"); ValueError naming the groups when none or several match."""
        values = {c: v for c, v in values.items() if v is not None}
        unknown = set(values) - set(self.by)
        if unknown:
            raise ValueError(f"no group column {', '.join(sorted(unknown))}: the groups are "
                             f"by {', '.join(self.by)}")
        found = [key for key in self.groups()
                 if all(dict(zip(self.by, key, strict=True))[c] == v for c, v in values.items())]
        if len(found) != 1:
            named = "; ".join(self.title(key) for key in self.groups())
            raise ValueError(f"{len(found)} groups match {values}; the groups: {named}")
        return found[0]

    def rows(self, table: pd.DataFrame, key: tuple) -> pd.DataFrame:
        """The rows of one of its tables that belong to group `key`."""
        mask = np.ones(len(table), dtype=bool)
        for c, v in zip(self.by, key, strict=True):
            mask &= table[c].astype(str).to_numpy() == v
        return table[mask]

    def title(self, key: tuple) -> str:
        parts = [f"{c} {v}" for c, v in zip(self.by, key, strict=True) if v != "all"]
        return ", ".join(parts) if parts else "all runs"

    @property
    def compute_label(self) -> str:
        return f"compute C ({AXIS_LABELS[self.compute_axis]})"

    # ------------------------------------------------------------------ text

    def excluded_lines(self, where: str = "excluded.csv") -> list[str]:
        """What was left out, counted per method and reason (a reason's numbers,
        which differ from budget to budget, left out of it), with a pointer to
        `where`, excluded.csv, which lists each one with its group, budget and
        numbers."""
        ex = self.excluded
        if ex.empty:
            return []
        counts: dict[tuple[str, str, str], list] = {}
        for row in ex.itertuples(index=False):
            unit, n, reason = _exclusion_kind(row)
            group = tuple(getattr(row, c) for c in self.by)
            seen = counts.setdefault((row.method, unit, reason), [0, set()])
            seen[0] += n
            seen[1].add(group)
        lines = [f"frontier: left out, by reason (each with its group and budget: {where}):"]
        order = {m: i for i, m in enumerate(("input", *METHODS))}
        for (method, unit, reason), (n, groups) in sorted(
                counts.items(), key=lambda kv: (order.get(kv[0][0], len(order)),
                                                kv[0][1] == "fits")):
            what = unit if n != 1 else unit.removesuffix("s")
            where_from = "of the table" if method == "input" else f"of {method}"
            if unit == "fits":
                where_from += " not made"
            spread = f" in {len(groups)} groups" if len(groups) > 1 else ""
            lines.append(f"  {n} {what} {where_from}{spread}: {reason}")
        return lines

    def summary(self) -> list[str]:
        """The compute axis, then per group and method its exponents (or why
        none) and, at each --predict budget, N_opt and D_opt (and the loss
        there, approach 3) with their intervals."""
        ci = self.fits["ci"].dropna()
        level = f"; intervals at {ci.iloc[0]:.0%}" if len(ci) else ""
        lines = [f"compute axis: {AXIS_LABELS[self.compute_axis]}{level}"]
        keys = ["method", *self.by]
        for _, rows in self.fits.groupby(keys, sort=False, dropna=False):
            row = rows.iloc[0]
            group = ", ".join(f"{c}={row[c]}" for c in self.by)
            if row["status"] != "ok":
                lines.append(f"{row['method']} ({group}): {row['status']}")
                continue
            lines.append(f"{row['method']} ({group}): a = {row['a']:.3f} [{row['a_low']:.3f}, "
                         f"{row['a_high']:.3f}], b = {row['b']:.3f} [{row['b_low']:.3f}, "
                         f"{row['b_high']:.3f}]")
            for _, r in rows[rows["predict_compute"].notna()].iterrows():
                at = [f"N_opt {_estimate(r, 'n_opt')}", f"D_opt {_estimate(r, 'd_opt')}"]
                if np.isfinite(r["loss_opt_pred"]):
                    at.append(f"loss {_estimate(r, 'loss_opt', '.4g')}")
                lines.append(f"  at C = {r['predict_compute']:.3g}: {', '.join(at)}")
        return lines

    # ------------------------------------------------------------------ files

    def write(self, directory: Path) -> list[Path]:
        """Its files (`FILES`) into `directory`, which exists (the stage writes
        them into the directory it is about to swap in)."""
        directory = Path(directory)
        for name, attr in TABLES.items():
            getattr(self, attr).to_csv(directory / name, index=False)
        runs = self.runs[[*self.by, *RUN_BUDGET_COLUMNS, *RUN_VALUES]]
        runs.rename(columns=RUN_BUDGET_COLUMNS).to_csv(directory / RUNS, index=False)
        replicates = [{"method": method, **dict(zip(self.by, group, strict=True)), "a": a}
                      for (method, *group), values in self.exponent_replicates.items()
                      for a in values]
        pd.DataFrame(replicates, columns=["method", *self.by, "a"]).to_csv(
            directory / REPLICATES, index=False)
        settings = {"by": list(self.by), "compute_axis": self.compute_axis,
                    "loss_label": self.loss_label}
        (directory / SETTINGS).write_text(json.dumps(settings, indent=1) + "\n")
        return [directory / name for name in FILES]

    @classmethod
    def read(cls, directory: Path | str) -> FrontierResult:
        """The result whose files `write` wrote into `directory`, every number as
        written (pandas' parser reads back the shortest repr exactly)."""
        directory = Path(directory)
        try:
            settings = json.loads((directory / SETTINGS).read_text())
        except (OSError, ValueError) as err:
            raise ValueError(f"{directory}: not a frontier's directory (scalestudy frontier "
                             f"--out-dir): {err}") from None
        by = tuple(settings["by"])
        # Text as written: a group named "nan" or "NA" stays a name.
        text = (*by, "method", "compute_axis", "status", "reason", "detail")

        def table(name: str) -> pd.DataFrame:
            frame = pd.read_csv(directory / name, dtype=dict.fromkeys(text, str),
                                keep_default_na=False, na_values=[""])
            return frame.fillna({c: "" for c in text if c in frame})

        tables = {attr: table(name) for name, attr in TABLES.items()}
        runs = table(RUNS).rename(columns={v: k for k, v in RUN_BUDGET_COLUMNS.items()})
        replicates = table(REPLICATES)
        exponents = {(method, *group): rows["a"].to_numpy()
                     for (method, *group), rows in replicates.groupby(["method", *by],
                                                                       sort=False)}
        return cls(**tables, runs=runs, by=by, compute_axis=settings["compute_axis"],
                   loss_label=settings["loss_label"], exponent_replicates=exponents)


def _estimate(row: pd.Series, name: str, spec: str = ".3g") -> str:
    """A prediction and its interval, where the bootstrap gave one."""
    value, low, high = (row[f"{name}_pred"], row[f"{name}_low"], row[f"{name}_high"])
    if np.isfinite(low) and np.isfinite(high):
        return f"{value:{spec}} [{low:{spec}}, {high:{spec}}]"
    return f"{value:{spec}}"


# A reason's own numbers: a size or curvature in parentheses, a count after its
# last colon ("fewer than 3 sizes: 2", "2 < 3"), a measured value ("spans 0.123
# decades", "vertex at N = 1.2e+09"); a small integer inside (the 3 of "fewer
# than 3 sizes") is a constant and stays.
_PARENTHESES = re.compile(r"\s*\([^()]*\d[^()]*\)")
_TRAILING_COUNT = re.compile(r":\s*[-+\d.e<>= ]+$")
_MEASURED = re.compile(r"[-+]?(?:\d+\.\d*|\d*\.\d+|\d+(?=e))(?:e[-+]?\d+)?")
_ROWS = re.compile(r"^(\d+) row\(s\) left out: ")


def _exclusion_kind(row) -> tuple[str, int, str]:
    """(unit, how many, reason without its numbers) of an excluded.csv row: rows
    of the input table, a fit, a compute grid point of the curves, or a budget."""
    reason = str(row.reason)
    rows = _ROWS.match(reason)
    if row.method == "input" and rows:
        return "rows", int(rows.group(1)), reason[rows.end():]
    kind = _MEASURED.sub("…", _TRAILING_COUNT.sub("", _PARENTHESES.sub("", reason)))
    if reason.startswith("no fit") or not np.isfinite(row.compute):
        return "fits", 1, kind.removeprefix("no fit: ")
    if row.detail == "curves grid point":
        return "compute grid points", 1, kind
    return "budgets", 1, kind
