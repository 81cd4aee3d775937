"""MOBILE (Sun et al., 2023): penalise imagined transitions by Bellman inconsistency.

For an imagined pair (s, a), every elite member i proposes K next states
s'_{ik}; its Bellman backup is the mean of ``Q_target(s'_{ik}, pi(s'_{ik}))`` over
its K proposals, and the spread (standard deviation) of those backups across the
members measures how much the members' disagreement matters *to the value*,
rather than to the state. The critic target of imagined rows is

    y = r - beta * std_i[ mean_k min_j Q_target_j(s'_{ik}, a'_{ik}) ] + gamma * (1 - d) * V(s')

as in the paper (its backup operator per model, T^i Q = r + gamma E_{s' ~ T^i}[V(s')])
and the authors' code: the noise within one member averages out, so a model that
is merely noisy where its members agree is not penalised. As in the authors' code,
every critic target is then clamped from below at ``target_floor`` (0: the
locomotion tasks' returns are positive, so a penalty may lower a value to nothing
but not below; ``None`` for tasks whose returns are negative).

As in the authors' training script, the actor's learning rate decays to 0 by a
cosine over the run (``actor_decay_steps``, set to ``train.steps`` in
``configs/agent/mobile.yaml``).

The members are the model's elites, as in the authors' ``predict_next_obs``: a
member that the holdout split ranked below them, and that rollouts never draw, does
not vote (with the grid's 5 elites of 7 this also makes the penalty 1.4x cheaper).

Real rows are not penalised. The penalty needs the current critic, so it is
computed in the update, from the model's predictions (the model predicts; the
learner judges).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from agents.sac import SAC, SACConfig
from envs.errors import ReverieError


@dataclass
class MOBILEConfig(SACConfig):
    penalty_coef: float = 1.0
    num_samples: int = 10     # next-state draws per member
    target_floor: float | None = 0.0   # critic targets clamped from below (the authors' MOBILE); None: no clamp

    def validate(self) -> "MOBILEConfig":
        if self.penalty_coef < 0:
            raise ReverieError(f"agent.penalty_coef: expected a value >= 0, got {self.penalty_coef}")
        if self.num_samples < 1:
            raise ReverieError(f"agent.num_samples: expected a positive integer, got {self.num_samples}")
        return super().validate()


class MOBILE(SAC):
    uses_model = True

    def __init__(self, obs_dim: int, act_dim: int, cfg: MOBILEConfig | None = None, model=None, device="cpu"):
        super().__init__(obs_dim, act_dim, (cfg or MOBILEConfig()).validate(), model, device)

    @torch.no_grad()
    def bellman_inconsistency(self, obs: Tensor, act: Tensor, generator: torch.Generator | None) -> Tensor:
        mean, std = self.model.predict(obs, act)                         # [E, B, obs_dim + 1]
        mean, std = mean[self.model.elites], std[self.model.elites]      # the elites only, as the authors'
        E, B, _ = mean.shape
        K = self.cfg.num_samples
        noise = torch.randn((K, *mean.shape), generator=generator, device=mean.device)
        next_obs = (mean + std * noise)[..., :-1].reshape(K * E * B, -1)  # every member's proposals
        next_act, _ = self.actor(next_obs, generator=generator)
        q = self.critic_target(next_obs, next_act).min(dim=0).values.view(K, E, B)
        return q.mean(dim=0).std(dim=0)          # each member's backup, then their spread across members

    def target_q(self, rewards: Tensor, next_obs: Tensor, dones: Tensor, generator=None) -> Tensor:
        """SAC's target, clamped from below at ``target_floor``."""
        target = super().target_q(rewards, next_obs, dones, generator)
        return target if self.cfg.target_floor is None else target.clamp_min(self.cfg.target_floor)

    def update(self, batch: dict[str, Tensor], generator: torch.Generator | None = None) -> dict[str, float]:
        """SAC's update on rewards lowered, for imagined rows, by the Bellman inconsistency: the
        critic target becomes r - beta * penalty + gamma * (1 - d) * V(s')."""
        fake = batch["from_model"]
        with torch.no_grad():
            penalty = torch.zeros_like(batch["rewards"])
            penalty[fake] = self.bellman_inconsistency(batch["obs"][fake], batch["actions"][fake], generator)
        metrics = super().update({**batch, "rewards": batch["rewards"] - self.cfg.penalty_coef * penalty},
                                 generator)
        return {**metrics, "penalty_mean": penalty[fake].mean().item() if fake.any() else 0.0}
