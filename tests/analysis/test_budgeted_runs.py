"""A budgeted study's runs (grid.budgets) never enter the per-size analyses:
each size ran at several budgets, and a per-size fit, figure or claim would
pool them as if they were seeds. The fits say so, the figures draw a notice
saying so, and the per-size claims leave the budgeted runs out; the frontier
(analysis/frontier/), its figures and its claims read them."""

import numpy as np
import pandas as pd
import pytest

from scalestudy.analysis.claims import CLAIMS, Evidence
from scalestudy.analysis.claims.check import NO_DATA
from scalestudy.analysis.figures import FIGURES
from scalestudy.analysis.figures.output import NotDrawn
from scalestudy.analysis.fits import BUDGETED, fit_study

from tests.support.claim_studies import scaling


def budgeted(runs: pd.DataFrame) -> pd.DataFrame:
    """The runs twice over, at budgets 1e12 and 3e12: one size, two budgets."""
    return pd.concat([runs.assign(budget=b) for b in (1e12, 3e12)], ignore_index=True)


RUNS = scaling({"transformer": 0.1, "s4": 0.15}, {"transformer": 0.05, "s4": 0.08},
               archs=("transformer", "s4"))


def test_budgeted_runs_are_not_fitted_and_their_rows_say_why():
    fits = fit_study(budgeted(RUNS), n_boot=50, n_boot_saturating=5)
    plain = fit_study(RUNS.assign(budget=np.nan), n_boot=50, n_boot_saturating=5)
    key = ["task", "arch", "prior", "metric", "form"]
    # The same rows as an unbudgeted study would have, each refused.
    assert sorted(map(tuple, fits[key].to_numpy())) == sorted(map(tuple, plain[key].to_numpy()))
    assert (fits["status"] == BUDGETED).all() and fits["alpha"].isna().all()
    assert (fits["heldout_status"] == BUDGETED).all()
    assert (plain["status"] == "ok").any()


def test_unbudgeted_runs_beside_budgeted_ones_are_fitted_as_before():
    # Another study's budgeted runs under other names: they change nothing of the first's.
    others = budgeted(RUNS).assign(study="b", arch=lambda r: r["arch"].map(
        {"transformer": "lconv", "s4": "dlr"}))
    mixed = pd.concat([RUNS.assign(study="a", budget=np.nan), others], ignore_index=True)
    fits = fit_study(mixed, n_boot=50, n_boot_saturating=5)
    alone = fit_study(RUNS.assign(budget=np.nan), n_boot=50, n_boot_saturating=5)
    ours = fits[fits["arch"].isin(["transformer", "s4"])].reset_index(drop=True)
    pd.testing.assert_frame_equal(ours, alone)
    assert (fits.loc[fits["arch"].isin(["lconv", "dlr"]), "status"] == BUDGETED).all()


@pytest.mark.parametrize("name", ["upstream_loss_vs_compute", "error_vs_compute"])
def test_a_figure_of_budgeted_runs_is_not_drawn_and_says_why(name, tmp_path):
    import matplotlib.pyplot as plt

    runs = budgeted(RUNS)
    fits = fit_study(runs, n_boot=20, n_boot_saturating=5)
    with pytest.raises(NotDrawn, match="budgeted runs") as err:
        FIGURES[name].draw(runs, fits, tmp_path, tasks=["listops"])
    assert "the study's figures are the frontier's (frontier_isoflop" in str(err.value)
    fig, ax = plt.subplots()
    with pytest.raises(NotDrawn, match="budgeted runs"):
        FIGURES[name].panel(ax, runs, fits)
    plt.close(fig)
    assert not list(tmp_path.iterdir())


def test_a_per_size_claim_leaves_budgeted_runs_out():
    study = Evidence.of(budgeted(RUNS), pd.DataFrame(), n_boot=50)
    scopes = CLAIMS["vanilla_scales_best_upstream"].scopes(study)
    assert [s.verdict for s in scopes] == [NO_DATA]
    assert "only budgeted runs" in scopes[0].measurement
    # The frontier's claims read them.
    assert CLAIMS["frontier_ranking_changes"].on_budgets
    assert CLAIMS["frontier_exponent_differs"].on_budgets
