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
import math
from dataclasses import dataclass, field
from typing import Any

from ..stages import PRETRAIN_SEEDS, STAGES
from ..tasks import task_config
from . import grid
from .resources import device_count, job_setting


@dataclass(frozen=True)
class TrainConfig:
    """The `train` section of a study; the defaults are the default study's
    (config/config.yaml, which a test keeps them equal to)."""

    max_steps: int = 90
    batch_size: int = 32
    lr: float = 2e-3
    weight_decay: float = 0.01
    warmup_steps: int = 9
    val_every: int = 45
    grad_clip: float = 1.0
    dropout: float = 0.0
    pooling: str = "mean"
    norm: str = "pre"
    protocol: str = "depth"  # which dimension grows with size: default, depth, width
    causal: bool = False  # causal backbones; spt then pretrains by next-token prediction
    # "max_steps" trains max_steps steps; "plateau" ends earlier: the
    # validation loss's plateau (training.plateau) starts a cooldown of
    # decay_fraction x the steps so far, so that a converged run is annealed;
    # max_steps stays the cap.
    until: str = "max_steps"
    # The learning-rate schedule (training/schedules.py): cosine, or wsd
    # (warmup-stable-decay, the cooldown over the last decay_fraction of the steps).
    schedule: str = "cosine"
    decay_fraction: float = 0.2
    # A budget cell (grid.budgets): its training compute in budget_unit (flops
    # or tokens); the run trains the steps it buys, max_steps being then unused.
    budget: float | None = None
    budget_unit: str = "flops"
    # Under wsd, one run serves several budgets (training/branches.py): the
    # trunk (the largest budget) saves a checkpoint where each smaller budget's
    # cooldown starts (`forks`), and a branch (`branch_of`: its trunk's budget)
    # starts there.
    forks: tuple = ()
    branch_of: float | None = None


# Fields added after the committed studies' records were made: at these
# values a spec leaves them out (its JSON and its hash), so that a study
# without budgets or wsd keeps the specs, hashes and records it had.
LATER_DEFAULTS = {"schedule": "cosine", "decay_fraction": 0.2, "budget": None,
                  "budget_unit": "flops", "forks": (), "branch_of": None}


def without_later_defaults(train: dict) -> dict:
    """A train section without the LATER_DEFAULTS fields at their defaults
    (decay_fraction and budget_unit without wsd, a plateau or budgets, which
    alone read them). A run until its plateau keeps decay_fraction: its
    cooldown makes it another run than one stopped at its plateau."""
    plateau = train.get("until") == "plateau"  # its cooldown reads decay_fraction
    out = {k: v for k, v in train.items()
           if not (k in LATER_DEFAULTS and _same(v, LATER_DEFAULTS[k])
                   and not (plateau and k == "decay_fraction"))}
    if out.get("schedule", "cosine") == "cosine" and not plateau:
        out.pop("decay_fraction", None)
    if out.get("budget") is None:
        out.pop("budget_unit", None)
    return out


def _same(value, default) -> bool:
    if isinstance(default, tuple):
        return tuple(value or ()) == default
    return value == default


@dataclass(frozen=True)
class TrainerConfig:
    accelerator: str = "auto"
    devices: Any = 1
    # Lightning's strategy: "ddp" runs one process per device, train.batch_size
    # split over them (the record counts every device's steps, tokens and
    # FLOPs: the whole run).
    strategy: str = "auto"
    # "auto": bf16-mixed on a GPU that has bf16, else 32-true (the record says
    # which ran).
    precision: str = "auto"
    # Torch intra-op threads of each of a run's processes (one per device under
    # DDP); 0 keeps torch's default. The job asks for threads x devices CPUs,
    # so that parallel jobs do not oversubscribe.
    threads: int = 0
    # torch.use_deterministic_algorithms: a CPU record is then bitwise
    # reproducible; off, a GPU may pick its fastest kernels (cuDNN attention,
    # flash attention's atomic backward).
    deterministic: bool = True
    # torch.set_float32_matmul_precision for float32 matmuls, and whether cuDNN
    # convolutions may use TF32: "highest" neither, "high" or "medium" both.
    matmul_precision: str = "highest"
    # Examples per device in one forward and backward; 0: the device's whole
    # share of the batch. Smaller, the share's gradients accumulate over
    # micro-batches and the optimiser step (and its batch) stays the same.
    micro_batch: int = 0


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


TRAIN_FIELDS = tuple(f.name for f in dataclasses.fields(TrainConfig))


def parse_section(kind: type, name: str, given: dict):
    accepted = {f.name for f in dataclasses.fields(kind)}
    unknown = set(given) - accepted
    if unknown:
        raise ValueError(f"{name}: unknown keys {sorted(unknown)}, accepted: {sorted(accepted)}")
    return kind(**given)


class Spec:
    """What RunSpec and PretrainSpec share: parsing from JSON, the hash, and
    the run's identity (`cell`)."""

    train_section = "train"  # the study section its schedule comes from, for errors
    # Fields that say which run this is, not how it trains: left out of the
    # hash (and of the specs `run_spec` and `pretrain_spec` write, at their
    # defaults), so that the hashes of the runs made before them stay.
    identity_fields: tuple[str, ...] = ()

    @classmethod
    def from_dict(cls, spec: dict):
        spec = dict(spec)
        train = dict(spec.get("train", {}))
        if "forks" in train:  # a JSON list; a tuple keeps the config hashable
            train["forks"] = tuple(train["forks"])
        spec["train"] = parse_section(TrainConfig, cls.train_section, train)
        spec["trainer"] = parse_section(TrainerConfig, "trainer", spec.get("trainer", {}))
        made = cls(**spec)
        made.check()
        world = device_count(made.trainer.devices)
        if world:  # "auto" and -1: checked where the run starts (TrainingLoop)
            batch_shares(made.train.batch_size, world, made.trainer.micro_batch,
                         cls.train_section)
        return made

    def check(self) -> None:
        """Raises ValueError for a spec that cannot run."""

    def config_hash(self) -> str:
        spec = dataclasses.asdict(self)
        for name in self.identity_fields:
            del spec[name]
        spec["train"] = without_later_defaults(spec["train"])
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

    @property
    def cell(self) -> grid.Cell:
        """The grid cell this run is (its budget included)."""
        budget = self.train.budget if self.pretrain_budget is None else self.pretrain_budget
        return grid.Cell(self.task, self.arch, self.size, self.prior, self.seed, budget)


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

    @property
    def cell(self) -> grid.PretrainCell:
        """The pretraining run of the grid this is (its seed when per seed, its
        budget)."""
        return grid.PretrainCell(self.kind, self.corpus if self.stage.on_task else None,
                                 self.arch, self.size, self.seed if self.per_seed else None,
                                 self.train.budget)


def hardware(config: dict) -> dict:
    """The trainer section a spec holds: without trainer.loggers, which reach
    the jobs by $SCALESTUDY_LOGGERS (training/trackers.py), so that adding a
    tracker changes no spec and reruns nothing."""
    return {k: v for k, v in config["trainer"].items() if k != "loggers"}


def task_section(config: dict, task: str) -> dict:
    """A task's options, every one stated: the study's section over the task
    config dataclass's defaults (as JSON values)."""
    cfg = task_config(task, config["tasks"].get(task, {}))
    return json.loads(json.dumps(dataclasses.asdict(cfg)))


def run_spec(config: dict, task: str, arch: str, size: str, prior: str, seed: int,
             budget: float | None = None) -> dict:
    """The RunSpec of a grid cell, as the JSON-able dict `scalestudy train` reads."""
    cell = grid.Cell(task, arch, size, prior, int(seed), budget)
    train = dict(config["train"])
    if cell.budgets_task_run:
        train.update(budget_fields(config, cell, train))
    spec = {"study": config["study"], "task": task, "arch": arch, "size": size,
            "prior": prior, "seed": int(seed), "task_config": task_section(config, task),
            "train": without_later_defaults(train),
            "trainer": trainer_section(config, task, size)}
    if budget is not None and not cell.budgets_task_run:
        spec["pretrain_budget"] = budget
    return spec


def budget_fields(config: dict, run, schedule: dict) -> dict:
    """The train keys of a budgeted run (a grid Cell or PretrainCell): its
    budget and unit, and under wsd its place in its trunk's chain (the trunk's
    fork budgets, or the branch's trunk)."""
    fields = {"budget": run.budget, "budget_unit": config["train"]["budget_unit"]}
    if schedule.get("schedule") == "wsd":
        trunk = grid.trunk_of(run, config["grid"])
        if trunk is None:
            fields["forks"] = grid.forks_of(run, config["grid"])
        else:
            fields["branch_of"] = trunk.budget
    return fields


def budget_steps(cfg: TrainConfig, flops_per_step: float, seq_len: int) -> int:
    """The optimiser steps a budgeted run trains: ceil(budget / what a step
    costs), its counted FLOPs (budget_unit flops) or batch_size x seq_len
    tokens (tokens, padding included: the step's capacity)."""
    per_step = flops_per_step if cfg.budget_unit == "flops" else cfg.batch_size * seq_len
    return max(1, math.ceil(cfg.budget / per_step))


def trainer_section(config: dict, task: str | None, size: str) -> dict:
    """The trainer section of a run of `task` (None: the upstream corpus) at
    `size`: the study's, with the micro-batch the resources section gives the
    task and size's jobs, if it gives one (what their GPU's memory allows)."""
    trainer = hardware(config)
    return {**trainer, "micro_batch": job_setting(config, task, size, "micro_batch",
                                                  trainer["micro_batch"])}


def pretrain_schedule(config: dict) -> dict:
    """The train section of a pretraining run: the study's, with the schedule
    keys the pretrain section states (the same backbone, norm and protocol)."""
    pretrain = config["pretrain"]
    return without_later_defaults(
        {**config["train"], **{k: v for k, v in pretrain.items() if k in TRAIN_FIELDS}})


def per_seed(config: dict) -> bool:
    """Whether each finetuning seed has its own pretraining run (pretrain.seeds)."""
    return config["pretrain"].get("seeds", PRETRAIN_SEEDS[0]) == PRETRAIN_SEEDS[1]


def pretrain_spec(config: dict, stage: str, task: str | None, arch: str, size: str,
                  seed: int | None = None, budget: float | None = None) -> dict:
    """The PretrainSpec of a stage's run for an arch x size (and task, for a
    stage on the task's own data), as the dict `scalestudy pretrain` reads: of
    finetuning seed `seed` under pretrain.seeds: per_seed, else pretrain.seed's."""
    entry = STAGES[stage]
    pretrain = config["pretrain"]
    if per_seed(config) and seed is None:
        raise ValueError("pretrain.seeds: per_seed: a pretraining run needs its seed")
    train = pretrain_schedule(config)
    if budget is not None:
        run = grid.PretrainCell(stage, task if entry.on_task else None, arch, size,
                                seed if per_seed(config) else None, budget)
        train = {**train, **budget_fields(config, run, {"schedule": "cosine", **train})}
    spec = {
        "study": config["study"], "kind": stage, "corpus": entry.corpus(task),
        "corpus_config": task_section(config, task) if entry.on_task else config["upstream"],
        "arch": arch, "size": size, "seed": int(seed) if per_seed(config) else pretrain["seed"],
        "span": pretrain["span"], "train": without_later_defaults(train),
        "trainer": trainer_section(config, task if entry.on_task else None, size),
    }
    if per_seed(config):
        spec["per_seed"] = True
    return spec


def as_json(spec: dict) -> str:
    return json.dumps(spec, sort_keys=True)
