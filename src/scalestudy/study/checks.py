"""A study's configuration, checked before any job runs.

`validate(config)` is what the workflow calls (workflow/rules/common.smk) right
after Snakemake has merged a preset over config/config.yaml. It raises one
`ConfigError` naming the field, what it got and what it accepts, or returns:
then every job's spec parses. It checks, in order:

- the JSON schema (config/schema.yaml, completed from the registries:
  study/schema.py): types, ranges, accepted names, no unknown or missing key,
  grids neither empty nor with a value twice; the strings Snakemake's
  --config passes are first read as the integers, numbers, booleans and
  nulls the schema types;
- what a schema cannot say: a grid.per_task sub-grid outside the grid, a
  causal backbone without a causal mode, a task option its config dataclass
  refuses (e.g. a ListOps length window with no length in it), a pretraining
  stage that never validates (so has no best checkpoint), a task longer than
  the upstream backbone it finetunes;
- that each tracker of trainer.loggers is installed (else the extra to install);
- when `memory_bytes` is given, that the largest size's estimated training
  memory fits in it (`costs.training_memory`).

Torch-free and quick: the workflow runs it on every invocation, dry runs too.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..architectures import ARCHITECTURES
from ..priors import PRIORS
from ..stages import STAGES
from ..tasks import task_config
from ..training.plateau import PLATEAU_MIN_VALIDATIONS
from ..training.trackers import require as require_trackers
from .costs import training_memory
from .grid import stages_needed, task_grid
from .schema import SCHEMA_PATH, ConfigError, check_schema, coerce_config

GIB = 2**30


def check_per_task(grid: dict) -> None:
    """A sub-grid is of a task of the grid, and takes values of the grid's."""
    per_task = grid.get("per_task") or {}
    stray = sorted(set(per_task) - set(grid["tasks"]))
    if stray:
        raise ConfigError(f"grid.per_task: {', '.join(stray)} not in grid.tasks "
                          f"({grid['tasks']}); accepted: tasks of the grid")
    for task, own in per_task.items():
        for key, values in own.items():
            outside = [v for v in values if v not in grid[key]]
            if outside:
                raise ConfigError(f"grid.per_task.{task}.{key}: {outside} not in grid.{key} "
                                  f"({grid[key]}); a task's sub-grid takes values of the grid")


def check_semantics(config: dict) -> None:
    """The checks a JSON schema cannot express (config already schema-valid)."""
    grid, train = config["grid"], config["train"]
    check_per_task(grid)
    forced = ([f"prior {p}" for p in grid["priors"] if PRIORS[p].causal]
              + [f"pretraining stage {s}" for s in sorted(stages_needed(grid))
                 if STAGES[s].causal])
    if train["causal"] or forced:
        no_causal = [arch for arch in grid["archs"] if not ARCHITECTURES[arch].causal]
        why = "train.causal: true" if train["causal"] else forced[0]
        if no_causal:
            raise ConfigError(
                f"grid.archs: {', '.join(no_causal)} has no causal mode ({why}); "
                f"drop it from the grid, or set train.causal: false and drop causal priors"
            )
    task_configs = {}
    for task in grid["tasks"]:
        try:  # each task's config dataclass checks itself (tasks/<task>.py)
            task_configs[task] = task_config(task, config["tasks"].get(task, {}))
        except (TypeError, ValueError) as err:
            raise ConfigError(str(err)) from None
    every_prior = {p for task in grid["tasks"] for p in task_grid(grid, task)["priors"]}
    stages = stages_needed(grid)
    pretrain = config["pretrain"]
    for prior in sorted(every_prior):
        try:
            PRIORS[prior].check_until(train["until"])
        except ValueError as err:
            raise ConfigError(str(err)) from None
    for section, schedule in (("train", train), ("pretrain", pretrain if stages else None)):
        if schedule and schedule["until"] == "plateau" and (
                schedule["max_steps"] < PLATEAU_MIN_VALIDATIONS * schedule["val_every"]):
            raise ConfigError(
                f"{section}.max_steps: {schedule['max_steps']} leaves under "
                f"{PLATEAU_MIN_VALIDATIONS} validations ({section}.val_every "
                f"{schedule['val_every']}) to find a plateau in ({section}.until: plateau); "
                f"accepted: at least {PLATEAU_MIN_VALIDATIONS * schedule['val_every']}"
            )
    if stages and pretrain["val_every"] > pretrain["max_steps"]:
        raise ConfigError(
            f"pretrain.val_every: {pretrain['val_every']} exceeds pretrain.max_steps "
            f"{pretrain['max_steps']}: no validation, so no best checkpoint; accepted: "
            f"1 to pretrain.max_steps"
        )
    seq_len = config["upstream"]["seq_len"]
    for task, cfg in task_configs.items():
        upstream_stages = {PRIORS[p].pretrain for p in task_grid(grid, task)["priors"]} - {None}
        if any(not STAGES[s].on_task for s in upstream_stages) and cfg.seq_len > seq_len:
            raise ConfigError(
                f"tasks.{task}: its length {cfg.seq_len} exceeds upstream.seq_len {seq_len}, "
                f"the length of the upstream backbone the upstream prior finetunes; "
                f"accepted: at most upstream.seq_len"
            )


def trains_in_host_memory(config: dict) -> bool:
    """Whether the study's jobs train in this machine's RAM: a CPU (or MPS, which
    shares it), or `auto` with no NVIDIA GPU here. GPU memory is not checked."""
    accelerator = config["trainer"]["accelerator"]
    if accelerator in ("cpu", "mps"):
        return True
    gpus = Path("/proc/driver/nvidia/gpus")
    return accelerator == "auto" and not (gpus.is_dir() and any(gpus.iterdir()))


def machine_memory() -> int:
    """This machine's physical memory in bytes."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def check_memory(config: dict, memory_bytes: int) -> None:
    """Refuse a size whose estimated training memory exceeds `memory_bytes`."""
    grid, train = config["grid"], config["train"]
    longest = max(task_config(t, config["tasks"].get(t, {})).seq_len for t in grid["tasks"])
    runs = [(train["batch_size"], longest)]
    if any(not STAGES[s].on_task for s in stages_needed(grid)):
        runs.append((config["pretrain"]["batch_size"], config["upstream"]["seq_len"]))
    too_big, fits = [], []
    for size in grid["sizes"]:
        need, params, batch, seq_len = max(
            (*training_memory(size, train["protocol"], b, t), b, t) for b, t in runs)
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
             memory_bytes: int | None = None) -> None:
    """Raise one ConfigError for a study that cannot run; see the module docstring.
    Strings from Snakemake's --config are first read as the schema's integers,
    numbers, booleans and nulls, in `config` itself (study/schema.py `coerce`)."""
    coerce_config(config, schema_path)
    check_schema(config, schema_path)
    check_semantics(config)
    try:  # a tracker's package is installed (its extra named)
        require_trackers(config["trainer"]["loggers"])
    except ValueError as err:
        raise ConfigError(str(err)) from None
    if memory_bytes is not None:
        check_memory(config, memory_bytes)
