"""The headline claims of the three papers, checked on one study's run records.

Usage: `scalestudy claims RUNS.parquet FITS.parquet --out claims.md` (also run
as `python analysis/claims.py ...`), or `scalestudy analyse`; both call
`write_claims`. The code lives in the package so that every install has it.

Each claim is stated as in its paper, measured on the study with an interval
at the study's level (95% by default), and judged by a decision rule fixed
here in advance and printed with the verdict (no threshold is tuned to the
data). A claim is judged per scope (a task, an architecture, ...): *holds* when
the rule's conditions are shown, *does not hold* when they are not (the study
does not show the claim at this confidence, or shows the opposite), *not
enough data* when a quantity is missing or has no interval (fewer than three
sizes, a missing architecture or prior, one run where an interval needs
several). Its scopes then make its own verdict by a stated rule
(check.COMBINE_RULES): most claims hold only where every scope holds, so
that on a study with no effect anywhere a claim holds at most 2.5% of the time
(tests/analysis/claims/test_null_rates.py measures it on the presets' grids).

Papers: Tay et al. 2022, "Scaling Laws vs Model Architectures: How does Inductive
Bias Influence Scaling?" (arXiv:2207.10551); Amos, Berant & Gupta 2023, "Never
Train from Scratch: Fair Comparison of Long-Sequence Models Requires Data-Driven
Priors" (ICLR 2024, arXiv:2310.02980); Xu et al. 2021, "Optimizing Deeper
Transformers on Small Datasets" (ACL 2021, arXiv:2012.15355).

Where each paper states a claim (`source`) was checked against what could be
read: the three abstracts, and the README of Amos et al.'s repository
(IdoAmos/not-from-scratch), which names the paper's sections 3.1-3.5 and 3.7.
A location that could not be checked against the paper's own text says
"unverified" instead of a section number.

`CLAIMS` is the claim registry, in the order claims.md lists them: each entry
holds the claim's text, source and rule, the function that measures and
decides it (in the module of its paper: tay.py, amos.py, xu.py) and the
architectures and priors it is about (`params`, passed to the function, which
names no architecture or prior itself). check.py holds the verdicts and the
text helpers, stats.py the statistics the rules decide on, report.py the
Markdown.

Torch-free: imports only the analysis modules of scalestudy.
"""


from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import pandas as pd

from ...atomic import write_text
from ...registry import Registry
from ..fits import is_budgeted
from ..options import ClaimsOptions, chosen
from . import amos, frontier, tay, xu
from .check import (
    AMOS,
    ANY,
    EVERY,
    FAILS,
    NO_DATA,
    TAY,
    XU,
    Check,
    Evidence,
    Scope,
    combine,
    reference_arch,
    refuted_at,
    refuting_tests,
)

__all__ = ["CLAIMS", "Claim", "Evidence", "evaluate", "write_claims", "write_report"]
from .report import claims_markdown

REFERENCE = reference_arch()  # the vanilla transformer (architectures.py)
UNVERIFIED = "location in the paper unverified"
ALPHA_RULE = (
    "the log-log exponent of each architecture's runs (x: the fits' axis, training "
    "compute by default): the log-log chord over the sizes run, a local slope where the "
    "power law's lack of fit is rejected; the difference of two exponents with the t "
    "interval of the residual bootstrap (analysis/stats.py): runs redrawn, or sizes where "
    "a size's runs share one pretraining (then sizes - 2 degrees of freedom), paired where "
    "the two redraw the same units"
)
BUDGETED_CLAIMS = ("only budgeted runs (grid.budgets): this claim compares sizes, and each "
                   "size ran at several budgets; the frontier claims read them")
ACCURACY_RULE = (
    "test accuracy, mean over the sizes the compared cells share, with Welch's t-interval "
    "over each cell's runs (the grid's sizes fixed; two runs per cell needed)"
)


@dataclass(frozen=True)
class Claim:
    """A claim of the registry: what it says, where, the rule, the function that
    measures and decides each scope (`check(study, **params)`), the names it is
    about, and how its scopes make its verdict (check.COMBINE_RULES)."""

    name: str
    text: str
    source: str
    rule: str
    check: Callable[..., list[Scope]]
    params: dict = field(default_factory=dict)
    combine: str = EVERY
    on_budgets: bool = False  # it reads budgeted runs (grid.budgets); others leave them out
    # The paper's premise the rule checks before judging the claim (where not
    # shown: undecided), or "none".
    premise: str = "none"

    def scopes(self, study: Evidence) -> list[Scope]:
        if not self.on_budgets and is_budgeted(study.runs):
            # Per-size comparisons would pool each size's budgets as if they were seeds.
            study = replace(study, runs=study.runs[study.runs["budget"].isna()])
            if study.runs.empty:
                return [Scope("all", BUDGETED_CLAIMS, NO_DATA)]
        return self.check(study, **self.params)

    def checks(self, study: Evidence) -> list[Check]:
        """Every scope's row, its verdict and the claim's. A claim that holds only
        where every scope holds does not hold where any one of its tests (every
        condition of every scope: `check.Verdict`) lies on the wrong side, so
        with m such tests a true claim would be refuted up to m times as often
        as by one: each refutation is judged at the study's one-sided level
        divided by m (Bonferroni); holding keeps the study's level (an
        intersection-union test needs none)."""
        scopes, m = self.judged(self.scopes(study), study.ci)
        verdict = combine([s.verdict for s in scopes], self.combine)
        refutation = refutation_text(self.combine, m, (1 - study.ci) / 2)
        return [Check(self.text, self.source, self.rule, s.scope, s.measurement, s.verdict,
                      verdict, self.combine, self.premise, refutation) for s in scopes]

    def judged(self, scopes: list[Scope], ci: float) -> tuple[list[Scope], int]:
        """The scopes with each refutation judged at the corrected level, and the
        number m of tests that could refute the claim (`checks`)."""
        m = sum(refuting_tests(s.verdict) for s in scopes) if self.combine == EVERY else 1
        if m > 1:
            scopes = [_corrected(s, (1 - ci) / 2 / m, m) for s in scopes]
        return scopes, m


def _corrected(scope: Scope, level: float, m: int) -> Scope:
    """The scope with a refutation judged at one-sided `level` (one of `m` tests)."""
    if scope.verdict != FAILS:
        return scope
    verdict = refuted_at(scope.verdict, level)
    if verdict == FAILS:
        return scope
    return Scope(scope.scope, f"{scope.measurement}; on the wrong side at the uncorrected "
                              f"level only (a refutation asks one-sided {level:.2g}: "
                              f"Bonferroni over the claim's {m} tests)", verdict)


def refutation_text(how: str, m: int, level: float) -> str:
    """The level claims.md says a refutation was judged at."""
    if how != EVERY:
        return ("each scope at the study's level; the claim does not hold only where no "
                "scope holds or is undecided")
    if m <= 1:
        return (f"a refutation is one test's interval on the wrong side at the study's "
                f"one-sided level {level:g}" if m else "no test here could refute it")
    return (f"does not hold only where one of its {m} tests (every condition of every scope) "
            f"lies on the wrong side at one-sided {level / m:.2g}, the study's {level:g} "
            f"over {m} (Bonferroni): a true claim is then refuted at most about as often "
            "as by a single test")


C = Claim
CLAIMS: Registry[Claim] = Registry("claim", [
    C("vanilla_scales_best_upstream",
      "The vanilla Transformer scales best upstream (largest alpha_U)",
      f"{TAY}; {UNVERIFIED} (recalled as a finding of its introduction and its upstream "
      "scaling figure; not checked against the text)",
      f"alpha_U, {ALPHA_RULE}. Holds when the difference {REFERENCE} minus every other "
      "architecture lies above 0; does not hold when one lies below 0; undecided when one "
      "straddles 0",
      tay.vanilla_scales_best_upstream, {"reference": REFERENCE}),
    C("performer_albert_scale_poorly",
      "Performer and ALBERT scale worse than the vanilla Transformer",
      f"{TAY}; {UNVERIFIED} (recalled from its summary of findings)",
      f"upstream alpha_U and per task downstream alpha_D (upstream prior), {ALPHA_RULE}. "
      f"Per architecture and scope, holds when its exponent minus {REFERENCE}'s lies below 0",
      tay.archs_scale_worse,
      {"archs": ("performer", "albert"), "reference": REFERENCE, "prior": "upstream"}),
    C("spt_closes_s4_gap",
      "SPT closes most of the Transformer-S4 gap",
      f"{AMOS}, abstract (with self-pretraining on the task's own data, 'very small gaps "
      "between Transformers and state space models'; vanilla Transformers match S4 on Long "
      "Range Arena when pretrained); section: the authors' README lays out LRA pretraining "
      "and finetuning as sections 3.1-3.5, the table's number unverified",
      f"per task, gap = s4 minus transformer, {ACCURACY_RULE}; each size's own value "
      "printed beside the mean. Needs finished runs of s4 and transformer under random and "
      "spt (else not enough data, naming them). The closure (random gap minus spt gap) is "
      "split into the transformer's gain under spt and s4's loss. Holds when SPT closes most "
      "of the gap by lifting the transformer: (a) half the random gap minus the spt gap and "
      "(b) the transformer's gain minus half the random gap both lie above 0; does not hold "
      "when either lies below 0 (then the measurement says what happened: no closure, or a "
      "closure through s4 doing worse); against scratch_matched too where the grid has it",
      amos.gap_closes,
      {"first": "s4", "second": "transformer", "treatment": "spt", "control": "random",
       "matched": "scratch_matched"},
      premise="from scratch (random init) S4 is ahead of the transformer: the gap under "
              "random lies above 0 (where not shown: undecided)"),
    C("spt_beats_matched",
      "SPT beats the compute-matched control",
      "this project's own control of SPT's extra compute (scratch_matched: random init "
      f"trained for SPT's pretraining plus finetuning FLOPs); whether {AMOS} addresses the "
      "extra compute of pretraining, and where: unverified",
      f"per task and architecture, spt minus scratch_matched, {ACCURACY_RULE}; holds when "
      "the interval lies above 0",
      amos.beats_control, {"treatment": "spt", "control": "scratch_matched"}),
    C("dtfixup_trains_deep",
      "DT-Fixup trains deep LayerNorm-free stacks where the standard recipe fails",
      f"{XU}, abstract ('with proper initialization and optimization, the benefits of very "
      "deep transformers can carry over to challenging tasks with small datasets'; 48 "
      "layers trained); LayerNorm-free, without warm-up: the method's own sections, "
      "unverified",
      "per task, on the transformer (the architecture the paper trains), at the deepest "
      "depth of at least 24 blocks with both dtfixup runs and LayerNorm-free runs of the "
      "standard initialisation (prior random_noln, or random with train.norm: none); none "
      "so deep: not enough data. The floor: chance (one over the task's classes) + 0.05. "
      "Premise first (where not shown: undecided). Then DT-Fixup trains there: does not "
      "hold if a dtfixup run diverged or failed or its mean accuracy's interval (t, over "
      "its runs) lies below the floor; holds if every dtfixup run finished and that "
      "interval lies above the floor",
      xu.trains_deep, {"treatment": "dtfixup", "standard": ("random_noln", "random"),
                       "archs": (REFERENCE,), "min_depth": 24, "over_chance": 0.05},
      premise="Xu et al.'s: the standard recipe fails at the depth judged, which is deep (24 "
              "blocks or more: the paper trains 24 layers from scratch): half or more of "
              "its runs diverged or failed, or it fails to train (its mean accuracy's "
              "interval lies below the floor, chance + 0.05). Less accurate than the same "
              "stack with LayerNorm is not failing"),
    C("switch_transfers_best",
      "Switch has the highest alpha_U,D",
      f"{TAY}; {UNVERIFIED} (recalled from its comparison of downstream against upstream "
      "performance)",
      "per task, alpha_U,D: the log-log slope of downstream error against upstream loss "
      f"(upstream prior), {ALPHA_RULE}. Holds when switch minus every other architecture "
      "lies above 0",
      tay.transfers_best, {"arch": "switch", "prior": "upstream"}),
    C("best_arch_changes_with_scale",
      "The best architecture changes with scale",
      f"{TAY}, abstract ('the best performing model can fluctuate at different scales')",
      "per task and prior (and scaling protocol, where several are collected together): "
      "the leader (best mean test accuracy) at the smallest and at the largest size of the "
      "grid, sizes ordered by parameters. Holds in a scope when the two leaders differ and "
      "each is ahead of every other architecture at its size (Welch's one-sided test of "
      "each difference, two runs per cell), at the study's level divided by the number of "
      "scopes judged (Bonferroni); does not hold in a scope when one architecture leads at "
      "both sizes, ahead of every other at each by the same test; otherwise undecided. A "
      "ranking that changes only among the followers, or "
      "leaders within the noise of each other, does not hold. The measurement gives the "
      "two leaders' differences and the pairs that cross with both differences outside "
      "their intervals",
      tay.best_arch_changes_with_scale, combine=ANY),
    C("depth_beats_width",
      "Depth scaling helps downstream more than width scaling",
      f"{TAY}; {UNVERIFIED} (recalled from its comparison of scaling protocols for the "
      "MoS-Transformer, Transformer, Evolved Transformer and LConv)",
      "per task, architecture and prior: the `depth` minus the `width` protocol "
      "(train.protocol; one study per protocol, their runs collected together) at the "
      "sizes where both have runs and build different shapes (the anchor size xs builds "
      "the same under both and is left out), which keep the same ~12 L D^2 budget; "
      f"{ACCURACY_RULE}; holds when the interval lies above 0",
      tay.depth_beats_width,
      {"archs": ("mos", "transformer", "evolved", "lconv"), "protocols": ("depth", "width")}),
    C("minimal_variants_scale_like_transformer",
      "GLU and MoS scale like the Transformer",
      f"{TAY}; {UNVERIFIED} (recalled from its summary of findings: the models closest to "
      "the vanilla Transformer scale like it)",
      f"upstream alpha_U and per task alpha_D (upstream prior), {ALPHA_RULE}. Premise: "
      f"{REFERENCE}'s exponent above 0 (else undecided). Equivalence by two one-sided "
      "tests on bootstrapped contrasts, the margin's noise included: holds when both "
      f"variant - 0.75 x {REFERENCE} and 1.25 x {REFERENCE} - variant lie above 0; does "
      "not hold when one lies below 0; otherwise undecided",
      tay.scale_like_reference,
      {"archs": ("glu", "mos"), "reference": REFERENCE, "prior": "upstream", "margin": 0.25},
      premise=f"{REFERENCE} scales here: its exponent lies above 0 (else undecided)"),
    C("flat_or_negative_downstream",
      "Mixer, Performer and ALBERT scale flat or negatively downstream",
      f"{TAY}; {UNVERIFIED} (recalled from its summary of findings and downstream results)",
      f"per task, alpha_D (upstream prior), {ALPHA_RULE}. Premise: {REFERENCE}'s own "
      "alpha_D above 0 (it scales here; else undecided). Flat: the architecture's exponent "
      f"below a quarter of {REFERENCE}'s, the bootstrapped contrast 0.25 x {REFERENCE} - "
      "architecture above 0 (holds); below 0 does not hold; otherwise undecided",
      tay.flat_or_negative,
      {"archs": ("mixer", "performer", "albert"), "reference": REFERENCE, "prior": "upstream",
       "margin": 0.25},
      premise=f"{REFERENCE} scales downstream here: its alpha_D lies above 0 (else "
              "undecided)"),
    C("spt_beats_random_every_size",
      "SPT beats random init at every model size",
      f"{AMOS}; {UNVERIFIED} (the abstract reports gains across architectures, not "
      "per model size)",
      "per task and architecture, at each size of the grid: spt minus random test accuracy "
      "with Welch's interval (two runs per cell). Holds when the interval lies above 0 at "
      "every size; does not hold when at some size it lies below 0; otherwise undecided "
      "(not enough data where a size lacks runs)",
      amos.beats_control_every_size, {"treatment": "spt", "control": "random"}),
    C("structure_redundant_under_spt",
      "SPT makes the structured S4 parameterisation mostly redundant",
      f"{AMOS}, abstract (structured parameterizations for SSMs 'become mostly redundant in "
      "the presence of data-driven initialization obtained through pretraining'); section "
      "unverified. Its unstructured model is the diagonal linear RNN of the authors' "
      "repository (configs/model/layer/dlr.yaml): `dlr` here",
      f"per task, gap = s4 (S4D-Lin) minus dlr (unstructured), {ACCURACY_RULE}; each "
      "size's own value printed beside the mean. Needs finished runs of s4 and dlr under "
      "random and spt (else not enough data). The closure is split into dlr's gain under "
      "spt and s4's loss. Holds when SPT makes the structure mostly redundant by lifting "
      "the unstructured model: (a) half the random gap minus the spt gap and (b) dlr's "
      "gain minus half the random gap both lie above 0; below 0 does not hold (the "
      "measurement then says what happened)",
      amos.gap_closes,
      {"first": "s4", "second": "dlr", "treatment": "spt", "control": "random",
       "matched": "scratch_matched"},
      premise="structure helps from scratch: the gap s4 minus dlr under random lies above 0 "
              "(where not shown: undecided)"),
    C("spt_works_with_both_objectives",
      "SPT works with both denoising objectives",
      "the authors' repository README (IdoAmos/not-from-scratch, 'Section 3.1-3.5: "
      "Pretraining and Fine-tuning on LRA': pretraining 'with 50% masking ratio or causal "
      f"masking'); {AMOS}, the paper's own text: unverified",
      "per task, architecture and objective (masked, or next token when the pretraining was "
      "causal: the records' pretrain_causal): the SPT prior minus the random-init control "
      "that finetunes at the same causality (the records' causal: spt_causal finetunes "
      f"bidirectionally as Amos et al. do, against random), {ACCURACY_RULE}; holds where "
      "every objective's row lies above 0; an objective whose prior is not in the grid has "
      "not enough data",
      amos.both_objectives,
      {"treatments": ("spt", "spt_causal"), "controls": ("random", "random_causal")}),
    C("dtfixup_deeper_is_better",
      "Under DT-Fixup deeper stacks generalise better; the standard recipe does not",
      f"{XU}, abstract ('increasing depth can help improve generalization on small datasets "
      "for hard cases that require reasoning and structural understanding'); the standard "
      "recipe's failure with depth: the paper's experiments, section unverified",
      "per task, on the transformer, at the width with most depths that have both dtfixup and "
      "standard LayerNorm-free runs (random_noln, or random with train.norm none; e.g. the "
      "depth protocol), shallowest and deepest of those depths: rise = accuracy at the "
      "deepest minus at the shallowest, Welch's interval (two runs per cell). Holds when "
      "dtfixup's rise lies above 0 and the standard recipe degrades (its rise below 0) or "
      "fails (every standard run at the deepest depth diverged or failed); does not hold "
      "when dtfixup's rise lies below 0, every dtfixup run at the deepest depth failed, or "
      "the standard recipe's rise lies above 0; otherwise undecided",
      xu.deeper_is_better, {"treatment": "dtfixup", "standard": ("random_noln", "random"),
                            "archs": (REFERENCE,)}),
    C("frontier_ranking_changes",
      "The architectures' ranking at compute-optimal allocation differs from their ranking "
      "at a fixed training length",
      "this project's own claim, beyond the three papers: Tay et al. compare at "
      "one schedule per size, Hoffmann et al. 2022 (Chinchilla) show that the "
      "loss-minimising size grows with compute",
      "per prior (and task) and grid budget every architecture reached, on the frontier's "
      "loss (upstream_loss of the budgeted upstream pretraining; val_loss of a budgeted "
      "task run from scratch): each pair's difference of mean losses with Welch's interval "
      "over seeds (two runs per cell), at the largest size both ran (a fixed length: the "
      "budget's steps there) and at each one's loss-minimising size at that budget. Holds "
      "when some pair is ordered one way at the fixed length and the other way "
      "compute-optimally, both intervals excluding 0; does not hold when every pair is "
      "ordered the same way in both; otherwise undecided (not enough data: one seed, or no "
      "budgets)",
      frontier.ranking_changes, {}, ANY, on_budgets=True),
    C("frontier_exponent_differs",
      f"An architecture's compute-optimal size grows with compute at a different rate than "
      f"the {REFERENCE}'s",
      "this project's own claim, beyond the three papers: Hoffmann et al. 2022 "
      "(Chinchilla) measure the exponent a of N_opt ∝ C^a (0.46-0.50) for the transformer "
      "alone",
      "per prior (and task), on the frontier's loss (upstream_loss of the budgeted "
      "upstream pretraining; val_loss of a budgeted task run from scratch): each "
      "architecture's a by "
      "approach 2 (IsoFLOP parabolas per grid budget, their vertices' log-log slope on "
      "compute; the study's frontier, frontier/frontier_fits.csv) minus the reference's, "
      "with a percentile interval "
      "(t-expanded by the fewer budgets - 2) "
      "from the two fits' bootstrap replicates (runs resampled within each budget; with "
      "one seed this resamples sizes, not seeds), at the study's level divided by the "
      "number of architectures compared (Bonferroni). Holds when some difference's "
      "interval excludes 0; undecided when every one includes 0 (no equivalence margin "
      "is stated); not enough data when a fit is missing (fewer than three budgets with "
      "a bracketed vertex)",
      frontier.exponent_differs, {"reference": REFERENCE}, ANY, on_budgets=True),
])


def evaluate(runs: pd.DataFrame, fits: pd.DataFrame, *, frontier=None,
             options: ClaimsOptions | None = None, analysis=None,
             **changes) -> pd.DataFrame:
    """Every scope of every claim, one row each (columns of `Check`): the scope's
    verdict and its claim's, with `options` (options.ClaimsOptions; `changes`:
    some of them, by name). `frontier`: the FrontierResult the frontier's stage
    fitted on the runs' budgets, which the frontier claims read (None: they lack
    data; `stages.Analysis` runs that stage first, the claims stage's need);
    `analysis`: that Analysis, whose stages' results a claim reads
    (`Evidence.result`)."""
    study = Evidence.of(runs, fits, frontier, chosen(ClaimsOptions, options, changes),
                     analysis=analysis)
    checks = [c for claim in CLAIMS.values() for c in claim.checks(study)]
    return pd.DataFrame([c.as_dict() for c in checks])


def write_report(checks: pd.DataFrame, runs: pd.DataFrame, path: Path,
                 options: ClaimsOptions | None = None) -> None:
    """claims.md of the `checks` (`evaluate`) of `runs` with `options`, at `path`."""
    study = ", ".join(sorted(runs["study"].dropna().unique())) if len(runs) else ""
    write_text(claims_markdown(checks, study, chosen(ClaimsOptions, options, {}).ci, runs), path)


def write_claims(runs: pd.DataFrame, fits: pd.DataFrame, path: Path, *, frontier=None,
                 options: ClaimsOptions | None = None, **changes) -> pd.DataFrame:
    """Evaluate every claim and write claims.md to `path`; returns the checks."""
    options = chosen(ClaimsOptions, options, changes)
    checks = evaluate(runs, fits, frontier=frontier, options=options)
    write_report(checks, runs, path, options)
    return checks
