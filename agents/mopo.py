"""MOPO (Yu et al., 2020): SAC on imagined transitions whose reward is lowered by the model's uncertainty.

    r~(s, a) = r^(s, a) - lambda * u(s, a)

with ``u`` either the aleatoric score -- the largest, over ensemble members, of
the norm of a member's predicted standard deviation (the paper's choice) -- or
the ensemble disagreement: the largest distance of a member's predicted mean
from the ensemble's mean. ``u`` is computed while imagining, from the members
the model returns with each step (``judge``), and applied once, when imagined
transitions are stored (``penalize``); the SAC update itself is unchanged, and
real transitions are never penalised.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from agents.sac import SAC, SACConfig
from envs.errors import ReverieError

PENALTIES = ("aleatoric", "disagreement")


@dataclass
class MOPOConfig(SACConfig):
    penalty: str = "aleatoric"
    penalty_coef: float = 1.0

    def validate(self) -> "MOPOConfig":
        if self.penalty not in PENALTIES:
            raise ReverieError(f"agent.penalty: expected one of {', '.join(PENALTIES)}, got '{self.penalty}'")
        if self.penalty_coef < 0:
            raise ReverieError(f"agent.penalty_coef: expected a value >= 0, got {self.penalty_coef}")
        return super().validate()


def uncertainty(mean: Tensor, std: Tensor, kind: str) -> Tensor:
    """``u(s, a)`` ``[B]`` from every member's prediction of ``[next_obs, reward]``, ``[E, B, obs_dim + 1]``."""
    if kind == "aleatoric":
        return std.norm(dim=-1).max(dim=0).values
    return (mean - mean.mean(dim=0)).norm(dim=-1).max(dim=0).values


class MOPO(SAC):
    uses_model = True

    def __init__(self, obs_dim: int, act_dim: int, cfg: MOPOConfig | None = None, model=None, device="cpu"):
        cfg = (cfg or MOPOConfig()).validate()
        if cfg.penalty == "aleatoric" and model is not None and not getattr(model, "has_aleatoric", True):
            raise ReverieError(f"agent.penalty: this world model ({type(model).__name__}) predicts no aleatoric "
                               "std; use agent.penalty=disagreement")
        super().__init__(obs_dim, act_dim, cfg, model, device)

    def judge(self, out) -> Tensor:
        """Called by the rollout engine on each model step: ``u`` from the members the model returned."""
        return uncertainty(*out.members, self.cfg.penalty)

    @torch.no_grad()
    def penalize(self, transitions: dict[str, Tensor]) -> dict[str, float]:
        """Lower the imagined rewards in place; report the penalty's size. ``u`` comes from the
        rollout (``judged``) or, for transitions imagined elsewhere, from a fresh prediction."""
        u = transitions.pop("judged", None)
        if u is None:
            u = uncertainty(*self.model.predict(transitions["obs"], transitions["actions"]), self.cfg.penalty)
        raw = transitions["rewards"]
        transitions["rewards"] = raw - self.cfg.penalty_coef * u
        return {"penalty_mean": u.mean().item(), "penalty_max": u.max().item(),
                "raw_reward_mean": raw.mean().item()}
