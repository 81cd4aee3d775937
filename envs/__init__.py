"""Simulator tasks, termination functions, reference scores and offline datasets."""

import os as _os

# MuJoCo renders offscreen through EGL on the CPU here; the backend is chosen when mujoco is first
# imported, so it is set before any module of this package imports it (a caller's choice wins).
_os.environ.setdefault("MUJOCO_GL", "egl")
