"""The warm fork server: a job run through it is the same job as a plain one
(same record, same exit code, output where the client's went), and it dies with
its client."""

import json
import os
import signal
import subprocess
import sys
import time
from types import SimpleNamespace

import pytest

from scalestudy.cli import fork_server as warm
from scalestudy.records import read_records

from tests.support.cells import TASK


def spec_json(max_steps: int = 6) -> str:
    return json.dumps({
        "study": "t", "task": "listops", "arch": "transformer", "size": "xxs",
        "prior": "random", "seed": 3, "task_config": TASK,
        "train": {"max_steps": max_steps, "batch_size": 8, "warmup_steps": 2, "val_every": 3},
        "trainer": {"accelerator": "cpu", "threads": 1},
    })


@pytest.fixture(scope="module")
def server():
    """A running server; its socket path is what a job's environment carries."""
    saved = os.environ.pop(warm.SOCKET_ENV, None)
    process = warm.start()
    path = os.environ.pop(warm.SOCKET_ENV)
    yield SimpleNamespace(path=path, pid=process.pid)
    process.terminate()
    process.wait(timeout=10)
    if saved is not None:
        os.environ[warm.SOCKET_ENV] = saved


def scalestudy(args: list[str], socket_path: str | None, **kwargs) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k != warm.SOCKET_ENV}
    if socket_path:
        env[warm.SOCKET_ENV] = socket_path
    return subprocess.Popen([sys.executable, "-m", "scalestudy.cli", *args], env=env, **kwargs)


def test_a_job_through_the_server_equals_a_plain_one(server, data_dir, tmp_path):
    records = {}
    for name, socket_path in (("warm", server.path), ("plain", None)):
        log = tmp_path / f"{name}.log"
        with open(log, "w") as out:
            job = scalestudy(["train", "--spec", spec_json(), "--data-dir", str(data_dir),
                              "--run-dir", str(tmp_path / name)], socket_path,
                             stdout=out, stderr=subprocess.STDOUT)
            assert job.wait(timeout=300) == 0
        assert "ok: test_acc=" in log.read_text()  # the child wrote to the client's log
        records[name] = read_records(tmp_path / name / "record.parquet").iloc[0]
    for column in ("val_loss", "val_acc", "test_acc", "train_loss", "flops_per_step", "steps",
                   "config_hash"):
        assert records["warm"][column] == records["plain"][column], column


def test_the_exit_code_and_error_reach_the_client(server, tmp_path):
    job = scalestudy(["train", "--spec", "{}", "--data-dir", str(tmp_path),
                      "--run-dir", str(tmp_path / "run")], server.path, stderr=subprocess.PIPE,
                     text=True)
    _, err = job.communicate(timeout=60)
    plain = scalestudy(["train", "--spec", "{}", "--data-dir", str(tmp_path),
                        "--run-dir", str(tmp_path / "run")], None, stderr=subprocess.PIPE,
                       text=True)
    _, plain_err = plain.communicate(timeout=60)
    assert job.returncode == plain.returncode != 0
    assert err.splitlines()[-1] == plain_err.splitlines()[-1]


def children_of(pid: int) -> set[int]:
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True,
                         text=True)
    return {int(child) for child in out.stdout.split()}


def start_long_job(server, data_dir, run_dir):
    job = scalestudy(["train", "--spec", spec_json(max_steps=100_000), "--data-dir",
                      str(data_dir), "--run-dir", str(run_dir)], server.path,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while not children_of(server.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    (child,) = children_of(server.pid)
    return job, child


def wait_gone(pid: int, seconds: float = 15) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    return False


def test_a_killed_client_takes_its_child_with_it(server, data_dir, tmp_path):
    """SIGKILL of the client (a killed Snakemake job) ends the training child."""
    job, child = start_long_job(server, data_dir, tmp_path / "run")
    job.send_signal(signal.SIGKILL)
    job.wait()
    assert wait_gone(child)
    assert not (tmp_path / "run" / "record.parquet").exists()


def test_signals_are_forwarded_to_the_child(server, data_dir, tmp_path):
    """SIGTERM to the client reaches the child; the client reports its exit."""
    job, child = start_long_job(server, data_dir, tmp_path / "run")
    time.sleep(1.0)
    job.send_signal(signal.SIGTERM)
    assert job.wait(timeout=30) != 0
    assert wait_gone(child)
