"""`scalestudy status`'s training time left (study/status.py):
a diverged run's wall time counts toward the rate like a done or failed run's,
and an interrupted run (its Snakemake gone: the next snakemake reruns it) is
time still to spend, like a running or pending one."""

from __future__ import annotations

import base64

import pytest
from test_status import four_cell_study, record

from scalestudy.records import write_record
from scalestudy.study import costs, grid
from scalestudy.study.status import Run, Status, report, study_status


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
    done, diverged, interrupted, pending = grid.cells(config["grid"])
    write_record(record(done, "ok", 30.0), study_dir / done.directory / "record.parquet")
    write_record(record(diverged, "diverged", 10.0),
                 study_dir / diverged.directory / "record.parquet")
    marker = base64.urlsafe_b64encode(
        f"results/s/{interrupted.directory}/record.parquet".encode()).decode()
    (tmp_path / ".snakemake" / "incomplete").mkdir(parents=True)
    (tmp_path / ".snakemake" / "incomplete" / marker).write_text("{}")

    status = study_status(study_dir)
    assert status.counts()["train scratch"] == {
        "done": 1, "running": 0, "failed": 0, "diverged": 1, "interrupted": 1, "pending": 1}
    flops = {c: costs.training_flops(config, c.task, c.size, c.prior)
             for c in (done, diverged, interrupted, pending)}
    rate = 40.0 / (flops[done] + flops[diverged])
    assert status.left == pytest.approx(rate * (flops[interrupted] + flops[pending]))
    assert "training time left: about" in report(status)
