"""Overrides typed on the command line: Snakemake hands nested --config values
over as strings (YAML's BaseLoader); the study check reads the schema's
integers, numbers, booleans and nulls from them, and still refuses what does
not fit, naming the field."""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from snakemake.utils import update_config

from scalestudy.study import ConfigError, validate

from tests.support import ROOT
from tests.support.studies import DECLARED_STUDY as DEFAULT


def overridden(**values: str) -> dict:
    """The default study with `key=value` overrides as Snakemake's --config
    parses them (each value through YAML's BaseLoader), merged as it merges."""
    config = copy.deepcopy(DEFAULT)
    update_config(config, {key: yaml.load(text, Loader=yaml.BaseLoader)
                           for key, text in values.items()})
    return config


def test_string_scalars_become_the_schema_types():
    config = overridden(
        grid='{"archs": ["transformer"], "seeds": [0, 1]}',
        train='{"max_steps": 12, "val_every": 6, "lr": 1e-3, "grad_clip": 0, "causal": false}',
        pretrain='{"span": 3.0}', trainer='{"devices": 1, "precision": 32}',
        tasks='{"listops": {"n_train": 100}}')
    assert config["grid"]["seeds"] == ["0", "1"]  # what Snakemake hands over
    validate(config)
    assert config["grid"]["seeds"] == [0, 1]
    assert config["grid"]["archs"] == ["transformer"]
    train = config["train"]
    assert (train["max_steps"], train["lr"], train["grad_clip"], train["causal"]) == (
        12, 0.001, 0, False)
    assert type(train["max_steps"]) is int and type(train["lr"]) is float
    assert config["pretrain"]["span"] == 3.0
    assert config["trainer"]["devices"] == 1 and config["trainer"]["precision"] == 32
    assert config["tasks"]["listops"]["n_train"] == 100


def test_null_and_device_strings():
    config = overridden(pretrain='{"span": null}', trainer='{"devices": "0,1"}')
    validate(config)
    assert config["pretrain"]["span"] is None
    assert config["trainer"]["devices"] == "0,1"  # a device list stays a string


@pytest.mark.parametrize(("override", "message"), [
    ('{"seeds": ["x"]}', "grid.seeds[0]: 'x' is not of type 'integer'"),
    ('{"seeds": [-1]}', "grid.seeds[0]: -1 is less than the minimum of 0"),
    ('{"archs": ["transformerx"]}', "grid.archs[0]: 'transformerx' is not one of"),
])
def test_what_does_not_fit_is_still_refused(override, message):
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        validate(overridden(grid=override))


def test_snakemake_accepts_the_override_the_issue_typed(tmp_path):
    """The real command line: a dry run with nested --config overrides."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "SCALESTUDY_WARM": "0"}
    done = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "--quiet", "rules", "--directory", str(ROOT),
         "--config", 'grid={"archs":["transformer"],"seeds":[0]}',
         'train={"max_steps": 20, "val_every": 10}'],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "is not of type" not in done.stdout + done.stderr
    bad = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "--quiet", "rules", "--directory", str(ROOT),
         "--config", 'grid={"seeds":["zero"]}'],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
    assert bad.returncode != 0
    assert "grid.seeds[0]: 'zero' is not of type 'integer'" in bad.stdout + bad.stderr
