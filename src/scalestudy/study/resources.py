"""What one training or pretraining job asks a cluster for: the study's
`resources` section per size and attempt, and the devices its trainer uses
(profiles/slurm, docs/cluster.md). A workstation run ignores it."""

from __future__ import annotations

import os

from .specs import device_count

GPU_ACCELERATORS = ("gpu", "cuda")


def gpu_study(config: dict) -> bool:
    return config["trainer"]["accelerator"] in GPU_ACCELERATORS


def devices_per_run(config: dict) -> int:
    """How many devices one run trains on (`trainer.devices`; "auto" asks for one)."""
    return device_count(config["trainer"]["devices"]) or 1


def sized(config: dict, key: str):
    """The size's runtime or mem_mb, times the attempt: a job that failed (out
    of time, out of memory) is retried with more. A Snakemake resource
    callable (wildcards, attempt)."""
    resources = config["resources"]

    def value(wildcards, attempt):
        return resources["sizes"].get(wildcards.size, {}).get(key, resources[key]) * attempt

    return value


def training_resources(config: dict, environ=os.environ) -> dict:
    """The resources of a training or pretraining job."""
    resources = config["resources"]
    asked = {"runtime": sized(config, "runtime"), "mem_mb": sized(config, "mem_mb")}
    for key in ("account", "partition"):
        name = resources[key] or environ.get(f"SCALESTUDY_SLURM_{key.upper()}", "")
        if name:
            asked[f"slurm_{key}"] = name
    if gpu_study(config):
        asked["gpu"] = devices_per_run(config)
        if resources["gpu_model"]:
            asked["gpu_model"] = resources["gpu_model"]
    return asked
