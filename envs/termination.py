"""Batched termination functions in torch, one per task.

Each takes next observations ``[B, obs_dim]`` (as the simulator returns them,
current x/y positions excluded) and returns a ``[B]`` bool tensor that is True
where gymnasium's v5 task reports ``terminated``. World-model rollouts use them
so that imagined episodes stop where real ones would.

One known, documented gap: Hopper also terminates when a raw joint velocity
leaves (-100, 100), but the observation clips velocities to [-10, 10], so that
case cannot be seen from an observation. It does not occur in any dataset we
collected (tests check agreement on every transition).
"""

from __future__ import annotations

import torch
from torch import Tensor


def _check(next_obs: Tensor, dim: int, task: str) -> None:
    if next_obs.ndim != 2 or next_obs.shape[1] != dim:
        raise ValueError(f"{task} termination: expected next_obs of shape [B, {dim}], got {tuple(next_obs.shape)}")


def hopper_terminated(next_obs: Tensor) -> Tensor:
    # obs = [qpos[1:] (z, angle, 3 joints), clip(qvel, -10, 10) (6)]
    _check(next_obs, 11, "hopper")
    z, angle = next_obs[:, 0], next_obs[:, 1]
    state = next_obs[:, 1:]
    healthy = (state > -100.0).all(dim=1) & (state < 100.0).all(dim=1)
    healthy &= z > 0.7
    healthy &= (angle > -0.2) & (angle < 0.2)
    return ~healthy


def walker2d_terminated(next_obs: Tensor) -> Tensor:
    # obs = [qpos[1:] (z, angle, 6 joints), clip(qvel, -10, 10) (9)]
    _check(next_obs, 17, "walker2d")
    z, angle = next_obs[:, 0], next_obs[:, 1]
    healthy = (z > 0.8) & (z < 2.0) & (angle > -1.0) & (angle < 1.0)
    return ~healthy


def halfcheetah_terminated(next_obs: Tensor) -> Tensor:
    _check(next_obs, 17, "halfcheetah")
    return torch.zeros(next_obs.shape[0], dtype=torch.bool, device=next_obs.device)


def ant_terminated(next_obs: Tensor) -> Tensor:
    # obs = [qpos[2:] (z first), qvel, cfrc_ext]; the simulator checks the full
    # state for finiteness and 0.2 <= z <= 1.0 (closed interval).
    _check(next_obs, 105, "ant")
    z = next_obs[:, 0]
    healthy = torch.isfinite(next_obs[:, :27]).all(dim=1) & (z >= 0.2) & (z <= 1.0)
    return ~healthy
