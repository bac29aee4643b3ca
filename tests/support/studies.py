"""The studies the tests start from: the default study's grid with every option at
its declaration, the workflow copied where a test may run it, a Snakemake dry run
of a preset and its job counts, and the jobs a grid should make."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from scalestudy.study.config import DEFAULT_STUDY as DEFAULT_STUDY_FILE
from scalestudy.study.config import StudyConfig, fill_defaults, load_study
from scalestudy.tasks import TASKS

from tests.support import ROOT


def declared_study() -> dict:
    """The default study's name and grid with every option at its declaration
    (config/config.yaml without the options it states, completed by
    fill_defaults): the study the tests change one thing of, so that a test
    reads the declarations, not the default study's choices."""
    stated = yaml.safe_load(DEFAULT_STUDY_FILE.read_text())
    return fill_defaults({"study": stated["study"], "grid": stated["grid"], "tasks": {}})


DECLARED_STUDY = declared_study()
# Long Range Arena's tasks, as the smoke study trains them all: those that read its
# release (source lra), every task but the user's own files.
LRA_TASKS = tuple(name for name, task in TASKS.items() if "lra" in task.module.SOURCES)


def typed(config: dict) -> StudyConfig:
    """A test's study config (a completed dict, as DECLARED_STUDY) typed, as the
    workflow hands it to the package (validation would return the same)."""
    return StudyConfig.from_dict(config)


def workflow_copy(tmp_path: Path) -> Path:
    shutil.copy(ROOT / "Snakefile", tmp_path)
    for name in ("workflow", "config"):
        shutil.copytree(ROOT / name, tmp_path / name)
    return tmp_path


# Presets that run over another (its grid with one thing changed): the
# configfiles given together, the overlay last.
OVERLAYS = {"wsd_check_cosine.yaml": "wsd_check.yaml"}


def dry_run(workdir: Path, study: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    layers = [f"config/studies/{name}" for name in (OVERLAYS.get(study), study) if name]
    return subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "--cores", "2", "--configfile", *layers],
        cwd=workdir, env=env, capture_output=True, text=True, timeout=300,
    )


def job_counts(stdout: str) -> dict[str, int]:
    """The first "Job stats" table of a Snakemake dry run: job name -> count."""
    assert "Job stats:" in stdout, stdout[-2000:]
    counts = {}
    for line in stdout.split("Job stats:", 1)[1].splitlines()[3:]:
        cells = line.split()
        if len(cells) != 2 or not cells[1].isdigit():
            break
        counts[cells[0]] = int(cells[1])
    return counts


def expected_jobs(preset: dict) -> dict[str, int]:
    """The training and pretraining jobs of a study, counted from its grid (the
    preset over the default study; a task's grid.per_task sub-grid replaces the
    grid's values for it): one train job per cell, one pretraining per stage on
    the task's data (spt, spt_causal) x task x arch x size, one per stage on the
    upstream corpus x arch x size; each of those once per finetuning seed with
    pretrain.seeds: per_seed, and once per budget of grid.budgets."""
    from scalestudy.priors import PRIORS
    from scalestudy.stages import STAGES

    default = load_study()  # what Snakemake merges the preset over: config/config.yaml
    grid = {**default["grid"], **preset.get("grid", {})}
    per_seed = {**default["pretrain"], **preset.get("pretrain", {})}["seeds"] == "per_seed"
    budgets = len(grid.get("budgets") or []) or 1
    train = on_task = 0
    upstream = set()
    for task in grid["tasks"]:
        own = (grid.get("per_task") or {}).get(task, {})
        sub = {key: own.get(key, grid[key]) for key in ("archs", "sizes", "priors", "seeds")}
        stages = {PRIORS[prior].needs for prior in sub["priors"]} - {None}
        cells = len(sub["archs"]) * len(sub["sizes"])
        seeds = sub["seeds"] if per_seed else [None]
        train += cells * len(sub["priors"]) * len(sub["seeds"])
        on_task += cells * sum(STAGES[s].on_task for s in stages) * len(seeds)
        upstream |= {(s, arch, size, seed) for s in stages if not STAGES[s].on_task
                     for arch in sub["archs"] for size in sub["sizes"] for seed in seeds}
    return {"train": train * budgets, "pretrain_task": on_task * budgets,
            "pretrain_upstream": len(upstream) * budgets}
