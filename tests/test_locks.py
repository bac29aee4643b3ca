"""Stale Snakemake locks are removed only when every holder is known to be gone."""

import os
import socket
import subprocess

from scalestudy.locks import HOLDERS, claim, clear_stale, held, release

HOST = socket.gethostname()


def locked(tmp_path, *holders: str):
    state = tmp_path / ".snakemake"
    (state / "locks").mkdir(parents=True)
    (state / "locks" / "0.input.lock").write_text("results/x\n")
    for holder in holders:
        (state / HOLDERS).mkdir(exist_ok=True)
        (state / HOLDERS / holder).touch()
    return state


def dead_pid() -> int:
    done = subprocess.Popen(["true"])
    done.wait()
    return done.pid


def test_the_locks_of_a_killed_run_are_removed(tmp_path):
    pid = dead_pid()
    state = locked(tmp_path, f"{HOST}.{pid}")
    assert clear_stale(state) == (
        f"removed the locks left by killed Snakemake runs (pid {pid} on {HOST})")
    assert not (state / "locks").exists() and not (state / HOLDERS).exists()


def test_a_live_holder_keeps_the_locks(tmp_path):
    state = locked(tmp_path, f"{HOST}.{os.getpid()}")
    assert clear_stale(state) is None
    assert (state / "locks" / "0.input.lock").exists()


def test_one_live_holder_beside_a_killed_one_keeps_the_locks(tmp_path):
    """Two Snakemake processes in one directory: the one that was killed left
    its holder file, the one still running holds locks of its own."""
    state = locked(tmp_path, f"{HOST}.{dead_pid()}", f"{HOST}.{os.getpid()}")
    assert clear_stale(state) is None
    assert (state / "locks" / "0.input.lock").exists()
    assert len(list((state / HOLDERS).iterdir())) == 2


def test_a_holder_on_another_host_or_none_recorded_keeps_the_locks(tmp_path):
    state = locked(tmp_path, f"not-{HOST}.{dead_pid()}")
    assert clear_stale(state) is None
    assert (state / "locks" / "0.input.lock").exists()
    for holder in (state / HOLDERS).iterdir():
        holder.unlink()
    assert clear_stale(state) is None
    assert (state / "locks" / "0.input.lock").exists()


def test_claim_names_this_process_and_release_removes_it(tmp_path):
    state = tmp_path / ".snakemake"
    claim(state)
    assert [p.name for p in (state / HOLDERS).iterdir()] == [f"{HOST}.{os.getpid()}"]
    release(state)
    assert not list((state / HOLDERS).iterdir())
    release(state)  # twice (onsuccess after a failed onerror): nothing left to remove


# --------------------------------------------------------------------------- held
# `held` (src/scalestudy/locks.py), what `scalestudy status` reads a study's
# Snakemake by: held while any recorded holder may still
# run, not only when every holder does.


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
