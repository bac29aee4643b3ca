"""`scalestudy <command> --help` describes every option and shows its default."""

import argparse

import pytest

from scalestudy.cli.parser import parser

COMMANDS = parser()._subparsers._group_actions[0].choices


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_option_is_described_with_its_default(name):
    command = COMMANDS[name]
    assert command.description, name
    text = " ".join(command.format_help().split())
    for action in command._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        assert action.help and action.help.strip(), f"{name} {action.dest}: no help"
        if action.default is not None and not action.required:
            assert f"(default: {action.default})" in text, f"{name} {action.dest}"
    assert "(default: None)" not in text


def test_fit_help_shows_the_bootstrap_defaults():
    text = " ".join(COMMANDS["fit"].format_help().split())
    for default in ("(default: compute)", "(default: 1000)", "(default: 0.95)",
                    "(default: 0)", "(default: 100)"):
        assert default in text


def test_every_command_s_imports_resolve():
    """The commands import what they need when they run: each of those imports
    names a module or a name that exists (a typo would surface only in a job)."""
    import ast
    import importlib
    import inspect

    from scalestudy.cli import commands

    tree = ast.parse(inspect.getsource(commands))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = importlib.util.resolve_name("." * node.level + (node.module or ""),
                                               commands.__package__)
            module = importlib.import_module(base)
            for alias in node.names:
                assert hasattr(module, alias.name) or importlib.util.find_spec(
                    f"{base}.{alias.name}"), f"{base}.{alias.name}"


def test_options_prints_every_option_a_study_may_state(capsys):
    from scalestudy.cli.parser import run_command
    from scalestudy.study.config import reference

    assert run_command(["options"]) == 0
    assert capsys.readouterr().out == reference()
