"""The `scalestudy` commands: the table of subcommands (`parser`) and
`run_command`, which runs one in this process.

The workflow's rules call `data`, `corpus`, `pretrain`, `train`, `collect`,
`fit`, `figure`, `figure-index`, `tables`, `claims` and, for a study with
budgets, `frontier`; `analyse` regenerates a cached study's outputs,
`frontier` fits the compute-optimal frontier of any table of runs too, and
`status` says where a running study stands. Each command imports what it
needs when it runs, so the analysis commands never load torch.
The entry point (cli.py) first offers a command to the warm server (warm.py),
which runs it here in a forked child.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from pathlib import Path

from .analysis import X_AXES


def cmd_data(args) -> None:
    from . import tasks

    manifest = tasks.prepare(args.task, json.loads(args.config), args.out_dir)
    counts = {split: info["n"] for split, info in manifest["splits"].items()}
    print(f"{args.task} ({manifest['standin'] or 'LRA release'}): {counts} examples of "
          f"{manifest['seq_len']} tokens in {args.out_dir}")


def run_recorded(work, identity: dict, record_path: Path) -> dict:
    """Run `work` (a training or pretraining run); if it raises before it could
    train (its data, its checkpoint, its model), write a failed record with the
    error instead, so the study goes on and the failure is visible in it. The
    traceback goes to the job's log. One process at a time runs in the run's
    directory (locks.run_lock): a second one exits 1 with no record."""
    from .atomic import no_space
    from .locks import RunBusy, run_lock
    from .records import failed_record, write_record

    try:
        with run_lock(record_path.parent):
            return work()
    except RunBusy as busy:
        print(busy.message, file=sys.stderr, flush=True)
        raise
    except Exception as err:
        full = no_space(err, record_path.parent)
        if full:  # a full disk: the command's one error line, no record
            raise full from None
        traceback.print_exc()
        record = failed_record(identity, err)
        write_record(record, record_path)
        return record


def _summary(record: dict, metric: str) -> str:
    if record["status"] == "failed" and record["steps"] is None:
        return f"failed: {record['error']}"
    if record["status"] == "diverged":
        return f"diverged: non-finite loss at step {record['diverged_step']}"
    return (f"{record['status']}: {metric}={record[metric]:.4f} steps={record['steps']} "
            f"wall={record['wall_seconds']:.1f}s")


def branch_trunk(given, spec, run_dir, own) -> Path | None:
    """A wsd branch's trunk directory: --trunk, else the one beside its own
    (study.grid.trunk_directory); None for every other run."""
    if given is not None or spec.train.branch_of is None:
        return given
    from .study.grid import trunk_directory

    try:
        return trunk_directory(run_dir, own, spec.train.branch_of)
    except ValueError:
        return None  # the run says it needs --trunk (training/branches.py)


def cmd_train(args) -> None:
    from .priors import PRIORS
    from .study.grid import Cell
    from .study.specs import RunSpec
    from .training.task import run

    spec = RunSpec.from_dict(json.loads(args.spec))  # a bad spec fails the job
    identity = {"study": spec.study, "task": spec.task, "arch": spec.arch, "size": spec.size,
                "prior": spec.prior, "seed": spec.seed, "stage": PRIORS[spec.prior].stage,
                "budget": spec.train.budget}
    own = Cell(spec.task, spec.arch, spec.size, spec.prior, spec.seed, spec.train.budget)
    trunk = branch_trunk(args.trunk, spec, args.run_dir, own)
    record = run_recorded(lambda: run(spec, args.data_dir, args.run_dir, args.pretrained,
                                      trunk),
                          identity, Path(args.run_dir) / "record.parquet")
    print(_summary(record, "test_acc"))


def cmd_pretrain(args) -> None:
    import dataclasses

    from .study.grid import PretrainCell
    from .study.specs import PretrainSpec
    from .training.pretrain import run_pretrain

    spec = PretrainSpec.from_dict(json.loads(args.spec))
    identity = {"study": spec.study, "task": spec.corpus, "arch": spec.arch, "size": spec.size,
                "prior": spec.kind, "seed": spec.seed, "stage": spec.kind,
                "budget": spec.train.budget}
    seeded = PretrainCell(spec.kind, spec.corpus if spec.stage.on_task else None, spec.arch,
                          spec.size, spec.seed, spec.train.budget)
    candidates = (seeded, dataclasses.replace(seeded, seed=None))
    own = next((c for c in candidates if Path(args.out_dir).as_posix().endswith(c.directory)),
               seeded)
    trunk = branch_trunk(args.trunk, spec, args.out_dir, own)
    record = run_recorded(lambda: run_pretrain(spec, args.data_dir, args.out_dir, trunk),
                          identity, Path(args.out_dir) / "record.parquet")
    print(_summary(record, "val_loss"))


def cmd_corpus(args) -> None:
    from .tasks import upstream

    counts = upstream.prepare(upstream.config_from(json.loads(args.config)), args.out_dir)
    print(f"upstream corpus: {counts} sequences in {args.out_dir}")


def cmd_collect(args) -> None:
    from .records import collect, write_frame

    frame = collect(args.records)
    write_frame(frame, args.out)
    counts = frame["status"].value_counts().to_dict()
    print(f"collected {len(frame)} runs into {args.out}: {counts}")


def cmd_fit(args) -> None:
    from .analysis.fits import fit_study, write_fits
    from .records import read_records

    fits = fit_study(
        read_records(args.runs), x_axis=args.x, n_boot=args.n_boot, ci=args.ci, seed=args.seed,
        n_boot_saturating=args.n_boot_saturating,
    )
    write_fits(fits, args.out)
    print(fits.drop(columns=["coef", "E", "A"]).to_string(index=False))


def _read(args):
    import pandas as pd
    import pyarrow as pa

    from .records import read_records

    runs = read_records(args.runs)
    try:
        return runs, pd.read_parquet(args.fits)
    except (OSError, pa.ArrowInvalid) as err:
        raise ValueError(f"{args.fits}: not a readable Parquet file: {err}") from None


def _frontier(args):
    """The frontier `--frontier` names (its directory), else None."""
    from .analysis.frontier.result import FrontierResult

    return None if args.frontier is None else FrontierResult.read(args.frontier)


def cmd_plot(args) -> None:
    from .analysis.figures.draw import plot_all

    runs, fits = _read(args)
    for path in plot_all(runs, fits, args.out_dir, tasks=args.tasks, workers=args.workers,
                         frontier=_frontier(args)):
        print(f"wrote {path}")


def cmd_figure(args) -> None:
    """One figure the study's grid feeds (the workflow's `figure` rule): its
    files, or a notice saying why it has none, and its index entry."""
    from .analysis.figures.draw import draw_figure, write_entry

    runs, fits = _read(args)
    entry = draw_figure(args.name, runs, fits, args.out_dir, args.tasks, declared=True,
                        frontier=_frontier(args))
    write_entry(entry, args.entry)
    print(f"{args.name}: " + (", ".join(map(str, entry.files)) if entry.drawn else
                              f"not drawn ({entry.reason}); a notice stands in its place"))


def cmd_figure_index(args) -> None:
    """figures/index.md from the entries of the figures drawn, the rest of the
    registry's figures listed as not fed by the grid."""
    from .analysis.figures import figure_names
    from .analysis.figures.draw import read_entry, undeclared
    from .analysis.figures.output import write_index

    drawn = {e.name: e for e in map(read_entry, args.entries)}
    entries = {stem: drawn.get(stem) or undeclared(stem, args.tasks)
               for stem in figure_names(args.tasks)}
    print(f"wrote {write_index(entries, args.out.parent)}")


def cmd_tables(args) -> None:
    from .analysis.tables import write_tables

    runs, fits = _read(args)
    for path in write_tables(runs, fits, args.out_dir):
        print(f"wrote {path}")


def cmd_claims(args) -> None:
    from .analysis.claims import write_claims

    runs, fits = _read(args)
    checks = write_claims(runs, fits, args.out, n_boot=args.n_boot, ci=args.ci, seed=args.seed,
                          frontier=_frontier(args))
    print(f"wrote {args.out}: {checks['verdict'].value_counts().to_dict()}")


def cmd_status(args) -> None:
    from .study.status import report, study_status

    print(report(study_status(args.study_dir or _only_study())))


def _only_study() -> Path:
    studies = sorted(p for p in Path("results").glob("*") if p.is_dir())
    if len(studies) != 1:
        raise ValueError("name the study: results/<study> ("
                         + (", ".join(map(str, studies)) or "no results/ here") + ")")
    return studies[0]


def cmd_analyse(args) -> None:
    """fits.parquet, frontier/ (runs with budgets), figures/, tables/ and
    claims.md of one runs file, in one process."""
    import time

    from .analysis.claims import write_claims
    from .analysis.figures.draw import plot_all
    from .analysis.fits import fit_study, write_fits
    from .analysis.frontier.stage import study_frontier, write_frontier
    from .analysis.tables import write_tables
    from .records import read_records

    start = time.perf_counter()
    out = Path(args.out_dir)
    runs = read_records(args.runs)
    fits = fit_study(runs, x_axis=args.x, n_boot=args.n_boot, ci=args.ci, seed=args.seed,
                     n_boot_saturating=args.n_boot_saturating)
    write_fits(fits, out / "fits.parquet")
    paths = [out / "fits.parquet"]
    frontier = study_frontier(runs, n_boot=args.n_boot, ci=args.ci, seed=args.seed)
    if frontier is not None:
        paths += write_frontier(frontier, out / "frontier", figures=False)
    paths += plot_all(runs, fits, out / "figures", workers=args.workers, frontier=frontier)
    paths += write_tables(runs, fits, out / "tables")
    checks = write_claims(runs, fits, out / "claims.md", n_boot=args.n_boot, ci=args.ci,
                          seed=args.seed, frontier=frontier)
    paths.append(out / "claims.md")
    for path in paths:
        print(f"wrote {path}")
    print(f"{len(runs)} runs, {len(fits)} fits, claims {checks['verdict'].value_counts().to_dict()}"
          f" in {time.perf_counter() - start:.1f}s")


class _HelpFormatter(argparse.RawDescriptionHelpFormatter,
                     argparse.ArgumentDefaultsHelpFormatter):
    """Appends "(default: ...)" to each option's help, except where there is no
    default to show: required options say "(required)", and an option whose
    absence (None) its help does not describe says "(default: none)"; the
    examples of an epilog keep their lines."""

    def _get_help_string(self, action):
        if action.required and action.option_strings:
            return (action.help or "") + " (required)"
        if action.required or action.default is argparse.SUPPRESS:
            return action.help or ""
        if action.default is None:
            text = action.help or ""
            return text if "default" in text or not action.option_strings else (
                f"{text} (default: none)")
        return super()._get_help_string(action)


# What an option takes, shown in the usage and the option's line (its metavar).
def _metavar(action) -> str | None:
    if action.nargs == 0 or action.choices or action.metavar:
        return action.metavar
    name = action.dest
    if name in ("spec", "config"):
        return "JSON"
    if name.endswith("dir"):
        return "DIR"
    if action.type is Path:
        return "FILE"
    return {int: "N", float: "X"}.get(action.type, "TEXT" if action.option_strings else None)


DESCRIPTION = """Scaling-law studies of architectures and initialisation priors: the commands
the workflow's jobs run (snakemake --cores N runs a whole study), and those a
researcher runs on a study's results (status, analyse, frontier) or on any table
of runs (frontier, predict)."""

# One example per subcommand, shown under its --help.
EXAMPLES = {
    "data": "scalestudy data --task listops --config '{\"n_train\": 400}' "
            "--out-dir results/default/data/listops",
    "train": "scalestudy train --spec \"$(cat spec.json)\" --data-dir "
             "results/default/data/listops \\\n      --run-dir "
             "results/default/runs/listops/transformer/xs/random/s0",
    "pretrain": "scalestudy pretrain --spec \"$(cat pretrain_spec.json)\" --data-dir "
                "results/default/data/upstream \\\n      --out-dir "
                "results/default/pretrain/upstream/transformer/xs",
    "corpus": "scalestudy corpus --config '{\"source\": \"stdlib\", \"seq_len\": 48}' "
              "--out-dir results/default/data/upstream",
    "collect": "scalestudy collect results/default/runs/*/*/*/*/*/record.parquet "
               "--out results/default/runs.parquet",
    "fit": "scalestudy fit data/cache/workstation.parquet --out /tmp/fits.parquet --n-boot 200",
    "plot": "scalestudy plot results/default/runs.parquet results/default/fits.parquet "
            "--out-dir /tmp/figures",
    "figure": "scalestudy figure results/default/runs.parquet results/default/fits.parquet "
              "--name error_vs_compute \\\n      --out-dir /tmp/figures --entry /tmp/entry.json "
              "--tasks listops",
    "figure-index": "scalestudy figure-index /tmp/entry.json --out /tmp/figures/index.md "
                    "--tasks listops",
    "tables": "scalestudy tables results/default/runs.parquet results/default/fits.parquet "
              "--out-dir /tmp/tables",
    "claims": "scalestudy claims results/default/runs.parquet results/default/fits.parquet "
              "--out /tmp/claims.md",
    "frontier": "scalestudy frontier runs.csv --out-dir /tmp/frontier --predict 1e18 1e19",
    "predict": "scalestudy predict ladder.csv --at 7e9:1.4e11 70e9:1.4e12 --out-dir "
               "/tmp/predict --holdout",
    "analyse": "scalestudy analyse data/cache/workstation.parquet --out-dir results/workstation",
    "status": "scalestudy status results/default",
}


def _fit_options(p) -> None:
    p.add_argument("--x", default="compute", choices=X_AXES,
                   help="the x axis of every fit: compute (training plus pretraining FLOPs), "
                   "params (non-embedding parameters) or flops_per_token")
    p.add_argument("--n-boot", type=int, default=1000,
                   help="bootstrap resamples of each log-log fit and of alpha_D/alpha_U "
                   "(and, in analyse, of each claim's interval and of the frontier's fits)")
    p.add_argument("--ci", type=float, default=0.95,
                   help="coverage of the bootstrap confidence intervals")
    p.add_argument("--seed", type=int, default=0, help="seed of the bootstrap resampling")


def _frontier_options(p) -> None:
    p.add_argument("table", help="CSV or Parquet of runs: params, loss, compute and/or "
                                 "tokens; optional arch, prior, budget")
    p.add_argument("--out-dir", required=True, type=Path,
                   help="directory for the tables and figures, replaced whole (one "
                   "holding other files is refused)")
    p.add_argument("--predict", nargs="+", type=float, default=[], action="extend",
                   metavar="C", help="compute budgets (FLOPs) to predict N_opt, D_opt at")
    p.add_argument("--curves", help="per-step curves for approach 1 (CSV or Parquet: run, "
                                    "params, loss, compute and/or tokens)")
    p.add_argument("--by", nargs="+", default=None, metavar="COL",
                   help="group columns (default: arch and prior, those present)")
    p.add_argument("--n-boot", type=int, default=200, help="bootstrap replicates")
    p.add_argument("--ci", type=float, default=0.95, help="interval level")
    p.add_argument("--seed", type=int, default=0, help="seed of the bootstrap")
    p.add_argument("--budget-gap", type=float, default=0.02,
                   help="without a budget column: a new budget where log10 compute jumps "
                        "by more than this (decades)")
    p.add_argument("--max-span", type=float, default=0.1,
                   help="without a budget column: refuse a budget spanning more than this "
                        "(decades)")
    p.add_argument("--min-sizes", type=int, default=3,
                   help="approach 2: sizes a budget needs")
    p.add_argument("--window", type=float, default=1.0, metavar="DECADES",
                   help="approach 2: fit each budget's parabola on the sizes within this "
                        "many decades of its lowest-loss size (and always its neighbours)")
    p.add_argument("--compute-axis", choices=("counted", "6nd"), default="counted",
                   help="the C of N_opt ~ C^a for every approach: the table's compute "
                        "(counted FLOPs) or 6 N D")
    p.add_argument("--n-polish", type=int, default=256,
                   help="approach 3: L-BFGS-B from this many best grid starts")
    p.add_argument("--loss-label", default="loss (nats/token)", help="the figures' loss axis")
    p.add_argument("--no-figures", action="store_true", help="write the tables only")
    p.add_argument("--from-runs", action="store_true",
                   help="TABLE is a study's runs.parquet: fit its budgeted runs "
                        "(analysis/frontier/study.py; by arch and prior)")


def cmd_frontier(args) -> None:
    from .analysis.frontier.stage import frontier
    from .analysis.frontier.study import read_fit_table

    result = frontier(
        read_fit_table(args.table) if args.from_runs else args.table, args.out_dir,
        predict=args.predict, by=args.by, curves=args.curves, n_boot=args.n_boot, ci=args.ci,
        seed=args.seed, budget_gap=args.budget_gap, max_span=args.max_span,
        min_sizes=args.min_sizes, window=args.window, compute_axis=args.compute_axis,
        n_polish=args.n_polish, figures=not args.no_figures, loss_label=args.loss_label,
    )
    print("\n".join(result.summary()))
    print(f"wrote {len(result.paths)} files to {args.out_dir}")


def _predict_options(p) -> None:
    p.add_argument("table", help="CSV or Parquet of runs: params, loss, tokens and/or compute; "
                                 "optional group columns (arch, prior), seed, a metric column, "
                                 "step with run (checkpoints); or a study's run records with "
                                 "--from-runs")
    p.add_argument("--at", nargs="+", required=True, action="extend", metavar="N:D",
                   help="the targets: parameters and tokens of each run to predict")
    p.add_argument("--out-dir", required=True, type=Path,
                   help="directory for predictions.csv, fit.csv, runs.csv, holdout.csv, "
                   "predict.json and the figure, replaced whole (one holding other files is "
                   "refused)")
    p.add_argument("--metric", metavar="COLUMN",
                   help="a downstream metric in [0, 1] (accuracy or error) to predict from the "
                   "predicted loss by a sigmoid, chained; without it, the loss alone")
    p.add_argument("--holdout", action="store_true",
                   help="also refit without the largest N and report how well the rest "
                   "predicts it (holdout.csv)")
    p.add_argument("--by", nargs="+", default=None, metavar="COL",
                   help="group columns, one fit per group (default: arch and prior, those "
                   "present)")
    p.add_argument("--from-runs", action="store_true",
                   help="TABLE is a study's runs.parquet or a cached study: fit its finished "
                   "runs (analysis/predict/inputs.py; by arch and prior)")
    p.add_argument("--n-boot", type=int, default=200,
                   help="bootstrap replicates (each refits the law; 0: no intervals)")
    p.add_argument("--ci", type=float, default=0.95, help="interval level")
    p.add_argument("--seed", type=int, default=0, help="seed of the bootstrap")
    p.add_argument("--n-polish", type=int, default=256,
                   help="L-BFGS-B from this many best starts of the grid")
    p.add_argument("--compute-axis", choices=("counted", "6nd"), default="counted",
                   help="FLOPs of every output: the table's compute (counted; a target's from "
                   "the FLOPs per token of the sizes run) or 6 N D")
    p.add_argument("--min-fraction", type=float, default=0.25,
                   help="a table of checkpoints (step, run): keep the points at or after this "
                   "fraction of their run's final tokens")
    p.add_argument("--loss-label", default="loss (nats/token)", help="the figure's loss axis")
    p.add_argument("--no-figures", action="store_true", help="write the tables only")


def cmd_predict(args) -> None:
    from .analysis.predict.stage import predict

    result = predict(
        args.table, args.out_dir, args.at, args.by, metric=args.metric,
        with_holdout=args.holdout, from_runs=args.from_runs, n_boot=args.n_boot, ci=args.ci,
        seed=args.seed, n_polish=args.n_polish, compute_axis=args.compute_axis,
        min_fraction=args.min_fraction, figures=not args.no_figures,
        loss_label=args.loss_label,
    )
    print("\n".join(result.summary()))
    print(f"wrote {len(result.files)} files to {args.out_dir}")


def _usable_cpus() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _workers_option(p) -> None:
    p.add_argument("--workers", type=int, default=_usable_cpus(),
                   help="figures drawn at a time, each in its own process (default: the CPUs "
                   "this process may use)")


def parser() -> argparse.ArgumentParser:
    from . import __version__

    top = argparse.ArgumentParser(prog="scalestudy", description=DESCRIPTION,
                                  formatter_class=_HelpFormatter,
                                  epilog="Each command's options: scalestudy <command> --help")
    top.add_argument("--version", action="version", version=f"scalestudy {__version__}")
    sub = top.add_subparsers(dest="command", required=True, metavar="<command>")

    def command(name: str, summary: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=summary, description=summary,
                              formatter_class=_HelpFormatter,
                              epilog=f"example:\n  {EXAMPLES[name]}")

    runs_help = "the run records: a runs.parquet, or a cached study's data/cache/<study>.parquet"
    fits_help = "the fits.parquet of the same runs (scalestudy fit)"

    p = command("data", "convert a task's source (LRA release or offline stand-in) into the "
                "data contract: cached arrays and manifest.json")
    p.add_argument("--task", required=True, help="the task to prepare (a name of grid.tasks)")
    p.add_argument("--config", required=True,
                   help="the task's config as JSON (its tasks.<task> section of the study)")
    p.add_argument("--out-dir", required=True, type=Path,
                   help="directory to write train.npz, val.npz, test.npz and manifest.json "
                   "into (replaced whole)")
    p.set_defaults(func=cmd_data)

    p = command("train", "train one grid cell and write its run record")
    p.add_argument("--spec", required=True, help="the run spec as JSON (study.specs.RunSpec)")
    p.add_argument("--data-dir", required=True, type=Path,
                   help="the task's prepared data (scalestudy data --out-dir)")
    p.add_argument("--run-dir", required=True, type=Path,
                   help="directory for the run's metrics.csv, last.ckpt and record.parquet "
                   "(written last)")
    p.add_argument("--pretrained", type=Path, metavar="DIR",
                   help="the pretraining stage's directory (best.ckpt, record.parquet): spt and "
                   "upstream load its checkpoint, scratch_matched matches its compute; omitted "
                   "(the default) for the priors that need no pretraining")
    p.add_argument("--trunk", type=Path, metavar="DIR",
                   help="a wsd branch's trunk run directory (its fork-b<budget>.ckpt), where the "
                   "branch starts (training/branches.py); by default the trunk's directory "
                   "beside the branch's own in the study's results")
    p.set_defaults(func=cmd_train)

    p = command("pretrain", "pretrain one backbone (spt or upstream)")
    p.add_argument("--spec", required=True,
                   help="the pretraining spec as JSON (study.specs.PretrainSpec)")
    p.add_argument("--data-dir", required=True, type=Path,
                   help="the corpus: the task's prepared split files (spt) or the upstream "
                   "corpus (upstream; scalestudy corpus --out-dir)")
    p.add_argument("--out-dir", required=True, type=Path,
                   help="directory for best.ckpt, last.ckpt, metrics.csv and record.parquet")
    p.add_argument("--trunk", type=Path, metavar="DIR",
                   help="a wsd branch's trunk run directory (its fork-b<budget>.ckpt), where the "
                   "branch starts (training/branches.py); by default the trunk's directory "
                   "beside the branch's own in the study's results")
    p.set_defaults(func=cmd_pretrain)

    p = command("corpus", "prepare the upstream corpus")
    p.add_argument("--config", required=True,
                   help="the upstream config as JSON (the study's upstream section)")
    p.add_argument("--out-dir", required=True, type=Path,
                   help="directory to write train.pt, val.pt, test.pt and manifest.json into")
    p.set_defaults(func=cmd_corpus)

    p = command("collect", "validate run records into one runs.parquet")
    p.add_argument("records", nargs="*", type=Path,
                   help="the run records (record.parquet files) to validate and concatenate")
    p.add_argument("--out", required=True, type=Path, help="the runs.parquet to write")
    p.set_defaults(func=cmd_collect)

    p = command("fit", "fit power laws to a runs.parquet (or a cached study)")
    p.add_argument("runs", type=Path, help=runs_help)
    p.add_argument("--out", required=True, type=Path, help="the fits.parquet to write")
    _fit_options(p)
    p.add_argument("--n-boot-saturating", type=int, default=100,
                   help="bootstrap resamples of each saturating fit (each is a refit)")
    p.set_defaults(func=cmd_fit)

    p = command("plot", "every figure from runs.parquet and fits.parquet")
    p.add_argument("runs", type=Path, help=runs_help)
    p.add_argument("fits", type=Path, help=fits_help)
    p.add_argument("--out-dir", required=True, type=Path,
                   help="directory for the figures (PNG and PDF)")
    p.add_argument("--tasks", nargs="*", help="one accuracy figure per task (default: the "
                   "tasks in the runs)")
    p.add_argument("--frontier", type=Path, metavar="DIR",
                   help="the study's frontier (scalestudy frontier --from-runs --out-dir), "
                   "which its figures draw; omitted for a study without budgets")
    _workers_option(p)
    p.set_defaults(func=cmd_plot)

    p = command("figure", "one figure of the registry, or a notice of why it has no data")
    p.add_argument("runs", type=Path, help=runs_help)
    p.add_argument("fits", type=Path, help=fits_help)
    p.add_argument("--name", required=True,
                   help="the figure's file stem (a registry figure, <figure>_<task> for a "
                   "per-task one)")
    p.add_argument("--out-dir", required=True, type=Path,
                   help="directory for the figure's PNG, PDF and CSV")
    p.add_argument("--entry", required=True, type=Path,
                   help="the JSON file to write the figure's index entry to")
    p.add_argument("--tasks", nargs="+", required=True, help="the study's tasks")
    p.add_argument("--frontier", type=Path, metavar="DIR",
                   help="the study's frontier (scalestudy frontier --from-runs --out-dir), "
                   "which its figures draw; omitted for a study without budgets")
    p.set_defaults(func=cmd_figure)

    p = command("figure-index", "figures/index.md from the figures' entries")
    p.add_argument("entries", nargs="*", type=Path,
                   help="the entries `scalestudy figure` wrote (JSON)")
    p.add_argument("--out", required=True, type=Path, help="the index.md to write")
    p.add_argument("--tasks", nargs="+", required=True, help="the study's tasks")
    p.set_defaults(func=cmd_figure_index)

    p = command("tables", "alpha and LRA-style accuracy tables (CSV, Markdown)")
    p.add_argument("runs", type=Path, help=runs_help)
    p.add_argument("fits", type=Path, help=fits_help)
    p.add_argument("--out-dir", required=True, type=Path,
                   help="directory for the tables (CSV and Markdown)")
    p.set_defaults(func=cmd_tables)

    p = command("claims", "check the papers' claims; write claims.md")
    p.add_argument("runs", type=Path, help=runs_help)
    p.add_argument("fits", type=Path, help=fits_help)
    p.add_argument("--out", required=True, type=Path, help="the claims.md to write")
    p.add_argument("--n-boot", type=int, default=1000,
                   help="bootstrap resamples of each claim's interval")
    p.add_argument("--ci", type=float, default=0.95,
                   help="coverage of the bootstrap confidence intervals")
    p.add_argument("--seed", type=int, default=0, help="seed of the bootstrap resampling")
    p.add_argument("--frontier", type=Path, metavar="DIR",
                   help="the study's frontier (scalestudy frontier --from-runs --out-dir), "
                   "whose fits and replicates the frontier claims read; omitted for a study "
                   "without budgets, or to fit it here as the frontier rule does")
    p.set_defaults(func=cmd_claims)

    p = command("frontier", "the compute-optimal frontier of a table of runs (Hoffmann et "
                "al. 2022, approaches 1-3): N_opt ~ C^a and D_opt ~ C^b per architecture")
    _frontier_options(p)
    p.set_defaults(func=cmd_frontier)

    p = command("predict", "predict the loss (and a downstream metric) of larger runs from a "
                "ladder of runs: L(N, D) of Hoffmann et al. 2022, approach 3, with prediction "
                "intervals")
    _predict_options(p)
    p.set_defaults(func=cmd_predict)

    p = command("analyse", "fits, frontier, figures, tables and claims of a runs file "
                "(e.g. a cached study), without training")
    p.add_argument("runs", type=Path, help=runs_help)
    p.add_argument("--out-dir", required=True, type=Path,
                   help="directory for fits.parquet, frontier/ (runs with budgets), figures/, "
                   "tables/ and claims.md")
    _fit_options(p)
    p.add_argument("--n-boot-saturating", type=int, default=100,
                   help="bootstrap resamples of each saturating fit (each is a refit)")
    _workers_option(p)
    p.set_defaults(func=cmd_analyse)

    p = command("status", "where a study stands: per stage its runs done, running, failed, "
                "diverged or pending; the failed runs' errors and logs; training time spent "
                "and left")
    p.add_argument("study_dir", nargs="?", type=Path,
                   help="the study's results directory, results/<study> (default: the one "
                   "study under results/)")
    p.set_defaults(func=cmd_status)
    for parser_ in (top, *sub.choices.values()):
        for action in parser_._actions:
            action.metavar = _metavar(action)
    return top


def run_command(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    try:
        args.func(args)
    except (ValueError, OSError) as err:
        print(f"scalestudy {args.command}: error: {err}", file=sys.stderr)
        return 2
    return 0
