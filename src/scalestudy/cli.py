"""The `scalestudy` entry point: a command runs in a child of the warm server
when the workflow has one (warm.py), else here (commands.py)."""

from __future__ import annotations

import sys

from .commands import run_command
from .warm import run_in_server


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and not argv[0].startswith("-"):  # a command, not --help
        code = run_in_server(argv)
        if code is not None:
            return code
    return run_command(argv)


if __name__ == "__main__":
    sys.exit(main())
