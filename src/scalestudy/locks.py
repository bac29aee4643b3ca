"""Stale Snakemake locks: a killed study reruns with the same command.

Snakemake locks the working directory while it runs (.snakemake/locks/) and
removes the lock when it ends; a SIGKILL, an OOM kill or a power loss leaves it
behind, and the next `snakemake` stops with LockException until `--unlock`.
The workflow records which process holds the lock (`claim`, at onstart: host and
PID in .snakemake/scalestudy-owner); `clear_stale` (at parse time) removes a
lock whose holder is known to be gone: the same host, and no such process. A
lock held by a live process, by another host (a cluster's login node, seen from
a compute node), or by an unknown owner is left alone.
"""

from __future__ import annotations

import os
import shutil
import socket
from pathlib import Path

OWNER = "scalestudy-owner"


def claim(state_dir: Path = Path(".snakemake")) -> None:
    """Record this process as the holder of the workflow's lock."""
    state_dir.mkdir(exist_ok=True)
    (state_dir / OWNER).write_text(f"{socket.gethostname()} {os.getpid()}\n")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def clear_stale(state_dir: Path = Path(".snakemake")) -> str | None:
    """Remove the locks of a Snakemake run that was killed; returns what it did."""
    locks, owner = state_dir / "locks", state_dir / OWNER
    if not (locks.is_dir() and any(locks.iterdir()) and owner.is_file()):
        return None
    try:
        host, pid = owner.read_text().split()
        pid = int(pid)
    except ValueError:
        return None
    if host != socket.gethostname() or _alive(pid):
        return None
    shutil.rmtree(locks)
    owner.unlink()
    return f"removed the lock left by a killed Snakemake run (pid {pid} on {host})"
