"""Plugins (scalestudy.plugins, scalestudy.extend, registry.py): a module a
study names, or an installed distribution's entry points, adds architectures,
tasks and priors to the same registries the built-ins are in; the study check
refuses a plugin that breaks the contract before anything runs, naming it and
why; a plugin run's spec states its code, so a changed plugin reruns it."""

from __future__ import annotations

import copy
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from scalestudy import extend, plugins
from scalestudy.architectures import ARCHITECTURES, PLUGIN_STYLES
from scalestudy.registry import PluginError, Registry
from scalestudy.study import ConfigError, grid, specs, validate

from tests.support import ROOT
from tests.support.studies import DECLARED_STUDY, workflow_copy

# A backbone written against scalestudy.extend alone; BREAK says how it breaks
# the contract (None: it keeps it).
BACKBONE = '''
import torch
from torch import nn
from scalestudy.extend import BackboneConfig, BackboneOutput, shape_for

BREAK = {breaks!r}


class Toy(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        table = nn.Embedding(cfg.vocab_size, cfg.width)
        setattr(self, "table" if BREAK == "no_embed" else "embed", table)
        self.mix = nn.Sequential(*(nn.Linear(cfg.width, cfg.width) for _ in range(cfg.depth)))
        if BREAK == "frozen":
            self.requires_grad_(False)

    @staticmethod
    def config_for(size, protocol="default", **common):
        shape = shape_for("xs" if BREAK == "flat" else size, protocol)
        return BackboneConfig.from_shape("{name}", shape, **common)

    def forward(self, tokens, real):
        x = (self.table if BREAK == "no_embed" else self.embed)(tokens)
        if BREAK == "leaks":  # every position reads the sequence's mean, pads too
            x = x + x.mean(1, keepdim=True)
        else:
            x = x * real[..., None]
        hidden = self.mix(x)
        if BREAK == "shape":
            hidden = hidden[..., :-1]
        return BackboneOutput(hidden, real)
'''

REGISTER = '''
from scalestudy import extend
extend.register(extend.architecture("{name}", "{module}_backbone:Toy"))
'''


def write_plugin(root: Path, module: str, name: str, breaks: str | None = None) -> None:
    (root / f"{module}.py").write_text(REGISTER.format(name=name, module=module))
    (root / f"{module}_backbone.py").write_text(BACKBONE.format(breaks=breaks, name=name))


@pytest.fixture
def plugin_dir(tmp_path, monkeypatch):
    """A directory beside the study for plugin modules; the registries and
    sys.modules as they were afterwards."""
    monkeypatch.setenv(plugins.ROOT_ENV, str(tmp_path))
    monkeypatch.delenv(plugins.ENV, raising=False)
    saved = dict(ARCHITECTURES._entries), dict(ARCHITECTURES._sources)
    modules = set(sys.modules)
    yield tmp_path
    ARCHITECTURES._entries, ARCHITECTURES._sources = saved
    for name in set(sys.modules) - modules:  # the plugin modules written here, no other
        if str(tmp_path) in str(getattr(sys.modules[name], "__file__", "") or ""):
            del sys.modules[name]
    if str(tmp_path.resolve()) in sys.path:
        sys.path.remove(str(tmp_path.resolve()))


def study_with(arch: str, module: str) -> dict:
    config = copy.deepcopy(DECLARED_STUDY)
    config["plugins"] = [module]
    config["grid"].update(archs=["transformer", arch], sizes=["xxs", "xs"], priors=["random"],
                          seeds=[0])
    return config


# --------------------------------------------------------------------------- registries

def test_a_plugin_module_joins_the_registry_and_the_schema(plugin_dir):
    write_plugin(plugin_dir, "toy_plugin", "toy")
    assert plugins.load(["toy_plugin"]) == ["toy_plugin"]
    assert ARCHITECTURES.source("toy") == "plugin toy_plugin"
    assert ARCHITECTURES.plugins()["toy"] == "plugin toy_plugin"
    assert os.environ[plugins.ENV] == "toy_plugin"  # for the jobs this process starts
    study = validate(study_with("toy", "toy_plugin"))  # the schema accepts the name
    assert study.plugins == ("toy_plugin",) and "toy" in study.grid.archs


def test_a_plugin_gets_a_colour_and_marker_no_built_in_has(plugin_dir):
    taken = {(a.color, a.marker) for a in ARCHITECTURES.values()}  # an installed plugin's too
    first = extend.architecture("toy_a", "m:A")
    extend.register(first)
    second = extend.architecture("toy_b", "m:B")
    free = [style for style in PLUGIN_STYLES if not {style[0], style[1]} & {x for t in taken
                                                                             for x in t}]
    assert [(first.color, first.marker), (second.color, second.marker)] == free[:2]
    assert not {first.color, second.color} & {c for c, _ in taken}
    assert not {first.marker, second.marker} & {m for _, m in taken}
    assert extend.architecture("toy_c", "m:C", color="#123456", marker="o").style == {
        "color": "#123456", "marker": "o"}


def test_a_name_a_built_in_has_is_refused_naming_both(plugin_dir):
    write_plugin(plugin_dir, "clash_plugin", "s4")
    with pytest.raises(PluginError, match="plugin clash_plugin: arch 's4' is already "
                                          "scalestudy's; give it another name"):
        plugins.load(["clash_plugin"])


def test_a_plugin_that_does_not_import_is_one_error_naming_it(plugin_dir):
    (plugin_dir / "broken_plugin.py").write_text("import no_such_module\n")
    with pytest.raises(PluginError) as err:
        plugins.load(["broken_plugin"])
    message = str(err.value)
    assert message.startswith("plugins: 'broken_plugin' cannot be imported "
                              "(ModuleNotFoundError: No module named 'no_such_module'")
    assert "broken_plugin.py:1" in message and "\n" not in message
    with pytest.raises(PluginError, match="'nowhere' cannot be imported"):
        plugins.load(["nowhere"])


def test_an_entry_point_s_entries_join_on_first_read(tmp_path):
    """An installed distribution (a dist-info on the path) whose entry point is an
    entry: the registry loads it the first time it is read, in any process."""
    dist = tmp_path / "toy_dist-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-dist\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(
        "[scalestudy.architectures]\ntoy = toy_entry:TOY\n")
    (tmp_path / "toy_entry.py").write_text(
        "from scalestudy import extend\nTOY = extend.architecture('toy', 'toy_entry:Toy')\n")
    code = ("from scalestudy.architectures import ARCHITECTURES as A; "
            "print(A.source('toy'), A['toy'].module, 'toy' in list(A))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(tmp_path)}, check=True)
    assert done.stdout.split() == ["toy-dist", "(entry", "point", "toy", "in",
                                   "scalestudy.architectures)", "toy_entry", "True"]
    (tmp_path / "toy_entry.py").write_text("raise RuntimeError('half-written plugin')\n")
    failed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env={**os.environ, "PYTHONPATH": str(tmp_path)})
    assert failed.returncode != 0
    assert ("toy-dist (entry point toy in scalestudy.architectures): cannot be imported: "
            "RuntimeError: half-written plugin") in failed.stderr


def test_a_registry_refuses_an_entry_it_cannot_take():
    registry = Registry("thing", [])
    with pytest.raises(PluginError, match="plugin p: thing 'a' is already plugin q's"):
        registry.register(type("E", (), {"name": "a"})(), "plugin q")
        registry.register(type("E", (), {"name": "a"})(), "plugin p")
    with pytest.raises(PluginError, match="is no architecture, task or prior entry"):
        extend.register(object())


# --------------------------------------------------------------------------- refusals

@pytest.mark.parametrize("breaks, says", [
    ("shape", "returns width 31, not its config's 32"),
    ("frozen", "has no trainable parameter"),
    ("flat", "does not grow along the ladder"),
    ("leaks", "changes its outputs at real tokens when only the padding changes"),
])
def test_a_backbone_that_breaks_the_contract_is_refused_before_any_run(plugin_dir, breaks,
                                                                         says):
    write_plugin(plugin_dir, f"bad_{breaks}", f"bad_{breaks}", breaks)
    plugins.load([f"bad_{breaks}"])
    with pytest.raises(ConfigError) as err:
        validate(study_with(f"bad_{breaks}", f"bad_{breaks}"))
    message = str(err.value)
    assert message.startswith(f"grid.archs: bad_{breaks} (plugin bad_{breaks}): arch "
                              f"bad_{breaks}: ")
    assert says in message and "\n" not in message


@pytest.mark.parametrize("breaks, prior, says", [
    (None, "tfixup", "prior tfixup cannot start a run of arch {name} (ValueError: Toy has no "
                     "module with fixup_weights)"),
    (None, "dtfixup", "prior dtfixup cannot start a run of arch {name} (ValueError: Toy has no "
                      "module with fixup_weights)"),
    ("no_embed", "spt", "prior spt cannot start a run of arch {name} (AttributeError: 'Toy' "
                        "object has no attribute 'embed')"),
])
def test_a_prior_the_backbone_cannot_take_is_refused_before_any_run(plugin_dir, breaks, prior,
                                                                   says):
    name = f"toy_{breaks}_{prior}"
    write_plugin(plugin_dir, name, name, breaks)
    plugins.load([name])
    config = study_with(name, name)
    config["grid"]["priors"] = ["random", prior]
    with pytest.raises(ConfigError) as err:
        validate(config)
    message = str(err.value)
    assert message.startswith(f"grid.archs: {name} (plugin {name}): ")
    assert says.format(name=name) in message and "\n" not in message


def test_a_backbone_with_its_token_table_takes_the_pretraining_priors(plugin_dir):
    write_plugin(plugin_dir, "toy_spt", "toy_spt")
    plugins.load(["toy_spt"])
    config = study_with("toy_spt", "toy_spt")
    config["grid"]["priors"] = ["random", "spt", "upstream"]
    assert "toy_spt" in validate(config).grid.archs


def test_a_task_whose_splits_break_the_contract_is_refused(plugin_dir):
    (plugin_dir / "bad_task.py").write_text(textwrap.dedent('''
        import dataclasses
        import numpy as np
        from scalestudy import extend

        SOURCES, VOCAB_NAME, VOCAB_SIZE = ("made",), extend.BYTES, extend.BYTE_VOCAB

        @dataclasses.dataclass(frozen=True)
        class Config:
            """a task whose labels run past its classes"""
            source: str = extend.option("made", "where the data comes from", enum=["made"])
            seq_len: int = extend.option(8, "tokens per example", minimum=1)

        def build(cfg):
            docs = [extend.byte_ids(b"abcdef")] * 4
            return {s: extend.make_split(docs, [0, 1, 2, 3], cfg.seq_len)
                    for s in ("train", "val", "test")}

        def standin(cfg): return None
        def n_classes(cfg): return 2
        def release_files(cfg): return []
        def release_source(cfg): return None, ""

        import sys
        extend.register(extend.task("bad_task", sys.modules[__name__], Config, 0.15))
    '''))
    from scalestudy.tasks import TASKS

    saved = dict(TASKS._entries), dict(TASKS._sources)
    try:
        plugins.load(["bad_task"])
        config = copy.deepcopy(DECLARED_STUDY)
        config.update(plugins=["bad_task"])
        config["grid"].update(tasks=["bad_task"], priors=["random"], archs=["transformer"])
        with pytest.raises(ConfigError, match=r"grid.tasks: bad_task \(plugin bad_task\): task "
                                              r"bad_task: its train split labels run 0..3"):
            validate(config)
    finally:
        TASKS._entries, TASKS._sources = saved


# --------------------------------------------------------------------------- specs

def test_a_plugin_run_s_spec_states_its_code_and_changes_with_it(plugin_dir):
    write_plugin(plugin_dir, "toy_plugin", "toy")
    plugins.load(["toy_plugin"])
    study = validate(study_with("toy", "toy_plugin"))
    cell = grid.Cell("listops", "toy", "xs", "random", 0)
    made = specs.run_spec(study, cell)
    assert list(made["plugins"]) == ["arch toy"]
    before = specs.RunSpec.from_dict(made).config_hash()
    built_in = specs.run_spec(study, grid.Cell("listops", "transformer", "xs", "random", 0))
    assert "plugins" not in built_in  # the built-ins' specs are as they were
    backbone = plugin_dir / "toy_plugin_backbone.py"
    backbone.write_text(backbone.read_text() + "\n# a change to the backbone\n")
    changed = specs.RunSpec.from_dict(specs.run_spec(study, cell))
    assert changed.plugins != made["plugins"] and changed.config_hash() != before


# --------------------------------------------------------------------------- through the workflow

def test_a_study_with_a_plugin_beside_it_runs_through_the_workflow(tmp_path):
    """A plugin module beside the study (not installed), named in `plugins:`:
    the DAG's parse, the fork server's jobs and the analysis all read it; its
    runs train and its architecture is in the study's fits and figures."""
    work = workflow_copy(tmp_path)
    shutil_profiles(work)
    write_plugin(work, "toy_plugin", "toy")
    (work / "toy.yaml").write_text(textwrap.dedent("""
        study: toy
        plugins: [toy_plugin]
        grid: {tasks: [listops], archs: [transformer, toy], sizes: [xxs, xs, s],
               priors: [random], seeds: [0], per_task: {}, budgets: []}
        tasks: {listops: {n_train: 128, n_val: 32, n_test: 32, max_depth: 4, min_length: 5,
                          max_length: 32}}
        train: {max_steps: 6, batch_size: 16, warmup_steps: 1, val_every: 3}
        fit: {n_boot: 50}
        trainer: {accelerator: cpu}
    """))
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    env.pop(plugins.ENV, None)
    done = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "2", "--configfile",
                           "toy.yaml"], cwd=work, env=env, capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    import pandas as pd

    runs = pd.read_parquet(work / "results/toy/runs.parquet")
    toy = runs[runs["arch"] == "toy"]
    assert len(toy) == 3 and (toy["status"] == "ok").all() and (toy["n_params"] > 0).all()
    fits = pd.read_parquet(work / "results/toy/fits.parquet")
    assert "toy" in set(fits["arch"])
    error_data = pd.read_csv(work / "results/toy/figures/error_vs_compute.csv")
    assert error_data["series"].str.contains("toy").any()


def shutil_profiles(work: Path) -> None:
    import shutil

    shutil.copytree(ROOT / "profiles", work / "profiles")


def test_scalestudy_options_names_a_plugin_s_architecture_and_its_source(plugin_dir):
    write_plugin(plugin_dir, "toy_plugin", "toy")
    plugins.load(["toy_plugin"])
    from scalestudy.study.config import reference

    named = " ".join(line.lstrip("# ") for line in reference().splitlines()[:8])
    assert "toy (plugin toy_plugin)" in named


def test_a_plugin_that_raises_in_a_run_gives_a_failed_record(plugin_dir, data_dir):
    """Its probe passes (eval mode); training raises: the run's record is
    `failed` with the error, as any run's, and the job returns."""
    write_plugin(plugin_dir, "trap_plugin", "trap")
    backbone = plugin_dir / "trap_plugin_backbone.py"
    backbone.write_text(backbone.read_text().replace(
        "        x = (self.table if BREAK == \"no_embed\" else self.embed)(tokens)\n",
        "        x = self.embed(tokens)\n"
        "        if self.training:\n"
        "            raise RuntimeError('the plugin fails in training')\n"))
    plugins.load(["trap_plugin"])
    from scalestudy.training import job

    from tests.support.cells import TASK

    config = study_with("trap", "trap_plugin")
    config["tasks"] = {"listops": TASK}
    config["train"].update(max_steps=2, batch_size=8, warmup_steps=0, val_every=1)
    study = validate(config)
    cell = grid.Cell("listops", "trap", "xxs", "random", 0)
    spec = specs.RunSpec.from_dict(specs.run_spec(study, cell))
    record = job.train(spec, data_dir, plugin_dir / "results/s" / cell.directory)
    assert record["status"] == "failed"
    assert record["error"] == "RuntimeError: the plugin fails in training"


def test_a_plugin_without_memory_constants_is_measured_on_a_probe(plugin_dir):
    from scalestudy.study import costs

    write_plugin(plugin_dir, "toy_plugin", "toy")
    plugins.load(["toy_plugin"])
    assert ARCHITECTURES["toy"].activation_bytes is None
    fp32, bf16 = costs.measured_bytes("toy", "default")
    assert fp32 > 0 and bf16 > 0
    small = costs.gpu_memory("toy", "xs", "default", 8, 64, "32-true")
    large = costs.gpu_memory("toy", "xs", "default", 64, 64, "32-true")
    assert large - small == pytest.approx(56 * 64 * costs.shape_for("xs", "default").depth
                                          * costs.shape_for("xs", "default").width * fp32,
                                          rel=1e-6)
