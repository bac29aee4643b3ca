# Config validation, the grid, and the helpers the rules share.

import json
import math
import os
import re
import signal
import threading

from snakemake.settings.types import DeploymentMethod

from scalestudy.locks import claim, clear_stale
from scalestudy.priors import SELF_PRETRAINING, get_prior, needs_pretraining
from scalestudy.study import machine_memory, run_flops, trains_in_host_memory, validate
from scalestudy.study import task_grid as study_task_grid
from scalestudy.tasks import check_releases, task_config

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
# study's finished job counts as incomplete (tests/test_workflow.py). Hence
# `snakemake --lint` ("Specify a conda environment ... for each rule") flags
# each rule unless run with --software-deployment-method conda (deliberate).
CONDA_ENV = (
    "../envs/scalestudy.yaml"
    if DeploymentMethod.CONDA in workflow.deployment_settings.deployment_method
    else None
)
os.environ.setdefault("SCALESTUDY_ROOT", workflow.basedir)

# One clear error naming the field and what it accepts, before any job runs:
# the schema, what it cannot express, and (for jobs on this machine's RAM) each
# size's estimated training memory (scalestudy.study).
validate(
    config,
    os.path.join(workflow.basedir, "config", "schema.yaml"),
    memory_bytes=(
        machine_memory() if workflow.local_exec and trains_in_host_memory(config) else None
    ),
)
# A task read from LRA's release (source: lra) needs its files before any job.
check_releases(config)

OUT = f"results/{config['study']}"


def start_study():
    """Claim the study's lock; jobs that run on this machine fork from one warm
    process that has torch, Lightning and the analysis stack imported
    (scalestudy.warm), instead of each paying seconds of imports. Cluster jobs
    run their command directly."""
    claim()  # this process holds the lock (see scalestudy.locks)
    if workflow.local_exec:
        from scalestudy import warm

        warm.start()


def stop_rescheduling_timers():
    """Cancel Snakemake's pending scheduler wake-ups (threading.Timer, one per
    loop, max-jobs-per-timespan apart; profiles/default): they are not daemon
    threads, so the finished run would otherwise wait up to a timespan to exit."""
    for thread in threading.enumerate():
        if isinstance(thread, threading.Timer):
            thread.cancel()


GRID = config["grid"]
DIMENSIONS = {"arch": "archs", "size": "sizes", "prior": "priors", "seed": "seeds"}


def task_grid(task):
    """One task's grid by wildcard: the study's, or its grid.per_task sub-grid."""
    own = study_task_grid(GRID, task)
    return {wildcard: own[key] for wildcard, key in DIMENSIONS.items()}


def one_of(names):
    """A wildcard constraint accepting exactly these names (no `/`, no `..`)."""
    return "|".join(re.escape(name) for name in names)


# Every wildcard is one of the grid's (validated) names, so no crafted target
# path can make a rule write outside results/{study}/.
wildcard_constraints:
    task=one_of(GRID["tasks"]),
    arch=one_of(GRID["archs"]),
    size=one_of(GRID["sizes"]),
    prior=one_of(GRID["priors"]),
    seed=r"\d+",


RUN_DIR = f"{OUT}/runs/{{task}}/{{arch}}/{{size}}/{{prior}}/s{{seed}}"

PRETRAIN_DIR = {
    **{stage: f"{OUT}/pretrain/{stage}/{{task}}/{{arch}}/{{size}}" for stage in SELF_PRETRAINING},
    "upstream": f"{OUT}/pretrain/upstream/{{arch}}/{{size}}",
}
PRETRAIN_RECORDS = sorted(
    {
        path
        for task in GRID["tasks"]
        for stage in {needs_pretraining(p) for p in task_grid(task)["prior"]} - {None}
        for path in expand(
            f"{PRETRAIN_DIR[stage]}/record.parquet",
            task=task,
            arch=task_grid(task)["arch"],
            size=task_grid(task)["size"],
        )
    }
)

RECORDS = [
    path
    for task in GRID["tasks"]
    for path in expand(f"{RUN_DIR}/record.parquet", task=task, **task_grid(task))
]



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


SCHEDULE_KEYS = ("max_steps", "until", "batch_size", "lr", "warmup_steps", "val_every")


def pretrain_spec(wildcards, kind):
    """Everything one pretraining run depends on, as JSON for `scalestudy pretrain`.

    It trains the same backbone as the task runs (train.norm, protocol, dropout)
    on the pretraining schedule of config["pretrain"].
    """
    pretrain = config["pretrain"]
    spec = {
        "study": config["study"],
        "kind": kind,
        "corpus": wildcards.task if kind in SELF_PRETRAINING else "upstream",
        "corpus_config": (config["tasks"][wildcards.task] if kind in SELF_PRETRAINING
                          else config["upstream"]),
        "arch": wildcards.arch,
        "size": wildcards.size,
        "seed": pretrain["seed"],
        "span": pretrain["span"],
        "train": {**config["train"], **{k: pretrain[k] for k in SCHEDULE_KEYS}},
        "trainer": config["trainer"],
    }
    return json.dumps(spec, sort_keys=True)


# Longest first. Snakemake starts the ready jobs of highest priority, and a
# job's priority is the estimated FLOPs (study.run_flops) of the longest chain
# of runs it starts: a pretraining run before the runs that wait for it, a
# compute-matched run (its pretraining's FLOPs on top of its own) and the large
# sizes before the small ones. Otherwise a long run started last trains alone
# while the other cores idle: ~20 of the default study's ~130 core-seconds of
# overhead (docs/benchmarks.md). On a log scale, so that priorities stay small
# numbers in the scheduler's integer program.
def task_seq_len(task):
    return task_config(task, config["tasks"][task]).seq_len


def pretraining_flops(stage, task, size):
    pretrain = config["pretrain"]
    tokens = task_seq_len(task) if stage in SELF_PRETRAINING else config["upstream"]["seq_len"]
    return run_flops(size, config["train"]["protocol"], pretrain["batch_size"], tokens,
                     pretrain["max_steps"])


def training_flops(task, size, prior):
    train = config["train"]
    own = run_flops(size, train["protocol"], train["batch_size"], task_seq_len(task),
                    train["max_steps"])
    matched = get_prior(prior).matched_to
    return own + (pretraining_flops(matched, task, size) if matched else 0.0)


def as_priority(flops):
    return round(100 * math.log10(max(flops, 1.0)))


def train_priority(wildcards):
    return as_priority(training_flops(wildcards.task, wildcards.size, wildcards.prior))


def pretrain_priority(wildcards):
    """The pretraining run's FLOPs plus those of the longest run that waits for
    it (pretrain_spt has a stage wildcard; pretrain_upstream serves every task)."""
    stage = wildcards.get("stage", "upstream")
    tasks = [wildcards.task] if stage in SELF_PRETRAINING else GRID["tasks"]
    waiting = [
        training_flops(task, wildcards.size, prior)
        for task in tasks
        for prior in task_grid(task)["prior"]
        if needs_pretraining(prior) == stage
    ]
    own = pretraining_flops(stage, wildcards.get("task"), wildcards.size)
    return as_priority(own + max(waiting, default=0.0))


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
