"""Tables of a study, as CSV (numbers) and Markdown (for reading). Torch-free.

- `alpha`: every scaling coefficient of `fits.fit_study` (alpha_U, alpha_D,
  alpha_U,D, alpha_D/alpha_U) per architecture and prior, with its bootstrap
  interval, R^2 and number of sizes (Tay et al. 2022 report the same slopes).
- `lra_accuracy`: an LRA-style table per prior (Tay et al. 2021, Long Range Arena;
  Amos et al. 2023, Table 1): test accuracy per architecture and task at the
  largest size with finished runs, mean and standard deviation over seeds, and
  the average over tasks where every task has a value.
- `heldout`: every law (alpha_U, alpha_D, alpha_U,D) refitted without the largest
  size and judged on it: the predicted and observed y there and the relative
  error (pred - obs) / obs with its bootstrap interval (the `heldout_*` columns of
  `fits.fit_study`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ..architectures import ARCHITECTURES
from ..atomic import refuse_foreign, replacing_directory
from ..priors import PRIORS
from .fits import HELDOUT_COLUMNS, METRICS, size_order, task_runs
from .options import FitOptions, TablesOptions
from .stages import ANALYSIS_STAGES

ALPHA_COLUMNS = ["metric", "form", "task", "arch", "prior", "x_axis", "alpha", "alpha_low",
                 "alpha_high", "ci", "E", "r2", "n_points", "n_sizes", "n_runs", "n_failed",
                 "status", "interval"]
LRA_COLUMNS = ["prior", "arch", "task", "size", "n_runs", "n_ok", "mean_acc", "std_acc"]
HELDOUT_LAWS = ("alpha_U", "alpha_D", "alpha_UD")  # the ratio is not a law of y
HELDOUT_TABLE_COLUMNS = ["metric", "form", "task", "arch", "prior", "x_axis", "n_sizes",
                         *HELDOUT_COLUMNS, "ci"]
SYMBOLS = {"alpha_U": "alpha_U", "alpha_D": "alpha_D", "alpha_UD": "alpha_U,D",
           "alpha_D/alpha_U": "alpha_D / alpha_U"}


def markdown(df: pd.DataFrame) -> str:
    """A GitHub-flavoured Markdown table of a frame of strings (no tabulate needed)."""
    cols = [str(c) for c in df.columns]
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for row in df.astype(str).itertuples(index=False):
        lines.append("| " + " | ".join(v.replace("|", "\\|") for v in row) + " |")
    return "\n".join(lines)


def _order(df: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Sort by the canonical orders of metrics, architectures and priors."""
    ranks = {"metric": METRICS, "arch": ARCHITECTURES.names, "prior": PRIORS.names}

    def key(s: pd.Series) -> pd.Series:
        if s.name in ranks:
            return s.map({v: i for i, v in enumerate(ranks[s.name])}).fillna(len(ranks[s.name]))
        return s

    return df.sort_values(by, key=key, kind="stable").reset_index(drop=True)


def alpha_table(fits: pd.DataFrame) -> pd.DataFrame:
    """The coefficients as one tidy numeric frame (the CSV)."""
    return _order(fits[ALPHA_COLUMNS], ["metric", "task", "arch", "prior", "form"])


def fmt_interval(row) -> str:
    """'0.123 [0.100, 0.150]', or the fit's status where it gave no number."""
    if row["status"] != "ok":
        return f"n/a ({row['status']})"
    local = " (local slope: no power law)" if "no power law" in str(row.get("interval", "")) else ""
    if np.isnan(row["alpha_low"]):
        return f"{row['alpha']:.3f}{local}"
    return f"{row['alpha']:.3f} [{row['alpha_low']:.3f}, {row['alpha_high']:.3f}]{local}"


def alpha_markdown(fits: pd.DataFrame) -> str:
    """Three sections: alpha_U per architecture; alpha_D per architecture x prior
    (one table per task); alpha_U,D and alpha_D/alpha_U per architecture and task."""
    t = alpha_table(fits)
    x_axis = t.loc[t["metric"].isin(["alpha_U", "alpha_D"]), "x_axis"]
    x_axis = x_axis.iloc[0] if len(x_axis) else "compute"
    ci = t["ci"].iloc[0] if len(t) else FitOptions.ci
    out = [f"# Scaling coefficients\n\nx axis: {x_axis}. Each cell: alpha "
           f"[{ci:.0%} interval]; n/a with the reason where a fit refused (fewer than "
           "three sizes). A log-log alpha and its interval are the log-log chord over the "
           "sizes run (the t interval of the residual bootstrap): the law's exponent where "
           "the power law holds, a local slope (said in the cell) where its lack-of-fit "
           "test rejects it; alpha_D/alpha_U has Fieller's interval.\n"]

    up = t[t["metric"] == "alpha_U"]
    out.append("## Upstream: alpha_U per architecture\n")
    if up.empty:
        out.append("No upstream pretraining runs.\n")
    else:
        rows = []
        for arch, g in up.groupby("arch", sort=False):
            ll, sat = g[g["form"] == "loglog"], g[g["form"] == "saturating"]
            rows.append({
                "architecture": arch,
                "alpha_U (log-log)": fmt_interval(ll.iloc[0]) if len(ll) else "",
                "alpha_U (saturating)": fmt_interval(sat.iloc[0]) if len(sat) else "",
                "E (saturating)": f"{sat.iloc[0]['E']:.3g}" if len(sat) else "",
                "sizes": int(g["n_sizes"].max()),
            })
        out.append(markdown(pd.DataFrame(rows)) + "\n")

    down = t[(t["metric"] == "alpha_D") & (t["form"] == "loglog")]
    for task, g in down.groupby("task", sort=True):
        out.append(f"## Downstream ({task}): alpha_D per architecture and prior\n")
        g = g.assign(cell=[fmt_interval(r) for _, r in g.iterrows()])
        wide = g.pivot(index="arch", columns="prior", values="cell")
        wide = wide[[p for p in PRIORS if p in wide.columns]]
        wide = wide.reindex(sorted(wide.index, key=ARCHITECTURES.rank))
        out.append(markdown(wide.fillna("").reset_index().rename(
            columns={"arch": "architecture"})) + "\n")
    if down.empty:
        out.append("## Downstream: alpha_D\n\nNo task runs.\n")
    saturating = t[(t["metric"] == "alpha_D") & (t["form"] == "saturating")]
    if len(saturating):
        out.append("## Downstream: the saturating law where the power law fails\n")
        rows = [{"task": r["task"], "architecture": r["arch"], "prior": r["prior"],
                 "alpha (saturating)": fmt_interval(r), "E": f"{r['E']:.3g}"}
                for _, r in saturating.iterrows()]
        out.append(markdown(pd.DataFrame(rows)) + "\n")

    transfer = t[t["metric"].isin(["alpha_UD", "alpha_D/alpha_U"])]
    out.append("## Transfer: alpha_U,D and alpha_D / alpha_U (upstream prior)\n")
    if transfer.empty:
        out.append("No runs finetuned from upstream pretraining.\n")
    else:
        transfer = transfer.assign(
            cell=[fmt_interval(r) for _, r in transfer.iterrows()],
            metric=transfer["metric"].map(SYMBOLS),
        )
        wide = transfer.pivot(index=["task", "arch"], columns="metric", values="cell")
        out.append(markdown(wide.fillna("").reset_index().rename(
            columns={"arch": "architecture"})) + "\n")
    return "\n".join(out)


def heldout_table(fits: pd.DataFrame) -> pd.DataFrame:
    """The held-out validation of every law, one row per fit (the CSV)."""
    laws = fits[fits["metric"].isin(HELDOUT_LAWS)]
    return _order(laws[HELDOUT_TABLE_COLUMNS], ["metric", "task", "arch", "prior", "form"])


def fmt_heldout(row) -> str:
    """'-3.1% [-5.0, +1.2]' (the relative error in percent), or why there is none."""
    if row["heldout_status"] != "ok":
        return f"n/a ({row['heldout_status']})"
    cell = f"{100 * row['heldout_rel_error']:+.1f}%"
    if np.isnan(row["heldout_rel_error_low"]):
        return cell
    return (f"{cell} [{100 * row['heldout_rel_error_low']:+.1f}, "
            f"{100 * row['heldout_rel_error_high']:+.1f}]")


def _arch_rows(wide: pd.DataFrame) -> str:
    """A frame indexed by architecture as Markdown, rows in the canonical order."""
    wide = wide.reindex(sorted(wide.index, key=ARCHITECTURES.rank))
    return markdown(wide.fillna("").reset_index().rename(columns={"arch": "architecture"}))


def heldout_markdown(fits: pd.DataFrame) -> str:
    """The relative error of each law's prediction of its held-out largest size:
    alpha_U per architecture (both forms), then per task alpha_D (architectures x
    priors) and alpha_U,D, after a line with the median absolute error."""
    t = heldout_table(fits)
    ci = t["ci"].iloc[0] if len(t) else FitOptions.ci
    out = ["# Held-out validation of the laws\n\nEach law refitted without the largest size, "
           "predicting that size's mean y at its mean x. Each cell: relative error of the "
           "prediction, (predicted - observed) / observed, in percent [with its "
           f"{ci:.0%} percentile-bootstrap interval over the training runs]; negative: the "
           "largest size did worse than the law predicts. n/a with the reason where there "
           "is no prediction (it needs two sizes besides the held-out one, three for the "
           "saturating form).\n"]
    ok = t[t["heldout_status"] == "ok"]
    if len(ok):
        out.append(f"{len(ok)} predictions, {(ok['heldout_rel_error'] < 0).sum()} of them "
                   "below the observed value; median |relative error| "
                   f"{100 * ok['heldout_rel_error'].abs().median():.1f}%. The interval holds the "
                   "law's uncertainty and the held-out seeds' noise (none with one seed).\n")
    t = t.assign(cell=[fmt_heldout(r) for _, r in t.iterrows()])

    up = t[t["metric"] == "alpha_U"]
    out.append("## Upstream loss (alpha_U) per architecture\n")
    if up.empty:
        out.append("No upstream pretraining runs.\n")
    else:
        wide = up.pivot(index="arch", columns="form", values="cell")
        wide = wide.rename(columns={"loglog": "log-log", "saturating": "saturating"})
        size = up.groupby("arch", sort=False)["heldout_size"].first()
        out.append(_arch_rows(wide.assign(**{"held out": size})) + "\n")

    down = t[(t["metric"] == "alpha_D") & (t["form"] == "loglog")]
    for task, g in down.groupby("task", sort=True):
        out.append(f"## Downstream error ({task}, alpha_D) per architecture and prior\n")
        wide = g.pivot(index="arch", columns="prior", values="cell")
        out.append(_arch_rows(wide[[p for p in PRIORS if p in wide.columns]]) + "\n")
    if down.empty:
        out.append("## Downstream error (alpha_D)\n\nNo task runs.\n")

    transfer = t[t["metric"] == "alpha_UD"]
    if len(transfer):
        out.append("## Downstream error against upstream loss (alpha_U,D)\n")
        out.append(_arch_rows(transfer.pivot(index="arch", columns="task", values="cell"))
                   + "\n")
    return "\n".join(out)


def lra_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Per (prior, arch, task): test accuracy at the largest size with finished runs."""
    runs_t = task_runs(runs)
    rows = []
    for (prior, arch, task), g in runs_t.groupby(["prior", "arch", "task"], sort=False):
        ok = g[g["status"] == "ok"]
        if ok.empty:
            rows.append({"prior": prior, "arch": arch, "task": task, "size": None,
                         "n_runs": len(g), "n_ok": 0, "mean_acc": np.nan, "std_acc": np.nan})
            continue
        size = size_order(ok)[-1]
        acc = ok.loc[ok["size"] == size, "test_acc"]
        rows.append({"prior": prior, "arch": arch, "task": task, "size": size,
                     "n_runs": int((g["size"] == size).sum()), "n_ok": len(acc),
                     "mean_acc": acc.mean(), "std_acc": acc.std(ddof=1) if len(acc) > 1
                     else np.nan})
    return _order(pd.DataFrame(rows, columns=LRA_COLUMNS), ["prior", "arch", "task"])


def lra_markdown(table: pd.DataFrame) -> str:
    """One table per prior: architectures as rows, tasks (and their average) as columns,
    accuracy in percent (± standard deviation over seeds; the size in brackets)."""
    out = ["# Test accuracy (LRA style)\n\nPer prior: test accuracy (%) at the largest size "
           "with finished runs, mean ± standard deviation over seeds (no ± with one seed); "
           "Avg averages the tasks of a row when every task has a value.\n"]
    if table.empty:
        out.append("No task runs.\n")
    tasks = sorted(table["task"].unique())
    for prior, g in table.groupby("prior", sort=False):
        out.append(f"## Prior: {prior}\n")
        rows = []
        for arch, a in g.groupby("arch", sort=False):
            row = {"architecture": arch}
            for task in tasks:
                r = a[a["task"] == task]
                if r.empty or np.isnan(r["mean_acc"].iloc[0]):
                    row[task] = "n/a" if len(r) else ""
                    continue
                r = r.iloc[0]
                sd = "" if np.isnan(r["std_acc"]) else f" ± {100 * r['std_acc']:.1f}"
                row[task] = f"{100 * r['mean_acc']:.1f}{sd} ({r['size']})"
            means = a.set_index("task")["mean_acc"].reindex(tasks)
            row["Avg"] = f"{100 * means.mean():.1f}" if means.notna().all() else ""
            rows.append(row)
        out.append(markdown(pd.DataFrame(rows)) + "\n")
    return "\n".join(out)


# Its files, declared by its stage's entry (the workflow's rule declares them too).
TABLE_FILES = ANALYSIS_STAGES["tables"].artifact_files()


def tables(runs: pd.DataFrame, fits: pd.DataFrame) -> dict[str, str]:
    """The text of each file of `TABLE_FILES`."""
    lra = lra_table(runs)
    texts = {
        "alpha.csv": alpha_table(fits).to_csv(index=False),
        "alpha.md": alpha_markdown(fits),
        "lra_accuracy.csv": lra.to_csv(index=False),
        "lra_accuracy.md": lra_markdown(lra),
        "heldout.csv": heldout_table(fits).to_csv(index=False),
        "heldout.md": heldout_markdown(fits),
    }
    return {name: texts[name] for name in TABLE_FILES}


def write_tables(runs: pd.DataFrame, fits: pd.DataFrame, out_dir: Path) -> list[Path]:
    """Write the files of `TABLE_FILES` into `out_dir`, replaced whole."""
    return _write(tables(runs, fits), Path(out_dir))


def _write(texts: dict[str, str], out_dir: Path) -> list[Path]:
    with replacing_directory(out_dir) as staged:
        for name, text in texts.items():
            (staged / name).write_text(text)
    return [out_dir / name for name in texts]


# --------------------------------------------------------------------------- the stage
# (analysis/stages.py: a study's tables/)


def run(analysis, options: TablesOptions) -> dict[str, str]:
    return tables(analysis.runs, analysis.fits)


def write(analysis, out: Path, options: TablesOptions) -> list[Path]:
    return _write(analysis["tables"], out)


def refuse(out: Path, inputs) -> None:
    refuse_foreign(out, TABLE_FILES, "a tables", inputs)


def summary(analysis, paths: list[Path]) -> str:
    return "\n".join(f"wrote {path}" for path in paths)
