# Task data: generate the task (or convert a release) into split files.


rule task_data:
    conda:
        CONDA_ENV
    output:
        expand(f"{OUT}/data/{{{{task}}}}/basic_{{split}}.tsv", split=["train", "val", "test"]),
    params:
        task_config=lambda wc: json.dumps(config["tasks"][wc.task], sort_keys=True),
        out_dir=lambda wc: f"{OUT}/data/{wc.task}",
    log:
        f"{OUT}/logs/data/{{task}}.log",
    shell:
        "scalestudy data --task {wildcards.task} --config {params.task_config:q}"
        " --out-dir {params.out_dir} > {log} 2>&1"
