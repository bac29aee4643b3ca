# Figures and tables from the collected runs and their fits. Every figure is a
# PNG (embedded in `snakemake --report`, with its caption) and a PDF.

# The figures `scalestudy plot` writes (scalestudy.plots.FIGURES and, once per
# task, PER_TASK_FIGURES; tests/test_analysis.py checks the two lists agree).
# Each has its caption in workflow/report/<name>.rst.
STUDY_FIGURES = [
    "upstream_loss_vs_compute",
    "error_vs_compute",
    "alpha_per_arch",
    "arch_gap",
    "loss_vs_depth",
    "downstream_vs_upstream",
    "spt_vs_matched",
    "heldout_prediction",
]
PER_TASK_FIGURES = ["accuracy_vs_size"]

FIGURE_CAPTIONS = {name: name for name in STUDY_FIGURES} | {
    f"{name}_{task}": name for name in PER_TASK_FIGURES for task in GRID["tasks"]
}
FIGURE_PNGS = [f"{OUT}/figures/{name}.png" for name in FIGURE_CAPTIONS]
FIGURE_PDFS = [f"{OUT}/figures/{name}.pdf" for name in FIGURE_CAPTIONS]
TABLES = [f"{OUT}/tables/{name}" for name in ("alpha.csv", "alpha.md", "lra_accuracy.csv",
                                               "lra_accuracy.md", "heldout.csv", "heldout.md")]


rule figures:
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
    params:
        tasks=" ".join(GRID["tasks"]),
    log:
        f"{OUT}/logs/figures.log",
    shell:
        "scalestudy plot {input.runs} {input.fits} --out-dir {OUT}/figures"
        " --tasks {params.tasks} > {log} 2>&1"


rule tables:
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
    log:
        f"{OUT}/logs/tables.log",
    shell:
        "scalestudy tables {input.runs} {input.fits} --out-dir {OUT}/tables > {log} 2>&1"
