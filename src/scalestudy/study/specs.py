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

from ..options import spec_values
from ..priors import PRIORS
from ..stages import STAGES
from ..tasks import stated_options
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
    # from its run directory, the directory of its cell (`placed`).
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
        """This spec with the identity fields of the run its directory is
        (grid.cell_of); itself for a directory outside a study's layout, or
        one of another run."""
        run = grid.cell_of(run_dir)
        if run is None:
            return self
        spec = self.identified(run)
        return spec if spec.cell == run else self

    def identified(self, run):
        """This spec with the identity fields that `run` (its cell) states."""
        return self

    def config_hash(self) -> str:
        spec = dataclasses.asdict(self)
        for name in self.identity_fields:
            del spec[name]
        if not spec["plugins"]:  # the built-ins' specs as they were before plugins
            del spec["plugins"]
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
    # The code of the plugins whose architecture, task or prior the run uses
    # (plugin_code): a changed plugin reruns its runs.
    plugins: dict = field(default_factory=dict)
    # The cell's budget where its pretraining spends it (a prior that
    # pretrains: train.budget is then None, the run keeping train.max_steps).
    pretrain_budget: float | None = None

    identity_fields = ("pretrain_budget",)

    def identified(self, run):
        """A finetuning run's cell budget is its pretraining's (its directory's
        b<budget> segment)."""
        if self.train.budget is not None:
            return self
        return dataclasses.replace(self, pretrain_budget=run.budget)

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
    plugins: dict = field(default_factory=dict)  # as RunSpec's
    # pretrain.seeds: per_seed: the run is its finetuning seed's (`seed`), not
    # shared by every seed (then `seed` is pretrain.seed).
    per_seed: bool = False

    train_section = "pretrain"
    identity_fields = ("per_seed",)

    def identified(self, run):
        """A pretraining run per seed has its seed in its directory; a shared one none."""
        return dataclasses.replace(self, per_seed=run.seed is not None)

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
        return grid.PretrainCell(self.kind, self.corpus, self.arch, self.size,
                                 self.seed if self.per_seed else None, self.train.budget)


def task_section(study: StudyConfig, task: str) -> dict:
    """A task's options as a spec states them: the study's section over the task
    config dataclass's defaults (as JSON values), without the options a spec
    states only away from their default (so adding one reruns nothing)."""
    return stated_options(study.task(task))


def run_spec(study: StudyConfig, cell: grid.Cell) -> dict:
    """The RunSpec of a grid cell, as the JSON-able dict `scalestudy train` reads."""
    train = study.train
    if cell.trains_budget:
        train = budget_fields(study, cell, train)
    return {"study": study.study, "task": cell.task, "arch": cell.arch, "size": cell.size,
            "prior": cell.prior, "seed": cell.seed, "task_config": task_section(study, cell.task),
            "train": spec_values(TrainConfig, dataclasses.asdict(train)),
            "trainer": trainer_section(study, cell.task, cell.size),
            **plugin_code(arch=cell.arch, task=cell.task, prior=cell.prior)}


def plugin_code(arch: str, task: str | None = None, prior: str | None = None) -> dict:
    """{"plugins": {name: code version}} of the plugins whose architecture,
    task or prior a run uses ({} for the built-ins: their specs stay as they
    were): the version of the module that defines it (plugins.code_version)."""
    from ..architectures import ARCHITECTURES
    from ..plugins import code_version
    from ..registry import BUILT_IN
    from ..tasks import TASKS

    code = {}
    if ARCHITECTURES.source(arch) != BUILT_IN:
        code[f"arch {arch}"] = code_version(ARCHITECTURES[arch].module)
    if task is not None and task in TASKS and TASKS.source(task) != BUILT_IN:
        code[f"task {task}"] = code_version(TASKS[task].module.__name__)
    if prior is not None and PRIORS.source(prior) != BUILT_IN:
        code[f"prior {prior}"] = code_version(type(PRIORS[prior]).__module__)
    return {"plugins": code} if code else {}


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


def trainer_section(study: StudyConfig, task: str | None, size: str) -> dict:
    """The trainer section of a run of `task` (None: the upstream corpus) at
    `size`: the study's, with the micro-batch the resources section gives the
    task and size's jobs, if it gives one (what their GPU's memory allows)."""
    trainer = study.trainer
    return spec_values(TrainerConfig, {
        **dataclasses.asdict(trainer),
        "micro_batch": job_setting(study, task, size, "micro_batch", trainer.micro_batch)})


def pretrain_schedule(study: StudyConfig) -> TrainConfig:
    """The train section of a pretraining run: the study's, with the schedule
    keys the pretrain section states (the same backbone, norm and protocol)."""
    return dataclasses.replace(study.train, **study.pretrain.schedule)


def pretrain_spec(study: StudyConfig, run: grid.PretrainCell) -> dict:
    """The PretrainSpec of a pretraining run (a PretrainCell: its seed is its
    finetuning seed's under pretrain.seeds: per_seed, else pretrain.seed
    trains it), as the dict `scalestudy pretrain` reads."""
    entry = STAGES[run.stage]
    if study.pretrain.per_seed and run.seed is None:
        raise ValueError("pretrain.seeds: per_seed: a pretraining run needs its seed")
    train = pretrain_schedule(study)
    if run.budget is not None:
        train = budget_fields(study, run, train)
    return {
        "study": study.study, "kind": run.stage, "corpus": entry.corpus(run.task),
        "corpus_config": (task_section(study, run.task) if entry.on_task
                          else dataclasses.asdict(study.upstream)),
        "arch": run.arch, "size": run.size,
        "seed": run.seed if study.pretrain.per_seed else study.pretrain.seed,
        "span": study.pretrain.span, "train": spec_values(TrainConfig, dataclasses.asdict(train)),
        "trainer": trainer_section(study, run.task, run.size),
        **plugin_code(arch=run.arch, task=run.task),
    }


def as_json(spec: dict) -> str:
    return json.dumps(spec, sort_keys=True)
