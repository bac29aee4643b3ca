"""A study in a notebook: `scalestudy.open_study(path)`.

    import matplotlib.pyplot as plt
    import scalestudy

    study = scalestudy.open_study("data/cache/workstation.parquet")  # or results/<study>
    study.runs, study.fits, study.claims                   # pandas DataFrames
    fig, (a, b) = plt.subplots(1, 2)
    study.plot.accuracy_vs_size(a, task="listops", arch="transformer")
    study.plot.error_vs_compute(b, task="listops", prior="random", arch="s4")
    study.draw("error_vs_compute", "figures/")             # a whole figure's files

`path` is a study's results directory (its runs.parquet, and its fits.parquet
and frontier/ when the workflow wrote them) or a runs file (a cached study's
data/cache/<name>.parquet); fits and a frontier missing are fitted on first
use, with the workflow's defaults unless `open_study` is told otherwise (the
frontier only for a study with budgets: `study.frontier`). `study.plot` has a
panel function for every registered figure (analysis/figures FIGURES): it draws
one panel of the figure into the Axes it is given, as the figure's file draws
it (analysis/figures/<figure>.py `panel`, which the figure's `draw` composes),
so figures compose; the frontier's figures' panels draw `study.frontier`.
Torch-free (tests/test_layout.py).
"""

from __future__ import annotations

import functools
import inspect
from pathlib import Path

import pandas as pd


class Panels:
    """`study.plot.<figure>(ax, **which)`: one panel of a registered figure into
    `ax`. What `which` takes is the figure module's `panel` (its signature and
    docstring: `help(study.plot.<figure>)`); the registry entry's params are its
    defaults."""

    def __init__(self, study: Study):
        self._study = study

    def __dir__(self):
        from .analysis.figures import FIGURES

        return list(FIGURES)

    def __getattr__(self, name: str):
        from .analysis.figures import FIGURES
        from .registry import UnknownName

        try:
            figure = FIGURES[name]
        except UnknownName as err:
            raise AttributeError(str(err)) from None
        panel = figure.module.panel

        def draw(ax, **which):
            study = self._study
            if figure.from_frontier:
                return figure.panel(ax, None, None, frontier=study.frontier, **which)
            return figure.panel(ax, study.runs, study.fits, **which)

        # What help() and Jupyter show: the module's panel's parameters after
        # the Axes and what it draws (runs and fits, or the frontier), by
        # keyword, the entry's params as their defaults.
        signature = inspect.signature(panel)
        axes, *rest = signature.parameters.values()
        which = [p.replace(kind=p.KEYWORD_ONLY, default=figure.params.get(p.name, p.default))
                 for p in rest[len(figure.inputs):]]
        draw.__signature__ = signature.replace(parameters=[axes, *which])
        draw.__name__ = draw.__qualname__ = name
        draw.__doc__ = panel.__doc__
        return draw


class Study:
    """A study's runs, fits, frontier and claims, and its figures."""

    def __init__(self, runs: pd.DataFrame, fits: pd.DataFrame | None, source: Path,
                 fit_options: dict, frontier_dir: Path | None = None):
        self.runs, self._fits, self.source = runs, fits, source
        self._fit_options = fit_options
        self._frontier_dir = frontier_dir
        self.plot = Panels(self)

    def __repr__(self) -> str:
        studies = ", ".join(sorted(self.runs["study"].dropna().unique()))
        counts = self.runs["status"].value_counts().to_dict()
        return f"<Study {studies or '?'} from {self.source}: {len(self.runs)} runs {counts}>"

    @property
    def fits(self) -> pd.DataFrame:
        """The power-law fits (fits.parquet, else fitted now)."""
        if self._fits is None:
            from .analysis.fits import fit_study

            self._fits = fit_study(self.runs, **self._fit_options)
        return self._fits

    @functools.cached_property
    def frontier(self):
        """The compute-optimal frontier of the study's budgeted runs (a
        FrontierResult: the workflow's frontier/, else fitted now), or None
        for a study without budgets."""
        if self._frontier_dir is not None:
            from .analysis.frontier.result import FrontierResult

            return FrontierResult.read(self._frontier_dir)
        from .analysis.frontier.stage import study_frontier

        return study_frontier(self.runs, quiet=True, **self._boot_options)

    @functools.cached_property
    def claims(self) -> pd.DataFrame:
        """Every check of the papers' claims, one row each (claims.md's)."""
        from .analysis.claims import evaluate

        # The workflow's frontier/ when there is one; else the frontier claims fit
        # the one approach they read, as the frontier's stage fits it.
        frontier = self.frontier if self._frontier_dir is not None else None
        return evaluate(self.runs, self.fits, frontier=frontier, **self._boot_options)

    @property
    def _boot_options(self) -> dict:
        return {k: v for k, v in self._fit_options.items() if k in ("n_boot", "ci", "seed")}

    def figures(self) -> list[str]:
        """The file stems of the figures these runs can draw: those their grid
        feeds (the workflow's for that grid), and of a study with budgets only
        the frontier's (the others would pool its budgets)."""
        from .analysis.figures import figure_names
        from .analysis.figures.layout import tasks_of

        return [name for name in figure_names(tasks_of(self.runs)) if not self._unfed(name)]

    def _unfed(self, name: str) -> str:
        """Why these runs cannot feed figure `name` ("" when they can)."""
        from .analysis.figures import BUDGETED_FIGURES, Grid, figure_names
        from .analysis.figures.layout import tasks_of

        figure, _ = figure_names(tasks_of(self.runs))[name]
        grid = Grid.of_runs(self.runs, tasks_of(self.runs))
        if not figure.fed_by(grid):
            return f"it needs {figure.needs}"
        if grid.budgeted and not figure.from_frontier:
            return BUDGETED_FIGURES
        return ""

    def draw(self, name: str, out_dir: Path | str) -> list[Path]:
        """Figure `name`'s files (PNG, PDF, CSV), as the workflow writes them;
        NotDrawn saying why when these runs cannot draw it (`figures()` lists
        those they can)."""
        from .analysis.figures import figure_names
        from .analysis.figures.draw import draw_figure
        from .analysis.figures.layout import tasks_of
        from .analysis.figures.output import NotDrawn

        tasks = tasks_of(self.runs)
        names = figure_names(tasks)
        if name not in names:
            raise ValueError(f"figure: unknown {name!r}, accepted: {', '.join(names)}")
        unfed = self._unfed(name)
        if unfed:
            raise NotDrawn(f"{name}: not drawn from these runs: {unfed} "
                           f"(study.figures() lists those they draw)")
        figure, _ = names[name]
        entry = draw_figure(name, self.runs, None if figure.from_frontier else self.fits,
                            Path(out_dir), tasks, declared=False,
                            frontier=self.frontier if figure.from_frontier else None)
        if not entry.drawn:
            raise NotDrawn(f"{name}: not drawn: {entry.reason}")
        return entry.files


def open_study(path: Path | str, *, x_axis: str = "compute", n_boot: int = 1000,
               ci: float = 0.95, seed: int = 0, n_boot_saturating: int = 100) -> Study:
    """The study at `path`: a results directory (runs.parquet, fits.parquet) or
    a runs file (a cached data/cache/<name>.parquet). The options are those of
    `scalestudy fit`, used when the fits are made here. The runs are checked as
    every analysis command checks them (analysis/inputs.py)."""
    from .analysis.inputs import read_fits, read_runs

    path = Path(path)
    runs_file = path / "runs.parquet" if path.is_dir() else path
    if not runs_file.is_file():
        raise ValueError(f"{path}: neither a runs file nor a study directory with "
                         f"runs.parquet")
    fits_file = path / "fits.parquet" if path.is_dir() else None
    fits = read_fits(fits_file) if fits_file is not None and fits_file.is_file() else None
    frontier_dir = path / "frontier" if path.is_dir() else None
    return Study(read_runs(runs_file), fits, path,
                 {"x_axis": x_axis, "n_boot": n_boot, "ci": ci, "seed": seed,
                  "n_boot_saturating": n_boot_saturating},
                 frontier_dir if frontier_dir is not None and frontier_dir.is_dir() else None)
