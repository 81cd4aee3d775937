"""Episodes stored row by row, and windows of consecutive steps cut from them.

A history-dependent learner trains on windows of one episode's consecutive
steps, not on shuffled transitions. ``SequenceBuffer`` keeps each episode's
rows contiguous (a FIFO ring), with every row's episode id and its step within
the episode. ``windows`` cuts, for each anchor row, the steps from up to
``burn_in`` steps before it (only to set the recurrent state) to ``length``
steps after; a window never crosses into another episode, and where an
episode ends early the rest of the window is masked, never filled with
another episode's rows.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

FLOAT_KEYS = ("obs", "actions", "rewards", "next_obs")


class SequenceBuffer:
    def __init__(self, obs_dim: int, act_dim: int, capacity: int, device: str | torch.device = "cpu"):
        self.capacity, self.size, self.ptr, self.next_episode = capacity, 0, 0, 0
        self.device = torch.device(device)
        d = {"device": self.device}
        self.data = {"obs": torch.zeros(capacity, obs_dim, **d), "actions": torch.zeros(capacity, act_dim, **d),
                     "rewards": torch.zeros(capacity, **d), "next_obs": torch.zeros(capacity, obs_dim, **d),
                     "terminated": torch.zeros(capacity, dtype=torch.bool, **d),
                     "episode": torch.full((capacity,), -1, dtype=torch.long, **d),
                     "step": torch.zeros(capacity, dtype=torch.long, **d)}

    @classmethod
    def from_dataset(cls, ds, device: str | torch.device = "cpu") -> "SequenceBuffer":
        """The dataset itself, episode by episode (it is already stored that way)."""
        n = len(ds)
        buf = cls(ds.obs_dim, ds.act_dim, n, device)
        starts = ds.episode_starts()
        episode = np.zeros(n, dtype=np.int64)
        episode[starts[1:]] = 1
        episode = np.cumsum(episode)
        step = np.arange(n) - starts[episode]
        rows = {"obs": ds.observations, "actions": ds.actions, "rewards": ds.rewards,
                "next_obs": ds.next_observations, "terminated": ds.terminals, "episode": episode, "step": step}
        for k, v in rows.items():
            buf.data[k].copy_(torch.from_numpy(np.ascontiguousarray(v)))
        buf.size, buf.ptr, buf.next_episode = n, 0, int(episode[-1]) + 1
        return buf

    def add_episodes(self, rows: dict[str, Tensor], episode_of_row: Tensor) -> None:
        """Append rows grouped by episode (each episode's rows contiguous and in order);
        ``episode_of_row`` numbers them 0..k-1 and they get fresh ids here."""
        n = len(episode_of_row)
        if n == 0:
            return
        if n > self.capacity:
            raise ValueError(f"SequenceBuffer.add_episodes: {n} rows exceed the capacity {self.capacity}")
        first = torch.ones(n, dtype=torch.bool, device=self.device)
        first[1:] = episode_of_row[1:] != episode_of_row[:-1]
        starts = torch.nonzero(first).squeeze(1)
        run = torch.cumsum(first.long(), 0) - 1
        step = torch.arange(n, device=self.device) - starts[run]
        idx = (self.ptr + torch.arange(n, device=self.device)) % self.capacity
        for k in (*FLOAT_KEYS, "terminated"):
            self.data[k][idx] = rows[k]
        self.data["episode"][idx] = self.next_episode + episode_of_row
        self.data["step"][idx] = step
        self.next_episode += int(episode_of_row.max()) + 1
        self.ptr = (self.ptr + n) % self.capacity
        self.size = min(self.size + n, self.capacity)

    def anchors(self, n: int, generator: torch.Generator) -> Tensor:
        if self.size == 0:
            raise ValueError("SequenceBuffer: the buffer is empty")
        return torch.randint(0, self.size, (n,), generator=generator, device=self.device)

    def windows(self, anchor: Tensor, length: int, burn_in: int) -> dict[str, Tensor]:
        """``[T, n, ...]`` windows, ``T = burn_in + length``, left-aligned at ``anchor - o`` with
        ``o = min(burn_in, step[anchor])``. ``valid`` marks rows of the anchor's episode (a
        prefix); ``train`` marks the ``length`` steps from the anchor on; ``prev_actions`` and
        ``prev_rewards`` are those before the window's first row (zeros at an episode start)."""
        ep, step = self.data["episode"], self.data["step"]
        offset = torch.minimum(step[anchor], torch.full_like(anchor, burn_in))
        start = anchor - offset
        T = burn_in + length
        pos = torch.arange(T, device=self.device)[:, None]
        idx = (start[None, :] + pos) % self.capacity                          # [T, n]
        same = (ep[idx] == ep[anchor][None, :]) & (step[idx] == step[start][None, :] + pos)
        valid = torch.cumprod(same.long(), 0).bool()                           # a prefix, never a gap
        train = valid & (pos >= offset[None, :]) & (pos < offset[None, :] + length)
        out = {k: self.data[k][idx] for k in (*FLOAT_KEYS, "terminated")}
        before = (start - 1) % self.capacity
        has_prev = (step[start] > 0) & (ep[before] == ep[start])
        out["prev_actions"] = self.data["actions"][before] * has_prev[:, None]
        out["prev_rewards"] = self.data["rewards"][before] * has_prev
        out.update(valid=valid, train=train, offset=offset)
        return out

    def state_dict(self) -> dict:
        return {"data": {k: v[:self.size] for k, v in self.data.items()}, "ptr": self.ptr, "size": self.size,
                "next_episode": self.next_episode}

    def load_state_dict(self, state: dict) -> None:
        self.size, self.ptr, self.next_episode = int(state["size"]), int(state["ptr"]), int(state["next_episode"])
        for k, v in self.data.items():
            v[:self.size] = state["data"][k]


def concat_windows(a: dict[str, Tensor], b: dict[str, Tensor]) -> dict[str, Tensor]:
    """Two sets of windows side by side (the batch dimension is 1 for ``[T, n]`` tensors, 0 for ``[n]``)."""
    return {k: torch.cat([a[k], b[k]], dim=0 if a[k].ndim == 1 or k.startswith("prev_") else 1) for k in a}
