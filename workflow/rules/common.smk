# Workflow glue: config validation, the study's lock and warm server, the
# grid's targets, wildcard constraints and the jobs' resources. What a study
# means (its cells, specs, priorities, resources) is the package's
# (scalestudy.study), torch-free and tested without Snakemake.

import json
import os
import re
import signal
import threading
from pathlib import Path

import yaml
from snakemake.settings.types import DeploymentMethod

from scalestudy.atomic import write_text
from scalestudy.locks import claim, clear_stale, release
from scalestudy.stages import STAGES
from scalestudy.study import check_cluster, machine_memory, trains_in_host_memory, validate
from scalestudy.study import costs, grid, resources, specs
from scalestudy.study import status as study_status
from scalestudy.tasks import check_releases
from scalestudy.training import trackers

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
# and exits for a retry to resume (scalestudy.training.resume).
if workflow.remote_exec or workflow.subprocess_exec:
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)

# The jobs' software (`conda:` in every rule; --software-deployment-method
# conda): the package is installed from this checkout, which pip finds here.
# Named only when conda deploys it: an unused env still costs every job's
# bookkeeping time at its end, which widened the window in which a killed
# study's finished job counts as incomplete (tests/workflow/test_end_to_end.py). Hence
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
# The jobs' trackers (trainer.loggers): by the environment, not the spec, so
# that adding one reruns no job (scalestudy.training.trackers).
os.environ[trackers.ENV] = ",".join(config["trainer"]["loggers"])

OUT = f"results/{config['study']}"

# Every job writes its output to its log; where it fails, the log's last lines
# go to the console too (the profile shows no job descriptions), so that its
# error ("No space left on device") is where the user looks.
LOGGED = " > {log:q} 2>&1 || {{ tail -n 15 {log:q} >&2; exit 1; }}"

# A local GPU study runs no more GPU jobs at once than this process may use
# (or --resources gpu=N). Registered while the workflow is parsed: Snakemake
# builds its scheduler's limits from the resources it has then, and one
# registered later (at onstart) changes the count it shows, not the limit.
LOCAL_GPUS = resources.local_gpus()
if (workflow.local_exec and LOCAL_GPUS and resources.trains_on_gpus(config, LOCAL_GPUS)
        and "gpu" not in workflow.global_resources):
    workflow.register_resource("gpu", LOCAL_GPUS)


def start_study():
    """Claim the study's lock. On a cluster (here, at onstart, Snakemake knows
    its executor) a study names its accelerator. Jobs that run on this machine
    fork from one warm process that has torch, Lightning and the analysis
    stack imported (scalestudy.warm), instead of each paying seconds of
    imports, and a GPU study's jobs take GPUs no other job holds: the `gpu`
    resource (LOCAL_GPUS, above) and a lock file per GPU
    (scalestudy.training.devices). Cluster jobs run their command directly,
    on the GPUs SLURM gave them."""
    if not workflow.local_exec:
        check_cluster(config)
    claim()  # this process holds locks (see scalestudy.locks)
    # The study's config as it runs, for `scalestudy status` (scalestudy.study.status).
    write_text(yaml.safe_dump(json.loads(json.dumps(config)), sort_keys=False),
               os.path.join(OUT, study_status.CONFIG))
    trackers.prepare(config["trainer"]["loggers"], config["study"], OUT)
    if not workflow.local_exec:
        return
    if LOCAL_GPUS and resources.trains_on_gpus(config, LOCAL_GPUS):
        slots = resources.write_slots(Path(".snakemake") / "scalestudy-gpus", LOCAL_GPUS)
        os.environ[resources.SLOTS_ENV] = str(slots.resolve())
    from scalestudy import warm

    warm.start()


def end_study():
    """This process no longer holds the study's locks (Snakemake removes them
    as it ends), and its scheduler's wake-ups stop."""
    release()
    stop_rescheduling_timers()


def stop_rescheduling_timers():
    """Cancel Snakemake's pending scheduler wake-ups (threading.Timer, one per
    loop, max-jobs-per-timespan apart; profiles/default): they are not daemon
    threads, so the finished run would otherwise wait up to a timespan to exit."""
    for thread in threading.enumerate():
        if isinstance(thread, threading.Timer):
            thread.cancel()


GRID = config["grid"]
# grid.budgets: a dimension of the grid (scalestudy.study.grid); directories
# get their b{budget} segment only when a study states budgets.
BUDGETS = grid.budgets(GRID)


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
    budget=one_of([grid.budget_label(b) for b in BUDGETS]),


RUN_DIR = f"{OUT}/{grid.budgeted(grid.RUN_DIR, bool(BUDGETS))}"
# pretrain.seeds: per_seed gives each finetuning seed its own pretraining run.
PER_SEED = specs.per_seed(config)
RECORDS = [f"{OUT}/{cell.directory}/record.parquet" for cell in grid.cells(GRID)]
PRETRAIN_RECORDS = [f"{OUT}/{p.directory}/record.parquet"
                    for p in grid.pretrain_cells(GRID, PER_SEED)]
# The pretraining stages by their corpus: the task's own data, or the upstream corpus.
TASK_STAGES = [name for name, stage in STAGES.items() if stage.on_task]
UPSTREAM_STAGES = [name for name, stage in STAGES.items() if not stage.on_task]


def run_spec(wildcards):
    """The run's spec as JSON; as a rule param, a change to it (steps, lr, the
    task's data...) reruns exactly the runs it affects."""
    return specs.as_json(train_spec(wildcards))


def train_spec(wildcards) -> dict:
    return specs.run_spec(config, wildcards.task, wildcards.arch, wildcards.size,
                          wildcards.prior, int(wildcards.seed),
                          grid.budget_of(GRID, wildcards.get("budget")))


def pretraining_spec(wildcards) -> dict:
    seed = wildcards.get("seed")
    return specs.pretrain_spec(config, wildcards.stage, wildcards.get("task"), wildcards.arch,
                               wildcards.size, int(seed) if seed is not None else None,
                               grid.budget_of(GRID, wildcards.get("budget")))


def pretrain_spec(wildcards):
    return specs.as_json(pretraining_spec(wildcards))


def trunk_record(run, spec: dict) -> dict:
    """A wsd branch's trunk (its spec's branch_of): the trunk's record, whose
    job saved the fork checkpoint the branch starts from (training/branches.py).
    The command finds the trunk's directory beside its own (study.grid.
    trunk_directory): the train and pretrain rules' shell commands and params
    stay those of the studies run before budgets, which Snakemake would
    otherwise rerun (its code and params rerun triggers)."""
    if spec["train"].get("branch_of") is None:
        return {}
    return {"trunk": f"{OUT}/{grid.trunk_of(run, GRID).directory}/record.parquet"}


def pretrain_trunk(wildcards):
    """A pretraining branch's trunk record ({} for every other pretraining run)."""
    seed = wildcards.get("seed")
    run = grid.PretrainCell(wildcards.stage, wildcards.get("task"), wildcards.arch,
                            wildcards.size, int(seed) if seed is not None else None,
                            grid.budget_of(GRID, wildcards.get("budget")))
    return trunk_record(run, pretraining_spec(wildcards))


def train_inputs(wildcards):
    """The task's data, plus the pretraining record (and so its checkpoint)
    that the run's prior loads or matches."""
    inputs = {"data": rules.task_data.output}
    cell = grid.Cell(wildcards.task, wildcards.arch, wildcards.size, wildcards.prior,
                     int(wildcards.seed), grid.budget_of(GRID, wildcards.get("budget")))
    needed = grid.pretrain_cell(cell, PER_SEED)
    if needed:
        inputs["pretrained"] = f"{OUT}/{needed.directory}/record.parquet"
    return {**inputs, **trunk_record(cell, train_spec(wildcards))}


# Longest first: a job's priority is the estimated FLOPs of the longest chain
# of runs it starts (scalestudy.study.costs).
def train_priority(wildcards):
    return costs.train_priority(config, wildcards.task, wildcards.size, wildcards.prior,
                                grid.budget_of(GRID, wildcards.get("budget")))


def pretrain_priority(wildcards):
    return costs.pretrain_priority(config, wildcards.stage, wildcards.get("task"),
                                   wildcards.size, grid.budget_of(GRID, wildcards.get("budget")))


# Cluster resources of the jobs that train (config["resources"], profiles/slurm).
# Every other job is bookkeeping of seconds and runs where Snakemake runs.
localrules:
    task_data,
    upstream_corpus,
    collect,
    fit,
    figure,
    figure_index,
    tables,
    claims,


TRAINING_RESOURCES = resources.training_resources(config, gpus=LOCAL_GPUS)
PRETRAINING_RESOURCES = resources.training_resources(config, gpus=LOCAL_GPUS,
                                                     section="pretrain")
# trainer.threads for each process of a run: one per device under DDP.
JOB_THREADS = resources.job_threads(config)


def cpu_runs(wildcards):
    """On a cluster, CPU runs share one group, which profiles/slurm submits N
    at a time (group-components) instead of one sbatch per run; GPU runs go
    alone, and a workstation runs every job as its own."""
    return None if resources.gpu_study(config) or workflow.local_exec else "cpu_runs"
