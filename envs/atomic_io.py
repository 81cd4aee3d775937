"""Atomic file writes: a reader sees the old file or the whole new one, never half.

Everything Reverie writes that another run may read (datasets, checkpoints,
manifests, shipped policies) goes through :func:`atomic_path`: the writer fills
a temporary sibling and it is renamed over the target only when the block
exits without an exception; on an exception the temporary file is removed.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import Iterator

_UMASK = os.umask(0)
os.umask(_UMASK)


@contextlib.contextmanager
def atomic_path(target: str | os.PathLike, suffix: str | None = None) -> Iterator[Path]:
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=suffix or ".tmp", dir=target.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        os.chmod(tmp_path, 0o644 & ~_UMASK)  # mkstemp makes 0600; give the usual file mode
        os.replace(tmp_path, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp_path.unlink()
        raise


def write_json(target: str | os.PathLike, obj) -> None:
    with atomic_path(target, suffix=".json") as tmp:
        tmp.write_text(json.dumps(obj, indent=2, sort_keys=False) + "\n")


def write_text(target: str | os.PathLike, text: str) -> None:
    with atomic_path(target) as tmp:
        tmp.write_text(text)
