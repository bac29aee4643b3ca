"""The headline claims of the three papers, checked on one study's run records.

Usage: `scalestudy claims RUNS.parquet FITS.parquet --out claims.md` (also run
as `python analysis/claims.py ...`), or `scalestudy analyse`; both call
`write_claims`. The code lives in the package so that every install has it.

Each claim is stated as in its paper, measured on the study with a bootstrap
interval, and judged by a decision rule fixed here in advance and printed with the
verdict (no threshold is tuned to the data):

- an interval comparison *holds* when the intervals separate in the claimed
  direction; it *does not hold* when they separate the other way or overlap (the
  study does not show the claim at this confidence); it has *not enough data* when
  a quantity is missing or has no interval (fewer than three sizes, a missing
  architecture or prior, one run where an interval needs several).

Papers: Tay et al. 2022, "Scaling Laws vs Model Architectures: How does Inductive
Bias Influence Scaling?" (arXiv:2207.10551); Amos, Berant & Gupta 2023, "Never
Train from Scratch: Fair Comparison of Long-Sequence Models Requires Data-Driven
Priors" (ICLR 2024, arXiv:2310.02980); Xu et al. 2021, "Optimizing Deeper
Transformers on Small Datasets" (ACL 2021, arXiv:2012.15355).

`CLAIMS` is the claim registry, in the order claims.md lists them: each entry
names the function that checks it (in the module of its paper: tay.py,
amos.py, xu.py), which returns one `Check` per scope (a task, an
architecture, ...). check.py holds the verdicts and the text helpers,
stats.py the statistics the rules decide on, report.py the Markdown.

Torch-free: imports only the analysis modules of scalestudy.
"""


from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ...atomic import write_text
from ...registry import Registry
from . import amos, tay, xu
from .check import Check
from .report import claims_markdown


@dataclass(frozen=True)
class Claim:
    """A claim of the registry: its checking function, which reads the fits
    (`reads` "fits") or the runs with the bootstrap settings ("runs")."""

    name: str
    check: Callable[..., list[Check]]
    reads: str

    def checks(self, runs: pd.DataFrame, fits: pd.DataFrame, boot: dict) -> list[Check]:
        return self.check(fits) if self.reads == "fits" else self.check(runs, **boot)


CLAIMS: Registry[Claim] = Registry("claim", [
    Claim("vanilla_scales_best_upstream", tay.vanilla_scales_best_upstream, "fits"),
    Claim("performer_albert_scale_poorly", tay.performer_albert_scale_poorly, "fits"),
    Claim("spt_closes_s4_gap", amos.spt_closes_s4_gap, "runs"),
    Claim("spt_beats_matched", amos.spt_beats_matched, "runs"),
    Claim("dtfixup_trains_deep", xu.dtfixup_trains_deep, "runs"),
    Claim("switch_transfers_best", tay.switch_transfers_best, "fits"),
    Claim("best_arch_changes_with_scale", tay.best_arch_changes_with_scale, "runs"),
    Claim("depth_beats_width", tay.depth_beats_width, "runs"),
    Claim("minimal_variants_scale_like_transformer",
          tay.minimal_variants_scale_like_transformer, "fits"),
    Claim("flat_or_negative_downstream", tay.flat_or_negative_downstream, "fits"),
    Claim("spt_beats_random_every_size", amos.spt_beats_random_every_size, "runs"),
    Claim("structure_redundant_under_spt", amos.structure_redundant_under_spt, "runs"),
    Claim("spt_works_with_both_objectives", amos.spt_works_with_both_objectives, "runs"),
    Claim("dtfixup_deeper_is_better", xu.dtfixup_deeper_is_better, "runs"),
])


def evaluate(runs: pd.DataFrame, fits: pd.DataFrame, *, n_boot: int = 1000, ci: float = 0.95,
             seed: int = 0) -> pd.DataFrame:
    """Every check of every claim, one row each (columns of `Check`)."""
    boot = {"n_boot": n_boot, "ci": ci, "seed": seed}
    checks = [c for claim in CLAIMS.values() for c in claim.checks(runs, fits, boot)]
    return pd.DataFrame([c.as_dict() for c in checks])


def write_claims(runs: pd.DataFrame, fits: pd.DataFrame, path: Path, *, n_boot: int = 1000,
                 ci: float = 0.95, seed: int = 0) -> pd.DataFrame:
    """Evaluate every claim and write claims.md to `path`; returns the checks."""
    checks = evaluate(runs, fits, n_boot=n_boot, ci=ci, seed=seed)
    study = ", ".join(sorted(runs["study"].dropna().unique())) if len(runs) else ""
    write_text(claims_markdown(checks, study, ci, runs), path)
    return checks
