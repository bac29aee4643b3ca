# Workflow glue: config validation, the study's lock and warm server, the
# grid's targets, wildcard constraints and the jobs' resources. What a study
# means (its cells, specs, priorities, resources) is the package's
# (scalestudy.study), torch-free and tested without Snakemake.

import os
import re
import sys

from scalestudy import workflow as study_workflow
from scalestudy.analysis.stages import ANALYSIS_STAGES, study_stages
from scalestudy.stages import STAGES
from scalestudy.study import costs, grid, resources, specs

# Stale locks, the jobs' environment and the config check (scalestudy.workflow):
# STUDY, the typed config every function below reads (the rules' params read
# `config`, completed by the check); LOCAL_GPUS, the GPUs a local GPU study's
# jobs share.
try:
    STUDY = study_workflow.prepare(workflow, config)
except ValueError as err:  # a study that cannot run: its one line, not a trace of the parse
    sys.exit(f"study config: {err}")
# A dry run says which claims of the study's plan its grid is unlikely to decide.
study_workflow.planned_powers(workflow, STUDY)
LOCAL_GPUS = study_workflow.register_gpus(workflow, STUDY)
CONDA_ENV = study_workflow.conda_env(workflow)

OUT = f"results/{STUDY.study}"
# What each analysis stage of a study writes (scalestudy.analysis.stages, the
# list `scalestudy analyse` runs): the analysis rules' outputs (analysis.smk).
ARTIFACT = {stage.name: f"{OUT}/{stage.artifact}" for stage in study_stages()}

# Every job writes its output to its log; where it fails, the log's last lines
# go to the console too (the profile shows no job descriptions), so that its
# error ("No space left on device") is where the user looks.
LOGGED = " > {log:q} 2>&1 || {{ tail -n 15 {log:q} >&2; exit 1; }}"


def start_study():
    study_workflow.start_study(workflow, config, STUDY, OUT, LOCAL_GPUS)


def end_study():
    study_workflow.end_study()


GRID = STUDY.grid
# grid.budgets: a dimension of the grid (scalestudy.study.grid); directories
# get their b{budget} segment only when a study states budgets.
BUDGETS = GRID.budgets


def one_of(names):
    """A wildcard constraint accepting exactly these names (no `/`, no `..`)."""
    return "|".join(re.escape(name) for name in names)


# Every wildcard is one of the grid's (validated) names, so no crafted target
# path can make a rule write outside results/{study}/.
wildcard_constraints:
    task=one_of(GRID.tasks),
    arch=one_of(GRID.archs),
    size=one_of(GRID.sizes),
    prior=one_of(GRID.priors),
    seed=r"\d+",
    budget=one_of([grid.budget_label(b) for b in BUDGETS]),


RUN_DIR = f"{OUT}/{grid.budgeted(grid.RUN_DIR, bool(BUDGETS))}"
# pretrain.seeds: per_seed gives each finetuning seed its own pretraining run.
PER_SEED = STUDY.pretrain.per_seed
RECORDS = [f"{OUT}/{cell.directory}/record.parquet" for cell in grid.cells(GRID)]
PRETRAIN_RECORDS = [f"{OUT}/{p.directory}/record.parquet"
                    for p in grid.pretrain_cells(GRID, PER_SEED)]
# An unreadable record or runs.parquet is set aside, so its job is planned again.
study_workflow.heal_records(workflow, [*RECORDS, *PRETRAIN_RECORDS], f"{OUT}/runs.parquet")
# The pretraining stages by their corpus: the task's own data, or the upstream corpus.
TASK_STAGES = [name for name, stage in STAGES.items() if stage.on_task]
UPSTREAM_STAGES = [name for name, stage in STAGES.items() if not stage.on_task]


def run_spec(wildcards):
    """The run's spec as JSON; as a rule param, a change to it (steps, lr, the
    task's data...) reruns exactly the runs it affects."""
    return specs.as_json(study_workflow.train_spec(STUDY, wildcards))


def pretrain_spec(wildcards):
    return specs.as_json(study_workflow.pretraining_spec(STUDY, wildcards))


def pretrain_trunk(wildcards):
    """A pretraining branch's trunk record ({} for every other pretraining run)."""
    return study_workflow.pretrain_inputs(STUDY, OUT, wildcards)


def train_inputs(wildcards):
    """The task's data, plus the pretraining record (and so its checkpoint)
    that the run's prior loads or matches, and a wsd branch's trunk record."""
    return {"data": rules.task_data.output,
            **study_workflow.train_inputs(STUDY, OUT, wildcards)}


# Longest first: a job's priority is the estimated FLOPs of the longest chain
# of runs it starts (scalestudy.study.costs).
def train_priority(wildcards):
    return costs.train_priority(STUDY, study_workflow.run_cell(STUDY, wildcards))


def pretrain_priority(wildcards):
    return costs.pretrain_priority(STUDY, study_workflow.pretrain_run_cell(STUDY, wildcards))


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


TRAINING_RESOURCES = resources.training_resources(STUDY, gpus=LOCAL_GPUS)
PRETRAINING_RESOURCES = resources.training_resources(STUDY, gpus=LOCAL_GPUS,
                                                     section="pretrain")
# trainer.threads for each process of a run: one per device under DDP.
JOB_THREADS = resources.job_threads(STUDY)


def cpu_runs(wildcards):
    """On a cluster, CPU runs share one group, which profiles/slurm submits N
    at a time (group-components) instead of one sbatch per run; GPU runs go
    alone, and a workstation runs every job as its own."""
    return None if resources.gpu_study(STUDY) or workflow.local_exec else "cpu_runs"
