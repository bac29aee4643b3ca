"""A study's grid: its cells, the pretraining runs they need, and where each
run's directory is.

The one place a cell list is made from: the workflow's targets, the config
checks, the tests and tools/slurm. Paths are relative to the study's results
directory (results/{study}/); the patterns keep Snakemake's wildcard names.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..priors import PRIORS
from ..stages import STAGES

GRID_KEYS = ("archs", "sizes", "priors", "seeds")
RUN_DIR = "runs/{task}/{arch}/{size}/{prior}/s{seed}"


@dataclass(frozen=True)
class Cell:
    """One training run of the grid."""

    task: str
    arch: str
    size: str
    prior: str
    seed: int

    @property
    def directory(self) -> str:
        return RUN_DIR.format(**vars(self))


@dataclass(frozen=True)
class PretrainCell:
    """One pretraining run: a stage's backbone of an arch x size (x task for a
    stage on the task's own data; None for one on the upstream corpus)."""

    stage: str
    task: str | None
    arch: str
    size: str

    @property
    def directory(self) -> str:
        return STAGES[self.stage].directory.format(task=self.task, arch=self.arch,
                                                   size=self.size)


def task_grid(grid: dict, task: str) -> dict[str, list]:
    """One task's grid (archs, sizes, priors, seeds): the study's, or what its
    grid.per_task sub-grid states instead."""
    own = (grid.get("per_task") or {}).get(task, {})
    return {key: own.get(key, grid[key]) for key in GRID_KEYS}


def cells(grid: dict) -> list[Cell]:
    """Every training run of the grid, task by task."""
    out = []
    for task in grid["tasks"]:
        own = task_grid(grid, task)
        out += [Cell(task, arch, size, prior, seed) for arch in own["archs"]
                for size in own["sizes"] for prior in own["priors"] for seed in own["seeds"]]
    return out


def pretrain_cell(cell: Cell) -> PretrainCell | None:
    """The pretraining run a cell's prior loads or matches, or None."""
    stage = PRIORS[cell.prior].needs
    if stage is None:
        return None
    return PretrainCell(stage, cell.task if STAGES[stage].on_task else None, cell.arch,
                        cell.size)


def pretrain_cells(grid: dict) -> list[PretrainCell]:
    """Every pretraining run the grid needs, once each, in the order of their
    directories."""
    needed = {p for p in map(pretrain_cell, cells(grid)) if p is not None}
    return sorted(needed, key=lambda p: p.directory)


def stages_needed(grid: dict) -> set[str]:
    """The pretraining stages some prior of the grid needs."""
    every_prior = {p for task in grid["tasks"] for p in task_grid(grid, task)["priors"]}
    return {PRIORS[p].needs for p in every_prior} - {None}
