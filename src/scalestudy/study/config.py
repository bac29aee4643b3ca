"""The study config, typed: each section the package reads declared once, as a
dataclass whose fields carry their type, default, description and bounds
(options.option), the way a task's options are (tasks/<task>.py).

From these declarations, and the task registry's (tasks.TASKS), come the
schema's sections (study/schema.py derives them when the schema is loaded),
the values a study does not state (`fill_defaults`, run by validation, so
that the workflow's `config` is the completed one), `reference()`, every
option at its default with its description (`scalestudy options` prints it),
and `StudyConfig`, the typed view the package reads. config/config.yaml
states the default study's name, its grid and the options it chooses
otherwise than these declarations.

TrainConfig and TrainerConfig are also the sections of a run's spec
(study/specs.py), whose JSON is a rule param and whose hash is the run's
config_hash: a field's `in_spec` says when a spec states it. A field left out
of a spec at its default keeps the identities of the runs of every study
that does not use it. Torch-free.
"""

from __future__ import annotations

import dataclasses
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..analysis import X_AXES
from ..analysis.stages import Options as Fitted  # the analysis's defaults, declared there
from ..options import UNLESS_DEFAULT, defaults, option
from ..stages import PRETRAIN_SEEDS
from ..tasks import TASKS, task_config

ROOT = Path(__file__).resolve().parents[3]
DEFAULT_STUDY = ROOT / "config" / "config.yaml"
PRESETS = ROOT / "config" / "studies"


def _decay_fraction_stated(values: dict) -> bool:
    # Read by wsd's cooldown and by a plateau's; a plateau's is stated even at
    # its default, its cooldown making another run than one stopped there.
    if values.get("until") == "plateau":
        return True
    return (values.get("schedule", TrainConfig.schedule) != TrainConfig.schedule
            and values.get("decay_fraction") != TrainConfig.decay_fraction)


def _budget_unit_stated(values: dict) -> bool:
    # Read only with a budget.
    return values.get("budget") is not None and values.get("budget_unit") != TrainConfig.budget_unit


def _never(values: dict) -> bool:
    return False


@dataclass(frozen=True)
class Schedule:
    """The schedule a task run's `train` section and the pretraining stages'
    `pretrain` section each state: declared once, for both."""

    max_steps: int = option(90, """optimiser steps per run (in train, scratch_matched adds
        spt's pretraining compute); a budgeted run (grid.budgets) trains its budget's steps
        instead""", minimum=1)
    until: str = option("max_steps", """max_steps trains every run for max_steps steps;
        plateau stops a run at its validation loss's plateau (the best loss improved by
        under 2% over the last fifth of its steps, judged at every validation from the fifth
        on), max_steps being the cap (src/scalestudy/study/plateau.py). The record's
        stopped_by says which ended it. scratch_matched matches a fixed budget and needs
        max_steps""", enum=["max_steps", "plateau"])
    batch_size: int = option(32, """examples per optimiser step, over every device of the
        run (under ddp each device takes batch_size / devices); the record keeps it and the
        per-device share""", minimum=1)
    lr: float = option(2e-3, "peak learning rate of AdamW", exclusiveMinimum=0)
    warmup_steps: int = option(9, """steps of linear learning-rate warm-up (the Fixup priors
        train without warm-up whatever this says)""", minimum=0)
    val_every: int = option(45, """validate every this many steps, at most max_steps (a
        pretraining stage's best checkpoint is chosen on validation)""", minimum=1)


@dataclass(frozen=True)
class TrainConfig(Schedule):
    """How every grid cell trains (and, with `pretrain`'s schedule, how its
    pretraining stage trains): AdamW, linear warm-up, then cosine decay to
    10% of the peak learning rate (or warmup-stable-decay: schedule)."""

    weight_decay: float = option(0.01, "AdamW weight decay (S4's A and dt have none)",
                                 minimum=0)
    grad_clip: float = option(1.0, "clip the gradient norm to this value; 0 disables clipping",
                              minimum=0)
    dropout: float = option(0.0, "dropout probability in the backbone", minimum=0, maximum=1)
    pooling: str = option("mean", "how the classifier head pools the token states",
                          enum=["mean", "max", "first"])
    norm: str = option("pre", """LayerNorm placement: before each residual branch (pre),
        after it (post), or none; the Fixup priors force none""", enum=["pre", "post", "none"])
    protocol: str = option("depth", """which dimension grows with size (Tay et al. 2022):
        default follows the size ladder, depth and width hold the other one fixed""",
                           enum=["default", "depth", "width"])
    causal: bool = option(False, """causal backbones (not funnel); spt pretrains by
        next-token prediction""")
    schedule: str = option("cosine", """the learning-rate schedule of every run (and of the
        pretraining stages): cosine (linear warm-up, cosine decay to 10% of the peak at the
        last step) or wsd (warmup-stable-decay, Hu et al. 2024: the peak held, then a linear
        cooldown to zero over the last decay_fraction of the steps; with grid.budgets one
        constant-rate run per size serves every budget, each a cooldown branched from
        it)""", enum=["cosine", "wsd"], in_spec=UNLESS_DEFAULT)
    decay_fraction: float = option(0.2, """the length of a cooldown, as a fraction of steps:
        wsd's, over the last decay_fraction of a run's steps; and with until plateau, the
        plateau does not end the run at once but starts a linear cooldown of the learning
        rate to zero over decay_fraction x the steps trained so far (capped at max_steps),
        so that a converged run is an annealed one (Hagele et al. 2024; the record's
        plateau_step and final_lr say where it began and where it ended)""",
                                   exclusiveMinimum=0, maximum=1,
                                   in_spec=_decay_fraction_stated)
    budget_unit: str = option("flops", """what grid.budgets count: training FLOPs (the run's
        counted FLOPs per step, training/flops.py, its record's flops_per_step) or tokens
        (batch_size x seq_len a step)""", enum=["flops", "tokens"],
                              in_spec=_budget_unit_stated)
    # A budget cell's own (grid.budgets, study.specs.budget_fields): its
    # training compute in budget_unit, the run training the steps it buys.
    budget: float | None = option(None, "the run's budget (budget_unit)", per_run=True,
                                  in_spec=UNLESS_DEFAULT)
    # Under wsd one run serves several budgets (training/branches.py): the
    # trunk (the largest budget) saves a checkpoint where each smaller
    # budget's cooldown starts, and a branch starts there.
    forks: tuple = option((), "a trunk's branches' budgets", per_run=True,
                          in_spec=UNLESS_DEFAULT)
    branch_of: float | None = option(None, "a branch's trunk's budget", per_run=True,
                                     in_spec=UNLESS_DEFAULT)


@dataclass(frozen=True)
class TrainerConfig:
    """Lightning's hardware settings, the kernels' numerics and the runs'
    trackers; the same study runs on CPU or GPU"""

    accelerator: str = option("auto", """Lightning's `accelerator` (auto picks a GPU when
        there is one). With the SLURM profile a study says gpu or cpu: auto asks SLURM for
        no GPU and would train on whatever node the job gets""",
                              enum=["auto", "cpu", "gpu", "cuda", "mps"])
    devices: Any = option(1, """Lightning's `devices`, a count or a string such as "auto" or
        "0,1": the devices of one run (on one node). A GPU run's job asks for this many GPUs
        (SLURM, or the workstation's `gpu` resource: workflow/rules/common.smk)""",
                          oneOf=[{"type": "integer", "minimum": 1},
                                 {"type": "string", "pattern": "^(auto|-1|[0-9]+(,[0-9]+)*,?)$"}])
    strategy: str = option("auto", """Lightning's `strategy`: ddp runs one process per
        device, each on its share of every batch (train.batch_size is the global batch,
        split evenly; the record counts the whole run: every device's tokens and FLOPs);
        ddp_find_unused_parameters_true for models with parameters a step may not use
        (switch's experts). Not ddp_spawn: a run's counters live in the process that writes
        the record""", enum=["auto", "ddp", "ddp_find_unused_parameters_true"])
    precision: str = option("auto", """Lightning's `precision`; auto is bf16-mixed on a GPU
        with bf16 support, else 32-true (the record's precision says which ran)""",
                            enum=["auto", "32-true", 32, "16-mixed", "bf16-mixed", "bf16-true",
                                  "64-true"])
    threads: int = option(1, """torch threads per process of a training or pretraining job
        (one process per device under DDP); the job declares threads x trainer.devices to
        Snakemake (so --cores N runs N / that many jobs at a time) and asks SLURM for as
        many CPUs""", minimum=1)
    deterministic: bool = option(True, """torch.use_deterministic_algorithms: true makes a
        CPU run's record bitwise reproducible; false lets a GPU use its fastest kernels
        (cuDNN attention, flash attention's atomic backward). Recorded""")
    matmul_precision: str = option("highest", """torch.set_float32_matmul_precision for
        float32 matmuls, and whether cuDNN convolutions may use TF32: highest (plain
        float32) or high / medium (TF32 on an A100 or H100). Recorded""",
                                   enum=["highest", "high", "medium"])
    micro_batch: int = option(0, """examples per device in one forward and backward; 0 is
        the device's whole share of the batch. A divisor of it accumulates the share's
        gradients over micro-batches: the optimiser step and its batch stay the same, its
        activations shrink. resources.tasks and resources.sizes may give a task's or a
        size's runs their own (what their GPU's memory allows)""", minimum=0)
    # Not in a spec: the trackers reach the jobs by $SCALESTUDY_LOGGERS
    # (trackers.py), so that adding one reruns nothing.
    loggers: tuple = option(("csv",), """where each run's curves go
        (src/scalestudy/trackers.py, docs/trackers.md): csv (metrics.csv in the
        run's directory), tensorboard (event files beside it), mlflow (the study's MLflow
        experiment), wandb (a Weights & Biases run, offline unless WANDB_MODE says
        otherwise); each but csv needs its extra, e.g. pip install 'scalestudy[tensorboard]'.
        Not part of a run's spec: adding one reruns nothing""",
                            minItems=1, uniqueItems=True, items={"$ref": "#/$defs/tracker"},
                            in_spec=_never)


@dataclass(frozen=True)
class PretrainConfig(Schedule):
    """The schedule of the pretraining stages (spt, upstream); the backbone's
    norm, protocol and dropout come from `train`, so finetuning fits it."""

    seed: int = option(0, """the fixed seed of every pretraining stage under seeds: shared
        (a checkpoint is shared by all seeds of the grid)""", minimum=0)
    seeds: str = option("shared", """shared: one pretraining run per cell (seed `seed`),
        shared by every finetuning seed, so the intervals over seeds leave out the
        pretraining's own variance; per_seed: each finetuning seed starts from the
        pretraining run of the same seed (one run per seed), so they include it""",
                        enum=list(PRETRAIN_SEEDS))
    span: float | None = option(None, """mean masked-span length; null masks tokens
        independently""", exclusiveMinimum=1)

    @property
    def per_seed(self) -> bool:
        """Whether each finetuning seed has its own pretraining run."""
        return self.seeds == PRETRAIN_SEEDS[1]

    @property
    def schedule(self) -> dict:
        """The train keys this section states for the pretraining runs."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(Schedule)}


@dataclass(frozen=True)
class UpstreamConfig:
    """the upstream corpus (tasks/upstream.py); the stdlib source needs no download"""

    source: str = option("stdlib", """stdlib: the running Python's standard library
        sources; files: the files matching the glob in path; parquet: the `text` column of
        the Parquet file in path""", enum=["stdlib", "files", "parquet"])
    path: str = option("", """files: a glob (** allowed); parquet: the file; stdlib: a
        directory to walk instead of the running Python's ("" for that one)""")
    seq_len: int = option(48, "tokens (bytes) per pretraining sequence", minimum=2)
    max_train_sequences: int = option(4000, "cap on the training sequences; 0 means no cap",
                                      minimum=0)
    max_val_sequences: int = option(200, """cap on the validation sequences and on the test
        sequences; 0 means no cap""", minimum=0)
    seed: int = option(0, "seed of the order in which documents fill a capped split",
                       minimum=0)


@dataclass(frozen=True)
class FitConfig:
    """how the power laws are fitted (fits.py) and the claims checked"""

    x_axis: str = option(Fitted.x_axis, """the x of every fit: compute (training plus
        pretraining FLOPs), params (non-embedding parameters) or flops_per_token""",
                         enum=list(X_AXES))
    n_boot: int = option(Fitted.n_boot, "bootstrap resamples per fit (and per claim's interval)",
                         minimum=10)
    ci: float = option(Fitted.ci, "coverage of the bootstrap confidence intervals",
                       exclusiveMinimum=0, exclusiveMaximum=1)


@dataclass(frozen=True)
class PlanConfig:
    """what `scalestudy plan` planned this study to decide: a dry run (snakemake -n)
    prints, per claim it lists, the claim's power on the study's grid where below 0.5"""

    claims: list = option([], """the claims (names of claims.md's registry) this study is
        designed to decide""", items={"type": "string"})
    pilot: str = option("", """the run records (a runs.parquet or data/cache/<study>.parquet)
        whose effects and noise plan the claims""")
    noise: float = option(0.0, "the log noise sd of a run the plan states; 0: the pilot's",
                          minimum=0)
    correlation: float = option(-1.0, """the correlation of the architectures' runs of the same
        size and seed the plan states; -1: the pilot's""", minimum=-1, maximum=1)


JOB_SETTINGS = {"type": "object", "additionalProperties": False,
                "properties": {"runtime": {"type": "integer", "minimum": 1},
                               "mem_mb": {"type": "integer", "minimum": 1},
                               "micro_batch": {"type": "integer", "minimum": 1}}}


@dataclass(frozen=True)
class ResourcesConfig:
    """What one training or pretraining job asks a cluster for (profiles/slurm,
    docs/cluster.md); ignored on a workstation. A retry asks for attempt x
    runtime (at most max_runtime) and attempt x mem_mb. A GPU study
    (trainer.accelerator gpu or cuda) asks for trainer.devices GPUs."""

    account: str = option("", """SLURM account; empty means $SCALESTUDY_SLURM_ACCOUNT, else
        the scheduler's choice""")
    partition: str = option("", """SLURM partition; empty means $SCALESTUDY_SLURM_PARTITION,
        else the default partition""")
    gpu_model: str = option("", """a GPU study's GPU type (SLURM --gpus=<model>:<n>); empty
        means any""", pattern="^[A-Za-z0-9_.]*$")
    gpu_mem_gb: float = option(0, """the memory (GB) of one of the study's GPUs: validation
        refuses a GPU study's run whose estimated GPU memory exceeds it
        (scalestudy.study.costs.gpu_memory: bf16 or fp32 weights, AdamW and activations,
        S4's kernel, Performer's features); 0 checks nothing""", minimum=0)
    runtime: int = option(30, "minutes per job on its first attempt", minimum=1)
    max_runtime: int = option(0, """the most minutes any attempt of a job asks for, retries
        included (the partition's time limit: SLURM refuses a job that asks for more); a job
        estimated to need longer runs over several attempts, each resuming where the limit
        stopped the last, and validation warns of it with the attempts it needs; 0 caps
        nothing""", minimum=0)
    mem_mb: int = option(4000, """memory (MB) per device of a run on its first attempt: a
        run on trainer.devices devices asks for that many times it (DDP: each rank's process
        holds the whole splits)""", minimum=1)
    sizes: dict = option({}, """per size name, the runtime and mem_mb of that size's jobs,
        and the micro_batch of its runs (trainer.micro_batch; used everywhere, a workstation
        too)""", propertyNames={"$ref": "#/$defs/size"}, additionalProperties=JOB_SETTINGS)
    tasks: dict = option({}, """per task, the runtime, mem_mb and micro_batch of that task's
        jobs (its training runs and its self-pretraining), and per size of it (sizes),
        replacing the study's and its sizes' (a task at 16,384 tokens needs more than one at
        2,000); validation checks each run's micro-batch against gpu_mem_gb""",
                         propertyNames={"$ref": "#/$defs/task"},
                         additionalProperties={
                             **JOB_SETTINGS, "properties": {
                                 **JOB_SETTINGS["properties"],
                                 "sizes": {"type": "object",
                                           "propertyNames": {"$ref": "#/$defs/size"},
                                           "additionalProperties": JOB_SETTINGS}}})


# The sections declared here, by their key in the study config.
SECTIONS: dict[str, type] = {"train": TrainConfig, "trainer": TrainerConfig,
                             "pretrain": PretrainConfig, "upstream": UpstreamConfig,
                             "fit": FitConfig, "resources": ResourcesConfig,
                             "plan": PlanConfig}


def fill_defaults(config: dict) -> dict:
    """Each declared section of `config`, and each task's section under
    `tasks`, with the options it does not state at their defaults, in place
    (a section that is not a dict is left for the schema to refuse)."""
    _fill(config, {name: defaults(kind) for name, kind in SECTIONS.items()})
    if isinstance(config.setdefault("tasks", {}), dict):
        _fill(config["tasks"], {name: defaults(task.config) for name, task in TASKS.items()})
    return config


def _fill(sections: dict, declared: dict[str, dict]) -> None:
    for name, values in declared.items():
        given = sections.setdefault(name, {})
        if isinstance(given, dict):
            sections[name] = {**values, **given}


def merge(base: dict, over: dict) -> dict:
    """`over` merged into `base` as Snakemake merges a --configfile (dicts key by key)."""
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            merge(base[key], value)
        else:
            base[key] = value
    return base


def load_study(*presets: Path | str) -> dict:
    """The config a workflow over config/config.yaml and `presets` (files, in
    the order of --configfile) sees, its sections completed (fill_defaults)."""
    config = read_yaml(DEFAULT_STUDY)
    for preset in presets:
        merge(config, read_yaml(preset) or {})
    return fill_defaults(config)


def read_yaml(path: Path | str):
    """A YAML file's content; ValueError naming the file where it is missing or
    not YAML (with the line the parser stopped at)."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as err:
        raise ValueError(f"{path}: {err.strerror.lower() if err.strerror else err}") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        raise ValueError(f"{path}: not valid YAML{where}: "
                         f"{getattr(err, 'problem', None) or err}") from None


def parse(kind: type, name: str, given: dict):
    """The section `name` as dataclass `kind`; ValueError naming an unknown key."""
    accepted = [f.name for f in dataclasses.fields(kind) if f.init]
    unknown = set(given) - set(accepted)
    if unknown:
        raise ValueError(f"{name}: unknown keys {sorted(unknown)}, accepted: {sorted(accepted)}")
    # A tuple option arrives as a JSON or YAML list; a tuple keeps the config hashable.
    tuples = {f.name for f in dataclasses.fields(kind) if isinstance(f.default, tuple)}
    return kind(**{k: tuple(v) if k in tuples else v for k, v in given.items()})


GRID_KEYS = ("archs", "sizes", "priors", "seeds")


@dataclass(frozen=True)
class GridConfig:
    """What a study trains (config/schema.yaml says what each key accepts): its
    tasks, and for each the architectures, sizes, priors and seeds it trains
    (the study's, or what its `per_task` sub-grid states instead), at each
    budget (training FLOPs or tokens, smallest first; none without budgets).
    study/grid.py makes its cells."""

    tasks: tuple[str, ...]
    archs: tuple[str, ...]
    sizes: tuple[str, ...]
    priors: tuple[str, ...]
    seeds: tuple[int, ...]
    per_task: dict = field(default_factory=dict)  # task -> {key of GRID_KEYS: tuple}
    budgets: tuple[float, ...] = ()

    def of_task(self, task: str) -> dict[str, tuple]:
        """One task's archs, sizes, priors and seeds."""
        own = self.per_task.get(task, {})
        return {key: own.get(key, getattr(self, key)) for key in GRID_KEYS}


def _grid(grid: dict) -> GridConfig:
    return GridConfig(
        **{key: tuple(grid[key]) for key in ("tasks", *GRID_KEYS)},
        per_task={task: {key: tuple(values) for key, values in own.items()}
                  for task, own in (grid.get("per_task") or {}).items()},
        budgets=tuple(sorted(float(b) for b in grid.get("budgets") or [])))


@dataclass(frozen=True)
class StudyConfig:
    """A study's config, typed: what the package below the workflow reads
    (workflow.prepare makes it once from the validated config). Every section
    is its declaration's dataclass, the grid a GridConfig and the section of
    each task of the grid its task config (tasks/<task>.py)."""

    study: str
    grid: GridConfig
    tasks: dict = field(default_factory=dict)  # a task of the grid -> its config dataclass
    plugins: tuple[str, ...] = ()  # the plugin modules it names (scalestudy.plugins)
    train: TrainConfig = field(default_factory=TrainConfig)
    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    pretrain: PretrainConfig = field(default_factory=PretrainConfig)
    upstream: UpstreamConfig = field(default_factory=UpstreamConfig)
    fit: FitConfig = field(default_factory=FitConfig)
    resources: ResourcesConfig = field(default_factory=ResourcesConfig)
    plan: PlanConfig = field(default_factory=PlanConfig)

    @classmethod
    def from_dict(cls, config: dict) -> StudyConfig:
        """The typed config of a validated study config (the workflow's `config`)."""
        return cls(study=config["study"], grid=_grid(config["grid"]),
                   plugins=tuple(config.get("plugins") or ()),
                   tasks={name: task_config(name, (config.get("tasks") or {}).get(name, {}))
                          for name in config["grid"]["tasks"]},
                   **{name: parse(kind, name, config.get(name, {}))
                      for name, kind in SECTIONS.items()})

    def task(self, name: str):
        """The config of task `name` (its declared defaults where the study
        states none)."""
        return self.tasks[name] if name in self.tasks else task_config(name, {})


TASKS_DOC = """the options of each task's data, declared in src/scalestudy/tasks/<task>.py;
    a study states those it changes, for the tasks of grid.tasks"""


def reference() -> str:
    """Every declared section at its defaults, then every task's options
    (`tasks:`), as YAML, each option's description a comment above it: what
    a study may state."""
    lines = ["", *_named()]
    for name, kind in SECTIONS.items():
        lines += ["", *_comment(kind.__doc__, ""), f"{name}:", *_options(kind, "  ")]
    lines += ["", *_comment(TASKS_DOC, ""), "tasks:"]
    for name, task in TASKS.items():
        lines += [*_comment(task.config.__doc__, "  "), f"  {name}:",
                  *_options(task.config, "    ")]
    return "\n".join(lines[1:]) + "\n"


def _named() -> list[str]:
    """The names a grid may use, each kind's, a plugin's named with its source."""
    from ..architectures import ARCHITECTURES
    from ..priors import PRIORS

    lines = ["# The names grid.archs, grid.tasks and grid.priors accept (a plugin's with",
             "# where it comes from: docs/extending.md):"]
    for key, registry in (("archs", ARCHITECTURES), ("tasks", TASKS), ("priors", PRIORS)):
        plugins = registry.plugins()
        names = [f"{n} ({plugins[n]})" if n in plugins else n for n in registry]
        lines += _comment(f"{key}: {', '.join(names)}", "")
    return lines


def _options(kind: type, indent: str) -> list[str]:
    """The options of dataclass `kind` at their defaults, each under its description."""
    lines = []
    given = defaults(kind)
    for f in dataclasses.fields(kind):
        if f.name in given:
            value = yaml.safe_dump({f.name: given[f.name]}, default_flow_style=True,
                                   width=1000).strip()[1:-1]  # without the outer {}
            lines += [*_comment(f.metadata["doc"], indent), f"{indent}{value}"]
    return lines


def _comment(text: str, indent: str) -> list[str]:
    return textwrap.wrap(" ".join(text.split()), 88, initial_indent=indent + "# ",
                         subsequent_indent=indent + "# ")
