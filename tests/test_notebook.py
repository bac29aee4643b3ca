"""The notebook API: `scalestudy.open_study` on a cached study and on a results
directory, without torch; its panel functions draw into a given Axes what the
figure's file shows in that panel; and analysis/study.ipynb runs top to bottom
(nbclient), so it cannot go stale."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

import scalestudy  # noqa: E402
from scalestudy.analysis.figures.output import figure_data  # noqa: E402
from scalestudy.analysis.fits import fit_study, write_fits  # noqa: E402
from scalestudy.records import write_frame  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / "data" / "cache" / "workstation.parquet"


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


def panel_rows(path: Path, panel: str) -> pd.DataFrame:
    data = pd.read_csv(path)
    return data[data["panel"] == panel].drop(columns="panel").reset_index(drop=True)


@pytest.mark.parametrize(("figure", "which", "panel"), [
    ("accuracy_vs_size_listops", {"task": "listops", "arch": "s4"}, "s4"),
    ("error_vs_compute", {"task": "listops", "prior": "spt", "arch": "performer"},
     "listops/spt/performer"),
    ("spt_vs_matched", {"task": "listops"}, "listops"),
])
def test_a_panel_into_an_axes_is_the_files_panel(study, tmp_path, figure, which, panel):
    """What the panel function draws (its plotted data, read as the figure's
    CSV is) equals that panel's rows of the figure file's CSV."""
    files = study.draw(figure, tmp_path)
    fig, ax = plt.subplots()
    name = figure.removesuffix("_listops")
    getattr(study.plot, name)(ax, **which)
    mine = figure_data(fig)
    plt.close(fig)
    assert (mine["panel"] == panel).all() and len(mine)
    expected = panel_rows(next(p for p in files if p.suffix == ".csv"), panel)
    got = mine.drop(columns="panel").reset_index(drop=True)
    pd.testing.assert_frame_equal(got, expected, check_dtype=False, atol=1e-9)


def test_an_unknown_panel_names_the_accepted(study):
    with pytest.raises(AttributeError, match="accepted: error_vs_compute, accuracy_vs_size"):
        study.plot.loss_vs_nothing  # noqa: B018


def test_the_analysis_notebook_runs():
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    notebook = nbformat.read(ROOT / "analysis" / "study.ipynb", as_version=4)
    nbclient.NotebookClient(notebook, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(ROOT / "analysis")}}).execute()
    outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    assert any("image/png" in o.get("data", {}) for o in outputs)
