"""The claims stage (analysis/stages.py): every claim checked on a study's runs,
its fits and its frontier (`run`: the checks), and claims.md (`write`)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ...atomic import refuse_overwrite
from ..options import ClaimsOptions
from . import evaluate, write_report
from .report import is_claims_report


def run(analysis, options: ClaimsOptions) -> pd.DataFrame:
    """The frontier claims read the frontier stage's result (the analysis runs
    that stage first where it was not given)."""
    return evaluate(analysis.runs, analysis.fits, frontier=analysis.frontier, options=options,
                    analysis=analysis)


def write(analysis, out: Path, options: ClaimsOptions) -> list[Path]:
    write_report(analysis.claims, analysis.runs, out, options)
    return [out]


def refuse(out: Path, inputs) -> None:
    refuse_overwrite(out, "a claims report", inputs, is_claims_report)


def summary(analysis, paths: list[Path]) -> str:
    return f"wrote {paths[0]}: {analysis.claims['verdict'].value_counts().to_dict()}"
