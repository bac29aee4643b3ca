# Task data: generate the task (or convert a release) into split files.


rule task_data:
    output:
        expand(OUT + "/data/{{task}}/basic_{split}.tsv", split=["train", "val", "test"]),
    params:
        task_config=lambda wc: json.dumps(config["tasks"][wc.task], sort_keys=True),
        out_dir=lambda wc: f"{OUT}/data/{wc.task}",
    log:
        f"{OUT}/logs/data/{{task}}.log",
    shell:
        "scalestudy data --task {wildcards.task:q} --config {params.task_config:q}"
        " --out-dir {params.out_dir:q} > {log:q} 2>&1"
