"""SimulatorBatch: batched steps, flags kept apart, and resets to dataset states."""

import numpy as np
import pytest
import torch

from agents.networks import TanhActor
from envs.builtin import collect
from envs.simulator import SimulatorBatch
from envs.tasks import get_task


@pytest.mark.parametrize("name", ["hopper", "halfcheetah"])
def test_reset_to_dataset_states_reproduces_transitions(name):
    task = get_task(name)
    torch.manual_seed(0)
    ds = collect(task, TanhActor(task.obs_dim, task.act_dim, (32, 32)), 400, 0.3, seed=5, num_envs=2)
    rows = np.arange(0, 400, 37)
    sim = SimulatorBatch(task, len(rows))
    obs = sim.reset_to(ds.qpos[rows], ds.qvel[rows])
    assert np.array_equal(obs, ds.observations[rows])          # the state is the observation's state
    next_obs, rew, term, _ = sim.step(ds.actions[rows])
    # qpos/qvel are not MuJoCo's whole state (warm-start accelerations are not kept), so
    # one step from a restored state matches closely rather than bit for bit.
    np.testing.assert_allclose(next_obs, ds.next_observations[rows], atol=1e-4)
    np.testing.assert_allclose(rew, ds.rewards[rows], atol=1e-4)
    assert np.array_equal(term, ds.terminals[rows])


def test_time_limit_is_a_truncation_not_a_termination():
    sim = SimulatorBatch("halfcheetah", 3, max_episode_steps=5)
    sim.reset([0, 1, 2])
    for t in range(5):
        _, _, term, trunc = sim.step(np.zeros((3, 6), np.float32))
    assert not term.any() and trunc.all()


def test_shapes_are_checked():
    sim = SimulatorBatch("hopper", 2)
    sim.reset(0)
    with pytest.raises(ValueError, match=r"expected actions \[2, 3\]"):
        sim.step(np.zeros((2, 6)))
    with pytest.raises(ValueError, match="reset_to"):
        sim.reset_to(np.zeros((2, 5)), np.zeros((2, 6)))
