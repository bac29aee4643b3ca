"""A study's configuration, checked before any job runs.

`validate(config)` is what the workflow calls (workflow/rules/common.smk) right
after Snakemake has merged a preset over config/config.yaml. It raises one
`ConfigError` naming the field, what it got and what it accepts, or returns:
then every job's spec parses. It checks, in order:

- the JSON schema (config/schema.yaml): types, ranges, accepted names, no
  unknown or missing key, grids neither empty nor with a value twice;
- what a schema cannot say: a grid.per_task sub-grid outside the grid, a
  causal funnel, a ListOps length window with no length in it, a pretraining
  stage that never validates (so has no best checkpoint), a task longer than
  the upstream backbone it finetunes;
- when `memory_bytes` is given, that the largest size's estimated training
  memory fits in it (`training_memory`).

Torch-free and quick: the workflow runs it on every invocation, dry runs too.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import sys
from pathlib import Path

import yaml

from .names import NON_CAUSAL

SCHEMA_PATH = Path(__file__).resolve().parents[2] / "config" / "schema.yaml"
GIB = 2**30


class ConfigError(ValueError):
    """A study configuration that cannot run, with the field and what it accepts."""


def _field(path) -> str:
    """['grid', 'archs', 1] -> 'grid.archs[1]' (the root is 'config')."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else f".{part}" if text else str(part)
    return text or "config"


def _accepted(schema: dict) -> str:
    """What a schema node accepts, in words, for the error message."""
    items = schema.get("items", {})
    if "enum" in items:
        return "accepted values: " + ", ".join(map(str, items["enum"]))
    if "enum" in schema:
        return "accepted values: " + ", ".join(map(str, schema["enum"]))
    if "properties" in schema:
        return "accepted keys: " + ", ".join(schema["properties"])
    return schema.get("description", "").strip()


def _schema_error(error) -> ConfigError:
    """One jsonschema error as one message: field, what is wrong, what is accepted."""
    where = _field(error.absolute_path)
    if error.validator == "minItems" and error.instance == []:
        what = "is empty; list at least one value"
    elif error.validator == "uniqueItems":
        seen, twice = set(), []
        for value in error.instance:
            key = repr(value)
            if key in seen and key not in twice:
                twice.append(key)
            seen.add(key)
        what = f"lists {', '.join(twice)} more than once"
    else:
        what = error.message
    accepted = _accepted(error.schema)
    return ConfigError(f"{where}: {what}" + (f"; {accepted}" if accepted else ""))


@functools.cache
def _validator(schema_path: str):
    import jsonschema

    with open(schema_path) as f:
        return jsonschema.Draft202012Validator(yaml.safe_load(f))


def check_schema(config, schema_path: Path | str = SCHEMA_PATH) -> None:
    from jsonschema.exceptions import best_match

    error = best_match(_validator(str(schema_path)).iter_errors(config))
    if error is not None:
        raise _schema_error(error) from None


GRID_KEYS = ("archs", "sizes", "priors", "seeds")


def task_grid(grid: dict, task: str) -> dict[str, list]:
    """One task's grid (archs, sizes, priors, seeds): the study's, or what its
    grid.per_task sub-grid states instead. The one place a cell list is made
    from: the workflow's targets, the config checks, the tests, slurm-test."""
    own = (grid.get("per_task") or {}).get(task, {})
    return {key: own.get(key, grid[key]) for key in GRID_KEYS}


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
    from .priors import forces_causal

    grid, train = config["grid"], config["train"]
    check_per_task(grid)
    causal_priors = [p for p in grid["priors"] if forces_causal(p)]
    if train["causal"] or causal_priors:
        no_causal = [arch for arch in grid["archs"] if arch in NON_CAUSAL]
        why = "train.causal: true" if train["causal"] else f"prior {causal_priors[0]}"
        if no_causal:
            raise ConfigError(
                f"grid.archs: {', '.join(no_causal)} has no causal mode ({why}); "
                f"drop it from the grid, or set train.causal: false and drop causal priors"
            )
    from . import tasks

    task_configs = {}
    for task in grid["tasks"]:
        try:  # each task's config dataclass checks itself (tasks/<task>.py)
            task_configs[task] = tasks.task_config(task, config["tasks"][task])
        except (TypeError, ValueError) as err:
            raise ConfigError(str(err)) from None
    from .priors import get_prior, needs_pretraining

    every_prior = {p for task in grid["tasks"] for p in task_grid(grid, task)["priors"]}
    stages = {needs_pretraining(p) for p in every_prior} - {None}
    pretrain = config["pretrain"]
    for prior in sorted(every_prior):
        try:
            get_prior(prior).check_until(train["until"])
        except ValueError as err:
            raise ConfigError(str(err)) from None
    from .plateau import PLATEAU_MIN_VALIDATIONS

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
    if "upstream" in stages:
        seq_len = config["upstream"]["seq_len"]
        for task, cfg in task_configs.items():
            priors = task_grid(grid, task)["priors"]
            if "upstream" in {needs_pretraining(p) for p in priors} and cfg.seq_len > seq_len:
                raise ConfigError(
                    f"tasks.{task}: its length {cfg.seq_len} exceeds upstream.seq_len {seq_len}, "
                    f"the length of the upstream backbone the upstream prior finetunes; "
                    f"accepted: at most upstream.seq_len"
                )


@functools.cache
def _sizes_module():
    """models/sizes.py (the ladder) on its own: pure Python, while importing it as
    scalestudy.models.sizes would import torch with the models package (5 s on
    every workflow invocation)."""
    path = Path(__file__).parent / "models" / "sizes.py"
    spec = importlib.util.spec_from_file_location("scalestudy_ladder", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


VOCAB_BOUND = 512  # above every vocabulary here (ListOps 18 ids, the byte corpus 259)
FLOATS_PER_TOKEN_LAYER = 16  # activations kept for backward: attention, norms, residuals


def training_memory(size: str, protocol: str, batch: int, seq_len: int) -> tuple[int, int]:
    """Estimated bytes to train the vanilla transformer of `size` in fp32 with
    AdamW, and its parameter count.

    Parameters P = L (4 D^2 + 2 D F) + (vocab + T) D; weights, gradients and two
    AdamW moments cost 16 P bytes; activations kept for the backward pass about
    B T L (16 D + 2 F) floats (fused attention keeps no T x T scores). A rough
    bound, for refusing what cannot fit, not a measurement; the other backbones
    are within 25% of the vanilla non-embedding parameters (switch ~3x).
    """
    shape = _sizes_module().shape_for(size, protocol)
    depth, width, d_ff = shape.depth, shape.width, shape.d_ff
    params = depth * (4 * width**2 + 2 * width * d_ff) + (VOCAB_BOUND + seq_len) * width
    activations = batch * seq_len * depth * (FLOATS_PER_TOKEN_LAYER * width + 2 * d_ff) * 4
    return 16 * params + activations, params


def run_flops(size: str, protocol: str, batch: int, seq_len: int, steps: int) -> float:
    """Estimated FLOPs of a training run of the vanilla transformer of `size`:
    6 N B T a step, N its non-embedding parameters L (4 D^2 + 2 D F), times the
    steps. For ordering jobs (the workflow's priorities), not for records,
    which count the FLOPs of the actual model (scalestudy.flops)."""
    shape = _sizes_module().shape_for(size, protocol)
    non_embedding = shape.depth * (4 * shape.width**2 + 2 * shape.width * shape.d_ff)
    return 6.0 * non_embedding * batch * seq_len * steps


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
    from . import tasks
    from .priors import needs_pretraining

    grid, train = config["grid"], config["train"]
    longest = max(tasks.task_config(t, config["tasks"][t]).seq_len for t in grid["tasks"])
    runs = [(train["batch_size"], longest)]
    if "upstream" in {needs_pretraining(p) for p in grid["priors"]}:
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
    """Raise one ConfigError for a study that cannot run; see the module docstring."""
    check_schema(config, schema_path)
    check_semantics(config)
    if memory_bytes is not None:
        check_memory(config, memory_bytes)
