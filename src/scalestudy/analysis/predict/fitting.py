"""One group's fit as a prediction makes it: the method (the settings', or
`--select`'s pick by held-out error: select.py), the chain with its bootstrap
(chain.py) and its calibration by the ladder's held-out sizes
(calibration.py). The stage and the holdout (which refits a ladder without its
largest size exactly so) both call `fit_group`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .calibration import Calibration, calibrate
from .chain import Chain, Ladder, Settings, fit_chain
from .select import select


@dataclass
class Fitted:
    """A group's chain, its calibration and, with --select, every candidate's
    held-out error (None without)."""

    chain: Chain
    calibration: Calibration
    selection: pd.DataFrame | None = None


def fit_group(ladder: Ladder, settings: Settings, rng: np.random.Generator) -> Fitted:
    method, selection = settings.method, None
    if settings.select:
        method, selection = select(ladder, settings, rng)
    chain = fit_chain(ladder, method, settings, rng)
    if not chain.law.ok:
        calibration = Calibration("uncalibrated: no loss law")
    elif settings.calibrate:
        calibration = calibrate(ladder, method, settings, rng)
    else:
        calibration = Calibration("uncalibrated (--no-calibrate): the bootstrap's intervals")
    chain.calibration = calibration
    return Fitted(chain, calibration, selection)
