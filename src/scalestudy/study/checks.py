"""A study's configuration, checked before any job runs.

`validate(config)` is what the workflow calls (workflow/rules/common.smk) right
after Snakemake has merged a preset over config/config.yaml. It raises one
`ConfigError` naming the field, what it got and what it accepts, or returns:
then every job's spec parses. It checks, in order:

- the JSON schema (config/schema.yaml, completed from the registries and the
  declared sections: study/schema.py): types, ranges, accepted names, no
  unknown or missing key, grids neither empty nor with a value twice; the
  strings Snakemake's --config passes are first read as the integers,
  numbers, booleans and nulls the schema types, and the options the study
  does not state filled in at their defaults (study/config.py);
- what a schema cannot say: a grid.per_task sub-grid outside the grid, a
  causal backbone without a causal mode, a task option its config dataclass
  refuses (e.g. a ListOps length window with no length in it), a pretraining
  stage that never validates (so has no best checkpoint), a task longer than
  the upstream backbone it finetunes;
- grid.budgets: runs of a fixed length (until: max_steps), each budgeted run
  buying more steps than its warm-up (`costs.check_budgets`, estimated);
- that train.batch_size (and pretrain.batch_size) splits evenly over the
  run's devices and into its micro-batches (`specs.batch_shares`);
- on a cluster (`cluster`; the workflow checks it at onstart, where Snakemake
  knows its executor), an accelerator named: `auto` asks SLURM for no GPU and
  trains on whatever node the job lands on;
- for a GPU study with `resources.gpu_mem_gb`, that every run's estimated GPU
  memory fits in it (`costs.gpu_memory`), run by run;
- with `resources.max_runtime`, the jobs whose first attempt it caps: not
  refused, a ConfigWarning naming them (`check_runtimes`);
- that each tracker of trainer.loggers is installed (else the extra to install);
- when `memory_bytes` is given, that the largest size's estimated training
  memory fits in it (`costs.training_memory`).

Torch-free and quick: the workflow runs it on every invocation, dry runs too.
"""

from __future__ import annotations

import math
import os
import warnings
from pathlib import Path

from ..architectures import ARCHITECTURES
from ..ladder import SIZES
from ..priors import PRIORS
from ..registry import BUILT_IN
from ..stages import STAGES
from ..tasks import TASKS
from ..tasks.contract import check_splits
from ..trackers import require as require_trackers
from .config import GridConfig, StudyConfig, fill_defaults
from .costs import VOCAB_BOUND, check_budgets, gpu_memory, training_memory
from .grid import cells, pretrain_cells, stages_needed
from .plateau import PLATEAU_MIN_VALIDATIONS
from .resources import device_count, gpu_study, local_gpus, runtime
from .schema import SCHEMA_PATH, ConfigError, ConfigWarning, check_schema, coerce_config
from .specs import batch_shares, trainer_section

GIB = 2**30


def check_per_task(grid: GridConfig) -> None:
    """A sub-grid is of a task of the grid, and takes values of the grid's."""
    stray = sorted(set(grid.per_task) - set(grid.tasks))
    if stray:
        raise ConfigError(f"grid.per_task: {', '.join(stray)} not in grid.tasks "
                          f"({list(grid.tasks)}); accepted: tasks of the grid")
    for task, own in grid.per_task.items():
        for key, values in own.items():
            outside = [v for v in values if v not in getattr(grid, key)]
            if outside:
                raise ConfigError(f"grid.per_task.{task}.{key}: {outside} not in grid.{key} "
                                  f"({list(getattr(grid, key))}); a task's sub-grid takes "
                                  f"values of the grid")


def typed(config: dict) -> StudyConfig:
    """The typed config of a schema-valid study config; a task option its config
    dataclass refuses (tasks/<task>.py) as a ConfigError."""
    try:
        return StudyConfig.from_dict(config)
    except (TypeError, ValueError) as err:
        raise ConfigError(str(err)) from None


def check_semantics(study: StudyConfig) -> None:
    """The checks a JSON schema cannot express (the config already typed)."""
    grid, train, pretrain = study.grid, study.train, study.pretrain
    check_per_task(grid)
    forced = ([f"prior {p}" for p in grid.priors if PRIORS[p].causal]
              + [f"pretraining stage {s}" for s in sorted(stages_needed(grid))
                 if STAGES[s].causal])
    if train.causal or forced:
        no_causal = [arch for arch in grid.archs if not ARCHITECTURES[arch].causal]
        why = "train.causal: true" if train.causal else forced[0]
        if no_causal:
            raise ConfigError(
                f"grid.archs: {', '.join(no_causal)} has no causal mode ({why}); "
                f"drop it from the grid, or set train.causal: false and drop causal priors"
            )
    every_prior = {p for task in grid.tasks for p in grid.of_task(task)["priors"]}
    stages = stages_needed(grid)
    if grid.budgets:
        for section, schedule in (("train", train), ("pretrain", pretrain)):
            if schedule.until != "max_steps":
                raise ConfigError(
                    f"{section}.until: {schedule.until!r} with grid.budgets: a "
                    f"budgeted run trains the steps its budget buys, its schedule ending "
                    f"there; accepted with budgets: max_steps")
    for prior in sorted(every_prior):
        try:
            PRIORS[prior].check_until(train.until)
        except ValueError as err:
            raise ConfigError(str(err)) from None
    for section, schedule in (("train", train), ("pretrain", pretrain if stages else None)):
        if schedule and schedule.until == "plateau" and (
                schedule.max_steps < PLATEAU_MIN_VALIDATIONS * schedule.val_every):
            raise ConfigError(
                f"{section}.max_steps: {schedule.max_steps} leaves under "
                f"{PLATEAU_MIN_VALIDATIONS} validations ({section}.val_every "
                f"{schedule.val_every}) to find a plateau in ({section}.until: plateau); "
                f"accepted: at least {PLATEAU_MIN_VALIDATIONS * schedule.val_every}"
            )
    if stages and not grid.budgets and pretrain.val_every > pretrain.max_steps:
        raise ConfigError(
            f"pretrain.val_every: {pretrain.val_every} exceeds pretrain.max_steps "
            f"{pretrain.max_steps}: no validation, so no best checkpoint; accepted: "
            f"1 to pretrain.max_steps"
        )
    refused = check_budgets(study)
    if refused:
        raise ConfigError(refused)
    seq_len = study.upstream.seq_len
    for task in grid.tasks:
        cfg = study.task(task)
        upstream_stages = {PRIORS[p].pretrain for p in grid.of_task(task)["priors"]} - {None}
        if any(not STAGES[s].on_task for s in upstream_stages) and cfg.seq_len > seq_len:
            raise ConfigError(
                f"tasks.{task}: its length {cfg.seq_len} exceeds upstream.seq_len {seq_len}, "
                f"the length of the upstream backbone the upstream prior finetunes; "
                f"accepted: at most upstream.seq_len"
            )


def check_schedules(study: StudyConfig) -> None:
    """A schedule a run would follow to the letter and still not mean: a warm-up
    as long as the run (the learning rate never reaches its peak), or a
    validation interval longer than the run (no validation on the way: its
    curve is one point). A budgeted run's steps come from its budget
    (costs.check_budgets judges its warm-up)."""
    if study.grid.budgets:
        return
    sections = [("train", study.train)]
    if stages_needed(study.grid):
        sections.append(("pretrain", study.pretrain))
    for section, schedule in sections:
        if schedule.warmup_steps >= schedule.max_steps:
            raise ConfigError(
                f"{section}.warmup_steps: {schedule.warmup_steps} is not below "
                f"{section}.max_steps {schedule.max_steps}: the learning rate would never "
                f"reach its peak; accepted: 0 to {schedule.max_steps - 1}")
    schedule = study.train
    if schedule.val_every > schedule.max_steps:
        raise ConfigError(
            f"train.val_every: {schedule.val_every} exceeds train.max_steps "
            f"{schedule.max_steps}: the run would validate only at its end; accepted: 1 to "
            f"{schedule.max_steps}")


def check_plugins(study: StudyConfig) -> None:
    """What the study's plugins bring to its grid, tried before any job: each
    plugin task's splits against the data contract (tasks/contract.py), each
    plugin architecture built at each size of the grid on a probe batch of
    each task's vocabulary and length (models/contract.py; imports torch, so
    only for a grid that has one). The built-ins are checked by the tests."""
    archs = [a for a in study.grid.archs if ARCHITECTURES.source(a) != BUILT_IN]
    tasks = [t for t in study.grid.tasks if TASKS.source(t) != BUILT_IN]
    for task in tasks:
        entry, cfg = TASKS[task], study.task(task)
        try:
            splits = entry.module.build(cfg)
            check_splits(task, splits, entry.module.VOCAB_SIZE, entry.module.n_classes(cfg),
                         pair=entry.documents == 2)
        except Exception as err:
            raise ConfigError(f"grid.tasks: {task} ({TASKS.source(task)}): {err}") from None
    if not archs:
        return
    from ..models.contract import check_backbone
    from ..priors.contract import check_prior

    for task in study.grid.tasks:
        cell = study.grid.of_task(task)
        vocab, seq_len = TASKS[task].module.VOCAB_SIZE, study.task(task).seq_len
        for arch in (a for a in cell["archs"] if a in archs):
            try:
                check_backbone(arch, cell["sizes"], vocab, seq_len, study.train.protocol,
                               causal=study.train.causal)
                smallest = min(cell["sizes"], key=list(SIZES).index)
                for prior in cell["priors"]:
                    check_prior(prior, arch, smallest, vocab, seq_len, study.train,
                                study.train.protocol)
            except Exception as err:
                raise ConfigError(f"grid.archs: {arch} ({ARCHITECTURES.source(arch)}): "
                                  f"{err}") from None


def check_batches(study: StudyConfig) -> None:
    """Every run's batch splits over its devices and into its micro-batches."""
    world = device_count(study.trainer.devices)
    if not world:  # "auto", -1: checked where the run starts
        return
    grid = study.grid
    runs = [("train", task, size) for task in grid.tasks
            for size in grid.of_task(task)["sizes"]]
    runs += [("pretrain", p.task, p.size) for p in pretrain_cells(grid)]
    for section, task, size in runs:
        micro = trainer_section(study, task, size)["micro_batch"]
        try:
            batch_shares(getattr(study, section).batch_size, world, micro, section)
        except ValueError as err:
            where = f" (the {task or 'upstream'} runs of size {size})" if micro else ""
            raise ConfigError(f"{err}{where}") from None


def check_cluster(study: StudyConfig) -> None:
    """On a cluster a study names its accelerator."""
    if study.trainer.accelerator == "auto":
        raise ConfigError(
            "trainer.accelerator: auto on a cluster asks SLURM for no GPU, so the jobs "
            "would train on whatever node they land on (a GPU study on CPUs); accepted "
            "with the SLURM profile: gpu (or cuda) for GPU jobs, cpu for CPU jobs")


def gpu_runs(study: StudyConfig) -> list[tuple[str, str, str, str, int, int, int]]:
    """(what, task, arch, size, sequences of a micro-batch, seq_len, vocab) of
    every training and pretraining run of the grid, the largest first per
    (arch, size, length)."""
    grid, world = study.grid, device_count(study.trainer.devices) or 1
    runs = set()
    for cell in cells(grid):
        micro = trainer_section(study, cell.task, cell.size)["micro_batch"]
        batch = micro or study.train.batch_size // world
        runs.add((f"tasks.{cell.task}", cell.task, cell.arch, cell.size,
                  batch * TASKS[cell.task].documents,
                  study.task(cell.task).seq_len, 0))
    for run in pretrain_cells(grid):
        micro = trainer_section(study, run.task, run.size)["micro_batch"]
        batch = micro or study.pretrain.batch_size // world
        seq_len = study.task(run.task).seq_len if run.task else study.upstream.seq_len
        runs.add((f"pretraining stage {run.stage}", run.task, run.arch, run.size, batch,
                  seq_len, VOCAB_BOUND))
    return sorted(runs, key=lambda r: (r[0], r[2], r[3]))


def check_gpu_memory(study: StudyConfig) -> None:
    """Refuse a run whose estimated GPU memory exceeds resources.gpu_mem_gb."""
    limit = study.resources.gpu_mem_gb * 1e9
    precision = study.trainer.precision
    for what, task, arch, size, batch, seq_len, vocab in gpu_runs(study):
        need = gpu_memory(arch, size, study.train.protocol, batch, seq_len, precision,
                          study.train.dropout, vocab)
        if need > limit:
            name = task or "upstream"
            raise ConfigError(
                f"resources.gpu_mem_gb: {arch} at size {size} on {what} ({batch} sequences "
                f"of {seq_len} tokens a micro-batch, {precision}) needs about "
                f"{need / 1e9:.0f} GB of GPU memory (study.costs.gpu_memory), more than the "
                f"{limit / 1e9:.0f} GB given; accepted: a smaller micro-batch for it "
                f"(resources.tasks.{name}.sizes.{size}.micro_batch, train.batch_size "
                f"unchanged), a larger resources.gpu_mem_gb, or the cell dropped from the "
                f"grid (grid.per_task)")


def check_runtimes(study: StudyConfig) -> None:
    """Warn of the jobs whose estimated runtime exceeds resources.max_runtime.
    Capped, not refused: each attempt asks for max_runtime, SLURM's USR1
    before the limit has the run save last.ckpt, and the retry resumes there
    (docs/cluster.md), so such a job finishes over attempts; refusing it would
    leave its runtime to be cut to the same cap by hand. The warning names the
    attempts each needs, which the profile's retries must allow."""
    cap = study.resources.max_runtime
    if not cap:
        return
    grid, over = study.grid, set()
    for cell in cells(grid):
        minutes = runtime(study, "train", cell.task, cell.arch, cell.size, cell.prior,
                          cell.budget)
        budget = "" if cell.budget is None else f" of {cell.arch} at budget {cell.budget:g}"
        over.add((minutes, f"the {cell.task} runs{budget} at size {cell.size}"))
    for run in pretrain_cells(grid):
        minutes = runtime(study, "pretrain", run.task, run.arch, run.size, None, run.budget)
        budget = "" if run.budget is None else f" of {run.arch} at budget {run.budget:g}"
        where = f" on {run.task}" if run.task else ""
        over.add((minutes, f"the {run.stage} pretraining{where}{budget} at size {run.size}"))
    over = sorted((item for item in over if item[0] > cap), reverse=True)
    if over:
        jobs = "; ".join(f"{what}: {minutes} minutes, {math.ceil(minutes / cap)} attempts"
                         for minutes, what in over)
        warnings.warn(
            f"resources.max_runtime: {cap} minutes caps every attempt of the jobs estimated "
            f"to need longer; each stops at its limit with a checkpoint and its retry resumes "
            f"there, so the profile's retries must allow the attempts it needs ({jobs})",
            ConfigWarning, stacklevel=3)


def trains_in_host_memory(study: StudyConfig) -> bool:
    """Whether the study's jobs train in this machine's RAM: a CPU (or MPS, which
    shares it), or `auto` with no NVIDIA GPU here. GPU memory is checked apart
    (resources.gpu_mem_gb)."""
    accelerator = study.trainer.accelerator
    return accelerator in ("cpu", "mps") or (accelerator == "auto" and not local_gpus())


def machine_memory() -> int:
    """This machine's physical memory in bytes."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def check_memory(study: StudyConfig, memory_bytes: int) -> None:
    """Refuse a size whose estimated training memory exceeds `memory_bytes`."""
    grid, train = study.grid, study.train
    longest = max(study.task(t).seq_len for t in grid.tasks)
    runs = [(train.batch_size, longest)]
    if any(not STAGES[s].on_task for s in stages_needed(grid)):
        runs.append((study.pretrain.batch_size, study.upstream.seq_len))
    too_big, fits = [], []
    for size in grid.sizes:
        need, params, batch, seq_len = max(
            (*training_memory(size, train.protocol, b, t), b, t) for b, t in runs)
        (too_big if need > memory_bytes else fits).append((size, need, params, batch, seq_len))
    if too_big:
        size, need, params, batch, seq_len = too_big[0]
        raise ConfigError(
            f"grid.sizes: {size} needs about {need / GIB:.1f} GiB to train ({params:.3g} "
            f"parameters x 16 bytes of weights, gradients and AdamW state, plus activations "
            f"of batch {batch} x seq_len {seq_len}), more than this machine's "
            f"{memory_bytes / GIB:.1f} GiB; accepted sizes here: "
            f"{', '.join(s for s, *_ in fits) or 'none at this batch and length'}"
        )


def validate(config, schema_path: Path | str = SCHEMA_PATH, *,
             memory_bytes: int | None = None, cluster: bool = False) -> StudyConfig:
    """The typed config of a study that can run; else one ConfigError (see the
    module docstring). `cluster`: the jobs go to a scheduler (the SLURM
    profile). Strings from Snakemake's --config are first read as the schema's
    integers, numbers, booleans and nulls, and the options a study does not
    state are filled in at their defaults, in `config` itself (study/schema.py
    `coerce`, study/config.py `fill_defaults`): the rules read the completed
    config, the package the typed one."""
    coerce_config(config, schema_path)
    fill_defaults(config)
    check_schema(config, schema_path)
    study = typed(config)
    check_semantics(study)
    check_schedules(study)
    try:  # a tracker's package is installed (its extra named)
        require_trackers(list(study.trainer.loggers))
    except ValueError as err:
        raise ConfigError(str(err)) from None
    check_batches(study)
    check_plugins(study)
    if cluster:
        check_cluster(study)
    if gpu_study(study) and study.resources.gpu_mem_gb:
        check_gpu_memory(study)
    check_runtimes(study)
    if memory_bytes is not None:
        check_memory(study, memory_bytes)
    return study
