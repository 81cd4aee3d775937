"""IQL (Kostrikov, Nair and Levine, 2022): implicit Q-learning, a model-free reference.

Never queries an action outside the dataset: V is an expectile of Q over the
data's actions, Q regresses on ``r + gamma * V(s')``, and the policy is
extracted by advantage-weighted regression, ``exp(beta * (Q - V))`` clipped at
100. Rewards are scaled by ``1000 / (max episode return - min episode return)``
as the paper does on locomotion (the trainer passes the scale, measured on the
dataset).
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from agents.networks import FusedAdam, backprop, mlp
from agents.sac import CriticEnsemble, check_decay_steps, cosine_decay
from envs.errors import ReverieError


@dataclass
class IQLConfig:
    hidden: tuple[int, ...] = (256, 256)
    lr: float = 3e-4
    gamma: float = 0.99
    tau: float = 0.005
    expectile: float = 0.7
    beta: float = 3.0          # inverse temperature of the advantage weights
    max_weight: float = 100.0
    # The actor's learning rate decays to 0 by a cosine over this many updates, as the original does over its
    # 1M training updates (set it to train.steps); null keeps it constant.
    actor_decay_steps: int | None = None

    def validate(self) -> "IQLConfig":
        if not 0.5 <= self.expectile < 1.0:
            raise ReverieError(f"agent.expectile: expected a value in [0.5, 1), got {self.expectile}")
        if self.beta <= 0:
            raise ReverieError(f"agent.beta: expected a value > 0, got {self.beta}")
        check_decay_steps(self.actor_decay_steps)
        return self


class GaussianPolicy(nn.Module):
    """``N(tanh(mu(s)), sigma)`` with a learned, state-independent sigma; acts with its mean."""

    def __init__(self, obs_dim: int, act_dim: int, hidden: tuple[int, ...]):
        super().__init__()
        self.net = mlp(obs_dim, act_dim, hidden)
        self.log_std = nn.Parameter(torch.zeros(act_dim))

    def forward(self, obs: Tensor) -> Tensor:
        return torch.tanh(self.net(obs))

    def log_prob(self, obs: Tensor, act: Tensor) -> Tensor:
        mean, log_std = self(obs), self.log_std.clamp(-5.0, 2.0)
        return (-0.5 * ((act - mean) / log_std.exp()).pow(2) - log_std - 0.5 * math.log(2 * math.pi)).sum(-1)


class IQL:
    uses_model = False

    def __init__(self, obs_dim: int, act_dim: int, cfg: IQLConfig | None = None, model=None,
                 reward_scale: float = 1.0, device: str | torch.device = "cpu"):
        self.cfg = cfg = (cfg or IQLConfig()).validate()
        self.reward_scale = float(reward_scale)
        self.actor = GaussianPolicy(obs_dim, act_dim, cfg.hidden).to(device)
        self.critic = CriticEnsemble(obs_dim, act_dim, 2, cfg.hidden).to(device)
        self.critic_target = copy.deepcopy(self.critic).requires_grad_(False)
        self.value = mlp(obs_dim, 1, cfg.hidden).to(device)
        self.actor_opt = FusedAdam(self.actor.parameters(), lr=cfg.lr)
        self.critic_opt = FusedAdam(self.critic.parameters(), lr=cfg.lr)
        self.value_opt = FusedAdam(self.value.parameters(), lr=cfg.lr)
        self.actor_schedule = cosine_decay(self.actor_opt, cfg.actor_decay_steps)

    @torch.no_grad()
    def act(self, obs: Tensor, deterministic: bool = True, generator: torch.Generator | None = None) -> Tensor:
        return self.actor(obs)

    def penalize(self, transitions: dict[str, Tensor]) -> dict[str, float]:
        return {}

    def update(self, batch: dict[str, Tensor], generator: torch.Generator | None = None) -> dict[str, float]:
        cfg = self.cfg
        obs, act, next_obs = batch["obs"], batch["actions"], batch["next_obs"]
        rew, dones = batch["rewards"] * self.reward_scale, batch["terminated"].float()

        # value: an upper expectile of the target critics over the data's actions
        with torch.no_grad():
            q_target = self.critic_target(obs, act).min(dim=0).values
        v = self.value(obs).squeeze(-1)
        diff = q_target - v
        weight = torch.where(diff > 0, cfg.expectile, 1.0 - cfg.expectile)
        value_loss = (weight * diff.pow(2)).mean()
        self.value_opt.zero_grad(set_to_none=True)
        backprop(value_loss)
        self.value_opt.step()

        # critics: regress on r + gamma * V(s'), no action outside the data
        with torch.no_grad():
            target = rew + cfg.gamma * (1.0 - dones) * self.value(next_obs).squeeze(-1)
        q = self.critic(obs, act)
        critic_loss = F.mse_loss(q, target.expand_as(q))
        self.critic_opt.zero_grad(set_to_none=True)
        backprop(critic_loss)
        self.critic_opt.step()

        # actor: advantage-weighted regression on the data's actions
        adv = diff.detach()
        awr = torch.exp(cfg.beta * adv).clamp(max=cfg.max_weight)
        actor_loss = -(awr * self.actor.log_prob(obs, act)).mean()
        self.actor_opt.zero_grad(set_to_none=True)
        backprop(actor_loss)
        self.actor_opt.step()
        if self.actor_schedule is not None:
            self.actor_schedule.step()

        with torch.no_grad():
            for p, tp in zip(self.critic.parameters(), self.critic_target.parameters()):
                tp.lerp_(p, cfg.tau)
        return {"value_loss": value_loss.item(), "critic_loss": critic_loss.item(), "actor_loss": actor_loss.item(),
                "q_mean": q.mean().item(), "advantage_mean": adv.mean().item()}

    def state_dict(self) -> dict:
        return {"actor": self.actor.state_dict(), "critic": self.critic.state_dict(),
                "critic_target": self.critic_target.state_dict(), "value": self.value.state_dict(),
                "actor_opt": self.actor_opt.state_dict(), "critic_opt": self.critic_opt.state_dict(),
                "value_opt": self.value_opt.state_dict(), "reward_scale": self.reward_scale,
                "actor_schedule": self.actor_schedule.state_dict() if self.actor_schedule is not None else None}

    def load_state_dict(self, state: dict) -> None:
        for name in ("actor", "critic", "critic_target", "value", "actor_opt", "critic_opt", "value_opt"):
            getattr(self, name).load_state_dict(state[name])
        self.reward_scale = float(state["reward_scale"])
        if self.actor_schedule is not None and state.get("actor_schedule") is not None:
            self.actor_schedule.load_state_dict(state["actor_schedule"])
