# Collect every run record of the grid (task runs and the pretraining runs
# they used) into one validated table.


rule collect:
    conda:
        CONDA_ENV
    input:
        RECORDS,
        PRETRAIN_RECORDS,
    output:
        f"{OUT}/runs.parquet",
    log:
        f"{OUT}/logs/collect.log",
    shell:
        "scalestudy collect {input:q} --out {output:q}" + LOGGED
