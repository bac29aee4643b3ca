# Config validation, the grid, and the helpers the rules share.

import json
import os
import signal

from snakemake.settings.types import DeploymentMethod
from snakemake.utils import validate

from scalestudy.locks import claim, clear_stale
from scalestudy.names import NON_CAUSAL
from scalestudy.priors import needs_pretraining
from scalestudy.tasks import check_releases

# A study killed mid-run (SIGKILL, OOM, power loss) left its lock behind: the
# same command must finish it, so a lock whose holder is gone is removed.
if not workflow.remote_exec:
    stale = clear_stale()
    if stale:
        print(stale)

# In a cluster job, SLURM's warning before the time limit (--signal=USR1@<s>,
# profiles/slurm) reaches every process of the job step: the job's own
# Snakemake and its shell ignore it (and the shell passes the run the ignored
# disposition, which the run replaces), so only the run acts: it checkpoints
# and exits for a retry to resume (scalestudy.resume).
if workflow.remote_exec or workflow.subprocess_exec:
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)

# The jobs' software (`conda:` in every rule; --software-deployment-method
# conda): the package is installed from this checkout, which pip finds here.
# Named only when conda deploys it: an unused env still costs every job's
# bookkeeping time at its end, which widened the window in which a killed
# study's finished job counts as incomplete (tests/test_workflow.py).
CONDA_ENV = (
    "../envs/scalestudy.yaml"
    if DeploymentMethod.CONDA in workflow.deployment_settings.deployment_method
    else None
)
os.environ.setdefault("SCALESTUDY_ROOT", workflow.basedir)

validate(config, "../../config/schema.yaml")
# A task read from LRA's release (source: lra) needs its files before any job.
check_releases(config)

if config["train"]["causal"]:
    no_causal = [arch for arch in config["grid"]["archs"] if arch in NON_CAUSAL]
    if no_causal:
        raise ValueError(
            f"grid.archs: {', '.join(no_causal)} has no causal mode (train.causal: true); "
            f"drop it from the grid or set train.causal: false"
        )

OUT = f"results/{config['study']}"


onstart:
    # Jobs that run on this machine fork from one warm process that has torch,
    # Lightning and the analysis stack imported (scalestudy.warm), instead of
    # each paying seconds of imports. Cluster jobs run their command directly.
    claim()  # this process holds the lock (see scalestudy.locks)
    if workflow.local_exec:
        from scalestudy import warm

        warm.start()
GRID = config["grid"]


wildcard_constraints:
    task="|".join(GRID["tasks"]),
    arch="|".join(GRID["archs"]),
    size="|".join(GRID["sizes"]),
    prior="|".join(GRID["priors"]),
    seed=r"\d+",


RUN_DIR = f"{OUT}/runs/{{task}}/{{arch}}/{{size}}/{{prior}}/s{{seed}}"

PRETRAIN_DIR = {
    "spt": f"{OUT}/pretrain/spt/{{task}}/{{arch}}/{{size}}",
    "upstream": f"{OUT}/pretrain/upstream/{{arch}}/{{size}}",
}
# The pretraining stages the grid's priors need.
PRETRAIN_STAGES = sorted({needs_pretraining(p) for p in GRID["priors"]} - {None})

PRETRAIN_RECORDS = sorted(
    {
        path
        for stage in PRETRAIN_STAGES
        for path in expand(
            f"{PRETRAIN_DIR[stage]}/record.parquet",
            task=GRID["tasks"],
            arch=GRID["archs"],
            size=GRID["sizes"],
        )
    }
)

RECORDS = expand(
    f"{RUN_DIR}/record.parquet",
    task=GRID["tasks"],
    arch=GRID["archs"],
    size=GRID["sizes"],
    prior=GRID["priors"],
    seed=GRID["seeds"],
)



def run_spec(wildcards):
    """Everything one training run depends on, as JSON for `scalestudy train`.

    As a rule param, a change to it (steps, lr, the task's data...) reruns
    exactly the runs it affects.
    """
    spec = {
        "study": config["study"],
        "task": wildcards.task,
        "arch": wildcards.arch,
        "size": wildcards.size,
        "prior": wildcards.prior,
        "seed": int(wildcards.seed),
        "task_config": config["tasks"][wildcards.task],
        "train": config["train"],
        "trainer": config["trainer"],
    }
    return json.dumps(spec, sort_keys=True)


def train_inputs(wildcards):
    """The task's data, plus the pretraining record (and so its checkpoint)
    that the run's prior loads or matches."""
    inputs = {"data": rules.task_data.output}
    stage = needs_pretraining(wildcards.prior)
    if stage:
        inputs["pretrained"] = f"{PRETRAIN_DIR[stage]}/record.parquet".format(**wildcards)
    return inputs


SCHEDULE_KEYS = ("max_steps", "batch_size", "lr", "warmup_steps", "val_every")


def pretrain_spec(wildcards, kind):
    """Everything one pretraining run depends on, as JSON for `scalestudy pretrain`.

    It trains the same backbone as the task runs (train.norm, protocol, dropout)
    on the pretraining schedule of config["pretrain"].
    """
    pretrain = config["pretrain"]
    spec = {
        "study": config["study"],
        "kind": kind,
        "corpus": wildcards.task if kind == "spt" else "upstream",
        "corpus_config": config["tasks"][wildcards.task] if kind == "spt" else config["upstream"],
        "arch": wildcards.arch,
        "size": wildcards.size,
        "seed": pretrain["seed"],
        "span": pretrain["span"],
        "train": {**config["train"], **{k: pretrain[k] for k in SCHEDULE_KEYS}},
        "trainer": config["trainer"],
    }
    return json.dumps(spec, sort_keys=True)


# Cluster resources of the jobs that train (config["resources"], profiles/slurm).
# Every other job is bookkeeping of seconds and runs where Snakemake runs.
localrules:
    task_data,
    upstream_corpus,
    collect,
    fit,
    figures,
    tables,
    claims,


RESOURCES = config["resources"]
GPU_STUDY = config["trainer"]["accelerator"] in ("gpu", "cuda")


def sized(key):
    """The size's runtime or mem_mb, times the attempt: a job that failed
    (out of time, out of memory) is retried with more."""

    def value(wildcards, attempt):
        return RESOURCES["sizes"].get(wildcards.size, {}).get(key, RESOURCES[key]) * attempt

    return value


def training_resources():
    """What one training or pretraining job asks the scheduler for."""
    asked = {"runtime": sized("runtime"), "mem_mb": sized("mem_mb")}
    for key in ("account", "partition"):
        name = RESOURCES[key] or os.environ.get(f"SCALESTUDY_SLURM_{key.upper()}", "")
        if name:
            asked[f"slurm_{key}"] = name
    if GPU_STUDY:
        devices = config["trainer"]["devices"]
        asked["gpu"] = devices if isinstance(devices, int) else len(str(devices).split(","))
        if RESOURCES["gpu_model"]:
            asked["gpu_model"] = RESOURCES["gpu_model"]
    return asked


def cpu_runs(wildcards):
    """On a cluster, CPU runs share one group, which profiles/slurm submits N
    at a time (group-components) instead of one sbatch per run; GPU runs go
    alone, and a workstation runs every job as its own."""
    return None if GPU_STUDY or workflow.local_exec else "cpu_runs"
