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

# The choices a chain makes (chain.py, loss.py, downstream.py), spelled here so
# that the command's options load without numpy.
FORMS = ("chinchilla", "e-prior")
PATHS = ("direct", "loss-to-loss")
LINKS = ("fitted-asymptote", "sigmoid")
STEP1_POINTS = ("final", "checkpoints")


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
    step1_points: str = setting("final", """a table of checkpoints: the loss laws fit each
        run's final point (final: where its schedule ended) or every checkpoint kept
        (checkpoints: constant or warmup-stable-decay runs measured after a cooldown); the
        metric's sigmoid and loss-to-loss fit every checkpoint kept either way""",
                                choices=STEP1_POINTS)
    final_evals: int = setting(1, """a table of checkpoints: a run's final point is the mean of
        its last this many evaluations (loss, task loss, metric) at its final tokens""")
    form: str = setting(FORMS[0], """the loss laws' form: Hoffmann et al.'s, every parameter
        free (chinchilla), or with a prior on the irreducible loss E (e-prior: --e-prior)""",
                        choices=FORMS)
    e_prior: str = setting("", """the e-prior form's prior, E0 or E0:SD (the irreducible
        loss in the loss's units, and the standard deviation of ln E, default ln 2); empty:
        half the ladder's lowest loss, SD ln 2""", metavar="E0[:SD]")
    path: str = setting(PATHS[0], """with --task-loss: the task loss from its own L(N, D)
        (direct) or from the loss's by loss-to-loss (Brandfonbrener et al. 2024)""",
                        choices=PATHS)
    link: str = setting(LINKS[0], """with --metric: the sigmoid's asymptote at low loss fitted
        (fitted-asymptote) or the metric's best value, 1 for an accuracy (sigmoid: Bhagia et
        al. 2024)""", choices=LINKS)
    select: bool = setting(False, """pick the form, path and link by each candidate's error
        predicting the ladder's largest size from the rest; every candidate's error in
        selection.csv""")
    calibrate: bool = setting(True, """intervals widened by the ladder's own held-out
        sizes (calibration.csv; --no-calibrate: the bootstrap's alone)""")
    origins: int = setting(3, """calibration: hold out up to this many of the largest sizes,
        one at a time""")
    loss_label: str = restated(FrontierOptions, "loss_label", "the figure's loss axis")
    figures: bool = restated(FrontierOptions, "figures", """its figure too
        (--no-figures: the tables only)""")
    quiet: bool = restated(FrontierOptions, "quiet", """say nothing of what was left out on
        stderr""")

