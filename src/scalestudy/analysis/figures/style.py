"""The house style of every figure: one colour and marker per architecture and
one line style and marker fill per prior (from their registries), axis labels,
and the matplotlib settings figures are drawn under.
"""

from __future__ import annotations

import functools

import matplotlib

# Files only, never a display: the figure modules take pyplot from here, on
# Agg unless a backend was chosen before (Jupyter's inline one, MPLBACKEND),
# which is kept so that a notebook's own figures still show (and show once).
if matplotlib.rcParams._get_backend_or_none() is None:
    matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from ...architectures import ARCHITECTURES  # noqa: E402
from ...priors import PRIORS  # noqa: E402

# The colour and marker of each architecture and the line style and marker fill
# of each prior are their registry entries' (architectures.py, priors/): the
# marker's shape and colour stay the architecture's, so where a panel shows one
# architecture its priors differ in line style and fill.
ARCH_STYLES: dict[str, dict] = {name: arch.style for name, arch in ARCHITECTURES.items()}
PRIOR_STYLES: dict[str, dict] = {name: prior.style for name, prior in PRIORS.items()}
NORM_LABELS = {"pre": "pre-LN", "post": "post-LN", "none": "no LayerNorm"}
NEUTRAL = "#555555"  # series that are not one architecture
UNKNOWN_STYLE = {"color": NEUTRAL, "marker": "."}
X_LABELS = {
    "compute": "training compute C (FLOPs)",
    "params": "non-embedding parameters",
    "flops_per_token": "FLOPs per token",
}
X_TITLES = {"compute": "compute", "params": "model size", "flops_per_token": "FLOPs per token"}
# The compute-optimal frontier's three approaches (analysis/frontier): a colour,
# marker and line style each, the same in each of its figures.
METHOD_STYLES = {
    "approach1": {"color": "#1b9e77", "marker": "o", "linestyle": "-"},
    "approach2": {"color": "#d95f02", "marker": "s", "linestyle": "--"},
    "approach3": {"color": "#7570b3", "marker": "^", "linestyle": ":"},
}
# Fitted lines carry the pointwise percentile band of this many bootstrap replicates,
# drawn as the fit's own interval draws them (scaling.loglog_replicates, seed 0).
BAND_BOOT = 1000
BAND_SEED = 0

INDEX = "index.md"


def arch_style(arch: str) -> dict:
    """The colour and marker of an architecture, the same in every figure."""
    return dict(ARCH_STYLES.get(arch, UNKNOWN_STYLE))


def prior_style(prior: str) -> dict:
    """The line style and marker fill of a prior, the same in every figure."""
    return dict(PRIOR_STYLES.get(prior, {"linestyle": "-", "fillstyle": "full"}))


# Where a panel shows one architecture and a line per prior (accuracy_vs_size),
# the priors are told apart by colour and marker shape as well: the i-th prior
# of the registry takes the i-th of each list, so a new prior gets the next
# (tests/analysis/figures/test_figures.py checks that the lists cover the registry).
# The colours: black for the baseline (random), then matplotlib's tab10 with
# its grey last. The markers: shapes no two of which look alike at a panel's
# size (no polygon that reads as a circle, no `+` or `x`, which mark unfinished
# runs), the plainest for the priors most studies run.
PRIOR_COLOURS = ("#000000", "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                 "#8c564b", "#e377c2", "#bcbd22", "#17becf", "#7f7f7f")
PRIOR_MARKERS = ("o", "v", "<", "s", "D", "^", ">", "*", "P", "X", "1")


def prior_mark(prior: str) -> dict:
    """The colour and marker of a prior where a panel's lines are priors
    (its line style and marker fill: `prior_style`)."""
    i = PRIORS.names.index(prior) if prior in PRIORS else None
    if i is None or i >= min(len(PRIOR_COLOURS), len(PRIOR_MARKERS)):
        return dict(UNKNOWN_STYLE)
    return {"color": PRIOR_COLOURS[i], "marker": PRIOR_MARKERS[i]}


def prior_linestyle(prior: str):
    return prior_style(prior)["linestyle"]


arch_rank = ARCHITECTURES.rank  # figures list architectures and priors in registry order
prior_rank = PRIORS.rank


STYLE = {
    "font.size": 9, "axes.titlesize": 9.5, "legend.fontsize": 8, "axes.grid": True,
    "grid.alpha": 0.3, "axes.spines.top": False, "axes.spines.right": False,
    "legend.handlelength": 4.5,  # long enough to tell the priors' line styles apart
    "lines.markersize": 5.5, "errorbar.capsize": 2,
}


def styled(plot):
    """Draw `plot`'s figure in the house style (STYLE), leaving global settings alone."""

    @functools.wraps(plot)
    def wrapper(*args, **kwargs):
        with plt.rc_context(STYLE):
            return plot(*args, **kwargs)

    return wrapper
