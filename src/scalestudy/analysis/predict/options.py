"""The prediction's options, declared once (analysis/options.py): `scalestudy
predict` takes its options and defaults from them and `predict` runs with
them. Its law is approach 3's, fitted by the frontier's fitter on the
frontier's compute axes, so it takes those options' declarations
(frontier/options.py). Light.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..frontier.options import FrontierOptions
from ..options import Bootstrap, restated, setting


@dataclass(frozen=True)
class PredictOptions(Bootstrap):
    """The prediction stage's (predict/stage.py: a directory of any table's)."""

    n_boot: int = restated(FrontierOptions, "n_boot", """bootstrap replicates (each refits the
        law; 0: no intervals)""")
    n_polish: int | None = restated(FrontierOptions, "n_polish", """L-BFGS-B from this many
        best starts of the grid""")
    compute_axis: str = restated(FrontierOptions, "compute_axis", """FLOPs of every output:
        the table's compute (counted; a target's from the FLOPs per token of the sizes run)
        or 6 N D""")
    min_fraction: float = setting(0.25, """a table of checkpoints (step, run): keep the points
        at or after this fraction of their run's final tokens""")
    loss_label: str = restated(FrontierOptions, "loss_label", "the figure's loss axis")
    figures: bool = restated(FrontierOptions, "figures", """draw its figure too
        (--no-figures: the tables only)""")
    quiet: bool = restated(FrontierOptions, "quiet", """say nothing of what was left out on
        stderr""")

