"""Child processes that end with their parent.

``reverie bench`` and ``reverie tune`` run a Hydra multirun in a child process, and each cell or trial
runs ``reverie train`` in a child of that. With plain ``subprocess.call``, killing the command a user
started (``kill PID``, a scheduler's SIGTERM) left the multirun and its current cell running as
orphans, still writing into the grid. Here each child asks Linux to send it SIGTERM when its parent
dies (``PR_SET_PDEATHSIG``), so the signal travels down the chain, and each cell saves a checkpoint at the
update it is in and stops (``agents.training.stop_requests``). Elsewhere than Linux this is plain ``subprocess.call``.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys

PR_SET_PDEATHSIG = 1


def _die_with(parent: int):
    def arm() -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != parent:      # the parent died before the request took effect
            os._exit(1)
    return arm


def call(args: list[str], **kwargs) -> int:
    """``subprocess.call(args, **kwargs)``, the child (and through the same call, its own children)
    terminated when this process dies."""
    if sys.platform.startswith("linux"):
        kwargs["preexec_fn"] = _die_with(os.getpid())
    return subprocess.call(args, **kwargs)
