"""LRA Retrieval (Tay et al. 2021): do two documents match? The ACL Anthology
Network (Radev et al. 2013) citation task, byte-level, two documents per example
of up to 4,000 bytes each, 2 classes. The model encodes each document with the
backbone and classifies [u, v, u*v, u-v] of the pooled pair (models/heads.py).

`source: lra` reads the release's `new_aan_pairs.{train,eval,test}.tsv` in
`lra_dir` (no header; tab-separated label, id1, id2, text1, text2; label 1 when
the papers are linked), eval being the validation split; each text's UTF-8
bytes are its tokens (id = byte + 3), cut at `seq_len`.

`source: stdlib` is the offline stand-in, not LRA: pairs of byte windows of the
Python standard library's sources (tasks/pycorpus.py); label 1 when both
windows come from the same file, 0 when from two different files. Half of each
split is positive; files are split 80/10/10, so no pair crosses splits.
"""

from __future__ import annotations

import csv
import random
import sys
from dataclasses import dataclass
from pathlib import Path

from ..options import option, source_defaults
from . import pycorpus
from .contract import BYTE_VOCAB, BYTES, SPLITS, Split, byte_ids, make_split

SOURCES = ("stdlib", "lra")
FILES = {"train": "new_aan_pairs.train.tsv", "val": "new_aan_pairs.eval.tsv",
         "test": "new_aan_pairs.test.tsv"}
VOCAB_SIZE = BYTE_VOCAB
VOCAB_NAME = BYTES
N_CLASSES = 2


@dataclass(frozen=True)
class RetrievalConfig:
    """LRA Retrieval: do two documents match? ACL Anthology citation pairs
    (source lra), or the stand-in (source stdlib) of pairs of standard-library
    byte windows matched when from the same file; the model encodes both and
    classifies [u, v, u*v, u-v]."""

    source: str = option("stdlib", """stdlib: the offline stand-in (no download); lra: the
        release's new_aan_pairs.{train,eval,test}.tsv in lra_dir""", enum=SOURCES)
    lra_dir: str = option("data/lra_release/tsv_data", """directory holding
        new_aan_pairs.{train,eval,test}.tsv (tsv_data/ of lra_release.gz); used when source is
        lra""")
    seq_len: int | None = option(None, "bytes per document, each of the two",
                                 by_source={"stdlib": 512, "lra": 4000}, minimum=2)
    stdlib_dir: str = option("", """stdlib; the standard library to read ("" for the running
        Python's)""")
    n_train: int = option(2000, "stand-in; training examples (at most)", minimum=1)
    n_val: int = option(200, "stand-in; validation examples (at most)", minimum=1)
    n_test: int = option(200, "stand-in; test examples (at most)", minimum=1)
    seed: int = option(0, "seed of the stand-in's data (not of the training runs)", minimum=0)

    def __post_init__(self) -> None:
        source_defaults(self)


def release_files(cfg: RetrievalConfig) -> list[str]:
    return list(FILES.values())


def release_source(cfg: RetrievalConfig) -> tuple[str | None, str]:
    return None, "the new_aan_pairs.*.tsv files of its tsv_data/ directory"


def standin(cfg: RetrievalConfig) -> str | None:
    if cfg.source == "lra":
        return None
    return ("stand-in for LRA Retrieval: pairs of byte windows of Python standard-library "
            "sources, matched when from the same file")


def n_classes(cfg: RetrievalConfig) -> int:
    return N_CLASSES


def read_pairs(path: Path, seq_len: int) -> Split:
    """One release file, validated row by row."""
    if not path.is_file():
        raise FileNotFoundError(f"AAN release file not found: expected {path.name} in "
                                f"{path.parent}")
    docs1, docs2, labels = [], [], []
    csv.field_size_limit(sys.maxsize)  # the papers' texts are long fields
    with open(path, newline="", encoding="utf-8") as f:
        for line, row in enumerate(csv.reader(f, delimiter="\t"), start=1):
            if len(row) != 5:
                raise ValueError(f"{path}:{line}: expected 5 tab-separated fields "
                                 f"(label, id1, id2, text1, text2), got {len(row)}")
            try:
                label = float(row[0])
            except ValueError:
                raise ValueError(f"{path}:{line}: label {row[0]!r} is not a number") from None
            if label not in (0.0, 1.0):
                raise ValueError(f"{path}:{line}: label {row[0]!r} is not 0 or 1")
            labels.append(int(label))
            docs1.append(byte_ids(row[3].encode()))
            docs2.append(byte_ids(row[4].encode()))
    return make_split(docs1, labels, seq_len, docs2)


def stdlib_standin(cfg: RetrievalConfig) -> dict[str, Split]:
    docs = pycorpus.documents(cfg.seq_len, cfg.stdlib_dir)
    sizes = {"train": cfg.n_train, "val": cfg.n_val, "test": cfg.n_test}
    splits = {}
    for split in SPLITS:
        rng = random.Random(f"{cfg.seed}:{split}")
        files = docs[split]
        long_files = [doc for doc in files if len(doc.windows) >= 2]
        if len(files) < 2 or not long_files:
            raise ValueError(f"tasks.retrieval: too little standard-library text for a {split} "
                             f"split at seq_len {cfg.seq_len}")
        first, second, labels = [], [], []
        for i in range(sizes[split]):
            if i % 2:  # positive: two windows of one file
                a, b = rng.sample(rng.choice(long_files).windows, 2)
            else:  # negative: windows of two files
                doc_a, doc_b = rng.sample(files, 2)
                a, b = rng.choice(doc_a.windows), rng.choice(doc_b.windows)
            first.append(byte_ids(a))
            second.append(byte_ids(b))
            labels.append(i % 2)
        splits[split] = make_split(first, labels, cfg.seq_len, second)
    return splits


def build(cfg: RetrievalConfig) -> dict[str, Split]:
    if cfg.source == "lra":
        return {split: read_pairs(Path(cfg.lra_dir) / name, cfg.seq_len)
                for split, name in FILES.items()}
    return stdlib_standin(cfg)
