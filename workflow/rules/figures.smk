# Figures from the collected runs and their fits.


rule figures:
    input:
        runs=f"{OUT}/runs.parquet",
        fits=f"{OUT}/fits.parquet",
    output:
        FIGURES,
    log:
        f"{OUT}/logs/figures.log",
    shell:
        "scalestudy plot {input.runs} {input.fits} --out-dir {OUT}/figures > {log} 2>&1"
