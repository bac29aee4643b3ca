"""The analysis's one driver: every kind of analysis is a stage, an entry of
`ANALYSIS_STAGES` that declares its options (options.py, or its package's
options.py), the results of the other stages it reads (`needs`) and the
artifact it writes under a study's results; one code path runs it.

- `Analysis` holds a study's analysis as its stages fill it in: the runs, then
  each stage's result (`analysis["fit"]`, `.fits`, `.frontier`, `.claims`),
  computed on first read by its stage, with the options the stage takes from
  the analysis's (`options.taken`), or given (the result, or its artifact's
  path, read back by its stage);
- `analyse` writes every stage of a study in order, in one process (`scalestudy
  analyse`, a cached study);
- `scalestudy <stage>` (fit, tables, claims: every study stage without a
  `command` of its own) runs one stage on a runs file and the artifacts of the
  stages it needs (cli/parser.py makes the command from the entry: its options
  and their defaults from the declaration; `command_line` is a rule's call);
  the frontier's, the figures' and the prediction's commands (`scalestudy
  frontier`, `figure`, `predict`) take tables outside a study too and call the
  same stage functions;
- the workflow's analysis rules (workflow/rules/analysis.smk) are made from the
  entries: one rule per stage, calling its command on the study's artifacts
  (`ARTIFACT[name]` in common.smk), its options the study's `fit` section's of
  the same names; the figures' rules are one job per figure (figures.smk);
- the notebook (notebook.py) reads a study's `Analysis`.

A stage's module (`module`, loaded by name when the stage runs) holds:
`run(analysis, options)`, its result from the analysis so far (optional: a
stage that only writes); `write(analysis, out, options)`, its artifact at
`out`, the paths written; `read(path)`, its result read back from its artifact
(a stage others need); `refuse(out, inputs)`, ValueError for an output its
command must not replace (atomic.refuse_foreign or refuse_overwrite); and
`summary(analysis, paths)`, what its command prints.

Torch-free, and light to import (the DAG reads it at every parse): a stage's
module is imported when it runs (matplotlib only for the figures).
"""

from __future__ import annotations

import dataclasses
import importlib
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..registry import Registry
from .frontier.options import FrontierOptions
from .options import (
    ClaimsOptions,
    FiguresOptions,
    FitOptions,
    Options,
    TablesOptions,
    cli_settings,
    flag,
    taken,
)
from .plan.options import PlanOptions
from .predict.options import PredictOptions

if TYPE_CHECKING:  # the DAG reads the artifacts' names alone
    import pandas as pd


@dataclass(frozen=True)
class Report:
    """A file's place in the workflow's report: its caption (workflow/report/),
    category and labels."""

    caption: str
    category: str
    labels: dict


@dataclass(frozen=True)
class Stage:
    """One kind of analysis (see the module docstring)."""

    name: str
    options: type  # its options' declaration: a frozen dataclass of `options.setting`s
    module: str  # what runs it: run, write, read, refuse, summary
    help: str  # what it makes, in one line: its command's help
    # Under a study's results: a file, or a directory of `files` (a tuple, or a
    # function giving it: the DAG declares them; the figures' are the figure
    # registry's); None: no study runs it.
    artifact: str | None = None
    files: tuple[str, ...] | Callable[[], tuple[str, ...]] = ()
    needs: tuple[str, ...] = ()  # the stages whose results it reads
    # Only a grid with budgets has it (its result is None otherwise): its rule
    # exists only there, and a command that reads it takes it as an option.
    on_budgets: bool = False
    # Its command (and what its rule adds), where it is not `scalestudy <name>`
    # made from this entry: one that takes tables outside a study too.
    command: tuple[str, ...] = ()
    rule: bool = True  # False: the workflow writes it with rules of its own
    example: str = ""  # its command's example (cli/parser.py)
    report: Mapping[str, Report] = field(default_factory=dict)  # its files' captions

    @property
    def implementation(self):
        return importlib.import_module(self.module)

    def run(self, analysis: Analysis, options) -> Any:
        run = getattr(self.implementation, "run", None)
        return None if run is None else run(analysis, options)

    def write(self, analysis: Analysis, out: Path, options) -> list[Path]:
        return list(self.implementation.write(analysis, Path(out), options))

    def read(self, path) -> Any:
        return self.implementation.read(Path(path))

    def refuse(self, out: Path, inputs) -> None:
        self.implementation.refuse(Path(out), [Path(p) for p in inputs])

    def summary(self, analysis: Analysis, paths: list[Path]) -> str:
        return self.implementation.summary(analysis, paths)

    @property
    def is_directory(self) -> bool:
        return bool(self.files)

    def artifact_files(self) -> tuple[str, ...]:
        """The files of a directory artifact (none for a file artifact)."""
        return tuple(self.files() if callable(self.files) else self.files)

    @property
    def own_command(self) -> bool:
        """Whether its command is the one made from this entry (`scalestudy <name>`)."""
        return self.artifact is not None and not self.command


def _frontier_files() -> tuple[str, ...]:
    from .frontier.result import FILES  # numpy and pandas, never the fits

    return FILES


TABLES_REPORT = {
    "alpha.csv": Report("alpha_table.rst", "Tables", {"table": "scaling coefficients"}),
    "lra_accuracy.csv": Report("lra_table.rst", "Tables",
                               {"table": "test accuracy per prior (LRA style)"}),
    "heldout.csv": Report("heldout_table.rst", "Tables",
                          {"table": "held-out prediction of the largest size"}),
}

ANALYSIS_STAGES: Registry[Stage] = Registry("analysis stage", [
    Stage("fit", FitOptions, "scalestudy.analysis.fits",
          "fit power laws to a runs.parquet (or a cached study)", artifact="fits.parquet",
          example="scalestudy fit data/cache/workstation.parquet --out /tmp/fits.parquet "
                  "--n-boot 200"),
    Stage("frontier", FrontierOptions, "scalestudy.analysis.frontier.stage",
          "the compute-optimal frontier of a study's budgeted runs", artifact="frontier",
          files=_frontier_files, on_budgets=True,
          command=("frontier", "--from-runs", "--no-figures")),
    # One job per figure in the workflow, each its own command's (`part`), the
    # figure registry's figures and its index (figures.smk).
    Stage("figures", FiguresOptions, "scalestudy.analysis.figures.draw",
          "every figure of the registry and its index", artifact="figures",
          needs=("fit", "frontier"), command=("figure",), rule=False),
    Stage("tables", TablesOptions, "scalestudy.analysis.tables",
          "alpha and LRA-style accuracy tables (CSV, Markdown)", artifact="tables",
          files=tuple(f"{table}.{ext}" for table in ("alpha", "lra_accuracy", "heldout")
                      for ext in ("csv", "md")),
          needs=("fit",), report=TABLES_REPORT,
          example="scalestudy tables results/default/runs.parquet "
                  "results/default/fits.parquet --out-dir /tmp/tables"),
    Stage("claims", ClaimsOptions, "scalestudy.analysis.claims.stage",
          "check the papers' claims; write claims.md", artifact="claims.md",
          needs=("fit", "frontier"),
          report={"": Report("claims.rst", "Claims",
                             {"claims": "the three papers' headline claims"})},
          example="scalestudy claims results/default/runs.parquet "
                  "results/default/fits.parquet --out /tmp/claims.md"),
    # No study runs it (its targets are the user's): its command, `scalestudy
    # predict`, calls its module's `predict` with its options.
    Stage("predict", PredictOptions, "scalestudy.analysis.predict.stage",
          "predictions of larger runs from any ladder of runs (scalestudy predict)"),
    # No study runs it either: `scalestudy plan` (cli/commands.py) gives it a pilot's
    # records, a candidate study and the study's cost of a design.
    Stage("plan", PlanOptions, "scalestudy.analysis.plan.stage",
          "each claim's power on a candidate study and the cheapest design that decides "
          "it (scalestudy plan)"),
])


def study_stages() -> list[Stage]:
    """The stages a study runs, in order (those with an artifact)."""
    return [stage for stage in ANALYSIS_STAGES.values() if stage.artifact is not None]


class Analysis:
    """A study's analysis as its stages fill it in: the runs, then each stage's
    result, computed when first read (`analysis[name]`; `fits`, `frontier`,
    `claims`) by its stage, with the options it takes from `options` (any
    options object: a stage takes those of its own it names, the rest at their
    declaration), unless `given`: stage name -> its result, or the path of its
    artifact (read back by its stage)."""

    def __init__(self, runs: pd.DataFrame, options=None, given: Mapping[str, Any] | None = None):
        self.runs = runs
        self.options = Options() if options is None else options
        self._given = dict(given or {})
        self._results: dict[str, Any] = {}

    def options_for(self, name: str):
        """Stage `name`'s options in this analysis."""
        stage = ANALYSIS_STAGES[name]
        if type(self.options) is stage.options:
            return self.options
        return taken(stage.options, self.options)

    def __getitem__(self, name: str) -> Any:
        if name not in self._results:
            stage = ANALYSIS_STAGES[name]
            if name in self._given:
                value = self._given[name]
                self._results[name] = (stage.read(value) if isinstance(value, str | Path)
                                       else value)
            else:
                self._results[name] = stage.run(self, self.options_for(name))
        return self._results[name]

    def __setitem__(self, name: str, result: Any) -> None:
        ANALYSIS_STAGES[name]  # noqa: B018 (an unknown stage is refused, naming the known)
        self._results[name] = result

    @property
    def fits(self) -> pd.DataFrame:
        return self["fit"]

    @property
    def frontier(self):
        """The FrontierResult of the runs' budgets; None without budgets."""
        return self["frontier"]

    @property
    def claims(self) -> pd.DataFrame:
        return self["claims"]

    def write(self, name: str, out) -> list[Path]:
        """Stage `name`'s artifact at `out`: the paths written."""
        return ANALYSIS_STAGES[name].write(self, Path(out), self.options_for(name))


def analyse(runs: pd.DataFrame, out_dir, options: Options | None = None,
            inputs=()) -> tuple[Analysis, list[Path]]:
    """Every stage of a study, in order, on `runs`, into `out_dir`: the analysis
    and the paths written. `out_dir` is replaced whole once every stage has
    run, so a failure leaves the previous analysis as it was; one holding
    anything but the stages' artifacts, or any of `inputs` (the runs file), is
    refused."""
    from ..atomic import refuse_foreign, replacing_directory

    out_dir = Path(out_dir)
    stages = study_stages()
    refuse_foreign(out_dir, [stage.artifact for stage in stages], "an analysis's", inputs)
    analysis, paths = Analysis(runs, options), []
    with replacing_directory(out_dir) as staged:
        for stage in stages:
            paths += analysis.write(stage.name, staged / stage.artifact)
    return analysis, [out_dir / path.relative_to(staged) for path in paths]


def study_values(stage: Stage, fit_section: Mapping[str, Any]) -> dict[str, Any]:
    """The options of `stage` a study states (its `fit` section's of the same
    names), by name: what the stage's rule passes its command."""
    return {f.name: fit_section[f.name] for f in cli_settings(stage.options)
            if f.name in fit_section}


def command_line(stage: Stage, runs, out, needs: Mapping[str, Any],
                 options: Mapping[str, Any]) -> str:
    """The shell command of `stage`'s rule, every argument quoted: its command on
    the runs file `runs`, the artifacts of the stages it needs (`needs`: name ->
    path, those the study has), its output `out` and `options` (name -> value)."""
    words = [*(stage.command or (stage.name,)), runs]
    for need, path in needs.items():
        words += [_need_flag(need), path] if _need_flag(need) else [path]
    words += ["--out-dir" if stage.is_directory else "--out", out]
    by_name = {f.name: f for f in dataclasses.fields(stage.options)}
    for name, value in options.items():
        setting = by_name[name]
        if isinstance(setting.default, bool):  # a switch: its flag alone, where turned over
            words += [flag(setting)] if value != setting.default else []
        else:
            words += [flag(setting), value]
    return "scalestudy " + " ".join(shlex.quote(str(word)) for word in words)


def _need_flag(need: str) -> str:
    """How a command names a need's artifact: a stage every study has is a
    positional argument, one only some grids have an option (--frontier)."""
    return f"--{need}" if ANALYSIS_STAGES[need].on_budgets else ""


def needs_of(stage: Stage) -> tuple[list[str], list[str]]:
    """The needs its command takes as positional arguments, and as options."""
    required = [n for n in stage.needs if not ANALYSIS_STAGES[n].on_budgets]
    optional = [n for n in stage.needs if ANALYSIS_STAGES[n].on_budgets]
    return required, optional


__all__ = ["ANALYSIS_STAGES", "Analysis", "Options", "Report", "Stage", "analyse",
           "command_line", "needs_of", "study_stages", "study_values"]
