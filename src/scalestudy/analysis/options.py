"""Every analysis option declared once, with its default and what it means: a
frozen dataclass of options per stage (analysis/stages.py), whose fields are
`setting`s. The rest of the package reads them: the `scalestudy` commands take
their options and defaults from them (cli/parser.py), the notebook and
`scalestudy analyse` from `Options`, the study's `fit` section its keys'
defaults (study/config.py), the workflow's rules the study's values of the
same names, and the functions take an options object or default to the
declaration (`n_boot=Bootstrap.n_boot`).

The stages of a study share one set of options, `Options` (what `scalestudy
analyse` and the study's `fit` section state); each stage takes from it the
options it declares too, by name (`taken`), and the rest at their
declarations. Light: the workflow reads it at every parse.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from . import X_AXES


def setting(default: Any, help: str, *, flag: str | None = None, cli: bool = True,
            **argparse) -> Any:
    """A dataclass field with its default and its meaning (`help`, the
    command's help line); `flag`: its command-line option (default: the name
    with dashes, --n-boot); `cli`: False for an option of the functions alone;
    `argparse`: what else its option takes (choices, metavar, nargs)."""
    metadata = {"help": " ".join(help.split()), "flag": flag, "cli": cli,
                "argparse": argparse}
    return dataclasses.field(default=default, metadata=metadata)


def restated(cls: type, name: str, help: str) -> Any:
    """Field `name` of options `cls`, with its default, under another stage's
    `help` (what the option means there)."""
    f = next(f for f in dataclasses.fields(cls) if f.name == name)
    meta = f.metadata
    return setting(f.default, help, flag=meta["flag"], cli=meta["cli"], **meta["argparse"])


def flag(f: dataclasses.Field) -> str:
    """The command-line option of a setting: --n-boot for n_boot; a switch
    (bool) on by default is turned off by --no-<name>, one off by --<name>
    (its help says what it is on, and what --no-<name> leaves)."""
    if f.metadata.get("flag"):
        return f.metadata["flag"]
    name = f.name.replace("_", "-")
    return f"--no-{name}" if f.default is True else f"--{name}"


def switch_dest(f: dataclasses.Field) -> str:
    """Where a command's parsed arguments hold a switch: whether its flag was
    given (no_<name> for a switch on by default)."""
    return f"no_{f.name}" if f.default is True else f.name


def cli_settings(cls: type) -> list[dataclasses.Field]:
    """The settings of options `cls` that its command takes."""
    return [f for f in dataclasses.fields(cls) if f.metadata.get("cli", False)]


def chosen(cls: type, options, changes: dict) -> Any:
    """What a function taking options `cls` runs with: `options` (None: the
    declaration's) with `changes` (some of them by name; an unknown name is a
    TypeError)."""
    return dataclasses.replace(cls() if options is None else options, **changes)


def parsed(cls: type, args, **given) -> Any:
    """Options `cls` from a command's parsed arguments (each setting it takes by
    its name) and `given` (those the command sets otherwise)."""
    def value(f):
        if f.default is True:  # a switch on by default: off where --no-<name> was given
            return not getattr(args, switch_dest(f))
        return getattr(args, f.name)

    return cls(**{f.name: value(f) for f in cli_settings(cls)}, **given)


def taken(cls: type, options) -> Any:
    """Options `cls`, each that `options` (of another class) declares too taken
    from it, the others at their declarations: what a stage runs with in a
    study whose options are `options`."""
    names = {f.name for f in dataclasses.fields(options)}
    return cls(**{f.name: getattr(options, f.name) for f in dataclasses.fields(cls)
                  if f.name in names})


@dataclass(frozen=True)
class Bootstrap:
    """Percentile-bootstrap intervals: every stage that resamples takes these."""

    n_boot: int = setting(1000, "bootstrap resamples")
    ci: float = setting(0.95, "coverage of the bootstrap confidence intervals")
    seed: int = setting(0, "seed of the bootstrap resampling")


@dataclass(frozen=True)
class XAxis:
    """What a fit's x is."""

    x_axis: str = setting("compute", """the x axis of every fit: compute (training plus
        pretraining FLOPs), params (non-embedding parameters) or flops_per_token""",
                          flag="--x", choices=X_AXES)


# A dataclass's fields come in reverse order of its bases (a command lists them
# so): the x axis, then the bootstrap's, then its own.
@dataclass(frozen=True)
class FitOptions(Bootstrap, XAxis):
    """The fit stage's (fits.py: fits.parquet)."""

    n_boot: int = restated(Bootstrap, "n_boot", """bootstrap resamples of each log-log fit
        and of alpha_D/alpha_U (and, in analyse, of each claim's interval and of the
        frontier's fits)""")
    n_boot_saturating: int = setting(100, """bootstrap resamples of each saturating fit
        (each is a refit)""")


@dataclass(frozen=True)
class FiguresOptions:
    """The figures stage's (figures/: every figure of the registry)."""

    workers: int = setting(1, "figures drawn at a time, each in its own process")


@dataclass(frozen=True)
class TablesOptions:
    """The tables stage's: none (its tables are the fits' and the runs')."""


@dataclass(frozen=True)
class ClaimsOptions(Bootstrap):
    """The claims stage's (claims/: claims.md)."""

    n_boot: int = restated(Bootstrap, "n_boot", "bootstrap resamples of each claim's interval")


@dataclass(frozen=True)
class Options(FiguresOptions, FitOptions):
    """A study's analysis: what `scalestudy analyse` runs its stages with, and
    what the study's `fit` section states (x_axis, n_boot, ci); each stage takes
    those of its own options it names (`taken`)."""

