"""`scalestudy plan`: the planner (analysis/plan/) given what lies above the
analysis, the study (study/): the candidate study's design, what a design
costs (study/costs.py's FLOPs, calibrated on the pilot's wall time), and the
preset it writes; and a dry run's planned powers (`planned_lines`, for the
workflow)."""

from __future__ import annotations

import dataclasses
import datetime
from pathlib import Path

import yaml

from ..analysis.plan.design import Design, cheapest
from ..analysis.plan.options import PlanOptions
from ..study.config import DEFAULT_STUDY, StudyConfig, load_study, read_yaml
from ..study.costs import SecondsModel, study_seconds


def design_of(study: StudyConfig) -> Design:
    """The study's design: its grid's sizes, seeds (their number), archs, priors,
    tasks; whether each finetuning seed has its own pretraining; its protocol."""
    grid = study.grid
    return Design(tuple(grid.sizes), len(grid.seeds), tuple(grid.archs), tuple(grid.priors),
                  tuple(grid.tasks), study.pretrain.seeds == "per_seed", study.train.protocol)


def with_design(study: StudyConfig, design: Design) -> StudyConfig:
    grid = dataclasses.replace(study.grid, archs=tuple(design.archs),
                               sizes=tuple(design.sizes), seeds=tuple(range(design.seeds)))
    return dataclasses.replace(study, grid=grid)


def candidate_study(preset: Path | None) -> tuple[StudyConfig, dict]:
    """The candidate's typed config and its preset's own YAML (config/config.yaml's
    without one)."""
    from ..study.checks import validate

    config = load_study(*([preset] if preset else []))
    return validate(config), read_yaml(preset or DEFAULT_STUDY)


def model_of(pilot_path: Path, noise: float = 0.0, correlation: float = -1.0):
    from ..analysis.inputs import read_runs
    from ..analysis.plan.model import Model

    pilot = read_runs(pilot_path)
    model = Model.from_pilot(pilot, source=f"pilot {pilot_path}")
    return pilot, model.noise(noise or None, correlation if correlation >= 0 else None)


def run(args) -> None:
    from ..analysis.claims import CLAIMS
    from ..analysis.options import parsed
    from ..analysis.plan.rules import rule
    from ..analysis.plan.stage import fast_power, plan, summary, windows

    options = parsed(PlanOptions, args, extrapolate=args.extrapolate)
    unknown = [c for c in args.claims or [] if c not in CLAIMS]
    if unknown:
        raise ValueError(f"--claims: unknown {', '.join(unknown)}; accepted: "
                         f"{', '.join(CLAIMS)}")
    study, own = candidate_study(args.preset)
    pilot, model = model_of(args.pilot, args.noise, args.correlation)
    seconds = SecondsModel(pilot)

    def hours_of(design: Design) -> float:
        return study_seconds(with_design(study, design), seconds) / options.cores / 3600

    candidate = design_of(study)
    plans = plan(model, candidate, hours_of, options, args.claims)
    print(summary(plans, candidate, hours_of(candidate), options, model))
    if not args.out:
        return
    claims = args.claims or [p.claim for p in plans if p.cheapest is not None]
    slow = [c for c in claims if rule(c) is None]
    if not claims or slow:
        raise ValueError("--out: name --claims with a planner rule "
                         f"({'none given' if not claims else ', '.join(slow) + ' has none'})")

    def decided(design: Design) -> float:
        return min(fast_power(c, model, design, options.n_sims, options.seed, options.ci).decided
                   for c in claims)

    reads = {a for c in claims for a in rule(c).reads(candidate)}
    trimmed = dataclasses.replace(candidate, archs=tuple(a for a in candidate.archs if a in reads))
    best, nearest = cheapest(trimmed, decided, hours_of, options.power, options.max_seeds,
                             options.budget_hours, windows(model, options))
    chosen = best or nearest
    if chosen is None:
        raise ValueError("--out: no design within the budget")
    name = args.name or f"{study.study}_plan"
    text = preset_text(own, chosen, name, claims, args, options, model,
                       {c: fast_power(c, model, chosen.design, options.n_sims, options.seed,
                                      options.ci) for c in claims}, best is not None)
    args.out.write_text(text)
    print(f"wrote {args.out}: {chosen.design.text()}, {chosen.hours:.2f} h on "
          f"{options.cores} cores" + ("" if best else f" (the nearest: power {chosen.power:.2f} "
                                                      f"< {options.power:g})"))


def preset_text(own: dict, chosen, name: str, claims: list[str], args, options: PlanOptions,
                model, powers: dict, reached: bool) -> str:
    """The preset of the chosen design: the candidate preset's own keys, its name,
    sizes and seeds changed and its plan section, under a header that says what
    was planned and how."""
    config = dict(own)
    config["study"] = name
    config["grid"] = {**own["grid"], "archs": list(chosen.design.archs),
                      "sizes": list(chosen.design.sizes),
                      "seeds": list(range(chosen.design.seeds))}
    config["plan"] = {"claims": list(claims), "pilot": str(args.pilot),
                      "noise": float(args.noise), "correlation": float(args.correlation)}
    head = [f"# Planned by `scalestudy plan` on {datetime.date.today().isoformat()}, before "
            "any of its runs: its design is fixed here.",
            f"# Candidate: {args.preset or 'config/config.yaml'}; {model.source} (log noise sd "
            f"{model.sd:.3f} of an error, {model.up_sd:.3f} of an upstream loss, correlation "
            f"between architectures {model.rho:.2f}).",
            f"# Design: {chosen.design.text()}; estimated {chosen.hours:.2f} h on "
            f"{options.cores} cores (study/costs.py's FLOPs, the pilot's wall time).",
            f"# Power asked: {options.power:g}" + ("" if reached else " (not reached: the "
                                                   "nearest design within the budget)") + "."]
    head += [f"#   {claim}: decided with probability {p.decided:.2f} (holds {p.holds:.2f}, "
             f"does not hold {p.fails:.2f}) if the pilot's effects are true"
             for claim, p in powers.items()]
    head += [f"# Use: snakemake --cores {options.cores} --configfile {args.out}", ""]
    return "\n".join(head) + yaml.dump(config, Dumper=_PresetDumper, sort_keys=False)


class _PresetDumper(yaml.SafeDumper):
    """Mappings as blocks, lists of scalars on one line: the presets' own style."""


_PresetDumper.add_representer(
    list, lambda dumper, data: dumper.represent_sequence("tag:yaml.org,2002:seq", data,
                                                         flow_style=True))


def planned_lines(study: StudyConfig, root: Path, n_sims: int = 1000) -> list[str]:
    """A dry run's lines: per claim of the study's plan section whose power on the
    study's grid is below 0.5, one line (none without a plan or a pilot)."""
    from ..analysis.claims import CLAIMS
    from ..analysis.plan.rules import rule
    from ..analysis.plan.stage import fast_power, why_not

    plan = study.plan
    if not plan.claims or not plan.pilot:
        return []
    pilot = Path(plan.pilot) if Path(plan.pilot).is_absolute() else root / plan.pilot
    _, model = model_of(pilot, plan.noise, plan.correlation)
    design = design_of(study)
    lines = []
    for claim in plan.claims:
        if claim not in CLAIMS or rule(claim) is None:
            lines.append(f"plan: {claim}: no planner rule; its power is not checked here")
            continue
        reason = why_not(claim, model, design)
        power = 0.0 if reason else fast_power(claim, model, design, n_sims).decided
        if power < 0.5:
            lines.append(f"plan: {claim}: planned power {power:.2f} on this grid (< 0.5"
                         + (f"; {reason}" if reason else "") + "): scalestudy plan "
                         f"--pilot {plan.pilot} --claims {claim} searches for a design that "
                         "decides it")
    return lines
