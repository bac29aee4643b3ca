"""`python -m scalestudy.cli`: the `scalestudy` command (how Lightning starts a
DDP run's other ranks, and how tools run it without the console script)."""

import sys

from . import main

sys.exit(main())
