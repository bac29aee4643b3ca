"""docs/extending.md's commands pass as written: the architecture tutorial's
bash block is, line for line, the Makefile's `example` target (which .ci/run
runs), and the data tutorial's study file and commands run here, in a copy
of the workflow."""

from __future__ import annotations

import re
from pathlib import Path

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


def test_the_data_tutorial_runs_as_written(tmp_path):
    import os
    import subprocess
    import sys

    from tests.support.studies import workflow_copy

    text = DOC.read_text()
    study = re.search(r"```yaml\n# my_data.yaml\n(.*?)```", text, re.S).group(1)
    work = workflow_copy(tmp_path)
    (work / "tests" / "data").mkdir(parents=True)
    subprocess.run(["cp", "-r", str(ROOT / "tests/data/files"), str(work / "tests/data")],
                   check=True)
    (work / "my_data.yaml").write_text(study)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    commands = bash_blocks(text)[1]
    for command in commands:
        done = subprocess.run(command, shell=True, cwd=work, env=env, capture_output=True,
                              text=True, timeout=900)
        assert done.returncode == 0, (command, done.stderr[-2000:])
    assert "study my_data" in done.stdout and "failed" in done.stdout  # the status table
    import pandas as pd

    runs = pd.read_parquet(work / "results/my_data/runs.parquet")
    assert set(runs.loc[runs["stage"] != "spt", "arch"]) == {"transformer", "s4", "lconv"}
    assert (runs["status"] == "ok").all()
