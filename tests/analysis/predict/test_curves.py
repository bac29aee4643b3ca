"""A study's ladder on its intermediate checkpoints (analysis/predict/curves.py):
every finished run's validation curve from its metrics.csv, a resumed run's
earlier attempts included, finetuned runs left out, fitted after the cut of
early points."""

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from scalestudy.analysis.predict.curves import checkpoint_ladder, validation_curve
from scalestudy.analysis.predict.stage import predict
from scalestudy.records import read_records, write_record
from scalestudy.study.grid import Cell, PretrainCell

from tests.support import ROOT

CACHE = ROOT / "data/cache"

E, A, ALPHA, B, BETA = 2.0, 60.0, 0.4, 900.0, 0.45
VALIDATIONS = 4


def law(n, d):
    return E + A / np.asarray(n, dtype=float) ** ALPHA + B / np.asarray(d, dtype=float) ** BETA


def write_curve(run_dir, steps, tokens, n, name="metrics.csv", at=None):
    at = np.linspace(steps / VALIDATIONS, steps, VALIDATIONS).astype(int) if at is None else at
    train = pd.DataFrame({"step": np.arange(10, steps + 1, 10), "train_loss": 3.0})
    val = pd.DataFrame({"step": at, "val_loss": law(n, tokens * at / steps)})
    pd.concat([train, val]).to_csv(run_dir / name, index=False)


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    """The frontier cache's s4 runs as a study directory whose curves follow `law`."""
    root = tmp_path_factory.mktemp("study")
    runs = read_records(CACHE / "frontier.parquet")
    runs = runs[runs["arch"] == "s4"]
    rows = [r for r in pq.read_table(CACHE / "frontier.parquet").to_pylist() if r["arch"] == "s4"]
    for row in rows:
        if row["stage"] == "upstream":
            cell = PretrainCell("upstream", None, "s4", row["size"], row["seed"], row["budget"])
            run_dir = root / cell.directory
            row["upstream_loss"] = float(law(row["n_params_nonembed"], row["tokens_seen"]))
        else:
            cell = Cell("listops", "s4", row["size"], "upstream", row["seed"], row["budget"])
            run_dir = root / cell.directory
        run_dir.mkdir(parents=True)
        write_record(row, run_dir / "record.parquet")
        write_curve(run_dir, int(row["steps"]), row["tokens_seen"], row["n_params_nonembed"])
    return root, runs


def test_every_validation_of_every_pretraining_run_is_a_point(study):
    root, runs = study
    table, notes = checkpoint_ladder(root)
    upstream = runs[runs["stage"] == "upstream"]
    assert len(table) == VALIDATIONS * len(upstream)
    assert table["run"].nunique() == len(upstream)
    assert len(notes) == len(runs) - len(upstream)
    assert all(why == "a finetuned run's curve is not a compute ladder" for _, why in notes)
    # A run's last point is its record's: its tokens, compute and loss.
    last = table.sort_values("step").groupby("run").tail(1)
    assert np.allclose(np.sort(last["tokens"]), np.sort(upstream["tokens_seen"]))
    assert np.allclose(np.sort(last["compute"]), np.sort(upstream["train_flops"]))
    assert np.allclose(last["loss"], law(last["params"], last["tokens"]))


def test_a_resumed_run_s_earlier_attempts_count_and_the_later_one_wins(tmp_path):
    pd.DataFrame({"step": [50, 100], "val_loss": [5.0, 4.0]}).to_csv(
        tmp_path / "metrics.attempt1.csv", index=False)
    pd.DataFrame({"step": [100, 150, 150], "val_loss": [3.5, np.nan, 3.0]}).to_csv(
        tmp_path / "metrics.csv", index=False)
    assert validation_curve(tmp_path).to_dict() == {50: 5.0, 100: 3.5, 150: 3.0}


def test_the_checkpoints_fit_recovers_the_surface_after_the_cut(study, capsys):
    root, _ = study
    result = predict(root, None, ["1e6:2e7"], checkpoints=True, n_boot=0, min_fraction=0.5,
                     n_polish=64, step1_points="checkpoints")
    assert result.settings["checkpoints"]
    fit = result.fit.set_index("parameter")["value"]
    assert fit["alpha"] == pytest.approx(ALPHA, rel=0.05)
    assert fit["beta"] == pytest.approx(BETA, rel=0.05)
    predicted = result.predictions.iloc[0]["loss"]
    assert predicted == pytest.approx(float(law(1e6, 2e7)), rel=0.01)
    # The cut: the points at or after half of each run's final tokens, no other.
    table, _ = checkpoint_ladder(root)
    final = table.groupby("run")["tokens"].transform("max")
    assert len(result.runs) == int((table["tokens"] >= 0.5 * final).sum()) < len(table)
    kept = result.runs.groupby("run")["tokens"]
    assert (kept.min() >= 0.5 * kept.max()).all()
    early = f"{int((table['tokens'] < 0.5 * final).sum())} checkpoint(s)"
    assert [early, "before 0.5 of their run's final tokens (--min-fraction)"] in (
        result.excluded.values.tolist())
    assert f"left out {len(result.excluded)} set(s) of rows" in capsys.readouterr().err


def accuracy(loss):
    """A task run's test accuracy, falling with its loss."""
    return 0.2 + 0.6 / (1 + np.exp(8 * (np.asarray(loss, dtype=float) - 2.3)))


@pytest.fixture(scope="module")
def scratch_study(tmp_path_factory):
    """The frontier cache's s4 listops runs as runs from scratch (prior random),
    each with its upstream counterpart's budget, steps and tokens, its curve
    following `law` and its test accuracy `accuracy` of its final loss."""
    root = tmp_path_factory.mktemp("scratch")
    rows = [r for r in pq.read_table(CACHE / "frontier.parquet").to_pylist() if r["arch"] == "s4"]
    upstream = {(r["size"], r["seed"], r["budget"]): r for r in rows if r["stage"] == "upstream"}
    records = []
    for row in rows:
        if row["stage"] == "upstream":
            continue
        own = upstream[(row["size"], row["seed"], row["budget"])]
        row.update(prior="random", stage="scratch", pretrain_flops=0.0, pretrain_seed=None,
                   pretrain_causal=None, steps=own["steps"], tokens_seen=own["tokens_seen"],
                   train_flops=own["train_flops"])
        row["val_loss"] = float(law(row["n_params_nonembed"], row["tokens_seen"]))
        row["test_acc"] = float(accuracy(row["val_loss"]))
        run_dir = root / Cell("listops", "s4", row["size"], "random", row["seed"],
                              row["budget"]).directory
        run_dir.mkdir(parents=True)
        write_record(row, run_dir / "record.parquet")
        write_curve(run_dir, int(row["steps"]), row["tokens_seen"], row["n_params_nonembed"])
        records.append(row)
    return root, pd.DataFrame(records)


def test_only_a_run_s_final_checkpoint_carries_its_test_accuracy(scratch_study):
    """A run's test accuracy is measured once, at its end: its earlier checkpoints
    have none, so a metric is mapped on one point per run, never on the losses
    of checkpoints it was not measured at."""
    root, records = scratch_study
    table, notes = checkpoint_ladder(root)
    assert not notes and len(table) == VALIDATIONS * len(records)
    final = table.groupby("run")["step"].transform("max") == table["step"]
    assert table.loc[~final, "test_acc"].isna().all()
    last = table[final].sort_values(["params", "tokens"])
    expected = records.sort_values(["n_params_nonembed", "tokens_seen"])
    np.testing.assert_allclose(last["test_acc"], expected["test_acc"])
    result = predict(root, None, ["1e6:2e7"], checkpoints=True, metric="test_acc",
                     min_fraction=0.0, n_boot=0, n_polish=32, quiet=True)
    mapping = result.fit[result.fit["law"] == "metric"]
    assert (mapping["n_points"] == len(records)).all()
    assert result.runs["test_acc"].notna().sum() == len(records)
    assert len(result.runs) == len(table)


def test_a_directory_without_records_is_refused(tmp_path):
    with pytest.raises(ValueError, match="no run record"):
        checkpoint_ladder(tmp_path)


def test_the_command_fits_a_study_directory_s_checkpoints(study, tmp_path, capsys):
    from scalestudy.cli.parser import run_command

    root, _ = study
    out = tmp_path / "pred"
    assert run_command(["predict", str(root), "--checkpoints", "--at", "1e6:2e7", "--n-boot",
                        "0", "--n-polish", "32", "--no-figures", "--out-dir", str(out)]) == 0
    predictions = pd.read_csv(out / "predictions.csv")
    assert predictions["loss"].iloc[0] == pytest.approx(float(law(1e6, 2e7)), rel=0.01)
    assert run_command(["predict", str(tmp_path / "none"), "--checkpoints", "--at", "1e6:2e7",
                        "--out-dir", str(tmp_path / "p2")]) == 2
    assert "no run record" in capsys.readouterr().err
