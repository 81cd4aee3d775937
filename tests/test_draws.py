"""The bench's draw scripts (assets/reports/bench/draws/) act and score a cell's policy as its training and
evaluation do: a history-dependent agent carries its history from step to step, and its critics read that
history the way its update reads a window."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from agents.neubay import NEUBAY, NEUBAYConfig
from agents.sac import SAC, SACConfig
from agents.training import acting_policy, run_episodes
from envs.tasks import get_task

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "assets" / "reports" / "bench" / "draws"))
from cells import acting, record_episodes  # noqa: E402
from value_bias import critic_values, discounted_returns  # noqa: E402

HOPPER = get_task("hopper")


def small_neubay(seed: int = 0) -> NEUBAY:
    torch.manual_seed(seed)
    return NEUBAY(HOPPER.obs_dim, HOPPER.act_dim, NEUBAYConfig(hidden=(32,), rnn_hidden=16, critics=3))


@pytest.mark.parametrize("make", [small_neubay, lambda: SAC(HOPPER.obs_dim, HOPPER.act_dim, SACConfig(hidden=(32,)))],
                         ids=["neubay", "sac"])
def test_acting_drives_a_policy_as_the_evaluation_does(make):
    learner = make()
    ep = record_episodes(learner, HOPPER, 3, seed=10_000)
    np.testing.assert_allclose(ep["rewards"].sum(0), run_episodes("hopper", acting_policy(learner), 3, seed=10_000),
                               rtol=1e-6)
    lengths = ep["running"].sum(0)
    assert (ep["terminated"] == (lengths < HOPPER.max_episode_steps)).all()    # a short episode is a fall here
    assert (ep["rewards"][~ep["running"]] == 0).all()                  # nothing counted past an episode's end


def test_acting_carries_neubays_history_rather_than_starting_it_afresh_each_step():
    learner = small_neubay()
    with torch.no_grad():                       # a GRU that reads its input strongly, so the history matters
        for p in learner.actor_encoder.parameters():
            p.mul_(20.0)
    obs = torch.randn(4, HOPPER.obs_dim)
    policy = acting(learner, 4)
    first = policy(obs)
    policy.observe(torch.ones(4))
    assert not torch.allclose(policy(obs), first, atol=1e-4)          # same observation, longer history
    torch.testing.assert_close(learner.act(obs), first)                # the first step is the history-free one


def test_neubays_critics_read_an_episode_as_its_update_reads_a_window():
    learner = small_neubay(1)
    ep = record_episodes(learner, HOPPER, 2, seed=10_000)
    T, n = ep["rewards"].shape
    obs, act, rew = ep["obs"], ep["actions"], torch.from_numpy(ep["rewards"]).float()
    window = {"obs": obs, "next_obs": torch.cat([obs[1:], obs[-1:]]), "actions": act, "rewards": rew,
              "prev_actions": torch.zeros(n, HOPPER.act_dim), "prev_rewards": torch.zeros(n)}
    with torch.no_grad():
        h = learner.critic_encoder(learner.inputs(window))[0][:-1]       # the update's reading, step t's before a_t
        expected = learner.q(learner.critic, h.flatten(0, 1), obs.flatten(0, 1), act.flatten(0, 1)).reshape(-1, T, n)
        torch.testing.assert_close(critic_values(learner, obs, act, rew), expected)


def test_discounted_returns_sum_each_episodes_rewards_from_each_step_on():
    rewards = np.array([[1.0, 2.0], [1.0, 0.0], [1.0, 0.0]])        # the second episode ended after its first step
    np.testing.assert_allclose(discounted_returns(rewards, 0.5), [[1.75, 2.0], [1.5, 0.0], [1.0, 0.0]])
