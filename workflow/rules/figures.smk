# The figures stage (scalestudy.analysis.stages `figures`), one job per figure
# of the figure registry: `scalestudy figure`, a part of the stage, draws one
# from the collected runs and their fits (its frontier figures from the
# frontier). Every figure is a PNG (embedded in `snakemake --report`, with its
# caption), a PDF, and a CSV of what it plots (its source data: panel, series,
# x, y and interval).

from scalestudy.analysis.figures import Grid, grid_figures

# The figures this study's grid feeds (the figure registry's `feeds`), one job
# each: e.g. the upstream figures only with the `upstream` prior, spt_vs_matched
# only with both `spt` and `scratch_matched`, alpha_per_arch from three sizes,
# and error_vs_compute and accuracy_vs_size_{task} always. A declared figure
# that finds nothing to draw (every run it needs failed) writes a notice saying
# why in its place, so that no declared output can be missing. figures/index.md
# lists every figure of the registry with its files or the reason it was not
# drawn. Each figure's caption is its registry entry's. The frontier's figures
# (a study with budgets) are drawn from the frontier's artifact by the
# frontier_figure rule, the others from the runs and fits.
DECLARED = grid_figures(
    Grid.of(list(GRID.tasks), list(GRID.archs), list(GRID.sizes), list(GRID.priors),
            STUDY.train.protocol, budgeted=bool(BUDGETS))
)
FIGURE_PNGS = [f"{ARTIFACT['figures']}/{name}.png" for name in DECLARED]
FIGURE_PDFS = [f"{ARTIFACT['figures']}/{name}.pdf" for name in DECLARED]
FIGURE_DATA = [f"{ARTIFACT['figures']}/{name}.csv" for name in DECLARED]
FIGURE_INDEX = f"{ARTIFACT['figures']}/index.md"
# The figures the frontier feeds (all three, with budgets).
FRONTIER_FIGURES = [stem for stem, (figure, _) in DECLARED.items() if figure.from_frontier]


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


if BUDGETS:

    localrules:
        frontier_figure,

    rule frontier_figure:
        conda:
            CONDA_ENV
        input:
            runs=f"{OUT}/runs.parquet",
            fits=ARTIFACT["fit"],
            frontier=FRONTIER,
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
            figure=one_of(FRONTIER_FIGURES),
        params:
            tasks=list(GRID.tasks),
            caption=lambda wc: DECLARED[wc.figure][0].caption,
            out_dir=lambda wc, output: os.path.dirname(output.png),
            frontier=ARTIFACT["frontier"],
        log:
            f"{OUT}/logs/figures/{{figure}}.log",
        shell:
            "scalestudy figure {input.runs:q} {input.fits:q} --name {wildcards.figure:q}"
            " --frontier {params.frontier:q} --out-dir {params.out_dir:q}"
            " --entry {output.entry:q} --tasks {params.tasks:q}" + LOGGED
