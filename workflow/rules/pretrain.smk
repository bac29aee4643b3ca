# Pretraining stages (scalestudy.stages): one checkpoint shared by every run
# that needs it — per arch x size for a stage on the upstream corpus, per
# arch x size x task for a stage on the task's own data (self-pretraining) —
# or, with pretrain.seeds: per_seed, one per finetuning seed (directory s{seed}).
# The record, written last, is the rule's output: best.ckpt is not declared, so
# a pretraining run that diverged or failed (and has no checkpoint) is a
# finished job, and the runs that need it record `failed` saying so.

# With grid.budgets, one per budget too (b{budget}); under train.schedule wsd
# a budget's branch starts from its trunk's fork checkpoint (found beside it).

from scalestudy.stages import TASK_DIRECTORY, UPSTREAM_DIRECTORY, seeded

TASK_PRETRAIN = seeded(grid.budgeted(TASK_DIRECTORY, bool(BUDGETS)), PER_SEED)
UPSTREAM_PRETRAIN = seeded(grid.budgeted(UPSTREAM_DIRECTORY, bool(BUDGETS)), PER_SEED)


rule upstream_corpus:
    conda:
        CONDA_ENV
    output:
        expand(f"{OUT}/data/upstream/{{split}}.pt", split=["train", "val", "test"]),
        manifest=f"{OUT}/data/upstream/manifest.json",
    params:
        upstream=specs.as_json(config["upstream"]),
        out_dir=lambda wc, output: os.path.dirname(output.manifest),
    log:
        f"{OUT}/logs/data/upstream.log",
    shell:
        "scalestudy corpus --config {params.upstream:q} --out-dir {params.out_dir:q}"
        + LOGGED


# The stages that pretrain on the task's own data (spt, spt_causal).
rule pretrain_task:
    conda:
        CONDA_ENV
    input:
        rules.task_data.output,
        unpack(pretrain_trunk),
    output:
        record=f"{OUT}/{TASK_PRETRAIN}/record.parquet",
    wildcard_constraints:
        stage=one_of(TASK_STAGES),
    params:
        spec=pretrain_spec,
        data_dir=lambda wc: f"{OUT}/data/{wc.task}",
        out_dir=lambda wc, output: os.path.dirname(output.record),
    log:
        f"{OUT}/logs/{TASK_PRETRAIN}.log",
    threads: JOB_THREADS
    priority: pretrain_priority
    resources:
        **PRETRAINING_RESOURCES,
    group:
        cpu_runs
    shell:
        "scalestudy pretrain --spec {params.spec:q} --data-dir {params.data_dir:q}"
        " --out-dir {params.out_dir:q}" + LOGGED


# The stages that pretrain on the upstream corpus (upstream).
rule pretrain_upstream:
    conda:
        CONDA_ENV
    input:
        rules.upstream_corpus.output,
        unpack(pretrain_trunk),
    output:
        record=f"{OUT}/{UPSTREAM_PRETRAIN}/record.parquet",
    wildcard_constraints:
        stage=one_of(UPSTREAM_STAGES),
    params:
        spec=pretrain_spec,
        data_dir=lambda wc, input: os.path.dirname(input[0]),
        out_dir=lambda wc, output: os.path.dirname(output.record),
    log:
        f"{OUT}/logs/{UPSTREAM_PRETRAIN}.log",
    threads: JOB_THREADS
    priority: pretrain_priority
    resources:
        **PRETRAINING_RESOURCES,
    group:
        cpu_runs
    shell:
        "scalestudy pretrain --spec {params.spec:q} --data-dir {params.data_dir:q}"
        " --out-dir {params.out_dir:q}" + LOGGED
