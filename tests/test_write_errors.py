"""A write that fails (a full disk) is one message naming the output, leaves no
temporary file, and records nothing: every writer of the study (run records,
runs/fits Parquet, text tables and claims, figures, the data contract, the
upstream corpus, checkpoints), tried on a real small file system (tmpfs, where
this process may mount one) and by an injected ENOSPC elsewhere."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pandas as pd
import pytest

from scalestudy import atomic
from scalestudy.atomic import WriteError

from tests.support.cells import TASK

FULL = "no space left on device"


@pytest.fixture
def small_fs(tmp_path):
    """A 16 MB tmpfs at tmp_path/fs (root only; skipped where mount is refused)."""
    mount = tmp_path / "fs"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(mount)],
                          capture_output=True)
    if done.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(fs: Path, leave: int) -> Path:
    """A file taking all of `fs` but `leave` bytes."""
    filler = fs / "filler"
    free = shutil.disk_usage(fs).free
    with open(filler, "wb") as f:
        f.write(b"\0" * max(0, free - leave))
    return filler


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in Path(directory).rglob("*") if p.name != "filler")


def spec_json(size: str = "s") -> str:
    return json.dumps({
        "study": "t", "task": "listops", "arch": "transformer", "size": size,
        "prior": "random", "seed": 3, "task_config": TASK,
        "train": {"max_steps": 6, "batch_size": 8, "warmup_steps": 2, "val_every": 3},
        "trainer": {"accelerator": "cpu", "threads": 1},
    })


def train(data_dir, run_dir) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "SCALESTUDY_WARM_SOCKET"}
    return subprocess.run([sys.executable, "-m", "scalestudy.cli", "train", "--spec",
                           spec_json(), "--data-dir", str(data_dir), "--run-dir", str(run_dir)],
                          capture_output=True, text=True, env=env, timeout=300)


def test_a_run_on_a_full_disk_says_so_once_and_its_rerun_finishes(small_fs, data_dir):
    filler = fill(small_fs, 300_000)  # room for metrics.csv, not for a checkpoint
    run_dir = small_fs / "run"
    done = train(data_dir, run_dir)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        f"scalestudy train: error: {run_dir / 'last.ckpt'}: {FULL}"]
    assert "Traceback" not in done.stdout + done.stderr
    assert leftovers(run_dir) == ["metrics.csv"]  # no record, no .last.ckpt.tmp
    filler.unlink()
    done = train(data_dir, run_dir)
    assert done.returncode == 0, done.stderr
    from scalestudy.records import read_records

    assert read_records(run_dir / "record.parquet")["status"].tolist() == ["ok"]


def test_every_writer_on_a_full_disk(small_fs, data_dir):
    """Each writer, on a disk with 4 KB left: its WriteError names its
    output and nothing is left behind."""
    import matplotlib.pyplot as plt
    import pyarrow as pa

    from scalestudy import tasks
    from scalestudy.analysis.figures.output import draw_notice, save
    from scalestudy.analysis.fits import write_fits
    from scalestudy.records import write_frame
    from scalestudy.tasks import upstream

    runs = pd.read_parquet(Path(__file__).parents[1] / "data" / "cache" / "workstation.parquet")
    big = os.urandom(200_000).hex()  # 400 KB that no compression makes fit
    out = small_fs / "out"
    out.mkdir()

    def figure():
        fig, ax = plt.subplots(figsize=(30, 30))
        ax.plot(range(100_000), gid="series")
        return fig

    writers = {
        out / "runs.parquet": lambda p: write_frame(runs.head(1).assign(error=big), p),
        out / "fits.parquet": lambda p: write_fits(pd.DataFrame({"a": [big]}), p),
        out / "claims.md": lambda p: atomic.write_text(big, p),
        out / "tables" / "alpha.md": lambda p: atomic.write_text(big, p),
        out / "table.parquet": lambda p: atomic.write_parquet(pa.table({"a": [big]}), p),
        out / "figures" / "f.png": lambda p: save(figure(), p.parent, "f"),
        out / "notice" / "n.png": lambda p: draw_notice(p.parent, "n", big[:2000]),
        out / "data" / "listops": lambda p: tasks.prepare(
            "listops", {**TASK, "n_train": 20_000}, p),
        out / "data" / "upstream": lambda p: upstream.prepare(
            upstream.config_from({"max_train_sequences": 20_000}), p),
    }
    filler = fill(small_fs, 4096)
    for path, write in writers.items():
        with pytest.raises(WriteError) as caught:
            write(path)
            pytest.fail(f"{path} was written")
        assert str(caught.value).startswith(str(path.parent)), caught.value
        assert str(caught.value).endswith(FULL)
        assert not [n for n in leftovers(out) if n.startswith(".")], (path, leftovers(out))
        assert not path.exists()
    filler.unlink()


def test_an_injected_enospc_in_each_atomic_writer(tmp_path, monkeypatch):
    """Where no file system can be mounted: the last step of a write fails."""
    import pyarrow as pa

    real = os.replace

    def full(src, dst):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "replace", full)
    for path, write in {
        tmp_path / "a.txt": lambda p: atomic.write_text("text", p),
        tmp_path / "b.parquet": lambda p: atomic.write_parquet(pa.table({"a": [1]}), p),
    }.items():
        with pytest.raises(WriteError, match=f"^{path}: {FULL}$"):
            write(path)
    assert list(tmp_path.iterdir()) == []
    monkeypatch.setattr(os, "replace", real)

    def fails(staged):
        (staged / "part").write_bytes(b"x")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    with pytest.raises(WriteError, match=f"^{tmp_path / 'd'}: {FULL}$"):
        with atomic.replacing_directory(tmp_path / "d") as staged:
            fails(staged)
    assert list(tmp_path.iterdir()) == []


def test_the_command_prints_one_line_for_an_injected_full_disk(data_dir, tmp_path,
                                                                monkeypatch, capsys):
    """In-process (as in the warm server's child): the checkpoint's write fails;
    no traceback, no record, exit 2."""
    import lightning.fabric.utilities.cloud_io as cloud_io

    from scalestudy.cli.parser import run_command

    def full(checkpoint, filepath):
        Path(filepath).write_bytes(b"partial")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(cloud_io, "_atomic_save", full)
    import lightning.fabric.plugins.io.torch_io as torch_io

    monkeypatch.setattr(torch_io, "_atomic_save", full)
    run_dir = tmp_path / f"run-{uuid.uuid4().hex[:6]}"
    code = run_command(["train", "--spec", spec_json("xxs"), "--data-dir", str(data_dir),
                        "--run-dir", str(run_dir)])
    err = capsys.readouterr().err
    assert code == 2
    expected = f"scalestudy train: error: {run_dir / 'last.ckpt'}: {FULL}"
    assert err.strip().splitlines()[-1] == expected
    assert "Traceback" not in err
    assert leftovers(run_dir) == ["metrics.csv"]
