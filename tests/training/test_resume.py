"""A killed run resumes from its newest checkpoint and ends in the record an
uninterrupted run writes (training/resume.py).

The kills are real signals sent by the run to itself at a chosen step: SIGTERM
and SLURM's USR1 stop at the end of the step and save last.ckpt; SIGKILL
leaves only the last validation's checkpoint (a subprocess, marked slow; the
fast equivalent stops the run with an exception that saves nothing).
"""

import math
import os
import signal
import subprocess
import sys
import textwrap

import pytest
import torch

from scalestudy.study.specs import PretrainSpec, RunSpec
from scalestudy.training import loop, resume
from scalestudy.training.pretrain import run_pretrain
from scalestudy.training.task_run import run

from tests.support import ROOT
from tests.support.cells import TASK

# 8 batches an epoch: the kills at step 10 fall mid-way through the second
# epoch, two steps after the validation (and checkpoint) at step 8.
SCHEDULE = {"max_steps": 12, "batch_size": 8, "warmup_steps": 2, "val_every": 4,
            "protocol": "default", "dropout": 0.1}
KILL_AT = 10
TIMING = {"wall_seconds", "tokens_per_second"}


def train_spec(**train_cfg):
    return RunSpec.from_dict({
        "study": "t", "task": "listops", "arch": "transformer", "size": "xxs",
        "prior": "random", "seed": 7, "task_config": TASK,
        "train": {**SCHEDULE, **train_cfg}, "trainer": {"accelerator": "cpu", "threads": 1},
    })


def pretrain_spec():
    return PretrainSpec.from_dict({
        "study": "t", "kind": "spt", "corpus": "listops", "arch": "transformer",
        "size": "xxs", "seed": 0, "corpus_config": TASK, "train": SCHEDULE,
        "trainer": {"accelerator": "cpu", "threads": 1},
    })


STAGES = {
    "train": lambda data, out: run(train_spec(), data, out),
    "pretrain": lambda data, out: run_pretrain(pretrain_spec(), data, out),
}


@pytest.fixture(scope="module")
def uninterrupted(data_dir, tmp_path_factory):
    return {stage: go(data_dir, tmp_path_factory.mktemp(stage)) for stage, go in STAGES.items()}


class Killed(BaseException):
    """Ends a run where it stands, saving nothing (what SIGKILL leaves)."""


def kill_at(step: int, kill):
    """A `loop.TrainingLoop.after_step` that calls `kill` at the end of `step`."""

    def after_step(fit: loop.TrainingLoop) -> None:
        if fit.step == step:
            kill()

    return after_step


@pytest.fixture
def killed_at(monkeypatch):
    """Make the next run's loop call `kill` at the end of step KILL_AT."""

    def arm(kill):
        monkeypatch.setattr(loop.TrainingLoop, "after_step", kill_at(KILL_AT, kill), raising=True)
        return monkeypatch

    return arm


def comparable(record: dict) -> dict:
    """Every field but the timings, NaN made equal to itself."""
    return {k: ("nan" if isinstance(v, float) and math.isnan(v) else v)
            for k, v in record.items() if k not in TIMING}


def send(signum):
    return lambda: os.kill(os.getpid(), signum)


def _raise_killed():
    raise Killed


KILLS = {"SIGTERM": send(signal.SIGTERM), "USR1": send(signal.SIGUSR1), "crash": _raise_killed}


@pytest.mark.parametrize("stage", STAGES)
@pytest.mark.parametrize("kill", KILLS)
def test_killed_run_resumes_to_the_uninterrupted_record(kill, stage, data_dir, tmp_path,
                                                         uninterrupted, killed_at, capsys):
    out = tmp_path / "run"
    patch = killed_at(KILLS[kill])
    expected_exit = Killed if kill == "crash" else SystemExit
    with pytest.raises(expected_exit) as stopped:
        STAGES[stage](data_dir, out)
    if kill != "crash":
        assert stopped.value.code == resume.PREEMPTED_EXIT
        name = {"USR1": "SIGUSR1"}.get(kill, kill)
        assert f"stopped by {name} at step {KILL_AT}: saved" in capsys.readouterr().out
    assert not (out / "record.parquet").exists()  # a stopped run is not a result
    saved = torch.load(out / resume.CHECKPOINT, weights_only=True)
    # SIGTERM and USR1 save the step under way; a kill leaves the last validation's.
    assert saved["global_step"] == (8 if kill == "crash" else KILL_AT)
    patch.undo()

    before = (out / "metrics.csv").read_text()  # written at the validation of step 8

    resumed = STAGES[stage](data_dir, out)
    assert resumed["steps"] == SCHEDULE["max_steps"]
    assert comparable(resumed) == comparable(uninterrupted[stage])
    # The killed attempt's history is kept beside the resumed one's.
    assert (out / "metrics.attempt1.csv").read_text() == before
    assert (out / "metrics.csv").read_text() != before


def test_checkpoint_of_another_spec_is_not_resumed(data_dir, tmp_path, uninterrupted, killed_at):
    out = tmp_path / "run"
    patch = killed_at(send(signal.SIGTERM))
    with pytest.raises(SystemExit):
        run(train_spec(lr=0.01), data_dir, out)  # another spec left last.ckpt
    patch.undo()
    assert resume.resume_point(out, train_spec().config_hash()) is None
    assert comparable(run(train_spec(), data_dir, out)) == comparable(uninterrupted["train"])


SIGKILLED = """
import os, signal, sys
from scalestudy.training import loop, task_run
sys.path.insert(0, {root!r})
from tests.training.test_resume import KILL_AT, kill_at, train_spec
loop.TrainingLoop.after_step = kill_at(KILL_AT, lambda: os.kill(os.getpid(), signal.SIGKILL))
task_run.run(train_spec(), {data!r}, {out!r})
"""


@pytest.mark.slow
def test_sigkilled_process_resumes_to_the_uninterrupted_record(data_dir, tmp_path, uninterrupted):
    out = tmp_path / "run"
    script = SIGKILLED.format(root=str(ROOT), data=str(data_dir), out=str(out))
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], capture_output=True,
                          text=True, timeout=300, env={**os.environ, "SCALESTUDY_WARM": "0"})
    assert done.returncode == -signal.SIGKILL, done.stderr[-2000:]
    assert not (out / "record.parquet").exists()
    assert torch.load(out / resume.CHECKPOINT, weights_only=True)["global_step"] == 8
    assert comparable(run(train_spec(), data_dir, out)) == comparable(uninterrupted["train"])
