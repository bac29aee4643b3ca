"""Budgeted runs and wsd branches (training/branches.py): a branch forked from
its trunk ends in the record a separate wsd run of its budget writes, and a
branch killed mid-cooldown resumes to the uninterrupted branch's record."""

import json
import math
import os
import signal
import subprocess
import sys
import textwrap

import pytest
import torch

from scalestudy.records import read_records
from scalestudy.study.specs import RunSpec
from scalestudy.training import loop, modules, resume
from scalestudy.training.branches import fork_name
from scalestudy.training.task_run import run

from tests.support import ROOT
from tests.support.cells import TASK

SCHEDULE = {"max_steps": 99, "batch_size": 8, "warmup_steps": 2, "val_every": 4,
            "protocol": "default", "dropout": 0.1, "schedule": "wsd", "decay_fraction": 0.25,
            "budget_unit": "tokens"}
TRUNK_STEPS, BRANCH_STEPS = 24, 16
FORK = BRANCH_STEPS - round(0.25 * BRANCH_STEPS)  # 12: the branch's cooldown begins
CHAIN = {"fork_step", "fork_seconds", "config_hash", "wall_seconds", "tokens_per_second"}


def seq_len(data_dir) -> int:
    return json.loads((data_dir / "manifest.json").read_text())["seq_len"]


def spec(data_dir, steps: int, **train) -> RunSpec:
    budget = float(steps * SCHEDULE["batch_size"] * seq_len(data_dir))  # tokens
    return RunSpec.from_dict({
        "study": "t", "task": "listops", "arch": "transformer", "size": "xxs",
        "prior": "random", "seed": 3, "task_config": TASK,
        "train": {**SCHEDULE, "budget": budget, **train},
        "trainer": {"accelerator": "cpu", "threads": 1},
    })


def budget(data_dir, steps):
    return spec(data_dir, steps).train.budget


def trunk_spec(data_dir):
    return spec(data_dir, TRUNK_STEPS, forks=[budget(data_dir, BRANCH_STEPS)])


def branch_spec(data_dir):
    return spec(data_dir, BRANCH_STEPS, branch_of=budget(data_dir, TRUNK_STEPS))


def comparable(record: dict, drop=CHAIN) -> dict:
    return {k: ("nan" if isinstance(v, float) and math.isnan(v) else v)
            for k, v in record.items() if k not in drop}


@pytest.fixture(scope="module")
def chain(data_dir, tmp_path_factory):
    """The trunk, its uninterrupted branch and a separate wsd run of the branch's budget."""
    root = tmp_path_factory.mktemp("chain")
    trunk = run(trunk_spec(data_dir), data_dir, root / "trunk")
    branch = run(branch_spec(data_dir), data_dir, root / "branch", trunk=root / "trunk")
    separate = run(spec(data_dir, BRANCH_STEPS), data_dir, root / "separate")
    return {"root": root, "trunk": trunk, "branch": branch, "separate": separate}


def test_a_budget_buys_its_steps_and_the_trunk_saves_the_fork(chain):
    assert chain["trunk"]["steps"] == TRUNK_STEPS and chain["branch"]["steps"] == BRANCH_STEPS
    saved = torch.load(chain["root"] / "trunk" / fork_name(chain["branch"]["budget"]),
                       weights_only=True)
    assert saved["global_step"] == FORK
    # The trunk validated at its budget's last step too (24 is a multiple of 4: and
    # the branch's 16), so each record's loss is its budget's.
    assert chain["trunk"]["fork_step"] is None and chain["branch"]["fork_step"] == FORK
    assert 0 < chain["branch"]["fork_seconds"] < chain["trunk"]["wall_seconds"]


def test_a_branch_is_the_separate_wsd_run_of_its_budget(chain):
    """Step for step: the same weights at the fork, the same cooldown, so the
    same losses, tokens and FLOPs (the chain's, from step 0)."""
    assert comparable(chain["branch"]) == comparable(chain["separate"])
    assert chain["branch"]["train_flops"] == chain["branch"]["flops_per_step"] * BRANCH_STEPS


def test_the_loop_is_built_from_the_steps_the_budget_buys(data_dir, tmp_path, monkeypatch):
    """The run's final train config (its budget's steps, counted on the built
    model) is decided before the loop: the optimiser's schedule is built from
    it, and the model holds no train config that could say otherwise."""
    built = []
    configure = modules.StudyModule.configure_optimizer

    def recorded(module, cfg, scaled=False):
        built.append((module, cfg))
        return configure(module, cfg, scaled)

    monkeypatch.setattr(modules.StudyModule, "configure_optimizer", recorded)
    record = run(spec(data_dir, 6), data_dir, tmp_path / "run")
    [(model, cfg)] = built
    assert record["steps"] == cfg.max_steps == 6 != SCHEDULE["max_steps"]
    assert not hasattr(model, "cfg")


def test_a_branch_without_its_trunks_fork_is_a_clear_error(data_dir, tmp_path):
    record = run(branch_spec(data_dir), data_dir, tmp_path / "b")
    assert record["status"] == "failed" and "needs its trunk's directory" in record["error"]
    record = run(branch_spec(data_dir), data_dir, tmp_path / "b2", trunk=tmp_path / "none")
    assert record["status"] == "failed" and "no fork checkpoint" in record["error"]


class Killed(BaseException):
    """Ends a run where it stands, saving nothing (what SIGKILL leaves)."""


def kill_at(step, kill):
    def after_step(fit):
        if fit.step == step:
            kill()

    return after_step


def _crash():
    raise Killed


@pytest.mark.parametrize("kill", ["crash", "SIGTERM"])
def test_a_branch_killed_mid_cooldown_resumes_to_the_uninterrupted_record(
        kill, chain, data_dir, tmp_path, monkeypatch):
    """A crash (no checkpoint of its own: it starts from the fork again) and a
    SIGTERM (its own last.ckpt, mid-cooldown) both end in the uninterrupted
    branch's record."""
    out = tmp_path / "branch"
    stop = _crash if kill == "crash" else lambda: os.kill(os.getpid(), signal.SIGTERM)
    monkeypatch.setattr(loop.TrainingLoop, "after_step", kill_at(14, stop))
    with pytest.raises(Killed if kill == "crash" else SystemExit):
        run(branch_spec(data_dir), data_dir, out, trunk=chain["root"] / "trunk")
    monkeypatch.undo()
    assert not (out / "record.parquet").exists()
    assert (out / resume.CHECKPOINT).exists() == (kill == "SIGTERM")
    resumed = run(branch_spec(data_dir), data_dir, out, trunk=chain["root"] / "trunk")
    timing = {"wall_seconds", "tokens_per_second"}
    assert comparable(resumed, drop=timing) == comparable(chain["branch"], drop=timing)


SIGKILLED = """
import sys
sys.path.insert(0, {root!r})
from pathlib import Path
from tests.training.test_branches import branch_spec
from scalestudy.training.task_run import run
run(branch_spec(Path({data!r})), Path({data!r}), Path({out!r}), trunk=Path({trunk!r}))
"""


@pytest.mark.slow
def test_a_sigkilled_branch_process_resumes_to_the_uninterrupted_record(chain, data_dir,
                                                                         tmp_path):
    """A real SIGKILL at the `fit` kill point, halfway through the cooldown (step 14)."""
    out = tmp_path / "branch"
    script = SIGKILLED.format(root=str(ROOT), data=str(data_dir), out=str(out),
                              trunk=str(chain["root"] / "trunk"))
    env = {**os.environ, "SCALESTUDY_WARM": "0", "SCALESTUDY_KILL_AT": f"fit@{out}"}
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], capture_output=True,
                          text=True, timeout=300, env=env)
    assert done.returncode == -signal.SIGKILL, done.stderr[-2000:]
    assert not (out / "record.parquet").exists()
    resumed = run(branch_spec(data_dir), data_dir, out, trunk=chain["root"] / "trunk")
    assert comparable(resumed, drop={"wall_seconds", "tokens_per_second"}) == comparable(
        chain["branch"], drop={"wall_seconds", "tokens_per_second"})
    assert read_records(out / "record.parquet").iloc[0]["fork_step"] == FORK
