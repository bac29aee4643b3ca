"""The analysis stages (scalestudy.analysis.stages): one list, which
`scalestudy analyse` runs in order, each stage reading what the earlier ones
made, and whose artifacts the workflow's analysis rules write."""

from __future__ import annotations

from pathlib import Path

from scalestudy.analysis import stages
from scalestudy.analysis.stages import ANALYSIS_STAGES, Analysis, Options, Stage, analyse
from scalestudy.registry import Registry

from tests.support import ROOT


def test_the_stages_in_order_and_their_artifacts():
    assert {name: stage.artifact for name, stage in ANALYSIS_STAGES.items()} == {
        "fit": "fits.parquet", "frontier": "frontier", "figures": "figures",
        "tables": "tables", "claims": "claims.md"}


def test_analyse_runs_every_stage_in_order_each_reading_the_earlier_ones(monkeypatch,
                                                                         tmp_path):
    seen = []

    def fit(analysis: Analysis, out: Path, options: Options):
        analysis.fits = f"fits of {analysis.runs}"
        seen.append(("fit", out, options.n_boot))
        return [out]

    def claims(analysis: Analysis, out: Path, options: Options):
        seen.append(("claims", out, analysis.fits))
        return [out]

    monkeypatch.setattr(stages, "ANALYSIS_STAGES", Registry("analysis stage", [
        Stage("fit", "fits.parquet", fit), Stage("claims", "claims.md", claims)]))
    analysis, paths = analyse("runs", tmp_path, Options(n_boot=7))
    assert analysis.fits == "fits of runs"
    assert paths == [tmp_path / "fits.parquet", tmp_path / "claims.md"]
    assert seen == [("fit", tmp_path / "fits.parquet", 7),
                    ("claims", tmp_path / "claims.md", "fits of runs")]


def test_the_workflow_s_analysis_rules_write_the_stages_artifacts():
    """Each stage's artifact is named once: the rules take it from the
    registry (common.smk's ARTIFACT), never spell it again."""
    rules = "\n".join(p.read_text() for p in sorted((ROOT / "workflow/rules").glob("*.smk")))
    for name in ANALYSIS_STAGES:
        assert f'ARTIFACT["{name}"]' in rules or f"ARTIFACT['{name}']" in rules, name
    for artifact in ("fits.parquet", "claims.md", "/frontier", "/figures/", "/tables/"):
        assert f"{{OUT}}{artifact}" not in rules.replace("{OUT}/logs", ""), artifact


def test_the_dag_reads_the_stages_without_pandas_or_matplotlib():
    import subprocess
    import sys

    code = ("import sys, scalestudy.analysis.stages; "
            "bad = {'torch', 'matplotlib', 'pandas'} & set(sys.modules); assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)
