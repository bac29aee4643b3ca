"""The analysis half of a study: its stages in order, each writing one
artifact under the study's results directory from the runs and the
artifacts of the stages before it.

The workflow's analysis rules write these artifacts (each rule's output is
named by its stage's `artifact`: workflow/rules/fit.smk, frontier.smk,
figures.smk, report.smk; `scalestudy fit`, `tables` and `claims` run their
stage here, while the frontier and figure rules go by `scalestudy frontier`,
the frontier of any table, and `scalestudy figure`, one figure a job), and
`scalestudy analyse` runs every stage here, in one process, on a runs file
(a cached study). Torch-free, and light to
import (the DAG reads it at every parse): each stage imports what it needs
when it runs (matplotlib only for the figures).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..registry import Registry

if TYPE_CHECKING:  # the DAG reads the artifacts' names alone
    import pandas as pd


@dataclass(frozen=True)
class Options:
    """What the stages are run with (the fit section of a study)."""

    x_axis: str = "compute"
    n_boot: int = 1000
    ci: float = 0.95
    seed: int = 0
    n_boot_saturating: int = 100
    workers: int = 1  # figures drawn at a time, each in its own process


@dataclass
class Analysis:
    """A study's analysis as its stages fill it in: the runs, then each
    stage's result, which the later stages read."""

    runs: pd.DataFrame
    fits: pd.DataFrame | None = None
    frontier: object | None = None  # a FrontierResult (runs with budgets), else None
    claims: pd.DataFrame | None = None


def _fit(analysis: Analysis, out: Path, options: Options) -> list[Path]:
    from .fits import fit_study, write_fits

    analysis.fits = fit_study(analysis.runs, x_axis=options.x_axis, n_boot=options.n_boot,
                              ci=options.ci, seed=options.seed,
                              n_boot_saturating=options.n_boot_saturating)
    write_fits(analysis.fits, out)
    return [out]


def _frontier(analysis: Analysis, out: Path, options: Options) -> list[Path]:
    from .frontier.stage import study_frontier, write_frontier

    analysis.frontier = study_frontier(analysis.runs, n_boot=options.n_boot, ci=options.ci,
                                       seed=options.seed)
    if analysis.frontier is None:  # no budgeted run, or none a frontier fits
        return []
    return write_frontier(analysis.frontier, out, figures=False)


def _figures(analysis: Analysis, out: Path, options: Options) -> list[Path]:
    from .figures.draw import plot_all

    return list(plot_all(analysis.runs, analysis.fits, out, workers=options.workers,
                         frontier=analysis.frontier))


def _tables(analysis: Analysis, out: Path, options: Options) -> list[Path]:
    from .tables import write_tables

    return list(write_tables(analysis.runs, analysis.fits, out))


def _claims(analysis: Analysis, out: Path, options: Options) -> list[Path]:
    from .claims import write_claims

    analysis.claims = write_claims(analysis.runs, analysis.fits, out, n_boot=options.n_boot,
                                   ci=options.ci, seed=options.seed,
                                   frontier=analysis.frontier)
    return [out]


@dataclass(frozen=True)
class Stage:
    """One analysis stage: the artifact it writes (a file or a directory,
    relative to the study's results directory) and how (`write(analysis,
    path, options)`: the paths written)."""

    name: str
    artifact: str
    write: Callable[[Analysis, Path, Options], list[Path]]


ANALYSIS_STAGES: Registry[Stage] = Registry("analysis stage", [
    Stage("fit", "fits.parquet", _fit),
    Stage("frontier", "frontier", _frontier),
    Stage("figures", "figures", _figures),
    Stage("tables", "tables", _tables),
    Stage("claims", "claims.md", _claims),
])


def analyse(runs: pd.DataFrame, out_dir, options: Options = Options(),
            inputs=()) -> tuple[Analysis, list[Path]]:
    """Every stage, in order, on `runs`, into `out_dir`: the analysis and the
    paths written. `out_dir` is replaced whole once every stage has run, so a
    failure leaves the previous analysis as it was; one holding anything but
    the stages' artifacts, or any of `inputs` (the runs file), is refused."""
    from ..atomic import refuse_foreign, replacing_directory

    out_dir = Path(out_dir)
    artifacts = [stage.artifact for stage in ANALYSIS_STAGES.values()]
    refuse_foreign(out_dir, artifacts, "an analysis's", inputs)
    analysis, paths = Analysis(runs), []
    with replacing_directory(out_dir) as staged:
        for stage in ANALYSIS_STAGES.values():
            paths += stage.write(analysis, staged / stage.artifact, options)
    return analysis, [out_dir / path.relative_to(staged) for path in paths]
