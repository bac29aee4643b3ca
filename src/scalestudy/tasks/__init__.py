"""Task data: prepare the split files of a task, and load them as tensors.

`prepare` writes `{split}` files into a task's data directory (generated, or
copied from a release after validation); `load` reads them back as padded
token-id tensors. Only `load` needs torch.
"""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..faults import kill_point
from ..names import TASKS
from . import listops


@dataclass
class TaskData:
    """Padded token ids [N, seq_len] (pad id 0) and labels [N] per split."""

    name: str
    splits: dict[str, tuple[Any, Any]]
    vocab: tuple[str, ...]
    n_classes: int
    seq_len: int
    pad_id: int = 0


def split_files(data_dir: Path) -> dict[str, Path]:
    return {split: Path(data_dir) / f"basic_{split}.tsv" for split in listops.SPLITS}


LRA_ARCHIVE = "https://storage.googleapis.com/long-range-arena/lra_release.gz"
LRA_REPOSITORY = "https://github.com/google-research/long-range-arena"


class MissingRelease(FileNotFoundError):
    """A task of the grid reads a release (`source: lra`) that is not on disk."""


def check_releases(config: dict, root: Path | str = ".") -> None:
    """Refuse a study whose grid has a task that reads LRA's release
    (`tasks.<task>.source: lra`) when its files are not in `lra_dir`.

    Called by the workflow right after config validation, so a study that
    needs the release stops with one message before planning its jobs.
    A relative `lra_dir` is taken relative to `root` (the workflow's working
    directory).
    """
    problems = []
    for task in config["grid"]["tasks"]:
        cfg = config["tasks"].get(task, {})
        if cfg.get("source") != "lra":
            continue
        lra_dir = Path(cfg.get("lra_dir") or listops.ListOpsConfig.lra_dir)
        where = lra_dir if lra_dir.is_absolute() else Path(root) / lra_dir
        missing = [path.name for path in split_files(where).values() if not path.is_file()]
        if not missing:
            continue
        state = ("does not exist" if not where.is_dir()
                 else f"lacks {', '.join(missing)}")
        names = ", ".join(path.name for path in split_files(lra_dir).values())
        problems.append(
            f"task {task} reads the LRA release (tasks.{task}.source: lra), but its "
            f"directory {lra_dir} ({where.resolve()}) {state}.\n"
            f"Put the release's {names} there: download\n"
            f"  {LRA_ARCHIVE}\n"
            f"(the lra_release archive of the google-research/long-range-arena repository, "
            f"{LRA_REPOSITORY}), unpack it (tar xzf lra_release.gz) and copy the files of "
            f"its listops-1000/ directory into {lra_dir}/.\n"
            f"Or set tasks.{task}.lra_dir to the directory that holds them, or "
            f"tasks.{task}.source: generate to generate the task instead."
        )
    if problems:
        raise MissingRelease("\n".join(problems))


def task_config(task: str, cfg: dict) -> listops.ListOpsConfig:
    if task not in TASKS:
        raise ValueError(f"task: unknown {task!r}, accepted values: {', '.join(TASKS)}")
    fields = {f.name for f in dataclasses.fields(listops.ListOpsConfig)}
    unknown = set(cfg) - fields
    if unknown:
        raise ValueError(
            f"tasks.{task}: unknown keys {sorted(unknown)}, accepted keys: {sorted(fields)}"
        )
    return listops.ListOpsConfig(**cfg)


def prepare(task: str, cfg: dict, out_dir: Path) -> None:
    """Write the task's split files into out_dir, all or nothing."""
    config = task_config(task, cfg)
    out_dir = Path(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out_dir.parent) as tmp:
        staged = split_files(Path(tmp))
        if config.source == "generate":
            for split, examples in listops.generate(config).items():
                listops.write_split(examples, staged[split])
        elif config.source == "lra":
            for target in staged.values():
                source = Path(config.lra_dir) / target.name
                listops.read_split(source)  # validate before copying
                shutil.copyfile(source, target)
        else:
            raise ValueError(
                f"tasks.{task}.source: got {config.source!r}, accepted values: generate, lra"
            )
        kill_point("data", out_dir)  # fault injection (tests only)
        out_dir.mkdir(exist_ok=True)
        for split, path in staged.items():
            path.replace(split_files(out_dir)[split])


def load(task: str, cfg: dict, data_dir: Path) -> TaskData:
    """The prepared splits as tensors, padded to the task's max_length."""
    import torch

    config = task_config(task, cfg)
    index = {token: i for i, token in enumerate(listops.VOCAB)}
    seq_len = config.max_length
    splits = {}
    for split, path in split_files(data_dir).items():
        rows = listops.read_split(path)
        tokens = torch.full((len(rows), seq_len), listops.PAD_ID, dtype=torch.long)
        for i, (words, _) in enumerate(rows):
            if len(words) > seq_len:
                raise ValueError(
                    f"{path}: example {i} has {len(words)} tokens, more than "
                    f"tasks.{task}.max_length = {seq_len}"
                )
            tokens[i, : len(words)] = torch.tensor([index[w] for w in words])
        labels = torch.tensor([label for _, label in rows], dtype=torch.long)
        splits[split] = (tokens, labels)
    return TaskData(task, splits, listops.VOCAB, listops.N_CLASSES, seq_len, listops.PAD_ID)
