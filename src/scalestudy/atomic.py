"""Files written whole or not at all: every writer of the study's outputs
(run records, collected tables, fits, text tables, claims.md, checkpoints,
the task data contract, the upstream corpus) writes through here.

A file is written to a temporary name beside its target and renamed over it,
so a reader never sees half of one and a kill mid-write leaves the previous
file whole; a directory is staged beside its target and swapped in. The new
file gets the mode a file created by open() would have under the umask
(mkstemp's is 0o600), so results on a shared file system stay readable.
A failed write removes what it staged and raises `WriteError`: one message
naming the file and the reason ("results/x/runs.parquet: no space left on
device"), which the commands print as their one line of error. Torch-free.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from .faults import kill_point


class WriteError(OSError):
    """A file or directory that could not be written (a full disk, a quota, a
    read-only file system): `path` is the output that was being written, not
    its temporary name."""

    def __init__(self, path: Path | str, error: OSError):
        reason = os.strerror(error.errno) if error.errno else str(error)
        super().__init__(error.errno, reason)
        self.path = Path(path)

    def __str__(self) -> str:
        return f"{self.path}: {self.strerror[:1].lower()}{self.strerror[1:]}"


def no_space(error: BaseException, path: Path | str) -> WriteError | None:
    """`error` as the WriteError of `path` (or of the file it names) when it is
    a write error: a WriteError already, or a full disk or quota met by a
    writer that is not this module's (Lightning's CSV logger); else None."""
    if isinstance(error, WriteError):
        return error
    if isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT):
        return WriteError(error.filename or path, error)
    return None


@contextlib.contextmanager
def naming(path: Path | str) -> Iterator[None]:
    """An OSError inside is raised as the WriteError of `path`."""
    try:
        yield
    except WriteError:
        raise
    except OSError as err:
        raise WriteError(path, err) from None


def current_umask() -> int:
    """The process's umask, read without changing it where Linux tells it
    (/proc/self/status); elsewhere set to 0o077 for an instant and restored, so
    a file another thread creates meanwhile gets fewer permissions, never more."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o077)
    os.umask(mask)
    return mask


def default_file_mode() -> int:
    """The mode open() gives a new file: 0o666 less the umask (0o644 under the
    usual 0o022, 0o640 under 0o027)."""
    return 0o666 & ~current_umask()


@contextlib.contextmanager
def replacing(path: Path, *, temporary: str | None = None, commit: bool = True,
              kill_at: str | None = "write") -> Iterator[Path]:
    """Yield a temporary path beside `path` to write; on a clean exit it is
    renamed over `path` (`commit` False: left for another process to rename,
    as DDP's other ranks do). `temporary` fixes the temporary file's name
    (every DDP rank must name the same file); by default it is unique. On an
    error the temporary file is removed and the error raised."""
    path = Path(path)
    with naming(path):
        path.parent.mkdir(parents=True, exist_ok=True)
        if temporary is None:
            fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
            os.close(fd)
            tmp = Path(name)
        else:
            tmp = path.with_name(temporary)
        try:
            yield tmp
            if commit:
                os.chmod(tmp, default_file_mode())
                if kill_at:
                    kill_point(kill_at, path)  # fault injection (tests only): before the rename
                os.replace(tmp, path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise


def write_text(text: str, path: Path) -> None:
    with replacing(path, kill_at=None) as tmp:
        tmp.write_text(text)


def write_parquet(table, path: Path) -> None:
    """A pyarrow table as a Parquet file (the `write` kill point before the rename)."""
    import pyarrow.parquet as pq

    with replacing(path) as tmp:
        pq.write_table(table, tmp)


@contextlib.contextmanager
def replacing_directory(out_dir: Path, kill_at: str | None = None) -> Iterator[Path]:
    """Yield an empty directory beside `out_dir` to fill; on a clean exit it
    takes out_dir's name (the old directory, if any, is set aside first and
    removed only then); on an error it is removed."""
    out_dir = Path(out_dir)
    with naming(out_dir):
        out_dir.parent.mkdir(parents=True, exist_ok=True)
        staged = Path(tempfile.mkdtemp(dir=out_dir.parent, prefix=f".{out_dir.name}."))
        try:
            yield staged
            _commit_directory(staged, out_dir, kill_at)
        except BaseException:
            shutil.rmtree(staged, ignore_errors=True)
            raise


def refuse_foreign(out_dir: Path, allowed, what: str, inputs=()) -> None:
    """ValueError when `out_dir` cannot be replaced whole by its writer (`what`,
    e.g. "a frontier's"): it is an existing file, it is or holds one of the
    command's `inputs`, or it holds a file whose name is not in `allowed`, so
    that a mistyped --out-dir never takes a file or other results with it."""
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise ValueError(f"{out_dir}: an existing file, not {what} directory, so not replaced; "
                         f"give --out-dir a directory of its own")
    _refuse_inputs(out_dir, inputs, "inside")
    if allowed is None or not out_dir.is_dir():  # None: a directory shared with others
        return
    others = sorted(p.name for p in out_dir.iterdir() if p.name not in set(allowed))
    if others:
        raise ValueError(f"{out_dir}: not {what} directory, so not replaced: it holds "
                         f"{', '.join(others[:3])}{' ...' if len(others) > 3 else ''}; "
                         f"give it a directory of its own")


def refuse_overwrite(path: Path, what: str, inputs=(), recognise=None) -> None:
    """ValueError when the file `path` is not one a command writing `what` (e.g.
    "a fits table") may replace: a directory, one of the command's `inputs`, or
    an existing file that `recognise(path)` does not take for one it wrote."""
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"{path}: a directory, not {what}; give --out a file name")
    _refuse_inputs(path, inputs, "")
    if path.exists() and recognise is not None and not recognise(path):
        raise ValueError(f"{path}: an existing file that is not {what}, so not replaced; "
                         f"remove it or give --out another name")


def _refuse_inputs(out: Path, inputs, inside: str) -> None:
    target = out.resolve()
    for given in inputs:
        source = Path(given).resolve()
        if source == target or (inside and target in source.parents):
            raise ValueError(f"{out}: is{' or holds' if inside else ''} the input {given}, so "
                             f"not replaced; give the output a path of its own")


def _commit_directory(staged: Path, out_dir: Path, kill_at: str | None) -> None:
    """Give the staged directory out_dir's name (the old one set aside, then removed)."""
    for path in staged.iterdir():
        os.chmod(path, default_file_mode())
    os.chmod(staged, 0o777 & ~current_umask())  # mkdtemp made it 0o700
    if kill_at:
        kill_point(kill_at, out_dir)  # fault injection (tests only)
    old = None
    if out_dir.exists():
        old = Path(tempfile.mkdtemp(dir=out_dir.parent, prefix=f".{out_dir.name}.old."))
        out_dir.rename(old / "d")
    staged.rename(out_dir)
    if old is not None:
        shutil.rmtree(old)
