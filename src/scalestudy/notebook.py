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
data/cache/<name>.parquet). It is the study's analysis (analysis/stages.py
`Analysis`): fits, frontier and claims missing are made on first use by their
stages, with the options `open_study` is given (analysis/options.py `Options`,
each at its declaration unless given), as `scalestudy analyse` makes them (the
frontier only for a study with budgets: `study.frontier`). `study.plot` has a
panel function for every registered figure (analysis/figures FIGURES): it draws
one panel of the figure into the Axes it is given, as the figure's file draws
it (analysis/figures/<figure>.py `panel`, which the figure's `draw` composes),
so figures compose; the frontier's figures' panels draw `study.frontier`.
Torch-free (tests/test_layout.py).
"""

from __future__ import annotations

import inspect
from pathlib import Path

import pandas as pd

from .analysis.stages import Analysis, Options


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
    """A study's runs, fits, frontier and claims (its `analysis`), and its figures."""

    def __init__(self, analysis: Analysis, source: Path):
        self.analysis, self.source = analysis, source
        self.runs = analysis.runs
        self.plot = Panels(self)

    def __repr__(self) -> str:
        studies = ", ".join(sorted(self.runs["study"].dropna().unique()))
        counts = self.runs["status"].value_counts().to_dict()
        return f"<Study {studies or '?'} from {self.source}: {len(self.runs)} runs {counts}>"

    def __getitem__(self, stage: str):
        """Any analysis stage's result (analysis/stages.py: "fit", "frontier",
        "claims", "tables", a new kind's), read from the study's files or made
        now by its stage."""
        return self.analysis[stage]

    @property
    def fits(self) -> pd.DataFrame:
        """The power-law fits (fits.parquet, else fitted now)."""
        return self.analysis.fits

    @property
    def frontier(self):
        """The compute-optimal frontier of the study's budgeted runs (a
        FrontierResult: the workflow's frontier/, else fitted now), or None
        for a study without budgets."""
        return self.analysis.frontier

    @property
    def claims(self) -> pd.DataFrame:
        """Every check of the papers' claims, one row each (claims.md's)."""
        return self.analysis.claims

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


def open_study(path: Path | str, options: Options | None = None, **changes) -> Study:
    """The study at `path`: a results directory (runs.parquet, and fits.parquet
    and frontier/ where the workflow wrote them) or a runs file (a cached
    data/cache/<name>.parquet). `options`: what its stages run with where they
    run here (analysis/options.py `Options`: x_axis, n_boot, ci, seed,
    n_boot_saturating, as `scalestudy analyse` takes them; `changes`: some of
    them, by name, the others at their declarations). The runs are checked as
    every analysis command checks them (analysis/inputs.py)."""
    from .analysis.fits import read_fits
    from .analysis.inputs import read_runs
    from .analysis.options import chosen

    options = chosen(Options, options, changes)
    path = Path(path)
    runs_file = path / "runs.parquet" if path.is_dir() else path
    if not runs_file.is_file():
        raise ValueError(f"{path}: neither a runs file nor a study directory with "
                         f"runs.parquet")
    given: dict = {}
    if path.is_dir() and (path / "fits.parquet").is_file():
        given["fit"] = read_fits(path / "fits.parquet")
    if path.is_dir() and (path / "frontier").is_dir():
        given["frontier"] = path / "frontier"  # read back on first use
    return Study(Analysis(read_runs(runs_file), options, given), path)
