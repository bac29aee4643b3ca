"""The one data contract between a task's source and training.

Whatever a task reads (LRA's release) or makes (an offline stand-in), it hands
over `Split`s of token ids, and `write` caches them as
`{train,val,test}.npz` (arrays `tokens` [N, seq_len] uint16, `lengths` [N],
`labels` [N], and `tokens2`/`lengths2` for a task whose examples are document
pairs) plus `manifest.json`:

    task, source, standin (null, or what the stand-in is), n_classes, seq_len,
    data and classes (the user's files, tasks/files.py: what they are, the
    class names in order),
    vocab (bytes, pixels or listops), vocab_size, mask_ratio (the SPT masking
    ratio of Amos et al. 2023 for the task), pair, pad_id, checksum (SHA-256 of
    every array), config,
    splits: {train|val|test: {n, label_counts: {label: count}}}

Training and pretraining read only this (`read`), which checks the checksum.
Everything is written into a temporary directory beside the target and renamed
into place, so an interrupted run leaves nothing half-written.
Token ids: 0 is padding, 1 [MASK], 2 [CLS]; bytes and pixel intensities 0-255
are id value + 3 (vocab 259), as tasks/upstream.py; ListOps has its own symbols.
Torch-free: numpy only.
"""

from __future__ import annotations

import hashlib
import json
import zipfile
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..atomic import replacing_directory

SPLITS = ("train", "val", "test")
MANIFEST = "manifest.json"
PAD_ID = 0
N_SPECIAL = 3  # pad, mask, cls
BYTE_VOCAB = 256 + N_SPECIAL
# What token ids mean, by name (the manifest's `vocab`): a pretrained token
# table transfers only to the same vocabulary.
BYTES, PIXELS = "bytes", "pixels"
ARRAYS = ("tokens", "lengths", "labels", "tokens2", "lengths2")


@dataclass
class Split:
    """One split: padded token ids, true lengths and labels (and the second
    document of a pair task)."""

    tokens: np.ndarray  # [N, seq_len] uint16, padded with PAD_ID
    lengths: np.ndarray  # [N] int32
    labels: np.ndarray  # [N] int64
    tokens2: np.ndarray | None = None
    lengths2: np.ndarray | None = None

    def arrays(self) -> dict[str, np.ndarray]:
        return {name: getattr(self, name) for name in ARRAYS if getattr(self, name) is not None}


def pad(sequences: Sequence[Sequence[int] | np.ndarray], seq_len: int) -> tuple[np.ndarray,
                                                                                  np.ndarray]:
    """Ragged id sequences -> ([N, seq_len] uint16 right-padded, [N] lengths);
    a longer sequence is cut at seq_len (LRA truncates too)."""
    tokens = np.full((len(sequences), seq_len), PAD_ID, dtype=np.uint16)
    lengths = np.zeros(len(sequences), dtype=np.int32)
    for i, seq in enumerate(sequences):
        seq = np.asarray(seq[:seq_len], dtype=np.uint16)
        tokens[i, : len(seq)] = seq
        lengths[i] = len(seq)
    return tokens, lengths


def byte_ids(data: bytes) -> np.ndarray:
    """Bytes (or 0-255 intensities) -> token ids value + 3."""
    return np.frombuffer(data, dtype=np.uint8).astype(np.uint16) + N_SPECIAL


def make_split(docs: Sequence, labels: Sequence[int], seq_len: int,
               docs2: Sequence | None = None) -> Split:
    tokens, lengths = pad(docs, seq_len)
    split = Split(tokens, lengths, np.asarray(labels, dtype=np.int64).reshape(len(docs)))
    if docs2 is not None:
        split.tokens2, split.lengths2 = pad(docs2, seq_len)
    return split


def check_splits(task: str, splits: dict, vocab_size: int, n_classes: int,
                 pair: bool = False) -> None:
    """ValueError naming the task, the split and what breaks the contract: the
    three splits, each non-empty, its tokens [N, T] unsigned ids below
    vocab_size padded with PAD_ID past each length, labels [N] integers in
    [0, n_classes), every split of one length T, a pair task's second
    document likewise."""
    def refuse(split: str, what: str):
        raise ValueError(f"task {task}: its {split} split {what}; the data contract "
                         f"(scalestudy.tasks.contract) wants {SPLITS} splits of token ids "
                         f"[N, seq_len] below vocab_size {vocab_size}, lengths [N] and labels "
                         f"[N] in 0..{n_classes - 1}")

    if set(splits) != set(SPLITS):
        refuse("/".join(sorted(map(str, splits))) or "no", f"set is not {SPLITS}")
    lengths_of = set()
    for name in SPLITS:
        split = splits[name]
        if not isinstance(split, Split):
            refuse(name, f"is a {type(split).__name__}, not a Split (make_split)")
        docs = [("tokens", "lengths")] + ([("tokens2", "lengths2")] if pair else [])
        for tokens_name, lengths_name in docs:
            tokens, lengths = getattr(split, tokens_name), getattr(split, lengths_name)
            if tokens is None or tokens.ndim != 2 or not tokens.shape[0]:
                refuse(name, f"has no [N, seq_len] {tokens_name}")
            if not np.issubdtype(tokens.dtype, np.unsignedinteger):
                refuse(name, f"{tokens_name} are {tokens.dtype}, not unsigned ids")
            if int(tokens.max()) >= vocab_size:
                refuse(name, f"{tokens_name} hold id {int(tokens.max())}")
            if lengths is None or lengths.shape != (tokens.shape[0],):
                refuse(name, f"{lengths_name} are not one per example")
            past = np.arange(tokens.shape[1])[None, :] >= lengths[:, None]
            if (tokens[past] != PAD_ID).any():
                refuse(name, f"{tokens_name} are not padded with {PAD_ID} past their lengths")
            lengths_of.add(tokens.shape[1])
        labels = split.labels
        if labels.shape != (split.tokens.shape[0],) or not np.issubdtype(labels.dtype,
                                                                          np.integer):
            refuse(name, "labels are not one integer per example")
        if labels.min() < 0 or labels.max() >= n_classes:
            refuse(name, f"labels run {int(labels.min())}..{int(labels.max())}")
    if len(lengths_of) != 1:
        refuse("every", f"has its own length ({sorted(lengths_of)}), not one seq_len")


def checksum(splits: dict[str, Split]) -> str:
    digest = hashlib.sha256()
    for name in SPLITS:
        for key, array in splits[name].arrays().items():
            digest.update(f"{name}/{key}/{array.dtype}/{array.shape}".encode())
            digest.update(np.ascontiguousarray(array).tobytes())
    return digest.hexdigest()


def write(out_dir: Path, splits: dict[str, Split], manifest: dict) -> dict:
    """Cache the splits and the manifest in out_dir, all or nothing; returns
    the manifest written (given fields + seq_len, pair, checksum, splits)."""
    manifest = dict(manifest)
    first = splits["train"]
    manifest.update(
        seq_len=int(first.tokens.shape[1]), pair=first.tokens2 is not None, pad_id=PAD_ID,
        checksum=checksum(splits),
        splits={name: {"n": len(splits[name].labels),
                       "label_counts": {str(k): v for k, v in
                                        sorted(Counter(splits[name].labels.tolist()).items())}}
                for name in SPLITS},
    )
    with replacing_directory(out_dir, kill_at="data") as staged:
        for name in SPLITS:
            np.savez(staged / f"{name}.npz", **splits[name].arrays())
        (staged / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return manifest


def read_manifest(data_dir: Path) -> dict:
    path = Path(data_dir) / MANIFEST
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found: prepare the task first (scalestudy data)")
    try:
        manifest = json.loads(path.read_text())
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"{path}: not a readable task manifest ({err}); "
                         "prepare the task again") from None
    if not isinstance(manifest, dict) or "checksum" not in manifest:
        raise ValueError(f"{path}: not a task manifest (no checksum); prepare the task again")
    return manifest


def read(data_dir: Path) -> tuple[dict, dict[str, Split]]:
    """The manifest and the splits of a cache written by `write`, checksum checked."""
    manifest = read_manifest(data_dir)
    splits = {}
    for name in SPLITS:
        path = Path(data_dir) / f"{name}.npz"
        try:
            with np.load(path, allow_pickle=False) as arrays:
                splits[name] = Split(**{key: arrays[key] for key in arrays.files})
        except (OSError, ValueError, EOFError, TypeError, zipfile.BadZipFile) as err:
            # A truncated or foreign file: name it rather than numpy's internals.
            raise ValueError(f"{path}: not a readable task cache file ({err}); "
                             "prepare the task again") from None
    if checksum(splits) != manifest["checksum"]:
        raise ValueError(f"{data_dir}: arrays do not match the manifest's checksum; "
                         "prepare the task again")
    return manifest, splits
