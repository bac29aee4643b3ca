"""The files task: the user's own CSV, Parquet and JSON-lines files through the
data contract (tasks/files.py): each format read, string and integer labels
mapped to classes, a Hugging Face tokenizer, the fingerprint that makes a
changed file new data, and one clear error for each thing wrong with a file."""

import csv
import dataclasses
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from scalestudy import tasks
from scalestudy.records import LRA_RELEASE, task_label
from scalestudy.tasks import contract, files

from tests.support import ROOT

EXAMPLE = ROOT / "tests/data/files"
SPLITS = ("train", "val", "test")


def decode(row) -> bytes:
    return bytes(int(i) - contract.N_SPECIAL for i in row if int(i) != contract.PAD_ID)


def example(split: str) -> pd.DataFrame:
    return pd.read_csv(EXAMPLE / f"{split}.csv", dtype=str, keep_default_na=False)


def write(frame: pd.DataFrame, path: Path) -> Path:
    """A frame as the file its suffix names."""
    path.parent.mkdir(parents=True, exist_ok=True)
    kind = files.FORMATS[path.suffix]
    if kind == "csv":
        frame.to_csv(path, index=False)
    elif kind == "parquet":
        frame.to_parquet(path, index=False)
    else:
        frame.to_json(path, orient="records", lines=True)
    return path


def config(tmp_path: Path, suffix: str = ".csv", frames: dict | None = None, **options) -> dict:
    """A files task's section naming train, val and test files written from
    `frames` (the example's by default)."""
    frames = frames or {split: example(split) for split in SPLITS}
    paths = {split: str(write(frame, tmp_path / f"{split}{suffix}"))
             for split, frame in frames.items()}
    return {**paths, "seq_len": 48, **options}


def prepare(cfg: dict, out: Path) -> dict:
    return tasks.prepare("files", cfg, out)


# --------------------------------------------------------------------------- reading


@pytest.mark.parametrize("suffix", [".csv", ".parquet", ".pq", ".jsonl", ".json", ".ndjson"])
def test_each_format_reads_the_example_as_bytes(tmp_path, suffix):
    cfg = config(tmp_path, suffix)
    manifest = prepare(cfg, tmp_path / "out")
    assert manifest["classes"] == ["cooking", "sport", "weather"]
    assert manifest["n_classes"] == 3 and manifest["vocab"] == "bytes"
    assert manifest["vocab_size"] == contract.BYTE_VOCAB  # the upstream corpus's
    assert manifest["mask_ratio"] == 0.15 and manifest["seq_len"] == 48
    assert {s: m["n"] for s, m in manifest["splits"].items()} == {"train": 48, "val": 12,
                                                                  "test": 12}
    data = tasks.load("files", cfg, tmp_path / "out")
    tokens, labels = data.splits["train"]
    train = example("train")
    for row, label, (text, topic) in zip(tokens, labels.tolist(),
                                         train.itertuples(index=False), strict=True):
        assert decode(row) == text.encode()[:48]  # cut at seq_len, in the file's order
        assert manifest["classes"][label] == topic


def test_the_data_is_the_users_own_never_lra_nor_a_stand_in(tmp_path):
    cfg = config(tmp_path)
    manifest = prepare(cfg, tmp_path / "out")
    assert manifest["standin"] is None
    assert manifest["data"] == (f"the user's files: {cfg['train']}, {cfg['val']}, "
                                f"{cfg['test']}")
    data = tasks.load("files", cfg, tmp_path / "out")
    assert data.label == manifest["data"] == tasks.data_label(manifest)
    assert data.label != LRA_RELEASE
    runs = pd.DataFrame({"task": ["files"], "task_data": [data.label]})
    assert task_label(runs, "files") == "files"  # not "(stand-in)"


def test_integer_labels_sort_numerically_and_strings_as_strings(tmp_path):
    texts = [f"example {i}" for i in range(6)]
    frames = {split: pd.DataFrame({"text": texts, "label": [10, 2, 1, 10, 2, 1]})
              for split in SPLITS}
    for suffix in (".csv", ".parquet", ".jsonl"):
        cfg = config(tmp_path / suffix[1:], suffix, frames)
        manifest = prepare(cfg, tmp_path / suffix[1:] / "out")
        assert manifest["classes"] == ["1", "2", "10"], suffix  # not "1", "10", "2"
        labels = tasks.load("files", cfg, tmp_path / suffix[1:] / "out").splits["test"][1]
        assert labels.tolist() == [2, 1, 0, 2, 1, 0]
    words = {split: pd.DataFrame({"text": texts, "label": ["b", "a", "10", "2", "a", "b"]})
             for split in SPLITS}
    assert prepare(config(tmp_path / "s", frames=words), tmp_path / "s/out")["classes"] == [
        "10", "2", "a", "b"]


def test_an_integer_column_with_gaps_reads_as_integers(tmp_path):
    """pandas writes an integer column with a missing value as floats: an
    integral float is that integer (the missing value is refused elsewhere)."""
    rows = pd.DataFrame({"text": ["a", "b", "c"], "label": [1.0, 0.0, 1.0]})
    cfg = config(tmp_path, ".parquet", {split: rows for split in SPLITS})
    assert prepare(cfg, tmp_path / "out")["classes"] == ["0", "1"]


def test_columns_are_named_by_the_options(tmp_path):
    frames = {split: example(split).rename(columns={"text": "sentence", "label": "topic"})
              .assign(other=1) for split in SPLITS}
    cfg = config(tmp_path, ".jsonl", frames, text_column="sentence", label_column="topic")
    assert prepare(cfg, tmp_path / "out")["classes"] == ["cooking", "sport", "weather"]


def test_without_a_val_file_validation_is_a_fixed_tenth_of_train(tmp_path):
    cfg = {**config(tmp_path), "val": ""}
    manifest = prepare(cfg, tmp_path / "out")
    assert {s: m["n"] for s, m in manifest["splits"].items()} == {"train": 44, "val": 4,
                                                                  "test": 12}
    assert manifest["data"].endswith(f"10% of {cfg['train']}, {cfg['test']}")
    data = tasks.load("files", cfg, tmp_path / "out")
    seen = sorted(decode(row) for split in ("train", "val") for row in data.splits[split][0])
    assert seen == sorted(t.encode()[:48] for t in example("train")["text"])
    again = tasks.prepare("files", cfg, tmp_path / "again")
    assert again["checksum"] == manifest["checksum"]  # the same rows every time


def test_a_hugging_face_tokenizer_read_from_a_local_file(tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    vocab = {"[UNK]": 0, "soup": 1, "rain": 2, "goal": 3, "the": 4}
    tokenizer = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    (tmp_path / "tok").mkdir()
    tokenizer.save(str(tmp_path / "tok/tokenizer.json"))
    rows = pd.DataFrame({"text": ["the soup", "rain rain x", "the goal"],
                         "label": ["food", "weather", "sport"]})
    cfg = config(tmp_path, ".csv", {split: rows for split in SPLITS},
                 tokenizer=str(tmp_path / "tok"))  # a directory holding tokenizer.json
    manifest = prepare(cfg, tmp_path / "out")
    assert manifest["vocab_size"] == 5 + contract.N_SPECIAL
    assert manifest["vocab"].startswith("tokenizer:")  # no byte table transfers to it
    tokens = tasks.load("files", cfg, tmp_path / "out").splits["train"][0].numpy()
    assert tokens[:, :3].tolist() == [[7, 4, 0], [5, 5, 3], [7, 6, 0]]
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(ValueError, match=r"tasks.files.tokenizer: .*bad.json is not a readable "
                                         r"Hugging Face tokenizer"):
        tasks.task_config("files", {**cfg, "tokenizer": str(tmp_path / "bad.json")})


def test_a_tokenizer_without_the_tokenizers_package_names_the_extra(tmp_path, monkeypatch):
    (tmp_path / "tokenizer.json").write_text("{}")
    monkeypatch.setitem(sys.modules, "tokenizers", None)  # import fails
    cfg = config(tmp_path, tokenizer=str(tmp_path / "tokenizer.json"))
    with pytest.raises(ValueError, match=r"needs the tokenizers package: pip install "
                                         r"'scalestudy\[tokenizers\]'"):
        tasks.task_config("files", cfg)  # when a study is checked, before any job
    with pytest.raises(ValueError, match=r"tasks.files.tokenizer: .*nowhere is neither a "
                                         r"tokenizer.json nor a directory holding one"):
        tasks.task_config("files", {**cfg, "tokenizer": str(tmp_path / "nowhere")})


# --------------------------------------------------------------------------- a changed file


def test_a_changed_file_changes_the_spec_and_its_data_is_prepared_again(tmp_path):
    cfg = config(tmp_path)
    before = tasks.stated_options(tasks.task_config("files", cfg))
    assert len(before["fingerprint"]) == 64
    prepare(before, tmp_path / "out")  # as the workflow's job: the spec's config
    with open(cfg["train"], "a") as f:
        f.write("Stir the soup gently.,cooking\n")
    after = tasks.stated_options(tasks.task_config("files", cfg))
    assert after["fingerprint"] != before["fingerprint"]  # a new run spec, config_hash
    # The data prepared from the old file is not the new spec's...
    with pytest.raises(ValueError, match="prepare it again"):
        tasks.load("files", after, tmp_path / "out")
    # ...and a job of the old spec does not read the new file as the old one.
    with pytest.raises(ValueError, match=r"train.csv, .*val.csv, .*test.csv changed since the "
                                         r"study was planned"):
        prepare(before, tmp_path / "out2")
    assert prepare(after, tmp_path / "out")["splits"]["train"]["n"] == 49
    # Touched, not changed: the same fingerprint.
    Path(cfg["val"]).touch()
    assert tasks.stated_options(tasks.task_config("files", cfg)) == after


def test_the_contract_a_failed_prepare_leaves_the_cache_whole(tmp_path):
    cfg = config(tmp_path)
    out = tmp_path / "cache"
    manifest = prepare(cfg, out)
    assert json.loads((out / "manifest.json").read_text()) == manifest
    assert contract.read(out)[0]["checksum"] == manifest["checksum"]
    Path(cfg["test"]).write_text("text,label\nsomething,unheard of\n")
    with pytest.raises(ValueError, match="unheard of"):
        prepare(cfg, out)
    assert json.loads((out / "manifest.json").read_text()) == manifest
    assert sorted(p.name for p in out.iterdir()) == ["manifest.json", "test.npz", "train.npz",
                                                     "val.npz"]


def test_the_default_config_names_no_file_and_a_study_of_it_is_refused():
    default = files.FilesConfig()
    assert default.fingerprint == "" and default.source == "files"
    tasks.check_releases({"text": tasks.task_config("text", {})})  # nothing to refuse
    with pytest.raises(tasks.MissingRelease, match=r"task files reads your own data files, but "
                                                   r"tasks.files.train and tasks.files.test"):
        tasks.check_releases({"files": default})
    with pytest.raises(ValueError, match=r"tasks.files.test: not set"):
        tasks.task_config("files", {"train": str(EXAMPLE / "train.csv")})


# --------------------------------------------------------------------------- errors


def rows_file(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def with_train(tmp_path: Path, name: str, text: str, **options) -> dict:
    """The example's val and test with a train file of `text`."""
    return {**config(tmp_path), "train": rows_file(tmp_path, name, text), **options}


def fails(cfg: dict, out: Path, pattern: str) -> str:
    with pytest.raises(ValueError, match=pattern) as err:
        prepare(cfg, out)
    assert "\n" not in str(err.value)  # one line
    assert not out.exists()
    return str(err.value)


def test_a_missing_file_and_a_suffix_not_read(tmp_path):
    cfg = config(tmp_path)
    fails({**cfg, "train": str(tmp_path / "absent.csv")}, tmp_path / "out",
          r"tasks.files.train: .*absent.csv not found; accepted: .csv, .parquet")
    fails({**cfg, "val": "relative/val.csv"}, tmp_path / "out",
          r"tasks.files.val: relative/val.csv \(/.*/relative/val.csv\) not found")
    fails({**cfg, "test": rows_file(tmp_path, "test.xlsx", "x")}, tmp_path / "out",
          r"tasks.files.test: .*test.xlsx has suffix '.xlsx'; accepted: .csv, .parquet or .pq, "
          r".jsonl, .json or .ndjson")


@pytest.mark.parametrize("name", ["empty.csv", "empty.jsonl", "empty.parquet"])
def test_an_empty_file(tmp_path, name):
    fails(with_train(tmp_path, name, ""), tmp_path / "out", rf"{name}: empty file")


@pytest.mark.parametrize("name, text", [("header.csv", "text,label\n"),
                                        ("blank.jsonl", "\n\n")])
def test_a_file_without_rows(tmp_path, name, text):
    fails(with_train(tmp_path, name, text), tmp_path / "out", rf"{name}: no rows")


def test_a_parquet_file_without_rows(tmp_path):
    path = write(example("train").iloc[:0], tmp_path / "none.parquet")
    fails({**config(tmp_path), "train": str(path)}, tmp_path / "out", r"none.parquet: no rows")


@pytest.mark.parametrize("suffix", [".csv", ".parquet", ".jsonl"])
def test_a_missing_column_lists_the_columns_present(tmp_path, suffix):
    frames = {split: example(split).rename(columns={"label": "topic"}) for split in SPLITS}
    cfg = config(tmp_path, suffix, frames)
    fails(cfg, tmp_path / "out", rf"train{suffix}: no column 'label' \(tasks.files."
                                 rf"label_column\); its columns: 'text', 'topic'")
    fails({**cfg, "text_column": "body", "label_column": "topic"}, tmp_path / "out",
          rf"train{suffix}: no column 'body' \(tasks.files.text_column\)")


def test_a_json_line_without_the_column_after_the_first(tmp_path):
    text = '{"text": "a", "label": 1}\n{"text": "b"}\n'
    fails(with_train(tmp_path, "t.jsonl", text), tmp_path / "out",
          r"t.jsonl:2: no key 'label' \(tasks.files.label_column\)")


@pytest.mark.parametrize("name, text, pattern", [
    ("gap.csv", "text,label\na,x\nb,\n", r"gap.csv: row 2: label empty; accepted: a string or "
                                         r"an integer"),
    ("null.jsonl", '{"text": "a", "label": "x"}\n{"text": "b", "label": null}\n',
     r"null.jsonl: row 2: label empty"),
    ("half.jsonl", '{"text": "a", "label": 1.5}\n', r"row 1: label 1.5 is not an integer"),
    ("list.jsonl", '{"text": "a", "label": [1]}\n', r"row 1: label \[1\] \(list\); accepted"),
])
def test_an_empty_or_unusable_label(tmp_path, name, text, pattern):
    fails(with_train(tmp_path, name, text), tmp_path / "out", pattern)


def test_a_missing_label_in_parquet_is_named(tmp_path):
    rows = pd.DataFrame({"text": ["a", "b", "c"], "label": [1.0, np.nan, 0.0]})
    path = write(rows, tmp_path / "nan.parquet")
    fails({**config(tmp_path), "train": str(path)}, tmp_path / "out",
          r"nan.parquet: row 2: label empty")


@pytest.mark.parametrize("name, text, pattern", [
    ("num.jsonl", '{"text": 12, "label": "x"}\n', r"num.jsonl: row 1: text 12 \(int\); "
                                                  r"accepted: a string"),
    ("none.jsonl", '{"text": "a", "label": "x"}\n{"text": null, "label": "y"}\n',
     r"none.jsonl: row 2: text empty"),
    ("blank.csv", "text,label\n,x\n", r"blank.csv: row 1: empty text"),
])
def test_non_text_in_the_text_column(tmp_path, name, text, pattern):
    fails(with_train(tmp_path, name, text), tmp_path / "out", pattern)


def test_a_parquet_text_column_that_is_not_text(tmp_path):
    rows = pd.DataFrame({"text": [1, 2], "label": ["a", "b"]})
    path = write(rows, tmp_path / "ints.parquet")
    fails({**config(tmp_path), "train": str(path)}, tmp_path / "out",
          r"ints.parquet: column 'text' \(tasks.files.text_column\) holds int64, not text")


def test_fewer_than_two_classes(tmp_path):
    fails(with_train(tmp_path, "one.csv", "text,label\na,x\nb,x\n"), tmp_path / "out",
          r"one.csv: column 'label' has 1 distinct label \('x'\); a classifier needs at "
          r"least 2")


def test_labels_of_val_or_test_unknown_to_train(tmp_path):
    cfg = config(tmp_path)
    path = rows_file(tmp_path, "odd.csv", "text,label\n" + "".join(
        f"t{i},{label}\n" for i, label in enumerate(["sport", "music", "art", "zoo", "b", "c",
                                                    "d", "music"])))
    message = fails({**cfg, "test": path}, tmp_path / "out",
                    r"odd.csv: column 'label' has labels the train file .*train.csv does not: "
                    r"'art', 'b', 'c', 'd', 'music' \(and 1 more\); its labels: 'cooking', "
                    r"'sport', 'weather'")
    assert "'zoo'" not in message  # the first few only


def test_token_arrays_over_max_gb_are_refused_with_their_size(tmp_path):
    cfg = config(tmp_path, max_gb=2e-6)  # about 2 KiB: 48 rows x 48 tokens x 2 bytes is more
    message = fails(cfg, tmp_path / "out",
                    r"train.csv: its first 48 rows make 0.00 GiB of token arrays .*rows x "
                    r"seq_len 48 x 2 bytes\), over tasks.files.max_gb = 2e-06; raise max_gb")
    assert "lower seq_len" in message


def test_files_that_are_not_what_their_suffix_says(tmp_path):
    (tmp_path / "latin.csv").write_bytes("text,label\ncaf\xe9,x\nb,y\n".encode("latin-1"))
    fails({**config(tmp_path), "train": str(tmp_path / "latin.csv")}, tmp_path / "out",
          r"latin.csv: not UTF-8 text")
    fails(with_train(tmp_path, "bad.jsonl", '{"text": "a", "label": 1}\n{oops\n'),
          tmp_path / "out", r"bad.jsonl:2: not JSON \(.*\); accepted: JSON lines")
    fails(with_train(tmp_path, "array.json", '[{"text": "a", "label": 1}]\n'),
          tmp_path / "out", r"array.json:1: not a JSON object \(a list\)")
    fails(with_train(tmp_path, "junk.parquet", "not parquet"), tmp_path / "out",
          r"junk.parquet: not a readable Parquet file")


def test_a_csv_with_quoted_commas_and_newlines(tmp_path):
    path = tmp_path / "quoted.csv"
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerows([["label", "text"], ["a", 'one, "two"\nthree'], ["NA", "null"]])
    cfg = {**config(tmp_path), "train": str(path), "val": str(path), "test": str(path)}
    manifest = prepare(cfg, tmp_path / "out")
    assert manifest["classes"] == ["NA", "a"]  # "NA" is a label, not a missing value
    tokens = tasks.load("files", cfg, tmp_path / "out").splits["train"][0]
    assert [decode(r) for r in tokens] == [b'one, "two"\nthree', b"null"]


def test_the_config_dataclass_declares_every_option_a_study_states():
    declared = {f.name for f in dataclasses.fields(files.FilesConfig)}
    assert declared - set(tasks.stated_options(files.FilesConfig())) == set()
    from scalestudy.options import defaults

    assert set(defaults(files.FilesConfig)) == declared - {"fingerprint"}  # computed, not stated
