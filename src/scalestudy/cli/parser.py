"""The `scalestudy` command table: every command's name, options, help and
example (`parser`), and `run_command`, which parses a command line and runs
its command (cli/commands.py) in this process.

The workflow's rules call `data`, `corpus`, `pretrain`, `train`, `collect`,
the analysis stages' commands (analysis/stages.py: `fit`, `tables`, `claims`
and any stage whose command is its own name are made from its entry, its
options and their defaults from their declaration; `frontier`, for a study with
budgets), `figure` and `figure-index`; `analyse` runs a cached study's analysis
stages, `frontier` fits the compute-optimal frontier of any table of runs too,
`predict` predicts larger runs from any ladder, `status` says where a running
study stands, and `options` prints every option a study may state.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import typing
from pathlib import Path

from .. import errors, plugins
from ..analysis.frontier.options import FrontierOptions
from ..analysis.options import Options, cli_settings, flag, switch_dest
from ..analysis.stages import ANALYSIS_STAGES, needs_of
from . import commands

NUMBER_LIKE = re.compile(r"^-\.?\d")


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


RUNS_HELP = "the run records: a runs.parquet, or a cached study's data/cache/<study>.parquet"

DESCRIPTION = """Scaling-law studies of architectures and initialisation priors: the commands
the workflow's jobs run (snakemake --cores N runs a whole study), and those a
researcher runs on a study's results (status, analyse, frontier), on any table
of runs (frontier, predict), or to see what a study may state (options)."""

# One example per subcommand, shown under its --help (a stage's command: its entry's).
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
    "figure": "scalestudy figure results/default/runs.parquet results/default/fits.parquet "
              "--name error_vs_compute \\\n      --out-dir /tmp/figures --entry /tmp/entry.json "
              "--tasks listops",
    "figure-index": "scalestudy figure-index /tmp/entry.json --out /tmp/figures/index.md "
                    "--tasks listops",
    "frontier": "scalestudy frontier runs.csv --out-dir /tmp/frontier --predict 1e18 1e19",
    "predict": "scalestudy predict ladder.csv --at 7e9:1.4e11 70e9:1.4e12 --out-dir "
               "/tmp/predict --holdout",
    "analyse": "scalestudy analyse data/cache/workstation.parquet --out-dir results/workstation",
    "plan": "scalestudy plan config/studies/tay_claims.yaml --pilot "
            "data/cache/workstation.parquet \\\n      --claims flat_or_negative_downstream "
            "--budget-hours 3 --out /tmp/planned.yaml",
    "status": "scalestudy status results/default",
    "options": "scalestudy options > /tmp/options.yaml",
    **{name: stage.example for name, stage in ANALYSIS_STAGES.items() if stage.own_command},
}


def _options(p, cls: type, **own) -> None:
    """The command-line options of options `cls` (analysis/options.py): each
    setting's flag, help and default as declared (`own`: name -> (default,
    why), a command's own default where it differs, and what it is)."""
    hints = typing.get_type_hints(cls)
    for f in cli_settings(cls):
        kind = hints[f.name]
        kind = next((a for a in typing.get_args(kind) if a is not type(None)), kind)
        extra = f.metadata["argparse"]
        default, why = own.get(f.name, (f.default, ""))
        described = f.metadata["help"] + (f" ({why})" if why else "")
        if kind is bool:  # a switch, given or not (options.switch_dest)
            p.add_argument(flag(f), dest=switch_dest(f), action="store_true", help=described)
            continue
        p.add_argument(flag(f), dest=f.name, type=None if "choices" in extra else kind,
                       default=default, help=described, **extra)


def _stage_command(p, stage) -> None:
    """The command of an analysis stage, made from its entry (analysis/stages.py):
    the runs, the artifacts of the stages it needs (positional where every
    study has them, an option where only some grids do), its output and its
    options."""
    p.add_argument("runs", type=Path, help=RUNS_HELP)
    required, optional = needs_of(stage)
    for name in required:
        need = ANALYSIS_STAGES[name]
        p.add_argument(name, type=Path,
                       help=f"the {need.artifact} of the same runs (scalestudy {name})")
    if stage.is_directory:
        p.add_argument("--out-dir", dest="out", required=True, type=Path, metavar="DIR",
                       help=f"directory for its files ({', '.join(stage.artifact_files())}), "
                       "replaced whole")
    else:
        p.add_argument("--out", required=True, type=Path,
                       help=f"the {stage.artifact} to write")
    _options(p, stage.options)
    for name in optional:
        need = ANALYSIS_STAGES[name]
        p.add_argument(f"--{name}", type=Path, metavar="DIR",
                       help=f"the study's {need.artifact}/ (scalestudy "
                       f"{' '.join(need.command or (name,))} --out-dir), whose result it "
                       "reads; omitted: its stage runs here on the runs (nothing for a "
                       "study without budgets)")


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
    _options(p, FrontierOptions)
    p.add_argument("--from-runs", action="store_true",
                   help="TABLE is a study's runs.parquet: fit its budgeted runs "
                        "(analysis/frontier/study.py; by arch and prior)")
    p.add_argument("--next-run", type=Path, metavar="PRESET",
                   help="with --from-runs and --predict: write the preset of the next run, "
                        "an IsoFLOP group at each predicted budget whose sizes bracket "
                        "approach 2's optimum, to layer on the study's own "
                        "(analysis/frontier/next_run.py)")


def _trunk_option(p) -> None:
    p.add_argument("--trunk", type=Path, metavar="DIR",
                   help="a wsd branch's trunk run directory (its fork-b<budget>.ckpt), where the "
                   "branch starts (training/branches.py); by default the trunk's directory "
                   "beside the branch's own in the study's results")


def _predict_options(p) -> None:
    p.add_argument("table", help="CSV or Parquet of runs: params, loss, tokens and/or compute; "
                                 "optional group columns (arch, prior), seed, a metric column, "
                                 "step with run (checkpoints); or a study's run records with "
                                 "--from-runs; or a study's results directory with --checkpoints")
    p.add_argument("--at", nargs="+", required=True, action="extend", metavar="N:D",
                   help="the targets: parameters and tokens of each run to predict")
    p.add_argument("--out-dir", required=True, type=Path,
                   help="directory for predictions.csv, fit.csv, runs.csv, holdout.csv, "
                   "predict.json and the figure, replaced whole (one holding other files is "
                   "refused)")
    p.add_argument("--metric", metavar="COLUMN",
                   help="a downstream metric in [0, 1] (accuracy or error) to predict from the "
                   "predicted loss by a sigmoid, chained; without it, the loss alone")
    p.add_argument("--task-loss", metavar="COLUMN",
                   help="with --metric: the task's loss the metric is a sigmoid of, predicted "
                   "by its own L(N, D) or from the loss (--path); the loss column stays the "
                   "general loss")
    p.add_argument("--holdout", action="store_true",
                   help="also refit without the largest N and report how well the rest "
                   "predicts it (holdout.csv)")
    p.add_argument("--by", nargs="+", default=None, metavar="COL",
                   help="group columns, one fit per group (default: arch and prior, those "
                   "present)")
    p.add_argument("--from-runs", action="store_true",
                   help="TABLE is a study's runs.parquet or a cached study: fit its finished "
                   "runs (analysis/predict/inputs.py; by arch and prior)")
    p.add_argument("--checkpoints", action="store_true",
                   help="TABLE is a study's results directory: fit every run's validation "
                   "curve (metrics.csv) as checkpoints, after --min-fraction "
                   "(analysis/predict/curves.py)")
    _options(p, ANALYSIS_STAGES["predict"].options)


def _plan_options(p) -> None:
    p.add_argument("preset", nargs="?", type=Path,
                   help="the candidate study: a preset over config/config.yaml (default: "
                   "config/config.yaml's study)")
    p.add_argument("--pilot", required=True, type=Path,
                   help="a pilot's run records (a runs.parquet or data/cache/<study>.parquet): "
                   "each cell's law, the runs' noise and what a run costs")
    p.add_argument("--noise", type=float, default=0.0,
                   help="the log noise sd of a run, stated (0: the pilot's)")
    p.add_argument("--correlation", type=float, default=-1.0,
                   help="the correlation of architectures' runs at the same size and seed, "
                   "stated (-1: the pilot's)")
    p.add_argument("--claims", nargs="+", default=None, metavar="CLAIM",
                   help="the claims to plan (names of the claim registry; default: every "
                   "claim)")
    p.add_argument("--out", type=Path, metavar="PRESET",
                   help="write the cheapest design that decides every claim of --claims at "
                   "--power as a preset (the candidate's, its sizes, seeds, name and plan "
                   "section changed)")
    p.add_argument("--name", help="the written preset's study name (default: the "
                   "candidate's with _plan)")
    p.add_argument("--extrapolate", action="store_true",
                   help="let a design run sizes beyond the pilot's (its laws extrapolated "
                   "there); by default a design's sizes lie within the pilot's")
    _options(p, ANALYSIS_STAGES["plan"].options)


def _usable_cpus() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def parser() -> argparse.ArgumentParser:
    from .. import __version__

    top = argparse.ArgumentParser(prog="scalestudy", description=DESCRIPTION,
                                  formatter_class=_HelpFormatter,
                                  epilog="Each command's options: scalestudy <command> --help")
    top.add_argument("--version", action="version", version=f"scalestudy {__version__}")
    sub = top.add_subparsers(dest="command", required=True, metavar="<command>")

    def command(name: str, summary: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=summary, description=summary,
                              formatter_class=_HelpFormatter,
                              epilog=f"example:\n  {EXAMPLES[name]}")

    fits_help = "the fits.parquet of the same runs (scalestudy fit)"

    p = command("data", "convert a task's source (LRA release, offline stand-in or your own "
                "files) into the data contract: cached arrays and manifest.json")
    p.add_argument("--task", required=True, help="the task to prepare (a name of grid.tasks)")
    p.add_argument("--config", required=True,
                   help="the task's config as JSON (its tasks.<task> section of the study)")
    p.add_argument("--out-dir", required=True, type=Path,
                   help="directory to write train.npz, val.npz, test.npz and manifest.json "
                   "into (replaced whole)")
    p.set_defaults(func=commands.cmd_data)

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
    _trunk_option(p)
    p.set_defaults(func=commands.cmd_train)

    p = command("pretrain", "pretrain one backbone (spt or upstream)")
    p.add_argument("--spec", required=True,
                   help="the pretraining spec as JSON (study.specs.PretrainSpec)")
    p.add_argument("--data-dir", required=True, type=Path,
                   help="the corpus: the task's prepared split files (spt) or the upstream "
                   "corpus (upstream; scalestudy corpus --out-dir)")
    p.add_argument("--out-dir", required=True, type=Path,
                   help="directory for best.ckpt, last.ckpt, metrics.csv and record.parquet")
    _trunk_option(p)
    p.set_defaults(func=commands.cmd_pretrain)

    p = command("corpus", "prepare the upstream corpus")
    p.add_argument("--config", required=True,
                   help="the upstream config as JSON (the study's upstream section)")
    p.add_argument("--out-dir", required=True, type=Path,
                   help="directory to write train.pt, val.pt, test.pt and manifest.json into")
    p.set_defaults(func=commands.cmd_corpus)

    p = command("collect", "validate run records into one runs.parquet")
    p.add_argument("records", nargs="*", type=Path,
                   help="the run records (record.parquet files) to validate and concatenate")
    p.add_argument("--out", required=True, type=Path, help="the runs.parquet to write")
    p.set_defaults(func=commands.cmd_collect)

    for stage in ANALYSIS_STAGES.values():
        if stage.own_command:
            p = command(stage.name, stage.help)
            _stage_command(p, stage)
            p.set_defaults(func=commands.cmd_stage)

    p = command("figure", "one figure of the registry, or a notice of why it has no data")
    p.add_argument("runs", type=Path, help=RUNS_HELP)
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
    p.set_defaults(func=commands.cmd_figure)

    p = command("figure-index", "figures/index.md from the figures' entries")
    p.add_argument("entries", nargs="*", type=Path,
                   help="the entries `scalestudy figure` wrote (JSON)")
    p.add_argument("--out", required=True, type=Path, help="the index.md to write")
    p.add_argument("--tasks", nargs="+", required=True, help="the study's tasks")
    p.set_defaults(func=commands.cmd_figure_index)

    p = command("frontier", "the compute-optimal frontier of a table of runs (Hoffmann et "
                "al. 2022, approaches 1-3): N_opt ~ C^a and D_opt ~ C^b per architecture")
    _frontier_options(p)
    p.set_defaults(func=commands.cmd_frontier)

    p = command("predict", "predict the loss (and a downstream metric) of larger runs from a "
                "ladder of runs: L(N, D) of Hoffmann et al. 2022, approach 3, with prediction "
                "intervals")
    _predict_options(p)
    p.set_defaults(func=commands.cmd_predict)

    p = command("plan", "plan a study before it runs: per claim, its power on a candidate "
                "study under the claims' own rules, and the cheapest design (sizes, seeds) "
                "that decides it, written as a preset")
    _plan_options(p)
    p.set_defaults(func=commands.cmd_plan)

    p = command("analyse", "fits, frontier, figures, tables and claims of a runs file "
                "(e.g. a cached study), without training")
    p.add_argument("runs", type=Path, help=RUNS_HELP)
    p.add_argument("--out-dir", required=True, type=Path,
                   help="directory for fits.parquet, frontier/ (runs with budgets), figures/, "
                   "tables/ and claims.md")
    _options(p, Options, workers=(_usable_cpus(), "default: the CPUs this process may use"))
    p.set_defaults(func=commands.cmd_analyse)

    p = command("status", "where a study stands: per stage its runs done, running, failed, "
                "diverged or pending; the failed runs' errors and logs; training time spent "
                "and left")
    p.add_argument("study_dir", nargs="?", type=Path,
                   help="the study's results directory, results/<study> (default: the one "
                   "study under results/)")
    p.set_defaults(func=commands.cmd_status)

    p = command("options", "every option a study may state, with its default and what it "
                "means, as YAML (an option a study does not state takes its default)")
    p.set_defaults(func=commands.cmd_options)
    for parser_ in (top, *sub.choices.values()):
        for action in parser_._actions:
            action.metavar = _metavar(action)
        # No option starts with a digit, so "-1:5" or "-1e3" is a value (refused
        # by its own check, naming the option), not an unknown option.
        parser_._negative_number_matcher = NUMBER_LIKE
    return top


def run_command(argv: list[str]) -> int:
    """Parse `argv` and run its command here; its exit status (errors.py): 2
    with one line of error for a ValueError or OSError (a bad input, a refused
    output, a full disk), 3 with one line where there is nothing to fit,
    predict or decide, else 0."""
    try:  # a study's plugins ($SCALESTUDY_PLUGINS) join the registries the commands read
        plugins.from_environment()
    except ValueError as err:
        print(f"scalestudy: error: {err}", file=sys.stderr)
        return errors.BAD_INPUT
    args = parser().parse_args(argv)
    try:
        args.func(args)
    except errors.NoResult as err:
        print(f"scalestudy {args.command}: nothing to report: {err}", file=sys.stderr)
        return errors.NO_RESULT
    except (ValueError, OSError) as err:
        print(f"scalestudy {args.command}: error: {err}", file=sys.stderr)
        return errors.BAD_INPUT
    return errors.OK
