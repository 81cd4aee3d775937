"""The one error type that Reverie reports to a user as a single line.

Anything raised as :class:`ReverieError` is a problem with the user's input
(a path, a field, an option); the CLI prints its message on one line and
exits with status 2. Anything else is a bug and keeps its traceback.
:class:`Stopped` is neither: a run asked by a signal to stop, which did.
"""

from __future__ import annotations

import signal
from pathlib import Path


class ReverieError(Exception):
    """Bad input: a missing file, a wrong field, an unknown option."""


class DatasetError(ReverieError):
    """A dataset that cannot be read, or that fails validation.

    The message names the file (when there is one), the field and what was
    expected, e.g. ``data.hdf5: field 'rewards': expected shape (1000,), got (999,)``.
    """

    def __init__(self, message: str, *, source: str | None = None, field: str | None = None):
        parts = []
        if source:
            parts.append(str(source))
        if field:
            parts.append(f"field '{field}'")
        prefix = ": ".join(parts)
        super().__init__(f"{prefix}: {message}" if prefix else message)
        self.source = source
        self.field = field


class Stopped(Exception):
    """A run asked to stop by a signal (SIGTERM, Ctrl-C) ended at ``step``, its checkpoint (if it keeps one)
    saved there. The CLI prints this one line and exits with 128 + the signal's number, as the shell would."""

    def __init__(self, signum: int, step: int, checkpoint: Path | None):
        self.signum, self.step, self.checkpoint = signum, step, checkpoint
        saved = (f"checkpoint saved to {checkpoint}; run the same command to resume" if checkpoint is not None
                 else "no checkpoint kept")
        super().__init__(f"stopped by {signal.Signals(signum).name} after update {step:,}: {saved}")
