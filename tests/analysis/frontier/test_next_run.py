"""The next run of an IsoFLOP suite (analysis/frontier/next_run.py): sizes
that bracket the predicted optimum at a new budget, and a preset layered on
the suite's own that validates and builds its DAG."""

import copy
import math
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from scalestudy.analysis.frontier.next_run import (
    bracketing_sizes,
    flops_text,
    ladder_params,
    next_run,
    vanilla_params,
)
from scalestudy.analysis.frontier.stage import frontier
from scalestudy.analysis.frontier.study import fit_table
from scalestudy.records import read_records
from scalestudy.study import validate

from tests.support import ROOT

PARAMS = pd.Series({"a": 1e3, "b": 4e3, "c": 1.6e4, "d": 6.4e4, "e": 2.56e5})


def test_the_sizes_inside_the_interval_and_one_beyond_each_end():
    sizes, note = bracketing_sizes(PARAMS, 5e3, 1e4, 2e4)
    assert sizes == ["b", "c", "d"] and note == ""
    sizes, _ = bracketing_sizes(PARAMS, 3e3, 1e4, 7e4)
    assert sizes == ["a", "b", "c", "d", "e"]


def test_without_an_interval_the_three_sizes_nearest_the_optimum():
    sizes, note = bracketing_sizes(PARAMS, math.nan, 5e4, math.nan)
    assert sizes == ["c", "d", "e"] and note == ""


def test_an_interval_past_the_ladder_chooses_no_size_and_says_why():
    for low, high in ((500.0, 2e4), (2e3, 1e6)):
        sizes, note = bracketing_sizes(PARAMS, low, 1e4, high)
        assert sizes == [] and "reaches past the ladder" in note


def test_unmeasured_sizes_scale_the_nearest_measured_by_the_vanilla_count():
    params = ladder_params(pd.Series({"xs": 30000.0, "m": 500000.0}), "default")
    assert params["xs"] == 30000.0 and params["m"] == 500000.0
    ratio = vanilla_params("xxs", "default") / vanilla_params("xs", "default")
    assert params["xxs"] == pytest.approx(30000.0 * ratio)
    ratio = vanilla_params("l", "default") / vanilla_params("m", "default")
    assert params["l"] == pytest.approx(500000.0 * ratio)
    assert params.is_monotonic_increasing


def test_budgets_are_written_as_yaml_floats():
    assert yaml.safe_load(f"x: {flops_text(3e12)}")["x"] == 3e12


@pytest.fixture(scope="module")
def suite():
    runs = read_records(ROOT / "data/cache/frontier.parquet")
    result = frontier(fit_table(runs), None, predict=[2.4e12, 6e12], n_boot=100,
                      figures=False, quiet=True, methods=("approach2",))
    return runs, next_run(result, runs)


def deep_update(base: dict, over: dict) -> dict:
    """A configfile over another, as Snakemake merges them (nested keys)."""
    out = copy.deepcopy(base)
    for key, value in over.items():
        out[key] = (deep_update(out[key], value) if isinstance(value, dict)
                    and isinstance(out.get(key), dict) else value)
    return out


def test_each_preset_size_set_brackets_its_groups_optimum(suite):
    runs, planned = suite
    table = planned.table
    assert set(table["compute"]) == {2.4e12, 6e12}
    chosen = table[table["sizes"] != ""]
    assert len(chosen) and (table.loc[table["sizes"] == "", "note"] != "").all()
    for row in chosen.itertuples():
        params = ladder_params(runs[runs["arch"] == row.arch].groupby("size")
                               ["n_params_nonembed"].first(), "default")
        sizes = params[row.sizes.split(",")]
        assert len(sizes) >= 3
        assert sizes.min() <= row.n_low and sizes.max() >= row.n_high


def test_the_preset_over_the_suites_validates_and_builds_its_dag(suite, tmp_path):
    _, planned = suite
    text = planned.preset_text()
    preset = yaml.safe_load(text)
    assert preset["study"] == "frontier_next"
    assert preset["grid"]["budgets"] == [2.4e12, 6e12]
    config = deep_update(
        deep_update(yaml.safe_load((ROOT / "config/config.yaml").read_text()),
                    yaml.safe_load((ROOT / "config/studies/frontier.yaml").read_text())),
        preset)
    validate(config)
    for name in ("Snakefile", "workflow", "config"):  # a fresh directory: no results on disk
        (shutil.copytree if (ROOT / name).is_dir() else shutil.copy)(ROOT / name, tmp_path / name)
    (tmp_path / "next.yaml").write_text(text)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "--cores", "2", "--configfile",
         "config/studies/frontier.yaml", "next.yaml"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    counts = dict(re.findall(r"^(pretrain_upstream|train)\s+(\d+)$", done.stdout, re.M))
    runs = len(preset["grid"]["archs"]) * len(preset["grid"]["sizes"]) * 2 * 2  # seeds, budgets
    assert counts == {"pretrain_upstream": str(runs), "train": str(runs)}


def test_a_frontier_without_predictions_or_study_records_is_refused(suite):
    runs, _ = suite
    result = frontier(fit_table(runs), None, n_boot=0, figures=False, quiet=True,
                      methods=("approach2",))
    with pytest.raises(ValueError, match="--predict"):
        next_run(result, runs)
    with_predictions = frontier(fit_table(runs), None, predict=[1e12], n_boot=0,
                                figures=False, quiet=True, methods=("approach2",))
    with pytest.raises(ValueError, match="size"):
        next_run(with_predictions, runs.drop(columns=["size"]))


def test_the_command_writes_the_preset_and_refuses_what_it_cannot_plan(tmp_path, capsys):
    from scalestudy.cli.parser import run_command

    cache = ROOT / "data/cache/frontier.parquet"
    preset = tmp_path / "next.yaml"
    common = ["frontier", str(cache), "--n-boot", "20", "--no-figures", "--next-run", str(preset)]
    assert run_command([*common, "--out-dir", str(tmp_path / "a"), "--predict", "2.4e12"]) == 2
    assert "needs --from-runs" in capsys.readouterr().err and not preset.exists()
    assert run_command([*common, "--out-dir", str(tmp_path / "b"), "--from-runs"]) == 2
    assert "needs --predict" in capsys.readouterr().err and not preset.exists()
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
    assert run_command([*common, "--out-dir", str(tmp_path / "c"), "--from-runs",
                        "--predict", "2.4e12"]) == 0
    assert "wrote the next run's preset (frontier_next:" in capsys.readouterr().out
    assert yaml.safe_load(preset.read_text())["grid"]["budgets"] == [2.4e12]
