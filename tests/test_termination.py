"""The torch termination functions must agree with the simulator on real data."""

import numpy as np
import pytest
import torch

from agents.networks import TanhActor
from envs.builtin import collect
from envs.tasks import get_task


@pytest.mark.parametrize("name,size,noise", [("hopper", 6000, 0.8), ("walker2d", 6000, 0.8),
                                             ("halfcheetah", 3000, 0.5), ("ant", 3000, 0.8)])
def test_termination_agrees_with_simulator_on_every_transition(name, size, noise):
    task = get_task(name)
    torch.manual_seed(0)
    ds = collect(task, TanhActor(task.obs_dim, task.act_dim, (32, 32)), size, noise, seed=1, num_envs=8)
    predicted = task.terminated(torch.from_numpy(ds.next_observations)).numpy()
    assert predicted.shape == ds.terminals.shape
    mismatches = np.flatnonzero(predicted != ds.terminals)
    assert len(mismatches) == 0, f"{name}: {len(mismatches)} disagreements, first at row {mismatches[:5]}"
    if name in ("hopper", "walker2d"):  # the data must exercise both outcomes
        assert ds.terminals.any() and (~ds.terminals).any()


def test_termination_checks_its_input_shape():
    with pytest.raises(ValueError, match=r"\[B, 11\]"):
        get_task("hopper").terminated(torch.zeros(4, 17))
