"""The CLI as documentation: `scalestudy --version`; every subcommand's help
says what each option takes (its metavar) and its default or that it is
required, with an example of the subcommand in its epilog."""

from __future__ import annotations

import subprocess
import sys

from scalestudy import __version__
from scalestudy.cli.parser import EXAMPLES, parser


def test_version():
    done = subprocess.run([sys.executable, "-m", "scalestudy.cli", "--version"],
                          capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip() == f"scalestudy {__version__}"


def test_every_subcommand_documents_its_options_and_an_example():
    top = parser()
    commands = top._subparsers._group_actions[0].choices
    assert set(commands) == set(EXAMPLES)
    for name, sub in commands.items():
        text = sub.format_help()
        assert f"example:\n  scalestudy {name} " in text, name
        for action in sub._actions:
            if not action.option_strings or action.dest == "help":
                continue
            takes = action.nargs == 0 or action.metavar or action.choices
            assert takes, (name, action.dest)
            help_text = sub._get_formatter()._expand_help(action) if action.help else ""
            said = ("(default:" in help_text or "(required)" in help_text
                    or "default" in (action.help or ""))
            assert said, (name, action.dest, help_text)
