"""A warm server killed mid-study (SIGKILL, as the OOM killer sends) is started
again by the next job at the same socket, once, under a lock; the jobs after it
run warm again, and the restarted server still exits with the study's process.
(benchmarks/killed_server.py bounds the slowdown of a whole study.)"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from scalestudy.cli import fork_server as warm

from tests.cli.test_fork_server import spec_json


def wait_for(predicate, seconds: float = 60.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (killed, not yet reaped by its parent) counts as gone.
    state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    return state != "Z"


def children_of(pid: int) -> set[int]:
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True,
                         text=True)
    return {int(child) for child in out.stdout.split()}


def server_pid(path: str) -> int:
    return int(Path(f"{path}.pid").read_text())


OWNER = textwrap.dedent("""
    import sys, time
    from scalestudy.cli import fork_server as warm
    warm.start()
    import os
    print(os.environ[warm.SOCKET_ENV], os.environ[warm.OWNER_ENV], flush=True)
    sys.stdin.readline()  # the study runs until the test says stop
""")


@pytest.fixture
def study():
    """A stand-in for the Snakemake process: it starts the server and lives
    until told to stop; the jobs get its environment."""
    env = {k: v for k, v in os.environ.items() if k not in (warm.SOCKET_ENV, warm.OWNER_ENV)}
    owner = subprocess.Popen([sys.executable, "-c", OWNER], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True, env=env)
    path, owner_pid = owner.stdout.readline().split()
    env.update({warm.SOCKET_ENV: path, warm.OWNER_ENV: owner_pid})
    assert wait_for(lambda: Path(f"{path}.pid").exists())
    yield owner, path, env
    if owner.poll() is None:
        owner.stdin.close()
        owner.wait(timeout=30)


def job(env, tmp_path, name: str) -> subprocess.Popen:
    """A quick command (an index of no figures) through the server."""
    return subprocess.Popen([sys.executable, "-m", "scalestudy.cli", "figure-index", "--out",
                             str(tmp_path / name / "index.md"), "--tasks", "listops"],
                            env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def test_a_killed_server_is_restarted_once_by_the_jobs_after_it(study, tmp_path, data_dir):
    owner, path, env = study
    first = server_pid(path)
    os.kill(first, signal.SIGKILL)
    assert wait_for(lambda: not alive(first), 10)
    jobs = [job(env, tmp_path, f"j{i}") for i in range(4)]  # at once: one restarts
    outs = [j.communicate(timeout=120) for j in jobs]
    assert [j.returncode for j in jobs] == [0, 0, 0, 0], outs
    restarts = [err for _, err in outs if "started another" in err]
    assert len(restarts) == 1, outs
    second = server_pid(path)
    assert second != first and alive(second)
    # The next job connects to the restarted server without starting a third.
    later = job(env, tmp_path, "later")
    _, err = later.communicate(timeout=60)
    assert later.returncode == 0 and "started another" not in err
    assert server_pid(path) == second
    # A training job runs warm again: in a child forked by the restarted server.
    training = subprocess.Popen(
        [sys.executable, "-m", "scalestudy.cli", "train", "--spec", spec_json(100_000),
         "--data-dir", str(data_dir), "--run-dir", str(tmp_path / "run")], env=env,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    assert wait_for(lambda: children_of(second), 60)
    training.send_signal(signal.SIGTERM)  # forwarded to the child, which stops
    assert training.wait(timeout=60) != 0
    # The study's process ends: the restarted server ends with it.
    owner.stdin.close()
    owner.wait(timeout=30)
    assert wait_for(lambda: not alive(second), 15)


def test_no_restart_once_the_study_is_gone(study, tmp_path):
    """A job that outlives its study (its owner gone) runs cold and starts nothing."""
    owner, path, env = study
    server = server_pid(path)
    os.kill(server, signal.SIGKILL)
    owner.stdin.close()
    owner.wait(timeout=30)
    late = job(env, tmp_path, "late")
    _, err = late.communicate(timeout=120)
    assert late.returncode == 0, err
    assert "started another" not in err
    assert not Path(f"{path}.pid").exists() or not alive(server_pid(path))
