# Task data: convert the task's source (LRA's release or its offline stand-in)
# into the data contract (tasks/contract.py): arrays and manifest.json.


rule task_data:
    conda:
        CONDA_ENV
    output:
        expand(f"{OUT}/data/{{{{task}}}}/{{split}}.npz", split=["train", "val", "test"]),
        manifest=f"{OUT}/data/{{task}}/manifest.json",
    params:
        task_config=lambda wc: specs.as_json(specs.task_section(STUDY, wc.task)),
        out_dir=lambda wc, output: os.path.dirname(output.manifest),
    log:
        f"{OUT}/logs/data/{{task}}.log",
    shell:
        "scalestudy data --task {wildcards.task:q} --config {params.task_config:q}"
        " --out-dir {params.out_dir:q}" + LOGGED
