"""Every study preset validates and builds its DAG (snakemake dry run in a
fresh directory, so results already on disk do not hide the grid)."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
STUDIES = sorted((ROOT / "config/studies").glob("*.yaml"))


@pytest.mark.parametrize("study", STUDIES, ids=lambda p: p.stem)
def test_study_preset_validates_and_builds_its_dag(study, tmp_path):
    shutil.copy(ROOT / "Snakefile", tmp_path)
    for name in ("workflow", "config"):
        shutil.copytree(ROOT / name, tmp_path / name)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "--cores", "2", "--configfile",
         f"config/studies/{study.name}"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "train" in done.stdout and "total" in done.stdout
