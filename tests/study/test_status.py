"""`scalestudy status`: a study's runs counted by stage and state from its
records and Snakemake's markers of started jobs, the failed runs with their
error and log, and the training time spent and left."""

from __future__ import annotations

import base64
import copy
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from scalestudy.locks import HOLDERS, claim
from scalestudy.records import failed_record, write_record
from scalestudy.study import costs, grid
from scalestudy.study.status import CONFIG, Run, Status, report, study_status

from tests.support import ROOT
from tests.support.studies import DECLARED_STUDY as DEFAULT
from tests.support.studies import typed


def record(cell: grid.Cell, status: str, wall: float, error: str = "") -> dict:
    row = failed_record({"study": "s", "task": cell.task, "arch": cell.arch, "size": cell.size,
                         "prior": cell.prior, "seed": cell.seed, "stage": "scratch"},
                        RuntimeError(error or "x"))
    row.update(status=status, wall_seconds=wall, error=error or None)
    return row


def four_cell_study(tmp_path) -> tuple[dict, Path]:
    """A study of one architecture at two sizes and two seeds: its config, and
    its directory with the config a running study leaves there."""
    config = copy.deepcopy(DEFAULT)
    config["study"] = "s"
    config["grid"].update(archs=["transformer"], sizes=["xxs", "xs"], priors=["random"],
                          seeds=[0, 1])
    study_dir = tmp_path / "results" / "s"
    study_dir.mkdir(parents=True)
    (study_dir / CONFIG).write_text(yaml.safe_dump(config))
    return config, study_dir


def test_counts_failures_and_time(tmp_path):
    config, study_dir = four_cell_study(tmp_path)
    cells = grid.cells(typed(config).grid)
    assert len(cells) == 4
    done, failed, running, pending = cells
    write_record(record(done, "ok", 30.0), study_dir / done.directory / "record.parquet")
    write_record(record(failed, "failed", 10.0, "ValueError: bad data"),
                 study_dir / failed.directory / "record.parquet")
    # Snakemake marks a started job's output; this process holds the study's lock.
    marker = base64.urlsafe_b64encode(
        f"results/s/{running.directory}/record.parquet".encode()).decode()
    (tmp_path / ".snakemake" / "incomplete").mkdir(parents=True)
    (tmp_path / ".snakemake" / "incomplete" / marker).write_text("{}")
    claim(tmp_path / ".snakemake")

    status = study_status(study_dir)
    assert status.counts() == {"train scratch": {
        "done": 1, "running": 1, "failed": 1, "diverged": 0, "interrupted": 0, "corrupt": 0,
        "pending": 1}}
    assert status.spent == 40.0
    flops = {c: costs.training_flops(typed(config), c) for c in cells}
    rate = 40.0 / (flops[done] + flops[failed])
    assert status.left == rate * (flops[running] + flops[pending])
    text = report(status)
    assert f"{failed.directory}: ValueError: bad data" in text
    log = f"logs/train/listops/transformer/{failed.size}/random/s{failed.seed}.log"
    assert str(study_dir / log) in text
    assert "training time spent: 0m40s" in text

    # The study's Snakemake gone: the started job is interrupted, not running.
    holder = tmp_path / ".snakemake" / HOLDERS / f"{socket.gethostname()}.{os.getpid()}"
    holder.rename(holder.with_name(f"{socket.gethostname()}.{2**22 + 12345}"))
    assert study_status(study_dir).counts()["train scratch"]["interrupted"] == 1

    # The command, from the workflow's directory.
    done_ = subprocess.run([sys.executable, "-m", "scalestudy.cli", "status"], cwd=tmp_path,
                           capture_output=True, text=True)
    assert done_.returncode == 0, done_.stderr
    assert "train scratch" in done_.stdout and "bad data" in done_.stdout


def test_the_log_patterns_are_the_rules():
    from scalestudy.study.status import PRETRAIN_LOG, TRAIN_LOG

    train = (ROOT / "workflow/rules/train.smk").read_text()
    assert 'f"{OUT}/logs/train/{{task}}/{{arch}}/{{size}}/{{prior}}/s{{seed}}.log"' in train
    assert TRAIN_LOG == "logs/train/{task}/{arch}/{size}/{prior}/s{seed}.log"
    pretrain = (ROOT / "workflow/rules/pretrain.smk").read_text()
    assert 'f"{OUT}/logs/{TASK_PRETRAIN}.log"' in pretrain  # the directory, s{seed} per seed
    assert PRETRAIN_LOG == "logs/{directory}.log"


def test_no_study_says_which(tmp_path):
    done = subprocess.run([sys.executable, "-m", "scalestudy.cli", "status"], cwd=tmp_path,
                          capture_output=True, text=True)
    assert done.returncode == 2
    assert "name the study: results/<study> (no results/ here)" in done.stderr


# --------------------------------------------------------------------------- training time left
# `scalestudy status`'s training time left (study/status.py):
# a diverged run's wall time counts toward the rate like a done or failed run's,
# and an interrupted run (its Snakemake gone: the next snakemake reruns it) is
# time still to spend, like a running or pending one.


def test_time_left_counts_diverged_runs_in_the_rate_and_interrupted_runs_as_left(tmp_path):
    runs = [Run("train scratch", "done", "", flops=1.0, state="done", wall=10.0),
            Run("train scratch", "failed", "", flops=1.0, state="failed", wall=10.0),
            Run("train scratch", "diverged", "", flops=2.0, state="diverged", wall=40.0),
            Run("train scratch", "interrupted", "", flops=8.0, state="interrupted"),
            Run("train scratch", "running", "", flops=16.0, state="running"),
            Run("train scratch", "pending", "", flops=32.0, state="pending")]
    status = Status("s", tmp_path, runs)
    assert status.spent == 60.0
    # 60 s over 4 FLOPs ended, applied to the 8 + 16 + 32 FLOPs not done.
    assert status.left == pytest.approx(60.0 / 4.0 * 56.0)


def test_a_diverged_run_alone_gives_the_rate(tmp_path):
    runs = [Run("train scratch", "diverged", "", flops=2.0, state="diverged", wall=30.0),
            Run("train scratch", "interrupted", "", flops=4.0, state="interrupted")]
    assert Status("s", tmp_path, runs).left == pytest.approx(60.0)


def test_the_status_of_a_study_with_a_diverged_and_an_interrupted_run(tmp_path):
    """Through study_status: a diverged record, and a started job whose
    Snakemake is gone (no holder recorded), from the files a study leaves."""
    config, study_dir = four_cell_study(tmp_path)
    done, diverged, interrupted, pending = grid.cells(typed(config).grid)
    write_record(record(done, "ok", 30.0), study_dir / done.directory / "record.parquet")
    write_record(record(diverged, "diverged", 10.0),
                 study_dir / diverged.directory / "record.parquet")
    marker = base64.urlsafe_b64encode(
        f"results/s/{interrupted.directory}/record.parquet".encode()).decode()
    (tmp_path / ".snakemake" / "incomplete").mkdir(parents=True)
    (tmp_path / ".snakemake" / "incomplete" / marker).write_text("{}")

    status = study_status(study_dir)
    assert status.counts()["train scratch"] == {
        "done": 1, "running": 0, "failed": 0, "diverged": 1, "interrupted": 1, "corrupt": 0,
        "pending": 1}
    flops = {c: costs.training_flops(typed(config), c)
             for c in (done, diverged, interrupted, pending)}
    rate = 40.0 / (flops[done] + flops[diverged])
    assert status.left == pytest.approx(rate * (flops[interrupted] + flops[pending]))
    assert "training time left: about" in report(status)


def test_a_corrupt_record_is_listed_with_the_command_that_repairs_it(tmp_path):
    """A truncated record does not hide the other runs: it is counted `corrupt`,
    named with why, and the study's own snakemake command is the repair."""
    config, study_dir = four_cell_study(tmp_path)
    done, broken, *_ = grid.cells(typed(config).grid)
    write_record(record(done, "ok", 30.0), study_dir / done.directory / "record.parquet")
    path = study_dir / broken.directory / "record.parquet"
    write_record(record(broken, "ok", 20.0), path)
    path.write_bytes(path.read_bytes()[:300])  # cut short, as by a crash of the file system

    status = study_status(study_dir)
    assert status.counts()["train scratch"]["done"] == 1
    assert status.counts()["train scratch"]["corrupt"] == 1
    text = report(status)
    assert f"{path}: not a readable Parquet file" in text
    assert "repair: the snakemake command that ran the study sets each aside" in text


def test_the_repair_command_names_the_study_s_preset():
    from scalestudy.study.status import rerun_command

    assert rerun_command("default") == "snakemake --cores all"
    assert rerun_command("smoke") == ("snakemake --cores all --configfile "
                                      "config/studies/smoke.yaml")


def test_status_without_a_study_skips_the_analyses_of_caches(tmp_path):
    """results/cache/<name> (make figures-from-cache) is not a study."""
    from scalestudy.study.status import only_study

    _, study_dir = four_cell_study(tmp_path)
    (tmp_path / "results" / "cache" / "default" / "figures").mkdir(parents=True)
    assert only_study(tmp_path / "results") == study_dir
