"""The offline text of the Text and Retrieval stand-ins: byte windows of the
running Python's standard-library sources (the documents tasks/upstream.py
reads: every `*.py` under `sysconfig.get_paths()["stdlib"]`, sorted, without
test/, idlelib/ and site-packages/), so it needs no download and is the same on
every machine with the same Python.

Each file is cut into non-overlapping windows of `seq_len` bytes (its last,
shorter one kept when it has at least half of them). A file belongs to exactly
one split, 80/10/10 by a stable hash of its path, so no split sees text of
another split's file. Caveat: the `upstream` prior pretrains on these same
files (without labels).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from .upstream import stdlib_documents

SPLIT_FRACTIONS = {"train": 80, "val": 10, "test": 10}


def split_of(key: str) -> str:
    """A document's split, 80/10/10 by SHA-256 of its key."""
    bucket = int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") % 100
    return "train" if bucket < 80 else "val" if bucket < 90 else "test"


@dataclass(frozen=True)
class Document:
    key: str  # path relative to the stdlib root, e.g. "email/message.py"
    windows: tuple[bytes, ...]

    @property
    def package(self) -> str:
        """Its top-level package ("" for a top-level module)."""
        head, sep, _ = self.key.partition("/")
        return head if sep else ""


def windows(data: bytes, seq_len: int) -> tuple[bytes, ...]:
    cuts = [data[i: i + seq_len] for i in range(0, len(data), seq_len)]
    return tuple(cut for cut in cuts if 2 * len(cut) >= seq_len)


def documents(seq_len: int, root: str = "") -> dict[str, list[Document]]:
    """The stdlib's files with at least one window, by split."""
    by_split: dict[str, list[Document]] = {split: [] for split in SPLIT_FRACTIONS}
    for key, read in stdlib_documents(root):
        cut = windows(read(), seq_len)
        if cut:
            by_split[split_of(key)].append(Document(key, cut))
    return by_split
