# The compute-optimal frontier of a study with budgets (grid.budgets): Hoffmann
# et al.'s three approaches per architecture and prior on the study's budgeted
# runs (scalestudy.analysis.frontier.study: the upstream loss of the budgeted
# pretraining runs, the validation loss of budgeted runs from scratch), the same
# stage as `scalestudy frontier TABLE` on any table. Its tables, its runs and its
# fits' bootstrap replicates go to results/{study}/frontier/ (replaced whole);
# its three figures (IsoFLOP profiles, N_opt and D_opt against C, the loss at
# the optimum extrapolated a decade), entries of the figure registry, are drawn
# from them into figures/ with the others, and the frontier claims read them
# (report.smk). A study without budgets has no frontier rules. Only numpy and
# pandas are imported here (the file names), never the fits nor matplotlib.

from scalestudy.analysis.frontier.result import FILES as FRONTIER_FILES

FRONTIER = [f"{ARTIFACT['frontier']}/{name}" for name in FRONTIER_FILES] if BUDGETS else []
# The figures the frontier feeds (all three, with budgets; figures.smk declares them).
FRONTIER_FIGURES = [stem for stem, (figure, _) in DECLARED.items() if figure.from_frontier]

if BUDGETS:

    # Bookkeeping of seconds: runs where Snakemake runs, as the other analysis rules.
    localrules:
        frontier,
        frontier_figure,

    rule frontier:
        conda:
            CONDA_ENV
        input:
            f"{OUT}/runs.parquet",
        output:
            FRONTIER,
        params:
            out_dir=ARTIFACT["frontier"],
            n_boot=config["fit"]["n_boot"],
            ci=config["fit"]["ci"],
        log:
            f"{OUT}/logs/frontier.log",
        shell:
            "scalestudy frontier {input:q} --from-runs --no-figures --out-dir {params.out_dir:q}"
            " --n-boot {params.n_boot:q} --ci {params.ci:q}" + LOGGED

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
