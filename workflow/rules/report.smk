# The claim checks and the report. After the workflow has run:
#   snakemake --report results/<study>/report.html
# embeds every figure, table and claims.md with its caption. No --configfile:
# the path names the study, whose saved config (results/<study>/study.yaml)
# the workflow then reads (scalestudy.workflow.reported_study).


report: "../report/workflow.rst"


rule claims:
    conda:
        CONDA_ENV
    input:
        runs=f"{OUT}/runs.parquet",
        fits=ARTIFACT["fit"],
        # A study with budgets: the frontier its frontier claims read (frontier.smk).
        frontier=lambda wildcards: FRONTIER,
    output:
        report(
            ARTIFACT["claims"],
            caption="../report/claims.rst",
            category="Claims",
            labels={"claims": "the three papers' headline claims"},
        ),
    params:
        n_boot=config["fit"]["n_boot"],
        ci=config["fit"]["ci"],
        frontier=f"--frontier {ARTIFACT['frontier']}" if BUDGETS else "",
    log:
        f"{OUT}/logs/claims.log",
    shell:
        "scalestudy claims {input.runs:q} {input.fits:q} --out {output:q}"
        " --n-boot {params.n_boot:q} --ci {params.ci:q} {params.frontier}" + LOGGED
