"""`scalestudy plan` (cli/plan.py): the planner on a committed pilot and a
candidate preset, the preset it writes, and a dry run's planned powers."""

from __future__ import annotations

import yaml

from scalestudy.cli.parser import run_command
from scalestudy.cli.plan import planned_lines
from scalestudy.study import validate
from scalestudy.study.config import load_study

from tests.support import ROOT

PILOT = ROOT / "data/cache/workstation.parquet"
CANDIDATE = ROOT / "config/studies/tay_claims.yaml"


def test_plan_prints_each_claims_power_and_writes_the_cheapest_design(tmp_path, capsys):
    out = tmp_path / "planned.yaml"
    assert run_command(["plan", str(CANDIDATE), "--pilot", str(PILOT), "--claims",
                        "performer_albert_scale_poorly", "flat_or_negative_downstream",
                        "spt_closes_s4_gap", "--n-sims", "400", "--budget-hours", "3"]) == 0
    printed = capsys.readouterr().out
    assert "model: pilot" in printed and "candidate: sizes xxs, xs, s (1.2 decades), 2 seeds" \
        in printed
    assert "performer_albert_scale_poorly: power" in printed and "cheapest reaching 0.8" in printed
    assert "spt_closes_s4_gap: cannot check" in printed
    assert run_command(["plan", str(CANDIDATE), "--pilot", str(PILOT), "--claims",
                        "performer_albert_scale_poorly", "--n-sims", "400", "--out", str(out),
                        "--name", "planned"]) == 0
    preset = yaml.safe_load(out.read_text())
    assert preset["study"] == "planned" and preset["grid"]["archs"] == [
        "transformer", "performer", "albert"]  # only what the claim reads
    assert preset["plan"]["claims"] == ["performer_albert_scale_poorly"]
    assert out.read_text().startswith("# Planned by `scalestudy plan`")
    assert validate(load_study(out)).plan.claims == ["performer_albert_scale_poorly"]


def test_plan_refuses_an_unknown_claim(capsys):
    assert run_command(["plan", str(CANDIDATE), "--pilot", str(PILOT), "--claims",
                        "no_such_claim"]) == 2
    assert "--claims: unknown no_such_claim" in capsys.readouterr().err


def test_a_dry_run_names_each_planned_claim_below_half_power():
    """The committed planned preset (tay_scale_worse) at two seeds instead of its
    four: its claim's power falls below 0.5 and a line says so; at four, none."""
    config = load_study(ROOT / "config/studies/tay_scale_worse.yaml")
    assert planned_lines(validate(config), ROOT, n_sims=2000) == []
    config["grid"]["seeds"] = [0, 1]
    lines = planned_lines(validate(config), ROOT, n_sims=2000)
    assert len(lines) == 1 and lines[0].startswith(
        "plan: performer_albert_scale_poorly: planned power 0.")
    assert "(< 0.5)" in lines[0]
