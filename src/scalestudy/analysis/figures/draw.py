"""Drawing a study's figures: one (`draw_figure`, the workflow's `figure`
rule) or every figure of the registry (`plot_all`: the figures stage of
`scalestudy analyse`), and figures/index.md, which lists each figure with its files or
the reason it was not drawn; and the frontier's figures of any table
(`draw_frontier`: `scalestudy frontier`). The frontier's figures draw the
frontier's result, given as `frontier` (analysis/frontier), the others the
runs and fits.

A figure without data is not drawn (its `draw` raises NotDrawn, saying why).
A figure the study's grid feeds is a declared output of the workflow: should
it still have nothing to show (every run it needs failed), a notice saying why
stands in its place, so that no declared file is ever missing.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd

from ...atomic import write_text
from . import FIGURES, Grid, figure_names, grid_figures
from .layout import tasks_of
from .output import FigureEntry, FigureIndex, NotDrawn, draw_notice, remove_files, write_index


def draw_figure(stem: str, runs: pd.DataFrame, fits: pd.DataFrame, out_dir: Path, tasks,
                declared: bool, frontier=None) -> FigureEntry:
    """Draw the figure `stem` of `figure_names(tasks)`, or its notice when it has
    no data and is `declared`; an undeclared figure without data leaves no files."""
    figure, task = figure_names(tasks)[stem]
    try:
        result = figure.draw(runs, fits, out_dir, tasks=tasks, task=task, frontier=frontier)
    except NotDrawn as err:
        remove_files(out_dir, stem)
        entry = FigureEntry(stem, reason=str(err))
        if declared:
            entry.files, entry.notice = draw_notice(out_dir, stem, str(err)), True
        return entry
    return FigureEntry(stem, files=list(result), notes=list(result.notes))


def undeclared(stem: str, tasks) -> FigureEntry:
    """The index entry of a figure the study's grid does not feed."""
    figure, _ = figure_names(tasks)[stem]
    return FigureEntry(stem, reason=f"the study's grid does not feed it: it needs {figure.needs}")


def write_entry(entry: FigureEntry, path: Path) -> None:
    write_text(json.dumps(entry.as_dict(), indent=1) + "\n", path)


def read_entry(path: Path) -> FigureEntry:
    return FigureEntry.from_dict(json.loads(Path(path).read_text()))


_JOBS: dict = {}  # the figures of the `_draw_all` under way, inherited by its workers


def _draw_job(stem: str) -> FigureEntry:
    return _JOBS[stem]()


def _draw_all(jobs: dict, workers: int) -> list[FigureEntry]:
    """Every job's entry, in order; in `workers` forked processes when more
    than one (figures are independent: each a few seconds of layout and
    rendering, the longest ~10 s on a study of 13 architectures x 7 priors).
    Forking shares the data without pickling it; where there is no fork
    (Windows), or with one worker, they are drawn here in turn."""
    import multiprocessing

    _JOBS.clear()
    _JOBS.update(jobs)
    try:
        if workers > 1 and "fork" in multiprocessing.get_all_start_methods():
            context = multiprocessing.get_context("fork")
            with context.Pool(min(workers, len(jobs))) as pool:
                return pool.map(_draw_job, list(jobs), chunksize=1)
        return [_draw_job(stem) for stem in jobs]
    finally:
        _JOBS.clear()


def plot_all(runs: pd.DataFrame, fits: pd.DataFrame, out_dir: Path, tasks=None,
             declared=None, workers: int = 1, frontier=None) -> FigureIndex:
    """Every figure of `figure_names(tasks)` (tasks: default, those in `runs`)
    that has data, and `index.md`; the frontier's figures draw `frontier` (the
    FrontierResult of the runs, when they have budgets). A figure in `declared`
    (default: those the runs' grid feeds, which the workflow declares as
    outputs) that has no data gets a notice in its place. `workers` > 1 draws
    that many figures at a time, each in its own process. Returns the paths
    written (figures, then index.md), with `.entries` for every figure."""
    tasks = tasks_of(runs, tasks)
    out_dir = Path(out_dir)
    if declared is None:
        declared = grid_figures(Grid.of_runs(runs, tasks))
    declared = set(declared)

    def job(stem):
        return lambda: draw_figure(stem, runs, fits, out_dir, tasks, stem in declared,
                                   frontier)

    entries = {e.name: e for e in _draw_all({s: job(s) for s in figure_names(tasks)}, workers)}
    paths = [p for e in entries.values() for p in e.files]
    paths.append(write_index(entries, out_dir))
    return FigureIndex(paths, entries)


def draw_frontier(frontier, out_dir: Path) -> list[Path]:
    """The frontier's figures of the registry, drawn from `frontier` (a
    FrontierResult) into `out_dir`; one that has nothing to show says why on
    stderr. Returns the files written."""
    paths = []
    for name, figure in FIGURES.items():
        if figure.from_frontier:
            try:
                paths += figure.draw(None, None, out_dir, frontier=frontier)
            except NotDrawn as err:
                print(f"{name}: not drawn: {err}", file=sys.stderr)
    return paths


# --------------------------------------------------------------------------- the stage
# (analysis/stages.py: a study's figures/, every figure and its index; the
# workflow draws them one job per figure: `part`, `scalestudy figure`)


def write(analysis, out: Path, options) -> list[Path]:
    return list(plot_all(analysis.runs, analysis.fits, out, workers=options.workers,
                         frontier=analysis.frontier))


def part(analysis, stem: str, out_dir: Path, tasks) -> FigureEntry:
    """One figure of the study's figures (`stem`, declared: its notice where it
    has no data), drawn from the analysis: a frontier figure from its frontier,
    the others from its runs and fits."""
    figure, _ = figure_names(tasks)[stem]
    return draw_figure(stem, analysis.runs, analysis.fits, out_dir, tasks, declared=True,
                       frontier=analysis.frontier if figure.from_frontier else None)


def refuse(out: Path, inputs) -> None:
    from ...atomic import refuse_foreign

    refuse_foreign(out, None, "a figures", inputs)
