# Collect every run record of the grid into one validated table.


rule collect:
    input:
        RECORDS,
    output:
        f"{OUT}/runs.parquet",
    log:
        f"{OUT}/logs/collect.log",
    shell:
        "scalestudy collect {input} --out {output} > {log} 2>&1"
