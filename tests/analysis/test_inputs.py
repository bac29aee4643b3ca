"""The inputs every analysis command reads, checked once (analysis/inputs.py,
frontier/inputs.py), and what each command does with the bad ones a user
really hands it: each case refused with one line naming the file, the column
and what is accepted, or given an honest result; nothing destroyed or
half-written; the exit status says which (errors.py)."""

from __future__ import annotations

import json
import os

import numpy as np
import pandas as pd
import pytest

from scalestudy import errors
from scalestudy.analysis.inputs import check_runs, read_runs
from scalestudy.cli.parser import run_command
from scalestudy.records import read_records

from tests.support import DATA, ROOT

DEFAULT = ROOT / "data" / "cache" / "default.parquet"
SMALL = ROOT / "data" / "cache" / "deep_fixup.parquet"


def chinchilla(path):
    d = pd.read_csv(DATA / "chinchilla/svg_extracted_data.csv")
    table = pd.DataFrame({"params": d["Model Size"], "compute": d["Training FLOP"],
                          "loss": d["loss"]})
    table.to_csv(path, index=False)
    return table


def command(capsys, *argv) -> tuple[int, str]:
    code = run_command([str(a) for a in argv])
    return code, capsys.readouterr().err


def files(root) -> dict:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


# --------------------------------------------------------------------------- outputs

@pytest.mark.parametrize("name", ["predict", "frontier"])
def test_an_out_dir_that_is_the_input_file_is_refused_and_the_file_kept(tmp_path, capsys,
                                                                         name):
    keep = tmp_path / "keep.csv"
    chinchilla(keep)
    before = keep.read_bytes()
    extra = ["--at", "7e9:1.4e11"] if name == "predict" else []
    code, err = command(capsys, name, keep, *extra, "--out-dir", keep, "--n-boot", "0")
    assert code == errors.BAD_INPUT
    assert f"{keep}: an existing file, not a" in err and err.count("\n") == 1
    assert keep.read_bytes() == before and sorted(os.listdir(tmp_path)) == ["keep.csv"]


def test_an_out_dir_holding_the_input_is_refused(tmp_path, capsys):
    ladder = tmp_path / "out" / "predictions.csv"  # named like an output, yet the input
    ladder.parent.mkdir()
    chinchilla(ladder)
    before = files(tmp_path)
    code, err = command(capsys, "predict", ladder, "--at", "7e9:1.4e11", "--out-dir",
                        ladder.parent, "--n-boot", "0")
    assert code == errors.BAD_INPUT and "is or holds the input" in err
    assert files(tmp_path) == before


@pytest.mark.parametrize("name, args", [
    ("fit", ["--out", "{runs}"]),
    ("fit", ["--out", "{foreign}"]),
    ("claims", ["{fits}", "--out", "{fits}"]),
    ("claims", ["{fits}", "--out", "{foreign}"]),
    ("tables", ["{fits}", "--out-dir", "{runs}"]),
    ("collect", ["--out", "{foreign}"]),
])
def test_an_output_file_it_did_not_write_is_refused(tmp_path, capsys, name, args):
    runs, fits, foreign = tmp_path / "runs.parquet", tmp_path / "fits.parquet", tmp_path / "a.txt"
    runs.write_bytes(SMALL.read_bytes())
    assert run_command(["fit", str(runs), "--out", str(fits), "--n-boot", "10"]) == 0
    foreign.write_text("a user's notes")
    capsys.readouterr()
    before = files(tmp_path)
    argv = [a.format(runs=runs, fits=fits, foreign=foreign) for a in args]
    code, err = command(capsys, name, runs, *argv)
    assert code == errors.BAD_INPUT and "so not replaced" in err or "is the input" in err, err
    assert files(tmp_path) == before


def test_analyse_into_a_folder_of_other_files_is_refused(tmp_path, capsys):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "paper.tex").write_text("mine")
    code, err = command(capsys, "analyse", SMALL, "--out-dir", out, "--workers", "1")
    assert code == errors.BAD_INPUT and "it holds paper.tex" in err
    assert files(tmp_path) == {"mine/paper.tex": b"mine"}


# --------------------------------------------------------------------------- run records

def test_a_cache_stacked_twice_is_refused_naming_the_duplicates(tmp_path, capsys):
    runs = read_records(DEFAULT)
    stacked = tmp_path / "stacked.parquet"
    pd.concat([runs, runs]).to_parquet(stacked)
    for argv in (["analyse", stacked, "--out-dir", tmp_path / "out", "--workers", "1"],
                 ["fit", stacked, "--out", tmp_path / "fits.parquet"]):
        code, err = command(capsys, *argv)
        assert code == errors.BAD_INPUT
        assert "378 records share an identity" in err and "scratch listops/transformer/xxs" in err
    assert sorted(os.listdir(tmp_path)) == ["stacked.parquet"]


def test_a_cache_whose_every_run_failed_gets_no_verdict(tmp_path, capsys):
    runs = read_records(SMALL).assign(status="failed", error="RuntimeError: out of memory")
    failed = tmp_path / "failed.parquet"
    runs.to_parquet(failed)
    fits = tmp_path / "fits.parquet"
    assert run_command(["fit", str(SMALL), "--out", str(fits)]) == 0
    capsys.readouterr()
    for argv in (["analyse", failed, "--out-dir", tmp_path / "out", "--workers", "1"],
                 ["claims", failed, fits, "--out", tmp_path / "claims.md"],
                 ["fit", failed, "--out", tmp_path / "f.parquet"]):
        code, err = command(capsys, *argv)
        assert code == errors.NO_RESULT
        assert "no run finished ok (9 failed)" in err and "out of memory" in err
    assert sorted(os.listdir(tmp_path)) == ["failed.parquet", "fits.parquet"]


@pytest.mark.parametrize("value, message", [
    (np.nan, "column 'test_acc': 1 run(s) hold NaN"),
    (1.7, "column 'test_acc': 1 run(s) hold 1.7"),
])
def test_a_finished_run_without_a_valid_accuracy_is_refused_before_any_output(
        tmp_path, capsys, value, message):
    runs = read_records(SMALL)
    runs.loc[4, "test_acc"] = value
    bad = tmp_path / "bad.parquet"
    runs.to_parquet(bad)
    out = tmp_path / "out"
    code, err = command(capsys, "analyse", bad, "--out-dir", out, "--workers", "1")
    assert code == errors.BAD_INPUT and message in err and "row 4:" in err
    assert "accepted:" in err and err.count("\n") == 1
    assert not out.exists() and sorted(os.listdir(tmp_path)) == ["bad.parquet"]


def test_an_empty_record_file_is_nothing_to_fit(tmp_path, capsys):
    empty = tmp_path / "empty.parquet"
    read_records(SMALL).iloc[:0].to_parquet(empty)
    code, err = command(capsys, "analyse", empty, "--out-dir", tmp_path / "out")
    assert code == errors.NO_RESULT and f"{empty}: no run record in it" in err


def test_the_committed_caches_pass_the_check():
    for cache in sorted((ROOT / "data" / "cache").glob("*.parquet")):
        assert len(read_runs(cache))


def test_a_frame_of_runs_is_checked_as_the_files_are():
    runs = read_records(SMALL)
    assert check_runs(runs, "frame") is runs
    with pytest.raises(ValueError, match="frame: 18 records share an identity"):
        check_runs(pd.concat([runs, runs]), "frame")


# --------------------------------------------------------------------------- ladders

def test_a_ladder_stacked_five_times_is_refused(tmp_path, capsys):
    table = chinchilla(tmp_path / "one.csv")
    stacked = tmp_path / "stacked.csv"
    pd.concat([table] * 5).to_csv(stacked, index=False)
    code, err = command(capsys, "predict", stacked, "--at", "7e9:1.4e11", "--out-dir",
                        tmp_path / "out")
    assert code == errors.BAD_INPUT and "1225 rows repeat another row exactly" in err


def test_a_boolean_loss_column_is_refused(tmp_path, capsys):
    table = chinchilla(tmp_path / "one.csv")
    path = tmp_path / "bool.parquet"
    table.assign(loss=table["loss"] > 3).to_parquet(path)
    for name, extra in (("predict", ["--at", "7e9:1.4e11"]), ("frontier", [])):
        code, err = command(capsys, name, path, *extra, "--out-dir", tmp_path / "out")
        assert code == errors.BAD_INPUT
        assert f"{path}: column 'loss' holds booleans (True/False); accepted: numbers" in err


def test_a_target_outside_the_ladder_says_so(tmp_path, capsys):
    chinchilla(tmp_path / "ladder.csv")
    out = tmp_path / "out"
    code, err = command(capsys, "predict", tmp_path / "ladder.csv", "--at", "7e9:1.4e11",
                        "1e3:1e3", "1e13:1e15", "--out-dir", out, "--n-boot", "0",
                        "--no-figures")
    assert code == errors.OK
    status = pd.read_csv(out / "predictions.csv")["status"].tolist()
    assert status[0] in ("ok", "poorly determined")  # the law's own status, within reach
    assert status[1].startswith("outside the ladder: below its smallest N (5.73e+07)")
    assert status[2].startswith("far beyond the ladder: 4.63e+06x its largest compute")
    assert json.loads((out / "predict.json").read_text())["input"] == str(
        tmp_path / "ladder.csv")


@pytest.mark.parametrize("rows", ["one", "constant"])
def test_a_ladder_that_fits_nothing_writes_nothing(tmp_path, capsys, rows):
    table = chinchilla(tmp_path / "all.csv")
    table = table.head(1) if rows == "one" else table.head(8).assign(params=1e9, compute=1e20,
                                                                    loss=2.0 + np.arange(8))
    table.to_csv(tmp_path / "ladder.csv", index=False)
    code, err = command(capsys, "predict", tmp_path / "ladder.csv", "--at", "7e9:1.4e11",
                        "--out-dir", tmp_path / "out")
    assert code == errors.NO_RESULT
    assert "no group's L(N, D) could be fitted (no fit: L(N, D) needs >= 3 sizes" in err
    assert not (tmp_path / "out").exists()


def test_what_predict_leaves_out_is_written_and_counted(tmp_path, capsys):
    table = chinchilla(tmp_path / "all.csv")
    table.loc[[3, 7], "loss"] = np.nan
    table.loc[9, "params"] = -1
    table.to_csv(tmp_path / "ladder.csv", index=False)
    code, err = command(capsys, "predict", tmp_path / "ladder.csv", "--at", "7e9:1.4e11",
                        "--out-dir", tmp_path / "out", "--n-boot", "0", "--no-figures")
    assert code == errors.OK
    assert "predict: left out 1 set(s) of rows" in err
    excluded = pd.read_csv(tmp_path / "out" / "excluded.csv")
    assert excluded["left_out"].str.contains("rows \\(0-based\\) 3, 7, 9").all()


@pytest.mark.parametrize("content, message", [
    (b"", "empty.csv: empty: no header and no rows"),
    (bytes(range(256)) * 4, "empty.csv: not a readable CSV table ("),
    (b"params,los,tokens\n1,2,3\n", "missing column 'loss'; columns present: params, los, "
                                    "tokens"),
])
def test_an_unreadable_table_is_named_with_what_it_holds(tmp_path, capsys, content, message):
    path = tmp_path / "empty.csv"
    path.write_bytes(content)
    code, err = command(capsys, "predict", path, "--at", "1e9:2e10", "--out-dir",
                        tmp_path / "out")
    assert code == errors.BAD_INPUT and message in err


def test_a_negative_target_names_the_option_not_argparse_usage(capsys):
    code, err = command(capsys, "predict", "ladder.csv", "--at", "-1:5", "--out-dir", "x")
    assert code == errors.BAD_INPUT
    assert err.strip() == ("scalestudy predict: error: --at: got '-1:5'; accepted: N:D, "
                           "parameters and tokens as positive numbers (e.g. 70e9:1.4e12)")
