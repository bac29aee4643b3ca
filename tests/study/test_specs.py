"""A run until its plateau keeps train.decay_fraction in its spec's hash
(its in_spec rule, study/config.py): the plateau's
cooldown is decay_fraction x the steps so far, so another fraction is another
run, under the cosine schedule as under wsd."""

import copy

import pytest

from scalestudy.study import grid, specs
from scalestudy.study.specs import PretrainSpec, RunSpec

from tests.support.studies import DECLARED_STUDY, typed

BASE = {"study": "t", "task": "listops", "arch": "transformer", "size": "xxs",
        "prior": "random", "seed": 0}


def run_hash(**train) -> str:
    return RunSpec.from_dict({**BASE, "train": {"max_steps": 12, **train}}).config_hash()


@pytest.mark.parametrize("schedule", ["cosine", "wsd"])
def test_the_plateau_hash_changes_with_the_decay_fraction(schedule):
    hashes = {run_hash(until="plateau", schedule=schedule, decay_fraction=f)
              for f in (0.1, 0.2, 0.5)}
    assert len(hashes) == 3
    # The default stated or left out: one run.
    assert run_hash(until="plateau", schedule=schedule) == run_hash(
        until="plateau", schedule=schedule, decay_fraction=0.2)


def test_the_fraction_is_in_the_spec_a_study_writes_for_a_run_until_its_plateau():
    """The spec JSON `scalestudy train` reads (specs.run_spec), task run and pretraining."""
    config = copy.deepcopy(DECLARED_STUDY)
    config["train"].update(until="plateau", decay_fraction=0.5)
    config["pretrain"]["until"] = "plateau"  # its cooldown is train's decay_fraction
    cell = grid.Cell("listops", "transformer", "xxs", "random", 0)
    upstream = grid.PretrainCell("upstream", None, "transformer", "xxs")
    run = specs.run_spec(typed(config), cell)
    assert run["train"]["decay_fraction"] == 0.5
    pre = specs.pretrain_spec(typed(config), upstream)
    assert pre["train"]["decay_fraction"] == 0.5
    other = copy.deepcopy(config)
    other["train"]["decay_fraction"] = 0.3  # pretraining takes train's (no key of its own)
    assert (RunSpec.from_dict(run).config_hash()
            != RunSpec.from_dict(specs.run_spec(typed(other), cell)).config_hash())
    assert (PretrainSpec.from_dict(pre).config_hash()
            != PretrainSpec.from_dict(specs.pretrain_spec(typed(other), upstream)).config_hash())


def test_without_the_plateau_or_wsd_the_fraction_is_unread_and_left_out():
    assert run_hash(decay_fraction=0.5) == run_hash() == run_hash(decay_fraction=0.1)
    assert run_hash(until="plateau") != run_hash()
