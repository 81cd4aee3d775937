"""TD3+BC (Fujimoto and Gu, 2021): TD3 with a behaviour-cloning term, a model-free reference.

The actor maximises ``lambda * Q(s, pi(s)) - (pi(s) - a)^2`` with
``lambda = alpha / mean|Q|``; observations are standardised with the dataset's
statistics, which the policy carries so that it acts on raw observations.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from agents.networks import FusedAdam, TanhActor, backprop, frozen
from agents.sac import CriticEnsemble
from envs.errors import ReverieError


@dataclass
class TD3BCConfig:
    hidden: tuple[int, ...] = (256, 256)
    lr: float = 3e-4
    gamma: float = 0.99
    tau: float = 0.005
    policy_noise: float = 0.2
    noise_clip: float = 0.5
    policy_delay: int = 2
    alpha: float = 2.5

    def validate(self) -> "TD3BCConfig":
        if self.alpha <= 0:
            raise ReverieError(f"agent.alpha: expected a value > 0, got {self.alpha}")
        if self.policy_delay < 1:
            raise ReverieError(f"agent.policy_delay: expected a positive integer, got {self.policy_delay}")
        return self


class NormalizedActor(nn.Module):
    def __init__(self, actor: TanhActor, mean: Tensor, std: Tensor):
        super().__init__()
        self.actor = actor
        self.register_buffer("mean", mean.clone())
        self.register_buffer("std", std.clone())

    def forward(self, obs: Tensor) -> Tensor:
        return self.actor((obs - self.mean) / self.std)


class TD3BC:
    uses_model = False

    def __init__(self, obs_dim: int, act_dim: int, cfg: TD3BCConfig | None = None, model=None,
                 obs_stats: tuple[Tensor, Tensor] | None = None, device: str | torch.device = "cpu"):
        self.cfg = cfg = (cfg or TD3BCConfig()).validate()
        mean, std = obs_stats or (torch.zeros(obs_dim), torch.ones(obs_dim))
        self.actor = NormalizedActor(TanhActor(obs_dim, act_dim, cfg.hidden), mean, std).to(device)
        self.actor_target = copy.deepcopy(self.actor).requires_grad_(False)
        self.critic = CriticEnsemble(obs_dim, act_dim, 2, cfg.hidden).to(device)
        self.critic_target = copy.deepcopy(self.critic).requires_grad_(False)
        self.actor_opt = FusedAdam(self.actor.parameters(), lr=cfg.lr)
        self.critic_opt = FusedAdam(self.critic.parameters(), lr=cfg.lr)
        self.updates = 0

    def _norm(self, obs: Tensor) -> Tensor:
        return (obs - self.actor.mean) / self.actor.std

    @torch.no_grad()
    def act(self, obs: Tensor, deterministic: bool = True, generator: torch.Generator | None = None) -> Tensor:
        return self.actor(obs)

    def penalize(self, transitions: dict[str, Tensor]) -> dict[str, float]:
        return {}

    def update(self, batch: dict[str, Tensor], generator: torch.Generator | None = None) -> dict[str, float]:
        cfg = self.cfg
        obs, act, rew = self._norm(batch["obs"]), batch["actions"], batch["rewards"]
        next_obs, dones = self._norm(batch["next_obs"]), batch["terminated"].float()
        self.updates += 1

        # critics: clipped double Q with target-policy smoothing
        with torch.no_grad():
            noise = (torch.randn(act.shape, generator=generator, device=act.device) * cfg.policy_noise).clamp(-cfg.noise_clip,
                                                                                           cfg.noise_clip)
            next_act = (self.actor_target.actor(next_obs) + noise).clamp(-1.0, 1.0)
            target = rew + cfg.gamma * (1.0 - dones) * self.critic_target(next_obs, next_act).min(dim=0).values
        q = self.critic(obs, act)
        critic_loss = F.mse_loss(q, target.expand_as(q))
        self.critic_opt.zero_grad(set_to_none=True)
        backprop(critic_loss)
        self.critic_opt.step()
        metrics = {"critic_loss": critic_loss.item(), "q_mean": q.mean().item()}

        # actor, every policy_delay updates: Q-maximisation held close to the data's actions
        if self.updates % cfg.policy_delay == 0:
            pi = self.actor.actor(obs)
            with frozen(self.critic):
                q_pi = self.critic(obs, pi)[0]
            lam = cfg.alpha / q_pi.abs().mean().detach()
            bc = F.mse_loss(pi, act)
            actor_loss = -lam * q_pi.mean() + bc
            self.actor_opt.zero_grad(set_to_none=True)
            backprop(actor_loss)
            self.actor_opt.step()
            with torch.no_grad():
                for net, target_net in ((self.critic, self.critic_target), (self.actor, self.actor_target)):
                    for p, tp in zip(net.parameters(), target_net.parameters()):
                        tp.lerp_(p, cfg.tau)
            metrics.update(actor_loss=actor_loss.item(), bc_loss=bc.item())
        return metrics

    def state_dict(self) -> dict:
        return {"actor": self.actor.state_dict(), "actor_target": self.actor_target.state_dict(),
                "critic": self.critic.state_dict(), "critic_target": self.critic_target.state_dict(),
                "actor_opt": self.actor_opt.state_dict(), "critic_opt": self.critic_opt.state_dict(),
                "updates": self.updates}

    def load_state_dict(self, state: dict) -> None:
        for name in ("actor", "actor_target", "critic", "critic_target", "actor_opt", "critic_opt"):
            getattr(self, name).load_state_dict(state[name])
        self.updates = int(state["updates"])
