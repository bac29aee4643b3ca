"""Experiment trackers (trainer.loggers): each tracker's own store, read back by
its own reader (TensorBoard's event accumulator, MLflow's client on the SQLite
store, the W&B offline run's transaction log), holds the curves metrics.csv
holds, the run's hyperparameters and the record's headline numbers, under the
cell's name; a killed run that resumes continues the same tracker runs."""

from __future__ import annotations

import copy
import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from scalestudy.records import read_records
from scalestudy.study import ConfigError, grid, validate
from scalestudy.study.specs import as_json, run_spec

from tests.support.cells import TASK
from tests.support.studies import DECLARED_STUDY as DEFAULT
from tests.support.studies import typed

pytest.importorskip("tensorboard")
mlflow = pytest.importorskip("mlflow")
pytest.importorskip("wandb")

CELL = "runs/listops/transformer/xxs/random/s3"
# 60 steps, checkpoints at 20 and 40, the train loss logged every 10: killed at
# step 30 (the `fit` kill point, halfway), the run resumes from step 20 and logs
# step 30 again.
SPEC = {"study": "t", "task": "listops", "arch": "transformer", "size": "xxs",
        "prior": "random", "seed": 3, "task_config": TASK,
        "train": {"max_steps": 60, "batch_size": 8, "warmup_steps": 2, "val_every": 20},
        "trainer": {"accelerator": "cpu", "threads": 1}}


def train(data_dir, run_dir, **env) -> subprocess.CompletedProcess:
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("SCALESTUDY_", "WANDB_",
                                                                        "MLFLOW_"))},
           "SCALESTUDY_LOGGERS": "csv,tensorboard,mlflow,wandb", **env}
    return subprocess.run([sys.executable, "-m", "scalestudy.cli", "train", "--spec",
                           json.dumps(SPEC), "--data-dir", str(data_dir), "--run-dir",
                           str(run_dir)], capture_output=True, text=True, env=env, timeout=600)


def csv_history(run_dir: Path) -> dict[str, dict[int, float]]:
    """Every attempt's metrics.csv, a later attempt's rows over an earlier's."""
    out: dict[str, dict[int, float]] = {}
    for path in [*sorted(run_dir.glob("metrics.attempt*.csv")), run_dir / "metrics.csv"]:
        with open(path) as f:
            for row in csv.DictReader(f):
                for key, value in row.items():
                    if key != "step" and value:
                        out.setdefault(key, {})[int(row["step"])] = float(value)
    return out


def tensorboard_history(run_dir: Path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run_dir))
    events.Reload()
    scalars = {tag: [(e.step, e.value) for e in events.Scalars(tag)]
               for tag in events.Tags()["scalars"]}
    return scalars


def wandb_records(path: Path):
    """The protobuf records of a W&B run's .wandb file (LevelDB's log format:
    32 KB blocks of checksummed chunks, after a 7-byte W&B header)."""
    from wandb.proto import wandb_internal_pb2

    data = path.read_bytes()
    assert data[:4] == b":W&B"
    pos, block, pending = 7, 32768, b""
    while pos + 7 <= len(data):
        if block - pos % block < 7:  # a block's tail too short for a header: padding
            pos += block - pos % block
            continue
        length, kind = int.from_bytes(data[pos + 4:pos + 6], "little"), data[pos + 6]
        chunk, pos = data[pos + 7:pos + 7 + length], pos + 7 + length
        if kind in (1, 2):  # full, first
            pending = chunk
        elif kind in (3, 4):  # middle, last
            pending += chunk
        if kind in (1, 4):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            yield record


def items(update) -> dict:
    return {(i.key or "/".join(i.nested_key)): json.loads(i.value_json) for i in update}


def test_every_tracker_holds_the_run_and_a_resumed_run_continues_it(data_dir, tmp_path):
    study_dir = tmp_path / "results" / "t"
    run_dir = study_dir / CELL
    killed = train(data_dir, run_dir, SCALESTUDY_KILL_AT=f"fit@{run_dir}")
    assert killed.returncode == -9, killed.stderr
    assert json.loads((run_dir / "trackers.json").read_text())["ids"].keys() == {
        "mlflow", "wandb"}
    done = train(data_dir, run_dir)
    assert done.returncode == 0, done.stderr
    assert "resuming from" in done.stdout
    assert "warning" not in done.stderr
    record = read_records(run_dir / "record.parquet").iloc[0]
    history = csv_history(run_dir)
    assert sorted(history["train_loss"]) == [10, 20, 30, 40, 50, 60]
    name = f"t/{CELL}"

    # TensorBoard: the curves once each (the killed attempt's step 30 purged),
    # equal to metrics.csv's; the hparams and the headline numbers at the end.
    board = tensorboard_history(run_dir)
    assert [s for s, _ in board["train_loss"]] == [10, 20, 30, 40, 50, 60]
    for tag in ("train_loss", "val_loss", "val_acc", "test_acc"):
        assert dict(board[tag]) == pytest.approx(history[tag]), tag
    assert dict(board["record/test_acc"]) == {0: pytest.approx(record["test_acc"])}
    assert dict(board["record/steps"]) == {0: 60}

    # MLflow: one run, named by the cell, its params the spec, its metrics the CSV's.
    client = mlflow.MlflowClient(f"sqlite:///{study_dir / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("t")
    (run,) = client.search_runs([experiment.experiment_id])
    assert run.info.run_name == name and run.info.status == "FINISHED"
    assert run.data.params["train/lr"] == "0.002" and run.data.params["seed"] == "3"
    assert run.data.params["config_hash"] == record["config_hash"]
    assert run.data.tags["status"] == "ok"
    assert run.data.metrics["record/test_acc"] == pytest.approx(record["test_acc"])
    assert run.data.metrics["record/wall_seconds"] == pytest.approx(record["wall_seconds"])
    for key in ("train_loss", "val_loss"):
        logged = {m.step: m.value for m in client.get_metric_history(run.info.run_id, key)}
        assert logged == pytest.approx(history[key]), key

    # W&B, offline: both attempts are one run (one id), named by the cell.
    files = sorted((study_dir / "wandb").glob("offline-run-*/run-*.wandb"))
    assert len(files) == 2
    ids = {f.stem.removeprefix("run-") for f in files}
    assert len(ids) == 1
    rows, summary, config = {}, {}, {}
    for path in files:
        for r in wandb_records(path):
            kind = r.WhichOneof("record_type")
            if kind == "run":
                assert (r.run.run_id, r.run.display_name, r.run.run_group) == (
                    ids.pop() if ids else r.run.run_id, name, "t")
            elif kind == "history":
                row = items(r.history.item)
                for key, value in row.items():
                    rows.setdefault(key, {})[row["trainer/global_step"]] = value
            elif kind == "summary":
                summary.update(items(r.summary.update))
            elif kind == "config":
                config.update(items(r.config.update))
    # The killed attempt's service died with it, its file unwritten (W&B buffers
    # a run's records in its service process): the resumed attempt's rows.
    resumed = {step: v for step, v in history["train_loss"].items() if step > 20}
    assert rows["train_loss"] == pytest.approx(resumed)
    assert rows["record/test_acc"] == {60: pytest.approx(record["test_acc"])}
    assert summary["status"] == "ok"
    assert config["arch"] == {"value": "transformer"} or config["arch"] == "transformer"


def test_a_tracker_not_installed_is_refused_naming_its_extra(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "wandb" else real(name, *a))
    config = copy.deepcopy(DEFAULT)
    config["trainer"]["loggers"] = ["csv", "wandb"]
    with pytest.raises(ConfigError, match=r"^trainer.loggers: wandb needs the wandb package, "
                                          r"which is not installed; pip install "
                                          r"'scalestudy\[wandb\]'$"):
        validate(config)
    config["trainer"]["loggers"] = ["csv", "neptune"]
    with pytest.raises(ConfigError, match=r"trainer.loggers\[1\]: 'neptune' is not one of"):
        validate(config)


def test_adding_a_tracker_changes_no_spec():
    """trainer.loggers reaches the jobs by the environment: no run's spec (nor
    its config hash, nor Snakemake's params) changes, so nothing reruns."""
    config = copy.deepcopy(DEFAULT)
    config["trainer"]["loggers"] = ["csv", "tensorboard", "mlflow"]
    validate(config)
    cell = grid.Cell("listops", "transformer", "xs", "random", 0)
    assert as_json(run_spec(typed(config), cell)) == as_json(run_spec(typed(DEFAULT), cell))


@pytest.mark.parametrize("schedule, seeds", [("cosine", "shared"), ("wsd", "per_seed")])
def test_budgeted_runs_get_distinct_names_and_one_store_per_study(tmp_path, monkeypatch,
                                                                  schedule, seeds):
    """Every run of a study with three budgets, opened with two trackers (csv
    and MLflow) in the directory the workflow gives it: each tracker run is
    named by its cell (budget and seed included, so no two collide) and every
    MLflow run lands in the study's one store."""
    from scalestudy import trackers
    from scalestudy.study import grid
    from scalestudy.study.specs import PretrainSpec, RunSpec, pretrain_spec

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    config = copy.deepcopy(DEFAULT)
    config["study"] = "t"
    config["grid"].update(archs=["transformer"], sizes=["xxs"], priors=["random", "upstream"],
                          seeds=[0, 1], budgets=[1e11, 3e11, 1e12])
    config["train"]["schedule"] = schedule
    config["pretrain"]["seeds"] = seeds
    study_dir = tmp_path / "results" / "t"
    study = typed(config)
    runs = [(RunSpec.from_dict(run_spec(study, c)), c) for c in grid.cells(study.grid)]
    runs += [(PretrainSpec.from_dict(pretrain_spec(study, p)), p)
             for p in grid.pretrain_cells(study.grid, study.pretrain.per_seed)]
    assert len(runs) == 12 + 3 * (2 if seeds == "per_seed" else 1)
    for spec, cell in runs:
        spec = spec.placed(study_dir / cell.directory)  # as the job places it (training/run.py)
        assert spec.cell == cell
        loggers = trackers.open_trackers(spec, study_dir / cell.directory, ("csv", "mlflow"))
        trackers.stop(loggers, "success")
    assert [p.relative_to(tmp_path) for p in tmp_path.rglob("mlflow.db")] == [
        Path("results/t/mlflow.db")]
    client = mlflow.MlflowClient(f"sqlite:///{study_dir / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("t")
    names = [r.info.run_name for r in client.search_runs([experiment.experiment_id],
                                                         max_results=1000)]
    assert sorted(names) == sorted(f"t/{cell.directory}" for _, cell in runs)
    assert len(set(names)) == len(runs)
