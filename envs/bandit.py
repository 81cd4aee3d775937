"""A two-armed bandit with low-quality offline data: the good arm is seldom tried.

Each episode is ``horizon`` pulls; the observation is the elapsed fraction
``t / horizon``; the action is one number in [-1, 1] whose sign picks the arm
(negative: arm 0, the behaviour's favourite; non-negative: arm 1). Rewards are
Gaussian around each arm's mean. The behaviour policy pulls arm 1 only with
probability ``good_arm_share``, so the data pin arm 0 down and leave arm 1
uncertain: the setting in which conservatism and Bayesian reasoning part ways.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from envs.dataset import OfflineDataset


@dataclass(frozen=True)
class BanditSpec:
    means: tuple[float, float] = (0.5, 0.9)   # arm 0 (well covered), arm 1 (better, seldom tried)
    noise: float = 0.3
    horizon: int = 10

    def terminated(self, obs: torch.Tensor) -> torch.Tensor:
        """The episode ends after ``horizon`` pulls (the observation reaches 1)."""
        return obs[:, 0] > 1.0 - 0.5 / self.horizon


def arms(actions: np.ndarray) -> np.ndarray:
    return (np.asarray(actions)[..., 0] >= 0).astype(int)


def bandit_dataset(spec: BanditSpec, episodes: int = 200, good_arm_share: float = 0.005,
                   seed: int = 0) -> OfflineDataset:
    rng = np.random.default_rng(seed)
    n, H = episodes * spec.horizon, spec.horizon
    t = np.tile(np.arange(H), episodes)
    arm = (rng.random(n) < good_arm_share).astype(int)
    act = np.clip(np.where(arm == 1, 0.8, -0.8) + 0.1 * rng.standard_normal(n), -1, 1)
    rew = np.asarray(spec.means)[arm] + spec.noise * rng.standard_normal(n)
    return OfflineDataset.from_arrays({
        "observations": (t / H)[:, None].astype(np.float32), "actions": act[:, None].astype(np.float32),
        "rewards": rew.astype(np.float32), "next_observations": ((t + 1) / H)[:, None].astype(np.float32),
        "terminals": t == H - 1, "timeouts": np.zeros(n, bool)}, name="bandit-two-arm")


@torch.no_grad()
def play(policy, spec: BanditSpec, episodes: int = 200, seed: int = 0) -> dict[str, float]:
    """Run a (possibly history-dependent) policy deterministically in the true bandit."""
    rng = np.random.default_rng(seed)
    state = policy.initial_state(episodes)
    first = torch.ones(episodes, dtype=torch.bool)
    prev_reward = torch.zeros(episodes)
    total, good = 0.0, 0
    for t in range(spec.horizon):
        obs = torch.full((episodes, 1), t / spec.horizon)
        state, act = policy.act(state, obs, first, deterministic=True, prev_reward=prev_reward)
        arm = arms(act.numpy())
        rew = np.asarray(spec.means)[arm] + spec.noise * rng.standard_normal(episodes)
        total, good = total + rew.sum(), good + arm.sum()
        first, prev_reward = torch.zeros_like(first), torch.from_numpy(rew).float()
    pulls = episodes * spec.horizon
    return {"reward_per_pull": total / pulls, "good_arm_share": good / pulls}
