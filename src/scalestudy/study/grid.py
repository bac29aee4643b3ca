"""A study's grid: its cells, the pretraining runs they need, and where each
run's directory is.

The one place a cell list is made from: the workflow's targets, the config
checks, the tests and tools/slurm. Paths are relative to the study's results
directory (results/{study}/); the patterns keep Snakemake's wildcard names.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..priors import PRIORS
from ..stages import STAGES, seeded

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
    stage on the task's own data; None for one on the upstream corpus), of one
    finetuning seed (pretrain.seeds: per_seed) or shared by all (seed None)."""

    stage: str
    task: str | None
    arch: str
    size: str
    seed: int | None = None

    @property
    def directory(self) -> str:
        pattern = seeded(STAGES[self.stage].directory, self.seed is not None)
        return pattern.format(task=self.task, arch=self.arch, size=self.size, seed=self.seed)


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


def pretrain_cell(cell: Cell, per_seed: bool = False) -> PretrainCell | None:
    """The pretraining run a cell's prior loads or matches, or None: the one of
    its own seed when `per_seed` (pretrain.seeds: per_seed), else the shared one."""
    stage = PRIORS[cell.prior].needs
    if stage is None:
        return None
    return PretrainCell(stage, cell.task if STAGES[stage].on_task else None, cell.arch,
                        cell.size, cell.seed if per_seed else None)


def pretrain_cells(grid: dict, per_seed: bool = False) -> list[PretrainCell]:
    """Every pretraining run the grid needs, once each, in the order of their
    directories."""
    needed = {p for c in cells(grid) if (p := pretrain_cell(c, per_seed)) is not None}
    return sorted(needed, key=lambda p: p.directory)


def stages_needed(grid: dict) -> set[str]:
    """The pretraining stages some prior of the grid needs."""
    every_prior = {p for task in grid["tasks"] for p in task_grid(grid, task)["priors"]}
    return {PRIORS[p].needs for p in every_prior} - {None}
