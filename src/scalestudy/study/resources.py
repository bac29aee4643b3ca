"""What one training or pretraining job asks a cluster for: the study's
`resources` section per task, size and attempt, and the devices its trainer
uses (profiles/slurm, docs/cluster.md); and on a workstation with GPUs, the
`gpu` resource that keeps jobs from sharing one (training/devices.py)."""

from __future__ import annotations

import math
import os
from pathlib import Path

from .config import StudyConfig

GPU_ACCELERATORS = ("gpu", "cuda")
NVIDIA_GPUS = Path("/proc/driver/nvidia/gpus")  # the driver's: one entry per GPU
# nvidia0, nvidia1, ...: a container's GPUs where /proc lacks the driver's list
NVIDIA_DEVICES = Path("/dev")
# A directory of one lock file per GPU of a workstation: how a local job finds
# a GPU no other job holds (training/devices.py).
SLOTS_ENV = "SCALESTUDY_GPU_SLOTS"


def gpu_study(study: StudyConfig) -> bool:
    return study.trainer.accelerator in GPU_ACCELERATORS


def driver_gpus() -> int:
    """This machine's NVIDIA GPUs as the driver lists them (0 without the driver)."""
    if NVIDIA_GPUS.is_dir():
        return len(list(NVIDIA_GPUS.iterdir()))
    return sum(1 for path in NVIDIA_DEVICES.glob("nvidia*") if path.name[6:].isdigit())


def visible_ids(value: str, gpus: int | None = None) -> list[str]:
    """The GPU ids CUDA_VISIBLE_DEVICES=`value` names, read as CUDA reads it:
    up to the first entry that is empty, negative, or a number past the
    machine's `gpus` (where known)."""
    ids = []
    for entry in value.split(","):
        entry = entry.strip()
        if not entry or entry.startswith("-") or (
                entry.isdigit() and gpus is not None and int(entry) >= gpus):
            break
        ids.append(entry)
    return ids


def local_gpus(environ=None) -> int:
    """The GPUs this process may use: those CUDA_VISIBLE_DEVICES names where it
    is set (inside `salloc`, or where a user picks them), else every GPU the
    driver lists; 0 without the driver. Read without CUDA: the DAG imports no
    torch."""
    gpus = driver_gpus()
    visible = (os.environ if environ is None else environ).get("CUDA_VISIBLE_DEVICES")
    return gpus if not gpus or visible is None else len(visible_ids(visible, gpus))


def trains_on_gpus(study: StudyConfig, gpus: int) -> bool:
    """Whether the study's runs use GPUs on a machine that has `gpus`: a GPU
    study, or `auto` where there are GPUs."""
    accelerator = study.trainer.accelerator
    return accelerator in GPU_ACCELERATORS or (accelerator == "auto" and gpus > 0)


def device_count(devices) -> int | None:
    """How many devices `trainer.devices` names: a count, or the length of a
    list of device ids ("0,1" or [0, 1]); None for "auto" and -1 (every
    device the machine has, known only where the run starts)."""
    if isinstance(devices, list):
        return len(devices)
    if isinstance(devices, int) or str(devices).strip().lstrip("-").isdigit():
        count = int(devices)
        return count if count > 0 else None
    if str(devices).strip() == "auto":
        return None
    return len([d for d in str(devices).split(",") if d.strip()])


def devices_per_run(study: StudyConfig) -> int:
    """How many devices one run trains on (`trainer.devices`; "auto" asks for one)."""
    return device_count(study.trainer.devices) or 1


def job_setting(study: StudyConfig, task: str | None, size: str, key: str, default=None):
    """`key` (runtime, mem_mb, micro_batch) of the jobs of `task` (None: the
    upstream corpus's) at `size`: the most specific of
    resources.tasks.<task>.sizes.<size>, resources.tasks.<task>,
    resources.sizes.<size> and resources itself, else `default`."""
    resources = study.resources
    own = resources.tasks.get(task, {})
    for level in (own.get("sizes", {}).get(size, {}), own, resources.sizes.get(size, {})):
        if key in level:
            return level[key]
    return getattr(resources, key, default)


def runtime(study: StudyConfig, section: str, task: str | None, arch: str | None, size: str,
            prior: str | None = None, budget: float | None = None) -> int:
    """A job's runtime (minutes) on its first attempt, uncapped: job_setting's,
    and a budgeted run's (grid.budgets) scaled by its estimated steps over
    `section`.max_steps, the length the runtime is stated for
    (costs.budget_scale). A finetuning run after a budgeted pretraining is
    not budgeted itself (`prior` needs a stage)."""
    from ..priors import PRIORS
    from . import costs

    minutes = job_setting(study, task, size, "runtime")
    budgets_this = section == "pretrain" or prior is None or PRIORS[prior].needs is None
    if budget is not None and budgets_this:
        minutes = math.ceil(minutes * costs.budget_scale(study, section, task, arch, size,
                                                         budget))
    return minutes


def sized(study: StudyConfig, key: str, section: str = "train"):
    """A job's runtime or mem_mb, times the attempt: a job that failed (out
    of time, out of memory) is retried with more. The runtime is `runtime`'s,
    at most resources.max_runtime (where set) on every attempt: a scheduler
    refuses a job that asks for more than its partition allows, and a run
    stopped at its limit resumes in its retry. The memory is one rank's
    (job_setting) times the run's devices: every rank holds the whole
    splits. A Snakemake resource callable (wildcards, attempt)."""
    from .grid import budget_of

    def value(wildcards, attempt):
        task, size = wildcards.get("task"), wildcards.size
        if key != "runtime":
            return job_setting(study, task, size, key) * devices_per_run(study) * attempt
        budget = budget_of(study.grid, wildcards.get("budget"))
        minutes = runtime(study, section, task, wildcards.get("arch"), size,
                          wildcards.get("prior"), budget)
        return capped_runtime(study, minutes * attempt)

    return value


def capped_runtime(study: StudyConfig, minutes: int) -> int:
    """`minutes`, at most resources.max_runtime (0: no cap)."""
    cap = study.resources.max_runtime
    return min(minutes, cap) if cap else minutes


def job_threads(study: StudyConfig) -> int:
    """The CPUs a training job asks for: trainer.threads (torch's threads of
    one process) for each of the run's devices, one process each under DDP."""
    return study.trainer.threads * devices_per_run(study)


def training_resources(study: StudyConfig, environ=os.environ, gpus: int = 0,
                       section: str = "train") -> dict:
    """The resources of a training (`section` train) or pretraining (pretrain)
    job; `gpus`, a workstation's (0 on a cluster, where `auto` is refused)."""
    resources = study.resources
    asked = {"runtime": sized(study, "runtime", section),
             "mem_mb": sized(study, "mem_mb", section)}
    for key in ("account", "partition"):
        name = getattr(resources, key) or environ.get(f"SCALESTUDY_SLURM_{key.upper()}", "")
        if name:
            asked[f"slurm_{key}"] = name
    if trains_on_gpus(study, gpus):
        asked["gpu"] = devices_per_run(study)
        if resources.gpu_model:
            asked["gpu_model"] = resources.gpu_model
    return asked


def write_slots(directory: Path, gpus: int) -> Path:
    """The lock files of a workstation's `gpus` GPUs (0..gpus-1) in `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    for index in range(gpus):
        (directory / str(index)).touch()
    return directory
