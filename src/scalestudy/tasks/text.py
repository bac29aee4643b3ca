"""LRA Text (Tay et al. 2021): byte-level document classification of IMDb
reviews (Maas et al. 2011), 2 classes, sequences cut at 4,000 bytes.

`source: lra` reads the standard `aclImdb/{train,test}/{pos,neg}/*.txt` layout
(aclImdb_v1.tar.gz) under `lra_dir`: label 1 for pos, 0 for neg; one file per
review, its bytes as tokens (id = byte + 3), cut at `seq_len`. LRA evaluates
on the test split and has no validation split of its own; here validation is a
fixed 10% of train (the reviews in path order, permuted with seed 0).

`source: stdlib` is the offline stand-in, not LRA: byte windows of the Python
standard library's sources (tasks/pycorpus.py) classified by the package they
come from, among `packages` (default asyncio and email: two classes, as IMDb).
Each split is balanced (every class cut to the rarest one's count) and capped
at n_train / n_val / n_test examples, drawn with `seed`.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..options import option, source_defaults
from . import pycorpus
from .contract import BYTE_VOCAB, BYTES, SPLITS, Split, byte_ids, make_split

SOURCES = ("stdlib", "lra")
LABELS = {"neg": 0, "pos": 1}
VOCAB_SIZE = BYTE_VOCAB
VOCAB_NAME = BYTES


@dataclass(frozen=True)
class TextConfig:
    """LRA Text: byte-level classification of IMDb reviews (source lra), or the
    stand-in (source stdlib) of byte windows of the Python standard library's
    sources classified by package."""

    source: str = option("stdlib", """stdlib: the offline stand-in (no download); lra: the
        reviews of aclImdb/{train,test}/{pos,neg}/*.txt under lra_dir (validation = a fixed 10%
        of train)""", enum=SOURCES)
    lra_dir: str = option("data/lra_release/imdb", """directory holding aclImdb/ (unpacked
        aclImdb_v1.tar.gz); used when source is lra""")
    seq_len: int | None = option(None, "bytes per document (longer ones are cut)",
                                 by_source={"stdlib": 512, "lra": 4000}, minimum=2)
    packages: tuple[str, ...] = option(("asyncio", "email"), """stdlib: the standard-library
        packages whose files are the classes (one class each)""", minItems=2, uniqueItems=True)
    stdlib_dir: str = option("", """stdlib; the standard library to read ("" for the running
        Python's)""")
    n_train: int = option(2000, "stand-in; training examples (at most)", minimum=1)
    n_val: int = option(200, "stand-in; validation examples (at most)", minimum=1)
    n_test: int = option(200, "stand-in; test examples (at most)", minimum=1)
    seed: int = option(0, "seed of the stand-in's data (not of the training runs)", minimum=0)

    def __post_init__(self) -> None:
        source_defaults(self)
        object.__setattr__(self, "packages", tuple(self.packages))


def release_files(cfg: TextConfig) -> list[str]:
    return [f"aclImdb/{split}/{label}" for split in ("train", "test") for label in LABELS]


def release_source(cfg: TextConfig) -> tuple[str | None, str]:
    # LRA reads IMDb from TensorFlow Datasets, which downloads this archive.
    return ("https://ai.stanford.edu/~amaas/data/sentiment/aclImdb_v1.tar.gz",
            "its aclImdb/ directory")


def standin(cfg: TextConfig) -> str | None:
    if cfg.source == "lra":
        return None
    return (f"stand-in for LRA Text: byte windows of Python standard-library sources "
            f"classified by package ({', '.join(cfg.packages)})")


def n_classes(cfg: TextConfig) -> int:
    return len(LABELS) if cfg.source == "lra" else len(cfg.packages)


def read_reviews(lra_dir: Path, split: str) -> tuple[list[bytes], list[int]]:
    """Every review of aclImdb/<split>/ (neg, then pos), in path order."""
    docs, labels = [], []
    for name, label in LABELS.items():
        folder = Path(lra_dir) / "aclImdb" / split / name
        if not folder.is_dir():
            raise FileNotFoundError(f"IMDb release: expected the directory "
                                    f"aclImdb/{split}/{name} in {lra_dir}")
        paths = sorted(folder.glob("*.txt"))
        if not paths:
            raise FileNotFoundError(f"IMDb release: no review files (*.txt) in {folder}")
        for path in paths:
            data = path.read_bytes()
            if not data.strip():
                raise ValueError(f"{path}: empty review")
            docs.append(data)
            labels.append(label)
    return docs, labels


def read_release(cfg: TextConfig) -> dict[str, Split]:
    train_docs, train_labels = read_reviews(cfg.lra_dir, "train")
    order = np.random.default_rng(0).permutation(len(train_docs))
    n_val = len(order) // 10
    pick = {"train": order[: len(order) - n_val], "val": order[len(order) - n_val:]}
    splits = {split: make_split([byte_ids(train_docs[i]) for i in index],
                                [train_labels[i] for i in index], cfg.seq_len)
              for split, index in pick.items()}
    test_docs, test_labels = read_reviews(cfg.lra_dir, "test")
    splits["test"] = make_split([byte_ids(d) for d in test_docs], test_labels, cfg.seq_len)
    return splits


def balanced(by_class: list[list[bytes]], n: int, rng: random.Random) -> list[tuple[bytes, int]]:
    """Up to n examples, as many of each class (the rarest class bounds them)."""
    per_class = min(n // len(by_class), *map(len, by_class))
    chosen = [(w, label) for label, pool in enumerate(by_class)
              for w in rng.sample(pool, per_class)]
    rng.shuffle(chosen)
    return chosen


def stdlib_standin(cfg: TextConfig) -> dict[str, Split]:
    docs = pycorpus.documents(cfg.seq_len, cfg.stdlib_dir)
    sizes = {"train": cfg.n_train, "val": cfg.n_val, "test": cfg.n_test}
    splits = {}
    for split in SPLITS:
        by_class = [[w for doc in docs[split] if doc.package == package for w in doc.windows]
                    for package in cfg.packages]
        empty = [p for p, pool in zip(cfg.packages, by_class, strict=True) if not pool]
        if empty:
            raise ValueError(f"tasks.text.packages: no {split} text for {', '.join(empty)} in "
                             f"the standard library (seq_len {cfg.seq_len})")
        chosen = balanced(by_class, sizes[split], random.Random(f"{cfg.seed}:{split}"))
        splits[split] = make_split([byte_ids(w) for w, _ in chosen],
                                   [label for _, label in chosen], cfg.seq_len)
    return splits


def build(cfg: TextConfig) -> dict[str, Split]:
    return read_release(cfg) if cfg.source == "lra" else stdlib_standin(cfg)
