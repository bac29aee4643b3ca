"""The run record: one Parquet row per finished run (its contract:
docs/ARCHITECTURE.md, "The run record").

Written atomically (temporary file + rename) only once a run has ended, so a
record on disk is always whole. Reading validates columns, types and the
categorical fields, and names the offending file and field on failure.
Torch-free: analysis machines read records without it.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from .atomic import write_parquet
from .stages import STAGES, TASK_STAGES

SCHEMA_VERSION = 1
STATUSES = ("ok", "diverged", "failed")
# How a run's training ended: after max_steps, or at its validation loss's
# plateau (train.until: plateau; study/plateau.py) with max_steps the cap.
STOPPED_BY = ("max_steps", "plateau")

SCHEMA = pa.schema(
    [
        ("schema_version", pa.int64()),
        ("study", pa.string()),
        ("task", pa.string()),
        # Where the task's data came from: "LRA release", the offline stand-in
        # it is ("stand-in for LRA Text: ...", the data manifest's standin), or
        # the user's own files ("the user's files: ...", the manifest's data).
        ("task_data", pa.string()),
        ("arch", pa.string()),
        ("size", pa.string()),
        ("prior", pa.string()),
        ("seed", pa.int64()),
        ("stage", pa.string()),
        ("status", pa.string()),
        ("diverged_step", pa.int64()),  # null unless status == "diverged"
        # STOPPED_BY; null when the training did not end
        # (diverged, failed) and in records written before the field.
        ("stopped_by", pa.string()),
        # until plateau: the step the plateau started the cooldown (null: none);
        # the learning rate of the last step (the peak-rate group's).
        ("plateau_step", pa.int64()),
        ("final_lr", pa.float64()),
        ("error", pa.string()),  # the exception when status == "failed"
        ("n_params", pa.int64()),
        ("n_params_nonembed", pa.int64()),
        ("flops_per_step", pa.float64()),
        ("train_flops", pa.float64()),
        ("pretrain_flops", pa.float64()),
        ("steps", pa.int64()),
        ("tokens_seen", pa.int64()),
        ("batch_size", pa.int64()),  # examples per optimiser step, every device's
        # The run's devices (DDP processes), each one's share of batch_size and the
        # examples of one forward and backward (a share accumulates micro-batches).
        ("world_size", pa.int64()),
        ("batch_per_device", pa.int64()),
        ("micro_batch", pa.int64()),
        ("seq_len", pa.int64()),
        ("depth", pa.int64()),
        ("width", pa.int64()),
        ("heads", pa.int64()),
        ("d_ff", pa.int64()),
        ("lr", pa.float64()),
        ("warmup_steps", pa.int64()),
        ("norm", pa.string()),
        ("protocol", pa.string()),  # scaling protocol: default, depth, width
        # Whether the backbone was built causal (train.causal, or a prior or a
        # pretraining stage that forces it); null in records written before the field.
        ("causal", pa.bool_()),
        # A finetuning run's pretraining run: whether its backbone was causal (the
        # denoising objective: next token, else masked) and its seed (pretrain.seed,
        # or the run's own with pretrain.seeds: per_seed). Null for runs that
        # start from no pretraining, and in records written before the fields.
        ("pretrain_causal", pa.bool_()),
        ("pretrain_seed", pa.int64()),
        ("train_loss", pa.float64()),
        ("val_loss", pa.float64()),
        ("val_acc", pa.float64()),
        ("test_acc", pa.float64()),
        ("upstream_loss", pa.float64()),
        ("wall_seconds", pa.float64()),
        ("tokens_per_second", pa.float64()),
        ("device", pa.string()),
        ("precision", pa.string()),  # Lightning's, as the run resolved it
        ("deterministic", pa.bool_()),  # torch.use_deterministic_algorithms
        ("matmul_precision", pa.string()),  # torch.get_float32_matmul_precision()
        ("torch_version", pa.string()),
        ("package_version", pa.string()),
        ("git_rev", pa.string()),
        ("config_hash", pa.string()),
        ("data_checksum", pa.string()),  # sha256 of the data files the run read
        # grid.budgets: the cell's budget (train.budget_unit; a finetuning run's is its
        # pretraining's), null without budgets. A wsd branch (training/branches.py):
        # the step it forked from its trunk at and the trunk's wall seconds to
        # there; its steps, tokens, train_flops and wall_seconds count the trunk's
        # part before the fork too (what the model cost). Null for every other run.
        ("budget", pa.float64()),
        ("fork_step", pa.int64()),
        ("fork_seconds", pa.float64()),
    ]
)

# Columns added after schema version 1: a record written before them
# (the committed data/cache studies) reads with them null.
ADDED_COLUMNS = ("task_data", "data_checksum", "stopped_by", "causal", "pretrain_causal",
                 "pretrain_seed", "world_size", "batch_per_device", "micro_batch",
                 "deterministic", "matmul_precision", "plateau_step", "final_lr", "budget",
                 "fork_step", "fork_seconds")

CATEGORIES = {"stage": (*STAGES, *TASK_STAGES), "status": STATUSES,
              "stopped_by": (*STOPPED_BY, None)}


class RecordError(ValueError):
    """A file that is not a valid run record."""


STANDIN_PREFIX = "stand-in"
LRA_RELEASE = "LRA release"


def task_label(runs: pd.DataFrame, task: str) -> str:
    """A task's name as figures and tables show it: "<task> (stand-in)" when
    its runs read an offline stand-in, never passing one off as LRA."""
    if "task_data" not in runs:
        return task
    data = runs.loc[runs["task"] == task, "task_data"].dropna()
    return f"{task} (stand-in)" if data.str.startswith(STANDIN_PREFIX).any() else task


def _check(table: pa.Table, source: str) -> pa.Table:
    for name in ADDED_COLUMNS:
        if name not in table.column_names:
            table = table.append_column(name, pa.nulls(len(table), SCHEMA.field(name).type))
    missing = [name for name in SCHEMA.names if name not in table.column_names]
    if missing:
        raise RecordError(f"{source}: not a scalestudy run record: missing columns {missing}")
    try:
        table = table.select(SCHEMA.names).cast(SCHEMA)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as err:
        raise RecordError(
            f"{source}: column types do not match the run-record schema: {err}"
        ) from None
    versions = set(table.column("schema_version").to_pylist())
    if versions - {SCHEMA_VERSION}:  # no rows: no version to disagree
        raise RecordError(
            f"{source}: schema_version {sorted(versions)}, this scalestudy reads {SCHEMA_VERSION}"
        )
    for field, accepted in CATEGORIES.items():
        bad = set(table.column(field).to_pylist()) - set(accepted)
        if bad:
            raise RecordError(
                f"{source}: {field} {sorted(map(str, bad))} not among accepted values: "
                f"{', '.join(map(str, accepted))}"
            )
    return table


def validate(row: dict) -> pa.Table:
    """One record dict -> a one-row table; unknown or missing fields raise."""
    unknown = set(row) - set(SCHEMA.names)
    if unknown:
        raise RecordError(f"record: unknown fields {sorted(unknown)}")
    row = {"schema_version": SCHEMA_VERSION, **dict.fromkeys(ADDED_COLUMNS), **row}
    missing = [name for name in SCHEMA.names if name not in row]
    if missing:
        raise RecordError(f"record: missing fields {missing}")
    try:
        table = pa.Table.from_pylist([row], schema=SCHEMA)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as err:
        raise RecordError(f"record: a field does not match the run-record schema: {err}") from None
    return _check(table, "record")


def package_version() -> str:
    """The installed scalestudy's version (its package metadata), as a record's
    provenance names it."""
    from importlib.metadata import version

    return version("scalestudy")


def data_checksum(data_dir: Path) -> str:
    """SHA-256 of the data a run reads. A task cache's manifest holds the
    checksum of its arrays (tasks/contract.py), which does not change when the
    same data is prepared again; any other data directory (the upstream corpus)
    hashes every file in it (name and bytes, in name order; hidden and temporary
    files aside)."""
    manifest = Path(data_dir) / "manifest.json"
    if manifest.is_file():
        checksum = json.loads(manifest.read_text()).get("checksum")
        if checksum:
            return checksum
    digest = hashlib.sha256()
    for path in sorted(Path(data_dir).iterdir()):
        if path.is_file() and not path.name.startswith("."):
            digest.update(path.name.encode() + b"\0")
            with open(path, "rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    digest.update(block)
    return digest.hexdigest()


def failed_record(identity: dict, error: BaseException) -> dict:
    """The record of a run that raised before it could train: its identity
    (study, task, arch, size, prior, seed, stage), status failed, the error's
    last line, every measurement null."""
    row = dict.fromkeys(SCHEMA.names[1:])
    row.update(identity, status="failed", error=error_line(error))
    return row


def error_line(error: BaseException) -> str:
    """The last line of an exception's traceback: `Type: message` (first line of
    a multi-line message)."""
    message = str(error).strip().splitlines()
    return f"{type(error).__name__}: {message[0]}" if message else type(error).__name__


def write_record(row: dict, path: Path) -> None:
    write_parquet(validate(row), path)


def read_table(path: Path) -> pa.Table:
    """Read a record or a collection of records as a table, validated."""
    try:
        table = pq.read_table(path)
    except (OSError, pa.ArrowInvalid) as err:
        raise RecordError(f"{path}: not a readable Parquet file: {err}") from None
    return _check(table, str(path))


def read_records(path: Path) -> pd.DataFrame:
    """Read a record or a collection of records as a frame, validated."""
    return read_table(path).to_pandas()


def collect(paths: Iterable[Path]) -> pd.DataFrame:
    """Concatenate records (each validated) into one frame; one RecordError
    naming every unreadable one."""
    tables, bad = [], []
    for path in paths:
        try:
            tables.append(read_table(path))
        except RecordError as err:
            bad.append(str(err))
    if bad:
        raise RecordError(f"{len(bad)} run record(s) cannot be read: {'; '.join(bad[:3])}"
                          f"{' ...' if len(bad) > 3 else ''}. The workflow sets such records "
                          "aside and reruns their jobs: run the study's snakemake command again")
    return pa.concat_tables(tables or [SCHEMA.empty_table()]).to_pandas()


def unreadable(path: Path, one_run: bool = True) -> str | None:
    """Why the record (`one_run`) or table of records at `path` cannot be read
    (truncated, empty, not Parquet, not records), from its footer alone; None
    when it reads."""
    try:
        meta = pq.read_metadata(path)
    except (OSError, pa.ArrowInvalid) as err:
        return f"not a readable Parquet file ({err})"
    if "schema_version" not in meta.schema.names or (one_run and meta.num_rows != 1):
        return "not a run record" if one_run else "not a table of run records"
    return None


CORRUPT_SUFFIX = ".corrupt"


def set_aside(path: Path) -> Path:
    """Rename an unreadable record to <name>.corrupt beside it (kept, not
    deleted), so that the workflow sees its run as not done and reruns it."""
    path = Path(path)
    aside = path.with_name(path.name + CORRUPT_SUFFIX)
    os.replace(path, aside)
    return aside


def is_records_file(path: Path) -> bool:
    """Whether `path` reads as run records (a file `scalestudy collect` may replace)."""
    try:
        read_table(path)
    except RecordError:
        return False
    return True


def write_frame(frame: pd.DataFrame, path: Path) -> None:
    """Write a frame of records atomically, checked against the schema."""
    table = pa.Table.from_pandas(frame, preserve_index=False)
    write_parquet(_check(table, str(path)), path)
