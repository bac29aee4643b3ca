# The compute-optimal frontier of a study with budgets (grid.budgets): Hoffmann
# et al.'s three approaches per architecture and prior on the study's budgeted
# runs (scalestudy.analysis.frontier_study: the upstream loss of the budgeted
# pretraining runs, the validation loss of budgeted runs from scratch), the same
# code as `scalestudy frontier TABLE` on any table. Its tables and its three
# figures (IsoFLOP profiles, N_opt and D_opt against C, the loss at the optimum
# extrapolated a decade) go to results/{study}/frontier/. A study without
# budgets has no frontier rule.

from scalestudy.analysis.frontier import OUTPUT_TABLES
from scalestudy.analysis.frontier_figures import FIGURES as FRONTIER_FIGURES

FRONTIER = (
    [f"{OUT}/frontier/{name}" for name in OUTPUT_TABLES]
    + [f"{OUT}/frontier/{name}.{ext}" for name in FRONTIER_FIGURES for ext in ("png", "pdf")]
    if BUDGETS
    else []
)

if BUDGETS:

    rule frontier:
        conda:
            CONDA_ENV
        input:
            f"{OUT}/runs.parquet",
        output:
            FRONTIER,
        params:
            out_dir=f"{OUT}/frontier",
            n_boot=config["fit"]["n_boot"],
            ci=config["fit"]["ci"],
        log:
            f"{OUT}/logs/frontier.log",
        shell:
            "scalestudy frontier {input:q} --from-runs --out-dir {params.out_dir:q}"
            " --n-boot {params.n_boot:q} --ci {params.ci:q} > {log:q} 2>&1"
