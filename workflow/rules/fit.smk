# Fit every scaling coefficient (alpha_U per arch, log-log and saturating; alpha_D per
# task x arch x prior; alpha_U,D and alpha_D/alpha_U per task x arch) with bootstrap
# intervals, into one tidy table (a `metric` column).


rule fit:
    conda:
        CONDA_ENV
    input:
        f"{OUT}/runs.parquet",
    output:
        ARTIFACT["fit"],
    params:
        x_axis=config["fit"]["x_axis"],
        n_boot=config["fit"]["n_boot"],
        ci=config["fit"]["ci"],
    log:
        f"{OUT}/logs/fit.log",
    shell:
        "scalestudy fit {input:q} --out {output:q} --x {params.x_axis:q}"
        " --n-boot {params.n_boot:q} --ci {params.ci:q}" + LOGGED
