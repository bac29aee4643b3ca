"""One process at a time trains in a run's directory (scalestudy.locks.run_lock)."""

import subprocess
import sys
import textwrap

import pytest

from scalestudy.locks import RunBusy, run_lock
from scalestudy.training.job import run_recorded

HOLD = textwrap.dedent("""
    import sys, time
    from scalestudy.locks import run_lock
    with run_lock(sys.argv[1]):
        print("holding", flush=True)
        time.sleep(60)
""")


@pytest.fixture
def held(tmp_path):
    """A run directory whose lock another live process holds."""
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path / "run")],
                              stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "holding"
    yield tmp_path / "run", holder
    holder.kill()
    holder.wait()


def test_a_second_process_is_refused(held):
    run_dir, _ = held
    with pytest.raises(RunBusy) as busy, run_lock(run_dir):
        pass
    assert busy.value.code == 1
    assert busy.value.message.startswith(f"{run_dir}: another process is training this run")


def test_a_refused_run_writes_no_record_and_runs_nothing(held):
    run_dir, _ = held
    ran = []
    with pytest.raises(RunBusy):
        run_recorded(lambda: ran.append(1), {}, run_dir / "record.parquet")
    assert not ran and not (run_dir / "record.parquet").exists()


def test_the_lock_is_free_once_its_holder_ends(held):
    run_dir, holder = held
    holder.kill()
    holder.wait()
    with run_lock(run_dir):
        assert list(run_dir.iterdir()) == []  # the directory itself is locked: no lock file


def test_the_other_ranks_of_a_run_share_the_launching_ranks_lock(held, monkeypatch):
    run_dir, _ = held
    monkeypatch.setenv("LOCAL_RANK", "1")
    with run_lock(run_dir):
        pass  # a DDP rank started by the run that holds the lock
