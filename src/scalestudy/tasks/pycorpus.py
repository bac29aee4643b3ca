"""The offline text of the Text and Retrieval stand-ins: byte windows of the
running Python's standard-library sources (the documents tasks/upstream.py
reads: every `*.py` under `sysconfig.get_paths()["stdlib"]`, sorted, without
test/, idlelib/ and site-packages/), so it needs no download and is the same on
every machine with the same Python.

Each file is cut into non-overlapping windows of `seq_len` bytes (its last,
shorter one kept when it has at least half of them). A file belongs to exactly
one split, so no split sees text of another split's file; the files of each
package (of at least 3 files) are split 80/10/10, in a fixed order of their
paths' hashes, so every package has text in every split. Caveat: the
`upstream` prior pretrains on these same files (without labels).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from .upstream import stdlib_documents

SPLITS = ("train", "val", "test")
HELD_OUT = 0.1  # of each package's files, for val and again for test


def _order(key: str) -> bytes:
    return hashlib.sha256(key.encode()).digest()


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
    """The stdlib's files with at least one window, by split: within each
    package, in the (fixed) order of their path's SHA-256, 10% of its files
    (at least one) go to test, 10% (at least one) to val, the rest to train."""
    by_package: dict[str, list[Document]] = {}
    for key, read in stdlib_documents(root):
        cut = windows(read(), seq_len)
        if cut:
            doc = Document(key, cut)
            by_package.setdefault(doc.package, []).append(doc)
    by_split: dict[str, list[Document]] = {split: [] for split in SPLITS}
    for docs in by_package.values():
        docs.sort(key=lambda doc: _order(doc.key))
        n_held = max(1, round(HELD_OUT * len(docs))) if len(docs) >= 3 else 0
        by_split["test"] += docs[:n_held]
        by_split["val"] += docs[n_held: 2 * n_held]
        by_split["train"] += docs[2 * n_held:]
    return by_split
