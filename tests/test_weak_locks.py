"""`held` (src/scalestudy/locks.py), what `scalestudy status` reads a study's
Snakemake by: held while any recorded holder may still
run, not only when every holder does."""

import os
import socket
import subprocess

from scalestudy.locks import HOLDERS, held

HOST = socket.gethostname()


def dead_pid() -> int:
    done = subprocess.Popen(["true"])
    done.wait()
    return done.pid


def state(tmp_path, *holders: str):
    directory = tmp_path / ".snakemake" / HOLDERS
    directory.mkdir(parents=True)
    for holder in holders:
        (directory / holder).touch()
    return tmp_path / ".snakemake"


def test_one_live_holder_of_two_holds_the_study(tmp_path):
    dead, alive = f"{HOST}.{dead_pid()}", f"{HOST}.{os.getpid()}"
    assert held(state(tmp_path / "a", dead, alive))
    assert held(state(tmp_path / "b", alive, dead))


def test_a_holder_on_another_host_beside_a_dead_one_holds_the_study(tmp_path):
    assert held(state(tmp_path, f"{HOST}.{dead_pid()}", f"not-{HOST}.{dead_pid()}"))


def test_only_dead_holders_or_none_hold_nothing(tmp_path):
    assert not held(state(tmp_path / "a", f"{HOST}.{dead_pid()}", f"{HOST}.{dead_pid()}"))
    assert not held(state(tmp_path / "b"))
    assert not held(tmp_path / "none")
    assert held(state(tmp_path / "c", f"{HOST}.{os.getpid()}"))
