"""Your own data, without code: sequence classification from the user's CSV,
Parquet or JSON-lines files (`tasks.files.{train,val,test}`), one example a
row: its text in `text_column`, its label in `label_column`.

- Formats, by suffix: .csv (a header row, UTF-8), .parquet / .pq, .jsonl /
  .json / .ndjson (JSON lines: one object a line). Each file is read in
  chunks of rows, so a file larger than memory is read; what is kept is the
  token arrays, rows x seq_len x 2 bytes, refused past `max_gb`.
- Labels: strings or integers (a CSV's are text; an integral float, as pandas
  writes an integer column with gaps, is an integer). The classes are the
  distinct labels of the train file, sorted (numerically when every one is an
  integer), class i the i-th; a val or test label not among them is refused.
  The manifest lists them (`classes`).
- Tokens: bytes by default, the upstream corpus's vocabulary (BYTE_VOCAB, id =
  byte + 3; tasks/contract.py), so the upstream prior's token table and SPT
  apply; or a local Hugging Face tokenizer (`tokenizer`: a tokenizer.json, or
  a directory holding one: a saved tokenizer or a model's snapshot in the
  local Hugging Face cache), read with the `tokenizers` package, never
  downloaded: ids are its ids + 3, and its vocabulary is its own (named by the
  file's hash), so an upstream checkpoint's token table stays fresh.
- No val file: validation is a fixed 10% of train (its rows permuted with seed
  0), as LRA Text's.
- A changed file is new data: a config naming files carries their SHA-256
  (`fingerprint`, with the tokenizer's), computed when the config is made from
  a study (relative paths from the working directory, as lra_dir), so a run's
  spec and config_hash change with the files' contents and the workflow
  prepares the data and trains every run on it again; `build` refuses files
  that no longer match the fingerprint it was given.

The data is the user's: neither LRA's release nor a stand-in for it (its
manifest's `standin` is null, its `data` names the files, which records carry
as `task_data`). Every problem with the files is one ValueError naming the
file and what is accepted. Torch-free: numpy, pandas and pyarrow.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..options import option
from .contract import BYTE_VOCAB, BYTES, N_SPECIAL, SPLITS, Split, pad

SOURCES = ("files",)
VOCAB_SIZE = BYTE_VOCAB  # with the default tokenizer, bytes; a tokenizer's own otherwise
VOCAB_NAME = BYTES
BYTE_TOKENIZER = "bytes"
FORMATS = {".csv": "csv", ".parquet": "parquet", ".pq": "parquet", ".jsonl": "jsonl",
           ".json": "jsonl", ".ndjson": "jsonl"}
ACCEPTED = "accepted: .csv, .parquet or .pq, .jsonl, .json or .ndjson (JSON lines)"
CHUNK_ROWS = 20_000
GIB = 2**30
MAX_IDS = 2**16  # token ids are cached as uint16 (tasks/contract.py)
INTEGER = re.compile(r"[+-]?\d+")
SHOWN = 5  # labels named in a message, at most


class FilesError(ValueError):
    """The user's files, or the options naming them, cannot make the task."""


@dataclass(frozen=True)
class FilesConfig:
    """Your own data: sequence classification from your CSV, Parquet or JSON-lines
    files, one example a row (its text and its label), tokenised as bytes or by
    a local Hugging Face tokenizer."""

    source: str = option("files", "files: the user's own files (the only source)",
                         enum=SOURCES)
    train: str = option("", """the training examples: a .csv, .parquet/.pq or
        .jsonl/.json/.ndjson (JSON lines) file; relative paths are relative to the working
        directory""")
    val: str = option("", """the validation examples, a file as train ("": a fixed 10% of
        train, its rows permuted with seed 0)""")
    test: str = option("", "the test examples, a file as train")
    text_column: str = option("text", "the column (a JSON line's key) holding each example's text")
    label_column: str = option("label", """the column holding each example's label (strings or
        integers; the classes are the train file's distinct labels, sorted)""")
    seq_len: int = option(256, """tokens per example (bytes with the default tokenizer);
        longer ones are cut""", minimum=2)
    tokenizer: str = option(BYTE_TOKENIZER, """bytes: each UTF-8 byte a token, the upstream
        corpus's vocabulary (the upstream prior and SPT apply); or the path of a local Hugging
        Face tokenizer: a tokenizer.json or a directory holding one (needs the tokenizers
        package; nothing is downloaded)""")
    max_gb: float = option(4.0, """most GiB the prepared token arrays may take (rows x seq_len x
        2 bytes over the three splits; training holds them in memory): past it preparation
        stops with the size""", exclusiveMinimum=0)
    # The SHA-256 of the files and the tokenizer, so that a run's spec changes
    # with their contents: made with the config, never stated by a study
    # (per_run: no schema key, no default in the study's config).
    fingerprint: str = option("", "the files' and the tokenizer's SHA-256 (computed)",
                              per_run=True)

    def __post_init__(self) -> None:
        given = {split: getattr(self, split) for split in SPLITS if getattr(self, split)}
        if self.fingerprint or not given:
            # A spec's config (fingerprint already taken), or the task unconfigured:
            # a study whose grid names it is refused by tasks.check_releases.
            return
        for split in ("train", "test"):
            if split not in given:
                raise FilesError(f"tasks.files.{split}: not set; the files task reads "
                                 f"tasks.files.train and tasks.files.test (and val, or 10% "
                                 f"of train) from your data files")
        object.__setattr__(self, "fingerprint", fingerprint(self))
        vocabulary(self)  # a tokenizer that cannot be read is refused with the config


def split_paths(cfg: FilesConfig) -> dict[str, Path]:
    """The files of the splits the config names (val absent: taken from train)."""
    return {split: Path(getattr(cfg, split)) for split in SPLITS if getattr(cfg, split)}


def check_file(path: Path, option_name: str) -> str:
    """The format of the data file `path`; FilesError where it is absent, empty
    or of a suffix not read."""
    kind = FORMATS.get(path.suffix.lower())
    if kind is None:
        raise FilesError(f"{option_name}: {path} has suffix {path.suffix or '(none)'!r}; "
                         f"{ACCEPTED}")
    if not path.is_file():
        where = f" ({path.resolve()})" if not path.is_absolute() else ""
        state = "is not a file" if path.exists() else "not found"
        raise FilesError(f"{option_name}: {path}{where} {state}; {ACCEPTED}, relative paths "
                         f"from the working directory")
    if path.stat().st_size == 0:
        raise FilesError(f"{path}: empty file (tasks.files: a file needs a header or a first "
                         f"row naming its columns, and at least one row)")
    return kind


def tokenizer_file(cfg: FilesConfig) -> Path | None:
    """The Hugging Face tokenizer's tokenizer.json, None for bytes."""
    if cfg.tokenizer == BYTE_TOKENIZER:
        return None
    path = Path(cfg.tokenizer)
    if path.is_dir():
        path = path / "tokenizer.json"
    if not path.is_file():
        raise FilesError(f"tasks.files.tokenizer: {cfg.tokenizer} is neither a tokenizer.json "
                         f"nor a directory holding one; accepted: bytes, or the path of a local "
                         f"Hugging Face tokenizer (nothing is downloaded)")
    return path


def fingerprint(cfg: FilesConfig) -> str:
    """SHA-256 over the files' and the tokenizer's SHA-256 (each file checked)."""
    digest = hashlib.sha256()
    for split, path in split_paths(cfg).items():
        check_file(path, f"tasks.files.{split}")
        digest.update(f"{split}\0{file_sha256(path)}\0".encode())
    tokenizer = tokenizer_file(cfg)
    if tokenizer is not None:
        digest.update(f"tokenizer\0{file_sha256(tokenizer)}\0".encode())
    return digest.hexdigest()


def file_sha256(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


# --------------------------------------------------------------------------- the registry's


def release_files(cfg: FilesConfig) -> list[str]:
    return []  # no release: the files are the user's (tasks.check_releases checks them)


def release_source(cfg: FilesConfig) -> tuple[str | None, str]:
    return None, "nothing: the files are your own"


def standin(cfg: FilesConfig) -> str | None:
    return None  # the user's own data, not a stand-in for LRA (build_described says what)


def n_classes(cfg: FilesConfig) -> int:
    return len(read(cfg)[1])


def build(cfg: FilesConfig) -> dict[str, Split]:
    return read(cfg)[0]


def build_described(cfg: FilesConfig) -> tuple[dict[str, Split], dict]:
    """The splits, and what the manifest says of them besides the registry's
    fields: the data (the user's files, for records), the classes in order and
    their number, the tokenizer's vocabulary. One reading of the files."""
    splits, classes, vocab = read(cfg)
    val = cfg.val or f"10% of {cfg.train}"
    return splits, {"data": f"the user's files: {cfg.train}, {val}, {cfg.test}",
                    "classes": list(classes), "n_classes": len(classes), "vocab": vocab.name,
                    "vocab_size": vocab.size}


def unconfigured(cfg: FilesConfig) -> str | None:
    """Why a study naming the task cannot read it (no files given), or None."""
    if cfg.train and cfg.test:
        return None
    return ("task files reads your own data files, but tasks.files.train and tasks.files.test "
            "are not both set: set them (and tasks.files.val, or leave it for 10% of train) to "
            "the paths of your .csv, .parquet or .jsonl files, relative to the working "
            "directory")


# --------------------------------------------------------------------------- tokens


@dataclass(frozen=True)
class Vocabulary:
    """What the token ids mean (the manifest's `vocab`), how many there are with
    the 3 specials, and the Hugging Face tokenizer that makes them (None: bytes)."""

    name: str
    size: int
    tokenizer: object | None = None

    def ids(self, texts: list[str], seq_len: int) -> list[np.ndarray]:
        """Each text's ids (byte or token id + 3, after the specials), cut at seq_len."""
        if self.tokenizer is None:
            return [np.frombuffer(t.encode("utf-8")[:seq_len], np.uint8).astype(np.uint16)
                    + N_SPECIAL for t in texts]
        encoded = self.tokenizer.encode_batch(texts, add_special_tokens=False)
        return [np.asarray(e.ids[:seq_len], dtype=np.int64) + N_SPECIAL for e in encoded]


def vocabulary(cfg: FilesConfig) -> Vocabulary:
    """Bytes, or the local Hugging Face tokenizer `cfg.tokenizer` names, loaded
    and checked: installed, readable, its ids within the cache's uint16."""
    path = tokenizer_file(cfg)
    if path is None:
        return Vocabulary(VOCAB_NAME, VOCAB_SIZE)
    try:
        from tokenizers import Tokenizer
    except ImportError:
        raise FilesError("tasks.files.tokenizer: a Hugging Face tokenizer needs the tokenizers "
                         "package: pip install 'scalestudy[tokenizers]' (or tokenizer: bytes)"
                         ) from None
    try:
        tokenizer = Tokenizer.from_file(str(path))
    except Exception as err:  # the tokenizers library's own error type is not public
        raise FilesError(f"tasks.files.tokenizer: {path} is not a readable Hugging Face "
                         f"tokenizer ({' '.join(str(err).split())})") from None
    size = tokenizer.get_vocab_size(with_added_tokens=True) + N_SPECIAL
    if size > MAX_IDS:
        raise FilesError(f"tasks.files.tokenizer: {path} has {size - N_SPECIAL} tokens, more "
                         f"than the {MAX_IDS - N_SPECIAL} the data cache's uint16 ids hold")
    # Named by its file's hash: a token table transfers only to the same vocabulary.
    return Vocabulary(f"tokenizer:{file_sha256(path)[:16]}", size, tokenizer)


# --------------------------------------------------------------------------- reading


def label_key(value, path: Path, row: int) -> str:
    """A label as its class's key: a string as written, an integer (or an
    integral float) as its decimal digits."""
    if isinstance(value, str) and value:
        return value
    where = f"{path}: row {row}"
    if isinstance(value, bool) or value is None or value == "" or not isinstance(
            value, int | float | np.integer | np.floating):
        shown = "empty" if value is None or value == "" else f"{value!r} ({type(value).__name__})"
        raise FilesError(f"{where}: label {shown}; accepted: a string or an integer")
    if isinstance(value, float | np.floating):
        if math.isnan(value):
            raise FilesError(f"{where}: label empty (NaN); accepted: a string or an integer")
        if not float(value).is_integer():
            raise FilesError(f"{where}: label {value!r} is not an integer; accepted: a string "
                             f"or an integer")
    return str(int(value))


def text_of(value, path: Path, row: int) -> str:
    if isinstance(value, str) and value:
        return value
    if isinstance(value, str):
        raise FilesError(f"{path}: row {row}: empty text; accepted: a non-empty string")
    shown = "empty" if value is None else f"{value!r} ({type(value).__name__})"
    raise FilesError(f"{path}: row {row}: text {shown}; accepted: a string")


def missing_column(path: Path, column: str, option_name: str, present) -> FilesError:
    return FilesError(f"{path}: no column {column!r} (tasks.files.{option_name}); its columns: "
                      f"{', '.join(map(repr, present)) or 'none'}")


def rows(path: Path, kind: str, cfg: FilesConfig) -> Iterator[tuple[int, list, list]]:
    """(number of the chunk's first row, texts, labels) chunk by chunk; a row
    is counted from 1, after a CSV's header."""
    readers = {"csv": csv_rows, "parquet": parquet_rows, "jsonl": jsonl_rows}
    return readers[kind](path, cfg)


def csv_rows(path: Path, cfg: FilesConfig):
    import pandas as pd

    columns = [cfg.text_column, cfg.label_column]
    try:
        header = list(pd.read_csv(path, nrows=0, encoding="utf-8").columns)
        for column, name in zip(columns, ("text_column", "label_column"), strict=True):
            if column not in header:
                raise missing_column(path, column, name, header)
        # Everything as the text written: no "NA" read as missing, no type guessed
        # per chunk; a label's integer-ness is decided over the whole split.
        chunks = pd.read_csv(path, usecols=columns, dtype=str, keep_default_na=False,
                             na_filter=False, encoding="utf-8", chunksize=CHUNK_ROWS)
        start = 1
        for chunk in chunks:
            yield start, chunk[cfg.text_column].tolist(), chunk[cfg.label_column].tolist()
            start += len(chunk)
    except pd.errors.EmptyDataError:
        raise FilesError(f"{path}: empty file (no header row naming its columns)") from None
    except UnicodeDecodeError as err:
        raise FilesError(f"{path}: not UTF-8 text ({err})") from None
    except pd.errors.ParserError as err:
        raise FilesError(f"{path}: not a readable CSV file ({' '.join(str(err).split())})"
                         ) from None


def parquet_rows(path: Path, cfg: FilesConfig):
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.ParquetFile(path)
    except (pa.ArrowException, OSError) as err:
        raise FilesError(f"{path}: not a readable Parquet file ({err})") from None
    schema = table.schema_arrow
    for column, name in ((cfg.text_column, "text_column"), (cfg.label_column, "label_column")):
        if column not in schema.names:
            raise missing_column(path, column, name, schema.names)
    kind = schema.field(cfg.text_column).type
    if pa.types.is_dictionary(kind):
        kind = kind.value_type
    if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)
            or pa.types.is_string_view(kind)):
        raise FilesError(f"{path}: column {cfg.text_column!r} (tasks.files.text_column) holds "
                         f"{kind}, not text; accepted: a string column")
    start = 1
    for batch in table.iter_batches(batch_size=CHUNK_ROWS,
                                    columns=[cfg.text_column, cfg.label_column]):
        yield (start, batch.column(cfg.text_column).to_pylist(),
               batch.column(cfg.label_column).to_pylist())
        start += batch.num_rows


def jsonl_rows(path: Path, cfg: FilesConfig):
    texts, labels, start, row = [], [], 1, 0
    try:
        with open(path, encoding="utf-8") as f:
            for line_no, line in enumerate(f, start=1):
                if not line.strip():
                    continue
                try:
                    item = json.loads(line)
                except json.JSONDecodeError as err:
                    raise FilesError(f"{path}:{line_no}: not JSON ({err.msg}); accepted: JSON "
                                     f"lines, one object a line") from None
                if not isinstance(item, dict):
                    raise FilesError(f"{path}:{line_no}: not a JSON object (a "
                                     f"{type(item).__name__}); accepted: JSON lines, one "
                                     f"object a line")
                row += 1
                for column, name in ((cfg.text_column, "text_column"),
                                     (cfg.label_column, "label_column")):
                    if column not in item:
                        if row == 1:
                            raise missing_column(path, column, name, list(item))
                        raise FilesError(f"{path}:{line_no}: no key {column!r} "
                                         f"(tasks.files.{name})")
                texts.append(item[cfg.text_column])
                labels.append(item[cfg.label_column])
                if len(texts) == CHUNK_ROWS:
                    yield start, texts, labels
                    start, texts, labels = start + len(texts), [], []
    except UnicodeDecodeError as err:
        raise FilesError(f"{path}: not UTF-8 text ({err})") from None
    if texts:
        yield start, texts, labels


def read_split(path: Path, split: str, cfg: FilesConfig, vocab: Vocabulary,
               held: int) -> tuple[Split, list[str]]:
    """One file's token arrays (labels not yet mapped) and its label keys;
    `held`, the bytes of token arrays already read (the other splits)."""
    kind = check_file(path, f"tasks.files.{split}")
    tokens, lengths, keys, n = [], [], [], 0
    for start, texts, labels in rows(path, kind, cfg):
        texts = [text_of(t, path, start + i) for i, t in enumerate(texts)]
        keys += [label_key(v, path, start + i) for i, v in enumerate(labels)]
        chunk, chunk_lengths = pad(vocab.ids(texts, cfg.seq_len), cfg.seq_len)
        tokens.append(chunk)
        lengths.append(chunk_lengths)
        n += len(texts)
        size = held + n * cfg.seq_len * 2
        if size > cfg.max_gb * GIB:
            raise FilesError(
                f"{path}: its first {n} rows make {size / GIB:.2f} GiB of token arrays with "
                f"the splits before it (rows x seq_len {cfg.seq_len} x 2 bytes), over "
                f"tasks.files.max_gb = {cfg.max_gb}; raise max_gb where the machine has the "
                f"memory (training holds the arrays), or lower seq_len, or use fewer rows")
    if not n:
        raise FilesError(f"{path}: no rows (tasks.files.{split}: a file needs at least one "
                         f"example)")
    split_arrays = Split(np.concatenate(tokens), np.concatenate(lengths),
                         np.zeros(n, dtype=np.int64))
    return split_arrays, keys


def class_order(keys: set[str]) -> list[str]:
    """The classes: numerically sorted when every label is an integer, else as strings."""
    if all(INTEGER.fullmatch(k) for k in keys):
        return sorted(keys, key=lambda k: (int(k), k))
    return sorted(keys)


def shown(labels) -> str:
    labels = list(labels)
    more = f" (and {len(labels) - SHOWN} more)" if len(labels) > SHOWN else ""
    return ", ".join(map(repr, labels[:SHOWN])) + more


def read(cfg: FilesConfig) -> tuple[dict[str, Split], tuple[str, ...], Vocabulary]:
    """The splits, the classes and the vocabulary, from files that still match
    the fingerprint."""
    if not cfg.fingerprint:
        raise FilesError(unconfigured(cfg) or "tasks.files: no files given")
    if fingerprint(cfg) != cfg.fingerprint:
        raise FilesError(f"tasks.files: {', '.join(map(str, split_paths(cfg).values()))} changed "
                         f"since the study was planned (their SHA-256 is not the run spec's); "
                         f"run the study again, which prepares the new data")
    vocab = vocabulary(cfg)
    splits, keys, held = {}, {}, 0
    for split, path in split_paths(cfg).items():
        splits[split], keys[split] = read_split(path, split, cfg, vocab, held)
        held += splits[split].tokens.nbytes
    classes = class_order(set(keys["train"]))
    if len(classes) < 2:
        raise FilesError(f"{cfg.train}: column {cfg.label_column!r} has {len(classes)} distinct "
                         f"label ({shown(classes)}); a classifier needs at least 2")
    index = {key: i for i, key in enumerate(classes)}
    for split, split_keys in keys.items():
        unknown = sorted(set(split_keys) - set(index))
        if unknown:
            raise FilesError(
                f"{getattr(cfg, split)}: column {cfg.label_column!r} has labels the train file "
                f"{cfg.train} does not: {shown(unknown)}; its labels: {shown(classes)}")
        splits[split].labels = np.array([index[k] for k in split_keys], dtype=np.int64)
    if "val" not in splits:
        splits["train"], splits["val"] = held_out(splits["train"], cfg.train)
    return {split: splits[split] for split in SPLITS}, tuple(classes), vocab


def held_out(train: Split, path: str) -> tuple[Split, Split]:
    """A fixed 10% of train as validation (its rows permuted with seed 0), the rest train."""
    n = len(train.labels)
    if n < 2:
        raise FilesError(f"{path}: 1 row, too few to hold out validation rows from; give "
                         f"tasks.files.val a file")
    order = np.random.default_rng(0).permutation(n)
    n_val = max(1, n // 10)
    keep, val = np.sort(order[: n - n_val]), np.sort(order[n - n_val:])

    def rows_of(index):
        return Split(train.tokens[index], train.lengths[index], train.labels[index])

    return rows_of(keep), rows_of(val)
