"""Batches of real transitions for the learners, drawn with an explicit generator."""

from __future__ import annotations

import torch
from torch import Tensor

from envs.dataset import OfflineDataset


class TransitionSampler:
    """The dataset's transitions as tensors, sampled uniformly with replacement.

    ``terminated`` is the true terminal flag only: a time-limit cut (``timeouts``)
    is not a terminal state, so the learner still bootstraps through it."""

    KEYS = ("obs", "actions", "rewards", "next_obs", "terminated")

    def __init__(self, ds: OfflineDataset, device: str | torch.device = "cpu"):
        self.device = torch.device(device)
        self.data = {"obs": torch.from_numpy(ds.observations).float(),
                     "actions": torch.from_numpy(ds.actions).float(),
                     "rewards": torch.from_numpy(ds.rewards).float(),
                     "next_obs": torch.from_numpy(ds.next_observations).float(),
                     "terminated": torch.from_numpy(ds.terminals).bool()}
        self.data = {k: v.to(self.device) for k, v in self.data.items()}
        self.size = len(ds)

    def sample(self, batch: int, generator: torch.Generator) -> dict[str, Tensor]:
        idx = torch.randint(0, self.size, (batch,), generator=generator, device=self.device)
        return {k: v[idx] for k, v in self.data.items()}

    def obs_stats(self) -> tuple[Tensor, Tensor]:
        obs = self.data["obs"]
        return obs.mean(0), obs.std(0).clamp_min(1e-3)


def mix(real: dict[str, Tensor], fake: dict[str, Tensor]) -> dict[str, Tensor]:
    """Concatenate a real and an imagined batch; ``from_model`` marks the imagined rows."""
    out = {k: torch.cat([real[k], fake[k]]) for k in TransitionSampler.KEYS}
    flag = {"dtype": torch.bool, "device": real["rewards"].device}
    out["from_model"] = torch.cat([torch.zeros(len(real["rewards"]), **flag), torch.ones(len(fake["rewards"]), **flag)])
    return out
