"""pretrain.seeds: with `shared` every finetuning seed of a
cell starts from one pretraining run (pretrain.seed); with `per_seed` each
starts from the pretraining run of its own seed, in its own directory, and the
DAG wires each train job to it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from scalestudy.study import grid, specs

from tests.support.studies import DECLARED_STUDY as DEFAULT
from tests.support.studies import typed, workflow_copy

GRID_SECTION = {**DEFAULT["grid"], "archs": ["transformer"], "sizes": ["xxs"],
                "priors": ["random", "spt", "upstream", "scratch_matched"], "seeds": [0, 1, 2]}
GRID = typed({**DEFAULT, "grid": GRID_SECTION}).grid


def test_shared_pretraining_is_one_run_per_cell_per_seed_one_each():
    shared = grid.pretrain_cells(GRID)
    assert [p.directory for p in shared] == ["pretrain/spt/listops/transformer/xxs",
                                             "pretrain/upstream/transformer/xxs"]
    per_seed = grid.pretrain_cells(GRID, per_seed=True)
    assert [p.directory for p in per_seed] == [
        f"pretrain/{stage}/{where}xxs/s{seed}" for stage, where in
        (("spt", "listops/transformer/"), ("upstream", "transformer/")) for seed in (0, 1, 2)]


@pytest.mark.parametrize("prior", ["spt", "upstream", "scratch_matched"])
def test_each_finetuning_seed_gets_the_pretraining_run_of_its_seed(prior):
    for seed in (0, 1, 2):
        cell = grid.Cell("listops", "transformer", "xxs", prior, seed)
        assert grid.pretrain_cell(cell).seed is None  # shared
        assert grid.pretrain_cell(cell).directory.endswith("/xxs")
        own = grid.pretrain_cell(cell, per_seed=True)
        assert own.seed == seed and own.directory.endswith(f"/xxs/s{seed}")


def test_the_pretraining_spec_has_the_seed_it_is_run_for():
    config = {**DEFAULT, "pretrain": {**DEFAULT["pretrain"], "seed": 7}}
    spt = grid.PretrainCell("spt", "listops", "transformer", "xxs")
    assert specs.pretrain_spec(typed(config), spt)["seed"] == 7
    per_seed = typed({**config, "pretrain": {**config["pretrain"], "seeds": "per_seed"}})
    assert specs.pretrain_spec(per_seed, grid.PretrainCell("spt", "listops", "transformer",
                                                           "xxs", 2))["seed"] == 2
    with pytest.raises(ValueError, match="per_seed: a pretraining run needs its seed"):
        specs.pretrain_spec(per_seed, spt)
    # Two seeds' specs differ, so each run has its own config hash.
    a, b = (specs.pretrain_spec(per_seed, grid.PretrainCell("upstream", None, "transformer",
                                                            "xxs", s)) for s in (0, 1))
    assert a != b and {k: v for k, v in a.items() if k != "seed"} == {
        k: v for k, v in b.items() if k != "seed"}


def test_the_dag_gives_each_seed_its_own_pretraining_run(tmp_path):
    """A dry run of a per-seed study: every train job of seed k reads the
    pretraining directory s{k} of its stage, and every pretraining job runs with
    seed k."""
    workdir = workflow_copy(tmp_path)
    study = {"study": "perseed", "grid": {"archs": ["transformer"], "sizes": ["xxs"],
                                          "priors": ["spt", "upstream"], "seeds": [0, 1]},
             "pretrain": {"seeds": "per_seed"}}
    (workdir / "config/studies/perseed.yaml").write_text(yaml.safe_dump(study))
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run([sys.executable, "-m", "snakemake", "-n", "-p", "--cores", "2",
                           "--configfile", "config/studies/perseed.yaml"], cwd=workdir,
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    trains = re.findall(r"scalestudy train .*?--run-dir '?(\S+?)'? +--pretrained '?(\S+?)'?\s",
                        done.stdout)
    assert len(trains) == 4, done.stdout[-3000:]
    for run_dir, pretrained in trains:
        seed = re.search(r"/s(\d)$", run_dir).group(1)
        assert pretrained.endswith(f"/xxs/s{seed}"), (run_dir, pretrained)
    pretrain_seeds = re.findall(r'\\"seed\\": (\d)|"seed": (\d)', done.stdout)
    assert {a or b for a, b in pretrain_seeds} == {"0", "1"}


@pytest.mark.parametrize("seeds", ["shared", "per_seed"])
def test_a_pretraining_spec_is_the_run_of_its_cell_shared_or_per_seed(seeds):
    """spec.cell, the one identity the commands and the trackers use, is the
    pretraining run the DAG made the spec for, once placed in the directory
    the grid names for it; `per_seed`, which says so, is in neither the JSON
    (a rule param) nor the hash."""
    config = typed({**DEFAULT, "grid": GRID_SECTION,
                    "pretrain": {**DEFAULT["pretrain"], "seeds": seeds}})
    for cell in grid.pretrain_cells(GRID, per_seed=seeds == "per_seed"):
        made = specs.pretrain_spec(config, cell)
        assert "per_seed" not in made
        spec = specs.PretrainSpec.from_dict(made)
        placed = spec.placed(f"results/study/{cell.directory}")
        assert placed.cell == cell
        assert placed.per_seed == (seeds == "per_seed")
        assert placed.config_hash() == spec.config_hash()
        assert spec.placed("elsewhere/run") == spec  # outside a study: as given
