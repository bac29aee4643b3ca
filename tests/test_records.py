"""The run-record contract: round trip, atomic writes, clear errors."""

import math

import pandas as pd
import pytest

from scalestudy import records


def example_row(**changes):
    row = {name: 0 for name in records.SCHEMA.names if name != "schema_version"}
    row.update(
        study="t", task="listops", task_data="LRA release", arch="transformer", size="xs",
        prior="random", seed=1,
        stage="scratch", status="ok", diverged_step=None, error="", norm="pre", protocol="default",
        device="cpu", precision="32-true", torch_version="x", package_version="0.1.0",
        git_rev="abc", config_hash="h", data_checksum="d", test_acc=0.5, upstream_loss=math.nan,
        stopped_by="max_steps", causal=False, pretrain_causal=None, pretrain_seed=None,
        deterministic=True, matmul_precision="highest", budget=None, fork_step=None,
        fork_seconds=None,
    )
    row.update(changes)
    return row


def test_round_trip(tmp_path):
    path = tmp_path / "run" / "record.parquet"
    records.write_record(example_row(), path)
    frame = records.read_records(path)
    assert len(frame) == 1
    assert frame.loc[0, "arch"] == "transformer" and frame.loc[0, "seed"] == 1
    assert frame.loc[0, "schema_version"] == records.SCHEMA_VERSION
    assert math.isnan(frame.loc[0, "upstream_loss"])
    assert list(tmp_path.joinpath("run").iterdir()) == [path]  # no temp file left


def test_collect_concatenates_and_validates(tmp_path):
    paths = []
    for seed in range(3):
        paths.append(tmp_path / f"{seed}.parquet")
        records.write_record(example_row(seed=seed), paths[-1])
    frame = records.collect(paths)
    assert sorted(frame["seed"]) == [0, 1, 2]
    records.write_frame(frame, tmp_path / "runs.parquet")
    assert len(records.read_records(tmp_path / "runs.parquet")) == 3


def test_bad_rows_are_refused_before_writing(tmp_path):
    path = tmp_path / "record.parquet"
    bad_status = "status .*'done'.* accepted values: ok, diverged"
    with pytest.raises(records.RecordError, match=bad_status):
        records.write_record(example_row(status="done"), path)
    with pytest.raises(records.RecordError, match="unknown fields"):
        records.write_record(example_row(colour="red"), path)
    bad_stop = "stopped_by .*'early'.* accepted values: max_steps, plateau, None"
    with pytest.raises(records.RecordError, match=bad_stop):
        records.write_record(example_row(stopped_by="early"), path)
    row = example_row()
    del row["test_acc"]
    with pytest.raises(records.RecordError, match="missing fields"):
        records.write_record(row, path)
    assert not path.exists()


def test_records_written_before_added_columns_read_them_as_null(tmp_path):
    """The committed caches predate task_data, data_checksum and stopped_by."""
    path = tmp_path / "record.parquet"
    records.write_record(example_row(), path)
    old = pd.read_parquet(path).drop(columns=list(records.ADDED_COLUMNS))
    old.to_parquet(path)
    frame = records.read_records(path)
    assert frame[list(records.ADDED_COLUMNS)].isna().all().all()
    assert frame.loc[0, "arch"] == "transformer"


def test_corrupt_and_foreign_files_are_named(tmp_path):
    corrupt = tmp_path / "corrupt.parquet"
    corrupt.write_bytes(b"not parquet at all")
    with pytest.raises(records.RecordError, match="corrupt.parquet: not a readable Parquet"):
        records.read_records(corrupt)
    foreign = tmp_path / "foreign.parquet"
    pd.DataFrame({"a": [1]}).to_parquet(foreign)
    with pytest.raises(records.RecordError, match="foreign.parquet: not a scalestudy run record"):
        records.collect([foreign])


def test_analysis_modules_import_without_torch():
    import subprocess
    import sys

    code = ("import sys, scalestudy.records, scalestudy.analysis.fits, "
            "scalestudy.analysis.figures.draw, scalestudy.cli; "
            "assert 'torch' not in sys.modules, 'torch imported'")
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.fixture
def umask():
    """Set the process umask for a test, and restore it afterwards."""
    import os

    saved = os.umask(0o022)
    os.umask(saved)
    yield lambda mask: os.umask(mask)
    os.umask(saved)


@pytest.mark.parametrize("mask, mode", [(0o022, 0o644), (0o027, 0o640), (0o077, 0o600)])
def test_atomic_writers_give_files_the_mode_the_umask_allows(tmp_path, umask, mask, mode):
    """mkstemp makes 0o600 files; results on a shared file system must be
    readable as the umask says, like the figures open() writes."""
    import stat

    from scalestudy import atomic
    from scalestudy.analysis.fits import write_fits

    umask(mask)
    assert atomic.current_umask() == mask
    assert atomic.default_file_mode() == mode
    frame = pd.DataFrame(records.validate(example_row()).to_pylist())
    writers = {
        "record.parquet": lambda p: records.write_record(example_row(), p),
        "runs.parquet": lambda p: records.write_frame(frame, p),
        "fits.parquet": lambda p: write_fits(pd.DataFrame({"alpha": [0.5]}), p),
        "claims.md": lambda p: atomic.write_text("# claims\n", p),
    }
    for name, write in writers.items():
        path = tmp_path / "out" / name
        write(path)
        assert stat.S_IMODE(path.stat().st_mode) == mode, name
        path.chmod(0o600)  # an older result written 0o600 gets the mode when rewritten
        write(path)
        assert stat.S_IMODE(path.stat().st_mode) == mode, name
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(writers)


def test_a_record_written_before_budgets_reads_with_them_null(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = records.validate(example_row())
    old = table.drop_columns(["budget", "fork_step", "fork_seconds"])
    pq.write_table(old, tmp_path / "old.parquet")
    frame = records.read_records(tmp_path / "old.parquet")
    assert frame[["budget", "fork_step", "fork_seconds"]].isna().all(axis=None)
    assert isinstance(table, pa.Table)
