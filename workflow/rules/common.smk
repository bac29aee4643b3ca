# Config validation, the grid, and the helpers the rules share.

import json
import os
import re

from scalestudy.locks import claim, clear_stale
from scalestudy.priors import SELF_PRETRAINING, needs_pretraining
from scalestudy.study import machine_memory, trains_in_host_memory, validate
from scalestudy.tasks import check_releases

# A study killed mid-run (SIGKILL, OOM, power loss) left its lock behind: the
# same command must finish it, so a lock whose holder is gone is removed.
if not workflow.remote_exec:
    stale = clear_stale()
    if stale:
        print(stale)

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


onstart:
    # Jobs that run on this machine fork from one warm process that has torch,
    # Lightning and the analysis stack imported (scalestudy.warm), instead of
    # each paying seconds of imports. Cluster jobs run their command directly.
    claim()  # this process holds the lock (see scalestudy.locks)
    if workflow.local_exec:
        from scalestudy import warm

        warm.start()
GRID = config["grid"]
DIMENSIONS = {"arch": "archs", "size": "sizes", "prior": "priors", "seed": "seeds"}


def task_grid(task):
    """One task's grid: the study's, or its grid.per_task sub-grid."""
    own = GRID["per_task"].get(task, {})
    for key, values in own.items():
        outside = [v for v in values if v not in GRID[key]]
        if outside:
            raise ValueError(f"grid.per_task.{task}.{key}: {outside} not in grid.{key} "
                             f"({GRID[key]}); a task's sub-grid takes values of the grid")
    return {wildcard: own.get(key, GRID[key]) for wildcard, key in DIMENSIONS.items()}


stray = sorted(set(GRID["per_task"]) - set(GRID["tasks"]))
if stray:
    raise ValueError(f"grid.per_task: {', '.join(stray)} not in grid.tasks ({GRID['tasks']})")


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


RUN_DIR = OUT + "/runs/{task}/{arch}/{size}/{prior}/s{seed}"

PRETRAIN_DIR = {
    **{stage: OUT + f"/pretrain/{stage}/{{task}}/{{arch}}/{{size}}" for stage in SELF_PRETRAINING},
    "upstream": OUT + "/pretrain/upstream/{arch}/{size}",
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
