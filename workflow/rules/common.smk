# Config validation, the grid, and the helpers the rules share.

import json
import os

from snakemake.utils import validate

validate(config, "../../config/schema.yaml")

OUT = f"results/{config['study']}"
GRID = config["grid"]


wildcard_constraints:
    task="|".join(GRID["tasks"]),
    arch="|".join(GRID["archs"]),
    size="|".join(GRID["sizes"]),
    prior="|".join(GRID["priors"]),
    seed=r"\d+",


RUN_DIR = OUT + "/runs/{task}/{arch}/{size}/{prior}/s{seed}"

RECORDS = expand(
    f"{RUN_DIR}/record.parquet",
    task=GRID["tasks"],
    arch=GRID["archs"],
    size=GRID["sizes"],
    prior=GRID["priors"],
    seed=GRID["seeds"],
)

FIGURES = expand(f"{OUT}/figures/error_vs_compute.{{ext}}", ext=["png", "pdf"])


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
