"""The `scalestudy` command line: argparse and dispatch only. parser.py is
the command table (every command's options, help and example) and
`run_command`; commands.py what each command calls. The entry point `main`
runs a command in a child of the warm server when the workflow has one
(cli/fork_server.py), else here."""

from __future__ import annotations

import sys

from .fork_server import run_in_server
from .parser import run_command


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and not argv[0].startswith("-"):  # a command, not --help
        code = run_in_server(argv)
        if code is not None:
            return code
    return run_command(argv)
