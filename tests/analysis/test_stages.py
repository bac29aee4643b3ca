"""The analysis stages (scalestudy.analysis.stages): one list, which
`scalestudy analyse` runs in order, each stage reading what the earlier ones
made, and whose artifacts the workflow's analysis rules write."""

from __future__ import annotations

from pathlib import Path

import pytest

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
    out = tmp_path / "analysis"
    analysis, paths = analyse("runs", out, Options(n_boot=7))
    assert analysis.fits == "fits of runs"
    assert paths == [out / "fits.parquet", out / "claims.md"]
    # Each stage wrote into the directory staged for `out`, swapped in at the end.
    staged = seen[0][1].parent
    assert staged != out and staged.parent == tmp_path
    assert seen == [("fit", staged / "fits.parquet", 7),
                    ("claims", staged / "claims.md", "fits of runs")]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["analysis"]


def _stages_writing(monkeypatch, fail_at: str | None = None):
    def write(name):
        def stage(analysis: Analysis, out: Path, options: Options):
            if name == fail_at:
                raise ValueError(f"{name} failed")
            out.write_text(f"new {name}")
            return [out]
        return stage

    monkeypatch.setattr(stages, "ANALYSIS_STAGES", Registry("analysis stage", [
        Stage("fit", "fits.parquet", write("fit")), Stage("claims", "claims.md",
                                                         write("claims"))]))


def test_a_failing_stage_leaves_the_previous_analysis_whole(monkeypatch, tmp_path):
    out = tmp_path / "analysis"
    _stages_writing(monkeypatch)
    analyse("runs", out)
    _stages_writing(monkeypatch, fail_at="claims")
    with pytest.raises(ValueError, match="claims failed"):
        analyse("runs", out)
    assert {p.name: p.read_text() for p in out.iterdir()} == {
        "fits.parquet": "new fit", "claims.md": "new claims"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["analysis"]  # nothing staged left


@pytest.mark.parametrize("case", ["foreign file", "a file", "holds the input"])
def test_an_output_directory_it_does_not_own_is_refused(monkeypatch, tmp_path, case):
    _stages_writing(monkeypatch)
    out = tmp_path / "analysis"
    runs = tmp_path / "runs.parquet"
    runs.write_text("the user's runs")
    if case == "foreign file":
        out.mkdir()
        (out / "notes.txt").write_text("mine")
        message = "not an analysis's directory, so not replaced: it holds notes.txt"
    elif case == "a file":
        out = runs
        message = "an existing file, not an analysis's directory"
    else:
        out = tmp_path
        message = "holds the input"
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    with pytest.raises(ValueError, match=message):
        analyse("runs", out, inputs=[runs])
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before


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
