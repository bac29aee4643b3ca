"""One process at a time trains in a run's directory (scalestudy.locks.run_lock)."""

import subprocess
import sys
import textwrap

import pytest

from scalestudy.locks import RunBusy, run_lock
from scalestudy.study import grid, specs
from scalestudy.training.run import execute

from tests.support.studies import DECLARED_STUDY, typed

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


def test_a_refused_run_writes_no_record_and_runs_nothing(held, capsys):
    run_dir, _ = held
    spec = specs.RunSpec.from_dict(specs.run_spec(
        typed(DECLARED_STUDY), grid.Cell("listops", "s4", "xs", "random", 1)))
    ran = []
    with pytest.raises(RunBusy):
        execute(spec, lambda: ran.append(1), run_dir, check=lambda: ran.append(0))
    assert not ran and not (run_dir / "record.parquet").exists()
    assert "another process is training this run" in capsys.readouterr().err


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


@pytest.mark.parametrize("prior", ["random", "upstream"])
def test_a_failed_record_is_named_by_the_spec_s_cell(tmp_path, monkeypatch, prior):
    """A run that raises before it trains records `failed` under its cell's
    identity: a budgeted finetuning run's budget is its cell's (its
    pretraining's), as its record would have had."""
    import copy

    from scalestudy.records import read_records
    from scalestudy.training import job, task_run
    from scalestudy.training import run as executor

    config = copy.deepcopy(DECLARED_STUDY)
    config["grid"]["budgets"] = [1e11, 3e11]
    cell = grid.Cell("listops", "s4", "xs", prior, 1, 1e11)
    spec = specs.RunSpec.from_dict(specs.run_spec(typed(config), cell))
    run_dir = tmp_path / cell.directory

    def broken(*args):
        raise FileNotFoundError("no data")

    monkeypatch.setattr(task_run, "pretraining", lambda spec, pretrained: None)  # checked
    monkeypatch.setattr(executor, "start", broken)
    record = job.train(spec, tmp_path / "data", run_dir)
    assert record["status"] == "failed" and "no data" in record["error"]
    row = read_records(run_dir / "record.parquet").iloc[0]
    assert (row["prior"], row["seed"], row["budget"]) == (prior, 1, 1e11)
