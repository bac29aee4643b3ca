"""A workstation's GPUs, one set per job.

On a SLURM node a job sees only the GPUs it was given (CUDA_VISIBLE_DEVICES);
on a workstation every job sees them all and Lightning would put each on
cuda:0. So the workflow of a local GPU study declares the GPUs it may use
(study.resources.local_gpus) as Snakemake's `gpu` resource (no more jobs at
once than GPUs) and gives the jobs a directory with one lock file per GPU
($SCALESTUDY_GPU_SLOTS, workflow/rules/common.smk): a run takes the first free
ones (an exclusive flock, held until the process ends, its DDP ranks included)
and makes them its CUDA_VISIBLE_DEVICES before CUDA starts. Torch-free: it
runs before torch touches a device.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from ..study.resources import GPU_ACCELERATORS, SLOTS_ENV, visible_ids


class NoFreeGPU(RuntimeError):
    """Fewer free (or usable) GPUs than the run needs: the job fails, to be retried."""


_held: list[int] = []  # the claimed slots' open files: closing one frees its GPU


def claim(trainer, environ=os.environ) -> list[str] | None:
    """Claim the run's GPUs from $SCALESTUDY_GPU_SLOTS and make them its
    CUDA_VISIBLE_DEVICES; returns their ids, or None where there is nothing to
    claim (no slots: a cluster job or a plain command; not a GPU run; a run
    naming its device ids itself, e.g. devices: "0,1")."""
    directory = environ.get(SLOTS_ENV)
    wanted = trainer.devices if isinstance(trainer.devices, int) else None
    if not directory or trainer.accelerator not in (*GPU_ACCELERATORS, "auto") or not wanted:
        return None
    slots = sorted((p for p in Path(directory).iterdir() if p.name.isdigit()),
                   key=lambda p: int(p.name))
    # Slot i is the i-th GPU this process may use.
    visible = environ.get("CUDA_VISIBLE_DEVICES")
    ids = visible_ids(visible) if visible is not None else [p.name for p in slots]
    usable = [slot for slot in slots if int(slot.name) < len(ids)]
    if len(usable) < wanted:
        raise NoFreeGPU(f"{directory}: this run needs {wanted} GPUs, and of the {len(slots)} "
                        f"GPU slots this process may use {len(usable)} "
                        f"(CUDA_VISIBLE_DEVICES={visible!r})")
    taken, fds = [], []
    for slot in usable:
        fd = os.open(slot, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        fds.append(fd)
        taken.append(ids[int(slot.name)])
        if len(taken) == wanted:
            _held.extend(fds)
            # The run's other ranks (started by Lightning with this environment)
            # see these GPUs and claim nothing.
            environ["CUDA_VISIBLE_DEVICES"] = ",".join(taken)
            environ.pop(SLOTS_ENV)
            return taken
    for fd in fds:
        os.close(fd)
    raise NoFreeGPU(f"{directory}: {len(taken)} of the {wanted} GPUs this run needs are free "
                    f"(of {len(slots)}); the workflow's gpu resource should not have started it")
