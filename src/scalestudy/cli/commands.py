"""What each `scalestudy` command runs: one function per command, taking
the parsed arguments (cli/parser.py) and calling the package (a training
job, an analysis stage, a status report). Each imports what it needs when
it runs, so that the analysis commands never load torch."""

from __future__ import annotations

import json
from pathlib import Path


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


def _stage(name: str, analysis, out, **options) -> list[Path]:
    """Run one analysis stage (analysis/stages.py), as `analyse` runs them all."""
    from ..analysis.stages import ANALYSIS_STAGES, Options

    return ANALYSIS_STAGES[name].write(analysis, Path(out), Options(**options))


def cmd_fit(args) -> None:
    from ..analysis.inputs import is_fits_table, read_runs
    from ..analysis.stages import Analysis
    from ..atomic import refuse_overwrite

    refuse_overwrite(args.out, "a fits table", [args.runs], is_fits_table)
    analysis = Analysis(read_runs(args.runs))
    _stage("fit", analysis, args.out, x_axis=args.x, n_boot=args.n_boot, ci=args.ci,
           seed=args.seed, n_boot_saturating=args.n_boot_saturating)
    print(analysis.fits.drop(columns=["coef", "E", "A"]).to_string(index=False))


def _read(args):
    """The runs and fits a command names, each checked (analysis/inputs.py)."""
    from ..analysis.inputs import read_fits, read_runs

    return read_runs(args.runs), read_fits(args.fits)


def _frontier(args):
    """The frontier `--frontier` names (its directory), else None."""
    from ..analysis.frontier.result import FrontierResult

    return None if args.frontier is None else FrontierResult.read(args.frontier)


def cmd_figure(args) -> None:
    """One figure the study's grid feeds (the workflow's `figure` rule): its
    files, or a notice saying why it has none, and its index entry."""
    from ..analysis.figures.draw import draw_figure, write_entry
    from ..atomic import refuse_foreign

    refuse_foreign(args.out_dir, None, "a figures", [args.runs, args.fits])
    runs, fits = _read(args)
    entry = draw_figure(args.name, runs, fits, args.out_dir, args.tasks, declared=True,
                        frontier=_frontier(args))
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


def cmd_tables(args) -> None:
    from ..analysis.stages import Analysis
    from ..analysis.tables import TABLE_FILES
    from ..atomic import refuse_foreign

    refuse_foreign(args.out_dir, TABLE_FILES, "a tables", [args.runs, args.fits])
    for path in _stage("tables", Analysis(*_read(args)), args.out_dir):
        print(f"wrote {path}")


def cmd_claims(args) -> None:
    from ..analysis.claims.report import is_claims_report
    from ..analysis.stages import Analysis
    from ..atomic import refuse_overwrite

    refuse_overwrite(args.out, "a claims report", [args.runs, args.fits], is_claims_report)
    analysis = Analysis(*_read(args), frontier=_frontier(args))
    _stage("claims", analysis, args.out, n_boot=args.n_boot, ci=args.ci, seed=args.seed)
    print(f"wrote {args.out}: {analysis.claims['verdict'].value_counts().to_dict()}")


def cmd_status(args) -> None:
    from ..study.status import only_study, report, study_status

    print(report(study_status(args.study_dir or only_study())))


def cmd_options(args) -> None:
    from ..study.config import reference

    print(reference(), end="")


def cmd_frontier(args) -> None:
    from ..analysis.frontier.next_run import check_next_run, write_next_run
    from ..analysis.frontier.stage import frontier
    from ..analysis.frontier.study import read_fit_table

    if args.next_run:
        check_next_run(args.from_runs, args.predict, args.next_run, args.table)
    result = frontier(
        read_fit_table(args.table) if args.from_runs else args.table, args.out_dir,
        predict=args.predict, by=args.by, curves=args.curves, n_boot=args.n_boot, ci=args.ci,
        seed=args.seed, budget_gap=args.budget_gap, max_span=args.max_span,
        min_sizes=args.min_sizes, window=args.window, compute_axis=args.compute_axis,
        n_polish=args.n_polish, figures=not args.no_figures, loss_label=args.loss_label,
    )
    print("\n".join(result.summary()))
    print(f"wrote {len(result.paths)} files to {args.out_dir}")
    if args.next_run:
        planned = write_next_run(result, args.table, args.next_run)
        print(f"wrote the next run's preset ({planned.summary()}) to {args.next_run}")


def cmd_predict(args) -> None:
    from ..analysis.predict.stage import predict

    result = predict(
        args.table, args.out_dir, args.at, args.by, metric=args.metric,
        with_holdout=args.holdout, from_runs=args.from_runs, checkpoints=args.checkpoints,
        n_boot=args.n_boot, ci=args.ci,
        seed=args.seed, n_polish=args.n_polish, compute_axis=args.compute_axis,
        min_fraction=args.min_fraction, figures=not args.no_figures,
        loss_label=args.loss_label,
    )
    print("\n".join(result.summary()))
    print(f"wrote {len(result.files)} files to {args.out_dir}")


def cmd_analyse(args) -> None:
    """The analysis stages (analysis/stages.py: fits.parquet, frontier/ for
    runs with budgets, figures/, tables/ and claims.md) of one runs file, in
    one process."""
    import time

    from ..analysis.inputs import read_runs
    from ..analysis.stages import Options, analyse

    start = time.perf_counter()
    runs = read_runs(args.runs)
    options = Options(x_axis=args.x, n_boot=args.n_boot, ci=args.ci, seed=args.seed,
                      n_boot_saturating=args.n_boot_saturating, workers=args.workers)
    analysis, paths = analyse(runs, args.out_dir, options, inputs=[args.runs])
    for path in paths:
        print(f"wrote {path}")
    verdicts = analysis.claims["verdict"].value_counts().to_dict()
    print(f"{len(runs)} runs, {len(analysis.fits)} fits, claims {verdicts}"
          f" in {time.perf_counter() - start:.1f}s")
