"""RAVL (Sims, Lu and Teh, 2024): value pessimism from a large Q-ensemble, no dynamics penalty.

Truncated model rollouts leave "edge-of-reach" states whose values are only
ever bootstrapped, never corrected. RAVL detects them the way EDAC detects
out-of-distribution actions: the target takes the minimum over N critics
(N = 10 here, one batched operation) and an EDAC diversity term keeps the
critics' action-gradients apart, so that the ensemble disagrees where data
does not reach. Imagined rewards are used as the model predicts them.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from agents.networks import backprop, full_precision
from agents.sac import SAC, SACConfig
from envs.errors import ReverieError


@dataclass
class RAVLConfig(SACConfig):
    critics: int = 10
    eta: float = 1.0     # weight of the EDAC gradient-diversity term

    def validate(self) -> "RAVLConfig":
        if self.critics < 2:
            raise ReverieError(f"agent.critics: expected at least 2 critics, got {self.critics}")
        if self.eta < 0:
            raise ReverieError(f"agent.eta: expected a value >= 0, got {self.eta}")
        return super().validate()


class RAVL(SAC):
    uses_model = True

    def __init__(self, obs_dim: int, act_dim: int, cfg: RAVLConfig | None = None, model=None, device="cpu"):
        super().__init__(obs_dim, act_dim, (cfg or RAVLConfig()).validate(), model, device)
        self.edac_init()

    @torch.no_grad()
    def edac_init(self) -> None:
        """EDAC's initialisation, which the authors' agent (CORL's EDAC) keeps: hidden biases 0.1, the
        critics' output layer uniform in +-3e-3 and the actor's in +-1e-3, so that every critic starts near
        Q = 0 and the policy near the centre of the action box, with a wide spread."""
        critic = self.critic.net.layers
        for layer in critic[:-1]:
            layer.bias.fill_(0.1)
        critic[-1].weight.uniform_(-3e-3, 3e-3)
        critic[-1].bias.uniform_(-3e-3, 3e-3)
        actor = [m for m in self.actor.net if isinstance(m, nn.Linear)]
        for layer in actor[:-1]:
            layer.bias.fill_(0.1)
        actor[-1].weight.uniform_(-1e-3, 1e-3)
        actor[-1].bias.uniform_(-1e-3, 1e-3)
        self.critic_target.load_state_dict(self.critic.state_dict())

    def q_and_diversity(self, obs: Tensor, act: Tensor) -> tuple[Tensor, Tensor]:
        """Every critic's Q ``[N, B]`` and EDAC's term, the mean pairwise cosine similarity of the
        critics' gradients with respect to the action, from one forward pass."""
        N = self.cfg.critics
        act_n = act.unsqueeze(0).expand(N, -1, -1).clone().requires_grad_(self.cfg.eta > 0)
        q = self.critic(obs.unsqueeze(0).expand(N, -1, -1), act_n)      # member i sees its own copy of a
        if self.cfg.eta == 0:
            return q, torch.zeros((), device=q.device)
        with full_precision(q):                                           # a backward pass: see backprop
            grad = torch.autograd.grad(q.sum(), act_n, create_graph=True)[0]  # [N, B, A]
        grad = F.normalize(grad, dim=-1).transpose(0, 1)                  # [B, N, A]
        cos = grad @ grad.transpose(1, 2)                                 # [B, N, N]
        off_diagonal = cos.sum(dim=(1, 2)) - cos.diagonal(dim1=1, dim2=2).sum(-1)
        return q, off_diagonal.mean() / (N - 1)

    def update(self, batch: dict[str, Tensor], generator: torch.Generator | None = None) -> dict[str, float]:
        obs, act, rew = batch["obs"], batch["actions"], batch["rewards"]
        next_obs, dones = batch["next_obs"], batch["terminated"].float()

        # critics: the target is the minimum over all N target critics
        with torch.no_grad():
            next_act, next_logp = self.actor(next_obs, generator=generator)
            q_next = self.critic_target(next_obs, next_act).min(dim=0).values - self.alpha * next_logp
            target = rew + self.cfg.gamma * (1.0 - dones) * q_next
        q, diversity = self.q_and_diversity(obs, act)
        td_loss = (q - target).pow(2).mean(dim=1).sum()        # summed over critics, as EDAC
        critic_loss = td_loss + self.cfg.eta * diversity
        self.critic_opt.zero_grad(set_to_none=True)
        backprop(critic_loss)
        self.critic_opt.step()

        # actor and temperature: as SAC (agents/sac.py)
        actor = self.actor_step(obs, generator)

        self.soft_update()
        return {"critic_loss": critic_loss.item(), "q_mean": q.mean().item(), "q_std": q.std(dim=0).mean().item(),
                "diversity": diversity.item(), **actor}
