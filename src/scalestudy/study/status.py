"""Where a study stands while it runs (`scalestudy status [results/<study>]`):
per stage, how many runs are done, running, failed, diverged or pending; the
failed runs with their error line and log; and the training time spent (the
records' wall seconds) and left (the same rate, seconds per estimated FLOP,
applied to the FLOPs estimated for the runs not done: study/costs.py).

What it reads, never Snakemake's log: the study's config as the workflow saw
it (results/<study>/study.yaml, written when it starts), the run records, and
Snakemake's own markers of the jobs started and not finished
(.snakemake/incomplete/) with the study's lock holder (scalestudy.locks): a job
marked incomplete is running while that process lives, else interrupted (the
next `snakemake` reruns it). Torch-free.
"""

from __future__ import annotations

import base64
import os
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from ..priors import PRIORS
from ..records import read_records, unreadable
from . import costs, grid
from .config import PRESETS, StudyConfig, load_study, read_yaml

CONFIG = "study.yaml"  # the study's config, saved by the workflow when it starts
# The job logs, as the rules name them (workflow/rules/train.smk, pretrain.smk).
TRAIN_LOG = "logs/train/{task}/{arch}/{size}/{prior}/s{seed}.log"
PRETRAIN_LOG = "logs/{directory}.log"
STATES = ("done", "running", "failed", "diverged", "interrupted", "corrupt", "pending")


@dataclass
class Run:
    stage: str
    directory: str
    log: str
    flops: float
    state: str = "pending"
    error: str = ""
    wall: float = 0.0


@dataclass
class Status:
    study: str
    study_dir: Path
    runs: list[Run] = field(default_factory=list)
    owner_alive: bool = False

    def counts(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for run in self.runs:
            out.setdefault(run.stage, dict.fromkeys(STATES, 0))[run.state] += 1
        return out

    @property
    def spent(self) -> float:
        return sum(r.wall for r in self.runs)

    @property
    def left(self) -> float | None:
        """Training seconds left at the rate the recorded runs trained (None
        before any run has a record)."""
        ended = [r for r in self.runs if r.state in ("done", "failed", "diverged") and r.wall]
        flops = sum(r.flops for r in ended)
        if not flops:
            return None
        return self.spent / flops * sum(r.flops for r in self.runs
                                        if r.state in ("running", "pending", "interrupted"))


def load_config(study_dir: Path) -> dict:
    """The study's config: the one the workflow saved in study_dir, else the
    preset named like the study over config/config.yaml (study/config.py)."""
    study_dir = Path(study_dir)
    saved = study_dir / CONFIG
    if saved.is_file():
        return read_yaml(saved)
    default = load_study()
    if study_dir.name == default["study"]:
        return default
    preset = PRESETS / f"{study_dir.name}.yaml"
    if not preset.is_file():
        raise ValueError(f"{study_dir}: no {CONFIG} (written when the workflow starts) "
                         f"and no preset {preset}; cannot tell the study's grid")
    return load_study(preset)


def incomplete(workdir: Path) -> set[str]:
    """The outputs of the jobs Snakemake started and has not finished (its
    markers: .snakemake/incomplete/<urlsafe base64 of the path>, split into
    '@'-prefixed directories when long)."""
    root = Path(workdir) / ".snakemake" / "incomplete"
    out = set()
    for marker in root.rglob("*") if root.is_dir() else ():
        if marker.is_file():
            parts = marker.relative_to(root).parts
            encoded = "".join(p.removeprefix("@") for p in parts)
            try:
                out.add(base64.urlsafe_b64decode(encoded).decode())
            except ValueError:
                continue
    return out


def owner_alive(workdir: Path) -> bool:
    """Whether a Snakemake process holding the workflow's locks runs (one on
    another host is assumed to)."""
    from ..locks import held

    return held(Path(workdir) / ".snakemake")


def study_status(study_dir: Path) -> Status:
    study_dir = Path(study_dir)
    if not study_dir.is_dir():
        raise ValueError(f"{study_dir}: no such study directory (results/<study>)")
    config = load_config(study_dir)
    workdir = study_dir.parent.parent  # results/<study> -> the workflow's directory
    study = StudyConfig.from_dict(config)
    status = Status(study.study, study_dir, owner_alive=owner_alive(workdir))
    for p in grid.pretrain_cells(study.grid):
        status.runs.append(Run(f"pretrain {p.stage}", p.directory,
                               PRETRAIN_LOG.format(directory=p.directory),
                               costs.pretraining_flops(study, p)))
    for c in grid.cells(study.grid):
        status.runs.append(Run(f"train {PRIORS[c.prior].stage}", c.directory,
                               TRAIN_LOG.format(**vars(c)),
                               costs.training_flops(study, c)))
    started = incomplete(workdir)
    for run in status.runs:
        record = study_dir / run.directory / "record.parquet"
        if record.is_file() and (reason := unreadable(record)):
            run.state, run.error = "corrupt", reason
        elif record.is_file():
            row = read_records(record).iloc[0]
            run.state = {"ok": "done"}.get(row["status"], row["status"])
            run.error = row["error"] or ""
            run.wall = 0.0 if pd.isna(row["wall_seconds"]) else float(row["wall_seconds"])
        elif os.path.relpath(record, workdir) in started:
            run.state = "running" if status.owner_alive else "interrupted"
    return status


def duration(seconds: float) -> str:
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s"


def report(status: Status) -> str:
    """The status as text: a table of stages, the failed runs, the time."""
    counts = status.counts()
    width = max(len("stage"), *map(len, counts))
    lines = [f"study {status.study} ({status.study_dir}): {len(status.runs)} runs",
             "", f"{'stage':<{width}}  " + "  ".join(f"{s:>11}" for s in STATES)]
    for stage, row in counts.items():
        lines.append(f"{stage:<{width}}  " + "  ".join(f"{row[s]:>11}" for s in STATES))
    total = {s: sum(row[s] for row in counts.values()) for s in STATES}
    lines.append(f"{'all':<{width}}  " + "  ".join(f"{total[s]:>11}" for s in STATES))
    failed = [r for r in status.runs if r.state == "failed"]
    if failed:
        lines += ["", "failed:"]
        lines += [f"  {r.directory}: {r.error}\n    log: {status.study_dir / r.log}"
                  for r in failed]
    left = status.left
    lines += ["", f"training time spent: {duration(status.spent)} (the records' wall time, "
              "summed over runs)",
              "training time left: " + (f"about {duration(left)} (the same seconds per "
                                        "estimated FLOP for the runs not done; divide by the "
                                        "jobs that run at once)" if left is not None
                                        else "unknown until a run has a record")]
    corrupt = [r for r in status.runs if r.state == "corrupt"]
    if corrupt:
        lines += ["", "corrupt (a record that cannot be read):"]
        lines += [f"  {status.study_dir / r.directory}/record.parquet: {r.error}"
                  for r in corrupt]
        lines.append(f"  repair: {rerun_command(status.study)} sets each aside (kept as "
                     "record.parquet.corrupt) and runs its job again")
    if total["interrupted"]:
        lines.append(f"{total['interrupted']} runs were interrupted (their Snakemake is gone): "
                     "the same snakemake command reruns them")
    return "\n".join(lines)


def rerun_command(study: str) -> str:
    """The command that runs `study` again: the default study's, or with its
    preset (config/studies/<study>.yaml) when there is one."""
    if study == load_study()["study"]:
        return "snakemake --cores all"
    preset = PRESETS / f"{study}.yaml"
    if preset.is_file():
        return f"snakemake --cores all --configfile config/studies/{preset.name}"
    return "the snakemake command that ran the study"


def is_study(path: Path) -> bool:
    """Whether `path` is a study's results directory (the workflow saved its
    config there, or it holds runs), not an analysis of a cache (results/cache)."""
    return (path / CONFIG).is_file() or (path / "runs").is_dir() or (path / "pretrain").is_dir()


def only_study(results: Path = Path("results")) -> Path:
    """The one study under `results` (`scalestudy status` without a study);
    ValueError naming those there when there is not exactly one."""
    studies = sorted(p for p in Path(results).glob("*") if p.is_dir() and is_study(p))
    if len(studies) != 1:
        raise ValueError("name the study: results/<study> ("
                         + (", ".join(map(str, studies)) or "no results/ here") + ")")
    return studies[0]
