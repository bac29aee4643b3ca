"""Stale Snakemake locks are removed only when their holder is known to be gone."""

import os
import socket
import subprocess

from scalestudy.locks import OWNER, claim, clear_stale


def locked(tmp_path, owner: str | None):
    state = tmp_path / ".snakemake"
    (state / "locks").mkdir(parents=True)
    (state / "locks" / "0.input.lock").write_text("results/x\n")
    if owner is not None:
        (state / OWNER).write_text(owner)
    return state


def dead_pid() -> int:
    done = subprocess.Popen(["true"])
    done.wait()
    return done.pid


def test_the_lock_of_a_killed_run_is_removed(tmp_path):
    state = locked(tmp_path, f"{socket.gethostname()} {dead_pid()}\n")
    assert "removed the lock" in clear_stale(state)
    assert not (state / "locks").exists() and not (state / OWNER).exists()


def test_a_live_holder_keeps_its_lock(tmp_path):
    state = locked(tmp_path, f"{socket.gethostname()} {os.getpid()}\n")
    assert clear_stale(state) is None
    assert (state / "locks" / "0.input.lock").exists()


def test_a_holder_on_another_host_or_unknown_keeps_the_lock(tmp_path):
    state = locked(tmp_path, f"not-{socket.gethostname()} {dead_pid()}\n")
    assert clear_stale(state) is None
    assert (state / "locks" / "0.input.lock").exists()
    (state / OWNER).unlink()
    assert clear_stale(state) is None
    assert (state / "locks" / "0.input.lock").exists()


def test_claim_names_this_process(tmp_path):
    claim(tmp_path / ".snakemake")
    assert (tmp_path / ".snakemake" / OWNER).read_text().split() == [
        socket.gethostname(), str(os.getpid())]
