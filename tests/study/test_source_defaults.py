"""Defaults that follow the source: a value the data's source implies (an image
size, a sequence length) defaults to the source's own, so `source: lra` alone
is a study LRA's release can run; an explicit value that contradicts the
source is still refused, naming the field."""

from __future__ import annotations

import copy

import pytest

from scalestudy.study import ConfigError, validate
from scalestudy.study.specs import task_section
from scalestudy.tasks import task_config

from tests.support.studies import DECLARED_STUDY as DEFAULT
from tests.support.studies import typed


@pytest.mark.parametrize(("task", "field", "standin", "lra"), [
    ("image", "image_size", 8, 32),
    ("listops", "max_length", 48, 2000),
    ("text", "seq_len", 512, 4000),
    ("retrieval", "seq_len", 512, 4000),
])
def test_the_default_is_the_sources_own(task, field, standin, lra):
    assert getattr(task_config(task, {}), field) == standin
    assert getattr(task_config(task, {"source": "lra"}), field) == lra
    # The run's spec states the value it gets.
    config = copy.deepcopy(DEFAULT)
    config["grid"]["tasks"] = [task]
    standin_study = typed(config)
    config["tasks"][task]["source"] = "lra"
    assert task_section(typed(config), task)[field] == lra
    assert task_section(standin_study, task)[field] == standin


def test_source_lra_alone_passes_the_study_check():
    """The default study's image section with source lra (the other key
    untouched) validates; the release's presence is a separate check."""
    config = copy.deepcopy(DEFAULT)
    config["grid"].update(tasks=["image"], priors=["random", "spt"])
    config["tasks"]["image"]["source"] = "lra"
    assert task_section(validate(config), "image")["image_size"] == 32


def test_an_explicit_contradiction_is_still_refused():
    config = copy.deepcopy(DEFAULT)
    config["grid"]["tasks"] = ["image"]
    config["tasks"]["image"].update(source="lra", image_size=8)
    with pytest.raises(ConfigError, match=r"tasks.image.image_size: got 8; CIFAR-10 "
                                          r"\(source: lra\) is 32"):
        validate(config)


def test_the_schema_says_whose_default_it_is():
    from scalestudy.study.schema import SCHEMA_PATH, load_schema

    node = load_schema(str(SCHEMA_PATH))["properties"]["tasks"]["properties"]["image"]
    image_size = node["properties"]["image_size"]
    assert image_size["type"] == ["integer", "null"]
    assert "the source's own, digits 8, lra 32" in image_size["description"]
