"""The one error type that Reverie reports to a user as a single line.

Anything raised as :class:`ReverieError` is a problem with the user's input
(a path, a field, an option); the CLI prints its message on one line and
exits with status 2. Anything else is a bug and keeps its traceback.
"""

from __future__ import annotations


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
