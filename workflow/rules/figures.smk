# Figures and tables from the collected runs and their fits. Every figure is a
# PNG (embedded in `snakemake --report`, with its caption), a PDF, and a CSV of
# what it plots (its source data: panel, series, x, y and interval; plots.figure_data).

from scalestudy.names import grid_figures

# The figures this study's grid feeds (scalestudy.names.grid_figures, the one list
# `scalestudy plot` also follows): the upstream figures only with the `upstream`
# prior, spt_vs_matched only with both `spt` and `scratch_matched`, arch_gap only with
# the transformer and another architecture, alpha_per_arch from three sizes,
# heldout_prediction from three, loss_vs_depth only under train.protocol: depth, and
# error_vs_compute and accuracy_vs_size_{task} always. `scalestudy plot` draws each of
# them, or, should every run it needs have failed, writes a notice saying why in its
# place, so that no declared output can be missing; a figure the grid cannot feed is
# not drawn at all. figures/index.md lists every figure with its file or the reason
# it was not drawn. Name -> caption: workflow/report/<caption>.rst.
FIGURE_CAPTIONS = grid_figures(
    GRID["tasks"], GRID["archs"], GRID["sizes"], GRID["priors"], config["train"]["protocol"]
)
FIGURE_PNGS = [f"{OUT}/figures/{name}.png" for name in FIGURE_CAPTIONS]
FIGURE_PDFS = [f"{OUT}/figures/{name}.pdf" for name in FIGURE_CAPTIONS]
FIGURE_DATA = [f"{OUT}/figures/{name}.csv" for name in FIGURE_CAPTIONS]
FIGURE_INDEX = f"{OUT}/figures/index.md"
TABLES = [f"{OUT}/tables/{name}" for name in ("alpha.csv", "alpha.md", "lra_accuracy.csv",
                                               "lra_accuracy.md", "heldout.csv", "heldout.md")]


rule figures:
    conda:
        CONDA_ENV
    input:
        runs=f"{OUT}/runs.parquet",
        fits=f"{OUT}/fits.parquet",
    output:
        [
            report(
                f"{OUT}/figures/{name}.png",
                caption=f"../report/{caption}.rst",
                category="Figures",
                labels={"figure": name},
            )
            for name, caption in FIGURE_CAPTIONS.items()
        ],
        FIGURE_PDFS,
        FIGURE_DATA,
        index=report(
            FIGURE_INDEX,
            caption="../report/figure_index.rst",
            category="Figures",
            labels={"figure": "index: drawn or why not"},
        ),
    params:
        tasks=GRID["tasks"],
        out_dir=lambda wc, output: os.path.dirname(output.index),
    log:
        f"{OUT}/logs/figures.log",
    # The figures are drawn side by side, one process each (scalestudy plot --workers).
    threads: 2
    shell:
        "scalestudy plot {input.runs:q} {input.fits:q} --out-dir {params.out_dir:q}"
        " --tasks {params.tasks:q} --workers {threads:q} > {log:q} 2>&1"


rule tables:
    conda:
        CONDA_ENV
    input:
        runs=f"{OUT}/runs.parquet",
        fits=f"{OUT}/fits.parquet",
    output:
        report(
            f"{OUT}/tables/alpha.csv",
            caption="../report/alpha_table.rst",
            category="Tables",
            labels={"table": "scaling coefficients"},
        ),
        f"{OUT}/tables/alpha.md",
        report(
            f"{OUT}/tables/lra_accuracy.csv",
            caption="../report/lra_table.rst",
            category="Tables",
            labels={"table": "test accuracy per prior (LRA style)"},
        ),
        f"{OUT}/tables/lra_accuracy.md",
        report(
            f"{OUT}/tables/heldout.csv",
            caption="../report/heldout_prediction.rst",
            category="Tables",
            labels={"table": "held-out prediction of the largest size"},
        ),
        f"{OUT}/tables/heldout.md",
    params:
        out_dir=lambda wc, output: os.path.dirname(output[0]),
    log:
        f"{OUT}/logs/tables.log",
    shell:
        "scalestudy tables {input.runs:q} {input.fits:q} --out-dir {params.out_dir:q}"
        " > {log:q} 2>&1"
