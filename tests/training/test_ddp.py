"""More than one device per run: trainer.devices and trainer.strategy from
config, and a record that counts the whole run, not one rank's.

The slow tests train a tiny cell on two CPU processes (gloo), through the
`scalestudy train` command as a job runs it (Lightning Fabric starts the second
process by running the command again): plainly and through the warm server, a
rank that diverges alone, and a run stopped by USR1 and resumed. The fast test
runs the same DDP code path in this process on one device.
"""

import contextlib
import dataclasses
import json
import math
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from scalestudy import tasks
from scalestudy.cli import fork_server as warm
from scalestudy.records import read_records
from scalestudy.study.specs import RunSpec
from scalestudy.training import resume
from scalestudy.training.flops import flops_per_step
from scalestudy.training.task_run import build_classifier, run

from tests.support import ROOT

# Odd validation and test splits: two ranks' shards differ by one example.
TASK = {"n_train": 64, "n_val": 17, "n_test": 15, "max_depth": 3, "max_args": 3,
        "min_length": 3, "max_length": 24}
SCHEDULE = {"max_steps": 12, "batch_size": 16, "warmup_steps": 2, "val_every": 6,
            "protocol": "default", "dropout": 0.1}
STOP_AT = 8  # USR1 on rank 0 at the end of this step
TIMING = {"wall_seconds", "tokens_per_second"}


def spec(**trainer) -> RunSpec:
    return RunSpec.from_dict({
        "study": "ddp", "task": "listops", "arch": "transformer", "size": "xxs",
        "prior": "random", "seed": 0, "task_config": TASK, "train": SCHEDULE,
        "trainer": {"accelerator": "cpu", "threads": 1, "devices": 2, "strategy": "ddp",
                    **trainer},
    })


def spec_json(**trainer) -> str:
    return json.dumps(dataclasses.asdict(spec(**trainer)))


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("data") / "listops"
    tasks.prepare("listops", TASK, path)
    return path


def env(**extra) -> dict:
    return {**{k: v for k, v in os.environ.items() if k != warm.SOCKET_ENV},
            "SCALESTUDY_WARM": "0", "PYTHONPATH": str(ROOT / "src"), **extra}


def train_command(data_dir: Path, run_dir: Path, **trainer) -> list[str]:
    return ["train", "--spec", spec_json(**trainer), "--data-dir", str(data_dir),
            "--run-dir", str(run_dir)]


def comparable(record) -> dict:
    return {k: ("nan" if isinstance(v, float) and math.isnan(v) else v)
            for k, v in dict(record).items() if k not in TIMING}


def final_metrics(run_spec: RunSpec, data: tasks.TaskData, run_dir: Path) -> dict:
    """Accuracy and loss of the run's final weights on the whole test and
    validation splits, in one process."""
    model, _ = build_classifier(run_spec, run_spec.train, data, None)
    checkpoint = torch.load(run_dir / "last.ckpt", map_location="cpu", weights_only=True)
    assert checkpoint["global_step"] == run_spec.train.max_steps
    model.load_state_dict(checkpoint["state_dict"])
    model.eval()
    with torch.no_grad():
        tokens, labels = data.splits["test"]
        test_acc = float((model(tokens.long())[0].argmax(-1) == labels).float().mean())
        tokens, labels = data.splits["val"]
        val_loss = float(F.cross_entropy(model(tokens.long())[0], labels))
    return {"test_acc": test_acc, "val_loss": val_loss}


def step_flops_of(run_spec: RunSpec, data: tasks.TaskData, rows: int) -> int:
    model, _ = build_classifier(run_spec, run_spec.train, data, None)
    return flops_per_step(model, tuple(t[:rows].long() for t in data.splits["train"]))


def mean_real_tokens(data: tasks.TaskData) -> float:
    return float((data.splits["train"][0] != data.pad_id).sum(1).float().mean())


@pytest.fixture(scope="module")
def two_ranks(data_dir, tmp_path_factory):
    """A plain two-process run (no warm server): its directory."""
    run_dir = tmp_path_factory.mktemp("plain") / "run"
    done = subprocess.run([sys.executable, "-m", "scalestudy.cli",
                           *train_command(data_dir, run_dir)],
                          capture_output=True, text=True, timeout=600, env=env())
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return run_dir


@pytest.mark.slow
def test_ddp_on_two_cpu_processes_records_the_whole_run(data_dir, two_ranks):
    record = read_records(two_ranks / "record.parquet").iloc[0]
    assert record["status"] == "ok" and record["steps"] == SCHEDULE["max_steps"]
    data = tasks.load("listops", TASK, data_dir)
    # train.batch_size is the global batch: 8 examples a device.
    assert (record["batch_size"], record["world_size"], record["batch_per_device"],
            record["micro_batch"]) == (16, 2, 8, 8)
    # FLOPs: a step of the run is both devices' shares.
    assert record["flops_per_step"] == 2 * step_flops_of(spec(), data, 8)
    # Tokens: 16 sequences a step over both ranks, not 16 each.
    sequences = SCHEDULE["batch_size"] * SCHEDULE["max_steps"]
    assert record["tokens_seen"] / (sequences * mean_real_tokens(data)) == pytest.approx(1, abs=.15)
    # Metrics: the final weights on the whole splits, each example once (17
    # validation and 15 test examples: shards of 9 and 8, 8 and 7, no repeat).
    expected = final_metrics(spec(), data, two_ranks)
    assert record["test_acc"] == pytest.approx(expected["test_acc"], abs=1e-6)
    assert record["val_loss"] == pytest.approx(expected["val_loss"], rel=1e-5)
    # Each rank its own random streams (its own dropout), both checkpointed.
    streams = torch.load(two_ranks / "last.ckpt", weights_only=True)["ranks"]["torch"]
    assert streams.shape[0] == 2 and not torch.equal(streams[0], streams[1])


@pytest.mark.slow
def test_a_ddp_run_through_the_warm_server_equals_a_plain_one(data_dir, two_ranks, tmp_path):
    """The server's child is the `scalestudy` command: Lightning starts the
    second rank as that command (not `python -m scalestudy.cli.fork_server train ...`)."""
    saved = os.environ.pop(warm.SOCKET_ENV, None)
    server = warm.start()
    socket_path = os.environ.pop(warm.SOCKET_ENV)
    try:
        run_dir = tmp_path / "warm"
        done = subprocess.run([sys.executable, "-m", "scalestudy.cli",
                               *train_command(data_dir, run_dir)],
                              capture_output=True, text=True, timeout=600,
                              env=env(SCALESTUDY_WARM="1", **{warm.SOCKET_ENV: socket_path}))
    finally:
        server.terminate()
        server.wait(timeout=10)
        if saved is not None:
            os.environ[warm.SOCKET_ENV] = saved
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    warm_record = read_records(run_dir / "record.parquet").iloc[0]
    plain = read_records(two_ranks / "record.parquet").iloc[0]
    assert warm_record["world_size"] == 2
    same = {k for k in comparable(plain) if k not in ("git_rev",)}
    assert {k: comparable(warm_record)[k] for k in same} == {k: comparable(plain)[k] for k in same}


# A run whose rank 1 alone sees a non-finite loss at its fourth step (step 3),
# or whose rank 0 receives USR1 at the end of step STOP_AT: the same script on
# both ranks (Lightning starts rank 1 as `python <this script> ...`).
SCRIPT = """
import math, os, signal, sys, time
from datetime import timedelta
from pathlib import Path
from scalestudy.cli.parser import run_command
from scalestudy.training import loop
from scalestudy.training.modules import Classifier

rank = os.environ.get("LOCAL_RANK", "0")
if sys.argv[1] == "diverge" and rank == "1":
    real, calls = Classifier.training_loss, []

    def training_loss(self, batch):
        loss, aux_loss = real(self, batch)
        calls.append(1)
        return (loss * math.nan if len(calls) == 4 else loss), aux_loss

    Classifier.training_loss = training_loss
if sys.argv[1] == "stop" and rank == "0":
    def after_step(self):
        if self.step == {stop_at}:
            os.kill(os.getpid(), signal.SIGUSR1)

    loop.TrainingLoop.after_step = after_step
if sys.argv[1] in ("rank0_exits", "rank0_fails", "rank0_hangs"):
    loop.COLLECTIVE_TIMEOUT = timedelta(seconds={collective_timeout})
    pid_file = Path("rank1.pid")

    def after_step(self):
        if self.step != 2:
            return
        if rank == "1" and sys.argv[1] != "rank0_hangs":
            pid_file.write_text(str(os.getpid()))
            time.sleep(600)  # as in a collective that rank 0 never joins
        if rank == "0":
            while sys.argv[1] != "rank0_hangs" and not pid_file.exists():
                time.sleep(0.1)
            if sys.argv[1] == "rank0_exits":  # as the warm server's child exits
                os._exit(3)
            if sys.argv[1] == "rank0_fails":  # a failed record
                raise RuntimeError("an error of the model on rank 0")
            time.sleep(600)  # stuck outside any collective

    loop.TrainingLoop.after_step = after_step
code = run_command(sys.argv[2:])
if rank == "0" and Path("rank1.pid").exists():
    try:
        os.kill(int(Path("rank1.pid").read_text()), 0)
        Path("rank1_at_rank0_exit").write_text("alive")
    except ProcessLookupError:
        Path("rank1_at_rank0_exit").write_text("gone")
sys.exit(code)
"""
COLLECTIVE_TIMEOUT = 40  # seconds, in the scripts: rank 1's start-up must fit in it


def two_rank_script(tmp_path: Path, mode: str, data_dir: Path, run_dir: Path,
                    timeout: int = 300):
    script = tmp_path / "ranks.py"
    script.write_text(textwrap.dedent(SCRIPT).replace("{stop_at}", str(STOP_AT)).replace(
        "{collective_timeout}", str(COLLECTIVE_TIMEOUT)))
    return subprocess.run([sys.executable, str(script), mode, *train_command(data_dir, run_dir)],
                          capture_output=True, text=True, timeout=timeout, env=env(),
                          cwd=tmp_path)


@contextlib.contextmanager
def rank1_killed_after(tmp_path: Path):
    """Whatever the test finds, no rank 1 outlives it."""
    try:
        yield
    finally:
        with contextlib.suppress(OSError, ValueError):
            os.kill(int((tmp_path / "rank1.pid").read_text()), signal.SIGKILL)


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return Path(f"/proc/{pid}/stat").exists() and Path(
        f"/proc/{pid}/stat").read_text().split(") ")[-1].startswith("Z")  # a zombie


@pytest.mark.slow
def test_a_rank_dies_with_rank_0_however_rank_0_ends(data_dir, tmp_path):
    """Rank 0 leaves without a word (os._exit, as the warm server's child
    exits) while rank 1 waits: rank 1 is killed with it, not left waiting in a
    collective on its GPU (which rank 0's exit has released)."""
    with rank1_killed_after(tmp_path):
        done = two_rank_script(tmp_path, "rank0_exits", data_dir, tmp_path / "run",
                               timeout=240)  # rank 1's pipes close only when it ends
        assert done.returncode == 3, done.stdout[-2000:] + done.stderr[-3000:]
        rank1 = int((tmp_path / "rank1.pid").read_text())
        deadline = time.monotonic() + 10
        while not gone(rank1) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert gone(rank1)


@pytest.mark.slow
def test_a_failed_record_ends_every_rank_before_rank_0_exits(data_dir, tmp_path):
    """Rank 0's run fails (a model error) while rank 1 waits: rank 0 writes
    the failed record without waiting in a collective for rank 1, and stops
    rank 1 before its own exit releases the run's locks."""
    with rank1_killed_after(tmp_path):
        start = time.monotonic()
        done = two_rank_script(tmp_path, "rank0_fails", data_dir, tmp_path / "run",
                               timeout=240)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
        assert time.monotonic() - start < 200
        record = read_records(tmp_path / "run" / "record.parquet").iloc[0]
        assert record["status"] == "failed" and "an error of the model" in record["error"]
        assert (tmp_path / "rank1_at_rank0_exit").read_text() == "gone"


@pytest.mark.slow
def test_ranks_fail_together_when_a_collective_times_out(data_dir, tmp_path):
    """Rank 0 hangs outside any collective: rank 1's collective times out
    (loop.COLLECTIVE_TIMEOUT, shortened here), which fails its job
    (exit 1), and Lightning's watcher then ends rank 0: the job fails, to be
    retried, with no record, instead of holding its devices for 30 minutes."""
    start = time.monotonic()
    done = two_rank_script(tmp_path, "rank0_hangs", data_dir, tmp_path / "run", timeout=300)
    assert done.returncode != 0
    assert time.monotonic() - start < 200
    assert "Timed out waiting" in done.stdout + done.stderr, done.stderr[-3000:]
    assert "the machine failed the run" in done.stdout
    assert not (tmp_path / "run" / "record.parquet").exists()


@pytest.mark.slow
def test_a_rank_that_alone_diverges_stops_every_rank_at_that_step(data_dir, tmp_path):
    """Divergence is decided on the loss's finiteness reduced over the ranks:
    rank 0 does not wait in the next gradient all-reduce for a rank that left."""
    run_dir = tmp_path / "run"
    done = two_rank_script(tmp_path, "diverge", data_dir, run_dir)  # hangs without the fix
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    record = read_records(run_dir / "record.parquet").iloc[0]
    assert record["status"] == "diverged"
    assert record["diverged_step"] == 3 and record["steps"] == 3  # no update from it


@pytest.mark.slow
def test_a_two_rank_run_stopped_by_usr1_resumes_to_the_uninterrupted_record(
        data_dir, two_ranks, tmp_path):
    """Every rank's random streams (dropout 0.1, each rank its own) and the
    loader's place come back: the resumed record is the unbroken one's."""
    run_dir = tmp_path / "run"
    stopped = two_rank_script(tmp_path, "stop", data_dir, run_dir)
    assert stopped.returncode != 0, stopped.stdout[-2000:]
    assert f"stopped by SIGUSR1 at step {STOP_AT}" in stopped.stdout, stopped.stdout[-2000:]
    assert not (run_dir / "record.parquet").exists()
    assert torch.load(run_dir / resume.CHECKPOINT, weights_only=True)["global_step"] == STOP_AT
    resumed = two_rank_script(tmp_path, "plain", data_dir, run_dir)
    assert resumed.returncode == 0, resumed.stdout[-2000:] + resumed.stderr[-3000:]
    assert "resuming from" in resumed.stdout
    got = comparable(read_records(run_dir / "record.parquet").iloc[0])
    want = comparable(read_records(two_ranks / "record.parquet").iloc[0])
    assert got == want


def test_ddp_code_path_in_process_on_one_device(data_dir, tmp_path):
    """The DDP strategy in this process (gloo, world size 1): sharded loaders,
    synced logging, token reduction, rank-0 record; counts as one device."""
    one = spec(devices=1)
    record = run(one, data_dir, tmp_path / "run")
    data = tasks.load("listops", TASK, data_dir)
    assert record["status"] == "ok"
    assert record["flops_per_step"] == step_flops_of(one, data, SCHEDULE["batch_size"])
    assert (record["world_size"], record["batch_per_device"]) == (1, 16)
    sequences = SCHEDULE["batch_size"] * SCHEDULE["max_steps"]
    assert record["tokens_seen"] / (sequences * mean_real_tokens(data)) == pytest.approx(1, abs=.15)
    expected = final_metrics(one, data, tmp_path / "run")
    assert record["test_acc"] == pytest.approx(expected["test_acc"], abs=1e-6)
    assert record["val_loss"] == pytest.approx(expected["val_loss"], rel=1e-5)

