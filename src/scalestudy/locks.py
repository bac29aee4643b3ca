"""Stale Snakemake locks: a killed study reruns with the same command.

Snakemake locks the working directory while it runs (.snakemake/locks/) and
removes its locks when it ends; a SIGKILL, an OOM kill or a power loss leaves
them behind, and the next `snakemake` stops with LockException until
`--unlock`. Several Snakemake processes may run in one directory at once (on
outputs that do not overlap), each with its own lock files, so each records
itself as a holder (`claim`, at onstart: a file named by host and PID in
.snakemake/scalestudy-holders/) and removes that file when it ends (`release`).
`clear_stale` (at parse time) removes the locks only when every holder is
known to be gone: the same host, and no such process. A live holder, a holder
on another host (a cluster's login node, seen from a compute node), or locks
with no holder recorded leave the locks alone: which lock file is whose is not
known, so one live holder keeps them all.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import socket
from pathlib import Path

HOLDERS = "scalestudy-holders"


def _holder(state_dir: Path) -> Path:
    return state_dir / HOLDERS / f"{socket.gethostname()}.{os.getpid()}"


def claim(state_dir: Path = Path(".snakemake")) -> None:
    """Record this process as a holder of the workflow's locks."""
    holder = _holder(state_dir)
    holder.parent.mkdir(parents=True, exist_ok=True)
    holder.touch()


def release(state_dir: Path = Path(".snakemake")) -> None:
    """This process ended and Snakemake removed its locks: no longer a holder."""
    _holder(state_dir).unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _gone(name: str) -> bool:
    """Whether the holder a file names is known to have ended."""
    host, _, pid = name.rpartition(".")
    return host == socket.gethostname() and pid.isdigit() and not _alive(int(pid))


def holders(state_dir: Path = Path(".snakemake")) -> list[str]:
    """The recorded holders' file names (host.pid), live or gone."""
    directory = state_dir / HOLDERS
    return sorted(p.name for p in directory.iterdir()) if directory.is_dir() else []


def held(state_dir: Path = Path(".snakemake")) -> bool:
    """Whether some recorded holder may still run (on this host, or another's)."""
    return not all(_gone(name) for name in holders(state_dir))


def clear_stale(state_dir: Path = Path(".snakemake")) -> str | None:
    """Remove the locks of Snakemake runs that were killed, when no holder is
    left; returns what it did."""
    locks, names = state_dir / "locks", holders(state_dir)
    if not (locks.is_dir() and any(locks.iterdir()) and names and all(map(_gone, names))):
        return None
    shutil.rmtree(locks)
    shutil.rmtree(state_dir / HOLDERS)
    killed = ", ".join("pid {2} on {0}".format(*name.rpartition(".")) for name in names)
    return f"removed the locks left by killed Snakemake runs ({killed})"


# One process per run directory. Snakemake's own locks do not stop a second
# Snakemake from starting a job that another one runs: its file-based
# persistence removes the whole .snakemake/locks/ directory when any instance
# ends (snakemake/persistence/file.py, _delete_locks, Snakemake 9.27), so a
# live instance's locks go with it. Two processes training into one run
# directory would interleave its checkpoints and metrics, so a run holds an
# exclusive flock on its directory itself (no lock file is left behind) while
# it runs.


class RunBusy(SystemExit):
    """Another process trains this run: exit 1, no record (the other one writes it)."""

    def __init__(self, run_dir: Path) -> None:
        super().__init__(1)
        self.message = (f"{run_dir}: another process is training this run (its directory "
                        f"is locked); this one stops without a record")


def _rank() -> int:
    """This process's rank among a multi-process run's (0 outside one): the
    launching rank holds the run's lock for every rank."""
    return max(int(os.environ.get(name) or 0) for name in ("LOCAL_RANK", "RANK", "SLURM_PROCID"))


@contextlib.contextmanager
def run_lock(run_dir: Path):
    """Hold an exclusive flock on `run_dir` while the block runs; RunBusy if
    another process holds it. Where the filesystem has no flock (some network
    filesystems), the run goes on unlocked."""
    if _rank() > 0:
        yield
        return
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(run_dir, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RunBusy(run_dir) from None
        except OSError:  # no flock here (ENOLCK, EOPNOTSUPP): unlocked
            pass
        yield
    finally:
        os.close(fd)
