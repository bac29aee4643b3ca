"""The study's vocabulary: the accepted names of every grid dimension, and the
figures a grid feeds.

Kept free of torch and matplotlib so that config validation, records, figures
and the workflow's DAG (workflow/rules/figures.smk, on every Snakemake
invocation) can use it on an analysis-only install. The model and prior
registries are checked against these tuples by the tests, and
config/schema.yaml lists the same names.
"""

ARCHITECTURES = (
    "transformer", "glu", "mos", "evolved", "universal", "switch", "performer", "funnel",
    "albert", "mixer", "lconv", "dconv", "s4", "s4_unstructured",
)
PRIORS = ("random", "random_noln", "random_causal", "tfixup", "dtfixup", "spt", "spt_causal",
          "upstream", "scratch_matched")
# The Long Range Arena tasks (tasks/): each reads LRA's release or an offline stand-in.
TASKS = ("listops", "text", "retrieval", "image", "pathfinder", "pathx")
# Architectures whose mechanism has no causal mode (funnel: pooling merges
# positions t and t+1); the registry and the workflow refuse train.causal there.
NON_CAUSAL = ("funnel",)
STAGES = ("upstream", "spt", "spt_causal", "finetune", "scratch")
STATUSES = ("ok", "diverged", "failed")
# How a fit ends (train.until), and a record's stopped_by: after max_steps, or
# at its validation loss's plateau (loop.Fit.validate) with max_steps as the cap.
UNTIL = ("max_steps", "plateau")
NORMS = ("pre", "post", "none")
X_AXES = ("compute", "params", "flops_per_token")

# The figures scalestudy.plots draws; PER_TASK_FIGURES once per task.
FIGURES = (
    "upstream_loss_vs_compute", "error_vs_compute", "alpha_per_arch", "arch_gap",
    "loss_vs_depth", "downstream_vs_upstream", "spt_vs_matched", "heldout_prediction",
)
PER_TASK_FIGURES = ("accuracy_vs_size",)


def figure_names(tasks) -> list[str]:
    """The stem of every figure `plot_all` can write for a study with these tasks."""
    return [*FIGURES, *(f"{name}_{task}" for name in PER_TASK_FIGURES for task in tasks)]


def grid_figures(tasks, archs, sizes, priors, protocol: str = "default") -> dict[str, str]:
    """The figures a study with this grid feeds, each with its caption's name (the
    figure's kind): the outputs the workflow's `figures` rule declares.

    - `upstream_loss_vs_compute`, `downstream_vs_upstream`: the `upstream` prior;
    - `alpha_per_arch`: three sizes (the fewest a fit accepts);
    - `heldout_prediction`: three sizes (two to refit a log-log law, the largest
      held out);
    - `arch_gap`: the transformer, another architecture, and `random` or `spt`;
    - `spt_vs_matched`: both `spt` and `scratch_matched`;
    - `loss_vs_depth`: the `depth` protocol (depth grows at a fixed width) and two
      sizes;
    - `error_vs_compute` and `accuracy_vs_size_{task}`: always.
    """
    archs, priors, n_sizes = set(archs), set(priors), len(set(sizes))
    if not (archs and priors and n_sizes):
        return {}  # no grid cells: no runs, nothing to draw
    feeds = {
        "upstream_loss_vs_compute": "upstream" in priors,
        "error_vs_compute": True,
        "alpha_per_arch": n_sizes >= 3,
        "arch_gap": "transformer" in archs and len(archs) >= 2
        and bool(priors & {"random", "spt"}),
        "loss_vs_depth": protocol == "depth" and n_sizes >= 2,
        "downstream_vs_upstream": "upstream" in priors,
        "spt_vs_matched": {"spt", "scratch_matched"} <= priors,
        "heldout_prediction": n_sizes >= 3,
    }
    out = {name: name for name in FIGURES if feeds[name]}
    for kind in PER_TASK_FIGURES:
        out |= {f"{kind}_{task}": kind for task in tasks}
    return out
