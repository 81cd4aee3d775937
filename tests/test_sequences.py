"""Episodes as sequences: windows that never cross episodes, and NEUBAY's warm start from a real history."""

from __future__ import annotations

import numpy as np
import torch

from agents.neubay import NEUBAY, NEUBAYConfig
from agents.sequences import SequenceBuffer, concat_windows
from envs.dataset import OfflineDataset


def episodes(lengths=(5, 3, 6), obs_dim=2, act_dim=1) -> OfflineDataset:
    """Rows numbered in order: obs[i] = (i, i), action = i / 100, reward = i."""
    n = sum(lengths)
    i = np.arange(n, dtype=np.float32)
    ends = np.cumsum(lengths) - 1
    timeouts = np.zeros(n, bool)
    timeouts[ends] = True
    return OfflineDataset.from_arrays({
        "observations": np.stack([i] * obs_dim, 1), "actions": (i / 100)[:, None].repeat(act_dim, 1),
        "rewards": i, "next_observations": np.stack([i + 1] * obs_dim, 1), "terminals": np.zeros(n, bool),
        "timeouts": timeouts}, name="toy")


def test_windows_stay_in_their_episode_and_mark_what_is_trained():
    buf = SequenceBuffer.from_dataset(episodes())
    assert buf.data["episode"].tolist() == [0] * 5 + [1] * 3 + [2] * 6
    assert buf.data["step"].tolist() == [0, 1, 2, 3, 4, 0, 1, 2, 0, 1, 2, 3, 4, 5]
    w = buf.windows(torch.tensor([3, 5, 12]), length=3, burn_in=2)
    # anchor 3: burn-in rows 1, 2, trained rows 3, 4 (the episode ends), then masked
    assert w["obs"][:, 0, 0].tolist()[:4] == [1.0, 2.0, 3.0, 4.0]
    assert w["valid"][:, 0].tolist() == [True, True, True, True, False]
    assert w["train"][:, 0].tolist() == [False, False, True, True, False]
    assert w["prev_rewards"][0] == 0.0 and w["prev_actions"][0, 0] == 0.0    # row 0 came before row 1
    # anchor 5 starts its episode: no burn-in, three trained rows, never row 4 of the previous episode
    assert w["obs"][:3, 1, 0].tolist() == [5.0, 6.0, 7.0] and w["offset"][1] == 0
    assert w["train"][:, 1].tolist() == [True, True, True, False, False]
    assert w["prev_rewards"][1] == 0.0
    # anchor 12: burn-in rows 10, 11; trained rows 12, 13; prev of row 10 is row 9
    assert w["train"][:, 2].sum() == 2 and w["prev_rewards"][2] == 9.0
    both = concat_windows(w, w)
    assert both["obs"].shape == (5, 6, 2) and both["offset"].shape == (6,) and both["prev_actions"].shape == (6, 1)


def test_added_episodes_get_fresh_ids_and_the_ring_never_joins_two():
    buf = SequenceBuffer(2, 1, capacity=8)
    rows = lambda n, base: {"obs": torch.full((n, 2), float(base)), "actions": torch.zeros(n, 1),  # noqa: E731
                            "rewards": torch.arange(base, base + n).float(), "next_obs": torch.zeros(n, 2),
                            "terminated": torch.zeros(n, dtype=torch.bool)}
    buf.add_episodes(rows(5, 0), torch.tensor([0, 0, 0, 1, 1]))
    buf.add_episodes(rows(5, 100), torch.tensor([0, 0, 0, 0, 0]))         # wraps and overwrites rows 0, 1
    assert buf.size == 8 and buf.next_episode == 3
    assert buf.data["episode"].tolist() == [2, 2, 0, 1, 1, 2, 2, 2]
    w = buf.windows(torch.tensor([2]), length=4, burn_in=0)             # what is left of episode 0: one row
    assert w["valid"][:, 0].tolist() == [True, False, False, False]
    w = buf.windows(torch.tensor([1]), length=2, burn_in=4)             # episode 2 runs 5, 6, 7, 0, 1
    assert w["rewards"][:5, 0].tolist() == [100.0, 101.0, 102.0, 103.0, 104.0]
    assert w["valid"][:, 0].tolist() == [True] * 5 + [False] and w["train"][:, 0].sum() == 1


def test_warm_start_equals_reading_the_history_step_by_step():
    ds = episodes()
    torch.manual_seed(0)
    agent = NEUBAY(2, 1, NEUBAYConfig(hidden=(16,), rnn_hidden=8, critics=2, warmup=3))
    real = SequenceBuffer.from_dataset(ds)
    anchor = torch.tensor([4, 5, 12])
    warm = agent.warm_up(real, anchor)
    for col, j in enumerate(anchor.tolist()):
        start = j - min(3, int(real.data["step"][j]))
        policy, h = agent.policy(), torch.zeros(1, 8)
        state = policy.initial_state(1)
        state["h"] = h
        if start > 0 and real.data["episode"][start - 1] == real.data["episode"][j]:
            state["prev_actions"] = real.data["actions"][start - 1:start]
            state["first_reward"] = real.data["rewards"][start - 1:start]
        for i in range(start, j):                # the agent reads the real history, acting as the data did
            state, _ = policy.act(state, real.data["obs"][i:i + 1], torch.tensor([i == start]),
                                  deterministic=True, prev_reward=real.data["rewards"][i - 1:i] if i > start else None)
            state["prev_actions"] = real.data["actions"][i:i + 1]
        torch.testing.assert_close(warm["h"][col], state["h"][0], rtol=1e-5, atol=1e-5)
        expected_prev = real.data["rewards"][j - 1] if real.data["step"][j] > 0 else torch.tensor(0.0)
        assert warm["prev_rewards"][col] == expected_prev
