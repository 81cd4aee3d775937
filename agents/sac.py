"""SAC with a vectorised critic ensemble: the core that MOPO, MOBILE, RAVL and NEUBAY build on.

The N critics are one ``EnsembleMLP`` (one batched matmul per layer). The
target takes the minimum over the ensemble (N=2 is SAC's clipped double Q;
RAVL and REDQ use more). The update reads top to bottom; a learner that needs
a penalised reward passes it in ``batch["rewards"]`` -- the penalty is the
learner's business, not the critic's.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from agents.networks import EnsembleMLP, FusedAdam, backprop, frozen, mlp
from envs.errors import ReverieError


@dataclass
class SACConfig:
    hidden: tuple[int, ...] = (256, 256)
    critics: int = 2
    actor_lr: float = 1e-4
    critic_lr: float = 3e-4
    alpha_lr: float = 1e-4
    gamma: float = 0.99
    tau: float = 0.005
    init_alpha: float = 1.0
    auto_alpha: bool = True
    target_entropy: float | None = None   # None: -act_dim
    max_alpha: float | None = None        # the temperature in use is capped here (MOBILE's authors: 1.0); None: no cap
    # The actor's learning rate decays to 0 by a cosine over this many updates (MOBILE's authors do, over their
    # whole run: configs/agent/mobile.yaml sets it to train.steps); None keeps it constant.
    actor_decay_steps: int | None = None

    def validate(self):
        check_decay_steps(self.actor_decay_steps)
        if self.max_alpha is not None and self.max_alpha <= 0:
            raise ReverieError(f"agent.max_alpha: expected a temperature > 0 or null, got {self.max_alpha}")
        return self


def check_decay_steps(steps: int | None) -> None:
    if steps is not None and steps < 1:
        raise ReverieError(f"agent.actor_decay_steps: expected a whole number of updates >= 1 or null, got {steps}")


def cosine_decay(optimizer: torch.optim.Optimizer, steps: int | None):
    """A cosine decay of ``optimizer``'s learning rate to 0 over ``steps`` updates (stepped once per update,
    saved with the learner), or None for a constant rate."""
    return torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=steps) if steps else None


class GaussianActor(nn.Module):
    """A tanh-squashed Gaussian policy."""

    def __init__(self, obs_dim: int, act_dim: int, hidden: tuple[int, ...] = (256, 256)):
        super().__init__()
        self.obs_dim, self.act_dim = obs_dim, act_dim
        self.net = mlp(obs_dim, 2 * act_dim, hidden)

    def forward(self, obs: Tensor, *, deterministic: bool = False,
                generator: torch.Generator | None = None) -> tuple[Tensor, Tensor]:
        """Action in [-1, 1] and its log-probability ``[B]``."""
        mean, log_std = self.net(obs).chunk(2, dim=-1)
        log_std = log_std.clamp(-5.0, 2.0)
        if deterministic:
            return torch.tanh(mean), torch.zeros(obs.shape[0], device=obs.device)
        noise = torch.randn(mean.shape, generator=generator, device=mean.device)
        pre = mean + log_std.exp() * noise
        log_prob = (-0.5 * noise.pow(2) - log_std - 0.5 * math.log(2 * math.pi)).sum(-1)
        # tanh correction, in the numerically stable form
        log_prob = log_prob - (2 * (math.log(2) - pre - F.softplus(-2 * pre))).sum(-1)
        return torch.tanh(pre), log_prob


class CriticEnsemble(nn.Module):
    """N Q-functions in one batched op: ``q(obs, act) -> [N, B]``."""

    def __init__(self, obs_dim: int, act_dim: int, n: int = 2, hidden: tuple[int, ...] = (256, 256)):
        super().__init__()
        self.n = n
        self.net = EnsembleMLP(n, obs_dim + act_dim, 1, hidden)

    def forward(self, obs: Tensor, act: Tensor) -> Tensor:
        return self.net(torch.cat([obs, act], dim=-1)).squeeze(-1)


class SAC:
    """Soft actor-critic; the model-based learners (MOPO, MOBILE, RAVL) extend it.

    ``uses_model`` says whether the trainer must fit and roll out a world model;
    ``penalize`` is the hook a learner uses to change imagined rewards when they
    are stored (MOPO); plain SAC leaves them as the model predicted."""

    uses_model = False

    def __init__(self, obs_dim: int, act_dim: int, cfg: SACConfig | None = None, model=None,
                 device: str | torch.device = "cpu"):
        self.cfg = cfg = (cfg or SACConfig()).validate()
        self.model = model
        self.actor = GaussianActor(obs_dim, act_dim, cfg.hidden).to(device)
        self.critic = CriticEnsemble(obs_dim, act_dim, cfg.critics, cfg.hidden).to(device)
        self.critic_target = copy.deepcopy(self.critic).requires_grad_(False)
        self.log_alpha = torch.tensor(math.log(cfg.init_alpha), device=device, requires_grad=cfg.auto_alpha)
        self.target_entropy = cfg.target_entropy if cfg.target_entropy is not None else -float(act_dim)
        self.actor_opt = FusedAdam(self.actor.parameters(), lr=cfg.actor_lr)
        self.critic_opt = FusedAdam(self.critic.parameters(), lr=cfg.critic_lr)
        self.alpha_opt = FusedAdam([self.log_alpha], lr=cfg.alpha_lr)
        self.actor_schedule = cosine_decay(self.actor_opt, cfg.actor_decay_steps)

    @torch.no_grad()
    def act(self, obs: Tensor, deterministic: bool = True, generator: torch.Generator | None = None) -> Tensor:
        return self.actor(obs, deterministic=deterministic, generator=generator)[0]

    def penalize(self, transitions: dict[str, Tensor]) -> dict[str, float]:
        return {}

    @property
    def alpha(self) -> Tensor:
        """The temperature in use: ``exp(log_alpha)``, capped at ``max_alpha`` where one is set (the learned
        ``log_alpha`` itself is not clipped, as in MOBILE's authors' code)."""
        alpha = self.log_alpha.exp().detach()
        return alpha if self.cfg.max_alpha is None else alpha.clamp(max=self.cfg.max_alpha)

    def target_q(self, rewards: Tensor, next_obs: Tensor, dones: Tensor, generator=None) -> Tensor:
        """r + gamma * (1 - done) * (min over critics of Q_target(s', a') - alpha * log pi(a'|s'))."""
        with torch.no_grad():
            next_act, next_logp = self.actor(next_obs, generator=generator)
            q_next = self.critic_target(next_obs, next_act).min(dim=0).values - self.alpha * next_logp
            return rewards + self.cfg.gamma * (1.0 - dones) * q_next

    def update(self, batch: dict[str, Tensor], generator: torch.Generator | None = None) -> dict[str, float]:
        obs, act, rew = batch["obs"], batch["actions"], batch["rewards"]
        next_obs, dones = batch["next_obs"], batch["terminated"].float()

        # critics: every member regresses on the shared target
        target = self.target_q(rew, next_obs, dones, generator)
        q = self.critic(obs, act)
        critic_loss = F.mse_loss(q, target.expand_as(q))
        self.critic_opt.zero_grad(set_to_none=True)
        backprop(critic_loss)
        self.critic_opt.step()

        # actor and temperature
        actor = self.actor_step(obs, generator)

        self.soft_update()
        return {"critic_loss": critic_loss.item(), "q_mean": q.mean().item(), **actor}

    def actor_step(self, obs: Tensor, generator: torch.Generator | None = None) -> dict[str, float]:
        """The actor and temperature step every SAC-based learner shares (after its own critic step)."""
        # actor: maximise the ensemble minimum minus the entropy cost
        new_act, logp = self.actor(obs, generator=generator)
        with frozen(self.critic):
            q_new = self.critic(obs, new_act).min(dim=0).values
        actor_loss = (self.alpha * logp - q_new).mean()
        self.actor_opt.zero_grad(set_to_none=True)
        backprop(actor_loss)
        self.actor_opt.step()
        if self.actor_schedule is not None:
            self.actor_schedule.step()

        # temperature
        if self.cfg.auto_alpha:
            alpha_loss = -(self.log_alpha * (logp.detach() + self.target_entropy)).mean()
            self.alpha_opt.zero_grad(set_to_none=True)
            backprop(alpha_loss)
            self.alpha_opt.step()
        return {"actor_loss": actor_loss.item(), "alpha": self.alpha.item(), "entropy": -logp.mean().item()}

    def soft_update(self) -> None:
        with torch.no_grad():
            for p, tp in zip(self.critic.parameters(), self.critic_target.parameters()):
                tp.lerp_(p, self.cfg.tau)

    def state_dict(self) -> dict:
        return {"actor": self.actor.state_dict(), "critic": self.critic.state_dict(),
                "critic_target": self.critic_target.state_dict(), "log_alpha": self.log_alpha.detach().clone(),
                "actor_opt": self.actor_opt.state_dict(), "critic_opt": self.critic_opt.state_dict(),
                "alpha_opt": self.alpha_opt.state_dict(),
                "actor_schedule": self.actor_schedule.state_dict() if self.actor_schedule is not None else None}

    def load_state_dict(self, state: dict) -> None:
        for name in ("actor", "critic", "critic_target", "actor_opt", "critic_opt", "alpha_opt"):
            getattr(self, name).load_state_dict(state[name])
        with torch.no_grad():
            self.log_alpha.copy_(state["log_alpha"])
        if self.actor_schedule is not None and state.get("actor_schedule") is not None:
            self.actor_schedule.load_state_dict(state["actor_schedule"])
