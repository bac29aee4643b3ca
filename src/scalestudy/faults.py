"""Fault injection: a process SIGKILLs itself at a named point, so that the
tests can prove a study survives a kill in every stage (tests/test_reliability*.py),
or fails there as on a full disk, so that they can see what a user is shown.

$SCALESTUDY_KILL_AT is a comma-separated list of `point` or `point@text`; the
process kills itself on reaching `point` where the place it is at (a path)
contains `text`. $SCALESTUDY_FAIL_AT, the same list, raises OSError ENOSPC
("No space left on device") there instead. The points:

- `data`: task data staged, before its files are moved into place;
- `fit`: halfway through a training or pretraining run (place: its directory;
  `loop.TrainingLoop.after_step`);
- `write`: a Parquet file (run record, runs.parquet, fits.parquet) written to
  its temporary name, before the rename that makes it whole (place: the path).

Unset (always, outside the tests) it costs one environment lookup.
"""

from __future__ import annotations

import errno
import os
import signal

ENV = "SCALESTUDY_KILL_AT"
FAIL_ENV = "SCALESTUDY_FAIL_AT"
POINTS = ("data", "fit", "write")


def _names(wanted: str | None, point: str, place: object) -> bool:
    """Whether the list `wanted` names `point` at `place`."""
    for item in (wanted or "").split(","):
        name, _, text = item.strip().partition("@")
        if name == point and text in str(place):
            return True
    return False


def kill_point(point: str, place: object = "") -> None:
    """SIGKILL this process if $SCALESTUDY_KILL_AT names `point` at `place`;
    raise a full disk's OSError if $SCALESTUDY_FAIL_AT does."""
    if _names(os.environ.get(ENV), point, place):
        os.kill(os.getpid(), signal.SIGKILL)
    if _names(os.environ.get(FAIL_ENV), point, place):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(place))
