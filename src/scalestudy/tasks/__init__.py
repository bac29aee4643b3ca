"""Task data: Long Range Arena's six tasks (Tay et al. 2021), each read from
the real release (`source: lra`, files in `lra_dir`) or made by an offline
stand-in that needs no download (each task's default source), and the user's
own data files (`files`), behind one data contract (tasks/contract.py).

`TASKS` is the task registry. One module per task owns its config dataclass
(each option declared with its description and bounds, scalestudy.options:
the study schema's `tasks.<task>` section is made from it), its release reader
and its stand-in: listops, text (IMDb), retrieval (AAN), image (CIFAR-10),
pathfinder (Pathfinder and Path-X); files, the user's CSV, Parquet or
JSON-lines files (neither LRA nor a stand-in). Its registry entry adds what
the rest of the study needs: the self-pretraining mask ratio (Amos et al.
2023: ListOps 10%, Text and Retrieval 15%, Image, Pathfinder and Path-X 50%;
the user's text 15%, as Text's).

`prepare` converts a source once into the contract's cached arrays and
manifest; `load` reads them back as tensors, and is all that training and
pretraining read. `check_releases` refuses a study whose release files are
missing, or whose files task names no files, before any job runs. A study
states only the task options it changes; validation fills in the rest from
the dataclasses (study/config.py `fill_defaults`). Importing the package
imports no torch; `load` does.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from ..options import spec_values
from ..records import LRA_RELEASE
from ..registry import Registry
from . import contract, files, image, listops, pathfinder, retrieval, text

LRA_ARCHIVE = "https://storage.googleapis.com/long-range-arena/lra_release.gz"
LRA_REPOSITORY = "https://github.com/google-research/long-range-arena"


@dataclass(frozen=True)
class Task:
    """A task: its module (readers, stand-in, release files), its config
    dataclass, and its self-pretraining mask ratio."""

    name: str
    module: ModuleType
    config: type
    mask_ratio: float
    documents: int = 1  # sequences an example puts through the backbone (a pair: 2)


TASKS: Registry[Task] = Registry("task", group="scalestudy.tasks", entries=[
    Task("listops", listops, listops.ListOpsConfig, mask_ratio=0.10),
    Task("text", text, text.TextConfig, mask_ratio=0.15),
    Task("retrieval", retrieval, retrieval.RetrievalConfig, mask_ratio=0.15, documents=2),
    Task("image", image, image.ImageConfig, mask_ratio=0.50),
    Task("pathfinder", pathfinder, pathfinder.PathfinderConfig, mask_ratio=0.50),
    Task("pathx", pathfinder, pathfinder.PathXConfig, mask_ratio=0.50),
    Task("files", files, files.FilesConfig, mask_ratio=0.15),
])


@dataclass
class TaskData:
    """Per split a tuple of tensors: token ids [N, seq_len] (uint16, pad id 0),
    the second document's ids for a pair task (retrieval), and labels [N]
    (int64). Batches of them (training.data.collate) are int64."""

    name: str
    splits: dict[str, tuple[Any, ...]]
    vocab: str  # what the ids mean: bytes, pixels, listops (tasks.contract)
    vocab_size: int
    n_classes: int
    seq_len: int
    mask_ratio: float
    pair: bool = False
    standin: str | None = None
    pad_id: int = contract.PAD_ID
    data: str | None = None  # what data that is neither LRA nor a stand-in is (the user's)

    @property
    def label(self) -> str:
        """What the data is, for records: the user's files, the stand-in's
        description or LRA's release."""
        return self.data or self.standin or LRA_RELEASE


def data_label(manifest: dict) -> str:
    """What a prepared task's data is (a manifest's `data`, or its stand-in, or
    LRA's release): as TaskData.label."""
    return manifest.get("data") or manifest["standin"] or LRA_RELEASE


class MissingRelease(FileNotFoundError):
    """A task of the grid reads a release (`source: lra`) that is not on disk."""


def task_config(task: str, cfg: dict):
    """The task's config dataclass from its study section, checked."""
    entry = TASKS[task]
    fields = {f.name for f in dataclasses.fields(entry.config)}
    unknown = set(cfg) - fields
    if unknown:
        raise ValueError(
            f"tasks.{task}: unknown keys {sorted(unknown)}, accepted keys: {sorted(fields)}"
        )
    config = entry.config(**cfg)
    if config.source not in entry.module.SOURCES:
        raise ValueError(f"tasks.{task}.source: got {config.source!r}, accepted values: "
                         f"{', '.join(entry.module.SOURCES)}")
    return config


def stated_options(config) -> dict:
    """A task config's options as a run's spec states them (JSON values),
    without those a spec states only away from their default."""
    return spec_values(type(config), json.loads(json.dumps(dataclasses.asdict(config))))


def check_releases(tasks: dict, root: Path | str = ".") -> None:
    """Refuse a study one of whose tasks (`tasks`: the grid's tasks by name, each
    its task config) reads LRA's release (`tasks.<task>.source: lra`) when
    its files are not in `lra_dir`.

    Called by the workflow right after config validation, so a study that
    needs the release stops with one message before planning its jobs.
    A relative `lra_dir` is taken relative to `root` (the workflow's working
    directory). A files task that names no files is refused too (the files
    it names were checked when its config was made: tasks/files.py).
    """
    problems = []
    for task, task_cfg in tasks.items():
        if task_cfg.source == "files":
            if why := files.unconfigured(task_cfg):
                problems.append(why)
            continue
        if task_cfg.source != "lra":
            continue
        module = TASKS[task].module
        lra_dir = Path(task_cfg.lra_dir)
        where = lra_dir if lra_dir.is_absolute() else Path(root) / lra_dir
        expected = module.release_files(task_cfg)
        missing = [name for name in expected if not (where / name).exists()]
        if not missing:
            continue
        state = "does not exist" if not where.is_dir() else f"lacks {', '.join(missing)}"
        url, part = module.release_source(task_cfg)
        if url is None:
            fetch = (f"download\n  {LRA_ARCHIVE}\n(the lra_release archive of the "
                     f"google-research/long-range-arena repository, {LRA_REPOSITORY}), unpack it "
                     f"(tar xzf lra_release.gz) and copy {part} into {lra_dir}/.")
        else:
            fetch = f"download\n  {url}\nand unpack {part} into {lra_dir}/."
        problems.append(
            f"task {task} reads the LRA release (tasks.{task}.source: lra), but its "
            f"directory {lra_dir} ({where.resolve()}) {state}.\n"
            f"Put the release's {', '.join(expected)} there: {fetch}\n"
            f"Or set tasks.{task}.lra_dir to the directory that holds them, or "
            f"tasks.{task}.source: {module.SOURCES[0]} for the offline stand-in instead."
        )
    if problems:
        raise MissingRelease("\n".join(problems))


def prepare(task: str, cfg: dict, out_dir: Path) -> dict:
    """Convert the task's source into the data contract in out_dir, all or
    nothing; returns the manifest."""
    config = task_config(task, cfg)
    module = TASKS[task].module
    # A task whose data decides its classes or vocabulary (files) says so with its splits.
    described = getattr(module, "build_described", None)
    splits, own = described(config) if described else (module.build(config), {})
    for split, arrays in splits.items():
        if not len(arrays.labels):
            raise ValueError(f"tasks.{task}: the {split} split is empty")
    manifest = {
        "task": task, "source": config.source, "standin": module.standin(config),
        "vocab": module.VOCAB_NAME, "vocab_size": module.VOCAB_SIZE,
        "mask_ratio": TASKS[task].mask_ratio, "config": dataclasses.asdict(config), **own,
    }
    if "n_classes" not in manifest:
        manifest["n_classes"] = module.n_classes(config)
    return contract.write(out_dir, splits, manifest)


def load(task: str, cfg: dict, data_dir: Path) -> TaskData:
    """The prepared splits as tensors (token ids uint16, labels int64); refuses
    a directory prepared for another task or config."""
    import torch

    config = task_config(task, cfg)
    stated = stated_options(config)
    manifest, splits = contract.read(data_dir)
    # Compared as a spec states them: data prepared before an option existed
    # (so without it) matches that option at its default.
    if (manifest["task"] != task
            or spec_values(type(config), manifest["config"]) != stated):
        raise ValueError(f"{data_dir} holds {manifest['task']} prepared with "
                         f"{manifest['config']}, not {task} with {stated}; prepare it again")

    def tensors(split: contract.Split) -> tuple[Any, ...]:
        # Token ids stay in the cache's uint16 (a quarter of int64's memory, and
        # no copy); a batch is widened (training.data.collate).
        arrays = [split.tokens, split.tokens2, split.labels.astype("int64")]
        return tuple(torch.from_numpy(a) for a in arrays if a is not None)

    return TaskData(task, {name: tensors(split) for name, split in splits.items()},
                    manifest["vocab"], manifest["vocab_size"], manifest["n_classes"],
                    manifest["seq_len"], manifest["mask_ratio"], manifest["pair"],
                    manifest["standin"], manifest["pad_id"], manifest.get("data"))
