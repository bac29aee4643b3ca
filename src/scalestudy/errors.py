"""What a `scalestudy` command's exit status says, declared once.

- 0: it produced what it was asked for (a fit, a prediction, a verdict,
  figures), possibly with parts marked as not determined;
- 2 (`BAD_INPUT`): a bad input or option, an output path it refused, or a
  write that failed (a full disk): one line naming the file or the option and
  what is accepted; nothing was written;
- 3 (`NO_RESULT`): the input is valid but gives nothing to fit, predict or
  decide (every run failed, one size where a law needs three): one line
  saying why; nothing was written.

An exit status of 1 with a traceback is a bug of scalestudy's. Torch-free.
"""

from __future__ import annotations

OK = 0
BAD_INPUT = 2
NO_RESULT = 3


class NoResult(Exception):
    """Valid input that gives nothing to fit, predict or decide (exit 3)."""
