"""The tables (analysis/tables.py) on synthetic run records."""

from __future__ import annotations

import re

import pandas as pd
import pytest

from scalestudy.analysis.fits import fit_study
from scalestudy.analysis.tables import (
    TABLE_FILES,
    alpha_markdown,
    lra_markdown,
    lra_table,
    write_tables,
)

from tests.support.runs import make_runs, one_fit

# --------------------------------------------------------------------------- tables


def test_tables(study, tmp_path):
    runs, fits = study
    paths = write_tables(runs, fits, tmp_path)
    assert [p.name for p in paths] == list(TABLE_FILES)
    alpha = pd.read_csv(tmp_path / "alpha.csv")
    assert set(alpha["metric"]) == {"alpha_U", "alpha_D", "alpha_UD", "alpha_D/alpha_U"}
    tf = alpha[(alpha["metric"] == "alpha_U") & (alpha["arch"] == "transformer")
               & (alpha["form"] == "loglog")]
    assert tf["alpha"].iloc[0] == pytest.approx(0.2, abs=0.03)
    md = (tmp_path / "alpha.md").read_text()
    assert "## Upstream: alpha_U per architecture" in md
    assert "## Downstream (text): alpha_D per architecture and prior" in md
    # The saturating form refuses three sizes and the table says why.
    assert "n/a (not enough sizes: 3 < 4)" in md

    lra = pd.read_csv(tmp_path / "lra_accuracy.csv")
    assert set(lra["size"]) == {"s"}  # the largest size
    row = lra[(lra["prior"] == "random") & (lra["arch"] == "s4") & (lra["task"] == "text")]
    cell = runs[(runs["prior"] == "random") & (runs["arch"] == "s4") & (runs["task"] == "text")
                & (runs["size"] == "s")]["test_acc"]
    assert row["mean_acc"].iloc[0] == pytest.approx(cell.mean())
    assert row["std_acc"].iloc[0] == pytest.approx(cell.std())
    assert row["n_ok"].iloc[0] == 2
    text = (tmp_path / "lra_accuracy.md").read_text()
    assert "## Prior: spt" in text and "| architecture | listops | text | Avg |" in text

    held = pd.read_csv(tmp_path / "heldout.csv")
    assert set(held["metric"]) == {"alpha_U", "alpha_D", "alpha_UD"}  # the laws, no ratio
    assert len(held) == 3 * (2 + 2 * 4 + 2)  # archs x (alpha_U forms + tasks x (priors + UD))
    # Three sizes: the log-log laws are refitted on two; the saturating form refuses.
    saturating = held["form"] == "saturating"
    assert set(held.loc[saturating, "heldout_status"]) == {"without s: not enough sizes: 2 < 3"}
    assert set(held.loc[~saturating, "heldout_status"]) == {"ok"}
    text = (tmp_path / "heldout.md").read_text()
    assert "## Downstream error (text, alpha_D) per architecture and prior" in text
    row = one_fit(fits, "alpha_D", task="text", arch="performer", prior="spt")
    cell = (f"{100 * row['heldout_rel_error']:+.1f}% [{100 * row['heldout_rel_error_low']:+.1f}, "
            f"{100 * row['heldout_rel_error_high']:+.1f}]")
    assert re.search(rf"\| performer \|( [^|]+ \|)* {re.escape(cell)} \|", text), text


def test_lra_table_marks_missing_and_failed_cells():
    runs = make_runs(archs=("transformer", "s4"), tasks=("listops", "text"),
                     acc={("transformer", "random"): 0.5, ("s4", "random"): 0.7})
    runs = runs[~((runs["arch"] == "s4") & (runs["task"] == "text"))].copy()
    runs.loc[(runs["arch"] == "transformer") & (runs["task"] == "text"), "status"] = "failed"
    md = lra_markdown(lra_table(runs))
    assert "| transformer | 50.0 (m) | n/a |  |" in md
    assert "| s4 | 70.0 (m) |  |  |" in md


def test_alpha_markdown_without_upstream_runs():
    fits = fit_study(make_runs(priors=("random",)), n_boot=20)
    md = alpha_markdown(fits)
    assert "No upstream pretraining runs." in md
    assert "No runs finetuned from upstream pretraining." in md
