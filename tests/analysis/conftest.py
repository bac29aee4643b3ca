"""The analysis tests' fixtures: a synthetic study, its fits, its figures."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pytest

from scalestudy.analysis.figures import draw
from scalestudy.analysis.fits import fit_study

from tests.support.figure_checks import keep_figures
from tests.support.runs import make_runs


@pytest.fixture(scope="module")
def study():
    """A small multi-architecture study with every prior, two tasks and two seeds."""
    runs = make_runs(
        archs=("transformer", "performer", "s4"), sizes=("xxs", "xs", "s"),
        priors=("random", "spt", "upstream", "scratch_matched"),
        tasks=("listops", "text"), seeds=(0, 1), noise=0.02,
        alpha_u={"transformer": 0.2, "performer": 0.1, "s4": 0.15}, per_seed_upstream=True,
    )
    return runs, fit_study(runs, n_boot=100, n_boot_saturating=0)




@pytest.fixture
def drawn(monkeypatch):
    """The figures the plot functions save, kept open for inspection."""
    yield keep_figures(monkeypatch)
    plt.close("all")


@pytest.fixture(scope="module")
def rendered(study, tmp_path_factory):
    """Every figure of `study`, drawn once and kept open: (figures by name, the
    FigureIndex plot_all returned, its output directory)."""
    out = tmp_path_factory.mktemp("figures")
    with pytest.MonkeyPatch.context() as mp:
        figures = keep_figures(mp)
        runs, fits = study
        index = draw.plot_all(runs, fits, out)
    yield figures, index, out
    plt.close("all")
