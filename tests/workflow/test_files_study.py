"""A study of the user's own files (`tasks: [files]`, tasks/files.py) through
Snakemake: it validates and builds its DAG, trains from a CSV, and a file
whose contents change (not one only touched) reruns its data and its runs."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from tests.support import ROOT
from tests.support.studies import job_counts, workflow_copy

PRESET = {
    "study": "own",
    "grid": {"archs": ["transformer"], "sizes": ["xxs"], "priors": ["random"],
             "tasks": ["files"], "seeds": [0], "per_task": {}, "budgets": []},
    # Relative to the working directory, as a study names its files.
    "tasks": {"files": {"train": "mydata/train.csv", "val": "mydata/val.csv",
                        "test": "mydata/test.csv", "seq_len": 32}},
    "train": {"max_steps": 6, "batch_size": 16, "warmup_steps": 2, "val_every": 3,
              "protocol": "default"},
    "fit": {"n_boot": 10},
    "trainer": {"accelerator": "cpu"},
}


def snakemake(workdir: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run([sys.executable, "-m", "snakemake", "--cores", "2",
                           "--configfile", "own.yaml", *args],
                          cwd=workdir, env=env, capture_output=True, text=True, timeout=600)


@pytest.fixture
def workdir(tmp_path):
    workflow_copy(tmp_path)
    shutil.copytree(ROOT / "tests/data/files", tmp_path / "mydata")
    (tmp_path / "own.yaml").write_text(yaml.safe_dump(PRESET))
    return tmp_path


def test_a_study_of_the_users_files_trains_from_a_csv_and_reruns_when_one_changes(workdir):
    planned = snakemake(workdir, "-n")
    assert planned.returncode == 0, planned.stderr[-2000:]
    assert {k: v for k, v in job_counts(planned.stdout).items()
            if k in ("task_data", "train")} == {"task_data": 1, "train": 1}
    done = snakemake(workdir, "--quiet", "host")
    assert done.returncode == 0, done.stderr[-3000:]
    out = workdir / "results/own"
    manifest = json.loads((out / "data/files/manifest.json").read_text())
    assert manifest["classes"] == ["cooking", "sport", "weather"] and manifest["standin"] is None
    runs = pd.read_parquet(out / "runs.parquet")
    assert list(runs["status"]) == ["ok"] and list(runs["task"]) == ["files"]
    assert runs["task_data"].iloc[0] == ("the user's files: mydata/train.csv, mydata/val.csv, "
                                         "mydata/test.csv")
    assert runs["data_checksum"].iloc[0] == manifest["checksum"]
    # Touched, the same bytes: nothing to do.
    (workdir / "mydata/val.csv").touch()
    again = snakemake(workdir, "-n")
    assert "Nothing to be done" in again.stdout + again.stderr, again.stdout[-2000:]
    # Changed: its data is prepared again and its run trains again (a new spec).
    with open(workdir / "mydata/train.csv", "a") as f:
        f.write("Stir the soup gently.,cooking\n")
    changed = snakemake(workdir, "-n")
    assert changed.returncode == 0, changed.stderr[-2000:]
    counts = job_counts(changed.stdout)
    assert counts["task_data"] == 1 and counts["train"] == 1
    assert "params have changed" in changed.stdout


def test_files_beside_a_built_in_task(workdir):
    beside = {**PRESET, "grid": {**PRESET["grid"], "tasks": ["listops", "files"]}}
    (workdir / "own.yaml").write_text(yaml.safe_dump(beside))
    planned = snakemake(workdir, "-n")
    assert planned.returncode == 0, planned.stderr[-2000:]
    counts = job_counts(planned.stdout)
    assert counts["task_data"] == 2 and counts["train"] == 2


def test_a_study_of_files_it_cannot_find_is_refused_before_any_job(workdir):
    (workdir / "mydata/test.csv").unlink()
    refused = snakemake(workdir, "-n")
    assert refused.returncode != 0
    assert ("tasks.files.test: mydata/test.csv" in refused.stderr
            and "not found" in refused.stderr), refused.stderr[-2000:]
