# Fit power laws (alpha_D per task x arch x prior) with bootstrap intervals.


rule fit:
    input:
        f"{OUT}/runs.parquet",
    output:
        f"{OUT}/fits.parquet",
    params:
        x_axis=config["fit"]["x_axis"],
        n_boot=config["fit"]["n_boot"],
        ci=config["fit"]["ci"],
    log:
        f"{OUT}/logs/fit.log",
    shell:
        "scalestudy fit {input} --out {output} --x {params.x_axis}"
        " --n-boot {params.n_boot} --ci {params.ci} > {log} 2>&1"
