"""The analysis stages (scalestudy.analysis.stages): one registry, whose
entries declare each kind of analysis's options, needs and artifact; one
driver (`Analysis`, `analyse`) that runs them, each reading what the others
made; the commands and the workflow's rules made from the entries; and each
option's default stated once, where it is declared."""

from __future__ import annotations

import ast
import dataclasses
import shlex
import sys
import types
from pathlib import Path

import pandas as pd
import pytest

from scalestudy.analysis import stages
from scalestudy.analysis.frontier.options import FrontierOptions
from scalestudy.analysis.options import ClaimsOptions, FitOptions, Options, cli_settings, flag
from scalestudy.analysis.stages import (
    ANALYSIS_STAGES,
    Analysis,
    Stage,
    analyse,
    command_line,
    study_stages,
    study_values,
)
from scalestudy.cli.parser import parser
from scalestudy.registry import Registry

from tests.support import ROOT


def test_the_stages_in_order_and_their_artifacts():
    assert {stage.name: stage.artifact for stage in study_stages()} == {
        "fit": "fits.parquet", "frontier": "frontier", "figures": "figures",
        "tables": "tables", "claims": "claims.md"}
    # A kind of analysis no study runs (any table's) is a stage too: its options.
    assert ANALYSIS_STAGES["predict"].artifact is None


def fake_stages(monkeypatch, stage_fns: dict[str, dict]) -> None:
    """Replace the registry by stages whose modules hold `stage_fns` (name ->
    its module's functions), each with the fit's options."""
    entries = []
    for name, fns in stage_fns.items():
        module = types.ModuleType(f"fake_stage_{name}")
        for fn_name, fn in fns.items():
            setattr(module, fn_name, fn)
        monkeypatch.setitem(sys.modules, module.__name__, module)
        artifact = "fits.parquet" if name == "fit" else f"{name}.md"
        entries.append(Stage(name, FitOptions, module.__name__, name, artifact=artifact))
    monkeypatch.setattr(stages, "ANALYSIS_STAGES", Registry("analysis stage", entries))


def test_analyse_runs_every_stage_in_order_each_reading_the_earlier_ones(monkeypatch,
                                                                         tmp_path):
    seen = []

    def fit_write(analysis, out: Path, options):
        seen.append(("fit", out, options.n_boot, type(options).__name__))
        return [out]

    def claims_write(analysis, out: Path, options):
        seen.append(("claims", out, analysis["fit"]))
        return [out]

    fake_stages(monkeypatch, {
        "fit": {"run": lambda analysis, options: f"fits of {analysis.runs}",
                "write": fit_write},
        "claims": {"write": claims_write}})
    out = tmp_path / "analysis"
    analysis, paths = analyse("runs", out, Options(n_boot=7))
    assert analysis["fit"] == "fits of runs"
    assert paths == [out / "fits.parquet", out / "claims.md"]
    # Each stage wrote into the directory staged for `out`, swapped in at the end,
    # with its own options, taken by name from the study's.
    staged = seen[0][1].parent
    assert staged != out and staged.parent == tmp_path
    assert seen == [("fit", staged / "fits.parquet", 7, "FitOptions"),
                    ("claims", staged / "claims.md", "fits of runs")]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["analysis"]


def _stages_writing(monkeypatch, fail_at: str | None = None):
    def write(name):
        def stage(analysis, out: Path, options):
            if name == fail_at:
                raise ValueError(f"{name} failed")
            out.write_text(f"new {name}")
            return [out]
        return stage

    fake_stages(monkeypatch, {"fit": {"write": write("fit")},
                              "claims": {"write": write("claims")}})


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


def test_a_result_is_computed_once_given_or_read_back(monkeypatch, tmp_path):
    """A stage's result: given outright, read back by its stage from a given
    path, or computed on first read (once) with the options it takes from the
    analysis's; an unknown stage is refused, naming the stages."""
    runs_seen = []

    def run(analysis, options):
        runs_seen.append(options.n_boot)
        return f"fitted {analysis.runs}"

    fake_stages(monkeypatch, {"fit": {"run": run, "read": lambda path: f"read {path.name}"}})
    analysis = Analysis("runs", ClaimsOptions(n_boot=3))
    assert analysis["fit"] == analysis.fits == "fitted runs" and runs_seen == [3]
    mine = ["my fits"]
    assert Analysis("runs", given={"fit": mine}).fits is mine
    assert Analysis("runs", given={"fit": tmp_path / "f.parquet"}).fits == "read f.parquet"
    with pytest.raises(KeyError, match="accepted values: fit"):
        analysis["nothing"]  # noqa: B018


def test_the_claims_stage_reads_the_frontier_stage_s_result(monkeypatch):
    """The frontier claims read the analysis's frontier: the stage's result,
    computed by the frontier's stage where it was not given (with the claims'
    bootstrap settings), never fitted by a claim; a claim reads another stage's
    result from the analysis (`Study.result`)."""
    from scalestudy.analysis.claims import stage as claims_stage

    seen = {}

    def evaluate(runs, fits, *, frontier, options, analysis):
        seen.update(frontier=frontier, n_boot=options.n_boot, analysis=analysis)
        return pd.DataFrame({"verdict": []})

    monkeypatch.setattr(claims_stage, "evaluate", evaluate)
    computed = []
    monkeypatch.setattr("scalestudy.analysis.frontier.stage.study_frontier",
                        lambda runs, options: computed.append(options) or "the stage's")
    fits = pd.DataFrame()
    analysis = Analysis("runs", ClaimsOptions(n_boot=9), given={"fit": fits})
    analysis.claims  # noqa: B018
    # Any other stage's result a claim reads through the analysis (Study.result).
    assert seen == {"frontier": "the stage's", "n_boot": 9, "analysis": analysis}
    assert computed == [FrontierOptions(n_boot=9)]  # its bootstrap, the frontier's rest
    given = Analysis("runs", ClaimsOptions(), given={"fit": fits, "frontier": None})
    given.claims  # noqa: B018
    assert seen["frontier"] is None and len(computed) == 1


def test_a_claim_reads_a_stage_s_result_from_the_analysis(monkeypatch):
    from scalestudy.analysis.claims import Evidence

    fake_stages(monkeypatch, {"fit": {"run": lambda analysis, options: "fits"}})
    analysis = Analysis("runs")
    assert Evidence.of(pd.DataFrame(), pd.DataFrame(), analysis=analysis).result("fit") == "fits"
    assert Evidence.of(pd.DataFrame(), pd.DataFrame()).result("fit") is None


def test_each_stage_takes_the_options_it_declares_from_the_study_s():
    options = Options(x_axis="params", n_boot=11, ci=0.9, seed=4, n_boot_saturating=5,
                      workers=3)
    analysis = Analysis("runs", options)
    assert analysis.options_for("fit") == FitOptions(x_axis="params", n_boot=11, ci=0.9,
                                                     seed=4, n_boot_saturating=5)
    assert analysis.options_for("frontier") == FrontierOptions(n_boot=11, ci=0.9, seed=4)
    assert analysis.options_for("claims") == ClaimsOptions(n_boot=11, ci=0.9, seed=4)
    assert analysis.options_for("figures").workers == 3


def test_a_stage_s_command_is_made_from_its_entry():
    """fit, tables and claims: the runs, the needs (positional where every study
    has them, an option where only some grids do), the output, and every option
    its declaration gives the command, with the declared default."""
    commands = parser()._subparsers._group_actions[0].choices
    for stage in ANALYSIS_STAGES.values():
        if not stage.own_command:
            continue
        actions = {a.dest: a for a in commands[stage.name]._actions}
        for f in cli_settings(stage.options):
            assert actions[f.name].default == f.default, (stage.name, f.name)
            assert flag(f) in actions[f.name].option_strings
        assert actions["out"].required
    claims = {a.dest: a for a in commands["claims"]._actions}
    assert "fit" in claims and not claims["fit"].option_strings
    assert claims["frontier"].option_strings == ["--frontier"]


HOSTILE = "x'; touch PWNED; echo '$(touch PWNED2) `touch PWNED3` \"quoted\" \\ & | > <"


def test_the_workflow_s_analysis_rules_are_made_from_the_entries():
    """Each stage's artifact is named once: the rules take it from the registry
    (common.smk's ARTIFACT), never spell it again; the stages' rules come from
    their entries (analysis.smk), each running its stage's command, which the
    CLI parses back to the very paths and the study's option values, however
    the paths are spelled (every word quoted)."""
    rules = "\n".join(p.read_text() for p in sorted((ROOT / "workflow/rules").glob("*.smk")))
    for artifact in ("fits.parquet", "claims.md", "/frontier", "/figures/", "/tables/",
                     "alpha.csv"):
        assert f"{{OUT}}{artifact}" not in rules.replace("{OUT}/logs", ""), artifact
    assert "for stage in STAGE_RULES:" in rules
    study = {"x_axis": "params", "n_boot": 10, "ci": 0.9}
    for stage in study_stages():
        if not stage.rule:
            continue
        runs, out = f"/r/{HOSTILE}/runs.parquet", f"/r/{HOSTILE}/{stage.artifact}"
        needs = {name: f"/r/{HOSTILE}/{name}" for name in stage.needs}
        options = study_values(stage, study)
        assert set(options) <= set(study), stage.name
        words = shlex.split(command_line(stage, runs, out, needs, options))
        assert words[:len(stage.command or (stage.name,)) + 1] == [
            "scalestudy", *(stage.command or (stage.name,))]
        args = parser().parse_args(words[1:])
        assert str(getattr(args, "runs", None) or args.table) == runs
        assert str(getattr(args, "out", None) or args.out_dir) == out
        assert {name: str(getattr(args, name)) for name in needs} == needs
        assert {name: getattr(args, name) for name in options} == options
def test_the_dag_reads_the_stages_without_pandas_or_matplotlib():
    import subprocess

    code = ("import sys, scalestudy.analysis.stages; "
            "bad = {'torch', 'matplotlib', 'pandas'} & set(sys.modules); assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)


FIT_DEFAULTS = {"n_boot", "ci", "n_boot_saturating", "seed", "x_axis"}


def test_each_default_is_stated_once():
    """No function states a bootstrap or fit default of its own (a number or an
    axis), and no command an option's default: each is its declaration's
    (analysis/options.py, a package's options.py), read everywhere else."""
    package = ROOT / "src" / "scalestudy"
    stated = []
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                args = node.args
                pairs = [*zip(args.args[len(args.args) - len(args.defaults):], args.defaults,
                              strict=True),
                         *zip(args.kwonlyargs, args.kw_defaults, strict=True)]
                stated += [f"{path.name}:{node.lineno} {a.arg}" for a, d in pairs
                           if a.arg in FIT_DEFAULTS and isinstance(d, ast.Constant)
                           and d.value is not None]  # None: the caller's, e.g. the fits'
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                  and node.func.attr == "add_argument"):
                keywords = {k.arg: k.value for k in node.keywords}
                if isinstance(keywords.get("default"), ast.Constant) and node.args and \
                        getattr(node.args[0], "value", "") in {"--n-boot", "--ci", "--seed",
                                                                "--x", "--n-boot-saturating"}:
                    stated.append(f"{path.name}:{node.lineno} {node.args[0].value}")
    assert not stated, stated
    # The study's fit section is the analysis's declaration, not a copy of it.
    from scalestudy.study.config import FitConfig

    for f in dataclasses.fields(FitConfig):
        assert f.default == getattr(Options, f.name), f.name
