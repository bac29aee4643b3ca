# Train one grid cell (from its prior's pretraining checkpoint where it has
# one; a wsd branch from its trunk's fork checkpoint: training/branches.py);
# the run record is written last, atomically.


rule train:
    conda:
        CONDA_ENV
    input:
        unpack(train_inputs),
    output:
        record=f"{RUN_DIR}/record.parquet",
    params:
        spec=run_spec,
        data_dir=lambda wc: f"{OUT}/data/{wc.task}",
        run_dir=lambda wc, output: os.path.dirname(output.record),
        # A list, so that {params.pretrained:q} quotes the directory as one word.
        pretrained=lambda wc, input: (
            ["--pretrained", os.path.dirname(input.pretrained)]
            if "pretrained" in input.keys()
            else []
        ),
    log:
        f"{OUT}/logs/train/{{task}}/{{arch}}/{{size}}/{{prior}}/s{{seed}}.log"
        if not BUDGETS
        else f"{OUT}/logs/train/{{task}}/{{arch}}/{{size}}/b{{budget}}/{{prior}}/s{{seed}}.log",
    threads: JOB_THREADS
    priority: train_priority
    resources:
        **TRAINING_RESOURCES,
    group:
        cpu_runs
    shell:
        "scalestudy train --spec {params.spec:q} --data-dir {params.data_dir:q}"
        " --run-dir {params.run_dir:q} {params.pretrained:q}" + LOGGED
