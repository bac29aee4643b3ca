"""A preset does not move when the default study does: each one states the
values of config/config.yaml it depends on (its name, every grid key, and each
option config.yaml states that its runs read), so
that changing any value config/config.yaml states changes none of its runs'
specs (their JSON and config_hash, pinned in tests/data/spec_hashes.json)."""

import json

import pytest
import yaml

from scalestudy.study import config as study_config

from tests.study.test_spec_golden import GOLDEN, PRESETS, layers, spec_hashes, study
from tests.support import ROOT

# Another valid value for every value config/config.yaml states but those KEPT.
PERTURBED = {
    "study": "perturbed",
    "grid": {"archs": ["performer", "dconv"], "sizes": ["xxxs", "m"],
             "priors": ["tfixup", "spt"], "tasks": ["text"], "seeds": [3], "per_task": {},
             "budgets": [1.0e+13]},
    "tasks": {"listops": {"n_train": 1000, "n_val": 100, "n_test": 100, "max_args": 6,
                          "min_length": 3, "max_length": 40}},
    "train": {"max_steps": 77, "batch_size": 8, "warmup_steps": 3, "val_every": 11,
              "protocol": "depth"},
    "pretrain": {"max_steps": 55, "batch_size": 8, "warmup_steps": 2, "val_every": 5,
                 "seeds": "shared"},
    "upstream": {"max_train_sequences": 100, "max_val_sequences": 50},
}
# Snakemake merges a mapping key by key, so a task's sub-grid in config.yaml's
# grid.per_task would reach every preset, whatever the preset states: the
# default study keeps it empty.
KEPT = {("grid", "per_task"): {}}


def stated(config: dict) -> dict[tuple, object]:
    """The values a study file states, by path: its name, each key of its
    grid (a list or a mapping is one value), each option of another section
    and of each task."""
    values = {}
    for section, value in config.items():
        if section == "tasks":
            values |= {(section, task, key): v for task, options in value.items()
                       for key, v in options.items()}
        elif isinstance(value, dict):
            values |= {(section, key): v for key, v in value.items()}
        else:
            values[(section,)] = value
    return values


def perturb_the_default(tmp_path, monkeypatch) -> None:
    """Make config/config.yaml with every value it states changed the default study."""
    default = yaml.safe_load((ROOT / "config/config.yaml").read_text())
    assert stated(PERTURBED).keys() == stated(default).keys(), "perturb every stated value"
    changed = stated(PERTURBED)
    for path, value in stated(default).items():
        if path in KEPT:
            assert value == KEPT[path], path
        else:
            assert changed[path] != value, path
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(PERTURBED))
    monkeypatch.setattr(study_config, "DEFAULT_STUDY", path)
    study()  # a valid study itself


@pytest.mark.parametrize("name", [p for p in PRESETS if p != "default"])
def test_a_presets_specs_do_not_change_when_the_default_study_does(name, tmp_path, monkeypatch):
    expected = json.loads(GOLDEN.read_text())[name]
    perturb_the_default(tmp_path, monkeypatch)
    assert spec_hashes(*layers(name)) == expected


def test_a_preset_cannot_empty_a_mapping_the_default_states():
    """Why KEPT: Snakemake's merge of a --configfile, which load_study follows."""
    default = {"grid": {"tasks": ["text"], "per_task": {"text": {"sizes": ["m"]}}}}
    preset = {"grid": {"tasks": ["listops"], "per_task": {}}}
    merged = study_config.merge(default, preset)
    assert merged["grid"] == {"tasks": ["listops"], "per_task": {"text": {"sizes": ["m"]}}}
