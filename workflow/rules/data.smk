# Task data: convert the task's source (LRA's release or its offline stand-in)
# into the data contract (tasks/contract.py): arrays and manifest.json.


rule task_data:
    conda:
        CONDA_ENV
    output:
        expand(OUT + "/data/{{task}}/{split}.npz", split=["train", "val", "test"]),
        manifest=OUT + "/data/{task}/manifest.json",
    params:
        task_config=lambda wc: json.dumps(config["tasks"][wc.task], sort_keys=True),
        out_dir=lambda wc: f"{OUT}/data/{wc.task}",
    log:
        f"{OUT}/logs/data/{{task}}.log",
    shell:
        "scalestudy data --task {wildcards.task:q} --config {params.task_config:q}"
        " --out-dir {params.out_dir:q} > {log:q} 2>&1"
