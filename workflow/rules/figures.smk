# Figures and tables from the collected runs and their fits. Every figure is a
# PNG (embedded in `snakemake --report`, with its caption), a PDF, and a CSV of
# what it plots (its source data: panel, series, x, y and interval).

from scalestudy.analysis.figures import Grid, grid_figures

# The figures this study's grid feeds (the figure registry's `feeds`), one job
# each: e.g. the upstream figures only with the `upstream` prior, spt_vs_matched
# only with both `spt` and `scratch_matched`, alpha_per_arch from three sizes,
# and error_vs_compute and accuracy_vs_size_{task} always. A declared figure
# that finds nothing to draw (every run it needs failed) writes a notice saying
# why in its place, so that no declared output can be missing. figures/index.md
# lists every figure of the registry with its files or the reason it was not
# drawn. Each figure's caption is its registry entry's. The frontier's figures
# (a study with budgets) are drawn from the frontier by frontier.smk's
# frontier_figure rule, the others from the runs and fits here.
DECLARED = grid_figures(
    Grid.of(list(GRID.tasks), list(GRID.archs), list(GRID.sizes), list(GRID.priors),
            STUDY.train.protocol, budgeted=bool(BUDGETS))
)
FIGURE_PNGS = [f"{ARTIFACT['figures']}/{name}.png" for name in DECLARED]
FIGURE_PDFS = [f"{ARTIFACT['figures']}/{name}.pdf" for name in DECLARED]
FIGURE_DATA = [f"{ARTIFACT['figures']}/{name}.csv" for name in DECLARED]
FIGURE_INDEX = f"{ARTIFACT['figures']}/index.md"
TABLES = [f"{ARTIFACT['tables']}/{name}"
          for name in ("alpha.csv", "alpha.md", "lra_accuracy.csv", "lra_accuracy.md",
                       "heldout.csv", "heldout.md")]


rule figure:
    conda:
        CONDA_ENV
    input:
        runs=f"{OUT}/runs.parquet",
        fits=ARTIFACT["fit"],
    output:
        png=report(
            f"{ARTIFACT['figures']}/{{figure}}.png",
            caption="../report/figure.rst",
            category="Figures",
            labels={"figure": "{figure}"},
        ),
        pdf=f"{ARTIFACT['figures']}/{{figure}}.pdf",
        data=f"{ARTIFACT['figures']}/{{figure}}.csv",
        entry=f"{ARTIFACT['figures']}/index/{{figure}}.json",
    wildcard_constraints:
        figure=one_of([stem for stem, (fig, _) in DECLARED.items() if not fig.from_frontier]),
    params:
        tasks=list(GRID.tasks),
        caption=lambda wc: DECLARED[wc.figure][0].caption,
        out_dir=lambda wc, output: os.path.dirname(output.png),
    log:
        f"{OUT}/logs/figures/{{figure}}.log",
    shell:
        "scalestudy figure {input.runs:q} {input.fits:q} --name {wildcards.figure:q}"
        " --out-dir {params.out_dir:q} --entry {output.entry:q} --tasks {params.tasks:q}"
        + LOGGED


rule figure_index:
    conda:
        CONDA_ENV
    input:
        [f"{ARTIFACT['figures']}/index/{name}.json" for name in DECLARED],
    output:
        report(
            FIGURE_INDEX,
            caption="../report/figure_index.rst",
            category="Figures",
            labels={"figure": "index: drawn or why not"},
        ),
    params:
        tasks=list(GRID.tasks),
    log:
        f"{OUT}/logs/figures/index.log",
    shell:
        "scalestudy figure-index {input:q} --out {output:q} --tasks {params.tasks:q}"
        + LOGGED


rule tables:
    conda:
        CONDA_ENV
    input:
        runs=f"{OUT}/runs.parquet",
        fits=ARTIFACT["fit"],
    output:
        report(
            f"{ARTIFACT['tables']}/alpha.csv",
            caption="../report/alpha_table.rst",
            category="Tables",
            labels={"table": "scaling coefficients"},
        ),
        f"{ARTIFACT['tables']}/alpha.md",
        report(
            f"{ARTIFACT['tables']}/lra_accuracy.csv",
            caption="../report/lra_table.rst",
            category="Tables",
            labels={"table": "test accuracy per prior (LRA style)"},
        ),
        f"{ARTIFACT['tables']}/lra_accuracy.md",
        report(
            f"{ARTIFACT['tables']}/heldout.csv",
            caption="../report/heldout_table.rst",
            category="Tables",
            labels={"table": "held-out prediction of the largest size"},
        ),
        f"{ARTIFACT['tables']}/heldout.md",
    params:
        out_dir=lambda wc, output: os.path.dirname(output[0]),
    log:
        f"{OUT}/logs/tables.log",
    shell:
        "scalestudy tables {input.runs:q} {input.fits:q} --out-dir {params.out_dir:q}"
        + LOGGED
