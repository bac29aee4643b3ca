"""The notebook API: `scalestudy.open_study` on a cached study and on a results
directory, without torch; its panel functions (one for every registered figure)
draw into a given Axes what the figure's `draw` shows in that panel, and
compose; and analysis/study.ipynb runs top to bottom (nbclient), so it cannot
go stale."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from matplotlib.text import Annotation  # noqa: E402

import scalestudy  # noqa: E402
from scalestudy.analysis.figures import FIGURES  # noqa: E402
from scalestudy.analysis.figures.output import NotDrawn, figure_data  # noqa: E402
from scalestudy.analysis.fits import fit_study, write_fits  # noqa: E402
from scalestudy.records import write_frame  # noqa: E402

from tests.support import ROOT

CACHE = ROOT / "data" / "cache" / "workstation.parquet"
DEEP = ROOT / "data" / "cache" / "deep_fixup.parquet"
BUDGETED = ROOT / "data" / "cache" / "frontier.parquet"


@pytest.fixture(scope="module")
def study():
    return scalestudy.open_study(CACHE, n_boot=20, n_boot_saturating=2)


def test_open_study_imports_no_torch():
    code = (f"import sys, scalestudy; s = scalestudy.open_study({str(CACHE)!r}, n_boot=10, "
            "n_boot_saturating=2); s.fits; import matplotlib; matplotlib.use('Agg'); "
            "import matplotlib.pyplot as plt; ax = plt.gca(); "
            "s.plot.accuracy_vs_size(ax, task='listops', arch='s4'); "
            "bad = {'torch', 'lightning'} & set(sys.modules); assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)
    plain = subprocess.run([sys.executable, "-c", "import sys, scalestudy; "
                            "assert 'pandas' not in sys.modules"], check=False)
    assert plain.returncode == 0  # the package import stays light


def test_runs_fits_and_claims(study, tmp_path):
    runs = pd.read_parquet(CACHE)
    assert len(study.runs) == len(runs)
    assert {"alpha_D", "alpha_U"} <= set(study.fits["metric"])
    assert {"claim", "scope", "verdict"} <= set(study.claims.columns) and len(study.claims)
    # Any stage's result, made by the stage `scalestudy analyse` runs.
    assert study["fit"] is study.fits and "alpha.csv" in study["tables"]
    # A results directory: its own fits.parquet is what it reads.
    out = tmp_path / "results" / "w"
    out.mkdir(parents=True)
    write_frame(runs, out / "runs.parquet")
    fits = fit_study(runs, n_boot=10, n_boot_saturating=2)
    write_fits(fits, out / "fits.parquet")
    opened = scalestudy.open_study(out)
    pd.testing.assert_frame_equal(opened.fits, pd.read_parquet(out / "fits.parquet"))
    with pytest.raises(ValueError, match="neither a runs file nor a study directory"):
        scalestudy.open_study(tmp_path / "nothing")


# --------------------------------------------------------------------------- panels


def marks(ax) -> dict:
    """What a panel shows, artist by artist, in drawing order: each line's gid,
    data, colour, marker, line style and fill; each collection's kind, gid and
    path vertices (error bars, intervals, bands); the annotations with their
    anchors; and the other texts (their corner is placed once the limits are
    final, so only their words count)."""
    def rounded(xy):  # comparable with ==, NaN (a missing interval end) too
        xy = np.round(np.asarray(xy, dtype=float), 12)
        return np.where(np.isnan(xy), None, xy).tolist()

    annotations = [t for t in ax.texts if isinstance(t, Annotation)]
    return {
        "lines": [(ln.get_gid(), rounded(ln.get_xydata()), str(ln.get_color()), ln.get_marker(),
                   ln.get_linestyle(), ln.get_fillstyle()) for ln in ax.lines],
        "collections": [(type(c).__name__, c.get_gid(), [rounded(path.vertices)
                                                         for path in c.get_paths()])
                        for c in ax.collections],
        "annotations": [(t.get_text(), rounded(t.xy)) for t in annotations],
        "texts": sorted(t.get_text() for t in ax.texts if t not in annotations),
    }


def depth_runs() -> pd.DataFrame:
    """The cached deep_fixup study (every prior at depth 36, width 32, no
    LayerNorm) with a study of the same cells at depth 12, one of its runs
    diverged: a depth curve."""
    runs = pd.read_parquet(DEEP)
    shallow = runs.assign(study="deep_fixup_12", depth=12, train_loss=runs["train_loss"] * 1.2)
    shallow.loc[shallow.index[0], "status"] = "diverged"
    return pd.concat([runs, shallow], ignore_index=True)


@pytest.fixture(scope="module")
def frontier_study():
    """The cached frontier study (budgets): its frontier fitted on first use."""
    return scalestudy.open_study(BUDGETED, n_boot=10, n_boot_saturating=0)


@pytest.fixture(scope="module")
def depth_study(tmp_path_factory):
    path = tmp_path_factory.mktemp("depth") / "runs.parquet"
    write_frame(depth_runs(), path)
    return scalestudy.open_study(path, n_boot=10, n_boot_saturating=0)


# One panel of every figure (several where a figure has panels of different
# kinds): the figure, the panel's arguments, its label in the whole figure.
PANELS = [
    ("upstream_loss_vs_compute", {"arch": "s4"}, "s4"),
    ("upstream_loss_vs_compute", {}, "overlay"),
    ("error_vs_compute", {"task": "listops", "prior": "spt", "arch": "performer"},
     "listops/spt/performer"),
    ("scaling_overview", {"arch": "s4"}, "s4"),
    ("scaling_overview", {"arch": "s4", "task": "listops"}, "listops/random/s4"),
    ("alpha_per_arch", {}, "alpha_U/loglog"),
    ("alpha_per_arch", {"form": "saturating"}, "alpha_U/saturating"),
    ("alpha_per_arch", {"task": "listops", "prior": "random"}, "alpha_D/listops/random"),
    ("arch_gap", {"task": "listops"}, "listops"),
    ("loss_vs_depth", {"arch": "transformer"}, "transformer/32/none"),
    ("downstream_vs_upstream", {"task": "listops", "arch": "glu"}, "listops/glu"),
    ("downstream_vs_upstream", {"task": "listops"}, "listops/overlay"),
    ("spt_vs_matched", {"task": "listops"}, "listops"),
    ("gap_closing", {"task": "listops"}, "listops"),
    ("heldout_prediction", {"metric": "alpha_D", "task": "listops", "prior": "spt"},
     "listops error: αD, spt"),
    ("heldout_prediction", {"metric": "alpha_U", "form": "saturating"},
     "upstream loss: αU, saturating"),
    ("heldout_prediction", {"metric": "alpha_UD", "task": "listops"},
     "listops error vs upstream loss: αU,D"),
    ("accuracy_vs_size", {"task": "listops", "arch": "s4"}, "s4"),
    ("frontier_isoflop", {"arch": "s4", "prior": "upstream"}, "s4/upstream"),
    ("frontier_optimal", {"arch": "lconv", "prior": "upstream (listops)", "quantity": "d_opt"},
     "lconv/upstream (listops)/d_opt"),
    ("frontier_loss", {"prior": "upstream"}, "upstream"),
]


@pytest.fixture(scope="module")
def whole(study, depth_study, frontier_study, tmp_path_factory):
    """Each figure of PANELS as its `draw` makes it (kept open, not saved), by
    name, with the study it was drawn from."""
    out = tmp_path_factory.mktemp("whole")
    figures = {}

    def study_of(name):
        if FIGURES[name].from_frontier:
            return frontier_study
        return depth_study if name == "loss_vs_depth" else study

    with pytest.MonkeyPatch.context() as mp:
        for name in FIGURES:  # every figure module saves through output.save
            mp.setattr(f"scalestudy.analysis.figures.{name}.save",
                       lambda fig, out_dir, stem, *a, **k: figures.__setitem__(stem, fig))
        for name in dict.fromkeys(name for name, _, _ in PANELS):
            s = study_of(name)
            FIGURES[name].draw(s.runs, s.fits, out, tasks=["listops"], task="listops",
                               frontier=s.frontier if FIGURES[name].from_frontier else None)
    yield {name: (figures[name if name in figures else f"{name}_listops"], study_of(name))
           for name in FIGURES}
    plt.close("all")


def test_every_figure_has_a_panel_function(study):
    assert {name for name, _, _ in PANELS} == set(FIGURES)
    assert dir(study.plot) == sorted(FIGURES)
    for name, figure in FIGURES.items():
        shown = inspect.signature(getattr(study.plot, name))
        axes, *rest = inspect.signature(figure.module.panel).parameters
        which = rest[len(figure.inputs):]  # after the runs and fits, or the frontier
        assert list(shown.parameters) == [axes, *which]  # the module's panel's own
        for param, default in figure.params.items():  # the registry's, as defaults
            assert shown.parameters[param].default == default


@pytest.mark.parametrize(("figure", "which", "label"), PANELS,
                         ids=[f"{f}-{label}" for f, _, label in PANELS])
def test_a_panel_in_your_own_figure_is_the_whole_figures_panel(whole, figure, which, label):
    """Drawn into one Axes of a figure of one's own, a panel holds the very
    marks (and plotted data, as the figure's CSV reads them) of that panel in
    the whole figure its `draw` makes."""
    fig_whole, study = whole[figure]
    (expected,) = [ax for ax in fig_whole.axes if ax.get_label() == label]
    fig, (other, ax) = plt.subplots(1, 2)
    getattr(study.plot, figure)(ax, **which)
    assert ax.get_label() == label
    got, want = marks(ax), marks(expected)
    assert got["lines"] or got["collections"]
    assert got == want
    mine, theirs = figure_data(fig), figure_data(fig_whole)
    theirs = theirs[theirs["panel"] == label].reset_index(drop=True)
    pd.testing.assert_frame_equal(mine, theirs, check_dtype=False)
    assert not other.lines and not other.collections  # the other Axes is left alone
    plt.close(fig)


def test_two_figures_panels_compose_in_one_figure(study, tmp_path):
    fig, (a, b) = plt.subplots(1, 2, figsize=(9, 3.5), layout="constrained")
    study.plot.upstream_loss_vs_compute(a, arch="transformer")
    study.plot.arch_gap(b, task="listops", priors=("random",))  # one prior: one line
    assert [a.get_label(), b.get_label()] == ["transformer", "listops"]
    data = figure_data(fig)
    assert set(data["panel"]) == {"transformer", "listops"}
    assert {"fit:transformer", "points:transformer"} <= set(data["series"])
    gaps = {g for g in data.loc[data["panel"] == "listops", "series"] if g.startswith("gap:")}
    assert gaps == {"gap:random"}
    fig.savefig(tmp_path / "composed.png")
    plt.close(fig)


def test_a_panel_without_data_says_why(study, depth_study):
    fig, ax = plt.subplots()
    with pytest.raises(NotDrawn, match="transformer: no runs at two or more depths"):
        study.plot.loss_vs_depth(ax, arch="transformer")
    with pytest.raises(NotDrawn, match="no finished upstream runs of nothing"):
        study.plot.upstream_loss_vs_compute(ax, arch="nothing")
    with pytest.raises(ValueError, match="accepted: alpha_U, alpha_D, alpha_UD"):
        study.plot.heldout_prediction(ax, metric="alpha_X")
    with pytest.raises(ValueError, match="both a task and a prior"):
        study.plot.alpha_per_arch(ax, task="listops")
    plt.close(fig)


def test_a_frontier_panel_needs_budgets_and_names_the_groups(study, frontier_study):
    fig, ax = plt.subplots()
    with pytest.raises(NotDrawn, match="no frontier: it is fitted on a study's budgeted runs"):
        study.plot.frontier_isoflop(ax, arch="s4")  # the workstation study has no budgets
    with pytest.raises(ValueError, match="2 groups match .*arch s4, prior upstream;"):
        frontier_study.plot.frontier_isoflop(ax, arch="s4")  # which prior?
    with pytest.raises(ValueError, match="quantity: got 'x', accepted: n_opt, d_opt"):
        frontier_study.plot.frontier_optimal(ax, arch="s4", prior="upstream", quantity="x")
    plt.close(fig)


def test_a_results_directory_s_frontier_is_read(frontier_study, tmp_path):
    """The workflow's frontier/ is what a study directory's frontier is, and what
    its frontier claim reads: the same exponent and interval as fitted here."""
    from scalestudy.analysis.frontier.stage import write_frontier

    out = tmp_path / "results" / "f"
    write_frame(frontier_study.runs, out / "runs.parquet")
    write_frontier(frontier_study.frontier, out / "frontier", figures=False)
    opened = scalestudy.open_study(out, n_boot=10, n_boot_saturating=0)
    pd.testing.assert_frame_equal(opened.frontier.fits, frontier_study.frontier.fits,
                                  check_dtype=False)
    # The exponent claim (frontier_exponent_differs) of each.
    mine, theirs = (s.claims[s.claims["claim"].str.startswith("An architecture's compute")]
                    for s in (opened, frontier_study))
    assert len(mine) and mine["measurement"].tolist() == theirs["measurement"].tolist()


def test_an_unknown_panel_names_the_accepted(study):
    with pytest.raises(AttributeError, match="figure: unknown 'loss_vs_nothing', accepted "
                       f"values: {', '.join(FIGURES)}$"):
        study.plot.loss_vs_nothing  # noqa: B018


def test_the_analysis_notebook_runs_and_shows_each_figure_once():
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    notebook = nbformat.read(ROOT / "analysis" / "study.ipynb", as_version=4)
    nbclient.NotebookClient(notebook, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(ROOT / "analysis")}}).execute()
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    outputs = [o for cell in code for o in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    # Each cell that makes a figure shows it once (the kernel's inline backend
    # kept, no `fig` at the cell's end to show it again).
    images = [sum("image/png" in o.get("data", {}) for o in cell.outputs) for cell in code]
    assert sum(images) == sum("plt.subplots" in cell.source for cell in code) == 3
    assert max(images) == 1


def test_the_figures_keep_a_backend_chosen_before_and_else_draw_on_agg():
    """A notebook's backend (Jupyter's inline one, MPLBACKEND) survives the
    figure modules' import, so its own figures still show; where none was
    chosen (the commands, the workflow's jobs) they draw on Agg, to files."""
    code = ("import scalestudy.analysis.figures.accuracy_vs_size, matplotlib; "
            "print(matplotlib.get_backend().lower())")
    env = {k: v for k, v in os.environ.items() if k != "MPLBACKEND"}
    for chosen, want in (({"MPLBACKEND": "svg"}, "svg"), ({}, "agg")):
        done = subprocess.run([sys.executable, "-c", code], env={**env, **chosen},
                              capture_output=True, text=True, check=True)
        assert done.stdout.strip() == want, done.stderr


def docs_example() -> str:
    """The code of docs/notebook.md's example, as written."""
    text = (ROOT / "docs" / "notebook.md").read_text()
    return text.split("```python\n", 1)[1].split("```", 1)[0]


def test_the_docs_example_runs_as_written(study, tmp_path, monkeypatch):
    """docs/notebook.md's example, run from a clone's root as written (the cached
    study it opens is the module's, fitted already): the accuracy panel's priors
    each in its own colour and marker, both legends, the figure's files."""
    (tmp_path / "data").symlink_to(ROOT / "data")
    monkeypatch.chdir(tmp_path)
    opened = scalestudy.open_study
    monkeypatch.setattr(scalestudy, "open_study", lambda path, **kw: (
        study if Path(path).resolve() == CACHE.resolve() else opened(path, **kw)))
    namespace: dict = {}
    exec(compile(docs_example(), "docs/notebook.md", "exec"), namespace)
    fig, a = namespace["fig"], namespace["a"]
    priors = [ln for ln in a.lines if (ln.get_gid() or "").startswith("points:transformer:")]
    assert len(priors) == study.runs.query("arch == 'transformer'")["prior"].nunique() == 7
    assert len({ln.get_color() for ln in priors}) == len({ln.get_marker() for ln in priors}) == 7
    prior_legend, arch_legend = fig.legends
    assert [t.get_text() for t in prior_legend.get_texts()] == [
        ln.get_gid().split(":")[2] for ln in priors]
    assert "s4" in [t.get_text() for t in arch_legend.get_texts()]
    assert (tmp_path / "figures" / "error_vs_compute.png").stat().st_size > 1000
    plt.close(fig)


def test_figures_lists_what_the_runs_draw_and_draw_says_why_not(study, frontier_study,
                                                                 tmp_path):
    names = study.figures()
    assert "accuracy_vs_size_listops" in names and "spt_vs_matched" in names
    # No budgets: no frontier figure; depth grows with width: no depth curve.
    assert not {"frontier_isoflop", "frontier_optimal", "frontier_loss",
                "loss_vs_depth"} & set(names)
    # Budgeted runs: the frontier's figures only (the others would pool budgets).
    assert frontier_study.figures() == ["frontier_isoflop", "frontier_optimal",
                                        "frontier_loss"]
    with pytest.raises(NotDrawn, match="frontier_isoflop: not drawn from these runs: it "
                       r"needs budgets \(grid.budgets\).*study.figures\(\) lists"):
        study.draw("frontier_isoflop", tmp_path)
    with pytest.raises(NotDrawn, match="error_vs_compute: .*budgeted runs"):
        frontier_study.draw("error_vs_compute", tmp_path)
    with pytest.raises(ValueError, match="figure: unknown 'nothing', accepted: upstream_loss"):
        study.draw("nothing", tmp_path)
    assert not list(tmp_path.iterdir())


def test_the_heldout_panel_s_axes_start_at_0(study):
    """Predicted and observed errors are never negative: an interval reaching
    below 0 (a relative error below -100%) runs to the axis at 0."""
    from scalestudy.analysis.fits import select

    fits = study.fits.copy()
    rows = select(fits, "alpha_D", task="listops", prior="spt").index
    assert (fits.loc[rows, "heldout_status"] == "ok").any()
    fits.loc[rows, "heldout_rel_error_low"] = -2.5
    fig, ax = plt.subplots()
    FIGURES["heldout_prediction"].panel(ax, study.runs, fits, metric="alpha_D",
                                         task="listops", prior="spt")
    assert ax.get_ylim()[0] == ax.get_xlim()[0] == 0
    plt.close(fig)
