# scalestudy: the study DAG. Stages live in workflow/rules/*.smk; every rule is
# a thin call of the `scalestudy` command. The config is validated against
# config/schema.yaml before any job runs.

from snakemake.utils import min_version

min_version("9.0")


configfile: "config/config.yaml"


include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/pretrain.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/collect.smk"
include: "workflow/rules/analysis.smk"
include: "workflow/rules/figures.smk"
include: "workflow/rules/report.smk"


onstart:
    start_study()


onsuccess:
    end_study()


onerror:
    end_study()


rule all:
    input:
        f"{OUT}/runs.parquet",
        ANALYSIS_OUTPUTS,
        FIGURE_PNGS,
        FIGURE_PDFS,
        FIGURE_DATA,
        FIGURE_INDEX,
