"""docs/extending.md's commands are the ones CI runs: the tutorial's bash
block is, line for line, the Makefile's `example` target (which .ci/run
calls), and its example study validates with the example plugin's module
found (its source beside the study, as a user's uninstalled plugin is)."""

from __future__ import annotations

import re

from tests.support import ROOT

DOC = ROOT / "docs" / "extending.md"


def bash_blocks(text: str) -> list[list[str]]:
    return [[line for line in block.splitlines() if line.strip()]
            for block in re.findall(r"```bash\n(.*?)```", text, re.S)]


def make_recipe(target: str) -> list[str]:
    text = (ROOT / "Makefile").read_text()
    recipe = re.search(rf"^{target}:[^\n]*\n((?:\t[^\n]*\n)+)", text, re.M).group(1)
    return [line.strip() for line in recipe.splitlines()]


def test_the_tutorial_s_commands_are_the_ones_ci_runs():
    (tutorial, *_) = bash_blocks(DOC.read_text())
    assert tutorial == make_recipe("example")
    assert "make example" in (ROOT / ".ci" / "run").read_text()


def test_the_example_study_names_the_example_architecture():
    import yaml

    study = yaml.safe_load((ROOT / "examples/hyena/study.yaml").read_text())
    assert study["grid"]["archs"] == ["transformer", "s4", "hyena"]
    assert set(study["grid"]["tasks"]) == {"listops", "files"}
    entry = (ROOT / "examples/hyena/pyproject.toml").read_text()
    assert 'hyena = "scalestudy_hyena:HYENA"' in entry
