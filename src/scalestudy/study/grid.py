"""A study's grid: its cells, the pretraining runs they need, and where each
run's directory is.

The one place a cell list is made from: the workflow's targets, the config
checks, the tests and tools/slurm. Paths are relative to the study's results
directory (results/{study}/); the patterns keep Snakemake's wildcard names.

Budgets (grid.budgets, training FLOPs or tokens: train.budget_unit) are a
dimension of the grid when a study states them: each cell is then also of
one budget, and the run it budgets (`budgeted`: the cell's pretraining run
when its prior needs one, where the study measures its upstream loss, else
its task run) trains for the steps the budget buys. Directories get a
b{budget} segment only then, so a study without budgets keeps its paths.
Under train.schedule wsd the budgets of one run (the same cell but for the
budget) share one training: the largest budget is the trunk, every smaller
one a branch that forks from it where its own cooldown starts (`trunk_of`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from ..priors import PRIORS
from ..stages import STAGES, seeded
from .config import GridConfig

RUN_DIR = "runs/{task}/{arch}/{size}/{prior}/s{seed}"


def budgeted(pattern: str, with_budgets: bool) -> str:
    """A run directory pattern with its b{budget} segment after the size (a
    study with budgets), else unchanged."""
    return pattern.replace("{size}", "{size}/b{budget}") if with_budgets else pattern


def budget_label(budget: float) -> str:
    """A budget as its directories and wildcards name it: 1e+15, 3.2e+14, 5000."""
    return f"{float(budget):g}"


def budget_of(grid: GridConfig, label: str | None) -> float | None:
    """The budget a directory label names (None: no budget)."""
    if label is None:
        return None
    for budget in grid.budgets:
        if budget_label(budget) == label:
            return budget
    raise ValueError(f"budget {label!r}: not in grid.budgets "
                     f"({', '.join(map(budget_label, grid.budgets))})")


class Run:
    """What a Cell and a PretrainCell share: a run with a directory under its
    study's results."""

    directory: str

    def study_directory(self, run_dir) -> Path:
        """The study's results directory holding `run_dir`, this run's
        directory. ValueError if `run_dir` is not this run's."""
        run_dir = Path(run_dir)
        suffix = Path(self.directory).parts
        if run_dir.parts[-len(suffix):] != suffix:
            raise ValueError(f"{run_dir}: not the directory of a run {self.directory}")
        return run_dir.parents[len(suffix) - 1]


@dataclass(frozen=True)
class Cell(Run):
    """One training run of the grid."""

    task: str
    arch: str
    size: str
    prior: str
    seed: int
    budget: float | None = None

    @property
    def directory(self) -> str:
        return budgeted(RUN_DIR, self.budget is not None).format(
            **{**vars(self), "budget": _label(self.budget)})

    @property
    def trains_budget(self) -> bool:
        """Whether the cell's budget sets its task run's length (a prior
        without pretraining), rather than its pretraining run's."""
        return self.budget is not None and PRIORS[self.prior].needs is None


def _label(budget: float | None) -> str | None:
    return None if budget is None else budget_label(budget)


@dataclass(frozen=True)
class PretrainCell(Run):
    """One pretraining run: a stage's backbone of an arch x size (x task for a
    stage on the task's own data; None for one on the upstream corpus), of one
    finetuning seed (pretrain.seeds: per_seed) or shared by all (seed None)."""

    stage: str
    task: str | None
    arch: str
    size: str
    seed: int | None = None
    budget: float | None = None

    def __post_init__(self):
        # A stage on the upstream corpus serves every task: its run has none.
        if self.task is not None and not STAGES[self.stage].on_task:
            object.__setattr__(self, "task", None)

    @property
    def trains_budget(self) -> bool:
        """Whether a budget sets this run's length (as a Cell's may)."""
        return self.budget is not None

    @property
    def directory(self) -> str:
        pattern = seeded(budgeted(STAGES[self.stage].directory, self.budget is not None),
                         self.seed is not None)
        return pattern.format(task=self.task, arch=self.arch, size=self.size, seed=self.seed,
                              budget=_label(self.budget))


def cells(grid: GridConfig) -> list[Cell]:
    """Every training run of the grid, task by task."""
    out = []
    every_budget = grid.budgets or [None]
    for task in grid.tasks:
        own = grid.of_task(task)
        out += [Cell(task, arch, size, prior, seed, budget) for arch in own["archs"]
                for size in own["sizes"] for budget in every_budget
                for prior in own["priors"] for seed in own["seeds"]]
    return out


def pretrain_cell(cell: Cell, per_seed: bool = False) -> PretrainCell | None:
    """The pretraining run a cell's prior loads or matches, or None: the one of
    its own seed when `per_seed` (pretrain.seeds: per_seed), else the shared one."""
    stage = PRIORS[cell.prior].needs
    if stage is None:
        return None
    return PretrainCell(stage, cell.task, cell.arch, cell.size, cell.seed if per_seed else None,
                        cell.budget)


def trunk_of(run, grid: GridConfig):
    """Under train.schedule wsd, the run (a Cell or PretrainCell with a
    budget) a budgeted run forks from: the same run at the grid's largest
    budget; None for that trunk itself, and without budgets."""
    if run.budget is None or run.budget == grid.budgets[-1]:
        return None
    return dataclasses.replace(run, budget=grid.budgets[-1])


def trunk_directory(run_dir, own, trunk_budget: float) -> Path:
    """The directory of the trunk of the branch `own` (a Cell or
    PretrainCell) that runs in `run_dir`: the same results directory, at
    `trunk_budget`'s directory. ValueError if `run_dir` is not `own`'s."""
    try:
        study = own.study_directory(run_dir)
    except ValueError as err:
        raise ValueError(f"{err}, so its trunk's cannot be found beside it; give it "
                         f"(--trunk)") from None
    return study / dataclasses.replace(own, budget=trunk_budget).directory


def trunk_beside(run_dir, own, trunk_budget: float | None) -> Path | None:
    """A wsd branch's trunk directory beside its own (`trunk_directory`); None
    for a run that is no branch (`trunk_budget` None), or one whose directory
    is not its cell's (the run then asks for --trunk: training/branches.py)."""
    if trunk_budget is None:
        return None
    try:
        return trunk_directory(run_dir, own, trunk_budget)
    except ValueError:
        return None


def forks_of(run, grid: GridConfig) -> list[float]:
    """The budgets that fork from `run` (a trunk): every smaller budget."""
    every = list(grid.budgets)
    return every[:-1] if run.budget is not None and run.budget == every[-1] else []


def cell_of(run_dir) -> Cell | PretrainCell | None:
    """The run whose directory `run_dir` is (its last parts, under a study's
    results directory): the exact inverse of a Cell's or PretrainCell's
    `directory`; None for a directory outside a study's layout."""
    parts = Path(run_dir).parts
    seed = None
    rest = list(parts)
    if rest and rest[-1][:1] == "s" and rest[-1][1:].isdigit():
        seed = int(rest.pop()[1:])
    candidates = []
    if seed is not None and len(rest) >= 5 and rest[-1] in PRIORS:
        head, budget = _without_budget(rest[:-1])
        if len(head) >= 4 and head[-4] == "runs":
            candidates.append(Cell(head[-3], head[-2], head[-1], rest[-1], seed, budget))
    head, budget = _without_budget(rest)
    for n in (3, 4):  # pretrain/{stage}/{arch}/{size}, pretrain/{stage}/{task}/{arch}/{size}
        if len(head) > n and head[-n - 1] == "pretrain" and head[-n] in STAGES:
            task = head[-3] if n == 4 else None
            candidates.append(PretrainCell(head[-n], task, head[-2], head[-1], seed, budget))
    for run in candidates:
        own = Path(run.directory).parts
        if parts[-len(own):] == own:
            return run
    return None


def _without_budget(parts: list[str]) -> tuple[list[str], float | None]:
    """`parts` without a trailing b{budget} segment, and that budget."""
    if parts and parts[-1][:1] == "b":
        try:
            budget = float(parts[-1][1:])
        except ValueError:
            return parts, None
        if budget_label(budget) == parts[-1][1:]:
            return parts[:-1], budget
    return parts, None


def pretrain_cells(grid: GridConfig, per_seed: bool = False) -> list[PretrainCell]:
    """Every pretraining run the grid needs, once each, in the order of their
    directories."""
    needed = {p for c in cells(grid) if (p := pretrain_cell(c, per_seed)) is not None}
    return sorted(needed, key=lambda p: p.directory)


def stages_needed(grid: GridConfig) -> set[str]:
    """The pretraining stages some prior of the grid needs."""
    every_prior = {p for task in grid.tasks for p in grid.of_task(task)["priors"]}
    return {PRIORS[p].needs for p in every_prior} - {None}
