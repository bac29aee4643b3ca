"""The upstream corpus for `upstream` pretraining (the Tay et al. 2022 protocol:
masked-LM pretraining on a general corpus, then finetuning on the task).

Tay et al. pretrain on C4, which a laptop study cannot download or afford. The
default corpus here needs no download and is the same on every machine with the
same Python: the source files of the running Python's standard library
(`sysconfig.get_paths()["stdlib"]`, every `*.py`, sorted, skipping `test/`,
`tests/`, `idlelib/`, `site-packages/`, `dist-packages/`): about 11 MB of
natural-ish text (code and English docstrings/comments) for CPython 3.11. Other
text can be used instead: `source="files"` reads the files matching a glob
(`path`, `**` allowed), `source="parquet"` the `text` column of a Parquet file.

Tokens are bytes: byte b -> id b + 3 after the specials pad 0, mask 1, cls 2
(vocab 259), so any text in any encoding tokenises, with no vocabulary to fit.
Each document (file or row) is cut into sequences of `seq_len`; its last one is
right-padded, so no sequence spans two documents.

Splits are fixed per document by a stable hash (SHA-256) of its key, the path
relative to the corpus root (Parquet: the text itself, so duplicate rows share
a split): 98% train, 1% val, 1% test. A document is therefore in exactly one
split whatever the limits or seed. `max_train_sequences` and
`max_val_sequences` (the latter also for test; 0 = no limit) cap a split: its
documents are taken in an order shuffled by `seed` until the cap is reached,
the last one cut at the cap.

`prepare` writes train.pt, val.pt, test.pt (int16 token ids [N, seq_len], via
torch.save) and manifest.json (the config, counts and the documents of each
split), all or nothing; `load` reads them back as int64 tensors and refuses a
directory prepared with another config.
"""

from __future__ import annotations

import dataclasses
import glob
import hashlib
import io
import json
import os
import random
import sysconfig
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..atomic import replacing_directory

PAD_ID, MASK_ID, CLS_ID = 0, 1, 2
N_SPECIAL = 3
VOCAB_SIZE = 256 + N_SPECIAL
SPLITS = ("train", "val", "test")
SOURCES = ("stdlib", "files", "parquet")
SKIPPED_DIRS = frozenset({"test", "tests", "idlelib", "site-packages", "dist-packages",
                          "__pycache__"})
MANIFEST = "manifest.json"


@dataclass(frozen=True)
class UpstreamConfig:
    source: str = "stdlib"  # stdlib | files | parquet
    # stdlib: root to walk instead of the running Python's ("" = that one);
    # files: a glob; parquet: the file.
    path: str = ""
    seq_len: int = 512
    max_train_sequences: int = 20_000  # 0 = no limit
    max_val_sequences: int = 500  # for val and for test; 0 = no limit
    seed: int = 0

    def __post_init__(self) -> None:
        if self.source not in SOURCES:
            raise ValueError(
                f"upstream.source: got {self.source!r}, accepted values: {', '.join(SOURCES)}"
            )
        if self.source != "stdlib" and not self.path:
            raise ValueError(f"upstream.path: required for source {self.source!r}")
        if self.seq_len < 1:
            raise ValueError(f"upstream.seq_len: got {self.seq_len}, must be >= 1")
        for name in ("max_train_sequences", "max_val_sequences"):
            if getattr(self, name) < 0:
                raise ValueError(f"upstream.{name}: got {getattr(self, name)}, must be >= 0")


@dataclass
class UpstreamData:
    """Token ids [N, seq_len] (int64, pad 0) per split."""

    splits: dict[str, Any]
    seq_len: int
    vocab_size: int = VOCAB_SIZE
    pad_id: int = PAD_ID
    mask_id: int = MASK_ID
    cls_id: int = CLS_ID


def config_from(cfg: dict) -> UpstreamConfig:
    """An UpstreamConfig from a config mapping, naming unknown keys."""
    fields = {f.name for f in dataclasses.fields(UpstreamConfig)}
    unknown = set(cfg) - fields
    if unknown:
        raise ValueError(
            f"upstream: unknown keys {sorted(unknown)}, accepted keys: {sorted(fields)}"
        )
    return UpstreamConfig(**cfg)


def split_of(key: str) -> str:
    """The fixed split of a document: 98 / 1 / 1 by SHA-256 of its key."""
    bucket = int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") % 100
    return "train" if bucket < 98 else "val" if bucket == 98 else "test"


# --- documents: (key, read) pairs, key sorted --------------------------------------------

Document = tuple[str, Callable[[], bytes]]


def _reader(path: Path) -> Callable[[], bytes]:
    return path.read_bytes


def stdlib_documents(root: str = "") -> list[Document]:
    """The standard library's *.py files (see the module docstring), keyed by
    their path relative to the stdlib root."""
    base = Path(root or sysconfig.get_paths()["stdlib"])
    if not base.is_dir():
        raise FileNotFoundError(f"upstream: stdlib root {base} is not a directory")
    docs = []
    for folder, dirs, files in os.walk(base):
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS)
        for name in files:
            if name.endswith(".py"):
                path = Path(folder) / name
                docs.append((path.relative_to(base).as_posix(), _reader(path)))
    return sorted(docs, key=lambda doc: doc[0])


def _glob_root(pattern: str) -> Path:
    """The leading directories of a glob that hold no wildcard."""
    parts = []
    for part in Path(pattern).parts:
        if glob.has_magic(part):
            break
        parts.append(part)
    return Path(*parts) if parts else Path(".")


def file_documents(pattern: str) -> list[Document]:
    """The files matching a glob (`**` recursive), keyed relative to its fixed root."""
    root = _glob_root(pattern)
    paths = sorted(Path(p) for p in glob.glob(pattern, recursive=True) if Path(p).is_file())
    if not paths:
        raise FileNotFoundError(f"upstream.path: no file matches {pattern!r}")
    return [(p.relative_to(root).as_posix() if p != root else p.name, _reader(p)) for p in paths]


def parquet_documents(path: str) -> list[Document]:
    """The non-null rows of a Parquet file's `text` column, keyed by their text."""
    import pyarrow.parquet as pq

    if not Path(path).is_file():
        raise FileNotFoundError(f"upstream.path: no Parquet file {path}")
    schema = pq.read_schema(path)
    if "text" not in schema.names:
        raise ValueError(f"upstream.path: {path} has no 'text' column (columns: {schema.names})")
    texts = pq.read_table(path, columns=["text"]).column("text").to_pylist()
    docs = {}
    for text in texts:
        if text:
            data = text.encode()
            docs.setdefault(hashlib.sha256(data).hexdigest(), data)
    return [(key, (lambda d=data: d)) for key, data in sorted(docs.items())]


def documents(cfg: UpstreamConfig) -> list[Document]:
    # Looked up, not compared: "files" is also a task's name (tests/test_layout.py).
    readers = {"stdlib": stdlib_documents, "files": file_documents,
               "parquet": parquet_documents}
    return readers[cfg.source](cfg.path)


# --- tokens ----------------------------------------------------------------------------


def encode(data: bytes):
    """Bytes -> int16 token ids (b + 3)."""
    import torch

    return torch.frombuffer(bytearray(data), dtype=torch.uint8).to(torch.int16) + N_SPECIAL


def decode(ids) -> bytes:
    """Token ids -> bytes, dropping the specials."""
    return bytes(int(i) - N_SPECIAL for i in ids if int(i) >= N_SPECIAL)


def chunks(data: bytes, seq_len: int):
    """One document's [n, seq_len] sequences, the last right-padded with PAD_ID."""
    import torch

    ids = encode(data)
    n = -(-len(ids) // seq_len)
    padded = torch.full((n * seq_len,), PAD_ID, dtype=torch.int16)
    padded[: len(ids)] = ids
    return padded.view(n, seq_len)


def _split_sequences(docs: list[Document], cap: int, cfg: UpstreamConfig, split: str):
    """The sequences of one split's documents, in seeded order, up to `cap`."""
    import torch

    order = list(docs)
    random.Random(f"{cfg.seed}:{split}").shuffle(order)
    parts, used, total = [], [], 0
    for key, read in order:
        if cap and total >= cap:
            break
        data = read()
        if not data:
            continue
        seqs = chunks(data, cfg.seq_len)
        if cap:
            seqs = seqs[: cap - total]
        parts.append(seqs)
        used.append(key)
        total += len(seqs)
    tokens = torch.cat(parts) if parts else torch.empty(0, cfg.seq_len, dtype=torch.int16)
    return tokens, used


def build(cfg: UpstreamConfig) -> tuple[dict[str, Any], dict[str, list[str]]]:
    """The token tensors of every split and the documents each used."""
    by_split: dict[str, list[Document]] = {split: [] for split in SPLITS}
    for doc in documents(cfg):
        by_split[split_of(doc[0])].append(doc)
    caps = {"train": cfg.max_train_sequences, "val": cfg.max_val_sequences,
            "test": cfg.max_val_sequences}
    tokens, used = {}, {}
    for split in SPLITS:
        tokens[split], used[split] = _split_sequences(by_split[split], caps[split], cfg, split)
    return tokens, used


def split_files(data_dir: Path) -> dict[str, Path]:
    return {split: Path(data_dir) / f"{split}.pt" for split in SPLITS}


def prepare(cfg: UpstreamConfig, out_dir: Path) -> dict[str, int]:
    """Write the corpus's split tensors and manifest into out_dir, all or nothing.

    Returns the number of sequences per split.
    """
    import torch

    tokens, used = build(cfg)
    if not len(tokens["train"]):
        raise ValueError(f"upstream: the {cfg.source} corpus gave no training sequences")
    counts = {split: len(tokens[split]) for split in SPLITS}
    manifest = {"config": dataclasses.asdict(cfg), "vocab_size": VOCAB_SIZE,
                "sequences": counts, "documents": used}
    with replacing_directory(out_dir) as staged:
        for split, path in split_files(staged).items():
            # Through memory: torch.save writing a file itself reports a full disk
            # as a RuntimeError ("unexpected pos"), a file write as the OSError it is.
            buffer = io.BytesIO()
            torch.save(tokens[split], buffer)
            path.write_bytes(buffer.getbuffer())
        (staged / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True))
    return counts


def read_manifest(data_dir: Path) -> dict:
    path = Path(data_dir) / MANIFEST
    if not path.is_file():
        raise FileNotFoundError(f"upstream: {path} not found; run prepare first")
    return json.loads(path.read_text())


def load(cfg: UpstreamConfig, data_dir: Path) -> UpstreamData:
    """The prepared splits as int64 tensors; a clear error if they were prepared
    from another config."""
    import torch

    manifest = read_manifest(data_dir)
    if manifest["config"] != dataclasses.asdict(cfg):
        raise ValueError(
            f"upstream: {data_dir} was prepared with {manifest['config']}, not "
            f"{dataclasses.asdict(cfg)}; prepare it again"
        )
    splits = {}
    for split, path in split_files(data_dir).items():
        splits[split] = torch.load(path, weights_only=True).long()
    return UpstreamData(splits, cfg.seq_len)
