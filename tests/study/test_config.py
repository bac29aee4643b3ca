"""The study config's declared sections (study/config.py): each option's
default, schema and typed field come from one declaration; validation
completes a study's config with the defaults it does not state; whether a
run's spec states a field is the field's own rule."""

import copy
import dataclasses
import re

import pytest
import yaml

from scalestudy.options import defaults, spec_values
from scalestudy.study import ConfigError, grid, specs, validate
from scalestudy.study.config import (
    SECTIONS,
    StudyConfig,
    TrainConfig,
    TrainerConfig,
    fill_defaults,
    load_study,
    reference,
)
from scalestudy.study.schema import SCHEMA_PATH, load_schema
from scalestudy.tasks import TASKS

from tests.support.studies import DECLARED_STUDY, typed

SCHEMA = load_schema(str(SCHEMA_PATH))


def test_a_study_states_only_what_it_changes_and_gets_the_rest_declared():
    config = fill_defaults({"study": "t", "train": {"lr": 0.1}, "trainer": {"threads": 4}})
    assert config["train"] == {**defaults(TrainConfig), "lr": 0.1}
    assert config["trainer"] == {**defaults(TrainerConfig), "threads": 4}
    for name, kind in SECTIONS.items():
        if name not in ("train", "trainer"):
            assert config[name] == defaults(kind), name
    assert config["tasks"] == {name: defaults(task.config) for name, task in TASKS.items()}


def test_a_study_states_only_the_task_options_it_changes():
    config = fill_defaults({"study": "t", "tasks": {"image": {"source": "lra"}}})
    assert config["tasks"]["image"] == {**defaults(TASKS["image"].config), "source": "lra"}
    assert config["tasks"]["text"] == defaults(TASKS["text"].config)


def test_the_workflow_config_is_completed_in_place_by_validation():
    """Snakemake merges a preset's sections key by key over config/config.yaml,
    which states no declared section: validation fills the rest in `config`
    itself, which the workflow then reads."""
    config = yaml.safe_load(open(SCHEMA_PATH.parents[1] / "config" / "config.yaml"))
    config["train"] = {"max_steps": 12, "val_every": 6}
    validate(config)
    assert config["train"] == {**defaults(TrainConfig), "max_steps": 12, "val_every": 6}
    assert config["resources"]["mem_mb"] == 4000


def test_each_schema_section_is_made_from_its_declaration():
    for name, kind in SECTIONS.items():
        node = SCHEMA["properties"][name]
        assert node["additionalProperties"] is False
        for f in dataclasses.fields(kind):
            if f.metadata.get("per_run"):  # a run's own, not the study's
                assert f.name not in node["properties"]
                continue
            assert node["properties"][f.name]["description"] == f.metadata["doc"]
    assert SCHEMA["properties"]["train"]["properties"]["schedule"]["enum"] == ["cosine", "wsd"]
    # a registry's names, filled in when the schema is loaded
    assert "csv" in SCHEMA["properties"]["trainer"]["properties"]["loggers"]["items"]["enum"]


@pytest.mark.parametrize(("section", "key", "value", "says"), [
    ("train", "schedule", "linear", "accepted values: cosine, wsd"),
    ("pretrain", "seeds", "each", "accepted values: shared, per_seed"),
    ("fit", "ci", 1.5, "coverage of the bootstrap"),
    ("resources", "budget", 1, "accepted keys: account, partition"),
])
def test_bad_input_gets_one_error_naming_the_field_and_what_it_accepts(section, key, value, says):
    config = load_study()
    config[section][key] = value
    with pytest.raises(ConfigError, match=rf"^{section}(\.{key})?: .*{says}"):
        validate(config)


def test_the_typed_config_reads_every_section():
    study = StudyConfig.from_dict(load_study())
    # The default study's choices (config/config.yaml), then the declarations.
    assert isinstance(study.train, TrainConfig) and study.train.max_steps == 150
    assert study.pretrain.per_seed is True
    study = StudyConfig.from_dict(DECLARED_STUDY)
    assert study.train.max_steps == 90
    assert study.trainer.loggers == ("csv",)
    assert study.pretrain.per_seed is False
    assert study.pretrain.schedule == {"max_steps": 90, "until": "max_steps", "batch_size": 32,
                                       "lr": 0.002, "warmup_steps": 9, "val_every": 45}
    assert study.resources.sizes == {} and study.fit.n_boot == 1000
    with pytest.raises(ValueError, match=r"^upstream: unknown keys \['glob'\], accepted: "):
        StudyConfig.from_dict({**load_study(), "upstream": {"glob": "*.py"}})


def test_a_spec_leaves_out_a_field_where_its_rule_says():
    """At their defaults the schedule and a budget's fields are left out (a
    study that does not use them keeps its runs' identities); the trackers
    never reach a spec (adding one reruns nothing)."""
    config = load_study()
    cell = grid.Cell("listops", "transformer", "xxs", "random", 0)
    spec = specs.run_spec(typed(config), cell)
    assert not {"schedule", "decay_fraction", "budget", "budget_unit", "forks",
                "branch_of"} & set(spec["train"])
    assert "loggers" not in spec["trainer"]
    tracked = copy.deepcopy(config)
    tracked["trainer"]["loggers"] = ["csv", "tensorboard"]
    assert specs.run_spec(typed(tracked), cell) == spec
    wsd = spec_values(TrainConfig, {**config["train"], "schedule": "wsd", "decay_fraction": 0.3})
    assert (wsd["schedule"], wsd["decay_fraction"]) == ("wsd", 0.3)
    budgeted = spec_values(TrainConfig, dataclasses.asdict(
        TrainConfig(budget=1e12, budget_unit="tokens", forks=(1e11,))))
    assert (budgeted["budget"], budgeted["budget_unit"], budgeted["forks"]) == (
        1e12, "tokens", (1e11,))


def test_budget_unit_stated_without_budgets_changes_no_run():
    """train.budget_unit says what grid.budgets count. A study without budgets that
    states it is accepted, and none of its runs reads it: every spec (hence every
    config_hash and record) is the one without it. With budgets, a budgeted
    run's spec states it away from its default (flops) only."""
    plain = copy.deepcopy(DECLARED_STUDY)
    tokens = copy.deepcopy(DECLARED_STUDY)
    tokens["train"]["budget_unit"] = "tokens"
    validate(tokens)
    assert tokens["train"]["budget_unit"] == "tokens" and not tokens["grid"]["budgets"]
    with_unit, without = typed(tokens), typed(plain)
    for c in grid.cells(without.grid):
        assert specs.run_spec(with_unit, c) == specs.run_spec(without, c), c
    for p in grid.pretrain_cells(without.grid):
        assert specs.pretrain_spec(with_unit, p) == specs.pretrain_spec(without, p), p
    for config, stated in ((tokens, True), (plain, False)):
        budgeted = copy.deepcopy(config)
        budgeted["grid"]["budgets"] = [1e11, 3e11]
        budgeted = typed(budgeted)
        scratch = specs.run_spec(budgeted, grid.Cell("listops", "s4", "xs", "random", 0,
                                                     3e11))["train"]
        pre = specs.pretrain_spec(budgeted, grid.PretrainCell("upstream", None, "s4", "xs",
                                                              None, 1e11))["train"]
        for train in (scratch, pre):
            assert ("budget_unit" in train) == stated
            assert train.get("budget_unit", "flops") == config["train"]["budget_unit"]


def test_the_reference_states_every_option_at_its_default():
    stated = yaml.safe_load(reference())
    assert stated == {**{name: defaults(kind) for name, kind in SECTIONS.items()},
                      "tasks": {name: defaults(task.config) for name, task in TASKS.items()}}


@pytest.mark.parametrize("section, stated, says", [
    ("train", {"warmup_steps": 500}, "train.warmup_steps: 500 is not below train.max_steps 12: "
                                     "the learning rate would never reach its peak; accepted: "
                                     "0 to 11"),
    ("train", {"val_every": 100}, "train.val_every: 100 exceeds train.max_steps 12: the run "
                                  "would validate only at its end; accepted: 1 to 12"),
    ("pretrain", {"warmup_steps": 12}, "pretrain.warmup_steps: 12 is not below "
                                       "pretrain.max_steps 12"),
])
def test_a_schedule_the_run_would_silently_break_is_refused(section, stated, says):
    config = copy.deepcopy(DECLARED_STUDY)
    config["grid"]["priors"] = ["random", "spt"]
    config[section] = {"max_steps": 12, "val_every": 6, "warmup_steps": 2, **stated}
    with pytest.raises(ConfigError, match=re.escape(says)):
        validate(config)


def test_a_broken_or_missing_preset_is_named(tmp_path):
    from scalestudy.study.config import load_study

    broken = tmp_path / "broken.yaml"
    broken.write_text("study: x\ngrid: [\n")
    with pytest.raises(ValueError, match=re.escape(f"{broken}: not valid YAML (line 3")):
        load_study(broken)
    with pytest.raises(ValueError, match=re.escape(f"{tmp_path / 'gone.yaml'}: no such file")):
        load_study(tmp_path / "gone.yaml")
