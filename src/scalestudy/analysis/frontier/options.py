"""The frontier's options, declared once (analysis/options.py): `scalestudy
frontier` takes its options and defaults from them, `frontier` and
`study_frontier` run with them, and in a study the frontier stage takes the
study's bootstrap settings (n_boot, ci, seed) and these for the rest. Light:
the workflow reads it at every parse.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import MIN_SIZES
from ..options import Bootstrap, setting

METHODS = ("approach1", "approach2", "approach3")
COMPUTE_AXES = ("counted", "6nd")
LOSS_LABEL = "loss (nats/token)"


@dataclass(frozen=True)
class FrontierOptions(Bootstrap):
    """The frontier stage's (frontier/stage.py: frontier/)."""

    # Each replicate refits every approach (approach 3 from its grid's best starts).
    n_boot: int = setting(200, "bootstrap replicates")
    budget_gap: float = setting(0.02, """without a budget column: a new budget where log10
        compute jumps by more than this (decades)""")
    max_span: float = setting(0.1, """without a budget column: refuse a budget spanning more
        than this (decades)""")
    min_sizes: int = setting(MIN_SIZES, "approach 2: sizes a budget needs")
    window: float = setting(1.0, """approach 2: fit each budget's parabola on the sizes within
        this many decades of its lowest-loss size (and always its neighbours)""",
                            metavar="DECADES")
    compute_axis: str = setting("counted", """the C of N_opt ~ C^a for every approach: the
        table's compute (counted FLOPs) or 6 N D""", choices=COMPUTE_AXES)
    n_polish: int | None = setting(256, "approach 3: L-BFGS-B from this many best grid starts")
    n_grid: int = setting(40, "approach 1 from curves: the compute points its envelope is read at",
                          cli=False)
    methods: tuple[str, ...] = setting(METHODS, "the approaches fitted", cli=False)
    loss_label: str = setting(LOSS_LABEL, "the figures' loss axis")
    figures: bool = setting(True, "its figures too (--no-figures: the tables only)")
    quiet: bool = setting(False, "say nothing of what was left out on stderr", cli=False)
