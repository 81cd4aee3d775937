"""The bandit that shows why NEUBAY: conservatism keeps the well-covered bad arm, the posterior finds the good one."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from envs.bandit import BanditSpec, arms, bandit_dataset, play


class Fixed:
    def __init__(self, action: float):
        self.action = action

    def initial_state(self, n):
        return None

    def act(self, state, obs, first, *, deterministic, generator=None, prev_reward=None):
        return state, torch.full((len(obs), 1), self.action)


def test_the_data_seldom_try_the_good_arm_and_play_scores_each_arm():
    spec = BanditSpec()
    ds = bandit_dataset(spec, episodes=200, seed=0)
    assert len(ds) == 2000 and ds.terminals.sum() == 200 and len(ds.episode_returns()) == 200
    assert 0 < arms(ds.actions).mean() < 0.02
    assert spec.terminated(torch.tensor([[0.9], [0.96], [1.0]])).tolist() == [False, True, True]
    bad, good = play(Fixed(-0.5), spec, episodes=400), play(Fixed(0.5), spec, episodes=400)
    assert bad["good_arm_share"] == 0.0 and good["good_arm_share"] == 1.0
    assert abs(bad["reward_per_pull"] - 0.5) < 0.03 and abs(good["reward_per_pull"] - 0.9) < 0.03


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_conservative_stays_bayesian_finds_the_good_arm(seed):
    from eval.bandit_example import run_seed

    result = run_seed(seed, steps=2000)
    mopo, neubay = result["MOPO (conservative)"], result["NEUBAY (Bayesian)"]
    assert mopo["good_arm_share"] < 0.1, mopo
    assert neubay["good_arm_share"] > 0.9, neubay
    assert neubay["reward_per_pull"] > mopo["reward_per_pull"] + 0.25
    assert np.isfinite([mopo["reward_per_pull"], neubay["reward_per_pull"]]).all()
