"""More than one device per run: trainer.devices and trainer.strategy from
config, and a record that counts the whole run, not one rank's.

The DDP test trains the smoke study's largest cell on two CPU processes (gloo),
through the `scalestudy train` command as a job runs it (Lightning Fabric starts the
second process by running the command again). It is slow (two cold processes);
the fast test runs the same DDP code path in this process on one device.
"""

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
import yaml

from scalestudy import tasks
from scalestudy.records import read_records
from scalestudy.study import specs
from scalestudy.study.specs import RunSpec
from scalestudy.training.flops import flops_per_step
from scalestudy.training.task import build_classifier, run

ROOT = Path(__file__).parent.parent


def smoke_spec(**trainer) -> RunSpec:
    """The smoke study's largest cell (its last size), prior random."""
    config = yaml.safe_load((ROOT / "config/config.yaml").read_text())
    smoke = yaml.safe_load((ROOT / "config/studies/smoke.yaml").read_text())
    return RunSpec.from_dict({
        "study": "ddp", "task": "listops", "arch": "transformer",
        "size": smoke["grid"]["sizes"][-1], "prior": "random", "seed": 0,
        "task_config": {**config["tasks"]["listops"], **smoke["tasks"]["listops"]},
        "train": {**config["train"], **smoke["train"]},
        "trainer": {**specs.hardware(config), "accelerator": "cpu", **trainer},
    })


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    spec = smoke_spec()
    path = tmp_path_factory.mktemp("data") / "listops"
    tasks.prepare("listops", spec.task_config, path)
    return path


def one_device_step_flops(spec: RunSpec, data_dir: Path) -> tuple[int, tasks.TaskData]:
    data = tasks.load(spec.task, spec.task_config, data_dir)
    model, _ = build_classifier(spec, spec.train, data, None)
    batch = tuple(t[: spec.train.batch_size] for t in data.splits["train"])
    return flops_per_step(model, batch), data


def final_metrics(spec: RunSpec, data: tasks.TaskData, run_dir: Path) -> dict:
    """Accuracy and loss of the run's final weights on the whole test and
    validation splits, in one process."""
    model, _ = build_classifier(spec, spec.train, data, None)
    checkpoint = torch.load(run_dir / "last.ckpt", map_location="cpu", weights_only=True)
    assert checkpoint["global_step"] == spec.train.max_steps
    model.load_state_dict(checkpoint["state_dict"])
    model.eval()
    with torch.no_grad():
        tokens, labels = data.splits["test"]
        test_acc = float((model(tokens)[0].argmax(-1) == labels).float().mean())
        tokens, labels = data.splits["val"]
        val_loss = float(F.cross_entropy(model(tokens)[0], labels))
    return {"test_acc": test_acc, "val_loss": val_loss}


def mean_real_tokens(data: tasks.TaskData) -> float:
    return float((data.splits["train"][0] != data.pad_id).sum(1).float().mean())


@pytest.mark.slow
def test_ddp_on_two_cpu_processes_records_the_whole_run(data_dir, tmp_path):
    spec = smoke_spec(devices=2, strategy="ddp")
    run_dir = tmp_path / "run"
    env = {**os.environ, "SCALESTUDY_WARM": "0", "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run(
        [sys.executable, "-m", "scalestudy.cli", "train", "--spec",
         json.dumps(dataclasses.asdict(spec)),
         "--data-dir", str(data_dir), "--run-dir", str(run_dir)],
        capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    record = read_records(run_dir / "record.parquet").iloc[0]
    assert record["status"] == "ok" and record["steps"] == spec.train.max_steps

    # FLOPs: a step of the run is both devices' batches.
    step_flops, data = one_device_step_flops(spec, data_dir)
    assert record["flops_per_step"] == 2 * step_flops
    assert record["train_flops"] == 2 * step_flops * spec.train.max_steps
    # Tokens: both ranks' (2 x 16 sequences a step), not one rank's.
    sequences = 2 * spec.train.batch_size * spec.train.max_steps
    assert record["tokens_seen"] / (sequences * mean_real_tokens(data)) == pytest.approx(1, abs=.15)
    # Metrics: the final weights on the whole splits (each rank held half).
    expected = final_metrics(spec, data, run_dir)
    assert record["test_acc"] == pytest.approx(expected["test_acc"], abs=1e-6)
    assert record["val_loss"] == pytest.approx(expected["val_loss"], rel=1e-4)


def test_ddp_code_path_in_process_on_one_device(data_dir, tmp_path):
    """The DDP strategy in this process (gloo, world size 1): sharded loaders,
    synced logging, token reduction, rank-0 record; counts as one device."""
    spec = smoke_spec(devices=1, strategy="ddp")
    record = run(spec, data_dir, tmp_path / "run")
    step_flops, data = one_device_step_flops(spec, data_dir)
    assert record["status"] == "ok" and record["flops_per_step"] == step_flops
    sequences = spec.train.batch_size * spec.train.max_steps
    assert record["tokens_seen"] / (sequences * mean_real_tokens(data)) == pytest.approx(1, abs=.15)
    expected = final_metrics(spec, data, tmp_path / "run")
    assert record["test_acc"] == pytest.approx(expected["test_acc"], abs=1e-6)
    assert record["val_loss"] == pytest.approx(expected["val_loss"], rel=1e-4)
