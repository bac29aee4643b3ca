"""The specs of a study's runs: everything one training or pretraining run
depends on, built from the study config and the run's cell.

The workflow passes a spec to `scalestudy train|pretrain` as JSON (a rule
param, so that a change to any part of it reruns exactly the runs it
affects), and a run's `config_hash` (its record's, and its checkpoint's) is
the spec's hash. Torch-free: the DAG builds specs without the training code.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

from ..options import spec_values
from ..priors import PRIORS
from ..stages import STAGES
from ..tasks import stated_options, task_config
from . import grid
from .config import StudyConfig, TrainConfig, TrainerConfig, parse
from .resources import device_count, job_setting


def batch_shares(batch_size: int, world: int, micro_batch: int,
                 section: str = "train") -> tuple[int, int, int]:
    """(examples per device, per micro-batch, micro-batches per step) of a
    global batch of `batch_size` over `world` devices; ValueError for a batch
    that does not split evenly."""
    if batch_size % world:
        raise ValueError(
            f"{section}.batch_size: {batch_size} does not split over the run's {world} "
            f"devices (trainer.devices): it is the global batch, each device taking an "
            f"equal share; accepted: a multiple of {world}")
    per_device = batch_size // world
    micro = micro_batch or per_device
    if per_device % micro:
        raise ValueError(
            f"trainer.micro_batch: {micro_batch} does not divide the {per_device} examples "
            f"per device ({section}.batch_size {batch_size} over {world} devices); "
            f"accepted: a divisor of {per_device}, or 0 for all of them")
    return per_device, micro, per_device // micro


class Spec:
    """What RunSpec and PretrainSpec share: parsing from JSON, the hash, and
    the run's identity (`cell`)."""

    train_section = "train"  # the study section its schedule comes from, for errors
    # Fields that say which run this is, not how it trains: never in the hash,
    # nor in the JSON `run_spec` and `pretrain_spec` write (a rule param, which
    # Snakemake reruns a finished job for when it changes); a job reads them
    # from its run directory, which the grid named by the cell (`placed`).
    identity_fields: tuple[str, ...] = ()

    @classmethod
    def from_dict(cls, spec: dict):
        spec = dict(spec)
        spec["train"] = parse(TrainConfig, cls.train_section, spec.get("train", {}))
        spec["trainer"] = parse(TrainerConfig, "trainer", spec.get("trainer", {}))
        made = cls(**spec)
        made.check()
        world = device_count(made.trainer.devices)
        if world:  # "auto" and -1: checked where the run starts (TrainingLoop)
            batch_shares(made.train.batch_size, world, made.trainer.micro_batch,
                         cls.train_section)
        return made

    def check(self) -> None:
        """Raises ValueError for a spec that cannot run."""

    def placed(self, run_dir):
        """This spec with the identity fields its run directory states: the one
        of `identity_choices` whose cell's directory `run_dir` is (under a
        study's results); itself for a run outside a study's layout."""
        parts = Path(run_dir).parts
        for fields in self.identity_choices(parts):
            spec = dataclasses.replace(self, **fields)
            suffix = Path(spec.cell.directory).parts
            if parts[-len(suffix):] == suffix:
                return spec
        return self

    def identity_choices(self, parts: tuple[str, ...]) -> list[dict]:
        """The values the identity fields could take for a run in a directory
        of these parts, most specific first."""
        return [{}]

    def config_hash(self) -> str:
        spec = dataclasses.asdict(self)
        for name in self.identity_fields:
            del spec[name]
        spec["train"] = spec_values(TrainConfig, spec["train"])
        spec["trainer"] = spec_values(TrainerConfig, spec["trainer"])
        text = json.dumps(spec, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class RunSpec(Spec):
    """One task run: a grid cell, its task's data and its schedule."""

    study: str
    task: str
    arch: str
    size: str
    prior: str
    seed: int
    task_config: dict = field(default_factory=dict)
    train: TrainConfig = TrainConfig()
    trainer: TrainerConfig = TrainerConfig()
    # The cell's budget where its pretraining spends it (a prior that
    # pretrains: train.budget is then None, the run keeping train.max_steps).
    pretrain_budget: float | None = None

    identity_fields = ("pretrain_budget",)

    def identity_choices(self, parts: tuple[str, ...]) -> list[dict]:
        """A finetuning run's cell budget is its directory's b<budget> segment."""
        if self.train.budget is not None:
            return [{}]
        labels = [p[1:] for p in parts if p.startswith("b") and _is_budget_label(p[1:])]
        return [*({"pretrain_budget": float(label)} for label in labels), {}]

    @property
    def cell(self) -> grid.Cell:
        """The grid cell this run is (its budget included)."""
        budget = self.train.budget if self.pretrain_budget is None else self.pretrain_budget
        return grid.Cell(self.task, self.arch, self.size, self.prior, self.seed, budget)

    def record_identity(self) -> dict:
        """The fields of its record that name the run: its study and cell, and
        the stage its prior gives a task run (finetune or scratch)."""
        cell = self.cell
        return {"study": self.study, "task": cell.task, "arch": cell.arch, "size": cell.size,
                "prior": cell.prior, "seed": cell.seed, "stage": PRIORS[cell.prior].stage,
                "budget": cell.budget}


@dataclass(frozen=True)
class PretrainSpec(Spec):
    """One pretraining run of a stage (stages.py): a backbone on a corpus."""

    study: str
    kind: str  # the pretraining stage
    corpus: str  # the task (a stage on the task's own data) or "upstream"
    arch: str
    size: str
    seed: int
    corpus_config: dict = field(default_factory=dict)
    span: float | None = None  # mean span length; None = independent tokens
    train: TrainConfig = TrainConfig()
    trainer: TrainerConfig = TrainerConfig()
    # pretrain.seeds: per_seed: the run is its finetuning seed's (`seed`), not
    # shared by every seed (then `seed` is pretrain.seed).
    per_seed: bool = False

    train_section = "pretrain"
    identity_fields = ("per_seed",)

    def identity_choices(self, parts: tuple[str, ...]) -> list[dict]:
        """A pretraining run per seed has its s<seed> segment; a shared one none."""
        return [{"per_seed": True}, {}]

    def check(self) -> None:
        STAGES[self.kind]  # noqa: B018 (a stage of the registry, or UnknownName)
        # A budgeted run validates at its budget's last step too (training/loop.py).
        if self.train.budget is None and self.train.val_every > self.train.max_steps:
            raise ValueError(
                f"pretrain.val_every = {self.train.val_every} exceeds pretrain.max_steps = "
                f"{self.train.max_steps}: no validation, so no best checkpoint"
            )

    @property
    def stage(self):
        return STAGES[self.kind]

    def record_identity(self) -> dict:
        """The fields of its record that name the run: a pretraining record names
        its corpus as its task, its stage as its prior, and the seed it trained
        with (pretrain.seed when shared by every finetuning seed)."""
        return {"study": self.study, "task": self.corpus, "arch": self.arch, "size": self.size,
                "prior": self.kind, "seed": self.seed, "stage": self.kind,
                "budget": self.train.budget}

    @property
    def cell(self) -> grid.PretrainCell:
        """The pretraining run of the grid this is (its seed when per seed, its
        budget)."""
        return grid.PretrainCell(self.kind, self.corpus if self.stage.on_task else None,
                                 self.arch, self.size, self.seed if self.per_seed else None,
                                 self.train.budget)


def _is_budget_label(text: str) -> bool:
    """Whether `text` is a budget as the grid labels it (grid.budget_label)."""
    try:
        return grid.budget_label(float(text)) == text
    except ValueError:
        return False


def task_section(config: dict, task: str) -> dict:
    """A task's options as a spec states them: the study's section over the task
    config dataclass's defaults (as JSON values), without the options a spec
    states only away from their default (so adding one reruns nothing)."""
    cfg = task_config(task, StudyConfig.from_dict(config).tasks.get(task, {}))
    return stated_options(cfg)


def run_spec(config: dict, task: str, arch: str, size: str, prior: str, seed: int,
             budget: float | None = None) -> dict:
    """The RunSpec of a grid cell, as the JSON-able dict `scalestudy train` reads."""
    study = StudyConfig.from_dict(config)
    cell = grid.Cell(task, arch, size, prior, int(seed), budget)
    train = study.train
    if cell.budgets_task_run:
        train = budget_fields(study, cell, train)
    return {"study": study.study, "task": task, "arch": arch, "size": size,
            "prior": prior, "seed": int(seed), "task_config": task_section(config, task),
            "train": spec_values(TrainConfig, dataclasses.asdict(train)),
            "trainer": trainer_section(config, task, size)}


def budget_fields(study: StudyConfig, run, train: TrainConfig) -> TrainConfig:
    """`train` of a budgeted run (a grid Cell or PretrainCell): with its
    budget and unit, and under wsd its place in its trunk's chain (the trunk's
    fork budgets, or the branch's trunk)."""
    fields = {"budget": run.budget, "budget_unit": study.train.budget_unit}
    if train.schedule == "wsd":
        trunk = grid.trunk_of(run, study.grid)
        if trunk is None:
            fields["forks"] = grid.forks_of(run, study.grid)
        else:
            fields["branch_of"] = trunk.budget
    return dataclasses.replace(train, **fields)


def trainer_section(config: dict, task: str | None, size: str) -> dict:
    """The trainer section of a run of `task` (None: the upstream corpus) at
    `size`: the study's, with the micro-batch the resources section gives the
    task and size's jobs, if it gives one (what their GPU's memory allows)."""
    trainer = StudyConfig.from_dict(config).trainer
    return spec_values(TrainerConfig, {
        **dataclasses.asdict(trainer),
        "micro_batch": job_setting(config, task, size, "micro_batch", trainer.micro_batch)})


def pretrain_schedule(study: StudyConfig) -> TrainConfig:
    """The train section of a pretraining run: the study's, with the schedule
    keys the pretrain section states (the same backbone, norm and protocol)."""
    return dataclasses.replace(study.train, **study.pretrain.schedule)


def per_seed(config: dict) -> bool:
    """Whether each finetuning seed has its own pretraining run (pretrain.seeds)."""
    return StudyConfig.from_dict(config).pretrain.per_seed


def pretrain_spec(config: dict, stage: str, task: str | None, arch: str, size: str,
                  seed: int | None = None, budget: float | None = None) -> dict:
    """The PretrainSpec of a stage's run for an arch x size (and task, for a
    stage on the task's own data), as the dict `scalestudy pretrain` reads: of
    finetuning seed `seed` under pretrain.seeds: per_seed, else pretrain.seed's."""
    study = StudyConfig.from_dict(config)
    entry = STAGES[stage]
    seeded = study.pretrain.per_seed
    if seeded and seed is None:
        raise ValueError("pretrain.seeds: per_seed: a pretraining run needs its seed")
    train = pretrain_schedule(study)
    if budget is not None:
        run = grid.PretrainCell(stage, task if entry.on_task else None, arch, size,
                                seed if seeded else None, budget)
        train = budget_fields(study, run, train)
    return {
        "study": study.study, "kind": stage, "corpus": entry.corpus(task),
        "corpus_config": (task_section(config, task) if entry.on_task
                          else dataclasses.asdict(study.upstream)),
        "arch": arch, "size": size, "seed": int(seed) if seeded else study.pretrain.seed,
        "span": study.pretrain.span, "train": spec_values(TrainConfig, dataclasses.asdict(train)),
        "trainer": trainer_section(config, task if entry.on_task else None, size),
    }


def as_json(spec: dict) -> str:
    return json.dumps(spec, sort_keys=True)
