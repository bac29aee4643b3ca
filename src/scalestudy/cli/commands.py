"""What each `scalestudy` command runs: one function per command, taking
the parsed arguments (cli/parser.py) and calling the package (a training
job, an analysis stage, a status report). Each imports what it needs when
it runs, so that the analysis commands never load torch."""

from __future__ import annotations

import json


def cmd_train(args) -> None:
    from ..study.specs import RunSpec
    from ..training import job

    spec = RunSpec.from_dict(json.loads(args.spec))  # a bad spec fails the job
    record = job.train(spec, args.data_dir, args.run_dir, args.pretrained, args.trunk)
    print(job.summary(record, "test_acc"))


def cmd_pretrain(args) -> None:
    from ..study.specs import PretrainSpec
    from ..training import job

    spec = PretrainSpec.from_dict(json.loads(args.spec))
    record = job.pretrain(spec, args.data_dir, args.out_dir, args.trunk)
    print(job.summary(record, "val_loss"))


def cmd_data(args) -> None:
    from .. import tasks

    manifest = tasks.prepare(args.task, json.loads(args.config), args.out_dir)
    counts = {split: info["n"] for split, info in manifest["splits"].items()}
    print(f"{args.task} ({tasks.data_label(manifest)}): {counts} examples of "
          f"{manifest['seq_len']} tokens in {args.out_dir}")


def cmd_corpus(args) -> None:
    from ..tasks import upstream

    counts = upstream.prepare(upstream.config_from(json.loads(args.config)), args.out_dir)
    print(f"upstream corpus: {counts} sequences in {args.out_dir}")


def cmd_collect(args) -> None:
    from ..atomic import refuse_overwrite
    from ..records import collect, is_records_file, write_frame

    refuse_overwrite(args.out, "a runs table (run records)", args.records, is_records_file)
    frame = collect(args.records)
    write_frame(frame, args.out)
    counts = frame["status"].value_counts().to_dict()
    print(f"collected {len(frame)} runs into {args.out}: {counts}")


def cmd_stage(args) -> None:
    """An analysis stage's command (analysis/stages.py), made from its entry: its
    output refused before anything runs where the stage must not replace it, the
    runs read and checked (analysis/inputs.py), the artifacts of the stages it
    needs given (each read back by its stage; one not given is fitted from the
    runs, with the options of the same names), then its artifact written."""
    from ..analysis.inputs import read_runs
    from ..analysis.options import parsed
    from ..analysis.stages import ANALYSIS_STAGES, Analysis, needs_of

    stage = ANALYSIS_STAGES[args.command]
    required, optional = needs_of(stage)
    given = {name: getattr(args, name) for name in required}
    given |= {name: path for name in optional if (path := getattr(args, name)) is not None}
    stage.refuse(args.out, [args.runs, *given.values()])
    options = parsed(stage.options, args)
    analysis = Analysis(read_runs(args.runs), options, given)
    paths = analysis.write(stage.name, args.out)
    print(stage.summary(analysis, paths))


def cmd_figure(args) -> None:
    """One figure the study's grid feeds (the workflow's `figure` rule): its
    files, or a notice saying why it has none, and its index entry: a part of
    the figures stage (figures/draw.py `part`)."""
    from ..analysis.figures.draw import write_entry
    from ..analysis.inputs import read_runs
    from ..analysis.stages import ANALYSIS_STAGES, Analysis

    stage = ANALYSIS_STAGES["figures"]
    stage.refuse(args.out_dir, [args.runs, args.fits])
    # Without --frontier, a study without budgets: no frontier, never one fitted here.
    analysis = Analysis(read_runs(args.runs), given={"fit": args.fits,
                                                     "frontier": args.frontier})
    entry = stage.implementation.part(analysis, args.name, args.out_dir, args.tasks)
    write_entry(entry, args.entry)
    print(f"{args.name}: " + (", ".join(map(str, entry.files)) if entry.drawn else
                              f"not drawn ({entry.reason}); a notice stands in its place"))


def cmd_figure_index(args) -> None:
    """figures/index.md from the entries of the figures drawn, the rest of the
    registry's figures listed as not fed by the grid."""
    from ..analysis.figures import figure_names
    from ..analysis.figures.draw import read_entry, undeclared
    from ..analysis.figures.output import write_index

    drawn = {e.name: e for e in map(read_entry, args.entries)}
    entries = {stem: drawn.get(stem) or undeclared(stem, args.tasks)
               for stem in figure_names(args.tasks)}
    print(f"wrote {write_index(entries, args.out.parent)}")


def cmd_status(args) -> None:
    from ..study.status import only_study, report, study_status

    print(report(study_status(args.study_dir or only_study())))


def cmd_options(args) -> None:
    from ..study.config import reference

    print(reference(), end="")


def cmd_frontier(args) -> None:
    """The frontier of any table, or of a study's runs (--from-runs: the frontier
    stage's command, analysis/stages.py), with its options (FrontierOptions)."""
    from ..analysis.frontier.next_run import check_next_run, write_next_run
    from ..analysis.frontier.options import FrontierOptions
    from ..analysis.frontier.stage import frontier
    from ..analysis.frontier.study import read_fit_table
    from ..analysis.options import parsed

    if args.next_run:
        check_next_run(args.from_runs, args.predict, args.next_run, args.table)
    result = frontier(read_fit_table(args.table) if args.from_runs else args.table,
                      args.out_dir, predict=args.predict, by=args.by, curves=args.curves,
                      options=parsed(FrontierOptions, args))
    print("\n".join(result.summary()))
    print(f"wrote {len(result.paths)} files to {args.out_dir}")
    if args.next_run:
        planned = write_next_run(result, args.table, args.next_run)
        print(f"wrote the next run's preset ({planned.summary()}) to {args.next_run}")


def cmd_predict(args) -> None:
    """A prediction from any ladder (the prediction stage, analysis/stages.py),
    with its options (PredictOptions)."""
    from ..analysis.options import parsed
    from ..analysis.predict.options import PredictOptions
    from ..analysis.predict.stage import predict

    result = predict(
        args.table, args.out_dir, args.at, args.by, metric=args.metric,
        task_loss=args.task_loss, with_holdout=args.holdout, from_runs=args.from_runs,
        checkpoints=args.checkpoints,
        options=parsed(PredictOptions, args),
    )
    print("\n".join(result.summary()))
    print(f"wrote {len(result.files)} files to {args.out_dir}")


def cmd_plan(args) -> None:
    """The planner (analysis/plan/) with the study's costs (cli/plan.py)."""
    from . import plan

    plan.run(args)


def cmd_analyse(args) -> None:
    """The analysis stages (analysis/stages.py: fits.parquet, frontier/ for
    runs with budgets, figures/, tables/ and claims.md) of one runs file, in
    one process."""
    import time

    from ..analysis.inputs import read_runs
    from ..analysis.options import parsed
    from ..analysis.stages import Options, analyse

    start = time.perf_counter()
    runs = read_runs(args.runs)
    analysis, paths = analyse(runs, args.out_dir, parsed(Options, args), inputs=[args.runs])
    for path in paths:
        print(f"wrote {path}")
    verdicts = analysis.claims["verdict"].value_counts().to_dict()
    print(f"{len(runs)} runs, {len(analysis.fits)} fits, claims {verdicts}"
          f" in {time.perf_counter() - start:.1f}s")
