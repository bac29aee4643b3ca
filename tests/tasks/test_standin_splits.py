"""The Text and Retrieval stand-ins keep their splits apart:
every standard-library file belongs to one split, and no window of text (a
document, or either document of a pair) appears in two splits."""

from __future__ import annotations

import hashlib
import itertools

import pytest

from scalestudy.tasks import pycorpus, retrieval, text

SPLITS = ("train", "val", "test")


@pytest.fixture
def stdlib(tmp_path):
    """A small standard library whose windows are all different: three packages and
    top-level modules, every file's lines tagged with its own hash."""
    root = tmp_path / "lib"
    files = {"asyncio": 20, "email": 20, "json": 5, "": 4}
    for package, n in files.items():
        folder = root / package if package else root
        folder.mkdir(parents=True, exist_ok=True)
        for i in range(n):
            tag = hashlib.sha256(f"{package}/{i}".encode()).hexdigest()[:12]
            (folder / f"m{i}.py").write_text("".join(f"{tag} {j:03d}\n" for j in range(40)))
    return root


def decode(row) -> bytes:
    return bytes(int(t) - 3 for t in row if t != 0)


def windows_by_split(splits, pair: bool) -> dict[str, set[bytes]]:
    out = {}
    for name, split in splits.items():
        docs = [decode(r) for r in split.tokens]
        if pair:
            docs += [decode(r) for r in split.tokens2]
        out[name] = set(docs)
    return out


def assert_disjoint(sets: dict[str, set]) -> None:
    for a, b in itertools.combinations(SPLITS, 2):
        assert not sets[a] & sets[b], (a, b, sorted(sets[a] & sets[b])[:3])


def test_every_file_is_in_exactly_one_split(stdlib):
    docs = pycorpus.documents(24, str(stdlib))
    keys = {split: {d.key for d in docs[split]} for split in SPLITS}
    assert_disjoint(keys)
    everything = {p.relative_to(stdlib).as_posix() for p in stdlib.rglob("*.py")}
    assert set().union(*keys.values()) == everything
    # Held-out files in every package of >= 3 files; the rest train.
    for package in ("asyncio", "email", "json"):
        for split in SPLITS:
            assert any(d.package == package for d in docs[split]), (package, split)
    assert_disjoint({split: {w for d in docs[split] for w in d.windows} for split in SPLITS})


def test_the_real_standard_library_is_split_by_file():
    docs = pycorpus.documents(512)
    assert_disjoint({split: {d.key for d in docs[split]} for split in SPLITS})
    assert all(docs[split] for split in SPLITS)


def test_text_standin_splits_share_no_window(stdlib):
    cfg = text.TextConfig(seq_len=24, stdlib_dir=str(stdlib), packages=("asyncio", "email"),
                          n_train=400, n_val=400, n_test=400)
    splits = text.build(cfg)
    seen = windows_by_split(splits, pair=False)
    assert all(seen[s] for s in SPLITS)
    assert_disjoint(seen)
    # And each split's windows come from its own files only.
    docs = pycorpus.documents(24, str(stdlib))
    for split in SPLITS:
        own = {w for d in docs[split] for w in d.windows}
        assert seen[split] <= own, split


def test_retrieval_standin_splits_share_no_window(stdlib):
    cfg = retrieval.RetrievalConfig(seq_len=24, stdlib_dir=str(stdlib), n_train=200,
                                    n_val=60, n_test=60)
    splits = retrieval.build(cfg)
    seen = windows_by_split(splits, pair=True)
    assert_disjoint(seen)
    docs = pycorpus.documents(24, str(stdlib))
    for split in SPLITS:
        own = {w for d in docs[split] for w in d.windows}
        assert seen[split] <= own, split
