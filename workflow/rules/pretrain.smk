# Pretraining stages: one checkpoint shared by every run that needs it — per
# arch x size for upstream, per arch x size x task for spt (self-pretraining).
# The record, written last, is the rule's output: best.ckpt is not declared, so
# a pretraining run that diverged or failed (and has no checkpoint) is a
# finished job, and the runs that need it record `failed` saying so.


rule upstream_corpus:
    conda:
        CONDA_ENV
    output:
        expand(f"{OUT}/data/upstream/{{split}}.pt", split=["train", "val", "test"]),
        manifest=f"{OUT}/data/upstream/manifest.json",
    params:
        upstream=json.dumps(config["upstream"], sort_keys=True),
        out_dir=lambda wc, output: os.path.dirname(output.manifest),
    log:
        f"{OUT}/logs/data/upstream.log",
    shell:
        "scalestudy corpus --config {params.upstream:q} --out-dir {params.out_dir:q}"
        " > {log:q} 2>&1"


# spt and spt_causal (the self-pretraining stages, priors.SELF_PRETRAINING).
rule pretrain_spt:
    conda:
        CONDA_ENV
    input:
        rules.task_data.output,
    output:
        record=f"{OUT}/pretrain/{{stage}}/{{task}}/{{arch}}/{{size}}/record.parquet",
    wildcard_constraints:
        stage="|".join(SELF_PRETRAINING),
    params:
        spec=lambda wc: pretrain_spec(wc, wc.stage),
        data_dir=lambda wc: f"{OUT}/data/{wc.task}",
        out_dir=lambda wc, output: os.path.dirname(output.record),
    log:
        f"{OUT}/logs/pretrain/{{stage}}/{{task}}/{{arch}}/{{size}}.log",
    threads: config["trainer"]["threads"]
    priority: pretrain_priority
    resources:
        **training_resources(),
    group:
        cpu_runs
    shell:
        "scalestudy pretrain --spec {params.spec:q} --data-dir {params.data_dir:q}"
        " --out-dir {params.out_dir:q} > {log:q} 2>&1"


rule pretrain_upstream:
    conda:
        CONDA_ENV
    input:
        rules.upstream_corpus.output,
    output:
        record=f"{PRETRAIN_DIR['upstream']}/record.parquet",
    params:
        spec=lambda wc: pretrain_spec(wc, "upstream"),
        data_dir=lambda wc, input: os.path.dirname(input[0]),
        out_dir=lambda wc, output: os.path.dirname(output.record),
    log:
        f"{OUT}/logs/pretrain/upstream/{{arch}}/{{size}}.log",
    threads: config["trainer"]["threads"]
    priority: pretrain_priority
    resources:
        **training_resources(),
    group:
        cpu_runs
    shell:
        "scalestudy pretrain --spec {params.spec:q} --data-dir {params.data_dir:q}"
        " --out-dir {params.out_dir:q} > {log:q} 2>&1"
