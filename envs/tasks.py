"""The simulator tasks Reverie knows: construction, termination, reference scores.

A :class:`Task` is a small, immutable description. Sizes (obs dim, action dim,
qpos/qvel dims) are facts of the gymnasium v5 environment and are checked
against it by the tests, not written into configs.
"""

from __future__ import annotations

import contextlib
import warnings
from dataclasses import dataclass
from typing import Callable

import gymnasium as gym
import mujoco
import numpy as np
from torch import Tensor

from envs import termination
from envs.errors import ReverieError


# MuJoCo 4 warns about this attribute of gymnasium's half_cheetah.xml each time the
# model compiles; its default handler prints it and appends it to MUJOCO_LOG.TXT in
# the working directory. It is harmless, so it is dropped; other warnings are kept.
_KNOWN_MUJOCO_NOISE = ("compiler attribute 'settotalmass' is deprecated",)


def _forward_mujoco_warning(message: str) -> None:
    if not any(noise in message for noise in _KNOWN_MUJOCO_NOISE):
        warnings.warn(f"MuJoCo: {message}", RuntimeWarning, stacklevel=2)


@contextlib.contextmanager
def _quiet_known_mujoco_warnings():
    previous = mujoco.get_mju_user_warning()
    mujoco.set_mju_user_warning(_forward_mujoco_warning)
    try:
        yield
    finally:
        mujoco.set_mju_user_warning(previous)


@dataclass(frozen=True)
class Task:
    name: str
    gym_id: str
    obs_dim: int
    act_dim: int
    nq: int
    nv: int
    max_episode_steps: int
    terminated: Callable[[Tensor], Tensor]
    # D4RL reference returns (d4rl/infos.py): normalized = (R - min) / (max - min)
    d4rl_min: float
    d4rl_max: float
    # NeoRL reference returns (random / expert); None where NeoRL has no such task.
    neorl_min: float | None = None
    neorl_max: float | None = None
    # D4RL dataset sizes, used as the default size of built-in datasets.
    d4rl_sizes: tuple[tuple[str, int], ...] = ()
    # How many leading observation entries are joint positions (qpos without the root's x, or x and y).
    obs_positions: int = 0

    def make_env(self, **kwargs) -> gym.Env:
        """A gymnasium environment for this task (v5, TimeLimit included)."""
        with _quiet_known_mujoco_warnings():
            return gym.make(self.gym_id, **kwargs)

    def default_size(self, level: str) -> int:
        return dict(self.d4rl_sizes)[level]


_D4RL_SIZES = {
    "hopper": (("random", 1_000_000), ("medium", 1_000_000), ("medium-replay", 402_000),
               ("expert", 1_000_000), ("medium-expert", 2_000_000)),
    "halfcheetah": (("random", 1_000_000), ("medium", 1_000_000), ("medium-replay", 202_000),
                    ("expert", 1_000_000), ("medium-expert", 2_000_000)),
    "walker2d": (("random", 1_000_000), ("medium", 1_000_000), ("medium-replay", 302_000),
                 ("expert", 1_000_000), ("medium-expert", 2_000_000)),
    "ant": (("random", 1_000_000), ("medium", 1_000_000), ("medium-replay", 302_000),
            ("expert", 1_000_000), ("medium-expert", 2_000_000)),
}

TASKS: dict[str, Task] = {
    t.name: t
    for t in [
        Task("hopper", "Hopper-v5", 11, 3, 6, 6, 1000, termination.hopper_terminated,
             -20.272305, 3234.3, 5.0, 3294.0, _D4RL_SIZES["hopper"], obs_positions=5),
        Task("halfcheetah", "HalfCheetah-v5", 17, 6, 9, 9, 1000, termination.halfcheetah_terminated,
             -280.178953, 12135.0, -298.0, 12284.0, _D4RL_SIZES["halfcheetah"], obs_positions=8),
        Task("walker2d", "Walker2d-v5", 17, 6, 9, 9, 1000, termination.walker2d_terminated,
             1.629008, 4592.3, 1.0, 5143.0, _D4RL_SIZES["walker2d"], obs_positions=8),
        Task("ant", "Ant-v5", 105, 8, 15, 14, 1000, termination.ant_terminated,
             -325.6, 3879.7, None, None, _D4RL_SIZES["ant"], obs_positions=13),
    ]
}

LEVELS = ("random", "medium", "medium-replay", "expert", "medium-expert")


def get_task(name: str) -> Task:
    """The task called ``name`` (``hopper``, ``halfcheetah``, ``walker2d``, ``ant``)."""
    key = str(name).lower()
    if key not in TASKS:
        raise ReverieError(f"unknown task '{name}': expected one of {', '.join(TASKS)}")
    return TASKS[key]


def task_from_name(name: str) -> Task | None:
    """The task a dataset or env name refers to (``hopper-medium-v2``, ``Hopper-v5``,
    ``mujoco/hopper/expert-v0``, ``Hopper-v3-low``), or None."""
    lowered = str(name).lower().replace("_", "-")
    for part in lowered.replace("/", "-").split("-"):
        if part in TASKS:
            return TASKS[part]
    return None


def normalized_score(task: str | Task, returns, reference: str = "d4rl") -> np.ndarray | float:
    """100 * (R - random) / (expert - random) with D4RL's (default) or NeoRL's references.

    Accepts a scalar or an array of returns and answers in kind.
    """
    t = task if isinstance(task, Task) else get_task(task)
    if reference == "d4rl":
        lo, hi = t.d4rl_min, t.d4rl_max
    elif reference == "neorl":
        if t.neorl_min is None or t.neorl_max is None:
            raise ReverieError(f"task '{t.name}' has no NeoRL reference scores")
        lo, hi = t.neorl_min, t.neorl_max
    else:
        raise ReverieError(f"unknown reference '{reference}': expected 'd4rl' or 'neorl'")
    score = 100.0 * (np.asarray(returns, dtype=np.float64) - lo) / (hi - lo)
    return float(score) if score.ndim == 0 else score
