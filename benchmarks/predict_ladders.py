"""Each prediction method's held-out error and interval coverage on every bundled
ladder: `scalestudy predict`'s methods judged as --holdout judges them.

    PYTHONPATH=src python benchmarks/predict_ladders.py [--n-boot 100] [--ladders NAME ...]
        [--out DIR]

For every ladder (benchmarks/data/README.md: where each comes from) and every
method (each candidate of `--select`, select.py, and `--select` itself), the
runs of the ladder's largest N are held out, the rest fitted exactly as
`scalestudy predict` fits a ladder (fitting.fit_group: the method, its
bootstrap, the calibration by the rest's own largest sizes), and each held-out
run predicted with its 95% interval. Reported per ladder and method: the
held-out runs, the loss's mean absolute relative error, the share of runs
inside their calibrated interval and inside the bootstrap's alone (the
calibration scales set to 1), the intervals' mean relative width; with a task
loss its error and coverage; with a metric its mean absolute error, coverage
and mean width (metric units). Then each method's pooled coverage over the
real ladders (the synthetic ones apart). Prints a markdown table (the one in
docs/analysis.md) and writes runs.csv (every held-out run) and summary.csv
into --out.

Ladders: Epoch's extraction of Hoffmann et al.'s points (tests/data/chinchilla),
Porian et al.'s IsoFLOP points (8 settings), the OLMo ladder (Bhagia et al.;
190M-3B at 1-10x Chinchilla: its c4 loss alone, and each of 7 tasks' bits per
byte and accuracy chained to it), CS336's IsoFLOP profiles (synthetic, as its
handout says), and synthetic downstream ladders of a known surface and sigmoid
(tests/analysis/predict/test_predict.py's).
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from scalestudy.analysis.predict.chain import Ladder, Method, Settings
from scalestudy.analysis.predict.fitting import fit_group
from scalestudy.analysis.predict.holdout import judged
from scalestudy.analysis.predict.inputs import prepare_ladder
from scalestudy.analysis.predict.options import PredictOptions
from scalestudy.analysis.predict.select import candidates

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "benchmarks/data"
TASKS = ("hellaswag", "arc_challenge", "arc_easy", "piqa", "csqa", "socialiqa", "openbookqa")
SELECT = "select"


@dataclass
class Case:
    """One ladder (a table), what it predicts, and whether it is real."""

    ladder: str
    label: str
    table: pd.DataFrame
    task_loss: str | None = None
    metric: str | None = None
    real: bool = True
    final_evals: int = 1


def chinchilla() -> list[Case]:
    df = pd.read_csv(ROOT / "tests/data/chinchilla/svg_extracted_data.csv")
    df = df.sort_values("loss").iloc[:-5]  # as Besiroglu et al. (tests/data/README.md)
    table = pd.DataFrame({"params": df["Model Size"], "compute": df["Training FLOP"],
                          "loss": df["loss"]})
    return [Case("chinchilla", "Epoch's Hoffmann et al. points", table)]


def porian() -> list[Case]:
    points = pd.read_csv(DATA / "porian/isoflop_points.csv")
    cases = []
    for key, sub in points.groupby(["dataset", "hparams", "warmup", "decay"], sort=True):
        label = "/".join(key)
        cases.append(Case(f"porian {label}", f"Porian et al. {label}",
                          sub[["params", "tokens", "loss"]].reset_index(drop=True)))
    return cases


def olmo() -> list[Case]:
    ladder = pd.read_csv(DATA / "olmo_ladder/ladder.csv").rename(columns={"c4_loss": "loss"})
    cases = [Case("olmo c4", "OLMo ladder c4 loss", ladder, final_evals=5)]
    for task in TASKS:
        cases.append(Case(f"olmo {task}", f"OLMo ladder {task}", ladder,
                          task_loss=f"{task}_bpb", metric=f"{task}_acc", final_evals=5))
    return cases


def cs336() -> list[Case]:
    table = pd.read_csv(DATA / "cs336/isoflops_curves.csv")
    return [Case("cs336 (synthetic)", "CS336 IsoFLOP profiles", table, real=False)]


def synthetic(n: int = 8) -> list[Case]:
    """Hoffmann et al.'s surface, 5 sizes x 4 token counts x 2 seeds, 1% noise,
    and an accuracy that is a sigmoid of the loss with 0.005 noise: the truth
    known, the form right."""
    alpha, beta, a, b, e = 0.34, 0.28, 406.4, 410.7, 1.69
    cases = []
    for seed in range(n):
        rng = np.random.default_rng(seed)
        sizes = np.geomspace(2e7, 1e9, 5) * 10 ** rng.uniform(-0.1, 0.1, 5)
        rows = [(s, m * s, k) for s in sizes for m in (5, 10, 20, 40) for k in range(2)]
        table = pd.DataFrame(rows, columns=["params", "tokens", "seed"])
        surface = e + a / table["params"] ** alpha + b / table["tokens"] ** beta
        table["loss"] = surface * np.exp(rng.normal(0, 0.01, len(table)))
        table["acc"] = (0.65 / (1 + np.exp(6 * (table["loss"] - 2.9))) + 0.25
                        + rng.normal(0, 0.005, len(table)))
        cases.append(Case("synthetic", f"synthetic {seed}", table, metric="acc", real=False))
    return cases


LADDERS = {"chinchilla": chinchilla, "porian": porian, "olmo": olmo, "cs336": cs336,
           "synthetic": synthetic}


def ladder_of(case: Case) -> Ladder:
    options = PredictOptions()
    runs, _, _ = prepare_ladder(case.table, case.label, [], case.metric, options.min_fraction,
                                case.task_loss)
    return Ladder.of(runs, options.step1_points, case.final_evals, case.task_loss is not None,
                     case.metric is not None)


def judge(case: Case, ladder: Ladder, method: Method | str, n_boot: int, seed: int,
          ) -> pd.DataFrame:
    """Every held-out run of `case` as `method` (or --select) predicts it from the
    rest: calibrated and bootstrap-only intervals of each quantity."""
    settings = Settings(n_boot, 0.95, 256, select=method == SELECT,
                        method=Method() if method == SELECT else method)
    largest = float(ladder.sizes().max())
    rng = np.random.default_rng(seed)
    fitted = fit_group(ladder.below(largest), settings, rng)
    held = ladder.at(largest)
    if not fitted.chain.law.ok:
        return pd.DataFrame()
    table, _ = judged(fitted, held, settings.ci, np.random.default_rng(seed + 1))
    fitted.chain.calibration = None  # the bootstrap's intervals alone
    raw, _ = judged(fitted, held, settings.ci, np.random.default_rng(seed + 1))
    fitted.chain.calibration = fitted.calibration
    for col in raw:
        if col.endswith(("_low", "_high")):
            table[f"{col}_raw"] = raw[col]
    chosen = fitted.chain.method.label(ladder.task, ladder.metric)
    return table.assign(ladder=case.ladder, label=case.label, real=case.real,
                        method=method if method == SELECT else chosen, chosen=chosen,
                        held_out_n=largest, calibration=fitted.calibration.status)


def _inside(d: pd.DataFrame, q: str, suffix: str = "") -> pd.Series:
    return (d[f"{q}_obs"] >= d[f"{q}_low{suffix}"]) & (d[f"{q}_obs"] <= d[f"{q}_high{suffix}"])


def summarise(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per ladder and method (the module docstring)."""
    rows = []
    for (ladder, method), d in runs.groupby(["ladder", "method"], sort=False):
        row = {"ladder": ladder, "method": method, "real": bool(d["real"].iloc[0]),
               "runs": len(d), "chosen": ", ".join(sorted(set(d["chosen"])))
               if method == SELECT else ""}
        for q, relative in (("loss", True), ("task", True), ("metric", False)):
            if f"{q}_obs" not in d or d[f"{q}_obs"].isna().all():
                continue
            e = d[f"{q}_pred"] - d[f"{q}_obs"]
            width = d[f"{q}_high"] - d[f"{q}_low"]
            row[f"{q}_error"] = float((e.abs() / d[f"{q}_obs"] if relative else e.abs()).mean())
            row[f"{q}_coverage"] = float(_inside(d, q).mean())
            row[f"{q}_coverage_raw"] = float(_inside(d, q, "_raw").mean())
            row[f"{q}_width"] = float((width / d[f"{q}_pred"] if relative else width).mean())
        rows.append(row)
    return pd.DataFrame(rows)


def pooled(runs: pd.DataFrame) -> pd.DataFrame:
    """Each method's coverage and width over every held-out run of the real ladders,
    the loss-only methods (chinchilla, e-prior, select) pooled by their label."""
    real = runs[runs["real"]]
    rows = []
    for method, d in real.groupby("method", sort=False):
        row = {"method": method, "runs": len(d)}
        for q in ("loss", "metric"):
            have = d[f"{q}_obs"].notna() if f"{q}_obs" in d else pd.Series(False, d.index)
            if have.any():
                dd = d[have]
                row[f"{q}_runs"] = len(dd)
                row[f"{q}_coverage"] = float(_inside(dd, q).mean())
                row[f"{q}_coverage_raw"] = float(_inside(dd, q, "_raw").mean())
                width = dd[f"{q}_high"] - dd[f"{q}_low"]
                row[f"{q}_width"] = float((width / dd[f"{q}_pred"] if q == "loss"
                                           else width).mean())
        rows.append(row)
    return pd.DataFrame(rows)


def markdown(summary: pd.DataFrame) -> str:
    def cell(row, key, pct=True):
        v = row.get(key, np.nan)
        return "" if not np.isfinite(v) else (f"{v:.1%}" if pct else f"{v:.3f}")

    lines = ["| ladder | method | held out | loss error | loss in 95% (bootstrap alone) | "
             "loss width | metric error | metric in 95% (bootstrap alone) | metric width |",
             "|---|---|---|---|---|---|---|---|---|"]
    for _, r in summary.iterrows():
        method = r["method"] + (f" ({r['chosen']})" if r["chosen"] else "")
        loss = f"{cell(r, 'loss_coverage')} ({cell(r, 'loss_coverage_raw')})"
        metric = (f"{cell(r, 'metric_coverage')} ({cell(r, 'metric_coverage_raw')})"
                  if np.isfinite(r.get("metric_coverage", np.nan)) else "")
        lines.append(f"| {r['ladder']} | {method} | {r['runs']} | {cell(r, 'loss_error')} | "
                     f"{loss} | {cell(r, 'loss_width')} | {cell(r, 'metric_error', False)} | "
                     f"{metric} | {cell(r, 'metric_width', False)} |")
    return "\n".join(lines)


def run(names, n_boot: int, seed: int = 0, methods: str = "all", log=print,
        ) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Every held-out run, the summary and the pooled coverage of the ladders
    `names`; `methods` "all" (every candidate and --select) or "select"."""
    frames = []
    for name in names:
        for case in LADDERS[name]():
            ladder = ladder_of(case)
            todo = ([*candidates(ladder.task, ladder.metric), SELECT] if methods == "all"
                    else [SELECT])
            for method in todo:
                start = time.perf_counter()
                frames.append(judge(case, ladder, method, n_boot, seed))
                label = method if method == SELECT else method.label(ladder.task,
                                                                      ladder.metric)
                log(f"{case.label}: {label} ({time.perf_counter() - start:.0f} s)")
    runs = pd.concat(frames, ignore_index=True)
    return runs, summarise(runs), pooled(runs)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ladders", nargs="+", default=list(LADDERS), choices=list(LADDERS))
    parser.add_argument("--n-boot", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--methods", choices=("all", SELECT), default="all")
    parser.add_argument("--out", type=Path, default=None, help="write runs.csv, summary.csv")
    args = parser.parse_args(argv)
    runs, summary, overall = run(args.ladders, args.n_boot, args.seed, args.methods,
                                 log=lambda text: print(text, file=sys.stderr))
    print(markdown(summary))
    print()
    print(overall.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        runs.to_csv(args.out / "runs.csv", index=False)
        summary.to_csv(args.out / "summary.csv", index=False)
        overall.to_csv(args.out / "pooled.csv", index=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())

