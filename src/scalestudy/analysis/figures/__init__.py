"""The figure registry: every figure a study can draw, what feeds it, and its
caption.

An entry names the module that draws it (figures/<module>.py, whose `draw`
takes the runs, the fits, the output directory and the tasks, plus the
entry's `params`: the priors or architectures the figure is about, and whose
`panel` draws one of its panels into a given Axes, from which `draw` composes
the figure; the notebook API's `study.plot.<figure>`), the
caption `snakemake --report` shows beside it, and `feeds`: whether a study's
grid can feed it, which decides the figures the workflow declares
(`grid_figures`) and, in words (`needs`), what figures/index.md says of one it
does not. A per-task figure is drawn once per task (`<name>_<task>`). A figure
of the compute-optimal frontier (`from_frontier`) draws the frontier's result
(analysis/frontier: `draw(frontier, out_dir)`, `panel(ax, frontier, ...)`)
instead of the runs and fits: a study with budgets feeds it.

This module imports neither matplotlib nor torch: the workflow reads it when
it builds the DAG. The figure modules import matplotlib when they draw.
docs/analysis.md says what each figure shows and how it is computed.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import pandas as pd

from ...architectures import ARCHITECTURES
from ...registry import Registry
from ..fits import is_budgeted, task_runs, transfers_upstream, upstream_runs


@dataclass(frozen=True)
class Grid:
    """What a study's grid holds, as far as the figures care."""

    tasks: tuple
    archs: frozenset
    sizes: frozenset
    priors: frozenset
    protocol: str = "default"
    budgeted: bool = False  # it states budgets (grid.budgets)

    @classmethod
    def of(cls, tasks: Iterable, archs: Iterable, sizes: Iterable, priors: Iterable,
           protocol: str = "default", budgeted: bool = False) -> Grid:
        return cls(tuple(tasks), frozenset(archs), frozenset(sizes), frozenset(priors),
                   protocol, budgeted)

    @classmethod
    def of_runs(cls, runs: pd.DataFrame, tasks) -> Grid:
        """The grid the run records cover (every run, whatever its status: the
        workflow collects a record of every cell)."""
        t = task_runs(runs)
        both = pd.concat([t, upstream_runs(runs)])
        protocols = set(t["protocol"]) if "protocol" in t else set()
        return cls.of(tasks, t["arch"], both["size"], t["prior"],
                      "depth" if "depth" in protocols else "default", is_budgeted(runs))

    @property
    def upstream(self) -> bool:
        """A prior finetunes a stage that measures the upstream loss."""
        return any(transfers_upstream(p) for p in self.priors)


def reference_arch() -> str:
    """The vanilla baseline the architecture gap is measured from."""
    return next(name for name, arch in ARCHITECTURES.items() if arch.reference)


@dataclass(frozen=True)
class Figure:
    name: str
    caption: str  # reStructuredText, beside the figure in `snakemake --report`
    needs: str  # what feeds it, in words
    # Whether a grid feeds it, given the grid and the entry's params.
    feeds: Callable[..., bool] = lambda grid, **params: True
    params: dict = field(default_factory=dict)
    per_task: bool = False
    from_frontier: bool = False  # drawn from the frontier's result, not the runs and fits

    def fed_by(self, grid: Grid) -> bool:
        return self.feeds(grid, **self.params)

    @property
    def module(self):
        """figures/<name>.py, which draws it (imports matplotlib)."""
        return importlib.import_module(f"{__name__}.{self.name}")

    @property
    def inputs(self) -> tuple[str, ...]:
        """What its module's `draw` and `panel` take before their own arguments."""
        return ("frontier",) if self.from_frontier else ("runs", "fits")

    def draw(self, runs, fits, out_dir, tasks=None, task=None, frontier=None):
        """Draw it (or raise output.NotDrawn saying why); returns output.Drawn.
        A frontier figure draws `frontier` (a FrontierResult), the others the
        runs and fits."""
        if self.from_frontier:
            return self.module.draw(self._fitted(frontier), out_dir, **self.params)
        self._refuse_budgeted(runs)
        where = {"task": task} if self.per_task else {"tasks": tasks}
        return self.module.draw(runs, fits, out_dir, **where, **self.params)

    def panel(self, ax, runs, fits, frontier=None, **which):
        """Draw one of its panels into `ax` (the module's `panel`: `which` names
        the panel, and may override the entry's params)."""
        if self.from_frontier:
            return self.module.panel(ax, self._fitted(frontier), **{**self.params, **which})
        self._refuse_budgeted(runs)
        return self.module.panel(ax, runs, fits, **{**self.params, **which})

    @staticmethod
    def _fitted(frontier):
        if frontier is None:
            from .output import NotDrawn

            raise NotDrawn(NO_FRONTIER)
        return frontier

    @staticmethod
    def _refuse_budgeted(runs) -> None:
        """A figure of the runs and fits draws per-size means, which would pool a
        budgeted study's budgets; that study's figures are the frontier's."""
        if is_budgeted(runs):
            from .output import NotDrawn

            raise NotDrawn(BUDGETED_FIGURES)


BUDGETED_FIGURES = ("budgeted runs (grid.budgets): each size ran at several budgets, "
                    "which its per-size means would pool; the study's figures are the "
                    "frontier's (frontier_isoflop, frontier_optimal, frontier_loss)")
NO_FRONTIER = ("no frontier: it is fitted on a study's budgeted runs (grid.budgets; "
               "scalestudy frontier --from-runs writes one)")
FRONTIER_NEEDS = "budgets (grid.budgets): the compute-optimal frontier"

FIGURES: Registry[Figure] = Registry("figure", [
    Figure(
        "upstream_loss_vs_compute",
        needs="a prior finetuned from upstream pretraining (upstream)",
        feeds=lambda grid: grid.upstream,
        caption="""**Upstream loss against compute.** Held-out masked-token loss (nats) of the
upstream pretraining runs against their training compute (or the study's chosen x
axis), log-log, each architecture in its own colour and marker. A first panel shows
every architecture with its log-log fit; then one panel per architecture, all on the
same axes: solid, the power law L = a C^-alpha_U (least squares in log-log space) with
the pointwise 95% percentile band of its bootstrap replicates' lines; dashed, the
saturating law L = E + A C^-alpha_U (Huber loss on log residuals, needs four sizes).
Each panel gives alpha_U with its 95% bootstrap interval, and the saturating alpha_U
and E. After Tay et al. 2022, Fig. 2."""),
    Figure(
        "error_vs_compute",
        needs="any grid",
        caption="""**Downstream error against compute.** Test error (1 - accuracy) against
training compute C = train + pretraining FLOPs (or the chosen x axis), one row of
panels per architecture and one column per task and prior, all with the same axes:
means over seeds (± 1 standard deviation where there are several), the fitted power
law err = b C^-alpha_D with the pointwise 95% percentile band of its bootstrap
replicates' lines (runs resampled as for alpha_D's interval), and alpha_D with its 95%
interval in the corner. A panel without finished runs is left out and named in the
title."""),
    Figure(
        "scaling_overview",
        needs="a prior finetuned from upstream pretraining (upstream) and random init",
        params={"prior": "random"},
        feeds=lambda grid, prior: grid.upstream and prior in grid.priors,
        caption="""**The study's scaling at a glance.** One column per architecture: on top,
the held-out upstream loss of its upstream pretraining runs against their compute; below,
a row per task, its test error under random initialisation against training compute.
Log-log, means over seeds ± 1 standard deviation, the log-log fit with the 95% band of
its bootstrap replicates' lines and the exponent (alpha_U, alpha_D) with its 95% interval;
each row shares its limits. The panels are those of ``upstream_loss_vs_compute`` and
``error_vs_compute``; the README shows the default study's."""),
    Figure(
        "alpha_per_arch",
        needs="three sizes (the fewest a fit accepts)",
        feeds=lambda grid: len(grid.sizes) >= 3,
        caption="""**Scaling coefficients per architecture.** Top: alpha_U per architecture
(filled: log-log fit; hollow: saturating fit, on its own axis since it absorbs the
offset E). Below, four panels to a row: alpha_D per architecture for each task and
prior, on a shared x axis. Lines are 95% percentile-bootstrap intervals over runs; a
fit that refused (fewer than three sizes) is named with its reason instead of a point,
and a panel in which every fit refused is left out and named in the title. Larger
alpha: the loss or error falls faster with compute (Tay et al. 2022)."""),
    Figure(
        "arch_gap",
        needs="the reference architecture (transformer), another one, and random or spt",
        params={"priors": ("random", "spt")},
        feeds=lambda grid, priors: (reference_arch() in grid.archs and len(grid.archs) >= 2
                                    and bool(grid.priors & set(priors))),
        caption="""**Architecture gap under random initialisation and under SPT.** For each
size: the best architecture's mean test accuracy minus the vanilla transformer's, with
random initialisation (solid) and with self-pretraining (long dashes); each point is
drawn in the colour and marker of the architecture that is best there and labelled
with its name, with bars of ± 1 standard deviation of the per-seed gap where there are
several seeds. Amos et al. 2023 report that self-pretraining shrinks the gaps between
architectures."""),
    Figure(
        "loss_vs_depth",
        needs="the depth protocol (depth grows at a fixed width) and two sizes",
        feeds=lambda grid: grid.protocol == "depth" and len(grid.sizes) >= 2,
        caption="""**Final training loss against depth at a fixed width.** One panel per
architecture, width and LayerNorm placement (pre-LN, post-LN, no LayerNorm) whose runs
span two or more depths, on a shared y axis; one line per prior (line style and marker
fill), the mean over seeds ± 1 standard deviation at each depth. Runs that diverged or
failed are crosses along the top edge. Runs of different widths are never averaged
into one point, and depth ticks are the depths that were run. Xu et al. 2021: DT-Fixup
trains deep LayerNorm-free stacks where the standard initialisation fails. The study
must grow depth at a fixed width (``train.protocol: depth``); otherwise the figure is
not drawn."""),
    Figure(
        "downstream_vs_upstream",
        needs="a prior finetuned from upstream pretraining (upstream)",
        feeds=lambda grid: grid.upstream,
        caption="""**Downstream against upstream.** Test error of the runs finetuned from
upstream pretraining against their upstream loss, log-log, per task: a first panel with
every architecture and its fit, then one panel per architecture (shared axes) with the
fit err = c L^alpha_U,D, the 95% percentile band of its bootstrap replicates' lines,
and alpha_U,D with its interval. Points are means over seeds ± 1 standard deviation.
alpha_U,D is how much of an upstream gain transfers downstream (Tay et al. 2022)."""),
    Figure(
        "spt_vs_matched",
        needs="both spt and its compute-matched control (scratch_matched)",
        params={"treated": "spt", "control": "scratch_matched"},
        feeds=lambda grid, treated, control: {treated, control} <= grid.priors,
        caption="""**SPT against the compute-matched control.** Each point is one
architecture and size: test accuracy after self-pretraining and finetuning (y) against
random initialisation trained for the same total FLOPs (x; the ``scratch_matched``
prior), means over seeds with ± 1 standard deviation both ways where there are several
seeds. Above the diagonal, self-pretraining wins at equal compute (Amos et al.
2023)."""),
    Figure(
        "gap_closing",
        needs="s4 and the transformer, each under random and spt",
        params={"first": "s4", "second": "transformer", "treatment": "spt",
                "control": "random"},
        feeds=lambda grid, first, second, treatment, control: (
            {first, second} <= grid.archs and {treatment, control} <= grid.priors),
        caption="""**How much of the Transformer-S4 gap SPT closes.** Per task and size:
S4's mean test accuracy minus the vanilla transformer's, under random initialisation
(solid) and under self-pretraining (dashed), with 95% Welch t-intervals over the seeds
of the two architectures at that size; above each size, the share of the random gap that
SPT closes, (gap_random - gap_spt) / gap_random, where the random gap is above 0. At 0
SPT leaves no gap. Amos et al. 2023: with self-pretraining the vanilla transformer comes
close to S4 on long-range tasks; the claim ``spt_closes_s4_gap`` decides it on these
gaps averaged over sizes."""),
    Figure(
        "heldout_prediction",
        needs="three sizes (two to refit a log-log law, the largest held out)",
        feeds=lambda grid: len(grid.sizes) >= 3,
        caption="""**Held-out prediction of the largest size.** Each law (alpha_U, log-log
and saturating; alpha_D per task and prior; alpha_U,D per task) refitted on every size
but the largest, then asked to predict that size: its prediction (y) against the mean
observed loss or error of the held-out size's runs (x), one point per architecture,
with the 95% percentile-bootstrap interval of the prediction (training runs resampled
and the law refitted). On the diagonal the law predicted the held-out size exactly; the
grey band is ±10%; below the diagonal the largest size did worse than the law promised.
The alpha_D panels of a task share their scale. Each panel title gives the median
absolute relative error, (predicted - observed) / observed; ``tables/heldout.csv`` and
``tables/heldout.md`` list every error and its interval. A law without a prediction
(fewer than two sizes besides the held-out one, three for the saturating form) is left
out and named in the title with the reason."""),
    Figure(
        "accuracy_vs_size",
        needs="any grid",
        per_task=True,
        caption="""**Accuracy against size, per task.** Test accuracy against model size
(ordered by non-embedding parameters), one panel per architecture (all on the same y
axis) and one line per prior, each prior in its own line style and marker fill: the
mean over seeds, with bars of ± 1 standard deviation over seeds where a point has
several (the title says how many). Priors are dodged sideways so that equal values stay
visible; an architecture without finished runs is left out and named in the title."""),
    Figure(
        "frontier_isoflop",
        needs=FRONTIER_NEEDS,
        feeds=lambda grid: grid.budgeted,
        from_frontier=True,
        caption="""**IsoFLOP profiles.** One panel per architecture and prior: the final
loss of each run against its non-embedding parameters N, coloured by its budget's
compute (as counted), with approach 2's parabola in log N over the sizes each budget
was fitted on (those around its lowest loss) and its vertex N_opt as a star. The runs
of a budget left out (its lowest loss at the smallest or largest size, too few sizes)
are hollow and grey, with no parabola; the title counts the budgets fitted. After
Hoffmann et al. 2022, Fig. 3."""),
    Figure(
        "frontier_optimal",
        needs=FRONTIER_NEEDS,
        feeds=lambda grid: grid.budgeted,
        from_frontier=True,
        caption="""**Compute-optimal size and tokens.** Per architecture and prior, N_opt
(left) and D_opt (right) against compute C (counted FLOPs, or 6ND where the frontier
was fitted on that axis), log-log: each approach's points (approach 1: the lowest-loss
run of each budget; 2: the IsoFLOP vertices; 3: the parametric law's optimum at each
budget), its fitted power law N_opt ∝ C^a (D_opt ∝ C^b) and the 95% band of its
bootstrap replicates (approach 2's t-expanded), the legend giving each exponent with
its interval. A method that refused says why in the legend. After Hoffmann et al.
2022, Fig. 2-4."""),
    Figure(
        "frontier_loss",
        needs=FRONTIER_NEEDS,
        feeds=lambda grid: grid.budgeted,
        from_frontier=True,
        caption="""**Loss at the compute-optimal size.** Per prior, every architecture in
its colour: approach 3's L(N_opt(C), D_opt(C)) against compute with the 95% band of its
bootstrap refits, solid over the budgets run and dashed over the decade beyond the
largest (a dotted line), the extrapolation; squares are approach 2's IsoFLOP minima.
An architecture whose approach 3 refused is named in the panel's title."""),
])


def figure_names(tasks) -> dict[str, tuple[Figure, str | None]]:
    """Every figure a study with these tasks can draw, by file stem: its entry,
    and its task for a per-task figure."""
    out = {}
    for figure in FIGURES.values():
        if figure.per_task:
            out |= {f"{figure.name}_{task}": (figure, task) for task in tasks}
        else:
            out[figure.name] = (figure, None)
    return out


def grid_figures(grid: Grid) -> dict[str, tuple[Figure, str | None]]:
    """The figures a grid feeds (`figure_names` of those whose `feeds` holds):
    the outputs the workflow declares."""
    if not (grid.archs and grid.priors and grid.sizes):
        return {}  # no grid cells: no runs, nothing to draw
    return {stem: (fig, task) for stem, (fig, task) in figure_names(grid.tasks).items()
            if fig.fed_by(grid)}
