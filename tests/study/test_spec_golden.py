"""Every committed study's run and pretraining specs, pinned: a spec's JSON
is a rule param and its hash each run's config_hash, so a change to either
reruns the study's finished runs. The golden file holds, per preset (and the
default study; an overlay over its base) and run directory, the sha256 of the
spec's JSON and its config_hash; regenerate it only for a change meant to rerun
runs:

    python -m tests.study.test_spec_golden > tests/data/spec_hashes.json
"""

import hashlib
import json
import sys
import warnings

import pytest

from scalestudy.study import grid, specs, validate
from scalestudy.study.config import load_study

from tests.support import DATA, ROOT
from tests.support.studies import OVERLAYS

GOLDEN = DATA / "spec_hashes.json"
PRESETS = ["default"] + sorted(p.stem for p in (ROOT / "config/studies").glob("*.yaml"))


def study(*names: str):
    """The config the workflow sees: config/config.yaml, the presets merged
    over it in order as Snakemake merges --configfile files, validated and typed."""
    config = load_study(*(ROOT / f"config/studies/{name}.yaml" for name in names
                          if name != "default"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return validate(config)


def layers(name: str) -> list[str]:
    """The presets a study is run with: an overlay after its base."""
    base = OVERLAYS.get(f"{name}.yaml")
    return [base.removesuffix(".yaml"), name] if base else [name]


def spec_hashes(*names: str) -> dict[str, list[str]]:
    """run directory -> [sha256 of the spec's JSON (16 hex), its config_hash],
    of the study of `names` (one preset, or an overlay after its base)."""
    typed = study(*names)
    out = {}
    for cell in grid.cells(typed.grid):
        out[cell.directory] = _hashes(specs.run_spec(typed, cell), specs.RunSpec)
    for run in grid.pretrain_cells(typed.grid, typed.pretrain.per_seed):
        out[run.directory] = _hashes(specs.pretrain_spec(typed, run), specs.PretrainSpec)
    return out


def _hashes(spec: dict, kind: type) -> list[str]:
    text = specs.as_json(spec)
    return [hashlib.sha256(text.encode()).hexdigest()[:16],
            kind.from_dict(json.loads(text)).config_hash()]


@pytest.mark.parametrize("name", PRESETS)
def test_every_committed_studys_specs_and_hashes_are_unchanged(name):
    golden = json.loads(GOLDEN.read_text())
    assert name in golden, f"no golden specs for preset {name}: regenerate (module docstring)"
    assert spec_hashes(*layers(name)) == golden[name]


if __name__ == "__main__":
    json.dump({name: spec_hashes(*layers(name)) for name in PRESETS}, sys.stdout, indent=0,
              sort_keys=True)
    sys.stdout.write("\n")
