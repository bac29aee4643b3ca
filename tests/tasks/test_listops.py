"""ListOps: LRA's generator rules, tokenisation, and the release-file reader."""


import pytest

from scalestudy import tasks
from scalestudy.tasks import listops

from tests.support import DATA

REFERENCE = DATA / "lra_listops"
SMALL = listops.ListOpsConfig(n_train=300, n_val=50, n_test=50, max_depth=5, max_args=5,
                              min_length=8, max_length=60, seed=3)


def evaluate(tokens: list[str]) -> int:
    """An independent ListOps evaluator over LRA tokens, with an explicit stack."""
    stack: list[tuple[str, list[int]]] = []
    result = None
    for token in tokens:
        if token.startswith("["):
            stack.append((token, []))
        elif token == "]":
            op, args = stack.pop()
            value = {
                "[MIN": lambda a: min(a),
                "[MAX": lambda a: max(a),
                "[MED": lambda a: sorted(a)[len(a) // 2] if len(a) % 2
                else (sorted(a)[len(a) // 2 - 1] + sorted(a)[len(a) // 2]) // 2,
                "[SM": lambda a: sum(a) % 10,
            }[op](args)
            if stack:
                stack[-1][1].append(value)
            else:
                result = value
        else:
            digit = int(token)
            if stack:
                stack[-1][1].append(digit)
            else:
                result = digit
    assert not stack
    return result


def test_generated_labels_match_an_independent_evaluator():
    for split in listops.generate(SMALL).values():
        for source, label in split:
            assert evaluate(listops.tokenize(source)) == label


def test_generator_respects_length_bounds_and_is_deterministic():
    data = listops.generate(SMALL)
    assert [len(data[s]) for s in listops.SPLITS] == [300, 50, 50]
    lengths = [len(listops.tokenize(src)) for split in data.values() for src, _ in split]
    assert min(lengths) > SMALL.min_length and max(lengths) < SMALL.max_length
    sources = [src for split in data.values() for src, _ in split]
    assert len(set(sources)) == len(sources)  # distinct trees, disjoint splits
    assert listops.generate(SMALL) == data


def test_generator_uses_only_lra_vocabulary_and_depth():
    data = listops.generate(SMALL)
    tokens = {t for split in data.values() for src, _ in split for t in src.split()}
    assert tokens <= {"(", ")", "]", "[MIN", "[MAX", "[MED", "[SM", *map(str, range(10))}
    for src, _ in data["train"]:
        depth = best = 0
        for t in listops.tokenize(src):
            depth += t.startswith("[")
            depth -= t == "]"
            best = max(best, depth)
        assert best <= SMALL.max_depth


def test_tokenize_drops_parentheses():
    assert listops.tokenize("( ( [MAX 2 ) 9 ) ]") == ["[MAX", "2", "9", "]"]


@pytest.mark.parametrize("split", listops.SPLITS)
def test_reader_gets_every_label_of_the_lra_release_right(split):
    rows = listops.read_split(REFERENCE / f"basic_{split}.tsv")
    assert len(rows) == {"train": 200, "val": 50, "test": 50}[split]
    for tokens, label in rows:
        assert evaluate(tokens) == label


def test_lra_source_loads_every_example_as_tensors(tmp_path):
    cfg = {"source": "lra", "lra_dir": str(REFERENCE), "max_length": 2000}
    manifest = tasks.prepare("listops", cfg, tmp_path / "listops")
    assert manifest["source"] == "lra" and manifest["standin"] is None
    assert {s: m["n"] for s, m in manifest["splits"].items()} == {"train": 200, "val": 50,
                                                                  "test": 50}
    data = tasks.load("listops", cfg, tmp_path / "listops")
    for split in listops.SPLITS:
        rows = listops.read_split(REFERENCE / f"basic_{split}.tsv")
        tokens, labels = data.splits[split]
        assert tokens.shape == (len(rows), 2000) and labels.tolist() == [y for _, y in rows]
        for row, (words, _) in zip(tokens, rows, strict=True):
            assert [listops.VOCAB[i] for i in row[: len(words)]] == words
            assert (row[len(words):] == listops.PAD_ID).all()


def test_generated_examples_are_the_cached_ones(tmp_path):
    cfg = {"n_train": 40, "n_val": 10, "n_test": 10, "max_depth": 3, "max_args": 3,
           "min_length": 3, "max_length": 30}
    manifest = tasks.prepare("listops", cfg, tmp_path / "d")
    assert manifest["standin"].startswith("stand-in for LRA ListOps")
    expected = listops.generate(listops.ListOpsConfig(**cfg))
    data = tasks.load("listops", cfg, tmp_path / "d")
    for split, examples in expected.items():
        tokens, labels = data.splits[split]
        decoded = [" ".join(listops.VOCAB[i] for i in row if i != listops.PAD_ID)
                   for row in tokens]
        assert decoded == [" ".join(listops.tokenize(s)) for s, _ in examples]
        assert labels.tolist() == [y for _, y in examples]


def test_bad_input_fails_clearly(tmp_path):
    with pytest.raises(FileNotFoundError, match=f"expected basic_train.tsv in {tmp_path}"):
        tasks.prepare("listops", {"source": "lra", "lra_dir": str(tmp_path)}, tmp_path / "out")
    assert not (tmp_path / "out").exists()  # no partial output
    bad = tmp_path / "bad.tsv"
    bad.write_text("Source\tTarget\n[MAX 2 [FOO ]\t3\n")
    with pytest.raises(ValueError, match=r"bad.tsv:2: unknown tokens \['\[FOO'\]"):
        listops.read_split(bad)
    with pytest.raises(ValueError, match="tasks.listops: unknown keys"):
        tasks.prepare("listops", {"depth": 3}, tmp_path / "out")
    with pytest.raises(ValueError, match="task: unknown 'x', accepted values: listops, text"):
        tasks.prepare("x", {}, tmp_path / "out")
