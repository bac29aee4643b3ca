"""Fault injection: a process SIGKILLs itself at a named point, so that the
tests can prove a study survives a kill in every stage (tests/test_reliability*.py).

$SCALESTUDY_KILL_AT is a comma-separated list of `point` or `point@text`; the
process kills itself on reaching `point` where the place it is at (a path)
contains `text`. The points:

- `data`: task data staged, before its files are moved into place;
- `fit`: halfway through a training or pretraining run (place: its directory;
  `loop.TrainingLoop.after_step`);
- `write`: a Parquet file (run record, runs.parquet, fits.parquet) written to
  its temporary name, before the rename that makes it whole (place: the path).

Unset (always, outside the tests) it costs one environment lookup.
"""

from __future__ import annotations

import os
import signal

ENV = "SCALESTUDY_KILL_AT"
POINTS = ("data", "fit", "write")


def kill_point(point: str, place: object = "") -> None:
    """SIGKILL this process if $SCALESTUDY_KILL_AT names `point` at `place`."""
    wanted = os.environ.get(ENV)
    if not wanted:
        return
    for item in wanted.split(","):
        name, _, text = item.strip().partition("@")
        if name == point and text in str(place):
            os.kill(os.getpid(), signal.SIGKILL)
