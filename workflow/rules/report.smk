# The report (the claims rule is an analysis stage's: analysis.smk). After the
# workflow has run:
#   snakemake --report results/<study>/report.html
# embeds every figure, table and claims.md with its caption. No --configfile:
# the path names the study, whose saved config (results/<study>/study.yaml)
# the workflow then reads (scalestudy.workflow.reported_study).


report: "../report/workflow.rst"
